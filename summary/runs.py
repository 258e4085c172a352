"""The runs under some directories, read back from their TensorBoard events and Hydra's files."""

import logging
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from summary.events import Damage, damage
from trainer.overrides import override_values, read_overrides, shared_overrides
from viewer.walk import EVENTS_FILES, natural_key, walk_runs

log = logging.getLogger(__name__)


class SummaryError(Exception):
    """A request the runs cannot answer (a key to plot against that they do not sweep), said in one line."""


@dataclass
class RunCurves:
    name: str  # its directory relative to the runs' common parent: the name TensorBoard gives it
    overrides: list[str]  # Hydra's overrides of the job ([] for a run Hydra did not start)
    curves: dict[str, list[tuple[int, float]]]  # scalar tag -> (step, value) in step order
    wall_s: float  # from its first to its last TensorBoard event
    max_steps: int | None = None  # trainer.max_steps in its Hydra config; None for a run Hydra did not start
    truncated: bool = False  # an events file of it ends mid-record (a crash while writing): the rest is lost
    task: str = "next_token"  # what it was trained to predict (task.name)
    path: Path | None = None  # its directory

    def final(self, tag: str) -> float | None:
        """The tag's last value; None where the run never logged it (an empty cell in the table)."""
        curve = self.curves.get(tag)
        return curve[-1][1] if curve else None

    def band(self, tag: str) -> None:
        """A single run has no spread over seeds (a summary.seeds.Configuration has)."""

    @cached_property
    def settings(self) -> dict[str, Any]:
        """Its overrides as typed values, parsed as Hydra does: {"model.d_k": 64, "model.scale": False, ...}."""
        return override_values(self.overrides)

    @property
    def last_step(self) -> int | None:
        """The last step it logged a loss at; train.py logs both losses at its last step."""
        return max(
            (self.curves[tag][-1][0] for tag in ("train/loss", "val/loss") if self.curves.get(tag)), default=None
        )

    @property
    def finished(self) -> bool | None:
        """Whether it got to trainer.max_steps; None where that setting is unknown."""
        if self.max_steps is None:
            return None
        return self.last_step is not None and self.last_step >= self.max_steps


def find_runs(paths: list[Path]) -> list[Path]:
    """Every directory under `paths` that holds a TensorBoard events file, in natural order (job 2 before 10)."""
    runs = set()
    for path in paths:
        if path.exists() and not path.is_dir():
            raise FileNotFoundError(f"{path}: a file, not a directory; give the directory of a run or a sweep")
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no such directory")
        found = {run_dir.resolve() for run_dir in walk_runs(path, checkpoints=False)}  # comparable paths
        if not found:
            raise FileNotFoundError(f"{path}: no TensorBoard events files in it or below it")
        runs |= found
    return sorted(runs, key=natural_key)


def read_run(run_dir: Path, root: Path) -> RunCurves | None:
    """The run in `run_dir`; None where none of its events files reads. Each damaged file gets one warning."""
    damages = {path: damage(path) for path in sorted(run_dir.glob(EVENTS_FILES))}
    for path, found in damages.items():
        if found:
            log.warning("%s: %s", path, found.value)
    if all(found is Damage.unreadable for found in damages.values()):
        return None
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})  # 0: keep every event
    events.Reload()  # reads past an unreadable file to the next one, and up to the cut in a truncated one
    curves = {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    wall_times = [event.wall_time for tag in events.Tags()["scalars"] for event in events.Scalars(tag)]
    wall_times += [event.wall_time for tag in events.Tags()["tensors"] for event in events.Tensors(tag)]
    started = events.FirstEventTimestamp()
    overrides = read_overrides(run_dir)
    wall_s = max(wall_times, default=started) - started
    truncated = Damage.truncated in damages.values()
    task = hydra_setting(run_dir, "task.name") or "next_token"  # a run from before tasks predicted the next token
    name = str(run_dir.relative_to(root))
    max_steps = hydra_setting(run_dir, "trainer.max_steps")
    return RunCurves(name, overrides, curves, wall_s, max_steps, truncated, task, run_dir)


def hydra_config(run_dir: Path) -> DictConfig | None:
    """The run's Hydra config: its last resume's (trainer.resume) where it was resumed; None for a run Hydra did not
    start."""
    hydra_dir = run_dir / ".hydra"
    configs = [hydra_dir / "config.yaml", *sorted(hydra_dir.glob("resume-*/config.yaml"))]  # resume-DATE_TIME
    found = [path for path in configs if path.exists()]
    return OmegaConf.load(found[-1]) if found else None


def hydra_setting(run_dir: Path, key: str) -> Any:
    """A setting in the run's Hydra config (hydra_config); None where there is none, or a key its config lacks."""
    config = hydra_config(run_dir)
    return OmegaConf.select(config, key) if config is not None else None


def read_runs(paths: list[Path]) -> list[RunCurves]:
    run_dirs = find_runs(paths)
    root = Path(os.path.commonpath(run_dirs))
    if root in run_dirs:  # a single run, or runs nested in one: name them from one level up
        root = root.parent
    runs = [run for run in (read_run(run_dir, root) for run_dir in run_dirs) if run]
    if not runs:
        raise FileNotFoundError(f"{', '.join(map(str, paths))}: no readable TensorBoard events files")
    return settled(runs)


def settled(runs: list[RunCurves]) -> list[RunCurves]:
    """The runs with each setting that another run's overrides give and a run's own do not taken from its Hydra
    config (runs of two sweeps: one left model.positions at its default, learned), so that the legends and tables
    name its value, not "not set", and it is grouped with runs that set the same value."""
    keys = dict.fromkeys(key for run in runs for key in run.settings)
    for run in runs:
        for key in [key for key in keys if key not in run.settings and run.path is not None]:
            if (value := hydra_setting(run.path, key)) is not None:
                run.settings[key] = value
    return runs


def shared_of(runs: list[RunCurves]) -> list[str]:
    """The overrides every run has (trainer/overrides.py's shared_overrides)."""
    return shared_overrides([run.overrides for run in runs])


def swept_keys(runs: list[RunCurves]) -> list[str]:
    """The keys whose value is not the same in every run, in the order the overrides name them."""
    keys = dict.fromkeys(key for run in runs for key in run.settings)
    return [key for key in keys if len({repr(run.settings.get(key)) for run in runs}) > 1]  # repr: lists too


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_word(value: Any) -> str:
    """A value as a table or legend shows it: booleans as words, floats short, nothing as nothing."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)
