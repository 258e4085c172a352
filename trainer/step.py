"""One optimizer step, shared by train.py and bench.py, and the autocast context it and evaluation run in."""

import contextlib
from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from model import TinyLM
from trainer.config import ConfigError, Precision

HALF = {Precision.bf16: torch.bfloat16, Precision.fp16: torch.float16}
NO_SCALING = torch.amp.GradScaler("cpu", enabled=False)  # disabled, it passes every call straight through


def autocast(device: torch.device, precision: Precision) -> contextlib.AbstractContextManager:
    if precision is Precision.fp32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=HALF[precision])


def check_precision(device: torch.device, precision: Precision) -> None:
    """bfloat16 needs hardware support on a GPU (Ampere or later); refuse it where it would be emulated or fail."""
    if (
        precision is Precision.bf16
        and device.type == "cuda"
        and not torch.cuda.is_bf16_supported(including_emulation=False)
    ):
        raise ConfigError(
            f"trainer.precision=bf16: {torch.cuda.get_device_name(device)} has no bfloat16 support; use "
            "trainer.precision=fp16 (float16 with loss scaling) or fp32"
        )


def grad_scaler(device: torch.device, precision: Precision) -> torch.amp.GradScaler:
    """float16 gradients underflow without loss scaling; bfloat16 and float32 ones do not (a disabled scaler)."""
    return torch.amp.GradScaler(device.type, enabled=precision is Precision.fp16)


def train_step(
    model: TinyLM | DistributedDataParallel, optimizer: torch.optim.Optimizer, x: Tensor, y: Tensor, lr: float,
    grad_clip: float, precision: Precision = Precision.fp32, on_gradients: Callable[[], None] | None = None,
    micro_batches: int = 1, scaler: torch.amp.GradScaler = NO_SCALING,
) -> Tensor:  # fmt: skip
    """Forward, backward, clip, update; returns the batch loss, still on the device (reading it would sync).

    The batch goes through in `micro_batches` equal parts, each loss divided by their number, so the summed
    gradients are the whole batch's while only one part's activations are in memory at a time. Under
    DistributedDataParallel the ranks average gradients once, after the last part. `on_gradients()` runs between
    backward and clipping, while the gradients are still the raw (unscaled) ones.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    losses = []
    for part, (part_x, part_y) in enumerate(zip(x.chunk(micro_batches), y.chunk(micro_batches))):
        last = part == micro_batches - 1
        syncing = (
            contextlib.nullcontext() if last or not isinstance(model, DistributedDataParallel) else model.no_sync()
        )
        with syncing:
            with autocast(x.device, precision):
                loss = model(part_x, part_y)  # through forward, so that DistributedDataParallel averages the gradients
            scaler.scale(loss / micro_batches).backward()
        losses.append(loss.detach())
    scaler.unscale_(optimizer)
    if on_gradients is not None:
        on_gradients()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)  # skipped when float16 gradients overflowed; the scale then shrinks
    scaler.update()
    return torch.stack(losses).mean()
