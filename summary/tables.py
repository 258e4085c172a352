"""The sweep summary as a table: summary.csv for programs, summary.md for people."""

import csv
from pathlib import Path

from summary.runs import RunCurves, as_word, shared_of
from summary.seeds import SEED, Configuration
from trainer.overrides import distinct_overrides
from trainer.tags import FINAL_TAGS

# After the final values: how far each run got. finished: whether its last loss is at trainer.max_steps (empty where
# the run has no Hydra config to say); truncated: whether an events file of it ends mid-record.
PROGRESS = ["last_step", "max_steps", "finished", "truncated"]
# The notes under the table, after the runs they name.
UNFINISHED = (
    "They stopped before trainer.max_steps (killed, crashed or still running): their values are from the last step "
    "they logged."
)
TRUNCATED = "Their values are the last readable ones."


def write_csv(runs: list[RunCurves], path: Path) -> None:
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["run", "overrides", *FINAL_TAGS, "wall_s", *PROGRESS])
        for run in runs:
            finals = ["" if value is None else value for value in map(run.final, FINAL_TAGS)]
            progress = [as_word(getattr(run, column)) for column in PROGRESS]
            writer.writerow([run.name, " ".join(run.overrides), *finals, round(run.wall_s, 1), *progress])


def markdown_table(runs: list[RunCurves]) -> str:
    shared = shared_of(runs)
    lines = [
        (
            f"Overrides of every run: {' '.join(f'`{o}`' for o in shared) or 'none'}. Final values, losses in nats "
            "per token; an empty cell: the run did not log that tag. Wall time: from a run's first to its last "
            "TensorBoard event. Steps: the last step logged, of trainer.max_steps."
        ),
        "",
        *header(["run", "overrides", *FINAL_TAGS, "wall s", "steps", "finished"]),
    ]
    for run in runs:
        finals = ["" if value is None else f"{value:.3f}" for value in map(run.final, FINAL_TAGS)]
        steps = "/".join(as_word(value) for value in (run.last_step, run.max_steps) if value is not None)
        finished = {True: "yes", False: "**no**", None: ""}[run.finished]
        distinct = " ".join(distinct_overrides(run.overrides, shared))
        lines.append(row([run.name, distinct, *finals, f"{run.wall_s:.0f}", steps, finished]))
    return "\n".join(lines + notes(runs)) + "\n"


def row(cells: list[str]) -> str:
    """A Markdown table row: | a | b |."""
    return "| " + " | ".join(cells) + " |"


def header(columns: list[str]) -> list[str]:
    """A Markdown table's header row and the line under it."""
    return [row(columns), "|---" * len(columns) + "|"]


def notes(runs: list[RunCurves]) -> list[str]:
    """Under the table: the runs whose values are not what they would have been, and why."""
    lines = []
    unfinished = [run for run in runs if run.finished is False]
    if unfinished:
        stops = [f"`{run.name}` at step {as_word(run.last_step) or 'none'} of {run.max_steps}" for run in unfinished]
        lines.append(f"Unfinished: {', '.join(stops)}. {UNFINISHED}")
    truncated = [f"`{run.name}`" for run in runs if run.truncated]
    if truncated:
        lines.append(f"Events cut short mid-record (a crash while writing): {', '.join(truncated)}. {TRUNCATED}")
    return [line for note in lines for line in ("", note)]


def write_seeds_csv(configurations: list[Configuration], path: Path) -> None:
    """One row per configuration: each final value's mean over its finished seeds, with its sd; n, the seeds
    averaged; unfinished, the runs left out."""
    spread_columns = [column for tag in FINAL_TAGS for column in (tag, f"{tag}_sd")]
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["overrides", *spread_columns, "n", "seeds", "unfinished", "wall_s"])
        for configuration in configurations:
            spreads = [configuration.spread(tag) for tag in FINAL_TAGS]
            cells: list = []
            for spread in spreads:
                cells += ["", ""] if spread is None else [spread.mean, "" if spread.sd is None else spread.sd]
            overrides = " ".join(configuration.overrides)
            unfinished = " ".join(run.name for run in configuration.unfinished)
            wall_s = "" if configuration.wall_s is None else round(configuration.wall_s, 1)
            writer.writerow([overrides, *cells, len(configuration.runs), configuration.seeds, unfinished, wall_s])


def seeds_table(configurations: list[Configuration], runs: list[RunCurves]) -> str:
    """Mean ± sd over the seeds per configuration, then every run as markdown_table shows it."""
    shared = shared_of(configurations)
    lines = [
        (
            f"Overrides of every run: {' '.join(f'`{o}`' for o in shared) or 'none'}. "
            f"Each configuration's final values over its seeds ({SEED}): mean ± sample standard deviation, "
            "losses in nats per token; n: the seeds averaged; unfinished: runs that stopped before "
            "trainer.max_steps, left out of the means. Wall time: the mean over the seeds."
        ),
        "",
        *header(["configuration", *FINAL_TAGS, "n", "unfinished", "wall s"]),
    ]
    for configuration in configurations:
        spreads = [str(spread or "") for spread in map(configuration.spread, FINAL_TAGS)]
        n, unfinished = str(len(configuration.runs)), str(len(configuration.unfinished) or "")
        wall_s = "" if configuration.wall_s is None else f"{configuration.wall_s:.0f}"
        lines.append(row([distinct_name(configuration, shared), *spreads, n, unfinished, wall_s]))
    return "\n".join(lines) + "\n\n## Every run\n\n" + markdown_table(runs)


def distinct_name(configuration: Configuration, shared: list[str]) -> str:
    """A configuration as its row names it: the overrides that tell it apart from the others."""
    return " ".join(override for override in configuration.overrides if override not in shared) or "all runs"
