"""What the attention does, for TensorBoard: statistics of its weights and scores (model/statistics.py), its pattern,
its gradients.

The statistics read the reference path's AttentionResult (the fused kernel returns no weights). Tags name
layer 0 plainly and add the index for the others: attn/entropy, attn/entropy/1, ... A recurrent model
(model.mixer=gru or lstm) has no attention weights: it gets none of these tags.
"""

import math
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from model import CAUSAL, Mask, Probe, TinyLM, future_keys
from model.statistics import attention_stats, fed_scores, self_weight
from task import DRAWN

if TYPE_CHECKING:  # the readers of trained runs (viewer/) use these functions without TensorBoard's writer
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from torch.utils.tensorboard import SummaryWriter

    from task import Task

PROBE_WINDOWS = 8  # validation windows the statistics average over: enough rows, little time
PATTERN_TOKENS = 24  # the pattern image shows the first window's first tokens: labels readable in a thumbnail
# The pattern figure's layout, in inches and points (pattern_figure)
HEAT_MAP, COLOUR_BAR, LINE, GAP = 4.5, 0.9, 0.2, 0.1  # inches: the heat map's side, the bar with its numbers
LABEL_POINTS, MONOSPACE_WIDTH = 14, 0.61  # the tokens' font size, and its characters' width in ems (DejaVu Sans Mono)
VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})


def layer_tag(name: str, layer: int) -> str:
    return name if layer == 0 else f"{name}/{layer}"


def write_scalars(writer: "SummaryWriter", values: dict[str, Tensor], step: int) -> None:
    # One transfer for all of them: reading each value on its own would wait for the device every time.
    for tag, value in zip(values, torch.stack(list(values.values())).tolist()):
        writer.add_scalar(tag, value, step)


def probe_windows(task: "Task", val_tokens: np.ndarray, seed: int, device: torch.device) -> Tensor:
    """The inputs of the validation batch (PROBE_WINDOWS, block_size) that log_attention reads, as the task makes
    them: the same for a given seed."""
    return task.draw(val_tokens, PROBE_WINDOWS, torch.Generator().manual_seed(seed), device).inputs


@torch.no_grad()
def log_attention(
    writer: "SummaryWriter",
    model: TinyLM,
    windows: Tensor,
    tokenizer: Tokenizer,
    step: int,
    label: str = "",
    draw: Callable[[Callable[[], None]], object] = lambda job: job(),
    mask: Mask = CAUSAL,
    hatch: bool = True,
) -> None:
    """Each layer's statistics (attn/...), a histogram of its scores (attn/logits) and, as an image titled with
    `label` and the step, its weights on the first window's first PATTERN_TOKENS tokens (attn/pattern, the keys the
    task's `mask` hides hatched where `hatch` says), all through the reference path and that mask. `draw` runs the
    drawing of each image: here and now by default; the recorder hands it to a thread, so that matplotlib works
    while the next steps train."""
    layers = model.attention_layers()
    if not layers:
        return  # a recurrent model: no attention to read
    was_training = model.training
    model.eval()
    probe, pattern_probe = Probe(), Probe()
    model(windows, mask=mask, probe=probe)
    snippet = windows[0, :PATTERN_TOKENS]
    model(snippet[None], mask=mask, probe=pattern_probe)  # on its own, so even unmasked rows weigh only the keys shown
    model.train(was_training)

    labels = token_labels(tokenizer, snippet.tolist())
    hidden, shown = mask.hidden_keys(windows.size(1), windows.device), mask.hidden_keys(len(labels))
    for layer, (attn, result, pattern) in enumerate(zip(layers, probe.results, pattern_probe.results)):
        stats = attention_stats(result, hidden, attn.causal)
        write_scalars(writer, {layer_tag(f"attn/{name}", layer): value for name, value in stats.items()}, step)
        fed = fed_scores(result.scores, hidden if attn.causal else None)
        writer.add_histogram(layer_tag("attn/logits", layer), fed.float().cpu(), step)
        weights = pattern.weights[0].detach().float().cpu()
        itself = f"mean a_ii {self_weight(weights).item():.2f}"  # the diagonal's weight, a query on itself
        title = f"layer {layer}, step {step}, {itself}" + (f": {label}" if label else "")
        picture = partial(pattern_picture, weights, labels, title, hatch, shown)
        draw(partial(add_picture, writer, layer_tag("attn/pattern", layer), picture, step))


def add_picture(writer: "SummaryWriter", tag: str, picture: Callable[[], np.ndarray], step: int) -> None:
    writer.add_image(tag, picture(), step, dataformats="HWC")


def log_mask(
    writer: "SummaryWriter",
    model: TinyLM,
    mask: Mask,
    name: str,
    draw: Callable[[Callable[[], None]], object] = lambda job: job(),
) -> None:
    """attn/mask, once at step 0: the mask the run trains with, as the model applies it to a whole window (the task's,
    or none where model.causal is false), queries down and keys across, hidden keys dark; `name` says whose it is."""
    if not model.attention_layers():
        return  # a recurrent model: no mask
    config = model.config
    picture = partial(mask_picture, mask, config.causal, config.block_size, name)
    draw(partial(add_picture, writer, "attn/mask", picture, 0))


@cache
def mask_picture(mask: Mask, causal: bool, size: int, name: str) -> np.ndarray:
    """attn/mask's picture (height, width, RGB) of `mask` over a window of `size` as the model applies it (none where
    `causal` is false), `name` saying whose it is. Drawn once per process for each: the jobs of a sweep, and the
    runs of a notebook or of the summary's figures, ask for the same few pictures again and again."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    hidden = mask.hidden_keys(size) if causal else torch.zeros(size, size, dtype=torch.bool)
    canvas = FigureCanvasAgg(mask_figure(hidden, f"{name}, model.causal={causal}: dark keys are hidden"))
    canvas.draw()
    picture = rgb(canvas)
    picture.flags.writeable = False  # shared by every caller
    return picture


def mask_figure(hidden: Tensor, title: str) -> "Figure":
    """The (T, T) hidden keys of a mask as a picture: visible white, hidden dark, the diagonal dashed."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    size = hidden.size(0)
    figure = Figure(figsize=(4, 4.4))
    axes = figure.add_axes((0.15, 0.08, 0.8, 0.72))
    axes.imshow(hidden.float().numpy(), cmap="Greys", vmin=0, vmax=1.5, interpolation="nearest")
    axes.plot([-0.5, size - 0.5], [-0.5, size - 0.5], color="tab:red", linewidth=0.8, linestyle="--")
    axes.set(xlabel="key j", ylabel="query i")
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True))
    axes.xaxis.set_label_position("top")
    axes.xaxis.tick_top()
    figure.suptitle("\n".join(textwrap.wrap(f"the mask: {title}", 44)), fontsize=10, y=0.99)
    return figure


def log_grad_norms(writer: "SummaryWriter", model: TinyLM, step: int) -> None:
    """grad/wq_norm, grad/wk_norm, grad/wv_norm of each layer: call after backward, before clipping. Layers without
    projections have none."""
    norms = {}
    for layer, attn in enumerate(model.attention_layers()):
        for name, projection in (("wq", attn.W_Q), ("wk", attn.W_K), ("wv", attn.W_V)) if attn.projections else ():
            norms[layer_tag(f"grad/{name}_norm", layer)] = projection.weight.grad.norm()
    if norms:
        write_scalars(writer, norms, step)


def log_mask_readings(writer: "SummaryWriter", model: TinyLM, step: int) -> None:
    """What each masked layer's mask let through in the training forward pass of `step` (the reference path keeps
    it: attention.MaskReading): attn/train_future_mass, the mean weight on hidden keys (0 under minus infinity);
    attn/train_allowed_min, the smallest score the softmax was fed at an allowed key; and where the mask is finite,
    attn/train_mask_margin, how far that score sits above the mask value (below 0, a future key outscores it)."""
    values = {}
    for layer, attn in enumerate(model.attention_layers()):
        if attn.reading is None:
            continue  # the fused kernel trained, or the layer is unmasked
        values[layer_tag("attn/train_future_mass", layer)] = attn.reading.hidden_mass
        values[layer_tag("attn/train_allowed_min", layer)] = attn.reading.allowed_min
        if attn.mask_value > -math.inf:
            values[layer_tag("attn/train_mask_margin", layer)] = attn.reading.allowed_min - attn.mask_value
    if values:
        write_scalars(writer, values, step)


def token_labels(tokenizer: Tokenizer, ids: list[int]) -> list[str]:
    """Each token's text with its whitespace drawn (␣ ↵ ⇥); special tokens, which decode drops, by name, the blank
    as a box."""
    named = [tokenizer.id_to_token(i) for i in ids]
    return [tokenizer.decode([i]).translate(VISIBLE_WHITESPACE) or DRAWN.get(name, name) for i, name in zip(ids, named)]


@dataclass(frozen=True)
class PatternLayout:
    """The pattern figure's sizes in inches, each from what it holds: the labels' length in a monospace font (so that
    no tick or layout engine has to measure each label, most of a figure's time)."""

    points: float  # the labels' font size
    upright: bool  # characters read best upright; longer tokens are turned to fit
    left: float  # from the figure's left edge to the heat map: the query axis's name, then its labels
    names: float  # above the heat map: the key labels, then the key axis's name
    title_lines: list[str]
    width: float
    height: float

    @classmethod
    def of(cls, labels: list[str], title: str) -> "PatternLayout":
        points = LABEL_POINTS * min(1.0, PATTERN_TOKENS / len(labels))
        longest = max(map(len, labels)) * points * MONOSPACE_WIDTH / 72
        upright = longest <= points / 72
        title_lines = textwrap.wrap(f"attention weight a_ij, {title}", 60)
        left = GAP + LINE + GAP + longest + GAP
        names = GAP + (points * 1.3 / 72 if upright else longest) + GAP
        top = names + LINE + GAP + len(title_lines) * LINE + GAP
        return cls(points, upright, left, names, title_lines, left + HEAT_MAP + COLOUR_BAR, top + HEAT_MAP + GAP)


def pattern_figure(
    weights: Tensor, labels: list[str], title: str, hatch: bool = True, hidden: Tensor | None = None
) -> "Figure":
    """The (T, T) weights as a heat map, queries down and keys across, each labelled with its token. The diagonal
    (a token reading itself) is drawn and, where `hatch` says (the targets lie ahead: next-token prediction), the
    keys the task's mask hides, `hidden` (T, T) (by default the future, j > i), hatched, so weight on them stands
    out: a leaky model's sharp line just right of the diagonal sits on the hatching. Laid out for PATTERN_TOKENS
    labels a side: a longer text gets labels as much smaller (save it at as much higher a dpi)."""
    from matplotlib.figure import Figure  # imported on first use: a run's start need not wait for it
    from matplotlib.patches import PathPatch

    layout, size = PatternLayout.of(labels, title), len(labels)
    width, height = layout.width, layout.height
    figure = Figure(figsize=(width, height))  # no pyplot: no global figure to close
    axes = figure.add_axes((layout.left / width, GAP / height, HEAT_MAP / width, HEAT_MAP / height))
    image = axes.imshow(weights.detach().float().cpu().numpy(), cmap="Blues", vmin=0, vmax=1)
    if hatch:
        hatched = hidden_outline(future_keys(size) if hidden is None else hidden)
        axes.add_patch(PathPatch(hatched, fill=False, hatch="//", edgecolor="tab:orange", linewidth=0, alpha=0.6))
    axes.plot([-0.5, size - 0.5], [-0.5, size - 0.5], color="tab:red", linewidth=1, linestyle="--")
    axes.set_xticks([])
    axes.set_yticks([])
    label_pattern(figure, axes, labels, layout, hatch)
    colour_bar = figure.add_axes(
        ((layout.left + HEAT_MAP + 0.15) / width, GAP / height, 0.2 / width, HEAT_MAP / height)
    )
    figure.colorbar(image, cax=colour_bar)
    return figure


@dataclass
class DrawnPattern:
    """A pattern figure drawn once without what changes from one picture to the next (the heat map, the hatching, the
    diagonal and the frame drawn over it, and the title), on a canvas kept for the pictures after it: each is that
    background with those few drawn again over it. The tokens' labels, most of the drawing, are drawn once."""

    shows: tuple  # what the background shows: the labels, the hatching and the title's number of lines
    canvas: "FigureCanvasAgg"
    background: object  # the canvas's pixels without the changing artists
    changing: list  # in the order the figure's own drawing draws them

    @classmethod
    def of(cls, shows: tuple, weights: Tensor, labels: list[str], title: str, hatch: bool, hidden: Tensor | None):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        figure = pattern_figure(weights, labels, title, hatch, hidden)
        heat_map = figure.axes[0]
        drawn_over = [*heat_map.images, *heat_map.patches, *heat_map.lines, *heat_map.spines.values()]
        changing = sorted([*drawn_over, heat_map.texts[-1]], key=lambda artist: artist.get_zorder())  # the title last
        for artist in changing:
            artist.set_animated(True)  # left out of the canvas's drawing
        canvas = FigureCanvasAgg(figure)
        canvas.draw()
        return cls(shows, canvas, canvas.copy_from_bbox(figure.bbox), changing)

    def picture(self, weights: Tensor, title_lines: list[str]) -> np.ndarray:
        heat_map = self.canvas.figure.axes[0]
        heat_map.images[0].set_data(weights.detach().float().cpu().numpy())
        heat_map.texts[-1].set_text("\n".join(title_lines))  # the title: label_pattern's last text
        self.canvas.restore_region(self.background)
        for artist in self.changing:
            heat_map.draw_artist(artist)
        return rgb(self.canvas)


def rgb(canvas: "FigureCanvasAgg") -> np.ndarray:
    """The canvas's pixels as drawn (height, width, RGB), a copy of their own."""
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


PATTERN_LOCK = threading.Lock()  # one thread at a time draws on the last pattern figure
last_pattern: DrawnPattern | None = None  # the last drawn in this process: the runs of a process show the same tokens


def pattern_picture(
    weights: Tensor, labels: list[str], title: str, hatch: bool = True, hidden: Tensor | None = None
) -> np.ndarray:
    """pattern_figure's picture (height, width, RGB), the pixels TensorBoard's add_figure draws of it. A run shows the
    same tokens at every evaluation: where only the weights and the title's words differ from the last picture, it is
    drawn over that one's background (DrawnPattern) instead of a figure built and drawn whole."""
    global last_pattern
    title_lines = PatternLayout.of(labels, title).title_lines
    shows = (labels, hatch, None if hidden is None else hidden.tolist(), len(title_lines))
    with PATTERN_LOCK:
        if last_pattern is None or last_pattern.shows != shows:
            last_pattern = DrawnPattern.of(shows, weights, labels, title, hatch, hidden)
        return last_pattern.picture(weights, title_lines)


def hidden_outline(hidden: Tensor):
    """A matplotlib Path around the hidden cells of `hidden` (T, T), one rectangle per run of them in a row (one a
    row for a causal or prefix mask), in the heat map's coordinates (cell (i, j) centred on x = j, y = i)."""
    from matplotlib.path import Path

    vertices, codes = [], []
    for i, row in enumerate(hidden.tolist()):
        j = 0
        while j < len(row):
            if not row[j]:
                j += 1
                continue
            start = j
            while j < len(row) and row[j]:
                j += 1
            left, right, top, bottom = start - 0.5, j - 0.5, i - 0.5, i + 0.5
            vertices += [(left, top), (right, top), (right, bottom), (left, bottom), (left, top)]
            codes += [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY]
    return Path(vertices or [(0, 0)], codes or [Path.MOVETO])


def label_pattern(figure: "Figure", axes, labels: list[str], layout: PatternLayout, hatch: bool) -> None:
    """Each key's and query's token beside the heat map, the axes' names and the title, placed in inches."""
    from matplotlib.transforms import offset_copy

    def shifted(transform, x: float = 0, y: float = 0):  # moved so many inches; it moves with the heat map
        return offset_copy(transform, figure, x=x, y=y, units="inches")

    keys, queries = shifted(axes.get_xaxis_transform(), y=GAP), shifted(axes.get_yaxis_transform(), x=-GAP)
    font = {"fontsize": layout.points, "family": "monospace"}
    for i, label in enumerate(labels):
        axes.text(i, 1, label, transform=keys, ha="center", va="bottom", rotation=0 if layout.upright else 90, **font)
        axes.text(0, i, label, transform=queries, ha="right", va="center", **font)
    key_name = "key j (the token read)" + ("; hatched: what the task's mask hides" if hatch else "")
    axes.text(0.5, 1, key_name, transform=shifted(axes.transAxes, y=layout.names), ha="center", va="bottom")
    query_name, at = "query i (the token reading); dashed: j = i", shifted(axes.transAxes, x=GAP - layout.left)
    axes.text(0, 0.5, query_name, transform=at, ha="left", va="center", rotation=90)
    title_at = shifted(axes.transAxes, y=layout.names + LINE + GAP)
    axes.text(0, 1, "\n".join(layout.title_lines), transform=title_at, ha="left", va="bottom", fontsize=11)
