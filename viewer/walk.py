"""Where the runs are on disk: the one walk that report.py's summary (summary/runs.py), the Attention tab's listing,
attend.py and the tab's is_active all take.

A run is a directory holding a checkpoint (best.pt, last.pt) or TensorBoard events. Hidden directories (.hydra,
.git) are not entered, and a run's kept checkpoints (RUN/steps/) make no run of their own. The standard library
only: TensorBoard's start asks is_active, which must not wait for torch.
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path

CHECKPOINT_FILES = ("best.pt", "last.pt")  # trainer/checkpoint.py's BEST and LAST (it imports torch; a test pins them)
EVENTS_PREFIX = "events.out.tfevents."
EVENTS_FILES = EVENTS_PREFIX + "*"  # as a glob


def walk_runs(root: Path, *, checkpoints: bool = True, events: bool = True) -> Iterator[Path]:
    """The run directories at or below `root`, in the order os.walk meets them: those holding a checkpoint, TensorBoard
    events, or either (the default). A generator: asking for the first one walks no further."""
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if not name.startswith(".")]
        if (checkpoints and any(name in CHECKPOINT_FILES for name in files)) or (
            events and any(name.startswith(EVENTS_PREFIX) for name in files)
        ):
            yield Path(directory)


def find_run_dirs(root: Path, *, checkpoints: bool = True, events: bool = True) -> list[Path]:
    """walk_runs in natural order: job 2 before job 10."""
    return sorted(walk_runs(root, checkpoints=checkpoints, events=events), key=natural_key)


def natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]
