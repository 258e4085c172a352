"""The losses evaluation measures, over batches of any task; the extra curves more than one task logs; and the loss
strips the viewer shows of their terms on one text."""

import torch

from model import Mask, TinyLM, reads_only_the_past
from task.base import Batch, Curve, Evaluation, StripKind
from task.loss import mean_loss, scored, summed_loss


def batches_loss(model: TinyLM, batches: list[Batch], mask: Mask, causal: bool | None = None) -> float:
    """The mean over the batches of each one's nats per scored token (each scores as many tokens), read through the
    task's `mask`; `causal` as in the model's forward: True forces the true mask on."""
    return torch.stack([mean_loss(model(x, mask=mask, causal=causal), y) for x, y in batches]).mean().item()


def pooled_loss(model: TinyLM, batches: list[Batch], mask: Mask) -> float:
    """Nats per scored token over all the batches together, for batches that score different numbers of tokens."""
    total = sum(summed_loss(model(x, mask=mask), y) for x, y in batches)
    count = sum(int(scored(y)) for _, y in batches)
    return (total / max(count, 1)).item()


def mask_put_back(evaluation: Evaluation) -> float:
    """val/loss_causal: the val loss on the same batches with the task's true mask (minus infinity) put back, what a
    model that reads the keys it hides does without them; for a model that hides them already, val/loss."""
    if reads_only_the_past(evaluation.model.config):
        return evaluation.val
    return batches_loss(evaluation.model, evaluation.batches, evaluation.task.mask, causal=True)


MASK_PUT_BACK = Curve(mask_put_back, "with the task's true mask put back")
AS_TRAINED_STRIP = StripKind("as trained", "val/loss", None)
MASK_PUT_BACK_STRIP = StripKind("mask put back", "val/loss_causal", True)  # MASK_PUT_BACK's terms
