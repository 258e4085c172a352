"""One optimizer step (TrainStep), shared by train.py and bench.py; the autocast context it and evaluation run in."""

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from model import CAUSAL, Mask, TinyLM
from task.loss import scored, summed_loss
from trainer.config import ConfigError, Precision, TrainConfig

log = logging.getLogger("tinylm")
HALF = {Precision.bf16: torch.bfloat16, Precision.fp16: torch.float16}
NO_SCALING = torch.amp.GradScaler("cpu", enabled=False)  # disabled, it passes every call straight through
# Said before the compilation starts: on a CPU, compiling costs more than it saves at tinylm's size
# (docs/configuration.md#trainercompile has the figures).
COMPILE_ON_CPU = (
    "trainer.compile=true on a CPU: compiling takes tens of seconds before the first step and saves about 2% a step "
    "there, which a run of tinylm's size never earns back; it pays on a GPU (trainer.compile=false trains at once)"
)


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


@dataclass
class TrainStep:
    """One optimizer step, built once with the run from the parts that stay fixed, called with what changes: the
    batch, the learning rate and, at log steps, what reads the gradients. train.py and bench.py call the same one,
    so the benchmark measures what trains.

    The batch goes through in `grad_accum_steps` equal parts while only one part's activations are in memory at a
    time. The loss is the mean over every token the step scores: each part's summed loss is divided by the count of
    scored tokens over all the parts and all the ranks, so a task that scores different numbers of tokens in each
    part weighs every token alike. Under DistributedDataParallel (`model` is then the wrapper) the ranks average
    gradients once, after the last part.
    Under trainer.compile, `model` is the model's compiled forward (inside the wrapper, if any): the training step
    alone, always in training mode with gradients on and batches of one shape, so it compiles once; evaluation,
    the diagnostics and sampling run the model itself, eager, and never make it recompile.
    """

    model: TinyLM | DistributedDataParallel | nn.Module
    optimizer: torch.optim.Optimizer
    grad_clip: float  # max global gradient norm; 0: no clipping
    precision: Precision = Precision.fp32
    grad_accum_steps: int = 1
    scaler: torch.amp.GradScaler = NO_SCALING  # loss scaling for float16 training; disabled otherwise
    mask: Mask = CAUSAL  # the task's, given to the model beside every batch

    @classmethod
    def of(
        cls,
        config: TrainConfig,
        model: TinyLM,
        optimizer: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler | None = None,
        distributed: bool = False,
        mask: Mask = CAUSAL,
    ) -> "TrainStep":
        """The step `config` trains `model` with through the task's `mask`: its forward compiled under
        trainer.compile, wrapped in DistributedDataParallel when `distributed` (under torchrun: the ranks average
        their gradients in backward); `scaler` defaults to a fresh one for the model's device."""
        precision, device = config.trainer.precision, next(model.parameters()).device
        trained: nn.Module = model
        if config.trainer.compile:
            if device.type == "cpu":
                log.warning(COMPILE_ON_CPU)
            trained = torch.compile(model)  # compiles at the first step; the run keeps the model itself, eager
        if distributed:
            trained = DistributedDataParallel(trained)
        if scaler is None:
            scaler = grad_scaler(device, precision)
        accumulated = config.trainer.grad_accum_steps
        return cls(trained, optimizer, config.optim.grad_clip, precision, accumulated, scaler, mask)

    def __call__(self, x: Tensor, y: Tensor, lr: float, on_gradients: Callable[[], None] | None = None) -> Tensor:
        """Forward, backward, clip, update for inputs `x` and labels `y`; returns this rank's loss, nats per scored
        token, still on the device (reading it would sync). `on_gradients()` runs between backward and clipping,
        while the gradients are still the raw (unscaled) ones."""
        model, optimizer, scaler, parts = self.model, self.optimizer, self.scaler, self.grad_accum_steps
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        sums, distributed = [], isinstance(model, DistributedDataParallel)
        share = self.scored_share(y, distributed)
        for part, (part_x, part_y) in enumerate(zip(x.chunk(parts), y.chunk(parts))):
            last = part == parts - 1
            syncing = model.no_sync() if distributed and not last else contextlib.nullcontext()
            with syncing:
                with autocast(x.device, self.precision):
                    summed = summed_loss(model(part_x, mask=self.mask), part_y)
                scaler.scale(summed / share).backward()
            sums.append(summed.detach())
        scaler.unscale_(optimizer)
        if on_gradients is not None:
            on_gradients()
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.grad_clip)
        scaler.step(optimizer)  # skipped when float16 gradients overflowed; the scale then shrinks
        scaler.update()
        return torch.stack(sums).sum() / scored(y)

    @staticmethod
    def scored_share(labels: Tensor, distributed: bool) -> Tensor:
        """The step's count of scored tokens over every rank, divided by the number of ranks: DistributedDataParallel
        averages the ranks' gradients, so each rank dividing its summed loss by this gives the mean over them all."""
        count = scored(labels).float()
        if distributed:
            dist.all_reduce(count)
            return count / dist.get_world_size()
        return count
