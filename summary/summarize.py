"""summarize(): every summary file of the runs under some directories."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from summary.against import keys_to_plot_against, plot_against
from summary.figures import Mark, add_differences, plot_chosen, plot_curves, plot_patterns
from summary.runs import find_runs, read_runs
from summary.seeds import by_configuration, sweeps_seeds
from summary.tables import markdown_table, seeds_table, write_csv, write_seeds_csv

SUMMARY_FILES = ["summary.csv", "summary.md", "summary.png"]
EVERY_RUN = "summary_runs.csv"  # where runs are grouped by seed: one row per run, as summary.csv has without seeds


def summarize(paths: list[Path], out_dir: Path, x: str | None = None) -> list[Path]:
    """Write summary.csv, summary.md and summary.png of every run under `paths` into `out_dir`, and summary_KEY.png
    for KEY = `x` (a swept number; SummaryError if it is not one) or, without `x`, every swept number with 3 values
    or more. Runs that differ only in trainer.seed are one configuration each (summary.seeds): the files give their
    mean and spread, and summary_runs.csv every run. Returns their paths."""
    runs = read_runs(paths)
    items = by_configuration(runs) if sweeps_seeds(runs) else runs
    keys = keys_to_plot_against(items, x)  # before writing anything: a bad x leaves no half summary
    out_dir.mkdir(parents=True, exist_ok=True)
    with staged(out_dir) as staging:
        csv_path, markdown_path, figure_path = (staging / name for name in SUMMARY_FILES)
        if items is runs:
            write_csv(runs, csv_path)
            markdown_path.write_text(markdown_table(runs))
        else:
            write_seeds_csv(items, csv_path)
            markdown_path.write_text(seeds_table(items, runs))
            write_csv(runs, staging / EVERY_RUN)
        plot_curves(items, figure_path)
        for key in keys:
            plot_against(items, key, staging / f"summary_{key}.png")
    against = [out_dir / f"summary_{key}.png" for key in keys]
    every_run = [] if items is runs else [out_dir / EVERY_RUN]
    return [*(out_dir / name for name in SUMMARY_FILES), *against, *every_run]


@contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A folder in `out_dir` to write files into, each moved into `out_dir` once all are written: a summary that
    fails or is stopped leaves the last one whole, never a mix of two or a file cut short. An error names the file
    in `out_dir`, not its staged copy."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=".summary-", suffix=".tmp", dir=out_dir))
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(out_dir)) from None
    try:
        try:
            yield staging
        except OSError as error:
            if error.filename is not None and Path(error.filename).parent == staging:
                raise OSError(error.errno, error.strerror, str(out_dir / Path(error.filename).name)) from None
            raise
        for path in sorted(staging.iterdir()):
            os.replace(path, out_dir / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def draw_chosen(
    paths: list[Path], specs: list[str], path: Path, marks: dict[str, list[Mark]] | None = None, per_seed: bool = False
) -> Path:
    """The curves of `specs` (tags, or A-B: the difference of two) of every run under `paths` against the step,
    into `path` (figures.plot_chosen); runs that differ only in trainer.seed are one configuration each."""
    runs = read_runs(paths)
    add_differences(runs, specs)
    items = by_configuration(runs) if sweeps_seeds(runs) else runs
    path.parent.mkdir(parents=True, exist_ok=True)
    with staged(path.parent) as staging:
        plot_chosen(items, specs, staging / path.name, marks, per_seed)
    return path


def draw_patterns(paths: list[Path], step: int, layer: int, path: Path) -> Path:
    """The attention pictures of every run under `paths` at `step`, side by side, into `path`."""
    run_dirs = find_runs(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    with staged(path.parent) as staging:
        plot_patterns(run_dirs, step, layer, staging / path.name)
    return path
