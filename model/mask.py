"""The mask: which keys it hides from each query, and the value it writes over their scores."""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from model.config import ModelConfig


def future_keys(T: int, device: torch.device | str = "cpu") -> Tensor:
    """(T, T), true where key j comes after query i (j > i): the future, the right side, the upper triangle."""
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(diagonal=1)


@dataclass(frozen=True)
class Mask:
    """Which keys each query of a window may not see, said by the task (task/): the causal triangle, with the first
    `prefix` positions of the window open to each other both ways. T5's three patterns (Raffel et al. 2020, Figure 3)
    are its cases: prefix 0 the causal language model's, a prefix shorter than the window the prefix LM's, and a
    window no longer than the prefix fully visible.

    It is a function of the window's length, not a matrix per window: every window of a batch has the same mask, so
    one (T, T) matrix serves the batch (and the plain triangle keeps the fused kernel's is_causal path), and a reader
    of any text, of any length, builds the very mask the run trained with."""

    prefix: int = 0  # how many positions at the start of a window see each other both ways

    @property
    def triangle(self) -> bool:
        """Whether it is the causal triangle itself (a prefix of one position hides what the triangle hides)."""
        return self.prefix <= 1

    def hidden_keys(self, T: int, device: torch.device | str = "cpu") -> Tensor:
        """(T, T), true where key j is hidden from query i: j > i, except inside the prefix."""
        hidden = future_keys(T, device)
        hidden[: self.prefix, : self.prefix] = False
        return hidden


CAUSAL = Mask()  # the causal language model's: every key after the query hidden


def mask_value(config: ModelConfig) -> float:
    """The score the mask writes over hidden keys: model.mask_value, null meaning minus infinity."""
    return -math.inf if config.mask_value is None else config.mask_value
