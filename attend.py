"""The lesson's numeric trace of one attention step, and what it buys the prediction, for any query of any text,
from trained checkpoints.

python attend.py ckpt=multirun/leak/DATE text="To be, or not to be, that is the question:"   # every run of a sweep
python attend.py ckpt=outputs/DATE/TIME text="ROMEO:" query=2 layer=0 step=500 temperature=0.8 out=romeo.png

For each run it prints steps 1-4 for query i (by default the last token whose next token the text holds), the loss of
every token of the text (as trained and, for a run trained without the mask, with the mask put back: the terms of
val/loss and val/loss_causal), the query's five likeliest next tokens and what its look contributes (the next
token's probability with the query's weights as trained, future masked, uniform, or none), and writes the heat map
of the weights with the loss strips beside the run (attention.png) or at `out=`. TensorBoard's Attention tab shows
the same numbers, from the same code (viewer/).
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)
import trainer.startup  # noqa: F401 (first of all: a Ctrl-C while torch loads ends in one line, trainer/startup.py)

# isort: split
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from data import DataError
from model.config import Mixer
from trainer.checkpoint import CheckpointError
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.config import ConfigError, to_typed
from trainer.diagnostics import PATTERN_TOKENS, pattern_figure
from viewer.checkpoints import Checkpoint, load, named_checkpoint
from viewer.generation import temperature_problem
from viewer.predictions import COUNTERFACTUALS, Predictions, Strip, predict, probability
from viewer.readings import VALIDATION_LINE, Reading, cut_note, layer_problem, read, row_statistics, verdict
from viewer.runs import RunCheckpoints, list_runs, load_at, steps_of
from viewer.words import words_of

FULL_VECTOR = 8  # y_i is printed whole up to this d_v, else by its size
DOMINANT = 3  # the values step 4 names at most
NOTABLE = 0.05  # and only those that make this much of sum_j a_ij |v_j|
STRIP_INCHES = 0.6  # the PNG's height per loss strip (its row of tokens and its title)
KEY_INCHES = 0.8  # and for the strips' colour key below them
LOSS_COLOURS = "YlOrRd"  # low loss pale, high loss dark red
LOOKS = {"uniform": "uniform", "no_look": "no look"}  # (c), (d) as the line names them; (b) is the task's words.masked


@dataclass
class AttendConfig:
    ckpt: Optional[str] = None  # a checkpoint file, a run directory, or a directory of runs (a sweep): each is read
    text: str = VALIDATION_LINE  # the text whose attention to trace; the model reads its first block_size tokens
    query: Optional[int] = None  # the query token i, counted from 0 (negative: from the end); default the last scored
    layer: int = 0
    step: Optional[int] = None  # a step the runs kept (RUN/steps/step-N.pt, best.pt, last.pt); default best.pt
    temperature: float = 1.0  # the top five's: the softmax of logits / temperature, as sampling draws
    out: Optional[str] = None  # the PNG's path (for several runs, a directory: one PNG per run)


ConfigStore.instance().store(name="attend_schema", node=AttendConfig)  # the first entry of configs/attend.yaml


@dataclass
class Report:
    """One run read for the query: what is printed and drawn of it."""

    run: RunCheckpoints
    path: Path
    checkpoint: Checkpoint
    reading: Reading
    predictions: Predictions
    query: int


def runs_of(ckpt: str) -> list[RunCheckpoints]:
    """The runs `ckpt` names: every run at or below a directory, or the run of a checkpoint file."""
    path = Path(ckpt).expanduser()
    if path.is_dir():
        runs = list_runs(path)
        if not any(run.checkpoint or run.problem for run in runs):
            raise CheckpointError(f"ckpt={ckpt}: no checkpoint (best.pt or last.pt) in it or below it")
        for run in runs:
            run.name = path.resolve().name if run.name == "." else run.name
        return runs
    path = named_checkpoint(ckpt, "ckpt").path
    return [RunCheckpoints(path.parent.name, path.parent, path, steps=steps_of(path.parent, path))]


def query_index(query: Optional[int], reading: Reading, predictions: Predictions) -> int:
    """The query the settings name; by default the last the task asks about (for next-token prediction, the last
    token whose next token the text holds; for filling blanks, the last blank)."""
    tokens = len(reading.ids)
    if query is None:
        return max((i for i, found in enumerate(predictions.counterfactuals) if found is not None), default=0)
    if not -tokens <= query < tokens:
        raise ConfigError(
            f"query={query}: the model reads {tokens} tokens of this text (query=0 to {tokens - 1}, or negative)"
        )
    return query % tokens


def recurrent(run: RunCheckpoints) -> str:
    """'' for a run whose attention can be traced; for a recurrent one (model.mixer=gru, lstm), which a sweep may hold
    beside attention runs, why it is skipped."""
    mixer = load(run.checkpoint).model.config.mixer
    if mixer is Mixer.attention:
        return ""
    return f"{run.name}: a recurrent run (model.mixer={mixer.value}) has no attention weights to trace"


def read_run(run: RunCheckpoints, config: AttendConfig) -> Report:
    """The run at the chosen step, read for the query; a setting it cannot take is a one-line error."""
    path, checkpoint = load_at(run, config.step)
    if problem := layer_problem(config.layer, checkpoint.model.config.n_layer):
        raise ConfigError(problem)
    reading = read(checkpoint, config.text)
    predictions = predict(checkpoint, reading, config.layer, config.temperature)
    if predictions.problem:
        raise ConfigError(f"text={config.text!r}: {words_of(checkpoint.task).too_short}")
    i = query_index(config.query, reading, predictions)
    return Report(run, path, checkpoint, reading, predictions, i)


def read_runs(runs: list[RunCheckpoints], config: AttendConfig) -> tuple[dict[str, Report], dict[str, str]]:
    """Every run read before anything is printed, by name, and those left out with why: a recurrent run, and a run
    that cannot read the text (a blank, to a next-token run) where another can. A setting one of them cannot take
    stops all, in one line; so does a text none of them reads, with the first one's reason."""
    skipped = {run.name: reason for run in runs if run.checkpoint and (reason := recurrent(run))}
    readings, refused = {}, {}
    for run in runs:
        if run.checkpoint and run.name not in skipped:
            try:
                readings[run.name] = read_run(run, config)
            except DataError as error:
                refused[run.name] = error
    if refused and not readings:
        raise next(iter(refused.values()))
    skipped |= {name: f"{name}: cannot read this text ({error})" for name, error in refused.items()}
    if skipped and not readings:
        raise ConfigError(f"ckpt={config.ckpt}: no run to trace; {'; '.join(skipped.values())}")
    return readings, skipped


def trace_text(reading: Reading, layer: int, i: int) -> str:
    """Steps 1-4 of the lesson for query i of one layer, as lines of text."""
    trace = reading.layers[layer]
    labels = reading.labels
    keys = [j for j in range(len(labels)) if not (trace.causal and reading.hidden[i, j])]
    lines = [f"query i={i} {labels[i]!r}, {keys_seen(reading, trace.causal, i, keys[-1])}"]
    lines.append("step 1, score: q_i . k_j")
    if trace.scale:
        lines.append(f"step 2, scale: divided by sqrt(d_k) = sqrt({trace.d_k}) = {math.sqrt(trace.d_k):.3f}")
    else:
        lines.append("step 2, scale: unscaled, this run feeds the raw scores to the softmax")
    if trace.softcap:
        lines.append(f"        then capped: {trace.softcap:g} tanh(s / {trace.softcap:g})")
    lines.append("step 3, softmax: the weights a_ij over the keys, summing to 1")
    fed = "scaled" if trace.scale else "fed"
    lines.append(f"  {'j':>4}  {'token':<8} {'q_i.k_j':>10} {fed:>10} {'a_ij':>8}")
    for j in keys:
        numbers = f"{trace.raw[i, j]:>10.3f} {trace.fed[i, j]:>10.3f} {trace.weights[i, j]:>8.3f}"
        lines.append(f"  {j:>4}  {labels[j]!r:<8} {numbers}" + ("  future" if j > i else ""))
    output = trace.output[i]
    if output.numel() <= FULL_VECTOR:
        shown = "(" + ", ".join(f"{x:.3f}" for x in output.tolist()) + ")"
    else:
        shown = f"a vector of d_v={output.numel()} numbers, length {output.norm():.3f}"
    lines.append(f"step 4, weighted sum: y_i = sum_j a_ij v_j = {shown}")
    top = int(trace.weights[i].argmax())
    parts = trace.weights[i] * trace.values.norm(dim=-1)  # the size of each value's part in y_i
    shares = parts / parts.sum()
    dominant = [j for j in shares.argsort(descending=True)[:DOMINANT].tolist() if shares[j] >= NOTABLE] or [top]
    named = [
        f"v_{j} {labels[j]!r} (a_ij {trace.weights[i, j]:.3f}, {shares[j]:.0%} of sum_j a_ij |v_j|)" for j in dominant
    ]
    lines.append("  dominated by " + ", ".join(named))
    stats = {name: values[i] for name, values in row_statistics(trace.weights).items()}
    row = f"entropy {stats['entropy']:.3f} nats, largest weight {stats['max_weight']:.3f} (j={top} {labels[top]!r})"
    lines.append(f"row i: {row}, future mass {stats['future_mass']:.3f}")
    if words := verdict(reading, layer, i):
        lines.append(words)
    return "\n".join(lines)


def keys_seen(reading: Reading, causal: bool, i: int, last: int) -> str:
    """Which keys query i reads, in words, from the mask the run trained with (its visible keys run 0 to `last`)."""
    if not causal:
        return "every key j: this run does not mask the future"
    mask = reading.task.mask
    if mask.triangle:
        return "keys j <= i (the causal mask hides the rest)"
    opened = f"the prefix, tokens 0 to {mask.prefix - 1}, is read both ways"
    return f"keys j <= {last} ({opened}; the mask hides the rest)"


def losses_text(reading: Reading, predictions: Predictions, i: int) -> str:
    """Every position's loss on its target, one strip a column, with the means the curves are named by."""
    strips, word = predictions.strips, words_of(reading.task).target
    width = max(14, *(len(strip.name) for strip in strips))
    header = f"  {'i':>4}  {'token':<8} {word.split()[0]:<8}" + "".join(f" {strip.name:>{width}}" for strip in strips)
    lines = [
        f"the loss of each position's prediction of its {word} (nats; the means are the terms of the curves named)"
    ]
    lines.append(header)
    for position, label in enumerate(reading.labels):
        upcoming = strips[0].predictions[position].next
        losses = "".join(f" {loss(strip.losses[position]):>{width}}" for strip in strips)
        here = "  <- query" if position == i else ""
        lines.append(f"  {position:>4}  {label!r:<8} {repr(upcoming) if upcoming else '':<8}{losses}{here}".rstrip())
    means = "".join(f" {loss(strip.mean):>{width}}" for strip in strips)
    lines.append(f"  {'mean':>4}  {'':<8} {'':<8}{means}  ({', '.join(strip.tag for strip in strips)})")
    return "\n".join(lines)


def loss(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def prediction_text(read_run: Report, temperature: float, layer: int) -> str:
    """The query's top five in each strip, its target's probability, and the counterfactual line."""
    i, predictions, words = read_run.query, read_run.predictions, words_of(read_run.checkpoint.task)
    upcoming = predictions.strips[0].predictions[i].next
    target = f"the text's {words.target} is {upcoming!r}" if upcoming else words.missing
    lines = [
        f"query i={i} {read_run.reading.labels[i]!r}: its five likeliest {words.target}s at temperature "
        f"{temperature:g} ({target})"
    ]
    width = max(len(strip.name) for strip in predictions.strips) + 1
    for strip in predictions.strips:
        prediction = strip.predictions[i]
        top = "  ".join(f"{label!r} {probability(p)}" for label, p in prediction.top)
        scored = (
            f";  p({upcoming!r}) {probability(prediction.p_next)}, loss {prediction.loss:.3f} nats" if upcoming else ""
        )
        lines.append(f"  {strip.name + ':':<{width}} {top}{scored}")
    found = predictions.counterfactuals[i]
    if found is None:
        lines.append(words.no_counterfactual)
        return "\n".join(lines)
    named = LOOKS | {"masked": words.masked}
    looks = ", ".join(f"{named[kind]} {probability(getattr(found, kind))}" for kind in COUNTERFACTUALS)
    trained = probability(found.trained)
    lines.append(f"what the look contributes, p({found.target!r}) at layer {layer}: as trained {trained}, {looks}")
    lines.append(found.words)
    return "\n".join(lines)


def save_figure(read_run: Report, layer: int, title: str, path: Path, scale: float) -> None:
    """The Images tab's pattern figure of the weights, with the loss strips below it on one colour `scale` (nats).
    It is laid out for PATTERN_TOKENS labels a side; a longer text gets labels as much smaller and pixels as much
    denser, so that each label stays as many pixels tall."""
    labels = read_run.reading.labels
    reading = read_run.reading
    figure = pattern_figure(reading.layers[layer].weights, labels, title, reading.task.targets_ahead, reading.hidden)
    shrink = max(1.0, len(labels) / PATTERN_TOKENS)
    add_loss_strips(figure, read_run.predictions.strips, labels, scale, shrink, read_run.checkpoint)
    figure.savefig(path, dpi=100 * shrink)


def add_loss_strips(figure, strips: list[Strip], labels: list[str], scale: float, shrink: float, checkpoint) -> None:
    """The text as a row of tokens coloured by their loss, one row a strip, under the heat map and as wide as it (so
    token i sits under key column i), and a colour key marking ln(vocab_size), a uniform guess's loss."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    width, height = figure.get_size_inches()
    extra = KEY_INCHES + STRIP_INCHES * len(strips) + 0.2
    total = height + extra
    for axes in figure.axes:  # everything drawn so far moves up, keeping its size in inches
        x0, y0, w, h = axes.get_position().bounds
        axes.set_position([x0, (y0 * height + extra) / total, w, h * height / total])
    figure.set_size_inches(width, total)
    heat_map = figure.axes[0]
    heat_map.apply_aspect()  # its square box, where the columns are
    x0, _, columns_width, _ = heat_map.get_position().bounds
    colours = colormaps[LOSS_COLOURS].with_extremes(bad="lightgrey")
    norm = Normalize(0, scale)
    for row, strip in enumerate(reversed(strips)):  # the first strip on top
        bottom = (KEY_INCHES + STRIP_INCHES * row) / total
        axes = figure.add_axes([x0, bottom, columns_width, STRIP_INCHES * 0.5 / total])
        losses = np.array([[np.nan if x is None else x for x in strip.losses]], dtype=float)
        image = axes.imshow(np.ma.masked_invalid(losses), cmap=colours, norm=norm, aspect="auto")
        for column, label in enumerate(labels):
            value = losses[0, column]
            ink = "white" if np.isfinite(value) and norm(value) > 0.6 else "black"
            axes.text(column, 0, label, ha="center", va="center", fontsize=9 / shrink, family="monospace", color=ink)
        axes.set_xticks([])
        axes.set_yticks([])
        title = f"{strip.name}: loss of predicting the next token, mean {loss(strip.mean)} nats ({strip.tag})"
        axes.set_title(title, fontsize=8, loc="left")
    key = figure.add_axes([x0, KEY_INCHES * 0.55 / total, columns_width, KEY_INCHES * 0.15 / total])
    bar = figure.colorbar(image, cax=key, orientation="horizontal")
    uniform = math.log(checkpoint.model.config.vocab_size)
    bar.ax.axvline(uniform, color="black", linewidth=1.5)
    bar.ax.tick_params(labelsize=7)
    bar.set_label(
        f"loss in nats (grey: nothing scored there); the line: ln(vocab_size) = {uniform:.2f}, a uniform guess",
        fontsize=7,
    )


def loss_scale(readings: list[Report]) -> float:
    """One colour scale for every run's strips: up to the highest loss among them, and at least ln(vocab_size)."""
    highest = [x for read in readings for strip in read.predictions.strips for x in strip.losses if x is not None]
    uniform = [math.log(read.checkpoint.model.config.vocab_size) for read in readings]
    return max([1.0, *uniform, *highest])


def png_path(out: Optional[str], run: RunCheckpoints, layer: int, several: bool) -> Path:
    name = "attention.png" if layer == 0 else f"attention_{layer}.png"
    if out is None:
        return run.run_dir / name
    return Path(out) / f"{run.name.replace('/', '_')}_{name}" if several else Path(out)


def check_out(out: Optional[str], several: bool) -> None:
    """out= names a PNG for one run (a directory for several): checked before any run's lines are printed."""
    if out is not None and not several and Path(out).suffix.lower() != ".png":
        raise ConfigError(f"out={out}: the PNG to write, a name ending in .png, e.g. out=attention.png")


def check_settings(config: AttendConfig) -> None:
    if not config.ckpt:
        raise ConfigError("ckpt: give a checkpoint file, a run directory or a sweep, e.g. ckpt=outputs/DATE/TIME")
    if problem := temperature_problem(config.temperature):
        raise ConfigError(problem)


def report(found: Report, config: AttendConfig, scale: float, several: bool) -> None:
    """One run's lines, and its PNG (written whether or not stdout still reads: trainer/cli.py's Output)."""
    run, reading, checkpoint = found.run, found.reading, found.checkpoint
    header = f"== {run.name}" + (f"  ({run.label})" if run.label else "")
    print(f"{header}\n{run.note}" if run.note and found.path == run.checkpoint else header)
    cut = f" ({cut_note(reading)})" if cut_note(reading) else ""
    print(f"{found.path.name}, step {checkpoint.step}, layer {config.layer}; {len(reading.ids)} tokens{cut}")
    print(trace_text(reading, config.layer, found.query))
    print(losses_text(reading, found.predictions, found.query))
    print(prediction_text(found, config.temperature, config.layer))
    path = png_path(config.out, run, config.layer, several)
    path.parent.mkdir(parents=True, exist_ok=True)
    title = f"layer {config.layer}, step {checkpoint.step}: {run.label or run.name}"
    save_figure(found, config.layer, title, path, scale)
    print(f"wrote {path}\n")


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="attend")
def main(cfg: DictConfig) -> None:
    with one_line_errors():
        config = to_typed(AttendConfig, OmegaConf.to_container(cfg))
        check_settings(config)
        runs = runs_of(config.ckpt)
        readings, skipped = read_runs(runs, config)
        scale = loss_scale(list(readings.values()))
        several = len(readings) + len(skipped) > 1
        check_out(config.out, several)
        for run in runs:
            if run.name in readings:
                report(readings[run.name], config, scale, several)
            elif run.name in skipped:
                print(f"== skipped {skipped[run.name]}\n")
            else:
                header = f"== {run.name}" + (f"  ({run.label})" if run.label else "")
                print(f"{header}\n{run.problem or 'no checkpoint (best.pt or last.pt) yet'}\n")
        if unreadable := [run.problem for run in runs if run.problem and not run.checkpoint]:
            several = "s" * (len(unreadable) > 1)
            raise CheckpointError(f"{len(unreadable)} run{several} with no whole checkpoint: {'; '.join(unreadable)}")


if __name__ == "__main__":
    run_with_one_line_errors(main)
