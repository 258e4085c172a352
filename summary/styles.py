"""How a figure tells runs apart: one colour per value of the compared setting, one line style per switch value.

Among the keys the runs sweep, a boolean one (a switch: model.scale) gives the line style, true solid and false
dashed; the others give the colour. Where no key is a switch, a key of two values that are not numbers
(model.mixer=attention,gru) gives the style instead, its first value solid. Where every key could, the first gives the
colour and the second the style, unless a figure prefers a switch for the style (model.causal, whose unmasked runs
get a third, dotted line). A lone such key gives both. A sweep with no such key has one line style, and its legend
names none. Runs the keys cannot tell apart (no overrides, or the same ones twice) get a colour each instead.

The colours are the ones TensorBoard's Custom Scalars gives runs, in the order they come: a leak sweep's masked run
is orange in summary.png as it is in TensorBoard, its unmasked run blue.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import colormaps

from summary.runs import RunCurves, as_word, is_number

LINESTYLES = {True: "-", False: "--"}
# TensorBoard's run colours (tensorboard 2.21, tf_color_scale's default palette, Paul Tol's colour-blind-safe one),
# which its Custom Scalars and other Polymer dashboards give the runs in the order they started, the 8th again orange.
TENSORBOARD_COLOURS = ["#ff7043", "#0077bb", "#cc3311", "#33bbee", "#ee3377", "#009988", "#bbbbbb"]
NEUTRAL = "0.35"  # the colour of the line-style entries in a legend: a style, not a run


@dataclass(frozen=True)
class Style:
    color: Any
    linestyle: str = "-"
    marker: str | None = None  # None: the plot's own


LegendEntries = list[tuple[str, Style | None]]  # (label, style); no style: a heading such as "model.d_k"


@dataclass
class Encoding:
    styles: list[Style]  # one per run, in the runs' order
    legend: LegendEntries


def encode(runs: list[RunCurves], keys: list[str], style_first: str | None = None) -> Encoding:
    """The style of each run, and the legend that decodes them, from the swept `keys` (see the module's doc)."""
    if not keys or len({repr([run.settings.get(key) for key in keys]) for run in runs}) < len(runs):
        colours = palette(len(runs))
        legend = [(wrapped(run.name), Style(colour)) for run, colour in zip(runs, colours)]
        return Encoding([Style(colour) for colour in colours], legend)

    style_key = style_key_of(runs, keys, style_first)
    styles = line_styles(runs, style_key)
    colour_keys = [key for key in keys if key != style_key] or keys
    colour_values = [tuple(run.settings.get(key) for key in colour_keys) for run in runs]
    distinct = list({repr(values): values for values in colour_values}.values())  # in the runs' order
    colour_of = {repr(values): colour for values, colour in zip(distinct, palette(len(distinct)))}
    if len(colour_keys) == 1 and all(is_number(values[0]) for values in distinct):
        distinct.sort()  # the legend reads from the smallest value up
    chosen = [
        Style(colour_of[repr(values)], styles.get(repr(run.settings.get(style_key)), "-"))
        for run, values in zip(runs, colour_values)
    ]
    legend: LegendEntries = [(", ".join(colour_keys), None)]
    for values in distinct:
        label = ", ".join(word(value) for value in values)
        style = styles[repr(values[0])] if colour_keys == [style_key] else "-"
        legend.append((label, Style(colour_of[repr(values)], style)))
    if style_key is not None and style_key not in colour_keys:
        values = {repr(run.settings.get(style_key)): run.settings.get(style_key) for run in runs}
        legend += [(style_key, None)] + [(word(values[key]), Style(NEUTRAL, style)) for key, style in styles.items()]
    return Encoding(chosen, legend)


def wrapped(name: str, width: int = 40) -> str:
    """A run's name on lines of about `width` characters, broken after its commas (a Hydra job's directory is named
    after all its overrides): whole, and narrow enough to leave the figure its panels."""
    lines = [""]
    for part in name.split(","):
        if lines[-1] and len(lines[-1]) + len(part) >= width:
            lines.append("")
        lines[-1] += part + ","
    return "\n".join(lines)[:-1]


def word(value: Any) -> str:
    return "not set" if value is None else as_word(value)


def style_key_of(runs: list[RunCurves], keys: list[str], preferred: str | None) -> str | None:
    """The key that gives the line style (see the module's doc); None where no key can."""
    switches = [key for key in keys if all(isinstance(run.settings.get(key), bool) for run in runs)]
    pairs = [key for key in keys if is_pair(runs, key)]
    candidates = switches or pairs  # a switch first: true solid and false dashed reads without a legend
    if not candidates:
        return None
    if len(keys) == 1:
        return keys[0]  # a lone one gives both colour and style
    if preferred in switches:
        return preferred
    return keys[1] if candidates == keys else candidates[0]


def is_pair(runs: list[RunCurves], key: str) -> bool:
    """Whether the runs give `key` two values, neither a number (attention, gru): two line styles tell them apart."""
    values = {repr(run.settings.get(key)): run.settings.get(key) for run in runs}
    return len(values) == 2 and not any(is_number(value) for value in values.values())


def line_styles(runs: list[RunCurves], key: str | None) -> dict[str, str]:
    """repr(value) -> its line style: a switch's true solid and false dashed, else the first value seen solid."""
    if key is None:
        return {}
    values = list({repr(run.settings.get(key)): run.settings.get(key) for run in runs}.values())
    if all(isinstance(value, bool) for value in values):
        return {repr(value): LINESTYLES[value] for value in (True, False)}
    return {repr(value): style for value, style in zip(values, LINESTYLES.values())}


def palette(count: int) -> list:
    """`count` colours that differ: TensorBoard's, in its order, while they last (it would repeat them, which a
    figure's legend cannot); then a sequence along turbo."""
    if count <= len(TENSORBOARD_COLOURS):
        return TENSORBOARD_COLOURS[:count]
    return list(colormaps["turbo"](np.linspace(0.05, 0.95, count)))
