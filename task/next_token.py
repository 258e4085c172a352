"""Next-token prediction, the causal language model's task: every position i is scored on token i + 1. A model whose
attention reads the future sees that token in its input: the leak, which val/loss_causal (the true mask forced on)
cannot be fooled by."""

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from data.batches import window_at
from data.sources import Source
from data.synthetic import far_targets
from task.base import IGNORE, Batch, Curve, Evaluation, StripKind, Task, register
from task.curves import AS_TRAINED_STRIP, MASK_PUT_BACK, MASK_PUT_BACK_STRIP, pooled_loss

if TYPE_CHECKING:
    from model import ModelConfig

FAR_SEED = 2  # val/loss_far draws windows of its own: the evaluation's seed + 2 (trainer.seed + 3)


def far_token(evaluation: Evaluation) -> float | None:
    """data=copy's val/loss_far: the loss at the positions whose next token is the one data.distance back, that
    token inside the window (data/synthetic.py far_targets), over windows of its own, the same at every evaluation.
    The char tokenizer gives a token per character, so the val split starts at its offset in the text."""
    if evaluation.data.source is not Source.copy:
        return None
    generator = torch.Generator().manual_seed(evaluation.seed + FAR_SEED)
    block_size, tokens = evaluation.model.config.block_size, evaluation.val_tokens
    batches = []
    for _ in range(evaluation.eval_iters):
        starts = torch.randint(len(tokens) - block_size, (evaluation.batch_size,), generator=generator)
        windows = window_at(tokens, starts, block_size + 1)
        far = far_targets(evaluation.val_offset + starts, block_size, evaluation.data.distance)
        labels = windows[:, 1:].masked_fill(~far, IGNORE)
        batches.append(Batch(windows[:, :-1].to(evaluation.device), labels.to(evaluation.device)))
    return pooled_loss(evaluation.model, batches, evaluation.task.mask)


@register
class NextToken(Task):
    name = "next_token"
    honest = "val_causal"
    continues_text = True
    curves = {
        "val_causal": MASK_PUT_BACK,
        "val_far": Curve(far_token, "where the next token is the one data.distance back"),
    }

    def span(self, block_size: int) -> int:
        return block_size + 1  # the inputs and, one further, the last one's next token

    def batch(self, windows: Tensor, generator: torch.Generator) -> Batch:
        return Batch(windows[:, :-1], windows[:, 1:])

    def sees_targets(self, config: "ModelConfig") -> bool:
        from model import reads_only_the_past

        return not reads_only_the_past(config)

    def target_key(self, query: int) -> int:
        return query + 1

    def targets(self, ids: list[int], following: int | None, hidden: dict[int, int]) -> list[int | None]:
        return [*ids[1:], following]

    def strips(self, config: "ModelConfig") -> list[StripKind]:
        return [AS_TRAINED_STRIP, MASK_PUT_BACK_STRIP] if self.sees_targets(config) else [AS_TRAINED_STRIP]

    def query_inputs(self, ids: list[int], queries: list[int]) -> Tensor:
        return torch.tensor([ids])  # the text itself: each position predicts the token after it

    def nothing_to_score(self, labels: list[str]) -> str:
        return f"the text is one token ({labels[0]!r}): there is no next token to score"
