"""The sweep summary as a figure: summary.png, the curves of every run against the step."""

import textwrap
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from summary.looks import NEUTRAL, LegendEntries, Look, encode
from summary.runs import Run, shared_overrides, swept_keys
from summary.seeds import Configuration, unfinished_runs

MASK = "model.causal"  # where swept, it gives the line style: unmasked dashed beside its dotted forced-mask line
FORCED_MASK = Look(NEUTRAL, ":", "x")  # val/loss_causal of an unmasked run: dotted, with x markers, in its colour


def plot_curves(runs: list[Run] | list[Configuration], path: Path) -> None:
    """val/loss (and val/loss_causal where it differs: unmasked runs) and attn/entropy of every run, by step; or of
    every configuration of seeds: its mean, inside the band from its lowest to its highest seed."""
    encoding = encode(runs, swept_keys(runs), style_first=MASK)
    figure = Figure(figsize=(11, 4), layout="constrained")
    losses, entropy = figure.subplots(1, 2)
    leaky = [run for run in runs if reads_the_future(run)]
    for run, look in zip(runs, encoding.looks):
        draw(losses, run.curves.get("val/loss"), look, run.band("val/loss"))
        draw(entropy, run.curves.get("attn/entropy"), look, run.band("attn/entropy"))
        if run in leaky:
            forced = Look(look.color, FORCED_MASK.linestyle, FORCED_MASK.marker)
            draw(losses, run.curves["val/loss_causal"], forced, run.band("val/loss_causal"))
    later = [
        value for run in runs for tag in ("val/loss", "val/loss_causal") for _, value in run.curves.get(tag, [])[1:]
    ]
    if later:  # the first evaluation's loss, about ln(vocabulary size), would flatten every later difference
        losses.set_ylim(top=1.05 * max(later))
    forced = " · dotted ×: val/loss_causal, the mask forced on" if leaky else ""
    losses.set(title=f"val/loss{forced}", xlabel="step", ylabel="nats per token")
    entropy.set(title="attn/entropy: mean over queries", xlabel="step", ylabel="nats")
    for axes in (losses, entropy):
        if not axes.has_data():
            axes.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axes.transAxes)
    legend = encoding.legend + ([("val/loss_causal", FORCED_MASK)] if leaky else [])
    add_legend(figure, legend, loc="outside right upper")
    title = textwrap.fill(" ".join(shared_overrides(runs)), 120) + seeds_note(runs)
    if title:
        figure.suptitle(title.strip(), fontsize="small")  # clear of the legend
    figure.savefig(path, dpi=80)


def seeds_note(items: list[Run] | list[Configuration]) -> str:
    """What the lines of configurations of seeds are, and which runs they leave out."""
    if not items or not isinstance(items[0], Configuration):
        return ""
    counts = sorted({len(configuration.runs) for configuration in items})
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    left_out = len(unfinished_runs(items))
    unfinished = f"; {left_out} unfinished run{'s' * (left_out != 1)} left out (summary.md)" if left_out else ""
    return f"\nlines: the mean over {n} seeds; bands: from the lowest to the highest seed{unfinished}"


def reads_the_future(run: Run) -> bool:
    """Whether forcing the mask on changed its loss: an unmasked run (a masked one logs the same value twice)."""
    forced = run.curves.get("val/loss_causal")
    return bool(forced) and forced != run.curves.get("val/loss")


def draw(axes: Axes, curve: list[tuple[int, float]] | None, look: Look, band: list | None = None) -> None:
    """The curve; and its band of (step, low, high), shaded in its colour, where it has one."""
    if curve:
        steps, values = zip(*curve)
        axes.plot(steps, values, look.linestyle, color=look.color, marker=look.marker or ".")
    if band:
        steps, lows, highs = zip(*band)
        axes.fill_between(steps, lows, highs, color=look.color, alpha=0.2, linewidth=0)


def add_legend(owner: Figure | Axes, entries: LegendEntries, **where) -> None:
    """One legend of headings (bold, no line) and the entries below them, each a line drawn as it is in the plot."""
    handles = [Line2D([], [], linestyle="none") if look is None else legend_line(look) for _, look in entries]
    legend = owner.legend(handles, [label for label, _ in entries], fontsize="small", **where)
    for text, (_, look) in zip(legend.get_texts(), entries):
        if look is None:
            text.set_fontweight("bold")


def legend_line(look: Look) -> Line2D:
    return Line2D([], [], color=look.color, linestyle=look.linestyle, marker=look.marker)
