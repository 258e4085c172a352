"""A training task: what a model is trained to predict, said in one place. Each task is a subclass of Task, registered
by its name (configs/task/NAME.yaml sets task.name): it makes the batches, with the labels it scores and IGNORE where it
scores nothing, and the mask the attention reads them through (which keys each query may not see); says whether the
model's input shows it its targets (the leak) and which curve a model that sees them cannot fake; lists the extra
curves evaluation loops over; gives the viewer a text's targets; and says whether it can continue a text."""

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from data.batches import draw_windows
from data.errors import DataError
from data.sources import DataConfig
from data.tokenizer import encode_known
from model.mask import CAUSAL, Mask
from task.config import TaskConfig

if TYPE_CHECKING:
    from model import ModelConfig, TinyLM

IGNORE = -1  # the label of a position the task does not score (nanoGPT's ignore_index)


class RunSettings(Protocol):
    """What a task reads of a run's settings (trainer/config.py's TrainConfig, which gathers the tasks' own)."""

    task: TaskConfig
    model: "ModelConfig"


class Batch(NamedTuple):
    inputs: Tensor  # (B, T) token ids the model reads
    labels: Tensor  # (B, T) the token each position is scored on; IGNORE where it is not scored


@dataclass
class Evaluation:
    """What an extra curve reads at an evaluation: the model, the validation batches the val loss was measured on and
    that loss, the run's text and how many windows an evaluation reads, and where to draw windows of its own."""

    task: "Task"
    model: "TinyLM"
    batches: list[Batch]
    val: float
    data: DataConfig
    batch_size: int
    eval_iters: int
    val_tokens: np.ndarray
    val_offset: int  # where the val split starts in the text, in tokens
    seed: int
    device: torch.device


@dataclass(frozen=True)
class Curve:
    """An extra curve a task logs at every evaluation, val/loss_NAME for its entry "val_NAME" in Task.curves."""

    measure: Callable[[Evaluation], float | None]  # its value at an evaluation; None: not a curve of this run
    meaning: str  # what it measures, in a few words, for the log line and the charts


@dataclass(frozen=True)
class StripKind:
    """A loss strip of a text, as the viewer shows it: each position's loss on its target, named, with the curve its
    mean estimates (the same terms, over one text instead of the validation windows)."""

    name: str  # "as trained", "mask put back"
    tag: str  # val/loss, val/loss_causal
    causal: bool | None  # whether the forward applies the task's mask: None as trained, True the true mask put back


class Task:
    """The seam. A subclass sets `name`, `honest` and `continues_text`, and fills in the methods below."""

    name: ClassVar[str]
    honest: ClassVar[str]  # the curve a model that sees its targets cannot fake: trainer.objective=honest returns it
    continues_text: ClassVar[bool]  # whether it writes a text left to right (sample.py, the tab's Continue)
    curves: ClassVar[dict[str, Curve]] = {}  # the extra curves, "val_causal" -> val/loss_causal in TensorBoard
    keys: ClassVar[tuple[str, ...]] = ()  # the task.* keys it reads besides its name; the others stay unset
    drawn: ClassVar[dict[str, str]] = {}  # the special tokens it adds, each drawn by this label among a text's tokens

    def __init__(self, config: RunSettings, tokenizer: Tokenizer):
        self.settings, self.block_size = config.task, config.model.block_size  # the run's task.* settings
        self.tokenizer = self.reads_with(tokenizer)

    @classmethod
    def problems(cls, config: RunSettings) -> list[str]:
        """The settings this task cannot train with, one line each naming the setting: here, those of other tasks."""
        unread = [setting.name for setting in fields(config.task) if setting.name not in ("name", *cls.keys)]
        return [
            f"task.{key}={getattr(config.task, key)}: applies to {readers(key)}, not to task={cls.name}"
            for key in unread
            if getattr(config.task, key) is not None
        ]

    @property
    def mask(self) -> Mask:
        """Which keys each query may not see, given to the model beside every batch (model/mask.py): the causal
        triangle here. The model applies it where model.causal is true (the default); model.causal=false hides no
        key, whatever the task's mask (the leak, or an encoder reading both sides)."""
        return CAUSAL

    @property
    def blank(self) -> int | None:
        """The token that hides a token from the model, for a task that hides some; None for the others."""
        return None

    def reads_with(self, tokenizer: Tokenizer) -> Tokenizer:
        """The tokenizer the model reads: the text's own, or with tokens of the task's added."""
        return tokenizer

    def span(self, block_size: int) -> int:
        """How many tokens of the text a window of block_size inputs spans."""
        raise NotImplementedError

    def batch(self, windows: Tensor, generator: torch.Generator) -> Batch:
        """Inputs and labels of (B, span) windows of the text; draws what it draws from `generator`."""
        raise NotImplementedError

    def draw(self, tokens: np.ndarray, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        """A batch of windows of `tokens` at places drawn from `generator`: training's and evaluation's."""
        span = self.span(self.block_size)
        return self.batch(draw_windows(tokens, batch_size, span, generator, device), generator)

    def sees_targets(self, config: "ModelConfig") -> bool:
        """Whether the model's input shows it the tokens it is scored on: the leak."""
        raise NotImplementedError

    def encode(self, text: str, setting: str) -> list[int]:
        """The token ids of a text a person gave (`setting` names it in a refusal)."""
        return encode_known(self.tokenizer, text, setting)

    def target_key(self, query: int) -> int:
        """Where the token query `query` is scored on sits in the input, were it visible there."""
        raise NotImplementedError

    def hide(self, ids: list[int], positions: list[int], setting: str) -> tuple[list[int], dict[int, int]]:
        """The text's ids with the tokens at `positions` hidden from the model, and each one hidden by position (a
        person clicked them: the viewer then scores the model on them); a task that hides nothing refuses."""
        if positions:
            raise DataError(f"{setting}: this run hides no token (task={self.name}); task=fill_blank runs do")
        return ids, {}

    @property
    def targets_ahead(self) -> bool:
        """Whether a position's target lies after it in the text, so that weight on the future is where a leak reads
        (the pictures hatch the future then)."""
        return self.target_key(0) > 0

    def targets(self, ids: list[int], following: int | None, hidden: dict[int, int]) -> list[int | None]:
        """What each position of a text's token ids is asked to predict, where the text says (None: unknown or
        nothing); `following` is the text's token after `ids` where it was cut, `hidden` the tokens hide() hid."""
        raise NotImplementedError

    def strips(self, config: "ModelConfig") -> list[StripKind]:
        """The loss strips the viewer shows of a text, for a model with these settings."""
        raise NotImplementedError

    def query_inputs(self, ids: list[int], queries: list[int]) -> Tensor:
        """(len(queries), T): the input each query's prediction is read from (for a strip and for counterfactuals);
        (1, T) where one input serves every query."""
        raise NotImplementedError

    def strip_targets(self, ids: list[int], targets: list[int | None]) -> list[int | None]:
        """What a strip scores at each position; None where nothing (or nothing known)."""
        return targets

    def guess(self, ids: list[int], query: int) -> bool:
        """Whether a query with no known target is still asked about (its likeliest token stands in)."""
        return False

    def nothing_to_score(self, labels: list[str]) -> str:
        """Why a text has no position to score, in one line."""
        raise NotImplementedError


TASKS: dict[str, type[Task]] = {}


def readers(setting: str) -> str:
    """The tasks that read a task.* setting, as a message names them."""
    return " and ".join(f"task={name}" for name, task in sorted(TASKS.items()) if setting in task.keys) or "no task"


def register(task: type[Task]) -> type[Task]:
    """A class decorator: the task becomes task.name=NAME."""
    TASKS[task.name] = task
    return task
