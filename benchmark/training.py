"""The training step's throughput and FLOP utilisation, and fused against explicit attention per block size."""

import logging
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, Callable, Optional

import numpy as np
import torch
from torch import nn

from benchmark.settings import BenchSettings
from benchmark.timing import (
    map_allocations_one_by_one,
    measure,
    memory_high_water,
    reset_memory_high_water,
    synchronize,
    with_spread,
)
from model import TinyLM
from task import Task
from trainer.config import Precision, TrainConfig
from trainer.distributed import pick_device
from trainer.run import build_model
from trainer.step import TrainStep, autocast

log = logging.getLogger("tinylm.bench")


def training_flops_per_token(model: TinyLM) -> int:
    """Matmul FLOPs of one training step per token, counted as 3x the forward's (the backward costs two forwards).

    The forward: 2 per weight of every nn.Linear (embeddings are lookups: none), and per layer 2 * T * (d_k + d_v)
    for the scores and the weighted sum over all T = block_size keys, the masked half included, as the explicit
    path computes them. LayerNorm, GELU, softmax, the loss and AdamW are elementwise work and not counted.
    """
    config = model.config
    linear = sum(module.weight.numel() for module in model.modules() if isinstance(module, nn.Linear))
    attention = config.n_layer * config.block_size * (config.d_k + config.d_v)
    return 3 * 2 * (linear + attention)


def square_matmul(size: int, precision: Precision, device: torch.device) -> Callable[[], torch.Tensor]:
    """A size x size matmul in the training's precision (float32, or bfloat16 under bf16 autocast): 2 size^3 FLOPs."""
    dtype = torch.bfloat16 if precision is Precision.bf16 else torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    return partial(torch.mm, a, b)


def bench_throughput(
    config: TrainConfig, settings: BenchSettings, device: torch.device, task: Task, train_tokens: np.ndarray
) -> dict[str, Any]:
    """Tokens/s of the configured model's training step, in full (batch sampling, forward, backward, optimizer) and
    for the compute alone on one preloaded batch; and the full step's FLOP/s against this machine's matmul, whose
    repeats take turns with theirs."""
    model, optimizer = build_model(config, device)
    train_step, trainer = TrainStep.of(config, model, optimizer), config.trainer
    batch_size, block_size, lr = trainer.batch_size, config.model.block_size, config.optim.lr
    batches = torch.Generator().manual_seed(trainer.seed)
    x, y = task.draw(train_tokens, batch_size, batches, device)

    def full_step() -> None:
        train_step(*task.draw(train_tokens, batch_size, batches, device), lr)

    def compute_step() -> None:
        train_step(x, y, lr)

    matmul = square_matmul(settings.matmul_size, trainer.precision, device)
    seconds = measure(
        {"full": full_step, "compute": compute_step, "matmul": matmul}, settings, device, settings.warmup_steps
    )
    full, compute = ([batch_size * block_size / s for s in seconds[name]] for name in ("full", "compute"))
    flops_per_token = training_flops_per_token(model)
    matmul_flops = [2 * settings.matmul_size**3 / s for s in seconds["matmul"]]
    achieved = [tokens * flops_per_token for tokens in full]
    figures = {
        "full_step_tokens_per_s": full,
        "compute_tokens_per_s": compute,
        "full_over_compute": [f / c for f, c in zip(full, compute)],  # repeat by repeat: they took turns
        "achieved_flops_per_s": achieved,
        "matmul_flops_per_s": matmul_flops,
        "mfu": [a / m for a, m in zip(achieved, matmul_flops)],
    }
    sizes = {"batch_size": batch_size, "block_size": block_size, "matmul_size": settings.matmul_size}
    return sizes | {"flops_per_token": flops_per_token} | with_spread(figures)


def preloaded_step(
    model: TinyLM, optimizer: torch.optim.Optimizer, config: TrainConfig, settings: BenchSettings, device: torch.device
) -> Callable[[], torch.Tensor]:
    """train.py's training step (its micro-batches and loss scaling included) on one preloaded batch of random token
    ids (time and memory do not depend on their values): settings.attention_batch_size sequences of block_size + 1
    tokens."""
    shape = (settings.attention_batch_size, config.model.block_size + 1)
    batch = torch.randint(config.model.vocab_size, shape, generator=torch.Generator().manual_seed(config.trainer.seed))
    x, y = batch[:, :-1].to(device), batch[:, 1:].to(device)
    return partial(TrainStep.of(config, model, optimizer), x, y, config.optim.lr)


def attention_layer_pass(
    model: TinyLM, batch_size: int, precision: Precision, device: torch.device
) -> Callable[[], None]:
    """Forward and backward through the first block's attention layer alone (projections included, eager)."""
    layer, config = model.blocks[0].attn, model.config
    x = torch.randn(batch_size, config.block_size, config.d_model, device=device, requires_grad=True)

    def run() -> None:
        with autocast(device, precision):
            y = layer(x)
        y.sum().backward()

    return run


PARTS = {"step": "training step", "layer": "attention layer alone, forward and backward"}  # measured per path


def measure_memory(config: TrainConfig, settings: BenchSettings) -> dict[str, Optional[float]]:
    """MB, for each of PARTS: the peak memory of a call above what the process holds between calls (the model, its
    gradients and optimizer state); None where it cannot be measured. Run it in a fresh process."""
    map_allocations_one_by_one()
    device = pick_device(config.trainer.device)
    model, optimizer = build_model(config, device)
    calls = {
        "step": preloaded_step(model, optimizer, config, settings, device),
        "layer": attention_layer_pass(model, settings.attention_batch_size, config.trainer.precision, device),
    }
    peaks = {}
    for part, call in calls.items():
        for _ in range(max(1, settings.warmup_steps)):  # the optimizer state, the kernels' code, a compilation
            call()
        synchronize(device)
        before = reset_memory_high_water(device)
        if before is None:
            return dict.fromkeys(calls)
        for _ in range(2):  # the same peak every time: no need for more
            call()
        synchronize(device)
        peaks[part] = (memory_high_water(device) - before) / 2**20
    return peaks


def fresh_processes() -> multiprocessing.context.BaseContext:
    """Processes forked from a server that imported the main module (bench.py, and torch with it: Python's default
    preload) and has run nothing: none has seen another configuration, and each starts in milliseconds, not the
    seconds of a new interpreter's imports. A new interpreter each where there is no forkserver (Windows)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def bench_attention(config: TrainConfig, settings: BenchSettings, device: torch.device) -> list[dict[str, Any]]:
    """The fused kernel against the explicit reference path at each block size, for a training step and for the
    attention layer alone. Their times: all calls take turns in this process, so that the ratios hold on a busy
    machine. Their peak memory: in a fresh process per path and block size, whose high-water mark and heap no
    other configuration has raised."""
    rows = []
    fresh = fresh_processes()
    for block_size in settings.block_sizes:
        log.info("attention: block_size %d", block_size)
        paths = {
            fused: replace(config, model=replace(config.model, block_size=block_size, fused=fused))
            for fused in (True, False)
        }
        calls = {}
        for fused, path in paths.items():
            model, optimizer = build_model(path, device)
            calls["step", fused] = preloaded_step(model, optimizer, path, settings, device)
            calls["layer", fused] = attention_layer_pass(
                model, settings.attention_batch_size, config.trainer.precision, device
            )
        seconds = measure(calls, settings, device, settings.warmup_steps)
        for fused, path in paths.items():
            with ProcessPoolExecutor(max_workers=1, mp_context=fresh) as fresh_process:
                peak_mb = fresh_process.submit(measure_memory, path, settings).result()
            row = {"block_size": block_size, "fused": fused, "batch_size": settings.attention_batch_size}
            for part in PARTS:
                row |= with_spread({f"{part}_ms": [s * 1e3 for s in seconds[part, fused]]})
                row[f"{part}_peak_mb"] = peak_mb[part]
            rows.append(row)
    return rows


def growth_exponent(peak_mb: dict[int, float]) -> Optional[float]:
    """How memory grows with block_size between the two block sizes given: 1 is linear growth, 2 quadratic."""
    (small, low), (large, high) = sorted(peak_mb.items())
    return math.log(high / low) / math.log(large / small) if low > 0 and high > 0 else None


def attention_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """For each of PARTS: the fused path's speedup at each block size, and how each path's peak memory grows
    between the two largest block sizes."""
    row = {(row["block_size"], row["fused"]): row for row in rows}
    blocks = sorted({block for block, _ in row})
    summary: dict[str, Any] = {
        "speedup": {
            part: {block: row[block, False][f"{part}_ms"] / row[block, True][f"{part}_ms"] for block in blocks}
            for part in PARTS
        }
    }
    largest = blocks[-2:]
    if len(largest) == 2 and all(row[key][f"{part}_peak_mb"] is not None for key in row for part in PARTS):
        summary["memory_exponent"] = {"between": largest} | {
            part: {
                name: growth_exponent({block: row[block, fused][f"{part}_peak_mb"] for block in largest})
                for name, fused in (("fused", True), ("explicit", False))
            }
            for part in PARTS
        }
    return summary
