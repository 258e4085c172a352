"""Runs that differ only in their seed (a sweep of trainer.seed=0,1,2) as one configuration each: the mean, standard
deviation and n of every final value, and mean curves inside the band from the lowest to the highest seed.

A run that stopped before trainer.max_steps is kept apart, listed by name and never averaged: its values are from
an earlier step than its seeds'. Runs that sweep no seed are summarized one by one, as before.
"""

import statistics
from dataclasses import dataclass
from typing import Any

from summary.runs import RunCurves, as_word, swept_keys

SEED = "trainer.seed"


@dataclass(frozen=True)
class Spread:
    mean: float
    sd: float | None  # None for a single seed
    n: int
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.mean:.3f}" if self.sd is None else f"{self.mean:.3f} ± {self.sd:.3f}"


@dataclass
class Configuration:
    """The seeds of one configuration: `runs` are averaged, `unfinished` ones only counted and listed."""

    runs: list[RunCurves]
    unfinished: list[RunCurves]

    @property
    def every_run(self) -> list[RunCurves]:
        return self.runs + self.unfinished

    @property
    def overrides(self) -> list[str]:
        return [override for override in self.every_run[0].overrides if not override.startswith(f"{SEED}=")]

    @property
    def settings(self) -> dict[str, Any]:
        return {key: value for key, value in self.every_run[0].settings.items() if key != SEED}

    @property
    def task(self) -> str:
        return self.every_run[0].task

    @property
    def name(self) -> str:
        return " ".join(self.overrides) or "no overrides"

    @property
    def seeds(self) -> str:
        return " ".join(as_word(run.settings.get(SEED)) for run in self.runs)

    @property
    def finished(self) -> bool:
        return True  # what it averages, its finished seeds, did finish

    @property
    def wall_s(self) -> float | None:
        return statistics.mean(run.wall_s for run in self.runs) if self.runs else None

    def spread(self, tag: str) -> Spread | None:
        """The tag's final value over the finished seeds; None where none logged it."""
        values = [value for value in (run.final(tag) for run in self.runs) if value is not None]
        if not values:
            return None
        sd = statistics.stdev(values) if len(values) > 1 else None
        return Spread(statistics.mean(values), sd, len(values), min(values), max(values))

    def final(self, tag: str) -> float | None:
        spread = self.spread(tag)
        return spread.mean if spread else None

    @property
    def curves(self) -> dict[str, list[tuple[int, float]]]:
        """Each tag's mean over the finished seeds, at every step they all logged."""
        return {tag: [(step, statistics.mean(values)) for step, values in points] for tag, points in self.seed_points()}

    def band(self, tag: str) -> list[tuple[int, float, float]] | None:
        """(step, lowest, highest) over the seeds; None for a single seed."""
        if len(self.runs) < 2:
            return None
        return [(step, min(values), max(values)) for step, values in dict(self.seed_points()).get(tag, [])]

    def seed_points(self) -> list[tuple[str, list[tuple[int, list[float]]]]]:
        tags = dict.fromkeys(tag for run in self.runs for tag in run.curves)
        points = []
        for tag in tags:
            by_step = [dict(run.curves.get(tag, [])) for run in self.runs]
            steps = sorted(set.intersection(*(set(values) for values in by_step)))
            if steps:
                points.append((tag, [(step, [values[step] for values in by_step]) for step in steps]))
        return points


def sweeps_seeds(runs: list[RunCurves]) -> bool:
    return SEED in swept_keys(runs)


def by_configuration(runs: list[RunCurves]) -> list[Configuration]:
    """The runs grouped by everything but their seed, in the order of each configuration's first run."""
    groups: dict[str, list[RunCurves]] = {}
    for run in runs:
        others = sorted((key, value) for key, value in run.settings.items() if key != SEED)
        groups.setdefault(repr(others), []).append(run)
    return [Configuration(*finished_and_not(group)) for group in groups.values()]


def finished_and_not(runs: list[RunCurves]) -> tuple[list[RunCurves], list[RunCurves]]:
    """The runs that reached trainer.max_steps (or cannot say), and those that stopped before it."""
    return [run for run in runs if run.finished is not False], [run for run in runs if run.finished is False]


def unfinished_runs(items: list[RunCurves] | list[Configuration]) -> list[RunCurves]:
    """The runs among `items` that stopped before trainer.max_steps, the configurations' left-out seeds included."""
    if items and isinstance(items[0], Configuration):
        return [run for configuration in items for run in configuration.unfinished]
    return [run for run in items if run.finished is False]
