"""train.py from process start to its first training step, and the tokenizers' speed."""

import logging
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from benchmark.settings import BenchSettings
from benchmark.timing import measure, with_spread
from data import DataConfig, TokenizerConfig, encode, load_text, train_tokenizer

log = logging.getLogger("tinylm.bench")
ROOT = Path(__file__).resolve().parents[1]


def startup_seconds(overrides: list[str], cache_dir: Path, run_dir: Path) -> float:
    """Seconds from starting `python train.py` to the end of its first training step, read from the wall time
    of the first train/loss value in its TensorBoard events (written as that step ends, step 0's evaluation
    of one batch per split before it)."""
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        *overrides,
        "trainer.max_steps=1",
        "trainer.eval_interval=1",
        "trainer.eval_iters=1",
        "trainer.sample_tokens=0",
        f"data.cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
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
    return with_spread({"cold_s": cold, "warm_s": warm})


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
        speeds[option.stem] = [megabytes / s for s in seconds["encode"]]
    spread = with_spread(speeds)
    return {
        "corpus_mb": megabytes,
        "mb_per_s": {name: spread[name] for name in speeds},
        "mb_per_s_range": {name: spread[f"{name}_range"] for name in speeds},
    }
