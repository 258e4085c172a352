"""Loss estimates on both splits, over the same batches at every evaluation."""

import numpy as np
import torch

from data import get_batch
from model import TinyLM
from trainer.step import Precision, autocast


@torch.no_grad()
def estimate_loss(
    model: TinyLM, splits: dict[str, np.ndarray], batch_size: int, iters: int, seed: int, device: torch.device,
    precision: Precision = Precision.fp32,
) -> dict[str, float]:  # fmt: skip
    """Mean loss per split over `iters` batches. A fixed seed keeps the batches, and so the curves, comparable."""
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    losses = {}
    for name, tokens in splits.items():
        batches = (get_batch(tokens, batch_size, model.config.block_size, generator, device) for _ in range(iters))
        with autocast(device, precision):
            losses[name] = torch.stack([model.loss(x, y) for x, y in batches]).mean().item()
    model.train(was_training)
    return losses
