"""The prefix language model, T5's "causal with prefix" (Raffel et al. 2020, section 3.2.1 and Figure 3; UniLM's,
Dong et al. 2019): the first task.prefix_share of each window is read both ways, the rest left to right, and only the
rest is scored: each token after the prefix predicted from the whole prefix and what precedes it. The task is its
mask: the batches are next-token prediction's, with the prefix's own predictions left unscored (each of them could
read its answer inside the prefix)."""

import torch
from torch import Tensor

from model.config import Mixer
from model.mask import CAUSAL, Mask
from task.base import IGNORE, Batch, Curve, Evaluation, RunSettings, register
from task.curves import MASK_PUT_BACK, batches_loss
from task.next_token import NextToken


def prefix_length(share: float, block_size: int) -> int:
    """The prefix's tokens in a window of block_size: the share, rounded."""
    return round(share * block_size)


def prefix_closed(evaluation: Evaluation) -> float:
    """val/loss_closed: the val loss on the same batches with the prefix closed, the causal mask over the whole
    window: what its two-way reading is worth to these weights. At one layer it is val/loss itself, exactly: each
    scored query reads the prefix's keys and values straight from the embeddings, which no layer has mixed."""
    return batches_loss(evaluation.model, evaluation.batches, CAUSAL)


@register
class PrefixLM(NextToken):
    name = "prefix_lm"
    keys = ("prefix_share",)
    curves = {
        "val_causal": MASK_PUT_BACK,
        "val_closed": Curve(prefix_closed, "the prefix closed: the causal mask over the whole window"),
    }

    @classmethod
    def problems(cls, config: RunSettings) -> list[str]:
        problems = super().problems(config)
        share, block_size = config.task.prefix_share, config.model.block_size
        if share is None or not 0 < share < 1:
            problems.append(
                f"task.prefix_share={share}: must be above 0 and below 1, the share of a window read both ways"
            )
        elif block_size > 0 and not 2 <= prefix_length(share, block_size) < block_size:
            problems.append(
                f"task.prefix_share={share}: a prefix of {prefix_length(share, block_size)} of the {block_size} "
                "tokens of a window (model.block_size); it needs 2 or more, and a token after it"
            )
        if config.model.mixer is not Mixer.attention:
            problems.append(
                f"task=prefix_lm: its prefix is read both ways, which a recurrence (model.mixer="
                f"{config.model.mixer.value}) cannot; it needs model.mixer=attention"
            )
        return problems

    @property
    def prefix(self) -> int:
        """How many tokens at the start of a window are read both ways."""
        return prefix_length(self.settings.prefix_share, self.block_size)

    @property
    def mask(self) -> Mask:
        return Mask(self.prefix)

    def batch(self, windows: Tensor, generator: torch.Generator) -> Batch:
        inputs, labels = super().batch(windows, generator)
        return Batch(inputs, labels.clone().index_fill_(1, torch.arange(self.prefix - 1, device=labels.device), IGNORE))

    def targets(self, ids: list[int], following: int | None, hidden: dict[int, int]) -> list[int | None]:
        after = super().targets(ids, following, hidden)
        return [None if i < self.prefix - 1 else target for i, target in enumerate(after)]

    def nothing_to_score(self, labels: list[str]) -> str:
        return (
            f"the text's {len(labels)} tokens end inside the prefix of {self.prefix} (task.prefix_share of "
            "model.block_size), where nothing is scored: give more"
        )
