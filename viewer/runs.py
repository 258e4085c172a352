"""The runs under a directory as the Attention tab lists them and attend.py reads them: each with the checkpoint read
by default, its step and every step it kept (RUN/steps/step-N.pt, best.pt, last.pt), all seen without loading a
model (viewer/checkpoints.py's peek). A run is named as TensorBoard names it: its path relative to the directory
searched ("." for that directory itself).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from trainer.checkpoint import BEST, LAST, CheckpointError, kept_checkpoints
from trainer.config import ConfigError
from trainer.overrides import distinct_overrides, naming_overrides, read_overrides, shared_overrides, switches_label
from viewer.checkpoints import READ_ORDER, Checkpoint, choose, load, peek
from viewer.walk import find_run_dirs


@dataclass(frozen=True)
class Step:
    step: int
    path: Path  # the checkpoint file holding the weights of that step


@dataclass
class RunCheckpoints:
    name: str  # as TensorBoard names the run
    run_dir: Path
    checkpoint: Path | None = None  # the one read by default; None: none yet, or none whole (see problem)
    step: int | None = None
    note: str = ""  # another checkpoint was passed over: which, and why
    problem: str = ""  # the one-line reason nothing of it can be read
    overrides: list[str] = field(default_factory=list)  # Hydra's overrides of the job, paths and presets left out
    label: str = ""  # what tells it from the other runs listed with it: its distinct overrides
    steps: list[Step] = field(default_factory=list)  # every step the run can be read at, in order


def list_runs(root: Path, named: Callable[[Path, Path], str] | None = None) -> list[RunCheckpoints]:
    """The runs under `root`, each with its checkpoints and steps, or why it has none it can use; labelled by the
    overrides that differ between them (a sweep's fixed settings said once by the directory, not in every label).
    `named(path, run_dir)` says a checkpoint as messages show it (default: the path under `root`)."""
    entries = [run_checkpoints(run_dir, run_dir.relative_to(root).as_posix(), named) for run_dir in find_run_dirs(root)]
    for entry in entries:
        entry.overrides = naming_overrides(read_overrides(entry.run_dir))
    # A run Hydra did not start has no overrides, and takes no part in what the others share.
    shared = shared_overrides([entry.overrides for entry in entries if entry.overrides])
    for entry in entries:
        distinct = distinct_overrides(entry.overrides, shared) or entry.overrides
        entry.label = " ".join(distinct) or switches_of(entry)
    return entries


def run_checkpoints(run_dir: Path, name: str, named: Callable[[Path, Path], str] | None = None) -> RunCheckpoints:
    """One run's checkpoints: the one read by default (the first whole one of best.pt, last.pt), and its steps."""
    choice = choose(run_dir, READ_ORDER, (lambda path: named(path, run_dir)) if named else str)
    steps = steps_of(run_dir, choice.path)
    return RunCheckpoints(name, run_dir, choice.path, choice.step, choice.note, choice.problem, steps=steps)


def steps_of(run_dir: Path, default: Path | None) -> list[Step]:
    """Every step the run can be read at, one file a step: the default checkpoint, then best.pt and last.pt, then
    the kept ones (the same step holds the same weights); files that cannot be read are left out."""
    candidates = [default, run_dir / BEST, run_dir / LAST, *kept_checkpoints(run_dir)]
    steps: dict[int, Path] = {}
    for path in dict.fromkeys(candidate for candidate in candidates if candidate and candidate.is_file()):
        step = peek(path).step
        if step is not None:
            steps.setdefault(step, path)
    return [Step(step, steps[step]) for step in sorted(steps)]


def checkpoint_at(entry: RunCheckpoints, step: int | None) -> Path:
    """The file the run is read from at `step` (None: the default one); a step it did not keep is a ConfigError."""
    if step is None:
        if entry.checkpoint is None:
            raise ConfigError(entry.problem or f"{entry.name}: no checkpoint (best.pt or last.pt) yet")
        return entry.checkpoint
    found = next((kept.path for kept in entry.steps if kept.step == step), None)
    if found is None:
        raise ConfigError(f"step={step}: {entry.name} kept no checkpoint at that step (kept: {steps_listed(entry)})")
    return found


def load_at(entry: RunCheckpoints, step: int | None) -> tuple[Path, Checkpoint]:
    """The file the run is read from at `step` (None: the default one) and its model. A run that trains thins its kept
    checkpoints: one removed since the run was listed is a ConfigError naming the step and the steps kept now."""
    path = checkpoint_at(entry, step)
    try:
        return path, load(path)
    except (FileNotFoundError, CheckpointError):
        if path.exists():
            raise
    entry.steps = steps_of(entry.run_dir, entry.checkpoint)
    step = entry.step if step is None else step
    raise ConfigError(
        f"step={step}: {entry.name} no longer keeps it: the run thins its kept checkpoints as it trains (kept now: "
        f"{steps_listed(entry)})"
    )


def steps_listed(entry: RunCheckpoints) -> str:
    """The steps the run can be read at, as a refusal names them: "0, 5, 10", or "none"."""
    return ", ".join(str(kept.step) for kept in entry.steps) or "none"


def switches_of(entry: RunCheckpoints) -> str:
    """The lesson's switches of a run nothing else names, from Hydra's record of its config ("" for a run Hydra did
    not start: its checkpoint would have to be read, and the listing reads none)."""
    config = entry.run_dir / ".hydra" / "config.yaml"
    try:
        return switches_label(OmegaConf.to_container(OmegaConf.load(config))) if config.is_file() else ""
    except Exception:  # a YAML file cut short: a label is no reason to refuse the listing
        return ""
