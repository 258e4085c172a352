"""Where a token-cache entry is built before it is renamed into place: a staging directory beside it, locked by the
process that builds there. A build stopped by a signal removes its own; one killed outright (SIGKILL, a power cut, a
cluster's hard preemption) cannot, so every build first removes the staging directories whose lock nobody holds.

The lock is a file in the directory, filelock's (an flock on Unix): the OS releases it when the process ends, however it
ends. A staging
directory gets the name the sweep looks for only once its lock is held, so a sweep never takes a build that has just
begun for an abandoned one.
"""

import os
import shutil
import uuid
from pathlib import Path
from typing import Optional

from filelock import FileLock, Timeout

LOCK = ".lock"
BUILDING = "building"  # .KEY.HEX.building: a staging directory; .KEY.HEX.new before its lock is held
DAMAGED = "damaged"  # .KEY.damaged.HEX: an entry set aside to be deleted (data/cache.py's set_aside)


class Staging:
    """A new staging directory for `entry`, locked while the context lasts and then removed, unless `publish`
    renamed it into place first."""

    def __init__(self, entry: Path):
        self.entry = entry
        self.path: Optional[Path] = None
        self.lock: Optional[FileLock] = None

    def __enter__(self) -> "Staging":
        name = f".{self.entry.name}.{uuid.uuid4().hex}"  # a name no other process uses
        born = self.entry.parent / f"{name}.new"
        born.mkdir(parents=True)
        self.path = born
        self.lock = FileLock(born / LOCK)
        self.lock.acquire(blocking=False)  # the directory is new: nobody else holds it
        self.path = born.rename(self.entry.parent / f"{name}.{BUILDING}")
        return self

    def publish(self) -> None:
        """Renames the staging directory to the entry (OSError if an entry is there already)."""
        os.rename(self.path, self.entry)
        self.path = None
        (self.entry / LOCK).unlink(missing_ok=True)

    def __exit__(self, *exc_info) -> None:
        try:
            if self.path:
                remove(self.path)
        finally:
            self.lock.release()


def remove(staging: Path) -> None:
    """Deletes a staging directory (it holds files only), its lock last: one without a lock is empty."""
    try:
        names = os.listdir(staging)
    except FileNotFoundError:
        return
    for name in sorted(names, key=lambda name: name == LOCK):
        (staging / name).unlink(missing_ok=True)
    try:
        staging.rmdir()
    except FileNotFoundError:
        pass


def remove_abandoned(root: Path) -> list[Path]:
    """Deletes the staging directories under `root` that no living process builds in, and the entries set aside
    as damaged that a killed process did not finish deleting. Returns those it deleted."""
    removed = []
    try:
        found = [path for path in root.iterdir() if path.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for path in found:
        if path.name.endswith(f".{BUILDING}") and abandoned(path):
            remove(path)
            removed.append(path)
        elif f".{DAMAGED}." in path.name:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def abandoned(staging: Path) -> bool:
    """Whether nobody holds the staging directory's lock. One without a lock file is the rest of a removal
    stopped half-way (the lock goes last); one whose lock cannot be tried is left alone."""
    if not (staging / LOCK).is_file():
        return True
    lock = FileLock(staging / LOCK)
    try:
        lock.acquire(blocking=False)
    except (Timeout, OSError):  # a living build holds it, or it cannot be tried
        return False
    lock.release()
    return True
