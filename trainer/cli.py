"""Command-line entry points: every mistake a user can make, and every way a run stops early, ends in one line on
stderr and an exit status: 1 for an error, 128 + the signal for a run stopped by one. Every entry point (train.py,
sample.py, attend.py, report.py, bench.py, export.py) runs through run_with_one_line_errors, its work inside
one_line_errors.

Output that goes nowhere stops nothing: a reader that closes stdout early (`| head`) or a full disk under it
(`> /dev/full`) ends no run and misnames nothing (Output)."""

import errno
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Optional, TextIO

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, OverrideParseException
from omegaconf.errors import OmegaConfBaseException

from data import DataError
from trainer import distributed
from trainer.checkpoint import LAST, CheckpointError, remove_unfinished
from trainer.config import ConfigError
from trainer.memory import SIZE_SETTINGS, human
from trainer.overrides import override_key
from trainer.run_dir import RunDirInUse, RunLock, forget_start, removed_sweep_if_refused, unwritten_record
from trainer.stopping import (
    Interrupted,
    NonFiniteLoss,
    StopNow,
    handles_signals,
    resume_command,
    saved_step,
    signals_stop_at_once,
)

# Their messages name the setting, file or directory.
ONE_LINE_ERRORS = (ConfigError, DataError, CheckpointError, NonFiniteLoss, RunDirInUse)
# How torch's CPU and CUDA allocators, numpy and Apple's MPS say that memory ran out (torch raises RuntimeError).
OUT_OF_MEMORY = re.compile(r"can't allocate memory|out of memory|unable to allocate|not enough memory", re.IGNORECASE)


@contextmanager
def one_line_errors(*also: type[Exception]) -> Iterator[None]:
    """Inside an entry point's main function: tinylm's own errors end the process in one line, before Hydra would
    report them (in a sweep, a Ctrl-C then stops the sweep, not only its job). Under torchrun rank 0 alone says it;
    a rank lost mid-run is named by a rank that is left. `also`: the entry point's own errors whose message is one
    line naming what is wrong (report.py's SummaryError)."""
    try:
        yield
    except ONE_LINE_ERRORS + also as error:
        exit_with(f"error: {error}", 1)
    except OSError as error:  # a directory that cannot be written, a full disk: the path and the reason
        exit_with(f"error: {os_error(error)}", 1)
    except yaml.YAMLError as error:  # a run's .hydra files, which report.py reads
        exit_with(f"error: {yaml_error(error)}", 1)
    except (MemoryError, RuntimeError) as error:  # sizes that trainer/memory.py's estimate let through
        if distributed.started and distributed.peer_lost(error):
            lost_rank()
        if not isinstance(error, MemoryError) and not OUT_OF_MEMORY.search(str(error)):
            raise
        exit_with(f"error: {out_of_memory(error)}", 1)
    except (Interrupted, StopNow) as stopped:
        if distributed.started and distributed.peer_lost(stopped):  # torchrun's SIGTERM came as the error unwound
            lost_rank()
        exit_with(str(stopped), stopped.exit_status)
    except KeyboardInterrupt:  # SIGINT where tinylm's handler was not in place: another thread's, a library's
        exit_with(str(StopNow(signal.SIGINT)), 128 + signal.SIGINT)


def exit_with(message: str, status: int) -> None:
    if os.environ.get("RANK", "0") != "0":  # the ranks agree on why they stop: one says so
        sys.exit(status)
    message = printable(message)
    if status == 1:
        sys.exit(message)
    print(message, file=sys.stderr)
    sys.exit(status)


def lost_rank() -> None:
    """A rank of this torchrun ended mid-run (killed, or out of memory) or stopped answering, so the others cannot go
    on. One line, from the lowest rank left, names it and the command that resumes from the last checkpoint, which
    is whole (rank 0 writes each one to a temporary file first); then the process ends at once, as torchrun is about
    to end it (its SIGTERM is ignored from here): the process group's teardown would wait on the lost rank, or abort.
    Called by the main thread, or by trainer/stopping.py's PeerWatch while the main thread waits inside C++: the
    first caller says it, and the process ends before the other could."""
    LOSING.acquire()  # never released: os._exit below
    if handles_signals():
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN)
    ranks = distributed.started
    lost = distributed.lost_ranks(ranks)
    left = [rank for rank in range(ranks.world_size) if rank not in lost]
    if ranks.rank == (min(left) if lost else 0):
        run_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else None
        # One write: torchrun writes on the same stderr, and print's line break would be a write of its own.
        sys.stderr.write(f"error: torchrun: {lost_rank_message(ranks, lost, run_dir)}\n")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(1)


LOSING = threading.Lock()  # held by the one thread that says a rank was lost


def lost_rank_message(ranks: distributed.Ranks, lost: dict[int, str], run_dir: Optional[Path]) -> str:
    """Which rank was lost, the checkpoint that is whole and the command that resumes. A checkpoint write that a
    lost rank 0 left unfinished is removed here: its run directory's lock went with it."""
    if lost:
        named = ", ".join(f"rank {rank} (process {ranks.processes[rank][1]})" for rank in lost)
        what = f"{named} was lost: its process {' or '.join(sorted(set(lost.values())))} mid-run"
    else:  # on another machine
        what = "a rank was lost: its process ended mid-run"
    what += f", and the {'others' if ranks.world_size - len(lost) > 1 else 'other'} cannot train without it"
    if run_dir is None:
        return what
    if 0 in lost:
        with suppress(RunDirInUse, OSError), RunLock(run_dir):
            remove_unfinished(run_dir)
    last = run_dir / LAST
    if not last.exists():
        return f"{what}; no checkpoint had been written yet"
    return f"{what}; {last}{saved_step(last)} is whole. {resume_command(last, ranks.world_size)}"


def run_with_one_line_errors(main: Callable[[], object]) -> None:
    """Run an entry point's main function (train.py's, sample.py's and attend.py's are @hydra.main functions);
    Hydra's own errors (an unknown key, a wrong type, a missing option, a preset that is not YAML) become one line
    too. HYDRA_FULL_ERROR=1, set by the user, shows Hydra's full report with its traceback instead.
    From here on SIGINT and SIGTERM end the process in one line too (StopNow), until the training loop takes them,
    and stdout that cannot be written stops nothing (outputs_that_never_stop). A sweep refused before any job trained
    leaves nothing behind (removed_sweep_if_refused)."""
    forget_start()  # train.py's start is seen afresh by its Hydra callback (trainer/run_dir.py's StartRecord)
    with signals_stop_at_once(), outputs_that_never_stop(), removed_sweep_if_refused():
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            main()
            return
        with one_line_hydra_errors():
            main()


@contextmanager
def one_line_hydra_errors() -> Iterator[None]:
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra then raises its errors here instead of printing several lines
    try:
        yield
    except StopNow as stopped:  # while Hydra composes the config or starts the job
        print(stopped, file=sys.stderr)
        sys.exit(stopped.exit_status)
    except (HydraException, OmegaConfBaseException) as error:
        sys.exit(printable(f"error: {one_line(error)}"))
    except yaml.YAMLError as error:  # a config file of the user's (a preset on hydra.searchpath) that is not YAML
        sys.exit(printable(f"error: {yaml_error(error)}"))
    except OSError as error:  # Hydra cannot make or write the run directory: its record's files name no file
        sys.exit(printable(f"error: {unwritten_record(error) or os_error(error)}"))
    finally:
        del os.environ["HYDRA_FULL_ERROR"]


class Output:
    """sys.stdout or sys.stderr, whose writes never raise: the first that fails (its reader closed it, EPIPE; a full
    disk, ENOSPC) is kept in `failed`, and from then on the stream writes into /dev/null, so that nothing it still
    buffers fails again (Python's flush at exit would end the process with status 120). Logging's console handler,
    print and tqdm all write through it, so a closed or full stdout ends nothing: a run trains on and saves its
    checkpoints, its log whole in train.log."""

    def __init__(self, stream: TextIO, name: str, on_failure: Callable[["Output"], None]):
        self.stream, self.name, self.on_failure = stream, name, on_failure
        self.failed: Optional[OSError] = None

    def write(self, text: str) -> int:
        if self.failed is None:
            try:
                return self.stream.write(text)
            except OSError as error:
                self.fail(error)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.failed is None:
            try:
                self.stream.flush()
            except OSError as error:
                self.fail(error)

    def fail(self, error: OSError) -> None:
        self.failed = error
        try:
            nowhere = os.open(os.devnull, os.O_WRONLY)
            os.dup2(nowhere, self.stream.fileno())  # what the stream still holds is flushed there, at exit
            os.close(nowhere)
        except (OSError, ValueError, AttributeError):  # a stream without a file descriptor (pytest's capture)
            pass
        self.on_failure(self)

    @property
    def closed_by_reader(self) -> bool:
        return isinstance(self.failed, BrokenPipeError) or getattr(self.failed, "errno", None) == errno.EPIPE

    def __getattr__(self, name: str):  # fileno, isatty, encoding, buffer...: the stream's own
        return getattr(self.stream, name)


@contextmanager
def outputs_that_never_stop() -> Iterator[None]:
    """stdout and stderr as Output, for the entry point's whole life. A reader that stopped reading (`| head`) is
    no error: what follows goes nowhere, silently, and the exit status is the work's. stdout that cannot be
    written (a full disk) is said in one line on stderr when it happens, the work goes on to its end, and the exit
    status is then 1 (a clean stop keeps its own): the output asked for was lost."""

    def say(output: Output) -> None:
        if output.name == "stdout" and not output.closed_by_reader and os.environ.get("RANK", "0") == "0":
            sys.stderr.write(
                f"error: stdout: cannot be written ({output.failed.strerror}); the rest of the output goes "
                "nowhere, the work goes on\n"
            )
            sys.stderr.flush()

    originals = sys.stdout, sys.stderr
    stdout = sys.stdout = Output(sys.stdout, "stdout", say) if sys.stdout else None
    sys.stderr = Output(sys.stderr, "stderr", say) if sys.stderr else None
    status: object = 0
    try:
        yield
    except SystemExit as exited:
        status = exited.code
        raise
    except BaseException as error:  # what ends the process otherwise keeps its own report
        status = error
        raise
    finally:
        for output in (sys.stdout, sys.stderr):
            if isinstance(output, Output):
                output.flush()  # what print buffered shows its fault here
        sys.stdout, sys.stderr = originals
        if stdout and stdout.failed and not stdout.closed_by_reader and status in (0, None):
            sys.exit(1)  # the line was said when it failed


def printable(message: str) -> str:
    """The message with what a person typed that does not print (a line break in a path, a byte that is not UTF-8,
    kept by Python as a surrogate) written as its escape, \\n, \\udce9: one line, whatever was typed."""
    if message.isprintable():
        return message
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode() for char in message)


def out_of_memory(error: Exception) -> str:
    """What could not be allocated, the sizes the user set (the likely cause) and the checkpoint that is whole."""
    text = str(error).strip()
    size = re.search(r"allocate (\d+) bytes|allocate ([\d.]+ [KMGTP]i?B)", text)
    if size:
        what = f"could not allocate {human(int(size[1])) if size[1] else size[2]}"
    else:
        what = text.splitlines()[0][:120] if text else type(error).__name__
    job = HydraConfig.get() if HydraConfig.initialized() else None
    typed = [item for item in job.overrides.task if override_key(item) in SIZE_SETTINGS] if job else []
    sizes = (
        f"The sizes set: {' '.join(typed)}; lower them" if typed else f"Lower the sizes ({', '.join(SIZE_SETTINGS)})"
    )
    last = Path(job.runtime.output_dir) / "last.pt" if job else None
    kept = f"; {last}, the last checkpoint, is whole" if last and last.exists() else ""
    return f"out of memory: {what}. {sizes}, or split the batch with trainer.grad_accum_steps{kept}"


def os_error(error: OSError) -> str:
    """PATH: REASON (TensorBoard names its files in bytes); the message alone for an error that names no file."""
    if error.filename is None:
        return str(error)
    name = os.fsdecode(error.filename)
    return f"{name}: {error.strerror}" if error.strerror else f"{name}: {error}"


def yaml_error(error: yaml.YAMLError) -> str:
    """FILE: not YAML (PROBLEM, line L, column C), and where the construct it was in began, if elsewhere."""
    mark, problem = getattr(error, "problem_mark", None), getattr(error, "problem", None)
    if not mark:
        return f"not YAML ({str(error).splitlines()[0]})"
    where = f"{problem or 'not YAML'}, line {mark.line + 1}, column {mark.column + 1}"
    begun = getattr(error, "context_mark", None)
    context = getattr(error, "context", None)
    if begun and context and (begun.line, begun.column) != (mark.line, mark.column):
        where += f"; {context} from line {begun.line + 1}, column {begun.column + 1}"
    return f"{mark.name}: not YAML ({where})"


def one_line(error: Exception) -> str:
    if isinstance(error, OverrideParseException):
        return (
            f"{error.override}: Hydra cannot parse this override; quote a value that has spaces or other "
            f"characters, e.g. 'prompt=\"ROMEO: é\"'"
        )
    cause = error.__cause__
    if isinstance(cause, OmegaConfBaseException) and cause.full_key:
        # "model.d_kk: Key 'd_kk' not in 'ModelConfig'", rather than Hydra's four lines about it
        return f"{cause.full_key}: {str(cause.msg).splitlines()[0]}"
    lines = [line.strip() for line in str(error).split("Config search path")[0].splitlines() if line.strip()]
    return " ".join(lines)
