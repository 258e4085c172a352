"""The sweep summary as a table: summary.csv for programs, summary.md for people."""

import csv
from pathlib import Path

from summary.runs import Run, distinct_overrides, shared_overrides
from trainer.tags import FINAL_TAGS


def write_csv(runs: list[Run], path: Path) -> None:
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["run", "overrides", *FINAL_TAGS, "wall_s"])
        for run in runs:
            finals = ["" if value is None else value for value in map(run.final, FINAL_TAGS)]
            writer.writerow([run.name, " ".join(run.overrides), *finals, round(run.wall_s, 1)])


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
