"""Where a run writes: Hydra's run directory (configs/train.yaml's hydra.run.dir) through two resolvers, and the
lock that keeps a second process from writing into a run directory in use.

A fresh run gets outputs/DATE/TIME with microseconds, so runs started in the same second never share one.
A resumed run writes on into its own directory. Under torchrun every rank must agree on the directory,
and only rank 0 writes Hydra's files there.
"""

import fcntl
import os
from datetime import datetime
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from trainer.resume import AUTO, run_dir_of

LOCK = ".train.lock"


class RunDirInUse(Exception):
    """Another process trains in the run directory; the message names both."""


class RunLock:
    """An exclusive lock on the run directory while a run writes there. The OS releases it when the process ends,
    however it ends, so a killed run never leaves a stale lock. Rank 0 holds it for every rank of a torchrun."""

    def __init__(self, run_dir: Path, holds: bool = True):
        self.path, self.holds, self.file = run_dir / LOCK, holds, None

    def __enter__(self) -> "RunLock":
        if not self.holds:
            return self
        self.file = open(self.path, "a+")  # never truncated before the lock is ours: it names the holder
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise RunDirInUse(
                f"{self.path.parent}: this run directory is in use by {holder}; wait for it to end (or stop it) "
                "before resuming or starting a run there"
            ) from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"process {os.getpid()} on {os.uname().nodename}\n")
        self.file.flush()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.file:
            self.file.close()  # closing releases the lock


def run_dir(resume: Optional[str], fresh: str) -> str:
    if resume and resume != AUTO:  # auto resumes in the run's own directory, whatever the launcher made it
        return str(run_dir_of(resume))
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")  # torchrun's rendezvous id, shared by all ranks
    if run_id != "none":  # a clock reading would differ between ranks; the rendezvous id does not
        return str(Path(fresh).parent / f"torchrun-{run_id[:8]}")
    return fresh


def hydra_subdir(resume: Optional[str], run_dir: str) -> Optional[str]:
    """Where Hydra writes the composed config: nowhere for ranks other than 0; for a resume, or any start in a
    directory that has a run already (trainer.resume=auto, a process the run lock will refuse), beside the first's,
    which stays as it was."""
    if os.environ.get("RANK", "0") != "0":
        return None
    again = (resume and resume != AUTO) or (Path(run_dir) / ".hydra").exists()
    return f".hydra/resume-{datetime.now():%Y-%m-%d_%H-%M-%S-%f}" if again else ".hydra"


def register_resolvers() -> None:
    OmegaConf.register_new_resolver("run_dir", run_dir)
    OmegaConf.register_new_resolver("hydra_subdir", hydra_subdir)
