"""The causal mask: which keys it hides from each query, and the value it writes over their scores."""

import math

import torch
from torch import Tensor

from model.config import ModelConfig


def future_keys(T: int, device: torch.device | str = "cpu") -> Tensor:
    """(T, T), true where key j comes after query i (j > i): the upper triangle the causal mask hides."""
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(diagonal=1)


def mask_value(config: ModelConfig) -> float:
    """The score the mask writes over future keys: model.mask_value, null meaning minus infinity."""
    return -math.inf if config.mask_value is None else config.mask_value
