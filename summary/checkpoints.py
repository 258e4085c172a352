"""The runs under a directory with the checkpoint each one's attention is read from, loaded through the project's
own code (weights only): what TensorBoard's Attention tab lists and attend.py reads.

A run is a directory holding a checkpoint (best.pt, last.pt) or TensorBoard events, named as TensorBoard names it:
its path relative to the directory searched ("." for that directory itself).
"""

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import Tokenizer

from model import TinyLM
from summary.runs import EVENTS_FILES, natural_key
from trainer.checkpoint import BEST, LAST, CheckpointError, load_checkpoint, model_config
from trainer.overrides import naming_overrides, read_overrides, switches_label

CHECKPOINTS = (BEST, LAST)  # the one read: the lowest validation loss, else the latest


@dataclass
class Trained:
    """A checkpoint's model, ready to read: on the CPU, in eval mode."""

    model: TinyLM
    tokenizer: Tokenizer
    step: int
    switches: str  # the lesson's switches as the run set them: "model.scale=True model.causal=True model.d_k=128"


@dataclass
class RunEntry:
    name: str  # as TensorBoard names the run
    run_dir: Path
    checkpoint: Path | None  # None: the run has no checkpoint (yet)
    overrides: list[str] = field(default_factory=list)  # Hydra's overrides of the job, paths and presets left out
    label: str = ""  # what tells it from the other runs listed with it: its distinct overrides
    step: int | None = None
    problem: str = ""  # the one-line reason its checkpoint cannot be read


def find_run_dirs(root: Path) -> list[Path]:
    """Every directory at or below `root` that holds a checkpoint or TensorBoard events, in natural order."""
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if not name.startswith(".")]  # .hydra, .git
        if any(name in CHECKPOINTS or Path(name).match(EVENTS_FILES) for name in files):
            found.append(Path(directory))
    return sorted(found, key=natural_key)


def checkpoint_in(run_dir: Path) -> Path | None:
    return next((run_dir / name for name in CHECKPOINTS if (run_dir / name).is_file()), None)


def list_runs(root: Path) -> list[RunEntry]:
    """The runs under `root`, each with its checkpoint and step, or why it has none it can use; labelled by the
    overrides that differ between them (a sweep's fixed settings said once by the directory, not in every label)."""
    entries = []
    for run_dir in find_run_dirs(root):
        entry = RunEntry(
            run_dir.relative_to(root).as_posix(),
            run_dir,
            checkpoint_in(run_dir),
            naming_overrides(read_overrides(run_dir)),
        )
        if entry.checkpoint is not None:
            try:
                entry.step = load(entry.checkpoint).step
            except CheckpointError as error:
                entry.problem = str(error)
        entries.append(entry)
    hydra_runs = [entry.overrides for entry in entries if entry.overrides]  # a run Hydra did not start has none
    shared = (
        [item for item in hydra_runs[0] if all(item in overrides for overrides in hydra_runs)] if hydra_runs else []
    )
    for entry in entries:
        distinct = [item for item in entry.overrides if item not in shared] or entry.overrides
        entry.label = " ".join(distinct) or (load(entry.checkpoint).switches if entry.step is not None else "")
    return entries


_loaded: dict[tuple, Trained] = {}
_loading = threading.Lock()  # TensorBoard answers requests in threads


def load(path: Path) -> Trained:
    """The checkpoint at `path` as a model on the CPU, kept while the file stays the same (same size and time)."""
    stat = path.stat()
    key = (path.resolve(), stat.st_size, stat.st_mtime_ns)
    with _loading:
        if key not in _loaded:
            for stale in [known for known in _loaded if known[0] == key[0]]:
                del _loaded[stale]  # the run wrote a newer checkpoint since
            _loaded[key] = build(load_checkpoint(path))
        return _loaded[key]


def build(checkpoint: dict) -> Trained:
    model = TinyLM(model_config(checkpoint))
    model.load_state_dict(checkpoint["model"])
    model.eval()
    switches = switches_label(checkpoint["config"])
    return Trained(model, Tokenizer.from_str(checkpoint["tokenizer"]), checkpoint["step"], switches)
