"""The lesson's numeric trace of one attention step, for any query of any text, from trained checkpoints.

python attend.py ckpt=multirun/leak/DATE text="To be, or not to be, that is the question:"   # every run of a sweep
python attend.py ckpt=outputs/DATE/TIME text="ROMEO:" query=2 layer=0 out=romeo.png

For each run it prints steps 1-4 for query i (the last token by default) and writes the heat map of the weights,
as the Images tab draws it, beside the run (attention.png) or at `out=`. TensorBoard's Attention tab shows the same.
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from summary.checkpoints import RunEntry, Trained, list_runs, load
from summary.readings import VALIDATION_LINE, Reading, cut_note, read, row_statistics, verdict
from trainer.checkpoint import CheckpointError, checkpoint_path
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.config import ConfigError, to_typed
from trainer.diagnostics import PATTERN_TOKENS, pattern_figure

FULL_VECTOR = 8  # y_i is printed whole up to this d_v, else by its size
DOMINANT = 3  # the values step 4 names at most
NOTABLE = 0.05  # and only those that make this much of sum_j a_ij |v_j|


@dataclass
class AttendConfig:
    ckpt: Optional[str] = None  # a checkpoint file, a run directory, or a directory of runs (a sweep): each is read
    text: str = VALIDATION_LINE  # the text whose attention to trace; the model reads its first block_size tokens
    query: Optional[int] = None  # the query token i, counted from 0 (negative: from the end); default the last
    layer: int = 0
    out: Optional[str] = None  # the PNG's path (for several runs, a directory: one PNG per run)


ConfigStore.instance().store(name="attend_schema", node=AttendConfig)  # the first entry of configs/attend.yaml


def runs_of(ckpt: str) -> list[RunEntry]:
    """The runs `ckpt` names: every run at or below a directory, or the run of a checkpoint file."""
    path = Path(ckpt).expanduser()
    if path.is_dir():
        runs = list_runs(path)
        if not any(run.checkpoint for run in runs):
            raise CheckpointError(f"ckpt={ckpt}: no checkpoint (best.pt or last.pt) in it or below it")
        for run in runs:
            run.name = path.resolve().name if run.name == "." else run.name
        return runs
    path = checkpoint_path(ckpt, "ckpt")
    return [RunEntry(path.parent.name, path.parent, path, step=load(path).step)]


def query_index(query: Optional[int], tokens: int) -> int:
    i = tokens - 1 if query is None else query
    if not -tokens <= i < tokens:
        raise ConfigError(
            f"query={query}: the model reads {tokens} tokens of this text (query=0 to {tokens - 1}, or negative)"
        )
    return i % tokens


def check_layer(layer: int, trained: Trained) -> None:
    n_layer = trained.model.config.n_layer
    if not 0 <= layer < n_layer:
        raise ConfigError(
            f"layer={layer}: this model has {n_layer} layer{'s' * (n_layer > 1)} (layer=0 to {n_layer - 1})"
        )


def trace_text(reading: Reading, layer: int, i: int) -> str:
    """Steps 1-4 of the lesson for query i of one layer, as lines of text."""
    trace = reading.layers[layer]
    labels = reading.labels
    keys = range(i + 1) if trace.causal else range(len(labels))
    lines = [f"query i={i} {labels[i]!r}, " + ("keys j <= i (the causal mask hides the rest)" if trace.causal
             else "every key j: this run does not mask the future")]  # fmt: skip
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
        future = "  future" if j > i else ""
        lines.append(f"  {j:>4}  {labels[j]!r:<8} {trace.raw[i, j]:>10.3f} {trace.fed[i, j]:>10.3f} "
                     f"{trace.weights[i, j]:>8.3f}{future}")  # fmt: skip
    output = trace.output[i]
    shown = ("(" + ", ".join(f"{x:.3f}" for x in output.tolist()) + ")") if output.numel() <= FULL_VECTOR else (
        f"a vector of d_v={output.numel()} numbers, length {output.norm():.3f}")  # fmt: skip
    lines.append(f"step 4, weighted sum: y_i = sum_j a_ij v_j = {shown}")
    top = int(trace.weights[i].argmax())
    parts = trace.weights[i] * trace.values.norm(dim=-1)  # the size of each value's part in y_i
    shares = parts / parts.sum()
    dominant = [j for j in shares.argsort(descending=True)[:DOMINANT].tolist() if shares[j] >= NOTABLE] or [top]
    lines.append("  dominated by " + ", ".join(f"v_{j} {labels[j]!r} (a_ij {trace.weights[i, j]:.3f}, "
                                                f"{shares[j]:.0%} of sum_j a_ij |v_j|)" for j in dominant))  # fmt: skip
    stats = {name: values[i] for name, values in row_statistics(trace.weights).items()}
    lines.append(f"row i: entropy {stats['entropy']:.3f} nats, largest weight {stats['max_weight']:.3f} "
                 f"(j={top} {labels[top]!r}), future mass {stats['future_mass']:.3f}")  # fmt: skip
    if words := verdict(trace, i):
        lines.append(words)
    return "\n".join(lines)


def save_pattern(weights, labels: list[str], title: str, path: Path) -> None:
    """The Images tab's pattern figure of the weights. It is laid out for PATTERN_TOKENS labels a side; a longer
    text gets labels as much smaller and pixels as much denser, so that each label stays as many pixels tall."""
    figure = pattern_figure(weights, labels, title)
    shrink = max(1.0, len(labels) / PATTERN_TOKENS)
    heat_map = figure.axes[0]  # the colour bar comes second
    for label in heat_map.get_xticklabels() + heat_map.get_yticklabels():
        label.set_fontsize(label.get_fontsize() / shrink)
    figure.savefig(path, dpi=100 * shrink)


def png_path(out: Optional[str], run: RunEntry, layer: int, several: bool) -> Path:
    name = "attention.png" if layer == 0 else f"attention_{layer}.png"
    if out is None:
        return run.run_dir / name
    return Path(out) / f"{run.name.replace('/', '_')}_{name}" if several else Path(out)


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="attend")
def main(cfg: DictConfig) -> None:
    with one_line_errors():
        config = to_typed(AttendConfig, OmegaConf.to_container(cfg))
        if not config.ckpt:
            raise ConfigError("ckpt: give a checkpoint file, a run directory or a sweep, e.g. ckpt=outputs/DATE/TIME")
        runs = runs_of(config.ckpt)
        readable = [run for run in runs if run.checkpoint and not run.problem]
        for run in runs:
            header = f"== {run.name}" + (f"  ({run.label})" if run.label else "")
            if run not in readable:
                print(f"{header}\n{run.problem or 'no checkpoint (best.pt or last.pt) yet'}\n")
                continue
            trained = load(run.checkpoint)
            check_layer(config.layer, trained)
            reading = read(trained, config.text)
            i = query_index(config.query, len(reading.ids))
            print(f"{header}\n{run.checkpoint.name}, step {trained.step}, layer {config.layer}; "
                  f"{len(reading.ids)} tokens" + (f" ({cut_note(reading)})" if cut_note(reading) else ""))  # fmt: skip
            print(trace_text(reading, config.layer, i))
            path = png_path(config.out, run, config.layer, len(readable) > 1)
            path.parent.mkdir(parents=True, exist_ok=True)
            title = f"layer {config.layer}, step {trained.step}: {run.label or run.name}"
            save_pattern(reading.layers[config.layer].weights, reading.labels, title, path)
            print(f"wrote {path}\n")


if __name__ == "__main__":
    run_with_one_line_errors(main)
