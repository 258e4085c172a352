"""Sweep summaries: a table and a figure of many runs, read back from their TensorBoard events.

summarize() finds the runs (directories holding events files) under some directories and writes
summary.csv, summary.md and summary.png. report.py calls it for any directories; SweepSummary, a Hydra
callback registered in configs/train.yaml, calls it for the sweep directory at the end of every multirun.
"""

import csv
import logging
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

log = logging.getLogger(__name__)

FINAL_TAGS = ["train/loss", "val/loss", "val/loss_causal", "attn/entropy", "attn/saturated_frac"]
SUMMARY_FILES = ["summary.csv", "summary.md", "summary.png"]
CURVES = [("val/loss", 0, "-"), ("val/loss_causal", 0, "--"), ("attn/entropy", 1, "-")]  # tag, panel, line style


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


def summarize(paths: list[Path], out_dir: Path) -> list[Path]:
    """Write summary.csv, summary.md and summary.png of every run under `paths` into `out_dir`; returns their paths."""
    runs = read_runs(paths)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, markdown_path, figure_path = (out_dir / name for name in SUMMARY_FILES)
    write_csv(runs, csv_path)
    markdown_path.write_text(markdown_table(runs))
    plot_curves(runs, figure_path)
    return [csv_path, markdown_path, figure_path]


def write_csv(runs: list[Run], path: Path) -> None:
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["run", "overrides", *FINAL_TAGS, "wall_s"])
        for run in runs:
            finals = ["" if value is None else value for value in map(run.final, FINAL_TAGS)]
            writer.writerow([run.name, " ".join(run.overrides), *finals, round(run.wall_s, 1)])


def shared_overrides(runs: list[Run]) -> list[str]:
    """The overrides every run has (a sweep's fixed ones, its +experiment): said once, not in every row or label."""
    return [override for override in runs[0].overrides if all(override in run.overrides for run in runs)]


def distinct_overrides(run: Run, shared: list[str]) -> str:
    return " ".join(override for override in run.overrides if override not in shared)


def markdown_table(runs: list[Run]) -> str:
    shared = shared_overrides(runs)
    lines = [
        f"Overrides of every run: {' '.join(f'`{o}`' for o in shared) or 'none'}. Final values, losses in nats "
        "per token; an empty cell: the run did not log that tag. Wall time: from a run's first to its last "
        "TensorBoard event.",
        "",
        "| run | overrides | " + " | ".join(FINAL_TAGS) + " | wall s |",
        "|---" * (len(FINAL_TAGS) + 3) + "|",
    ]
    for run in runs:
        finals = " | ".join("" if value is None else f"{value:.3f}" for value in map(run.final, FINAL_TAGS))
        lines.append(f"| {run.name} | {distinct_overrides(run, shared)} | {finals} | {run.wall_s:.0f} |")
    return "\n".join(lines) + "\n"


def plot_curves(runs: list[Run], path: Path) -> None:
    """val/loss (val/loss_causal dashed, in the same colour) and attn/entropy of every run, against the step."""
    shared = shared_overrides(runs)
    figure = Figure(figsize=(11, 4), layout="constrained")
    panels = figure.subplots(1, 2)
    for index, run in enumerate(runs):
        label = distinct_overrides(run, shared) or run.name
        for tag, panel, linestyle in CURVES:
            if run.curves.get(tag):
                steps, values = zip(*run.curves[tag])
                panels[panel].plot(steps, values, linestyle, color=f"C{index % 10}", marker=".",
                                   label=label if tag == "val/loss" else None)  # fmt: skip
    loss_tags = [tag for tag, panel, _ in CURVES if panel == 0]
    later = [value for run in runs for tag in loss_tags for _, value in run.curves.get(tag, [])[1:]]
    if later:  # the first evaluation's loss, about ln(vocabulary size), would flatten every later difference
        panels[0].set_ylim(top=1.05 * max(later))
    panels[0].set(title="val/loss (dashed: val/loss_causal, mask forced on)", xlabel="step", ylabel="nats per token")
    panels[1].set(title="attn/entropy: mean over queries", xlabel="step", ylabel="nats")
    for axes in panels:
        if not axes.has_data():
            axes.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axes.transAxes)
    handles, labels = panels[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside right upper", fontsize="small")
    if shared:
        figure.suptitle(textwrap.fill(" ".join(shared), 160), fontsize="small")
    figure.savefig(path, dpi=80)


class SweepSummary(Callback):
    """At the end of every multirun, the summary files in the sweep directory (registered in configs/train.yaml)."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        logging.getLogger("tensorboard").setLevel(logging.WARNING)  # its reader logs each events file it ends
        try:
            written = summarize([sweep_dir], sweep_dir)
        except FileNotFoundError as error:  # no job got as far as its first TensorBoard event
            log.warning("no sweep summary: %s", error)
            return
        log.info("sweep summary:\n%s\n%s", written[1].read_text(), "\n".join(map(str, written)))
