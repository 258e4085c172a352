"""Sweep summaries: a table and a figure of many runs, read back from their TensorBoard events.

summarize() finds the runs (directories holding events files) under some directories and writes summary.csv,
summary.md and summary.png. report.py calls it for any directories; summary.callback.SweepSummary, a Hydra callback
registered in configs/train.yaml, calls it for the sweep directory at the end of every multirun.
"""

from pathlib import Path

from summary.figures import plot_curves
from summary.runs import read_runs
from summary.tables import markdown_table, write_csv

SUMMARY_FILES = ["summary.csv", "summary.md", "summary.png"]


def summarize(paths: list[Path], out_dir: Path) -> list[Path]:
    """Write summary.csv, summary.md and summary.png of every run under `paths` into `out_dir`; returns their paths."""
    runs = read_runs(paths)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, markdown_path, figure_path = (out_dir / name for name in SUMMARY_FILES)
    write_csv(runs, csv_path)
    markdown_path.write_text(markdown_table(runs))
    plot_curves(runs, figure_path)
    return [csv_path, markdown_path, figure_path]
