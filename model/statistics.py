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


def future_share(weights: Tensor) -> Tensor:
    """(..., T): each query row i's weight on keys j > i, the future (the right side): exactly 0 under the causal
    mask."""
    return weights.masked_fill(~future_keys(weights.size(-1), weights.device), 0).sum(-1)


def past_share(weights: Tensor) -> Tensor:
    """(..., T): each query row i's weight on keys j < i, the past (the left side)."""
    return weights.masked_fill(~future_keys(weights.size(-1), weights.device).T, 0).sum(-1)


def future_mass(weights: Tensor) -> Tensor:
    """The mean over query rows of future_share."""
    return future_share(weights).mean()


def past_mass(weights: Tensor) -> Tensor:
    """The mean over query rows of past_share."""
    return past_share(weights).mean()


def self_weight(weights: Tensor) -> Tensor:
    """Mean over query rows i of a_ii, the weight a query puts on its own key (row 0 of a causal layer has only it:
    1). Spread evenly over the keys j <= i it is the mean of 1 / (i + 1): 0.074 at T = 64."""
    return weights.diagonal(dim1=-2, dim2=-1).mean()


def fed_scores(scores: Tensor, causal: bool = True) -> Tensor:
    """The scaled scores the softmax could weight, flat: the masked ones (above the diagonal of a causal layer,
    whatever value the mask wrote there) are left out."""
    if not causal:
        return scores.flatten()
    return scores[~future_keys(scores.size(-1), scores.device).expand(scores.shape)]


def attention_stats(result: Attended, causal: bool = True) -> dict[str, Tensor]:
    """Every statistic of one layer (masked as `causal` says), still on the device, keyed by its tag's last part."""
    weights, scores = result.weights, fed_scores(result.scores, causal)
    return {
        "entropy": entropy(weights),
        "max_weight": max_weight(weights),
        "saturated_frac": saturated_frac(weights),
        "jacobian_norm": softmax_jacobian_norm(weights),  # the gradient a saturated softmax no longer passes
        "logit_std": scores.std(),
        "logit_max": scores.max(),
        "future_mass": future_mass(weights),
        "past_mass": past_mass(weights),
        "self_weight": self_weight(weights),  # without projections x_i . x_i = |x_i|^2 tends to win
    }


class MaskReading(NamedTuple):
    """What the mask let through in a training forward pass, read while it happens (the reference path)."""

    future_mass: Tensor  # mean over query rows of the weight on keys j > i: exactly 0 under a mask of minus infinity
    allowed_min: Tensor  # the smallest score the softmax was fed at an allowed key j <= i


@torch.no_grad()
def read_mask(result: Attended) -> MaskReading:
    future = future_keys(result.scores.size(-1), result.scores.device)
    return MaskReading(future_mass(result.weights), result.scores.masked_fill(future, math.inf).amin())
