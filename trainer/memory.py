"""What a run's settings will need of memory, estimated before any work starts, against what the machine has: sizes
that clearly cannot fit are refused in one line naming the settings, instead of an allocator's traceback minutes
later. The estimate is a floor (the big tensors only), so a run it refuses could never have run; one it lets
through may still run out, which trainer/cli.py reports in one line too."""

import os
from dataclasses import dataclass, fields, replace
from typing import Optional

import torch

from data import TokenizerKind
from model import parameters_of, stores_scores
from trainer.config import ConfigError, TrainConfig

FLOAT = 4  # bytes of a float32: weights, gradients and the optimizer's moments stay float32 under autocast
TOKEN_ID = 8  # bytes of an int64 token id, as a batch hands them to the model
PER_PARAMETER = 4 * FLOAT  # the weight, its gradient and AdamW's two moments
UNITS = ("bytes", "KB", "MB", "GB", "TB", "PB")
# The tokenizers library allocates this much per vocabulary entry before it learns a merge (docs/benchmark.md has
# the measurement); failing, it aborts the process, which no handler can catch.
BPE_TRAINER_BYTES = 70
SIZE_SETTINGS = [
    "model.d_model",
    "model.d_k",
    "model.d_v",
    "model.n_layer",
    "model.block_size",
    "tokenizer.vocab_size",
    "trainer.batch_size",
    "trainer.eval_iters",
]


@dataclass
class Need:
    """One big piece of a run's memory, and the settings that make it big."""

    what: str
    bytes: float
    settings: list[str]


def needs(config: TrainConfig, vocab_size: int) -> tuple[list[Need], list[Need]]:
    """The pieces that live on the training device at the same time, and those on the host: the batch being built
    and, for tokenizer=bpe, what its trainer allocates up front."""
    model, trainer = config.model, config.trainer
    parameters = parameters_of(replace(model, vocab_size=vocab_size))
    tokens = trainer.batch_size // trainer.grad_accum_steps * model.block_size  # of one micro-batch
    per_token = model.n_layer * (13 * model.d_model + 2 * model.d_k + 2 * model.d_v) + 3 * vocab_size
    scores = 3 * model.n_layer * model.block_size if stores_scores(model) else 0  # the reference path's (T, T)
    windows = trainer.batch_size * (model.block_size + 1)
    device = [
        Need(
            f"the weights, their gradients and AdamW's two moments: {parameters:,} parameters x {PER_PARAMETER} bytes",
            parameters * PER_PARAMETER,
            ["model.d_model", "model.d_k", "model.d_v", "model.n_layer", "model.block_size", "tokenizer.vocab_size"],
        ),
        Need(
            f"one training step's activations: {tokens:,} tokens",
            tokens * (per_token + scores) * FLOAT,
            ["trainer.batch_size", "model.block_size", "model.d_model", "model.n_layer", "model.d_k", "model.d_v"],
        ),
        Need(
            f"an evaluation's {trainer.eval_iters} batches of {trainer.batch_size} windows",
            trainer.eval_iters * windows * TOKEN_ID,
            ["trainer.eval_iters", "trainer.batch_size", "model.block_size"],
        ),
    ]
    # numpy's index array, the gathered ids and their int64 copy
    host = [Need(f"building a batch of {trainer.batch_size} windows", 3 * windows * TOKEN_ID, ["trainer.batch_size"])]
    if config.tokenizer.vocab_size:
        host.append(
            Need(
                f"the BPE trainer's tables for {config.tokenizer.vocab_size:,} tokens",
                config.tokenizer.vocab_size * BPE_TRAINER_BYTES,
                ["tokenizer.vocab_size"],
            )
        )
    return device, host


def machine_memory() -> int:
    """This machine's memory in bytes, or the container's limit where that is lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = open("/sys/fs/cgroup/memory.max").read().strip()  # cgroup v2; "max" when unlimited
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def free_bytes(device: torch.device) -> Optional[int]:
    """The memory `device` has free now; None where that cannot be read."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as meminfo:  # Linux; MemAvailable counts the page cache that can be freed
            fields = dict(line.split(":", 1) for line in meminfo)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def device_memory(device_name: str) -> Optional[tuple[int, str]]:
    """The memory of the GPU the run will train on and its name, or None where it trains in the host's memory
    (a CPU, or Apple's unified memory)."""
    wants_cuda = device_name.startswith("cuda") or (device_name == "auto" and torch.cuda.is_available())
    if not wants_cuda or not torch.cuda.is_available():  # an absent GPU is trainer/distributed.py's to report
        return None
    index = torch.device(device_name).index if device_name.startswith("cuda") else None
    properties = torch.cuda.get_device_properties(index or 0)
    return properties.total_memory, f"the GPU's memory ({properties.name})"


@dataclass
class Shortfall:
    """Settings that need more memory than there is: how much, the biggest piece, and what the machine has."""

    needed: float
    biggest: Need
    available: int
    where: str

    def says(self) -> str:
        return (
            f"needs at least {human(self.needed)} ({self.biggest.what}), more than the {human(self.available)} of "
            f"{self.where}"
        )


def shortfall(config: TrainConfig, vocab_size: int) -> Optional[Shortfall]:
    """Where these settings cannot fit this machine, or None where they may."""
    device, host = needs(config, vocab_size)
    gpu = device_memory(config.trainer.device)
    ram, here = machine_memory(), "this machine's memory"
    checks = [(device, *gpu), (host, ram, here)] if gpu else [(device + host, ram, here)]
    for pieces, available, where in checks:
        needed = sum(piece.bytes for piece in pieces)
        if needed > available:
            return Shortfall(needed, max(pieces, key=lambda piece: piece.bytes), available, where)
    return None


def memory_problem(config: TrainConfig, vocab_size: int) -> Optional[str]:
    """Why these settings cannot fit this machine, naming them, or None where they may."""
    if not (short := shortfall(config, vocab_size)):
        return None
    named = ", ".join(f"{key}={value_of(config, key)}" for key in changed(config, short.biggest.settings))
    return f"{named}: this run {short.says()}; lower {'it' if ',' not in named else 'them'}"


def check_memory(config: TrainConfig) -> None:
    """Refuses, naming the settings, sizes that cannot fit this machine: before any work, after the range checks."""
    # The vocabulary comes from the text later; a BPE one has its 256 bytes at least, a char one a character.
    try:
        too_big = memory_problem(config, vocab_size=256 if config.tokenizer.kind is TokenizerKind.bpe else 1)
    except OverflowError:
        named = ", ".join(f"{key}={value_of(config, key)}" for key in changed(config, SIZE_SETTINGS))
        lower = "it" if "," not in named else "them"
        too_big = f"{named}: a tensor of this run would hold over 2**63 bytes, more than torch allocates; lower {lower}"
    if too_big:
        raise ConfigError(too_big)


def value_of(config: TrainConfig, key: str) -> object:
    group, name = key.split(".")
    return getattr(getattr(config, group), name)


def changed(config: TrainConfig, keys: list[str]) -> list[str]:
    """Those of `keys` the user moved from their defaults (all that are set if none was moved)."""
    defaults = {
        f"{group.name}.{setting.name}": setting.default
        for group in fields(config)
        for setting in fields(group.default_factory())
        if not callable(setting.default)
    }
    keys = [key for key in keys if value_of(config, key) is not None]  # a char vocabulary has no setting
    moved = [key for key in keys if value_of(config, key) != defaults.get(key)]
    return moved or keys


def human(size: float) -> str:
    power = 0
    while size >= 1000 and power < len(UNITS) - 1:
        size, power = size / 1000, power + 1
    return f"{size:.0f} bytes" if power == 0 else f"{size:.1f} {UNITS[power]}"
