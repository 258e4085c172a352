from __future__ import annotations

import atexit
import copy
import functools
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

import fcntl
import importlib
import io
import json
import logging
import multiprocessing
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from multiprocessing.reduction import DupFd
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Hydra, TensorBoard and tinylm's modules (torch with them) are imported in the functions that use them: pytest-xdist's
# controller loads this file too and runs no test, and a worker's test files import them anyway. Imported here, they
# held every worker's start back by the controller's 3 s, a run of the whole suite or of one file alike.
if TYPE_CHECKING:
    from omegaconf import DictConfig
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files that train for real (a `slow` test in them) first, in the order collected, then the quick ones:
    pytest-xdist's two workers take a file at a time in this order (pyproject's addopts), so both end on quick files
    together, not one on a file of runs while the other waits."""
    training = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in training)  # a stable sort: each file's tests stay in their order


def compose_config(*overrides: str) -> DictConfig:
    """configs/train.yaml composed by Hydra, as `python train.py OVERRIDES` would: a copy of its own, which the
    caller may change."""
    return copy.deepcopy(composed(overrides))


@functools.lru_cache(maxsize=256)
def composed(overrides: tuple[str, ...]) -> DictConfig:
    """compose_config's work, once per list of overrides in this process: many tests train or check the same
    settings, and Hydra reads and merges the config files again at every compose. Never handed out: copies are."""
    from hydra import compose, initialize_config_dir

    import train  # noqa: F401  registers the schema, configs/train.yaml's first default

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=list(overrides))


# A short run: 60 steps of a small model, evaluated at 0, 30 and 60, in seconds.
SHORT = [
    "trainer.max_steps=60",
    "trainer.eval_interval=30",
    "trainer.eval_iters=4",
    "trainer.log_interval=10",
    "trainer.batch_size=16",
    "trainer.sample_tokens=8",  # each evaluation's sample is as many forward passes
    "model.block_size=32",
    "model.d_model=64",
    "optim.warmup_steps=10",
]


def short_run(run_dir: Path, cache_dir: Path, *overrides: str) -> dict[str, float]:
    """train.py's train() on SHORT and `overrides`, in this process; returns the last evaluation's losses."""
    import train
    from trainer.config import to_train_config

    run_dir.mkdir(parents=True, exist_ok=True)
    config = to_train_config(compose_config(*SHORT, f"data.cache_dir={cache_dir}", *overrides))
    return train.train(config, run_dir)


def exit_status(exited: SystemExit, stderr) -> int:
    """The status Python's interpreter gives sys.exit(code): 0 for None, the number, else the message printed to
    `stderr` and 1."""
    if exited.code is None or isinstance(exited.code, int):
        return exited.code or 0
    print(exited.code, file=stderr)
    return 1


def cli(script: str, *args: str) -> subprocess.CompletedProcess:
    """`python SCRIPT ARGS` (train.py, sample.py, attend.py, report.py, bench.py, export.py) run in this process, as the
    script's last line runs it (its main through trainer/cli.py's run_with_one_line_errors): what it printed, and its
    exit status as Python gives it (sys.exit's message on stderr and status 1), without a new interpreter's seconds of
    imports. Logging starts as in a new process, with no handler (Hydra's job logging and report.py's basicConfig
    set their own, writing to this stdout and stderr), and is put back as it was after. For the tests whose point is
    not the process itself: signals, a closed or full stdout, torchrun and the commands pasted into bash keep theirs.
    """
    from trainer.cli import run_with_one_line_errors

    main = importlib.import_module(Path(script).stem).main
    stdout, stderr = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level, argv = root.handlers[:], root.level, sys.argv
    root.handlers, sys.argv = [], [script, *args]
    root.setLevel(logging.WARNING)
    try:
        with redirect_stdout(stdout), redirect_stderr(stderr):
            try:
                run_with_one_line_errors(main)
                status = 0
            except SystemExit as exited:
                status = exit_status(exited, stderr)
    finally:
        for handler in root.handlers:  # Hydra's console handler and the run's train.log, now closed
            handler.close()
        root.handlers, sys.argv = handlers, argv
        root.setLevel(level)
    return subprocess.CompletedProcess([script, *args], status, stdout.getvalue(), stderr.getvalue())


# Forked's children come from one server process per worker that imported train.py's modules once, torch's
# compiler (which AdamW imports) and matplotlib (which an evaluation's attention maps import) among them, and then
# forks a child per run: a child starts in milliseconds, where a new interpreter takes seconds of imports, and from a
# process with no other thread (this one has tensorboard's writers and the runs' background threads, whose locks a
# fork could copy held).
FORKS = multiprocessing.get_context("forkserver")
FORKS.set_forkserver_preload(["conftest", "train", "torch._dynamo", "matplotlib.figure"])


class Forked:
    """`python -u train.py ARGS` (with `patch` run first) in a process of its own, as subprocess.Popen(text=True)
    gives it, for the tests that signal or kill a run, forked from the server above. The child starts as a new
    process would: SIGINT and SIGTERM at their defaults (default_sigint), no logging handler, its own stdout and
    stderr (pipes, or /dev/null for stdout), in `cwd`. Where the process's start is the point (a stop while torch is
    imported), a test starts a new interpreter instead."""

    def __init__(
        self, *args: str, patch: str = "", cwd: Path = ROOT, stdout: bool = True, main: str | None = "train"
    ) -> None:
        out_read, out_write = os.pipe() if stdout else (None, os.open(os.devnull, os.O_WRONLY))
        err_read, err_write = os.pipe()
        argv = [f"{main}.py" if main else "-c", *args]  # as sys.argv reads in `python SCRIPT ARGS`, `python -c`
        self.process = FORKS.Process(
            target=run_forked,
            args=(argv, patch, main, str(cwd), DupFd(out_write), DupFd(err_write)),
            daemon=True,
        )
        self.process.start()
        os.close(out_write)
        os.close(err_write)
        self.pid = self.process.pid
        self.stdout = open(out_read, encoding="utf-8") if stdout else None
        self.stderr = open(err_read, encoding="utf-8")

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode  # -N for a process ended by signal N, as Popen's

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float = 120) -> int:
        self.process.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["train.py"], timeout)
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float = 120) -> tuple[str | None, str]:
        """Its exit, then what it printed (a child that prints more than a pipe holds would never exit: none here)."""
        self.wait(timeout)
        return (self.stdout.read() if self.stdout else None), self.stderr.read()


def run_forked(argv: list[str], patch: str, main: str | None, cwd: str, stdout: DupFd, stderr: DupFd) -> None:
    """The child of Forked: `patch`, then the script's last line (`main`'s main through trainer/cli.py; None: the
    patch is the whole program, as `python -c PATCH ARGS`), then os._exit with its status."""
    from trainer.cli import run_with_one_line_errors

    status = 1
    try:
        os.dup2(stdout.detach(), 1)
        os.dup2(stderr.detach(), 2)
        os.chdir(cwd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", write_through=True)
        logging.getLogger().handlers = []
        logging.getLogger().setLevel(logging.WARNING)
        sys.argv = argv
        exec(f"import sys, time, torch\n{patch}", {})
        if main:
            run_with_one_line_errors(importlib.import_module(main).main)
        status = 0
    except SystemExit as exited:
        status = exit_status(exited, sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        logging.shutdown()
        os._exit(status)


def wait_for(run: "Forked | subprocess.Popen", text: str) -> None:
    """Reads the run's stdout until a line holds `text`; fails, with its stderr, if the run ends first."""
    for line in run.stdout:
        if text in line:
            return
    raise AssertionError(f"the run ended before printing {text!r}: {run.stderr.read()}")


def default_sigint() -> None:
    """A subprocess.Popen preexec_fn for a child a test stops with SIGINT: a shell that starts a job in the
    background (as a CI runner may) leaves SIGINT ignored in it, and tinylm leaves an ignored signal ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def train_sweep(sweep_dir: Path, cache_dir: Path, *overrides: str) -> Path:
    """`python train.py -m OVERRIDES` into `sweep_dir`, as a user runs a sweep (in this process: cli); fails the
    test if it fails."""
    result = cli("train.py", "-m", *overrides, f"data.cache_dir={cache_dir}", f"hydra.sweep.dir={sweep_dir}")
    assert result.returncode == 0, result.stderr
    return sweep_dir


def events(run_dir: Path) -> EventAccumulator:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def curve(accumulator: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One token cache for the whole session, so the corpus is tokenized once."""
    return tmp_path_factory.mktemp("token-cache")


def shared_dir(tmp_path_factory) -> Path:
    """The session's directory that every pytest-xdist worker sees (each worker's own tmp_path_factory lies in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


def made_once(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """SESSION/shared/NAME, made by `make` once in the session, by whichever worker asks first; the others wait for
    it (a lock across the workers) and then read it. What is made once is read by many tests: none may write into
    it (a test that changes a run works on its own copy)."""
    shared = shared_dir(tmp_path_factory) / "shared"
    shared.mkdir(exist_ok=True)
    made, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(made, ignore_errors=True)  # what a failed attempt left
            make(made)
            done.touch()
    return made


@pytest.fixture(scope="session")
def shared_cache_dir(tmp_path_factory) -> Path:
    """The token cache of the runs made once per session (made_once), beside them; the tests' own runs keep theirs."""
    return made_once(tmp_path_factory, "token-cache", lambda path: path.mkdir())


# SHORT with a checkpoint every 20 steps, trained once per session in this process and read by several files
# (checkpoints, curves, samples, the reference of the kill-and-resume runs). Nothing writes into it.
SHORT_RUN = ["trainer.ckpt_interval=20"]


@pytest.fixture(scope="session")
def short_run_dir(tmp_path_factory, shared_cache_dir) -> Path:
    return made_once(tmp_path_factory, "short-run", lambda path: short_run(path, shared_cache_dir, *SHORT_RUN))


# The encoder's task at SHORT's size: fill in the blank, 40% of each window hidden, QK-norm, as +experiment=encoder.
BLANKS = ["task=fill_blank", "task.blank_share=0.4", "model.qk_norm=true", "trainer.batch_size=32",
          "trainer.max_steps=300", "trainer.eval_interval=150"]  # fmt: skip


@pytest.fixture(scope="session")
def blank_run_dir(tmp_path_factory, shared_cache_dir) -> Path:
    """A run of BLANKS reading both sides of each blank (model.causal=false), trained once per session: read only."""
    make = lambda path: short_run(path, shared_cache_dir, *BLANKS, "model.causal=false")  # noqa: E731
    return made_once(tmp_path_factory, "blank-run", make)


# The leak preset's two jobs (model.causal=true,false) at a size that trains in a second: trained once per session
# (made_once) and read by the Attention tab's routes, its page in a browser, attend.py and the sweep summary.
SWEEP = ["trainer.max_steps=10", "trainer.eval_interval=5", "trainer.eval_iters=2", "trainer.log_interval=5",
         "trainer.batch_size=8", "trainer.sample_tokens=4", "model.block_size=32", "model.d_model=32",
         "model.d_k=16", "model.d_v=16", "optim.warmup_steps=2"]  # fmt: skip


@pytest.fixture(scope="session")
def leak_sweep(tmp_path_factory, shared_cache_dir) -> Path:
    """`python train.py +experiment=leak SWEEP`: jobs 0_... (masked) and 1_... (unmasked), read only."""
    return made_once(
        tmp_path_factory, "leak-sweep", lambda path: train_sweep(path, shared_cache_dir, "+experiment=leak", *SWEEP)
    )


@pytest.fixture(scope="session")
def sweep_tensorboard(leak_sweep, tmp_path_factory) -> Iterator[str]:
    """`tensorboard --logdir LEAK_SWEEP --port 0`, as a user starts it, for the tests that only read from it (the page
    in a browser, the scalars, HParams and Custom Scalars): its address, once it has read both jobs. One per worker
    that asks."""
    from attention_browser import tensorboard

    with tensorboard(leak_sweep, tmp_path_factory.mktemp("tensorboard") / "tensorboard.log") as url:
        deadline = time.monotonic() + 60
        while len(get_json(url + "data/runs")) < 2:  # it reads the logdir in the background
            assert time.monotonic() < deadline, "tensorboard did not list both jobs"
            time.sleep(0.2)
        yield url


def get_json(url: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)
