"""Fill in the blank, an encoder's task (BERT's masked language model, Devlin et al. 2019, section 3.1): a share of
each window's tokens is replaced by a blank, a token of its own that no text contains, and the model is scored on
each hidden token alone. Without the causal mask it reads both sides of the gap, and that is no leak: the token it
must predict is not in its input. task.hide=false leaves the scored tokens in the input: that is the leak again,
and val/loss_hidden, the same positions blanked, is what such a model really knows.

Every blanked position is scored and it is always the blank that hides it: no BERT 80/10/10, whose tokens left as
themselves would put a scored token in the input (and tinylm never fine-tunes, the mismatch 80/10/10 eases)."""

import re
from typing import TYPE_CHECKING

import torch
from tokenizers import AddedToken, Tokenizer
from torch import Tensor

from data.errors import DataError
from data.tokenizer import encode_known
from task.base import IGNORE, Batch, Curve, Evaluation, RunSettings, StripKind, Task, register
from task.curves import MASK_PUT_BACK, batches_loss

if TYPE_CHECKING:
    from model import ModelConfig

BLANK = "[BLANK]"  # the blank's token: special, so decoding leaves it out, and never encoded from a person's text
MARKER = "_"  # where a person's text has a blank; "\_" is the character itself
ESCAPED = "\\" + MARKER
MARKS = re.compile(f"({re.escape(ESCAPED)}|{re.escape(MARKER)})")  # split keeps each escape and marker
BLANK_LABEL = "□"  # how the blank is drawn among a text's tokens
ONE_BLANK_SEED = 4  # val/loss_one_blank draws its positions from the evaluation's seed + 4
ONE_BLANK = StripKind("each blanked alone", "val/loss_one_blank", None)


def blank_count(share: float, block_size: int) -> int:
    """Tokens blanked in each window: the share, rounded, and at least one (an empty target set has no mean)."""
    return max(1, round(share * block_size))


def hidden_loss(evaluation: Evaluation) -> float:
    """val/loss_hidden: the val loss with every scored token hidden behind the blank, which a model that copies its
    input cannot fake; val/loss itself where the task hides them already."""
    task = evaluation.task
    if task.settings.hide:
        return evaluation.val
    hidden = [Batch(x.masked_fill(y != IGNORE, task.blank), y) for x, y in evaluation.batches]
    return batches_loss(evaluation.model, hidden, task.mask)


def one_blank_loss(evaluation: Evaluation) -> float:
    """val/loss_one_blank: one position of each val window, drawn afresh from a fixed seed (the same at every
    evaluation), blanked alone and scored: an unbiased estimate of the mean of the loss of each token blanked alone,
    the Attention tab's strip, whose mean is a pseudo-log-likelihood's (Salazar et al. 2020)."""
    task, generator = evaluation.task, torch.Generator().manual_seed(evaluation.seed + ONE_BLANK_SEED)
    batches = []
    for x, y in evaluation.batches:
        window = torch.where(y != IGNORE, y, x)  # the text as it was, every blank filled back in
        where = torch.randint(window.size(1), (window.size(0),), generator=generator).to(window.device)
        batches.append(task.blanked_alone(window, where))
    return batches_loss(evaluation.model, batches, task.mask)


@register
class FillBlank(Task):
    name = "fill_blank"
    honest = "val_hidden"
    continues_text = False
    keys = ("blank_share", "hide")
    drawn = {BLANK: BLANK_LABEL}
    curves = {
        "val_hidden": Curve(hidden_loss, "every scored token hidden behind the blank"),
        "val_causal": MASK_PUT_BACK,
        "val_one_blank": Curve(one_blank_loss, "one token of each window blanked alone"),
    }

    @classmethod
    def problems(cls, config: RunSettings) -> list[str]:
        problems = super().problems(config)
        share, block_size = config.task.blank_share, config.model.block_size
        if share is None or not 0 < share < 1:
            problems.append(f"task.blank_share={share}: must be above 0 and below 1, the share of tokens hidden")
        elif block_size > 0 and blank_count(share, block_size) >= block_size:
            problems.append(
                f"task.blank_share={share}: hides all {block_size} tokens of a window (model.block_size): nothing "
                "is left to read"
            )
        if config.task.hide is None:
            problems.append("task.hide=None: must be true (the blank hides each scored token) or false (the leak)")
        return problems

    def reads_with(self, tokenizer: Tokenizer) -> Tokenizer:
        reading = Tokenizer.from_str(tokenizer.to_str())  # the cached tokenizer stays the text's own
        reading.add_special_tokens([AddedToken(BLANK, special=True)])  # none if a checkpoint's has it already
        reading.encode_special_tokens = True  # a person's text is read as it is: typing a token's name gives no token
        return reading

    @property
    def blank(self) -> int:
        return self.tokenizer.token_to_id(BLANK)

    def span(self, block_size: int) -> int:
        return block_size

    def batch(self, windows: Tensor, generator: torch.Generator) -> Batch:
        count = blank_count(self.settings.blank_share, windows.size(1))
        order = torch.rand(windows.shape, generator=generator).argsort(dim=1)  # drawn afresh at every call
        chosen = torch.zeros(windows.shape, dtype=torch.bool).scatter(1, order[:, :count], True).to(windows.device)
        inputs = windows.masked_fill(chosen, self.blank) if self.settings.hide else windows
        return Batch(inputs, windows.masked_fill(~chosen, IGNORE))

    def blanked_alone(self, windows: Tensor, where: Tensor) -> Batch:
        """Each window with the token at `where` (one position a window) blanked and scored alone."""
        chosen = torch.zeros_like(windows, dtype=torch.bool).scatter(1, where[:, None], True)
        return Batch(windows.masked_fill(chosen, self.blank), windows.masked_fill(~chosen, IGNORE))

    def sees_targets(self, config: "ModelConfig") -> bool:
        return not self.settings.hide

    def encode(self, text: str, setting: str) -> list[int]:
        """The text's tokens with the blank where it holds MARKER ("\\_" is the character itself). The text is cut at
        each escape and each marker, so that no character a person can type stands in for either."""
        ids, piece = [], ""
        for part in MARKS.split(text):
            if part == MARKER:
                if piece:
                    ids += encode_known(self.tokenizer, piece, setting)
                ids.append(self.blank)
                piece = ""
            else:
                piece += MARKER if part == ESCAPED else part
        if piece:
            ids += encode_known(self.tokenizer, piece, setting)
        if not ids:
            raise DataError(f"{setting}: empty; give the text whose attention to show")
        return ids

    def hide(self, ids: list[int], positions: list[int], setting: str) -> tuple[list[int], dict[int, int]]:
        outside = [i for i in positions if not 0 <= i < len(ids)]
        if outside:
            raise DataError(f"{setting}: position {outside[0]} is outside the text's {len(ids)} tokens")
        hidden = {i: ids[i] for i in positions if ids[i] != self.blank}
        return [self.blank if i in hidden else token for i, token in enumerate(ids)], hidden

    def target_key(self, query: int) -> int:
        return query

    def targets(self, ids: list[int], following: int | None, hidden: dict[int, int]) -> list[int | None]:
        return [hidden.get(i) for i in range(len(ids))]  # a typed blank's token is unknown

    def strips(self, config: "ModelConfig") -> list[StripKind]:
        return [ONE_BLANK]

    def query_inputs(self, ids: list[int], queries: list[int]) -> Tensor:
        copies = torch.tensor([ids]).repeat(len(queries), 1)
        copies[torch.arange(len(queries)), torch.tensor(queries)] = self.blank  # each query blanked alone
        return copies

    def strip_targets(self, ids: list[int], targets: list[int | None]) -> list[int | None]:
        return [target if token == self.blank else token for token, target in zip(ids, targets)]

    def guess(self, ids: list[int], query: int) -> bool:
        return ids[query] == self.blank  # a blank nobody filled: its likeliest token is asked about

    def nothing_to_score(self, labels: list[str]) -> str:
        return "the text is all blanks: no token of it to hide and score"
