"""The runs under some directories, read back from their TensorBoard events and Hydra's overrides."""

import os
import re
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


@dataclass
class Run:
    name: str  # its directory relative to the runs' common parent: the name TensorBoard gives it
    overrides: list[str]  # Hydra's overrides of the job ([] for a run Hydra did not start)
    curves: dict[str, list[tuple[int, float]]]  # scalar tag -> (step, value) in step order
    wall_s: float  # from its first to its last TensorBoard event

    def final(self, tag: str) -> float | None:
        """The tag's last value; None where the run never logged it (an empty cell in the table)."""
        curve = self.curves.get(tag)
        return curve[-1][1] if curve else None


def find_runs(paths: list[Path]) -> list[Path]:
    """Every directory under `paths` that holds a TensorBoard events file, in natural order (job 2 before 10)."""
    runs = set()
    for path in paths:
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no such directory")
        found = {events.parent.resolve() for events in path.rglob("events.out.tfevents.*")}  # comparable paths
        if not found:
            raise FileNotFoundError(f"{path}: no TensorBoard events files in it or below it")
        runs |= found
    return sorted(runs, key=natural_key)


def natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def read_run(run_dir: Path, root: Path) -> Run:
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})  # 0: keep every event
    events.Reload()
    curves = {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    wall_times = [event.wall_time for tag in events.Tags()["scalars"] for event in events.Scalars(tag)]
    wall_times += [event.wall_time for tag in events.Tags()["tensors"] for event in events.Tensors(tag)]
    started = events.FirstEventTimestamp()
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = list(OmegaConf.load(overrides_file)) if overrides_file.exists() else []
    return Run(str(run_dir.relative_to(root)), overrides, curves, max(wall_times, default=started) - started)


def read_runs(paths: list[Path]) -> list[Run]:
    run_dirs = find_runs(paths)
    root = Path(os.path.commonpath(run_dirs))
    if root in run_dirs:  # a single run, or runs nested in one: name them from one level up
        root = root.parent
    return [read_run(run_dir, root) for run_dir in run_dirs]


def shared_overrides(runs: list[Run]) -> list[str]:
    """The overrides every run has (a sweep's fixed ones, its +experiment): said once, not in every row or label."""
    return [override for override in runs[0].overrides if all(override in run.overrides for run in runs)]


def distinct_overrides(run: Run, shared: list[str]) -> str:
    return " ".join(override for override in run.overrides if override not in shared)
