"""What attention weights and scores say, defined once beside the attention they measure: the trainer logs them to
TensorBoard (trainer/diagnostics.py), the viewer shows them per query (viewer/readings.py). Weights are (..., T, T),
row i query i's distribution over the keys j."""

import math
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from model.mask import future_keys
from model.softmax_jacobian import softmax_jacobian_norm

SATURATED = 0.99  # a row whose largest weight exceeds this has collapsed onto one key


class Attended(Protocol):
    """What the statistics read of an attention: model/attention.py's AttentionResult."""

    weights: Tensor  # (..., T, T)
    scores: Tensor  # (..., T, T): what the softmax was fed


def entropy(weights: Tensor) -> Tensor:
    """Mean over query rows of -sum_j a_ij log a_ij, in nats; masked keys (a_ij = 0) add 0, not nan. A one-hot row
    gives 0, not -0 (0 - 0, where negating would print "-0.000")."""
    return 0.0 - torch.special.xlogy(weights, weights).sum(-1).mean()


def max_weight(weights: Tensor) -> Tensor:
    return weights.amax(-1).mean()


def saturated_frac(weights: Tensor) -> Tensor:
    return (weights.amax(-1) > SATURATED).float().mean()


def hidden_share(weights: Tensor, hidden: Tensor) -> Tensor:
    """(..., T): each query row i's weight on the keys `hidden` (T, T) hides from it (model/mask.py's Mask): exactly
    0 where the mask was applied with minus infinity."""
    return weights.masked_fill(~hidden, 0).sum(-1)


def future_share(weights: Tensor) -> Tensor:
    """(..., T): each query row i's weight on keys j > i, the future (the right side)."""
    return hidden_share(weights, future_keys(weights.size(-1), weights.device))


def past_share(weights: Tensor) -> Tensor:
    """(..., T): each query row i's weight on keys j < i, the past (the left side)."""
    return weights.masked_fill(~future_keys(weights.size(-1), weights.device).T, 0).sum(-1)


def hidden_mass(weights: Tensor, hidden: Tensor) -> Tensor:
    """The mean over query rows of hidden_share."""
    return hidden_share(weights, hidden).mean()


def past_mass(weights: Tensor) -> Tensor:
    """The mean over query rows of past_share."""
    return past_share(weights).mean()


def self_weight(weights: Tensor) -> Tensor:
    """Mean over query rows i of a_ii, the weight a query puts on its own key (row 0 of a causal layer has only it:
    1). Spread evenly over the keys j <= i it is the mean of 1 / (i + 1): 0.074 at T = 64."""
    return weights.diagonal(dim1=-2, dim2=-1).mean()


def fed_scores(scores: Tensor, hidden: Tensor | None) -> Tensor:
    """The scaled scores the softmax could weight, flat: those of the keys `hidden` (T, T) hid are left out, whatever
    value the mask wrote there; None: the layer hid none."""
    if hidden is None:
        return scores.flatten()
    return scores[~hidden.expand(scores.shape)]


def attention_stats(result: Attended, hidden: Tensor, applied: bool = True) -> dict[str, Tensor]:
    """Every statistic of one layer, still on the device, keyed by its tag's last part. `hidden` (T, T) is what the
    task's mask hides (where a leak reads), `applied` whether the layer applied it."""
    weights, scores = result.weights, fed_scores(result.scores, hidden if applied else None)
    return {
        "entropy": entropy(weights),
        "max_weight": max_weight(weights),
        "saturated_frac": saturated_frac(weights),
        "jacobian_norm": softmax_jacobian_norm(weights),  # the gradient a saturated softmax no longer passes
        "logit_std": scores.std(),
        "logit_max": scores.max(),
        "future_mass": hidden_mass(weights, hidden),  # the tag's name from when the only mask was the triangle
        "past_mass": past_mass(weights),
        "self_weight": self_weight(weights),  # without projections x_i . x_i = |x_i|^2 tends to win
    }


class MaskReading(NamedTuple):
    """What the mask let through in a training forward pass, read while it happens (the reference path)."""

    hidden_mass: Tensor  # mean over query rows of the weight on hidden keys: exactly 0 under a mask of minus infinity
    allowed_min: Tensor  # the smallest score the softmax was fed at a key the mask allows


@torch.no_grad()
def read_mask(result: Attended, hidden: Tensor) -> MaskReading:
    """What `result`'s mask, hiding `hidden` (T, T), let through."""
    return MaskReading(hidden_mass(result.weights, hidden), result.scores.masked_fill(hidden, math.inf).amin())
