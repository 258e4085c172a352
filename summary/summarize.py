"""summarize(): every summary file of the runs under some directories."""

from pathlib import Path

from summary.against import keys_to_plot_against, plot_against
from summary.figures import plot_curves
from summary.runs import read_runs
from summary.tables import markdown_table, write_csv

SUMMARY_FILES = ["summary.csv", "summary.md", "summary.png"]


def summarize(paths: list[Path], out_dir: Path, x: str | None = None) -> list[Path]:
    """Write summary.csv, summary.md and summary.png of every run under `paths` into `out_dir`, and summary_KEY.png
    for KEY = `x` (a swept number; SummaryError if it is not one) or, without `x`, every swept number with 3 values
    or more. Returns their paths."""
    runs = read_runs(paths)
    keys = keys_to_plot_against(runs, x)  # before writing anything: a bad x leaves no half summary
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, markdown_path, figure_path = (out_dir / name for name in SUMMARY_FILES)
    write_csv(runs, csv_path)
    markdown_path.write_text(markdown_table(runs))
    plot_curves(runs, figure_path)
    against = [out_dir / f"summary_{key}.png" for key in keys]
    for key, path in zip(keys, against):
        plot_against(runs, key, path)
    return [csv_path, markdown_path, figure_path, *against]
