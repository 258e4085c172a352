"""Command-line entry points: every mistake a user can make, and every way a run stops early, ends in one line on
stderr and an exit status: 1 for an error, 128 + the signal for a run stopped by one."""

import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, OverrideParseException
from omegaconf.errors import OmegaConfBaseException

from data import DataError
from trainer.checkpoint import CheckpointError
from trainer.config import ConfigError
from trainer.memory import SIZE_SETTINGS, human
from trainer.overrides import override_key
from trainer.run_dir import RunDirInUse
from trainer.stopping import Interrupted, NonFiniteLoss, StopNow, signals_stop_at_once

# Their messages name the setting, file or directory.
ONE_LINE_ERRORS = (ConfigError, DataError, CheckpointError, NonFiniteLoss, RunDirInUse)
# How torch's CPU and CUDA allocators, numpy and Apple's MPS say that memory ran out (torch raises RuntimeError).
OUT_OF_MEMORY = re.compile(r"can't allocate memory|out of memory|unable to allocate|not enough memory", re.IGNORECASE)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Inside a @hydra.main function: tinylm's own errors end the process in one line, before Hydra would report
    them (in a sweep, a Ctrl-C then stops the sweep, not only its job). Under torchrun rank 0 alone says it."""
    try:
        yield
    except ONE_LINE_ERRORS as error:
        exit_with(f"error: {error}", 1)
    except OSError as error:  # a directory that cannot be written, a full disk: the path and the reason
        exit_with(f"error: {os_error(error)}", 1)
    except (MemoryError, RuntimeError) as error:  # sizes that trainer/memory.py's estimate let through
        if not isinstance(error, MemoryError) and not OUT_OF_MEMORY.search(str(error)):
            raise
        exit_with(f"error: {out_of_memory(error)}", 1)
    except (Interrupted, StopNow) as stopped:
        exit_with(str(stopped), stopped.exit_status)
    except KeyboardInterrupt:  # SIGINT where tinylm's handler was not in place: another thread's, a library's
        exit_with(str(StopNow(signal.SIGINT)), 128 + signal.SIGINT)


def exit_with(message: str, status: int) -> None:
    if os.environ.get("RANK", "0") != "0":  # the ranks agree on why they stop: one says so
        sys.exit(status)
    if status == 1:
        sys.exit(message)
    print(message, file=sys.stderr)
    sys.exit(status)


def run_with_one_line_errors(main: Callable[[], object]) -> None:
    """Run a @hydra.main function; Hydra's own errors (an unknown key, a wrong type, a missing option) become
    one line too. HYDRA_FULL_ERROR=1, set by the user, shows Hydra's full report with its traceback instead.
    From here on SIGINT and SIGTERM end the process in one line too (StopNow), until the training loop takes them."""
    with signals_stop_at_once():
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
        sys.exit(f"error: {one_line(error)}")
    except OSError as error:  # Hydra cannot make or write the run directory
        sys.exit(f"error: {os_error(error)}")
    finally:
        del os.environ["HYDRA_FULL_ERROR"]


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
    return f"{error.filename}: {error.strerror}" if error.filename else str(error)


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
