"""The sweep summary as a figure: summary.png, the curves of every run against the step."""

import textwrap
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from summary.looks import NEUTRAL, LegendEntries, Look, encode
from summary.runs import Run, shared_overrides, swept_keys

MASK = "model.causal"  # where swept, it gives the line style: unmasked dashed beside its dotted forced-mask line
FORCED_MASK = Look(NEUTRAL, ":", "x")  # val/loss_causal of an unmasked run: dotted, with x markers, in its colour


def plot_curves(runs: list[Run], path: Path) -> None:
    """val/loss (and val/loss_causal where it differs: unmasked runs) and attn/entropy of every run, by step."""
    encoding = encode(runs, swept_keys(runs), style_first=MASK)
    figure = Figure(figsize=(11, 4), layout="constrained")
    losses, entropy = figure.subplots(1, 2)
    leaky = [run for run in runs if reads_the_future(run)]
    for run, look in zip(runs, encoding.looks):
        draw(losses, run.curves.get("val/loss"), look)
        draw(entropy, run.curves.get("attn/entropy"), look)
        if run in leaky:
            draw(losses, run.curves["val/loss_causal"], Look(look.color, FORCED_MASK.linestyle, FORCED_MASK.marker))
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
    shared = shared_overrides(runs)
    if shared:
        figure.suptitle(textwrap.fill(" ".join(shared), 120), fontsize="small")  # clear of the legend
    figure.savefig(path, dpi=80)


def reads_the_future(run: Run) -> bool:
    """Whether forcing the mask on changed its loss: an unmasked run (a masked one logs the same value twice)."""
    forced = run.curves.get("val/loss_causal")
    return bool(forced) and forced != run.curves.get("val/loss")


def draw(axes: Axes, curve: list[tuple[int, float]] | None, look: Look) -> None:
    if curve:
        steps, values = zip(*curve)
        axes.plot(steps, values, look.linestyle, color=look.color, marker=look.marker or ".")


def add_legend(owner: Figure | Axes, entries: LegendEntries, **where) -> None:
    """One legend of headings (bold, no line) and the entries below them, each a line drawn as it is in the plot."""
    handles = [Line2D([], [], linestyle="none") if look is None else legend_line(look) for _, look in entries]
    legend = owner.legend(handles, [label for label, _ in entries], fontsize="small", **where)
    for text, (_, look) in zip(legend.get_texts(), entries):
        if look is None:
            text.set_fontweight("bold")


def legend_line(look: Look) -> Line2D:
    return Line2D([], [], color=look.color, linestyle=look.linestyle, marker=look.marker)
