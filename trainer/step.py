"""One optimizer step, shared by train.py and bench.py, and the autocast context it and evaluation run in."""

import contextlib
from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from model import TinyLM
from trainer.config import Precision


def autocast(device: torch.device, precision: Precision) -> contextlib.AbstractContextManager:
    if precision is Precision.fp32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def train_step(
    model: TinyLM | DistributedDataParallel, optimizer: torch.optim.Optimizer, x: Tensor, y: Tensor, lr: float, grad_clip: float,
    precision: Precision = Precision.fp32, on_gradients: Callable[[], None] | None = None,
) -> Tensor:  # fmt: skip
    """Forward, backward, clip, update; returns the batch loss, still on the device (reading it would sync).

    `on_gradients()` runs between backward and clipping, while the gradients are still the raw ones.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast(x.device, precision):
        loss = model(x, y)  # through forward, so that DistributedDataParallel averages the gradients
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if on_gradients is not None:
        on_gradients()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.detach()
