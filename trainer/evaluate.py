"""Loss estimates on both splits, over the same batches at every evaluation."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from data import get_batch
from data.synthetic import far_targets
from model import TinyLM, reads_only_the_past
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

    Also "val_causal": the val loss on the same batches with the true causal mask forced on (minus infinity), the
    figure a model that reads the future cannot fake; for a truly causal model it is the val loss itself.
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
                honest = reads_only_the_past(model.config)
                losses["val_causal"] = losses["val"] if honest else mean_loss(model, batches, causal=True)
    model.train(was_training)
    return losses


def mean_loss(model: TinyLM, batches: list[tuple[Tensor, Tensor]], causal: bool | None = None) -> float:
    return torch.stack([model.loss(x, y, causal=causal) for x, y in batches]).mean().item()


@torch.no_grad()
def far_loss(
    model: TinyLM,
    tokens: np.ndarray,
    offset: int,
    distance: int,
    batch_size: int,
    iters: int,
    seed: int,
    device: torch.device,
    precision: Precision = Precision.fp32,
) -> float:
    """data=copy's loss where it matters: the mean over `iters` batches of windows of the split `tokens`, which
    starts at token `offset` of the text, of the loss at the positions whose next token is the one `distance`
    back, that token inside the window (data.synthetic.far_targets), in nats per token."""
    was_training = model.training
    model.eval()
    generator, block_size = torch.Generator().manual_seed(seed), model.config.block_size
    total, count = torch.zeros((), device=device), 0
    for _ in range(iters):
        starts = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator)
        windows = torch.from_numpy(tokens[starts.numpy()[:, None] + np.arange(block_size + 1)].astype(np.int64))
        x, y = windows[:, :-1].to(device), windows[:, 1:].to(device)
        far = far_targets(offset + starts, block_size, distance)
        count += int(far.sum())
        far = far.to(device)
        with autocast(device, precision):
            logits = model(x)
        total += F.cross_entropy(logits[far].float(), y[far], reduction="sum")
    model.train(was_training)
    return (total / max(count, 1)).item()
