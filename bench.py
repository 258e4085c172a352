"""Benchmark tinylm on this machine: training throughput, FLOP utilisation, fused against explicit attention,
startup time and tokenization speed. Every figure is the median of several repeats after a warm-up.

    python bench.py                                               # everything: about 3.5 minutes on a 2-core CPU
    python bench.py bench.sections=[attention]                    # throughput, attention, startup, tokenization
    python bench.py trainer.precision=bf16 trainer.compile=true   # as train.py would train with these settings

It prints Markdown tables and writes every figure to bench.json in its run directory (outputs/bench/DATE/TIME;
bench.json_path=FILE to choose). Settings: BenchSettings below; the model, data and trainer as in train.py.
"""

import ctypes
import json
import logging
import math
import multiprocessing
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

import hydra
import numpy as np
import torch
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn

from data import DataConfig, DataError, TokenizerConfig, encode, get_batch, load_text, prepare_tokens, train_tokenizer
from model import TinyLM
from trainer import (
    ConfigError,
    Precision,
    TrainConfig,
    allow_tf32,
    autocast,
    make_optimizer,
    pick_device,
    to_train_config,
    train_step,
)
from trainer.cli import run_with_one_line_errors
from trainer.config import to_typed

log = logging.getLogger("tinylm.bench")
logging.getLogger("tensorboard").setLevel(logging.WARNING)  # its event reader logs each file it has read
ROOT = Path(__file__).resolve().parent


class Section(Enum):
    throughput = "throughput"  # tokens/s of the full step and of the compute alone; FLOP utilisation
    attention = "attention"  # fused against explicit attention per block size: time and peak memory
    startup = "startup"  # train.py from process start to its first training step, cold and warm
    tokenization = "tokenization"  # MB/s of each tokenizer option in configs/tokenizer


@dataclass
class BenchSettings:
    sections: list[Section] = field(default_factory=lambda: list(Section))
    warmup_steps: int = 3  # untimed calls before each measurement: allocator, caches, lazy init, compilation
    repeats: int = 5  # timed repeats in a process; every figure is their median
    startup_repeats: int = 3  # train.py runs to the first step, cold and warm each
    repeat_seconds: float = 1.0  # each repeat makes enough calls to last about this long
    block_sizes: list[int] = field(default_factory=lambda: [64, 256, 1024, 2048])  # of the attention comparison
    attention_batch_size: int = 8  # the same at every block size, so per-sequence memory growth shows
    matmul_size: int = 2048  # n of the n x n matmul that measures this machine's FLOP/s
    json_path: Optional[str] = None  # default: bench.json in the run directory


@dataclass
class BenchConfig(TrainConfig):
    bench: BenchSettings = field(default_factory=BenchSettings)


ConfigStore.instance().store(name="bench_schema", node=BenchConfig)  # the first entry of configs/bench.yaml


def to_bench_config(cfg: DictConfig) -> tuple[TrainConfig, BenchSettings]:
    """The composed config as typed objects, every value checked as train.py checks its own; raises ConfigError."""
    config = to_train_config(OmegaConf.masked_copy(cfg, [key for key in cfg if key != "bench"]))
    settings = to_typed(BenchConfig, {"bench": OmegaConf.to_container(cfg.bench)}).bench
    problems = [f"bench.{key}={getattr(settings, key)}: must be positive"
                for key in ("repeats", "startup_repeats", "repeat_seconds", "attention_batch_size", "matmul_size")
                if getattr(settings, key) <= 0]  # fmt: skip
    if settings.warmup_steps < 0:
        problems.append(f"bench.warmup_steps={settings.warmup_steps}: must not be negative")
    if not all(size > 0 for size in settings.block_sizes):
        problems.append(f"bench.block_sizes={settings.block_sizes}: must be positive")
    if problems:
        raise ConfigError("; ".join(problems))
    return config, settings


# Timing and memory.


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that the clock measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def measure(
    calls: dict[Any, Callable[[], Any]], settings: BenchSettings, device: torch.device, warmup: int
) -> dict[Any, float]:
    """Median seconds per call of each callable. Their repeats take turns, so that a slow spell on a shared machine
    falls on all of them alike; each repeat makes enough calls to last about settings.repeat_seconds."""
    calls_per_repeat = {}
    for name, call in calls.items():
        for _ in range(warmup):
            call()
        synchronize(device)
        started = time.perf_counter()
        call()  # a first timed call tells how many make a repeat
        synchronize(device)
        calls_per_repeat[name] = max(1, round(settings.repeat_seconds / (time.perf_counter() - started)))
    seconds = {name: [] for name in calls}
    for _ in range(settings.repeats):
        for name, call in calls.items():
            started = time.perf_counter()
            for _ in range(calls_per_repeat[name]):
                call()
            synchronize(device)
            seconds[name].append((time.perf_counter() - started) / calls_per_repeat[name])
    return {name: statistics.median(values) for name, values in seconds.items()}


PROC_SELF = Path("/proc/self")  # Linux


def memory_high_water(device: torch.device) -> int:
    """Bytes: the CUDA allocator's peak, or on a Linux CPU the process's peak resident set size."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return 1024 * int(re.search(r"^VmHWM:\s*(\d+) kB", (PROC_SELF / "status").read_text(), re.MULTILINE)[1])


def reset_memory_high_water(device: torch.device) -> Optional[int]:
    """Lower the high-water mark to the memory in use now and return it, the baseline of a peak measured next;
    None where this cannot be done (a CPU that is not Linux's, MPS)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    if device.type != "cpu" or not PROC_SELF.exists():
        return None
    (PROC_SELF / "clear_refs").write_text("5")  # "5": the peak resident set size down to the current one
    return memory_high_water(device)


def map_allocations_one_by_one() -> None:
    """Have glibc map every allocation of 64 KiB or more on its own and unmap it when freed, so that the resident set
    follows the memory in use: by default it keeps freed memory in its heap, where a later step reuses it unseen,
    and the high-water mark then depends on the order of earlier allocations."""
    libc = ctypes.CDLL(None)
    if hasattr(libc, "mallopt"):  # glibc
        libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD, which also stops glibc from adjusting it


# The model, as train.py builds it.


def prepare_device(name: str) -> torch.device:
    device = pick_device(name)
    allow_tf32()  # as train.py does
    return device


def build(config: TrainConfig, device: torch.device) -> tuple[TinyLM, torch.optim.Optimizer]:
    torch.manual_seed(config.trainer.seed)
    model = TinyLM(config.model).to(device)
    optimizer = make_optimizer(model, config.optim)
    if config.trainer.compile:
        model.compile()  # as train.py does
    return model, optimizer


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


# The sections.


def bench_throughput(
    config: TrainConfig, settings: BenchSettings, device: torch.device, train_tokens: np.ndarray
) -> dict[str, Any]:
    """Tokens/s of the configured model's training step, in full (batch sampling, forward, backward, optimizer) and
    for the compute alone on one preloaded batch; and the full step's FLOP/s against this machine's matmul, whose
    repeats take turns with theirs."""
    model, optimizer = build(config, device)
    trainer, optim = config.trainer, config.optim
    batch_size, block_size = trainer.batch_size, config.model.block_size
    batches = torch.Generator().manual_seed(trainer.seed)
    x, y = get_batch(train_tokens, batch_size, block_size, batches, device)

    def full_step() -> None:
        step_x, step_y = get_batch(train_tokens, batch_size, block_size, batches, device)
        train_step(model, optimizer, step_x, step_y, optim.lr, optim.grad_clip, trainer.precision)

    def compute_step() -> None:
        train_step(model, optimizer, x, y, optim.lr, optim.grad_clip, trainer.precision)

    matmul = square_matmul(settings.matmul_size, trainer.precision, device)
    seconds = measure({"full": full_step, "compute": compute_step, "matmul": matmul}, settings, device,
                      settings.warmup_steps)  # fmt: skip
    full, compute = (batch_size * block_size / seconds[name] for name in ("full", "compute"))
    flops_per_token = training_flops_per_token(model)
    matmul_flops = 2 * settings.matmul_size**3 / seconds["matmul"]
    return {
        "batch_size": batch_size,
        "block_size": block_size,
        "full_step_tokens_per_s": full,
        "compute_tokens_per_s": compute,
        "full_over_compute": full / compute,
        "flops_per_token": flops_per_token,
        "achieved_flops_per_s": full * flops_per_token,
        "matmul_size": settings.matmul_size,
        "matmul_flops_per_s": matmul_flops,
        "mfu": full * flops_per_token / matmul_flops,
    }


def preloaded_step(
    model: TinyLM, optimizer: torch.optim.Optimizer, config: TrainConfig, settings: BenchSettings, device: torch.device
) -> Callable[[], torch.Tensor]:
    """A training step on one preloaded batch of random token ids (time and memory do not depend on their values):
    settings.attention_batch_size sequences of block_size + 1 tokens."""
    shape = (settings.attention_batch_size, config.model.block_size + 1)
    batch = torch.randint(config.model.vocab_size, shape, generator=torch.Generator().manual_seed(config.trainer.seed))
    x, y = batch[:, :-1].to(device), batch[:, 1:].to(device)
    optim = config.optim
    return partial(train_step, model, optimizer, x, y, optim.lr, optim.grad_clip, config.trainer.precision)


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
    device = prepare_device(config.trainer.device)
    model, optimizer = build(config, device)
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


def bench_attention(config: TrainConfig, settings: BenchSettings, device: torch.device) -> list[dict[str, Any]]:
    """The fused kernel against the explicit reference path at each block size, for a training step and for the
    attention layer alone. Their times: all calls take turns in this process, so that the ratios hold on a busy
    machine. Their peak memory: in a fresh process per path and block size, whose high-water mark and heap no
    other configuration has raised."""
    rows = []
    spawn = multiprocessing.get_context("spawn")  # a new interpreter, not a fork of this one
    for block_size in settings.block_sizes:
        log.info("attention: block_size %d", block_size)
        paths = {fused: replace(config, model=replace(config.model, block_size=block_size, fused=fused))
                 for fused in (True, False)}  # fmt: skip
        calls = {}
        for fused, path in paths.items():
            model, optimizer = build(path, device)
            calls["step", fused] = preloaded_step(model, optimizer, path, settings, device)
            calls["layer", fused] = attention_layer_pass(model, settings.attention_batch_size,
                                                         config.trainer.precision, device)  # fmt: skip
        seconds = measure(calls, settings, device, settings.warmup_steps)
        for fused, path in paths.items():
            with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as fresh_process:
                peak_mb = fresh_process.submit(measure_memory, path, settings).result()
            row = {"block_size": block_size, "fused": fused, "batch_size": settings.attention_batch_size}
            for part in PARTS:
                row |= {f"{part}_ms": seconds[part, fused] * 1e3, f"{part}_peak_mb": peak_mb[part]}
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
    summary: dict[str, Any] = {"speedup": {
        part: {block: row[block, False][f"{part}_ms"] / row[block, True][f"{part}_ms"] for block in blocks}
        for part in PARTS
    }}  # fmt: skip
    largest = blocks[-2:]
    if len(largest) == 2 and all(row[key][f"{part}_peak_mb"] is not None for key in row for part in PARTS):
        summary["memory_exponent"] = {"between": largest} | {
            part: {name: growth_exponent({block: row[block, fused][f"{part}_peak_mb"] for block in largest})
                   for name, fused in (("fused", True), ("explicit", False))}
            for part in PARTS
        }  # fmt: skip
    return summary


def startup_seconds(overrides: list[str], cache_dir: Path, run_dir: Path) -> float:
    """Seconds from starting `python train.py` to the end of its first training step, read from the wall time
    of the first train/loss value in its TensorBoard events (written as that step ends, step 0's evaluation
    of one batch per split before it)."""
    command = [sys.executable, str(ROOT / "train.py"), *overrides, "trainer.max_steps=1", "trainer.eval_interval=1",
               "trainer.eval_iters=1", "trainer.sample_tokens=0", f"data.cache_dir={cache_dir}",
               f"hydra.run.dir={run_dir}"]  # fmt: skip
    started = time.time()  # the wall clock, as TensorBoard's
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if finished.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{finished.stderr[-2000:]}")
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return events.Scalars("train/loss")[0].wall_time - started


def bench_startup(overrides: list[str], settings: BenchSettings) -> dict[str, float]:
    """train.py to its first training step: cold, with an empty token cache, so that it tokenizes the corpus;
    warm, reading the cache the cold run built. Python's own files are in the OS's page cache either way."""
    cold, warm = [], []
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as scratch:
        for repeat in range(settings.startup_repeats):
            cache_dir, runs = Path(scratch) / f"cache{repeat}", Path(scratch) / f"run{repeat}"
            log.info("startup: repeat %d of %d", repeat + 1, settings.startup_repeats)
            cold.append(startup_seconds(overrides, cache_dir, runs / "cold"))
            warm.append(startup_seconds(overrides, cache_dir, runs / "warm"))
    return {"cold_s": statistics.median(cold), "warm_s": statistics.median(warm)}


def bench_tokenization(data_config: DataConfig, settings: BenchSettings) -> dict[str, float]:
    """MB/s (10^6 bytes of UTF-8 text) of encoding the whole corpus with each tokenizer option of configs/tokenizer,
    as train.py would configure it, learned from the training split as the token cache does."""
    text = load_text(data_config)
    train_text = text[: int(len(text) * (1 - data_config.val_fraction))]
    megabytes = len(text.encode("utf-8")) / 1e6
    speeds = {}
    for option in sorted((ROOT / "configs" / "tokenizer").glob("*.yaml")):
        log.info("tokenization: %s", option.stem)
        config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TokenizerConfig), OmegaConf.load(option)))
        tokenizer = train_tokenizer(config, train_text)
        seconds = measure({"encode": partial(encode, tokenizer, text)}, settings, torch.device("cpu"), warmup=0)
        speeds[option.stem] = megabytes / seconds["encode"]
    return {"corpus_mb": megabytes, "mb_per_s": speeds}


# Targets, report.


def target(name: str, value: Optional[float], holds: Callable[[float], bool], shown: str) -> dict[str, Any]:
    if value is None:
        return {"target": name, "measured": None, "holds": None}
    return {"target": name, "measured": shown.format(value), "holds": holds(value)}


def check_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets for a 2-core CPU, as this run measured them; holds is None for what it did not measure.
    Memory grows linearly or quadratically as the measured exponent is nearer 1 or 2."""
    throughput, startup = results.get("throughput", {}), results.get("startup", {})
    speedup = results.get("attention_summary", {}).get("speedup", {}).get("step", {})
    exponent = results.get("attention_summary", {}).get("memory_exponent", {})
    step, layer = exponent.get("step", {}), exponent.get("layer", {})
    linear, quadratic, shown = (lambda v: v < 1.5), (lambda v: v >= 1.5), "exponent {:.2f}"
    return [
        target("full step >= 90% of compute-only throughput", throughput.get("full_over_compute"),
               lambda v: v >= 0.9, "{:.0%}"),
        target("fused step >= 2x faster than explicit at block_size 1024", speedup.get(1024), lambda v: v >= 2,
               "{:.2f}x"),
        target("fused path: step peak memory grows ~linearly", step.get("fused"), linear, shown),
        target("explicit path: step peak memory grows ~quadratically", step.get("explicit"), quadratic, shown),
        target("fused path: attention layer peak memory grows ~linearly", layer.get("fused"), linear, shown),
        target("explicit path: attention layer peak memory grows ~quadratically", layer.get("explicit"), quadratic,
               shown),
        target("warm startup to the first step <= 3 s", startup.get("warm_s"), lambda v: v <= 3, "{:.2f} s"),
        target("cold startup to the first step <= 15 s", startup.get("cold_s"), lambda v: v <= 15, "{:.2f} s"),
    ]  # fmt: skip


def processor_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")  # Linux, where platform.processor() is often empty
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine(device: torch.device, config: TrainConfig) -> dict[str, Any]:
    return {
        "device": str(device),
        "name": torch.cuda.get_device_name(device) if device.type == "cuda" else processor_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "precision": config.trainer.precision.value,
        "compile": config.trainer.compile,
        "load_average_at_start": os.getloadavg()[0],  # above 0 when other work shares the machine
    }


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, ["---"] * len(header), *rows])


def measures_table(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    if throughput := results.get("throughput"):
        matmul = throughput["matmul_size"]
        rows += [
            [f"training, full step (batch {throughput['batch_size']} x block {throughput['block_size']})",
             f"{throughput['full_step_tokens_per_s']:,.0f} tokens/s"],
            ["training, compute only (one preloaded batch)", f"{throughput['compute_tokens_per_s']:,.0f} tokens/s"],
            ["full step / compute only", f"{throughput['full_over_compute']:.0%}"],
            ["model FLOPs per token, training step", f"{throughput['flops_per_token'] / 1e6:.2f} M"],
            ["achieved by the full step", f"{throughput['achieved_flops_per_s'] / 1e9:.1f} GFLOP/s"],
            [f"matmul {matmul}x{matmul}", f"{throughput['matmul_flops_per_s'] / 1e9:.1f} GFLOP/s"],
            ["model-FLOPs utilisation", f"{throughput['mfu']:.0%}"],
        ]  # fmt: skip
    if startup := results.get("startup"):
        rows += [["train.py to its first step, cold (tokenizes the corpus)", f"{startup['cold_s']:.2f} s"],
                 ["train.py to its first step, warm (token cache)", f"{startup['warm_s']:.2f} s"]]  # fmt: skip
    if tokenization := results.get("tokenization"):
        rows += [[f"tokenization, {name} ({tokenization['corpus_mb']:.2f} MB corpus)", f"{speed:.1f} MB/s"]
                 for name, speed in tokenization["mb_per_s"].items()]  # fmt: skip
    return rows


def megabytes(value: Optional[float]) -> str:
    return "not measured" if value is None else f"{value:.0f}"


def attention_table(results: dict[str, Any], part: str) -> str:
    row = {(row["block_size"], row["fused"]): row for row in results["attention"]}
    speedup = results["attention_summary"]["speedup"][part]
    header = ["block_size", "batch", "fused ms", "explicit ms", "speedup", "fused peak MB", "explicit peak MB"]
    return markdown_table(header, [
        [str(block), str(row[block, True]["batch_size"]), f"{row[block, True][f'{part}_ms']:.1f}",
         f"{row[block, False][f'{part}_ms']:.1f}", f"{speedup[block]:.2f}x",
         megabytes(row[block, True][f"{part}_peak_mb"]), megabytes(row[block, False][f"{part}_peak_mb"])]
        for block in sorted(speedup)
    ])  # fmt: skip


def report(results: dict[str, Any]) -> str:
    """The results as Markdown, ready for the README."""
    about = results["machine"]
    parts = [f"{about['name']} ({about['device']}, {about['cpu_count']} cores, {about['torch_threads']} torch "
             f"threads), torch {about['torch']}, precision {about['precision']}, compile {about['compile']}; "
             f"load average {about['load_average_at_start']:.1f} at the start, {about['load_average_at_end']:.1f} "
             "at the end"]  # fmt: skip
    if rows := measures_table(results):
        parts.append(markdown_table(["measure", "median"], rows))
    if "attention" in results:
        exponent = results["attention_summary"].get("memory_exponent", {})
        for part, title in PARTS.items():
            parts += [f"Fused against explicit attention: {title}", attention_table(results, part)]
            if part in exponent:
                growth = ", ".join(f"{path} {value:.2f}" for path, value in exponent[part].items() if value is not None)
                small, large = exponent["between"]
                parts.append(f"Peak memory growth from block_size {small} to {large}, as an exponent (1 linear, "
                             f"2 quadratic): {growth}.")  # fmt: skip
    verdict = {True: "yes", False: "no", None: "-"}
    targets = [[target["target"], target["measured"] or "not measured", verdict[target["holds"]]]
               for target in results["targets"]]  # fmt: skip
    parts.append(markdown_table(["target (2-core CPU)", "measured", "holds"], targets))
    return "\n\n".join(parts)


def bench(config: TrainConfig, settings: BenchSettings, overrides: list[str]) -> dict[str, Any]:
    """Run the chosen sections; `overrides` are handed to train.py for the startup measurement."""
    device = prepare_device(config.trainer.device)
    sections = set(settings.sections)
    if sections & {Section.throughput, Section.attention}:
        data = prepare_tokens(config.data, config.tokenizer)
        config = replace(config, model=replace(config.model, vocab_size=data.tokenizer.get_vocab_size()))
    results: dict[str, Any] = {"machine": machine(device, config), "settings": asdict(settings),
                               "model": asdict(config.model)}  # fmt: skip
    if Section.throughput in sections:
        log.info("throughput: batch %d x block %d", config.trainer.batch_size, config.model.block_size)
        results["throughput"] = bench_throughput(config, settings, device, data.train)
    if Section.attention in sections:
        results["attention"] = bench_attention(config, settings, device)
        results["attention_summary"] = attention_summary(results["attention"])
    if Section.startup in sections:
        results["startup"] = bench_startup(overrides, settings)
    if Section.tokenization in sections:
        results["tokenization"] = bench_tokenization(config.data, settings)
    results["machine"]["load_average_at_end"] = os.getloadavg()[0]
    results["targets"] = check_targets(results)
    return results


@hydra.main(version_base="1.3", config_path="configs", config_name="bench")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    # What the user set for the model, data and trainer goes to train.py for the startup measurement.
    overrides = [item for item in HydraConfig.get().overrides.task if not item.lstrip("+~").startswith("bench.")]
    try:
        config, settings = to_bench_config(cfg)
        results = bench(config, settings, overrides)
    except (ConfigError, DataError) as error:
        sys.exit(f"error: {error}")
    json_path = Path(settings.json_path) if settings.json_path else run_dir / "bench.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2, default=lambda value: value.value) + "\n")  # enums by name
    print(report(results))
    print(f"\nwritten to {json_path}")


if __name__ == "__main__":
    run_with_one_line_errors(main)
