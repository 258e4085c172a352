"""A trained run's checkpoints as its readers take them (attend.py, sample.py, the Attention tab): one looked at
without its weights (`peek`), the one a reader uses (`choose`: the first whole one in the reader's order, named
when another was damaged), and one loaded as a model on the CPU with its tokenizer and task (`load`), kept while its
file stays the same.

Every file goes through trainer/checkpoint.py: weights only, each record's CRC checked; no code in a checkpoint runs.
"""

import threading
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import Tokenizer

from model import TinyLM
from task import Task, task_for
from trainer.checkpoint import (
    BEST,
    LAST,
    CheckpointError,
    damaged_record,
    glance,
    load_checkpoint,
    load_with_model,
    whole_sibling,
)
from trainer.config import TrainConfig, to_typed
from trainer.overrides import switches_label

READ_ORDER = (BEST, LAST)  # attend.py and the tab: the lowest validation loss, else the latest; sample.py: (LAST, BEST)
GONE = "no longer there"  # a file removed between its listing and its reading
MODELS_KEPT = 32  # loaded models kept at once, the least recently read dropped first: a default model is 1 MB


@dataclass
class Checkpoint:
    """A checkpoint ready to read: its model on the CPU, in eval mode, the tokenizer it reads with and the task it
    was trained on. Threads that share it (the tab's requests) hold `lock` around every forward."""

    model: TinyLM
    task: Task
    step: int
    switches: str  # the lesson's switches as the run set them: "model.scale=True model.causal=True model.d_k=128"
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def tokenizer(self) -> Tokenizer:
        return self.task.tokenizer


@dataclass(frozen=True)
class Peek:
    """A checkpoint file seen without loading its weights: its step, or why it cannot be read."""

    step: int | None
    problem: str = ""  # "damaged (data/3 does not match its checksum)": the reason, without the file's name


@dataclass(frozen=True)
class Choice:
    """The checkpoint a reader of a run directory uses: `path` None with no `problem` when the run has none yet."""

    path: Path | None
    step: int | None
    note: str = ""  # "R/best.pt: damaged (...); reading R/last.pt (step 500)": another one was passed over
    problem: str = ""  # none is whole: each one's name and reason


_looks: dict[tuple, Peek] = {}
_loaded: OrderedDict[tuple, Checkpoint] = OrderedDict()
_lock = threading.Lock()  # TensorBoard answers requests in threads


def file_key(path: Path) -> tuple:
    """What says a file is the same as before: its place, size and time (a checkpoint is replaced, never edited)."""
    stat = path.stat()
    return path.resolve(), stat.st_size, stat.st_mtime_ns


def peek(path: Path) -> Peek:
    """`path`'s step through trainer/checkpoint.py's glance, once its zip records are checked (bytes read, not one
    tensor built); remembered while the file stays the same. A file that fails gets load_checkpoint's reason; one
    gone since it was listed (a run that trains thins its kept checkpoints) has no step."""
    try:
        key = file_key(path)
    except FileNotFoundError:
        return Peek(None, GONE)
    with _lock:
        if key in _looks:
            return _looks[key]
    seen = glance(path) if zipfile.is_zipfile(path) and not damaged_record(path) else None
    found = Peek(seen["step"]) if seen else Peek(None, unreadable(path))
    with _lock:
        for stale in [known for known in _looks if known[0] == key[0]]:
            del _looks[stale]
        _looks[key] = found
    return found


def unreadable(path: Path) -> str:
    """Why load_checkpoint refuses `path`, without the file's name nor its sibling (a reader names those itself)."""
    try:
        load_checkpoint(path)
    except CheckpointError as error:
        return str(error).removeprefix(f"{path}: ").removesuffix(f"; {whole_sibling(path)}")
    return "not a tinylm checkpoint (its step cannot be read)"


def choose(run_dir: Path, order: tuple[str, ...] = READ_ORDER, named: Callable[[Path], str] = str) -> Choice:
    """The first whole checkpoint of `run_dir` in `order`; `named` says a file as the reader shows it (the tab:
    relative to the run). One passed over, damaged or not a file (a directory), is named in the note with why; when
    none is whole, in the problem."""
    present = [run_dir / name for name in order if (run_dir / name).exists()]
    passed = []
    for path in present:
        seen = peek(path)
        if seen.step is not None:
            note = "; ".join(f"{named(bad)}: {reason}" for bad, reason in passed)
            return Choice(path, seen.step, f"{note}; reading {named(path)} (step {seen.step})" if note else "")
        passed.append((path, seen.problem))
    return Choice(None, None, problem="; ".join(f"{named(bad)}: {reason}" for bad, reason in passed))


def named_checkpoint(name: str, setting: str, order: tuple[str, ...] = READ_ORDER) -> Choice:
    """The checkpoint a setting names (sample.py's ckpt=): a file as it is, a run directory's first whole one in
    `order`; a CheckpointError naming the setting where there is none to read."""
    path = Path(name).expanduser()
    if path.is_dir():
        choice = choose(path, order)
        if choice.path is None:
            names = " or ".join(order)
            raise CheckpointError(f"{setting}={name}: {choice.problem or f'no checkpoint ({names}) in it'}")
        return choice
    if not path.exists():
        raise CheckpointError(f"{setting}={name}: no such run directory or checkpoint file")
    return Choice(path, None)


def load(path: Path) -> Checkpoint:
    """The checkpoint at `path` as a model on the CPU, kept while the file stays the same (same size and time)."""
    key = file_key(path)
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
    checkpoint = ready(*load_with_model(path))  # outside the lock: another run's request need not wait for this one
    with _lock:
        for stale in [known for known in _loaded if known[0] == key[0]]:
            del _loaded[stale]  # the run wrote a newer checkpoint since
        _loaded[key] = checkpoint
        while len(_loaded) > MODELS_KEPT:
            _loaded.popitem(last=False)
    return checkpoint


def ready(state: dict, model: TinyLM) -> Checkpoint:
    """A loaded checkpoint's state and model, ready to read: the model in eval mode, its task with its tokenizer."""
    config = to_typed(TrainConfig, state["config"])
    task = task_for(config, Tokenizer.from_str(state["tokenizer"]))
    return Checkpoint(model.eval(), task, state["step"], switches_label(state["config"]))
