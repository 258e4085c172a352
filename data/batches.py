"""Training batches: random windows of block_size + 1 tokens, drawn from a seeded generator."""

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


def get_batch(
    tokens: np.ndarray, batch_size: int, block_size: int, generator: torch.Generator, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets, each (batch_size, block_size)."""
    starts = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator).numpy()
    windows = torch.from_numpy(tokens[starts[:, None] + np.arange(block_size + 1)].astype(np.int64))
    if device.type == "cuda":
        windows = windows.pin_memory().to(device, non_blocking=True)
    else:
        windows = windows.to(device)
    return windows[:, :-1], windows[:, 1:]
