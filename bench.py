"""Benchmark tinylm on this machine: training throughput, FLOP utilisation, fused against explicit attention,
attention against recurrence (the serial cost), startup time and tokenization speed. Every figure is the median of
several repeats after a warm-up.

    python bench.py                                               # everything: about 3.5 minutes on a 2-core CPU
    python bench.py bench.sections=[attention]                    # throughput, attention, startup, tokenization
    python bench.py trainer.precision=bf16 trainer.compile=true   # as train.py would train with these settings

It prints Markdown tables and writes every figure to bench.json in its run directory (outputs/bench/DATE/TIME;
bench.json_path=FILE.json to choose). Settings: BenchSettings in benchmark/settings.py; the model, data and trainer
as in train.py.
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)

# isort: split

import json
import logging
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from benchmark.recurrence import bench_recurrence, recurrence_summary
from benchmark.report import bench_markdown, check_targets, machine
from benchmark.settings import BenchSettings, Section
from benchmark.startup import bench_startup, bench_tokenization
from benchmark.training import attention_summary, bench_attention, bench_throughput
from data import prepare_tokens
from task import task_for
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.config import ConfigError, TrainConfig, to_train_config, to_typed
from trainer.distributed import pick_device
from trainer.memory import FLOAT, device_memory, human, machine_memory, shortfall
from trainer.overrides import override_key

log = logging.getLogger("tinylm.bench")
logging.getLogger("tensorboard").setLevel(logging.WARNING)  # its event reader logs each file it has read


@dataclass
class BenchConfig(TrainConfig):
    bench: BenchSettings = field(default_factory=BenchSettings)


ConfigStore.instance().store(name="bench_schema", node=BenchConfig)  # the first entry of configs/bench.yaml


def to_bench_config(cfg: DictConfig) -> tuple[TrainConfig, BenchSettings]:
    """The composed config as typed objects, every value checked as train.py checks its own; raises ConfigError."""
    config = to_train_config(OmegaConf.masked_copy(cfg, [key for key in cfg if key != "bench"]))
    settings = to_typed(BenchConfig, {"bench": OmegaConf.to_container(cfg.bench)}).bench
    problems = [
        f"bench.{key}={getattr(settings, key)}: must be positive"
        for key in ("repeats", "startup_repeats", "repeat_seconds", "attention_batch_size", "matmul_size")
        if getattr(settings, key) <= 0
    ]
    if settings.warmup_steps < 0:
        problems.append(f"bench.warmup_steps={settings.warmup_steps}: must not be negative")
    parts = config.trainer.grad_accum_steps
    if settings.attention_batch_size % parts:  # the training step splits it in as many parts as train.py does
        problems.append(
            f"bench.attention_batch_size={settings.attention_batch_size}: must be a multiple of {parts}, "
            f"trainer.grad_accum_steps"
        )
    if not all(size > 0 for size in settings.block_sizes):
        problems.append(f"bench.block_sizes={settings.block_sizes}: must be positive")
    if not problems:
        problems = memory_problems(config, settings)
    if problems:
        raise ConfigError("; ".join(problems))
    return config, settings


def memory_problems(config: TrainConfig, settings: BenchSettings) -> list[str]:
    """The sizes no machine here can hold: the attention comparison trains bench.attention_batch_size sequences at
    each of bench.block_sizes on the explicit path too (trainer/memory.py's estimate); the matmul holds three n x n
    matrices."""
    sections, problems = set(settings.sections), []
    compared = settings.attention_batch_size, settings.block_sizes
    for block_size in settings.block_sizes if Section.attention in sections else []:
        model = replace(config.model, block_size=block_size, fused=False)
        trainer = replace(config.trainer, batch_size=settings.attention_batch_size, eval_iters=0)
        if short := shortfall(replace(config, model=model, trainer=trainer), vocab_size=1):
            problems.append(
                "bench.attention_batch_size={}, bench.block_sizes={}: the attention comparison at block size {} {}; "
                "lower them".format(*compared, block_size, short.says())
            )
            break
    available, where = device_memory(config.trainer.device) or (machine_memory(), "this machine's memory")
    matrices = 3 * settings.matmul_size**2 * FLOAT
    if Section.throughput in sections and matrices > available:
        problems.append(
            f"bench.matmul_size={settings.matmul_size}: its matmul needs {human(matrices)} (three n x n matrices), "
            f"more than the {human(available)} of {where}; lower it"
        )
    return problems


def check_json_path(json_path: Path, setting: Optional[str]) -> None:
    """Where bench.json goes, made and checked before minutes of measuring, not after them."""
    if json_path.is_dir():
        raise ConfigError(f"bench.json_path={setting}: is a directory; name a file in it, e.g. bench.json")
    # A slip of the name such as RUN/last.pt would be overwritten, after minutes of measuring.
    if json_path.suffix.lower() != ".json":
        raise ConfigError(f"bench.json_path={setting}: the JSON file to write, a name ending in .json, e.g. bench.json")
    if file := next((parent for parent in json_path.parents if parent.exists() and not parent.is_dir()), None):
        raise ConfigError(f"bench.json_path={setting}: {file} is a file, not a directory")
    json_path.parent.mkdir(parents=True, exist_ok=True)


def bench(config: TrainConfig, settings: BenchSettings, overrides: list[str]) -> dict[str, Any]:
    """Run the chosen sections; `overrides` are handed to train.py for the startup measurement."""
    device = pick_device(config.trainer.device)
    sections = set(settings.sections)
    if sections & {Section.throughput, Section.attention}:
        data = prepare_tokens(config.data, config.tokenizer)
        task = task_for(config, data.tokenizer)
        config = replace(config, model=replace(config.model, vocab_size=task.tokenizer.get_vocab_size()))
    results: dict[str, Any] = {
        "machine": machine(device, config),
        "settings": asdict(settings),
        "model": asdict(config.model),
    }
    if Section.throughput in sections:
        log.info("throughput: batch %d x block %d", config.trainer.batch_size, config.model.block_size)
        results["throughput"] = bench_throughput(config, settings, device, task, data.train)
    if Section.attention in sections:
        results["attention"] = bench_attention(config, settings, device)
        results["attention_summary"] = attention_summary(results["attention"])
    if Section.recurrence in sections:
        results["recurrence"] = bench_recurrence(config, settings, device)
        results["recurrence_summary"] = recurrence_summary(results["recurrence"])
    if Section.startup in sections:
        results["startup"] = bench_startup(overrides, settings)
    if Section.tokenization in sections:
        results["tokenization"] = bench_tokenization(config.data, settings)
    results["machine"]["load_average_at_end"] = os.getloadavg()[0]
    results["targets"] = check_targets(results)
    return results


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="bench")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    # What the user set for the model, data and trainer goes to train.py for the startup measurement.
    overrides = [item for item in HydraConfig.get().overrides.task if not override_key(item).startswith("bench.")]
    with one_line_errors():
        config, settings = to_bench_config(cfg)
        json_path = Path(settings.json_path).expanduser() if settings.json_path else run_dir / "bench.json"
        check_json_path(json_path, settings.json_path)
        results = bench(config, settings, overrides)
        json_path.write_text(json.dumps(results, indent=2, default=lambda value: value.value) + "\n")  # enums by name
    print(bench_markdown(results))
    print(f"\nwritten to {json_path}")


if __name__ == "__main__":
    run_with_one_line_errors(main)
