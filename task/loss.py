"""The loss every task trains and evaluates with: cross-entropy in nats at the positions a batch's labels score
(IGNORE elsewhere). The model returns logits; the loss is taken here, outside it."""

import torch.nn.functional as F
from torch import Tensor

from task.base import IGNORE


def summed_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """The sum over scored positions of -log p(label): (B, T, vocab) logits against (B, T) labels."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum")


def scored(labels: Tensor) -> Tensor:
    """How many positions the labels score."""
    return (labels != IGNORE).sum()


def mean_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Nats per scored token of one batch."""
    return summed_loss(logits, labels) / scored(labels)
