"""How a training run stops early: on a signal (with a checkpoint to resume from) or on a non-finite loss."""

import signal
import threading
from pathlib import Path
from typing import Optional


class StopSignals:
    """While active, SIGINT (Ctrl-C) and SIGTERM (kill, a cluster's preemption) only ask the loop to stop after
    its current step; `requested` says which came. A second Ctrl-C stops at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested: Optional[signal.Signals] = None
        self.previous: dict = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():  # only the main thread may handle signals
            self.previous = {number: signal.signal(number, self.handle) for number in self.SIGNALS}
        return self

    def __exit__(self, *exc_info) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def handle(self, number: int, frame) -> None:
        if self.requested is signal.SIGINT and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = signal.Signals(number)


class Interrupted(Exception):
    def __init__(self, received: signal.Signals, step: int, run_dir: Path, processes: int = 1):
        launcher = f"torchrun --standalone --nproc_per_node={processes}" if processes > 1 else "python"
        super().__init__(
            f"stopped by {received.name} after step {step}; {run_dir / 'last.pt'} holds it. "
            f"Resume with: {launcher} train.py trainer.resume={run_dir}"
        )
        self.exit_status = 128 + received  # the shell's convention for a process ended by a signal


class NonFiniteLoss(Exception):
    def __init__(self, step: int, run_dir: Path):
        kept = run_dir / "last.pt"
        super().__init__(
            f"the training loss became non-finite at step {step}; try a lower optim.lr or optim.grad_clip. "
            + (f"{kept}, the last good checkpoint, is kept" if kept.exists() else "no checkpoint had been written yet")
        )
