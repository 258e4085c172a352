"""Final values against a swept number: summary_KEY.png, e.g. every final metric against optim.lr, one line per
value of the other swept keys (model.qk_norm=true, false)."""

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from summary.figures import add_legend, seeds_note
from summary.runs import RunCurves, SummaryError, is_number, shared_of, swept_keys
from summary.seeds import Configuration, unfinished_runs
from summary.styles import LegendEntries, Style, encode
from trainer.tags import FINAL_TAGS

AUTOMATIC = 3  # a swept number with this many values or more gets its figure unasked
LOG_Y = {"attn/logit_max"}  # grows by orders of magnitude as the softmax saturates
COLUMNS = 4
MARKED = 8  # up to this many values (a grid) each gets its tick; more (a search's trials) get the axis's own ticks


@dataclass
class SweepLine:
    style: Style
    runs: list[RunCurves]  # in the order of the plotted key's value


def keys_to_plot_against(runs: list[RunCurves], x: str | None) -> list[str]:
    """[x] once checked; without x, every swept number with AUTOMATIC values or more."""
    numbers = [key for key in swept_keys(runs) if all(is_number(run.settings.get(key)) for run in runs)]
    if x is None:
        return [key for key in numbers if len(values_of(runs, key)) >= AUTOMATIC]
    if x not in numbers:
        why = "its values are not all numbers" if x in swept_keys(runs) else "the runs do not sweep it"
        raise SummaryError(f"cannot plot against {x}: {why}; swept numeric keys: {', '.join(numbers) or 'none'}")
    return [x]


def values_of(runs: list[RunCurves], key: str) -> list[float]:
    return sorted({run.settings[key] for run in runs})


def sweep_lines(runs: list[RunCurves], key: str) -> tuple[list[SweepLine], LegendEntries]:
    """One line per value of the other swept keys, through its runs in the order of `key`; and their legend."""
    others = [other for other in swept_keys(runs) if other != key]
    groups: dict[str, list[RunCurves]] = {}
    for run in sorted(runs, key=lambda run: run.settings[key]):
        groups.setdefault(repr([run.settings.get(other) for other in others]), []).append(run)
    if not others:  # a single line: nothing to tell apart
        return [SweepLine(Style("C0"), group) for group in groups.values()], []
    encoding = encode([group[0] for group in groups.values()], others)
    return [SweepLine(style, group) for style, group in zip(encoding.styles, groups.values())], encoding.legend


def logged_tags(runs: list[RunCurves] | list[Configuration]) -> list[str]:
    """The FINAL_TAGS with a final value in at least one run (an unfinished one's counts: it is drawn)."""
    every = [*runs, *unfinished_runs(runs)]
    return [tag for tag in FINAL_TAGS if any(item.final(tag) is not None for item in every)]


def tick_label(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.3g}"


def draw_line(axes, line, tag: str, key: str) -> None:
    """One line's final values of `tag` against `key`: a point per run or configuration, with its seeds' range as
    an error bar, and the runs that stopped early as open markers."""
    points = [(run.settings[key], run.final(tag), run) for run in line.runs if run.final(tag) is not None]
    if points:
        xs, ys, items = zip(*points)
        axes.plot(xs, ys, line.style.linestyle, color=line.style.color, marker="o", markersize=4)
        spreads = [item.spread(tag) if isinstance(item, Configuration) else None for item in items]
        if any(spread and spread.n > 1 for spread in spreads):  # from the lowest to the highest seed
            below = [0 if spread is None else spread.mean - spread.low for spread in spreads]
            above = [0 if spread is None else spread.high - spread.mean for spread in spreads]
            axes.errorbar(xs, ys, yerr=[below, above], fmt="none", ecolor=line.style.color, capsize=3)
    # Their final value is an earlier one: open markers, never part of a mean.
    finals = [(run.settings[key], run.final(tag)) for run in unfinished_runs(line.runs)]
    stopped = [(x, final) for x, final in finals if final is not None]
    if stopped:
        axes.plot(*zip(*stopped), "o", color=line.style.color, markerfacecolor="white", markersize=6)


def plot_against(runs: list[RunCurves] | list[Configuration], key: str, path: Path) -> None:
    """Each final value (FINAL_TAGS) some run logged in a panel of its own, against `key`; the last cell holds the
    legend. A tag no run logged (val/loss_far outside data=copy) gets no panel: an empty one would read as a fault."""
    lines, legend = sweep_lines(runs, key)
    values = values_of(runs, key)
    tags = logged_tags(runs)
    rows = math.ceil((len(tags) + 1) / COLUMNS)
    figure = Figure(figsize=(3.2 * COLUMNS, 2.6 * rows))
    # Fixed margins: a layout engine would measure every tick label of every panel, twice the drawing time.
    seeds = seeds_note(runs).replace("lines", "points").replace("bands", "error bars")
    top = 0.86 - 0.04 * bool(seeds)  # room for the title's third line
    spacing = {"left": 0.05, "right": 0.99, "bottom": 0.1, "top": top, "wspace": 0.3, "hspace": 0.55}
    cells = list(figure.subplots(rows, COLUMNS, gridspec_kw=spacing).flat)
    for tag, axes in zip(tags, cells):
        for line in lines:
            draw_line(axes, line, tag, key)
        axes.set_title(tag, fontsize="medium")
        axes.set_xlabel(key)
        if values[0] > 0 and values[-1] >= 10 * values[0]:
            axes.set_xscale("log")
        if len(values) <= MARKED:
            axes.set_xticks(values, [tick_label(value) for value in values], fontsize="small")
            axes.xaxis.set_minor_locator(NullLocator())  # only the swept values are marked
        if tag in LOG_Y and all(min(line.get_ydata()) > 0 for line in axes.lines):
            axes.set_yscale("log")
    for axes in cells[len(tags) :]:
        axes.axis("off")
    if legend:
        add_legend(cells[len(tags)], legend, loc="upper left")
    note = " (open markers: runs that stopped before trainer.max_steps)" if unfinished_runs(runs) else ""
    shared = textwrap.fill(" ".join(shared_of(runs)), 160)
    figure.suptitle(f"final values against {key}{note}\n{shared}{seeds}".strip(), fontsize="small")
    figure.savefig(path, dpi=80)
