"""One optimizer step, shared by train.py and bench.py, and the autocast context it and evaluation run in."""

import contextlib
from enum import Enum

import torch
from torch import Tensor

from model import TinyLM


class Precision(Enum):
    fp32 = "fp32"
    bf16 = "bf16"  # autocast to bfloat16 for matmuls; weights and optimizer state stay float32


def autocast(device: torch.device, precision: Precision) -> contextlib.AbstractContextManager:
    if precision is Precision.fp32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def train_step(
    model: TinyLM, optimizer: torch.optim.Optimizer, x: Tensor, y: Tensor, lr: float, grad_clip: float,
    precision: Precision = Precision.fp32,
) -> Tensor:  # fmt: skip
    """Forward, backward, clip, update; returns the batch loss, still on the device (reading it would sync)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast(x.device, precision):
        loss = model.loss(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.detach()
