import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile

# Tests never touch the network, and keep the HF datasets cache out of the user's home.
# Both must be set before `datasets` is first imported.
os.environ["HF_HUB_OFFLINE"] = "1"
if "HF_DATASETS_CACHE" not in os.environ:
    os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="tinylm-hf-")
    atexit.register(shutil.rmtree, os.environ["HF_DATASETS_CACHE"], ignore_errors=True)
# The suite runs in two pytest-xdist workers (pyproject's addopts): each, and the train.py processes it starts,
# computes on one thread, so that the two share the cores instead of fighting over them.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import train
from trainer.config import register_schema, to_train_config

ROOT = Path(__file__).resolve().parents[1]
register_schema()


def compose_config(*overrides: str) -> DictConfig:
    """configs/train.yaml composed by Hydra, as `python train.py OVERRIDES` would."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=list(overrides))


# A short run: 60 steps of a small model, evaluated at 0, 30 and 60, in seconds.
SHORT = [
    "trainer.max_steps=60",
    "trainer.eval_interval=30",
    "trainer.eval_iters=4",
    "trainer.log_interval=10",
    "trainer.batch_size=16",
    "trainer.sample_tokens=40",
    "model.block_size=32",
    "model.d_model=64",
    "optim.warmup_steps=10",
]


def short_run(run_dir: Path, cache_dir: Path, *overrides: str) -> dict[str, float]:
    """train.py's train() on SHORT and `overrides`, in this process; returns the last evaluation's losses."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = to_train_config(compose_config(*SHORT, f"data.cache_dir={cache_dir}", *overrides))
    return train.train(config, run_dir)


def default_sigint() -> None:
    """A subprocess.Popen preexec_fn for a child a test stops with SIGINT: a shell that starts a job in the
    background (as a CI runner may) leaves SIGINT ignored in it, and tinylm leaves an ignored signal ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def train_sweep(sweep_dir: Path, cache_dir: Path, *overrides: str) -> Path:
    """`python train.py -m OVERRIDES` into `sweep_dir`, as a user runs a sweep; fails the test if it fails."""
    result = subprocess.run(
        [sys.executable, "train.py", "-m", *overrides, f"data.cache_dir={cache_dir}", f"hydra.sweep.dir={sweep_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return sweep_dir


def events(run_dir: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def curve(accumulator: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One token cache for the whole session, so the corpus is tokenized once."""
    return tmp_path_factory.mktemp("token-cache")
