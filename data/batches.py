"""Training windows: runs of consecutive tokens at random places of a split, drawn from a seeded generator. What a
window's tokens are trained to predict is the task's (task/)."""

import numpy as np
import torch

from data.errors import DataError


def check_fits(splits: dict[str, np.ndarray], block_size: int) -> None:
    """Every split must hold at least one window of block_size + 1 tokens."""
    for name, tokens in splits.items():
        if len(tokens) <= block_size:
            raise DataError(
                f"model.block_size={block_size}: the {name} split has only {len(tokens)} tokens; "
                "lower model.block_size, or give it more text (data.val_fraction sets the val share)"
            )


def window_at(tokens: np.ndarray, starts: torch.Tensor, span: int) -> torch.Tensor:
    """(len(starts), span) int64 token ids: the `span` tokens from each start."""
    return torch.from_numpy(tokens[starts.numpy()[:, None] + np.arange(span)].astype(np.int64))


def draw_windows(
    tokens: np.ndarray, batch_size: int, span: int, generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    """(batch_size, span) windows at places drawn from `generator`, on `device`."""
    starts = torch.randint(len(tokens) - span + 1, (batch_size,), generator=generator)
    windows = window_at(tokens, starts, span)
    if device.type == "cuda":
        return windows.pin_memory().to(device, non_blocking=True)
    return windows.to(device)
