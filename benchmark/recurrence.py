"""The serial cost of recurrence: one layer of each kind, forward and backward, against the sequence length.

The lesson's second cost of a recurrent network: the hidden state at t needs the one at t - 1, so its T steps run one
after the other, each a small matmul; attention's T x T scores are one big matmul, which the cores share out. Here
the same width d_model for every kind, the same batch, and every length's calls taking turns with every other's.
"""

import logging
import math
from dataclasses import replace
from typing import Any, Callable

import numpy as np
import torch

from benchmark.settings import BenchSettings
from benchmark.timing import measure, with_spread
from model import Mixer, SingleHeadSelfAttention
from model.tinylm import Recurrence
from trainer.config import Precision, TrainConfig
from trainer.step import autocast

log = logging.getLogger("tinylm.bench")

KINDS = [Mixer.attention, Mixer.gru, Mixer.lstm]  # attention as train.py trains it (model.fused), then the two RNNs


def layer_pass(
    config: TrainConfig, kind: Mixer, length: int, batch_size: int, device: torch.device
) -> Callable[[], None]:
    """Forward and backward through one mixing layer of `kind` alone, on (batch_size, length, d_model) inputs."""
    model = replace(config.model, block_size=length, mixer=kind)
    torch.manual_seed(config.trainer.seed)
    layer = (SingleHeadSelfAttention(model) if kind is Mixer.attention else Recurrence(model)).to(device)
    x = torch.randn(batch_size, length, model.d_model, device=device, requires_grad=True)
    precision: Precision = config.trainer.precision

    def run() -> None:
        with autocast(device, precision):
            y = layer(x)
        y.sum().backward()

    return run


def growth_fit(lengths: list[int], ms: list[float]) -> float:
    """The exponent k of time ~ length^k, fitted by least squares on the log-log points: 1 linear, 2 quadratic."""
    return float(np.polyfit(np.log(lengths), np.log(ms), 1)[0])


def bench_recurrence(config: TrainConfig, settings: BenchSettings, device: torch.device) -> list[dict[str, Any]]:
    """ms per forward and backward of one layer of each of KINDS at each of bench.block_sizes; all the calls take
    turns within every repeat (timing.measure), so that a busy spell slows every kind and length alike."""
    calls = {}
    for length in settings.block_sizes:
        for kind in KINDS:
            calls[kind, length] = layer_pass(config, kind, length, settings.attention_batch_size, device)
    log.info("recurrence: %s at lengths %s", ", ".join(kind.value for kind in KINDS), settings.block_sizes)
    seconds = measure(calls, settings, device, settings.warmup_steps)
    return [
        {"kind": kind.value, "length": length, "batch_size": settings.attention_batch_size}
        | with_spread({"ms": [s * 1e3 for s in seconds[kind, length]]})
        for (kind, length) in calls
    ]


def recurrence_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each kind's fitted growth exponent over the lengths, and each recurrent kind's time over attention's."""
    ms = {(row["kind"], row["length"]): row["ms"] for row in rows}
    lengths = sorted({length for _, length in ms})
    kinds = list(dict.fromkeys(kind for kind, _ in ms))
    summary: dict[str, Any] = {"lengths": lengths, "threads": torch.get_num_threads()}
    if len(lengths) >= 2:
        summary["exponent"] = {kind: growth_fit(lengths, [ms[kind, length] for length in lengths]) for kind in kinds}
    summary["over_attention"] = {
        kind: {length: ms[kind, length] / ms[Mixer.attention.value, length] for length in lengths}
        for kind in kinds
        if kind != Mixer.attention.value
    }
    return summary


def exponent_note(summary: dict[str, Any]) -> str:
    """The fitted exponents in words, for the tables' caption."""
    if "exponent" not in summary:
        return "one length only: no growth to fit"
    fits = ", ".join(f"{kind} {value:.2f}" for kind, value in summary["exponent"].items() if math.isfinite(value))
    small, large = summary["lengths"][0], summary["lengths"][-1]
    return f"time ~ length^k fitted from {small} to {large} (1 linear, 2 quadratic): {fits}"
