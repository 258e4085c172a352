"""What the Attention tab's routes answer, as plain JSON values: the runs under the logdir with their steps, one run's
attention and predictions on a text at a step, and text it writes. Imported on the tab's first request; everything
it computes is viewer/'s, the code attend.py and sample.py print from; static/index.js reads these fields by name."""

import math
from dataclasses import asdict
from pathlib import Path

from data.errors import DataError
from model.statistics import SATURATED
from trainer.checkpoint import CheckpointError
from trainer.config import ConfigError
from trainer.diagnostics import token_labels
from viewer.checkpoints import Checkpoint
from viewer.generation import TEMPERATURES, blanks_problem, seed_problem, temperature_problem, write
from viewer.predictions import COUNTERFACTUALS, Counterfactual, Predictions, Strip, predict
from viewer.readings import (
    MAX_CHARS,
    VALIDATION_LINE,
    Reading,
    cut_note,
    layer_problem,
    read,
    row_statistics,
    verdict,
)
from viewer.runs import RunCheckpoints, list_runs, load_at, run_checkpoints
from viewer.words import words_of

DIGITS = 7  # decimals sent: far below what a person reads, and the numbers equal the reference path's to 1e-6
MAX_GENERATE = 500  # tokens /generate writes at most: a paragraph, in seconds on a default model
SEED = 1337  # sample.py's default


class BadRequest(Exception):
    """A request the tab cannot answer; the message is the one line the panel shows, `fields` what else the page
    needs to go on (a run's steps kept now)."""

    def __init__(self, message: str, **fields):
        super().__init__(message)
        self.fields = fields


def runs(logdir: Path | None) -> dict:
    """Every run under the logdir with the checkpoint read by default, its step and every step it kept, or why
    not; each checkpoint seen without loading its model."""
    listed = [
        {
            "name": run.name,
            "label": run.label,
            "checkpoint": relative(run.checkpoint, run),
            "step": run.step,
            "problem": run.problem,
            "note": run.note,
            "steps": steps(run),
        }
        for run in list_runs(required(logdir), named=lambda path, run_dir: path.relative_to(run_dir).as_posix())
    ]
    limits = {
        "max_chars": MAX_CHARS,
        "max_generate": MAX_GENERATE,
        "temperatures": list(TEMPERATURES),
    }
    return {"runs": listed, "text": VALIDATION_LINE, **limits}


def attention(logdir: Path | None, request: object) -> dict:
    """Everything a run's panel draws at one step, for every query of the text: the weights with the lesson's
    steps, the loss strips, the predictions at the temperature and the counterfactuals at the layer."""
    request = fields(request, "run, text and layer")
    entry, checkpoint, path = run_at(required(logdir), request)
    text, layer, blanks = request.get("text"), request.get("layer", 0), checked_blanks(request)
    temperature = checked_temperature(request)
    if not isinstance(text, str):
        raise BadRequest("text: must be a string")
    n_layer = checkpoint.model.config.n_layer
    if problem := layer_problem(layer, n_layer):
        raise BadRequest(problem)
    try:
        reading = read(checkpoint, text, blanks=blanks)
    except DataError as error:
        raise BadRequest(str(error)) from None
    predictions = predict(checkpoint, reading, layer, temperature)
    vocab_size, task = checkpoint.model.config.vocab_size, checkpoint.task
    return {
        "run": entry.name,
        "step": checkpoint.step,
        "task": task.name,  # what it was trained to predict: next_token, fill_blank
        "continues_text": task.continues_text,
        "words": asdict(words_of(task)),  # every phrase the panel says of the task (viewer/words.py)
        "blanks": [i for i, token in enumerate(reading.ids) if token == task.blank],  # the hidden positions
        **trace_json(reading, layer),
        "file": relative(path, entry),
        "steps": steps(entry),
        "run_note": entry.note if path == entry.checkpoint else "",
        "temperature": temperature,
        "vocab_size": vocab_size,
        "uniform_loss": rounded(math.log(vocab_size)),
        **predictions_json(predictions),
    }


def trace_json(reading: Reading, layer: int) -> dict:
    """The lesson's steps at `layer` for every query of the text, and what each row says."""
    trace = reading.layers[layer]
    return {
        "layer": layer,
        "n_layer": len(reading.layers),
        "d_k": trace.d_k,
        "scale": trace.scale,
        "causal": trace.causal,
        "softcap": trace.softcap,
        "block_size": reading.block_size,
        "tokens": reading.labels,
        "note": cut_note(reading),
        "hidden_keys": hidden_keys(reading),
        "targets_ahead": reading.task.targets_ahead,
        "mask_note": mask_note(reading),
        "raw": numbers(trace.raw),
        "fed": numbers(trace.fed),
        "weights": numbers(trace.weights),
        "stats": row_statistics(trace.weights),
        "saturated": SATURATED,
        "verdicts": [verdict(reading, layer, i) for i in range(len(reading.ids))],
    }


def hidden_keys(reading: Reading) -> list[list[int]]:
    """Per query i, the key positions j the task's mask hides from it (Reading.hidden), the mask the run was trained
    with where `causal` says it applies it; where it does not, the keys a leak reads."""
    return [row.nonzero().flatten().tolist() for row in reading.hidden]


def mask_note(reading: Reading) -> str:
    """Where the prefix of the task's mask ends, in one line ("" for a mask without one): a prefix LM's."""
    mask, length = reading.task.mask, len(reading.ids)
    if mask.triangle:
        return ""
    if length <= mask.prefix:
        return f"the text's {length} tokens lie inside the prefix of {mask.prefix}: each reads every other both ways"
    last = mask.prefix - 1
    return (
        f"the prefix ends at token {last}: tokens 0 to {last} read each other both ways, "
        "each later one reads up to itself"
    )


def generate(logdir: Path | None, request: object) -> dict:
    """The run's continuation of the text, or its blanks filled for a run that fills blanks: sample.py's sampling, on
    the same checkpoint, length, temperature and seed, writes the same tokens."""
    request = fields(request, "run, text and tokens")
    entry, checkpoint, path = run_at(required(logdir), request)
    text, tokens, seed = request.get("text"), request.get("tokens"), request.get("seed", SEED)
    temperature = checked_temperature(request)
    task, blanks = checkpoint.task, checked_blanks(request)
    wrong = not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= MAX_GENERATE
    if task.continues_text and wrong:  # a run that fills blanks writes as many tokens as the text has blanks
        raise BadRequest(f"tokens={tokens!r}: must be a whole number from 1 to {MAX_GENERATE}")
    if problem := seed_problem(seed):
        raise BadRequest(problem)
    if not isinstance(text, str) or not text:
        raise BadRequest("text: give the text to continue (a string, not empty)")
    if len(text) > MAX_CHARS:
        raise BadRequest(f"text: {len(text):,} characters; at most {MAX_CHARS:,}")
    try:
        prompt = task.hide(task.encode(text, "text"), blanks, "blanks")[0]
    except DataError as error:
        raise BadRequest(str(error)) from None
    if problem := blanks_problem(task, prompt, "text"):
        raise BadRequest(problem)
    with checkpoint.lock:  # no other request's forward on the model meanwhile
        [ids] = write(task, checkpoint.model, prompt, tokens, temperature, None, seed)
    written = (
        ids[len(prompt) :] if task.continues_text else [ids[i] for i, token in enumerate(prompt) if token == task.blank]
    )
    block_size = checkpoint.model.config.block_size
    context = "" if len(prompt) <= block_size else f"the model reads the text's last {block_size} tokens as context"
    return {
        "run": entry.name,
        "step": checkpoint.step,
        "file": relative(path, entry),
        "prompt": text,
        "continuation": checkpoint.tokenizer.decode(written),
        "tokens": token_labels(checkpoint.tokenizer, written),  # what it wrote: the new tokens, or each blank's
        "text": checkpoint.tokenizer.decode(ids),
        "filled": not task.continues_text,  # the text's blanks filled, not the text continued
        "note": context,
        "temperature": temperature,
        "seed": seed,
    }


def required(logdir: Path | None) -> Path:
    if logdir is None:
        raise BadRequest("TensorBoard was started without --logdir: the Attention tab reads the runs under it")
    return logdir


def fields(request: object, names: str) -> dict:
    if not isinstance(request, dict):
        raise BadRequest(f"the request must be a JSON object with {names}")
    return request


def run_at(logdir: Path, request: dict) -> tuple[RunCheckpoints, Checkpoint, Path]:
    """The run the request names, at its step (null: the default checkpoint), loaded."""
    run, step = request.get("run"), request.get("step")
    try:
        run_dir = (logdir / run).resolve() if isinstance(run, str) and run else None
    except ValueError:  # a NUL, a lone surrogate: no file has such a name
        run_dir = None
    if run_dir is None or not run_dir.is_relative_to(logdir.resolve()) or not run_dir.is_dir():
        raise BadRequest(f"run {run!r}: no such run under the logdir {logdir}")
    if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
        raise BadRequest(f"step={step!r}: must be a whole number, or null for the run's default checkpoint")
    entry = run_checkpoints(run_dir, run, named=lambda path, run_dir: path.relative_to(run_dir).as_posix())
    if step is None and entry.checkpoint is None:
        raise BadRequest(f"run {run!r}: {entry.problem or 'no checkpoint (best.pt or last.pt) yet'}")
    try:
        path, trained = load_at(entry, step)
        return entry, trained, path
    except (ConfigError, CheckpointError) as error:  # a step not kept; a file damaged, or not tinylm's
        raise BadRequest(str(error).replace(str(run_dir) + "/", ""), steps=steps(entry)) from None


def checked_blanks(request: dict) -> list[int]:
    """The token positions a request hides (a fill-in-the-blank run's clicked tokens); [] by default."""
    blanks = request.get("blanks", [])
    if not isinstance(blanks, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in blanks):
        raise BadRequest(f"blanks={blanks!r}: must be a list of token positions, whole numbers")
    return blanks


def checked_temperature(request: dict) -> float:
    temperature = request.get("temperature", 1.0)
    if problem := temperature_problem(temperature):
        raise BadRequest(problem)
    return float(temperature)


def relative(path: Path | None, entry: RunCheckpoints) -> str | None:
    return path.relative_to(entry.run_dir).as_posix() if path else None


def steps(entry: RunCheckpoints) -> list[dict]:
    return [{"step": kept.step, "file": relative(kept.path, entry)} for kept in entry.steps]


def predictions_json(predictions: Predictions) -> dict:
    return {
        "strips": [strip_json(strip) for strip in predictions.strips],
        "counterfactuals": [counterfactual_json(found) for found in predictions.counterfactuals],
        "problem": predictions.problem,
    }


def strip_json(strip: Strip) -> dict:
    return {
        "name": strip.name,
        "tag": strip.tag,
        "causal": strip.causal,
        "losses": [rounded(loss) for loss in strip.losses],
        "mean": rounded(strip.mean),
        "predictions": [
            {
                "top": [[label, rounded(p)] for label, p in prediction.top],
                "next": prediction.next,
                "p_next": rounded(prediction.p_next),
                "loss": rounded(prediction.loss),
            }
            for prediction in strip.predictions
        ],
    }


def counterfactual_json(found: Counterfactual | None) -> dict | None:
    if found is None:
        return None
    numbers = {kind: rounded(getattr(found, kind)) for kind in ("trained", *COUNTERFACTUALS)}
    return numbers | {"target": found.target, "words": found.words}


def rounded(x: float | None) -> float | None:
    """A number as JSON carries it: DIGITS decimals; None (and -inf, nan) as null."""
    return round(x, DIGITS) if x is not None and math.isfinite(x) else None


def numbers(matrix) -> list[list[float | None]]:
    """A (T, T) tensor as rows of numbers; -inf (a masked score) as null, which JSON can carry."""
    return [[rounded(x) for x in row] for row in matrix.tolist()]
