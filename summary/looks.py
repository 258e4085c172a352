"""How a figure tells runs apart: one colour per value of the compared setting, one line style per switch value.

Among the keys the runs sweep, a boolean one (a switch: model.scale) gives the line style, true solid and false
dashed; the others give the colour. Where every key is a switch, the first gives the colour and the second the style,
unless a figure prefers a switch for the style (model.causal, whose unmasked runs get a third, dotted line). A lone
switch gives both. Runs the keys cannot tell apart (no overrides, or the same ones twice) get a colour each instead.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import colormaps

from summary.runs import Run, as_word, is_number

LINESTYLES = {True: "-", False: "--"}
NEUTRAL = "0.35"  # the colour of the line-style entries in a legend: a style, not a run


@dataclass(frozen=True)
class Look:
    color: Any
    linestyle: str = "-"
    marker: str | None = None  # None: the plot's own


LegendEntries = list[tuple[str, Look | None]]  # (label, look); no look: a heading such as "model.d_k"


@dataclass
class Encoding:
    looks: list[Look]  # one per run, in the runs' order
    legend: LegendEntries


def encode(runs: list[Run], keys: list[str], style_first: str | None = None) -> Encoding:
    """The look of each run, and the legend that decodes them, from the swept `keys` (see the module's doc)."""
    if not keys or len({repr([run.settings.get(key) for key in keys]) for run in runs}) < len(runs):
        colours = palette(len(runs))
        return Encoding([Look(colour) for colour in colours], [(run.name, Look(c)) for run, c in zip(runs, colours)])

    switches = [key for key in keys if all(isinstance(run.settings.get(key), bool) for run in runs)]
    style_key = style_key_of(keys, switches, style_first) or (keys[0] if keys == switches else None)  # a lone switch
    colour_keys = [key for key in keys if key != style_key] or keys
    colour_values = [tuple(run.settings.get(key) for key in colour_keys) for run in runs]
    distinct = list({repr(values): values for values in colour_values}.values())  # in order of appearance
    numbers = len(colour_keys) == 1 and all(is_number(values[0]) for values in distinct)
    if numbers:
        distinct.sort()
    colour_of = {repr(values): colour for values, colour in zip(distinct, palette(len(distinct), numbers))}
    looks = [
        Look(colour_of[repr(values)], LINESTYLES[run.settings[style_key]] if style_key else "-")
        for run, values in zip(runs, colour_values)
    ]
    legend: LegendEntries = [(", ".join(colour_keys), None)]
    for values in distinct:
        label = ", ".join("not set" if value is None else as_word(value) for value in values)
        legend.append(
            (label, Look(colour_of[repr(values)], LINESTYLES[values[0]] if colour_keys == [style_key] else "-"))
        )
    if style_key not in colour_keys:
        legend += [(style_key, None)] + [(as_word(value), Look(NEUTRAL, LINESTYLES[value])) for value in (True, False)]
    return Encoding(looks, legend)


def style_key_of(keys: list[str], switches: list[str], preferred: str | None) -> str | None:
    """The switch that gives the line style while another key gives the colour; None where there is none."""
    if len(keys) < 2 or not switches:
        return None
    if preferred in switches:
        return preferred
    return keys[1] if switches == keys else switches[0]


def palette(count: int, ordered: bool = False) -> list:
    """`count` colours that differ. Ordered (a number's values): dark to light along viridis, its yellow end left
    out, which is hard to see on white. Otherwise tab10's while they last, then a sequence along turbo."""
    if ordered:
        return list(colormaps["viridis"](np.linspace(0, 0.85, count)))
    if count <= 10:
        return [f"C{index}" for index in range(count)]
    return list(colormaps["turbo"](np.linspace(0.05, 0.95, count)))
