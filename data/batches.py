"""Training batches: random windows of block_size + 1 tokens, drawn from a seeded generator."""

import numpy as np
import torch


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
