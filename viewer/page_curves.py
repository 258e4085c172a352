"""The curves of the one-file page (export.py): each run's scalars read from its TensorBoard events (summary/runs.py),
laid out as TensorBoard's Custom Scalars shows them (trainer/tags.py's layout, which each run wrote for itself), in the
colours TensorBoard gives the runs (summary/styles.py)."""

import logging
import math
import re

import yaml
from matplotlib.colors import to_hex

from summary.runs import RunCurves, read_run
from summary.styles import palette
from trainer.cli import yaml_error
from trainer.tags import layout
from viewer.runs import RunCheckpoints

log = logging.getLogger(__name__)

DIGITS = 7  # significant digits kept of each value: TensorBoard stores them as float32, which holds about 7


def page_curves(runs: list[RunCheckpoints], shown: list[str]) -> dict:
    """The charts of the runs named `shown`, for the page to draw: {"sections": [{"title", "charts": [{"title",
    "series": [{"run", "tag", "steps", "values"}]}]}], "colours": {run: "#rrggbb"}, "labels": {run: label}}. The
    colours go to every run of `runs` in order, as TensorBoard gives them to every run in its logdir, whether shown
    or not. The layout is the first shown run's: a preset's sweep opens on that preset's own charts, as its Custom
    Scalars does; a chart none of the runs logged is left out. A run whose events or Hydra record cannot be read has no
    curves (its Attention panel is still there)."""
    colours = {run.name: to_hex(colour) for run, colour in zip(runs, palette(len(runs)))}
    chosen = [run for run in runs if run.name in shown]
    read = {run.name: curves_of(run) for run in chosen}
    found = {name: curves for name, curves in read.items() if curves is not None}
    first = next(iter(found.values()), None)
    sections = []
    for title, charts in layout(first.overrides if first else []).items():
        drawn = [
            {"title": chart_title, "series": series}
            for chart_title, (_, patterns) in charts.items()
            if (series := chart_series(found, patterns))
        ]
        if drawn:
            sections.append({"title": title, "charts": drawn})
    labels = {run.name: run.label or run.name for run in chosen}
    return {"sections": sections, "colours": {run.name: colours[run.name] for run in chosen}, "labels": labels}


def curves_of(run: RunCheckpoints) -> RunCurves | None:
    """The run's curves; None, with a warning naming the file, where its Hydra record (the settings its curves are
    drawn by) is not YAML: its model, in its checkpoint, is whole."""
    try:
        return read_run(run.run_dir, run.run_dir.parent)
    except yaml.YAMLError as error:
        log.warning("%s: its curves are left out of the page", yaml_error(error))
        return None


def chart_series(runs: dict[str, RunCurves], patterns: list[str]) -> list[dict]:
    """One series per run and tag a Custom Scalars chart's patterns find (a search, as TensorBoard's RegExp test; the
    layout anchors its patterns), the tags in the patterns' order, each as logged: every point, unsmoothed."""
    series = []
    for name, run in runs.items():
        tags = [tag for pattern in patterns for tag in sorted(run.curves) if re.search(pattern, tag)]
        for tag in dict.fromkeys(tags):
            points = run.curves[tag]
            steps = [step for step, _ in points]
            values = [float(f"{value:.{DIGITS}g}") if math.isfinite(value) else None for _, value in points]
            series.append({"run": name, "tag": tag, "steps": steps, "values": values})
    return series
