"""The lesson's runs from a notebook (notebooks/lesson.ipynb): train.py's own entry point, run in the kernel.

    import lab
    size = lab.size()                                      # the presets' own on a GPU, smaller on a CPU; it says which
    leak = lab.train("+experiment=leak", *size.overrides)  # python train.py +experiment=leak ...: the sweep's directory

A run started here is `python train.py OVERRIDES` run in the kernel's process: Hydra composes configs/train.yaml,
train.py's main() checks every setting and writes the run's directory with its Hydra record, checkpoints and
TensorBoard events, a preset runs its whole sweep and writes its summary. Hydra's compose API names the directory
first (the run's hydra.run.dir, a sweep's hydra.sweep.dir, resolved as Hydra resolves them), so that the cell gets it
back; a second run gets a new one, as on the command line. What differs is what a notebook needs: the progress bar
is the notebook's (tqdm.auto in trainer/record.py), the log's lines go to the run's train.log and not into the cell,
and a mistake or a stop ends the cell in one line (`RunFailed`) instead of the process. A kernel interrupt is the
Ctrl-C of the command line: the run saves a checkpoint and stops, and the line says how to resume it; a sweep stopped
so gives its directory back with the call that finishes it, and `summary` and `finished` refuse it until then.
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)

# isort: split

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO


class RunFailed(Exception):
    """A run that could not start or did not end: its one line, which IPython shows instead of a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


@contextmanager
def interrupts_wait(what: str) -> Iterator[None]:
    """A kernel interrupt (SIGINT) while `what` runs waits for it to end, then ends the cell in one line: an
    interrupt raised inside an import would leave a module half initialised, and print its whole traceback."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    came = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: came.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came:
        raise RunFailed(f"{what}: interrupted while it loaded its modules, which it finished first; run the cell again")


with interrupts_wait("import lab"):
    import torch
    from hydra import compose, initialize_config_dir
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from train import main as train_main
    from trainer.cli import one_line_hydra_errors, run_with_one_line_errors
    from trainer.overrides import PARSER, override

CONFIGS = Path(__file__).resolve().parent / "configs"
MULTIRUN = ("-m", "--multirun")  # train.py's flags for a sweep
SWEEP_DIR = "hydra.sweep.dir"
STOPPED: dict[Path, str] = {}  # a sweep stopped before its end in this kernel: the call that finishes it
# Hydra's job logging in a notebook: the cell shows the progress bar and the log's warnings (CellLog); its other lines
# (each evaluation, the sample, the sweep's table) go to the run's train.log alone, and Hydra's own (the jobs it
# launches) nowhere. The "tinylm" log does not reach the root logger, where train.py's logging_redirect_tqdm adds a
# writer of every line for the time of the training loop.
QUIET = ["hydra.job_logging.handlers.console.class=lab.CellLog", "+hydra.job_logging.handlers.console.level=WARNING",
         "+hydra.job_logging.loggers.tinylm.handlers=[console,file]",
         "+hydra.job_logging.loggers.tinylm.propagate=false", "hydra.hydra_logging.root.level=WARNING"]  # fmt: skip


class CellLog(logging.Handler):
    """Hydra's console handler in a notebook, writing the log's lines into the cell's output at its own level. Not a
    StreamHandler: train.py's logging_redirect_tqdm swaps those for handlers of its own, without their level."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        self.stream.write(self.format(record) + "\n")


def train(*overrides: str) -> Path:
    """`python train.py OVERRIDES` in this process: the run's directory (a sweep's, for a preset or -m). A sweep
    stopped before its end gives its directory back all the same, with the line that finishes it, and the cells that
    read it refuse it in one line until then (`finished`)."""
    given = [item for item in overrides if not isinstance(item, str)]
    if given:
        raise RunFailed(
            f"lab.train takes each override as a string of its own, not a {type(given[0]).__name__} ({given[0]!r}): "
            'lab.train("+experiment=leak", "model.d_k=16"), or lab.train(*overrides) to pass a list or a tuple'
        )
    try:
        key, directory = where(overrides)
    except KeyboardInterrupt:
        raise RunFailed("interrupted before the run started; run the cell again") from None
    try:
        status = exit_status(["train.py", *overrides, override(key, str(directory)), *QUIET])
    except KeyboardInterrupt:  # outside the run's own handling of a stop: while it started or ended
        status, outside = 128 + signal.SIGINT, True
    else:
        outside = False
    if status and key == SWEEP_DIR:  # a job's own line, on stderr already, names that job alone
        STOPPED[directory] = finishing_call(overrides, directory)
        print(f"the sweep stopped before its end; finish it with {STOPPED[directory]}", file=sys.stderr)
    elif outside:
        raise RunFailed(f"{directory}: interrupted while the run started or ended, outside its training")
    elif status:
        raise RunFailed(f"the run stopped (exit status {status}), as the line above says")
    else:
        STOPPED.pop(directory, None)
    return directory


def exit_status(argv: list[str]) -> int:
    """train.py's main run as `python ARGV`: 0, or a stop's 128 + the signal; an error is a RunFailed."""
    with command_line(argv):
        try:
            run_with_one_line_errors(train_main)
        except SystemExit as exited:
            if isinstance(exited.code, str):  # an error: its one line
                raise RunFailed(exited.code) from None
            return exited.code or 0
    return 0


def finishing_call(overrides: tuple[str, ...], directory: Path) -> str:
    """The notebook's call that finishes a stopped sweep in `directory`: its jobs resumed, those not begun begun."""
    kept = [item for item in overrides if item.partition("=")[0] not in (SWEEP_DIR, "trainer.resume")]
    arguments = [*kept, override(SWEEP_DIR, str(directory)), "trainer.resume=auto"]
    return f"lab.train({', '.join(json.dumps(item, ensure_ascii=False) for item in arguments)})"


def finished(directory: Path) -> Path:
    """`directory`, once the sweep in it has run to its end (its summary written); else a RunFailed line that says
    how to finish it."""
    if directory in STOPPED or not (directory / "summary.md").exists():
        how = STOPPED.get(directory) or f'lab.train(ITS OVERRIDES, "{SWEEP_DIR}={directory}", "trainer.resume=auto")'
        raise RunFailed(f"{directory}: the sweep is unfinished; finish it with {how}")
    return directory


def summary(directory: Path, *tags: str) -> tuple:
    """A finished sweep's figure (summary.png) and a table of its runs with the final values of `tags` only: the
    sweep's summary.md holds every tag, most of them empty for any one preset."""
    from IPython.display import Image, Markdown

    from summary.runs import read_runs
    from summary.tables import header, row
    from trainer.overrides import distinct_overrides, naming_overrides, shared_overrides

    runs = read_runs([finished(directory)])
    names = [naming_overrides(run.overrides) for run in runs]  # a resume's trainer.resume=auto names no run
    shared = shared_overrides(names)
    lines = header(["run", *tags])
    for run, name in zip(runs, names):
        values = ["" if value is None else f"{value:.3f}" for value in map(run.final, tags)]
        lines.append(row([" ".join(distinct_overrides(name, shared)), *values]))
    return Image(directory / "summary.png"), Markdown("\n".join(lines))


def where(overrides: tuple[str, ...]) -> tuple[str, Path]:
    """Where Hydra will write the run: hydra.run.dir, or hydra.sweep.dir for a sweep (-m, or a preset that sweeps), and
    that directory, resolved now; a setting Hydra cannot compose is a RunFailed here, in one line. The compose API
    composes one job: the values a sweep sweeps are left out, as the directory does not depend on them."""
    settings = [item for item in overrides if item not in MULTIRUN]
    try:
        with one_line_hydra_errors(), initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
            parsed = PARSER.parse_overrides(settings)
            one_job = [item for item, each in zip(settings, parsed) if not each.is_sweep_override()]
            config = compose("train", overrides=one_job, return_hydra_config=True)
    except SystemExit as exited:
        raise RunFailed(str(exited.code)) from None
    sweep = len(settings) < len(overrides) or config.hydra.mode == RunMode.MULTIRUN
    key = SWEEP_DIR if sweep else "hydra.run.dir"
    return key, Path(OmegaConf.select(config, key))


@contextmanager
def command_line(argv: list[str]) -> Iterator[None]:
    """sys.argv as `python ARGV` gives it, and the logging that a run's Hydra sets up put back as it was after (its
    handlers closed): the kernel goes on, and another run's log is not written into this run's train.log."""
    root = logging.getLogger()
    handlers, level, saved = root.handlers[:], root.level, sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers, sys.argv = handlers, saved
        root.setLevel(level)


@dataclass(frozen=True)
class Size:
    """The size the notebook's experiments run at: `overrides` added to each, and why this one."""

    name: str
    overrides: tuple[str, ...]
    why: str

    def __str__(self) -> str:
        return f"size {self.name}: {self.why}"


SIZES = {
    "presets": Size("presets", (), "each experiment at its preset's own size"),
    "cpu": Size("cpu", ("+notebook=cpu",), "configs/notebook/cpu.yaml: 300 steps an experiment"),
    "test": Size("test", ("+notebook=test",), "configs/notebook/test.yaml, the quickest: 60 steps on a short context"),
}
SIZE_SETTING = "TINYLM_NOTEBOOK_SIZE"  # one of SIZES' names, else the size fits the machine


def size() -> Size:
    """The presets' size where a GPU is (CUDA), the CPU's size elsewhere; TINYLM_NOTEBOOK_SIZE, where the environment
    sets it, names the size instead."""
    named = os.environ.get(SIZE_SETTING)
    if named:
        if named not in SIZES:
            raise RunFailed(f"{SIZE_SETTING}={named}: the notebook's sizes are {', '.join(SIZES)}")
        chosen = SIZES[named]
        return Size(chosen.name, chosen.overrides, f"{chosen.why} ({SIZE_SETTING}={named})")
    if torch.cuda.is_available():
        return Size("presets", (), f"{SIZES['presets'].why}, as a GPU is here ({torch.cuda.get_device_name()})")
    return Size("cpu", SIZES["cpu"].overrides, f"{SIZES['cpu'].why}, as no GPU is here")
