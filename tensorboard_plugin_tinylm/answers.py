"""What the Attention tab's routes answer, as plain JSON values: the runs under the logdir, and one run's attention on
a text. Imported on the tab's first request, once sources.use_sources() has made tinylm's packages importable."""

import math
from pathlib import Path

from data.errors import DataError
from summary.checkpoints import checkpoint_in, list_runs, load
from summary.readings import MAX_CHARS, VALIDATION_LINE, cut_note, read, row_statistics, verdict
from trainer.checkpoint import CheckpointError
from trainer.diagnostics import SATURATED

DIGITS = 7  # decimals sent: far below what a person reads, and the numbers equal the reference path's to 1e-6


class BadRequest(Exception):
    """A request the tab cannot answer; the message is the one line the panel shows."""


def runs(logdir: Path | None) -> dict:
    """Every run under the logdir with the checkpoint read (best.pt, else last.pt) and its step, or why not."""
    logdir = required(logdir)
    listed = [
        {"name": run.name, "label": run.label, "checkpoint": run.checkpoint.name if run.checkpoint else None,
         "step": run.step, "problem": run.problem}
        for run in list_runs(logdir)
    ]  # fmt: skip
    return {"runs": listed, "text": VALIDATION_LINE, "max_chars": MAX_CHARS}


def attention(logdir: Path | None, request: object) -> dict:
    """The weights of one run's layer on a text, with the lesson's steps for every query row."""
    logdir = required(logdir)
    if not isinstance(request, dict):
        raise BadRequest("the request must be a JSON object with run, text and layer")
    run, text, layer = request.get("run"), request.get("text"), request.get("layer", 0)
    if not isinstance(text, str):
        raise BadRequest("text: must be a string")
    if not isinstance(layer, int) or isinstance(layer, bool):
        raise BadRequest(f"layer={layer!r}: must be a whole number")
    try:
        trained = load(checkpoint_of(logdir, run))
    except CheckpointError as error:  # damaged, or not tinylm's
        raise BadRequest(str(error)) from None
    n_layer = trained.model.config.n_layer
    if not 0 <= layer < n_layer:
        raise BadRequest(f"layer={layer}: this model has {n_layer} layer{'s' * (n_layer > 1)} (0 to {n_layer - 1})")
    try:
        reading = read(trained, text)
    except DataError as error:
        raise BadRequest(str(error)) from None
    trace = reading.layers[layer]
    return {
        "run": run, "step": trained.step, "layer": layer, "n_layer": n_layer, "d_k": trace.d_k,
        "scale": trace.scale, "causal": trace.causal, "softcap": trace.softcap, "block_size": reading.block_size,
        "tokens": reading.labels, "note": cut_note(reading),
        "raw": numbers(trace.raw), "fed": numbers(trace.fed), "weights": numbers(trace.weights),
        "stats": row_statistics(trace.weights), "saturated": SATURATED,
        "verdicts": [verdict(trace, i) for i in range(len(reading.ids))],
    }  # fmt: skip


def required(logdir: Path | None) -> Path:
    if logdir is None:
        raise BadRequest("TensorBoard was started without --logdir: the Attention tab reads the runs under it")
    return logdir


def checkpoint_of(logdir: Path, run: object) -> Path:
    """The checkpoint of the run that the listing names `run`: a directory at or below the logdir, nowhere else."""
    run_dir = (logdir / run).resolve() if isinstance(run, str) and run else None
    if run_dir is None or not run_dir.is_relative_to(logdir.resolve()) or not run_dir.is_dir():
        raise BadRequest(f"run {run!r}: no such run under the logdir {logdir}")
    checkpoint = checkpoint_in(run_dir)
    if checkpoint is None:
        raise BadRequest(f"run {run!r}: no checkpoint (best.pt or last.pt) yet")
    return checkpoint


def numbers(matrix) -> list[list[float | None]]:
    """A (T, T) tensor as rows of numbers; -inf (a masked score) as null, which JSON can carry."""
    return [[round(x, DIGITS) if math.isfinite(x) else None for x in row] for row in matrix.tolist()]
