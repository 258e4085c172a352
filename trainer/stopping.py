"""How a training run stops early: on a signal (with a checkpoint to resume from) or on a non-finite loss."""

import signal
import threading
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

from trainer.distributed import Ranks
from trainer.resume import resume_override


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

    def agreed(self, ranks: Ranks) -> Optional[signal.Signals]:
        """The signal any rank received: every rank takes the same decision at the same step."""
        received = ranks.maximum(self.requested or 0)
        return signal.Signals(received) if received else None


class Interrupted(Exception):
    def __init__(self, received: signal.Signals, step: int, checkpoint: Path, processes: int = 1):
        launcher = f"torchrun --standalone --nproc_per_node={processes}" if processes > 1 else "python"
        super().__init__(
            f"stopped by {received.name} after step {step}; {checkpoint} holds it. "
            f"Resume with: {launcher} train.py {resume_override(checkpoint.parent)}"
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
