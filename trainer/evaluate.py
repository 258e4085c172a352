"""Loss estimates on both splits, over the same batches at every evaluation."""

import numpy as np
import torch
from torch import Tensor

from data import get_batch
from model import TinyLM
from trainer.config import Precision
from trainer.step import autocast


@torch.no_grad()
def estimate_loss(
    model: TinyLM,
    splits: dict[str, np.ndarray],
    batch_size: int,
    iters: int,
    seed: int,
    device: torch.device,
    precision: Precision = Precision.fp32,
) -> dict[str, float]:
    """Mean loss per split over `iters` batches. A fixed seed keeps the batches, and so the curves, comparable.

    Also "val_causal": the val loss on the same batches with the causal mask forced on, the figure a model
    that reads the future cannot fake; for a causal model it is the val loss itself.
    """
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    losses = {}
    for name, tokens in splits.items():
        batches = [get_batch(tokens, batch_size, model.config.block_size, generator, device) for _ in range(iters)]
        with autocast(device, precision):
            losses[name] = mean_loss(model, batches)
            if name == "val":
                losses["val_causal"] = losses["val"] if model.config.causal else mean_loss(model, batches, causal=True)
    model.train(was_training)
    return losses


def mean_loss(model: TinyLM, batches: list[tuple[Tensor, Tensor]], causal: bool | None = None) -> float:
    return torch.stack([model.loss(x, y, causal=causal) for x, y in batches]).mean().item()
