"""How a run stops early: on a signal (with a checkpoint to resume from, or at once) or on a non-finite loss."""

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

from trainer.checkpoint import LAST, glance, remove_unfinished
from trainer.distributed import Ranks, unanswering
from trainer.resume import resume_override
from trainer.startup import IMPORT_MACHINERY, SIGNALS, script, stop_while_starting

RETRY_SECONDS = 0.05  # a signal that came during an import is taken again this much later
WATCH_SECONDS = 0.2  # how often PeerWatch looks at the other ranks once a signal came
LOST_SECONDS = 1.0  # how long they must have been lost while this rank waits, before PeerWatch says so
READERS = ("sample.py", "attend.py", "report.py", "export.py")  # the entry points that read runs and train none


class StopNow(KeyboardInterrupt):
    """A signal that ends the process at once: SIGINT or SIGTERM outside the training loop, or a second Ctrl-C in it.
    A KeyboardInterrupt, not an Exception, so no `except Exception` takes it for a failure and every `finally` runs;
    `checkpoint` is the run's last.pt when it came during the loop."""

    def __init__(self, received: signal.Signals, checkpoint: Optional[Path] = None):
        super().__init__(received, checkpoint)
        self.received, self.checkpoint = received, checkpoint
        self.exit_status = 128 + received  # the shell's convention for a process ended by a signal

    def __str__(self) -> str:
        if self.checkpoint is None and script() in READERS:
            return (
                f"stopped by {self.received.name} before {script()} finished; it writes no checkpoint, and the runs "
                "it reads are as they were: run it again for what it writes"
            )
        if self.checkpoint is None:
            return (
                f"stopped by {self.received.name} outside the training loop, where no checkpoint is written: "
                "any checkpoint already in the run directory is whole"
            )
        whole = (
            f"{self.checkpoint}{saved_step(self.checkpoint)} is whole. {resume_command(self.checkpoint)}"
            if self.checkpoint.exists()
            else "no checkpoint had been written yet"
        )
        return f"stopped at once by a second {self.received.name}; a checkpoint being written was dropped, {whole}"


def saved_step(checkpoint: Path) -> str:
    """ " (step N)", read without loading the tensors; "" if the file does not say."""
    seen = glance(checkpoint)
    return f" (step {seen['step']})" if seen else ""  # the message is still true without the step


def resume_command(checkpoint: Path, processes: Optional[int] = None) -> str:
    processes = processes or int(os.environ.get("WORLD_SIZE", "1"))  # torchrun sets it for every rank
    launcher = f"torchrun --standalone --nproc_per_node={processes}" if processes > 1 else "python"
    return f"Resume with: {launcher} train.py {resume_override(checkpoint.parent)}"


def handles_signals() -> bool:
    return threading.current_thread() is threading.main_thread()  # only the main thread may handle signals


def importing(frame) -> bool:
    """Whether the main thread, interrupted at `frame`, is inside an import: an exception raised there could leave a
    module half initialised (imported again, it fails with "ImportError: initialization failed"), or be swallowed
    by the module's own code, and the run go on as if no signal had come."""
    while frame is not None:
        if frame.f_code.co_filename in IMPORT_MACHINERY:
            return True
        frame = frame.f_back
    return False


def take_again_later(number: int) -> None:
    """The signal again, RETRY_SECONDS from now, from another thread: once the import is done, it stops the run."""
    timer = threading.Timer(RETRY_SECONDS, os.kill, (os.getpid(), number))
    timer.daemon = True
    timer.start()


@contextmanager
def signals_stop_at_once() -> Iterator[None]:
    """While active, SIGINT or SIGTERM raises StopNow (Python's default SIGTERM would end the process without a
    word or any cleanup); further ones are ignored while it unwinds. One that comes during an import is taken again
    once the import is done (`importing`). A signal ignored (nohup, a background job) stays ignored; the one-line
    stop of the entry point's start (trainer/startup.py) gives way. The training loop's StopSignals takes over
    within."""
    if not handles_signals():
        yield
        return
    received = []

    def handle(number: int, frame) -> None:
        if received:
            return
        if importing(frame):
            take_again_later(number)
            return
        received.append(number)
        raise StopNow(signal.Signals(number))

    previous = {
        number: signal.signal(number, handle)
        for number in SIGNALS
        if signal.getsignal(number) in (signal.SIG_DFL, signal.default_int_handler, stop_while_starting)
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class StopSignals:
    """While active, SIGINT (Ctrl-C) and SIGTERM (kill, a cluster's preemption) only ask the loop to stop after
    its current step; `requested` says which came. A Ctrl-C after that stops at once (StopNow), without waiting
    for the checkpoint being written; the unfinished file it leaves in `run_dir` is removed."""

    def __init__(self, run_dir: Optional[Path] = None) -> None:
        self.requested: Optional[signal.Signals] = None
        self.previous: dict = {}
        self.run_dir = run_dir
        self.stopping = False

    def __enter__(self) -> "StopSignals":
        if handles_signals():
            self.previous = {number: signal.signal(number, self.handle) for number in SIGNALS}
        return self

    def __exit__(self, kind, error, traceback) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        if isinstance(error, StopNow) and self.run_dir:  # the run directory's lock is still held: the files are ours
            remove_unfinished(self.run_dir)

    def handle(self, number: int, frame) -> None:
        if self.stopping:  # the process is already on its way out
            return
        if self.requested and number == signal.SIGINT:
            if importing(frame):
                take_again_later(number)
                return
            self.stopping = True
            raise StopNow(signal.SIGINT, self.run_dir / LAST if self.run_dir else None)
        self.requested = signal.Signals(number)

    def agreed(self, ranks: Ranks) -> Optional[signal.Signals]:
        """The signal any rank received: every rank takes the same decision at the same step."""
        received = ranks.maximum(self.requested or 0)
        return signal.Signals(received) if received else None


class PeerWatch:
    """Under torchrun, a lost rank ends in tinylm's one line however the others wait on it. A rank waiting on one that
    will never answer (gloo's all-reduce in DDP's backward, an evaluation's mean, the checkpoint's gather, a barrier)
    waits inside C++, where Python runs no signal handler: torchrun's SIGTERM would go unheard and its SIGKILL end
    the process 30 s later without a word. Python's C-level handler still writes the signal's number to the file
    descriptor that signal.set_wakeup_fd names: a thread reads it, and from the first SIGINT or SIGTERM on looks
    every WATCH_SECONDS whether this process waits on the other ranks (`Ranks.waiting`) while one of them has ended
    or is stopped; after LOST_SECONDS of that, it calls `on_lost` (trainer/cli.py's lost_rank: the line, then the
    end of the process). Where gloo notices the loss itself, its error says it first, through the same lost_rank."""

    def __init__(self, ranks: Ranks, on_lost: Callable[[], None]):
        self.ranks, self.on_lost = ranks, on_lost
        self.done = threading.Event()
        self.writer: Optional[int] = None
        self.previous = -1

    def __enter__(self) -> "PeerWatch":
        if self.ranks.distributed and handles_signals():  # set_wakeup_fd is the main thread's
            reader, self.writer = os.pipe()
            os.set_blocking(self.writer, False)  # a signal handler must never wait on a full pipe
            self.previous = signal.set_wakeup_fd(self.writer, warn_on_full_buffer=False)
            threading.Thread(target=self.watch, args=(reader,), name="tinylm-peer-watch", daemon=True).start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.writer is not None:
            signal.set_wakeup_fd(self.previous)
            self.done.set()
            os.close(self.writer)  # the thread's read ends

    def watch(self, reader: int) -> None:
        with os.fdopen(reader, "rb", buffering=0) as received:
            while True:
                numbers = received.read(64)
                if not numbers:  # the writing end was closed: the watch is over
                    return
                if any(number in SIGNALS for number in numbers):
                    break
        lost_since = None
        while not self.done.wait(WATCH_SECONDS):
            if not (self.ranks.waits and unanswering(self.ranks)):
                lost_since = None
            elif lost_since is None:
                lost_since = time.monotonic()
            elif time.monotonic() - lost_since >= LOST_SECONDS:
                self.on_lost()
                return


class Interrupted(Exception):
    def __init__(self, received: signal.Signals, step: int, checkpoint: Path, processes: int = 1):
        super().__init__(
            f"stopped by {received.name} after step {step}; {checkpoint} holds it. "
            + resume_command(checkpoint, processes)
        )
        self.exit_status = 128 + received  # the shell's convention for a process ended by a signal


class NonFiniteLoss(Exception):
    def __init__(self, step: int, checkpoint: Path):
        kept = (
            f"{checkpoint}, the last good checkpoint, is kept"
            if checkpoint.exists()
            else "no checkpoint had been written yet"
        )
        super().__init__(
            f"the training loss became non-finite at step {step}; try a lower optim.lr or optim.grad_clip. {kept}"
        )


class NonFiniteGuard:
    """Remembers the first step whose loss was not a number. The step number stays on the device, so watching costs
    no synchronisation; `check` reads it (on every rank) only when the loop reads the loss anyway."""

    def __init__(self, device: torch.device):
        self.first = torch.zeros((), dtype=torch.long, device=device)

    def watch(self, step: int, loss: Tensor) -> None:
        self.first = torch.where((self.first == 0) & ~loss.isfinite(), step, self.first)

    def check(self, ranks: Ranks, checkpoint: Path) -> None:
        """Raise NonFiniteLoss if the loss went non-finite on any rank: `checkpoint` is the last good one."""
        if step := ranks.maximum(int(self.first)):
            raise NonFiniteLoss(step, checkpoint)
