"""The sweep summary as a figure: summary.png, the curves of every run against the step, with the masks the runs
trained with drawn below them. And the figures report.py draws when asked: chosen tags against the step
(plot_chosen), with the masks too, the attention pictures of runs side by side (plot_patterns)."""

import io
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib.image
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from summary.masks import trained_mask
from summary.runs import RunCurves, SummaryError, shared_of, swept_keys
from summary.seeds import SEED, Configuration, unfinished_runs
from summary.styles import NEUTRAL, LegendEntries, Style, encode
from task import TASKS
from trainer.tags import loss_tag

MASK = "model.causal"  # where swept, it gives the line style: unmasked dashed beside its dotted forced-mask line
FORCED_MASK = Style(NEUTRAL, ":", "x")  # a leaking run's honest loss (val/loss_causal): dotted, x markers, its colour
MASK_INCHES = 3.6  # the height of the row of masks below the curves: their words still read at 80 dpi


def plot_curves(runs: list[RunCurves] | list[Configuration], path: Path) -> None:
    """val/loss (and val/loss_causal where it differs: unmasked runs) and attn/entropy of every run, by step; or of
    every configuration of seeds: its mean, inside the band from its lowest to its highest seed. Where no run logs
    attn/entropy (recurrent models), its panel is left out."""
    encoding = encode(runs, swept_keys(runs), style_first=MASK)
    with_entropy = any(run.curves.get("attn/entropy") for run in runs)
    figure, curves = with_masks((11 if with_entropy else 6.5, 4), trained_masks(runs))
    losses, *rest = curves.subplots(1, 1 + with_entropy, squeeze=False)[0]
    honest = {run.name: tag for run in runs if (tag := honest_tag(run))}
    for run, style in zip(runs, encoding.styles):
        draw(losses, run.curves.get("val/loss"), style, run.band("val/loss"))
        for entropy in rest:
            draw(entropy, run.curves.get("attn/entropy"), style, run.band("attn/entropy"))
        if run.name in honest:
            forced = Style(style.color, FORCED_MASK.linestyle, FORCED_MASK.marker)
            draw(losses, run.curves[honest[run.name]], forced, run.band(honest[run.name]))
    tags = ["val/loss", *dict.fromkeys(honest.values())]
    later = [value for run in runs for tag in tags for _, value in run.curves.get(tag, [])[1:]]
    if later:  # the first evaluation's loss, about ln(vocabulary size), would flatten every later difference
        losses.set_ylim(top=1.05 * max(later))
    meaning = {loss_tag(task.honest): task.curves[task.honest].meaning for task in TASKS.values()}
    forced = "".join(f" · dotted ×: {tag}, {meaning[tag]}" for tag in tags[1:])
    losses.set(title=textwrap.fill(f"val/loss{forced}", 60), xlabel="step", ylabel="nats per token")
    for entropy in rest:
        entropy.set(title="attn/entropy: mean over queries", xlabel="step", ylabel="nats")
    if not losses.has_data():
        losses.text(0.5, 0.5, "not logged", ha="center", va="center", transform=losses.transAxes)
    legend = encoding.legend + [(tag, FORCED_MASK) for tag in tags[1:]]
    add_legend(figure, legend, loc="outside right upper")
    title = textwrap.fill(" ".join(shared_of(runs)), 70) + seeds_note(runs)
    if title:
        figure.suptitle(title.strip(), fontsize="small")  # clear of the legend
    figure.savefig(path, dpi=80)


def trained_masks(items: list[RunCurves] | list[Configuration]) -> list[np.ndarray]:
    """The masks the runs trained with, each once, in the runs' order, each drawn as its attn/mask picture
    (summary/masks.py; the seeds of a configuration train with their first run's). A run without one adds none."""
    masks: list[np.ndarray] = []
    for item in items:
        run = seed_runs(item)[0]
        picture = trained_mask(run.path) if run.path is not None else None
        if picture is not None and not any(np.array_equal(picture, known) for known in masks):
            masks.append(picture)
    return masks


def with_masks(size: tuple[float, float], masks: list[np.ndarray]) -> tuple[Figure, Figure | SubFigure]:
    """A figure of `size` inches for the curves, and a row of `masks` below them, each picture as the run drew it:
    the figure, and where the curves go (the figure itself where there is no mask)."""
    if not masks:
        figure = Figure(figsize=size, layout="constrained")
        return figure, figure
    width, height = size
    aspect = max(picture.shape[0] / picture.shape[1] for picture in masks)
    below = min(MASK_INCHES, 0.8 * aspect * width / len(masks))  # no taller than the pictures side by side fill
    figure = Figure(figsize=(width, height + below), layout="constrained")
    curves, row = figure.subfigures(2, 1, height_ratios=[height, below])
    for axes, picture in zip(row.subplots(1, len(masks), squeeze=False)[0], masks):
        axes.imshow(as_rgba(picture), interpolation="antialiased")
        axes.axis("off")
    return figure, curves


def seeds_note(items: list[RunCurves] | list[Configuration]) -> str:
    """What the lines of configurations of seeds are, and which runs they leave out."""
    if not items or not isinstance(items[0], Configuration):
        return ""
    counts = sorted({len(configuration.runs) for configuration in items})
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    left_out = len(unfinished_runs(items))
    unfinished = f"; {left_out} unfinished run{'s' * (left_out != 1)} left out (summary.md)" if left_out else ""
    return f"\nlines: the mean over {n} seeds; bands: from the lowest to the highest seed{unfinished}"


def honest_tag(item: RunCurves | Configuration) -> str | None:
    """The tag of the run's loss with its targets hidden (its task's honest curve) where it differs from val/loss:
    the run's input showed it its targets, the leak; None where it did not (the two are the same values)."""
    tag = loss_tag(TASKS[item.task].honest)
    hidden = item.curves.get(tag)
    return tag if hidden and hidden != item.curves.get("val/loss") else None


def draw(
    axes: Axes, curve: list[tuple[int, float]] | None, style: Style, band: list | None = None, **line
) -> list[float]:
    """The curve (`line`: more of matplotlib's settings for it); and its band of (step, low, high), shaded in its
    colour, where it has one. Returns the values drawn."""
    drawn = []
    if curve:
        steps, values = zip(*curve)
        axes.plot(steps, values, style.linestyle, color=style.color, marker=style.marker or ".", **line)
        drawn += values
    if band:
        steps, lows, highs = zip(*band)
        axes.fill_between(steps, lows, highs, color=style.color, alpha=0.2, linewidth=0)
        drawn += lows + highs
    return drawn


def add_legend(owner: Figure | Axes, entries: LegendEntries, **where) -> None:
    """One legend of headings (bold, no line) and the entries below them, each a line drawn as it is in the plot."""
    handles = [Line2D([], [], linestyle="none") if style is None else legend_line(style) for _, style in entries]
    legend = owner.legend(handles, [label for label, _ in entries], fontsize="small", **where)
    for text, (_, style) in zip(legend.get_texts(), entries):
        if style is None:
            text.set_fontweight("bold")


def legend_line(style: Style) -> Line2D:
    return Line2D([], [], color=style.color, linestyle=style.linestyle, marker=style.marker)


SEED_MARKERS = "osD^vP*X"  # one seed's line from another's, where each seed is drawn (per_seed)
SPAN = 100  # a panel whose largest |value| is 100 or more and 100 times its smallest non-zero one gets a log axis
CHOSEN_COLUMNS = 3
PATTERN = "attn/pattern"  # the attention picture train.py logs at every evaluation; layer L > 0: attn/pattern/L
PATTERN_COLUMNS = 4


@dataclass(frozen=True)
class Mark:
    """A horizontal reference line across a panel (the value a finite mask writes), labelled at its right end."""

    value: float
    label: str


def add_differences(runs: list[RunCurves], specs: list[str]) -> None:
    """Each spec's curve in every run's curves: a tag as logged, or A-B, the difference of two logged tags at the
    steps both were logged at (val/loss_causal-val/loss: what reading the future gained). SummaryError for a spec
    that is neither."""
    logged = {tag for run in runs for tag in run.curves}
    for spec in specs:
        if spec in logged:
            continue
        minuend, subtrahend = difference_of(spec, logged)
        for run in runs:
            first, second = dict(run.curves.get(minuend, [])), dict(run.curves.get(subtrahend, []))
            steps = sorted(first.keys() & second.keys())
            if steps:
                run.curves[spec] = [(step, first[step] - second[step]) for step in steps]


def difference_of(spec: str, logged: set[str]) -> tuple[str, str]:
    """The two logged tags A and B of "A-B" (a tag has no "-" of its own, but a try at every "-" costs nothing)."""
    for index, character in enumerate(spec):
        if character == "-" and spec[:index] in logged and spec[index + 1 :] in logged:
            return spec[:index], spec[index + 1 :]
    raise SummaryError(
        f"cannot draw {spec}: no run logged it, nor is it A-B of two tags they logged; they logged "
        f"{', '.join(sorted(logged))}"
    )


def chosen_panel(
    axes, spec: str, items: list, styles: list[Style], marks: list[Mark], marker_of: dict[str, str] | None
) -> None:
    """One spec's panel of plot_chosen: each item's curve in its style (each seed's run on its own, marked, where
    `marker_of` gives the seeds' markers), the marks across it, its y scale and title."""
    values = [mark.value for mark in marks]
    for item, style in zip(items, styles):
        if marker_of is not None and isinstance(item, Configuration):
            for run in item.runs:
                seed_style = Style(style.color, style.linestyle, marker_of[repr(run.settings.get(SEED))])
                values += draw(axes, run.curves.get(spec), seed_style, markersize=4, linewidth=1.2)
        else:
            values += draw(axes, item.curves.get(spec), style, item.band(spec))
    for mark in marks:
        axes.axhline(mark.value, color="0.2", linewidth=0.8)
        at_the_right = {"xycoords": ("axes fraction", "data"), "xytext": (-2, 2), "textcoords": "offset points"}
        axes.annotate(mark.label, (1, mark.value), ha="right", va="bottom", fontsize="small", **at_the_right)
    scale_y(axes, values)
    axes.set(title=spec_title(spec), xlabel="step")
    if not axes.has_data():
        axes.text(0.5, 0.5, "not logged by these runs", ha="center", va="center", transform=axes.transAxes)


def plot_chosen(
    items: list[RunCurves] | list[Configuration],
    specs: list[str],
    path: Path,
    marks: dict[str, list[Mark]] | None = None,
    per_seed: bool = False,
) -> None:
    """Each spec's curve (add_differences() first) in a panel of its own, against the step, as summary.png draws
    them: a colour per value of the compared setting, a line style per switch; a configuration of seeds as its mean
    inside its min-max band or, `per_seed`, as a line per seed marked by its trainer.seed. A panel whose values span
    decades gets a log axis (symlog where they reach 0 or below: scores falling to -1e5); `marks` draws a
    reference line across a spec's panel."""
    marks = marks or {}
    encoding = encode(items, swept_keys(items))
    columns = min(len(specs), CHOSEN_COLUMNS)
    rows = math.ceil(len(specs) / columns)
    figure, curves = with_masks((4.4 * columns + 2, 3.4 * rows + 0.6), trained_masks(items))
    cells = list(curves.subplots(rows, columns, squeeze=False).flat)
    seeds = sorted({run.settings.get(SEED) for item in items for run in seed_runs(item)}, key=repr)
    marker_of = {repr(seed): SEED_MARKERS[index % len(SEED_MARKERS)] for index, seed in enumerate(seeds)}
    for spec, axes in zip(specs, cells):
        chosen_panel(axes, spec, items, encoding.styles, marks.get(spec, []), marker_of if per_seed else None)
    for axes in cells[len(specs) :]:
        axes.axis("off")
    legend = encoding.legend
    if per_seed and len(seeds) > 1:
        legend = (
            legend + [(SEED, None)] + [(str(seed), Style(NEUTRAL, "none", marker_of[repr(seed)])) for seed in seeds]
        )
    add_legend(figure, legend, loc="outside right upper")
    note = per_seed_note(items) if per_seed else seeds_note(items)
    title = textwrap.fill(" ".join(shared_of(items)), 140) + note
    if title:
        figure.suptitle(title.strip(), fontsize="small")
    figure.savefig(path, dpi=80)


def seed_runs(item: RunCurves | Configuration) -> list[RunCurves]:
    return item.runs if isinstance(item, Configuration) else [item]


def spec_title(spec: str) -> str:
    return spec.replace("-", " − ") if "-" in spec else spec


def scale_y(axes: Axes, values: list[float]) -> None:
    """A log axis where the values span decades (SPAN); symlog, linear near 0, where some are 0 or below."""
    sizes = [abs(value) for value in values if math.isfinite(value) and value != 0]
    if not sizes or max(sizes) < SPAN or max(sizes) < SPAN * min(sizes):
        return
    if all(value > 0 for value in values):
        axes.set_yscale("log")
        return
    decade = 10 ** math.floor(math.log10(min(sizes)))
    linthresh = max(decade, 10 ** math.floor(math.log10(max(sizes))) / 1e4)
    axes.set_yscale("symlog", linthresh=linthresh)
    finite = [value for value in values if math.isfinite(value)]
    if max(finite) < 0:  # symlog's margins would reach decades of positive values no curve has
        axes.set_ylim(top=-linthresh)


def per_seed_note(items: list[RunCurves] | list[Configuration]) -> str:
    if not items or not isinstance(items[0], Configuration):
        return ""
    left_out = len(unfinished_runs(items))
    unfinished = f"; {left_out} unfinished run{'s' * (left_out != 1)} left out" if left_out else ""
    return f"\nlines: one per seed (markers: trainer.seed){unfinished}"


def plot_patterns(run_dirs: list[Path], step: int, layer: int, path: Path) -> None:
    """The attention picture (attn/pattern, layer `layer`) each run logged at `step`, side by side, PATTERN_COLUMNS
    to a row: the PNGs train.py drew, pixel for pixel as TensorBoard's Images tab shows them (each names its run's
    overrides in its title). SummaryError for a run without one."""
    tag = PATTERN if layer == 0 else f"{PATTERN}/{layer}"  # trainer/diagnostics.py's layer_tag
    pictures = [pattern_at(run_dir, tag, step) for run_dir in run_dirs]
    height = max(picture.shape[0] for picture in pictures)
    width = max(picture.shape[1] for picture in pictures)
    columns = min(len(pictures), PATTERN_COLUMNS)
    rows = math.ceil(len(pictures) / columns)
    sheet = np.ones((rows * height, columns * width, 4), dtype=np.float32)  # white where a picture is smaller
    for index, picture in enumerate(pictures):
        top, left = (index // columns) * height, (index % columns) * width
        sheet[top : top + picture.shape[0], left : left + picture.shape[1]] = as_rgba(picture)
    matplotlib.image.imsave(path, sheet, format="png")


def as_rgba(picture: np.ndarray) -> np.ndarray:
    """A PNG read by matplotlib (grey, RGB or RGBA, floats in 0-1) as RGBA."""
    if picture.ndim == 2:
        picture = np.stack([picture] * 3, axis=-1)
    if picture.shape[2] == 3:
        picture = np.concatenate([picture, np.ones(picture.shape[:2] + (1,), dtype=picture.dtype)], axis=-1)
    return picture


def pattern_at(run_dir: Path, tag: str, step: int):
    """The image `tag` of the run at `step`, as an array; SummaryError naming the steps it has where not that one."""
    events = EventAccumulator(str(run_dir), size_guidance={"images": 0, "scalars": 1, "tensors": 1, "histograms": 1})
    events.Reload()
    images = {image.step: image for image in events.Images(tag)} if tag in events.Tags()["images"] else {}
    if step not in images:
        steps = ", ".join(map(str, sorted(images))) or "none"
        raise SummaryError(f"{run_dir}: no {tag} image at step {step}; its steps with one: {steps}")
    return matplotlib.image.imread(io.BytesIO(images[step].encoded_image_string), format="png")
