"""The sweep summary as a figure: summary.png."""

import textwrap
from pathlib import Path

from matplotlib.figure import Figure

from summary.runs import Run, distinct_overrides, shared_overrides

CURVES = [("val/loss", 0, "-"), ("val/loss_causal", 0, "--"), ("attn/entropy", 1, "-")]  # tag, panel, line style


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
