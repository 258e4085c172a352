"""What the exported page's engine (tensorboard_plugin_tinylm/static/page.js) needs of the runs to answer the
Attention tab's routes in the page: the tab's listing of the runs, and each chosen checkpoint as JSON (its model
settings, its task, its character vocabulary and its weights as float32), or why the page cannot represent it.

The page computes the forward in JavaScript over the weights, for attention layers and the character tokenizer only:
a GRU or LSTM mixer and byte-level BPE are refused (`page_problem`), and `page_data` leaves such a run out, saying
why in its `left_out`, one line a run.
"""

import base64
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tokenizers import models

from model.config import Mixer
from model.mask import mask_value
from model.statistics import SATURATED
from tensorboard_plugin_tinylm import answers
from trainer.checkpoint import CheckpointError
from trainer.config import ConfigError
from trainer.diagnostics import token_labels
from viewer.checkpoints import Checkpoint
from viewer.generation import SEEDS
from viewer.predictions import CLOSE, COUNTERFACTUALS, FAR, NOTABLE, PART, TOP, UNEXPECTED
from viewer.readings import LEAK
from viewer.runs import RunCheckpoints, load_at
from viewer.words import words_of

# The tasks page.js knows: what a position predicts, how a text is hidden, the mask it is read through.
TASKS = ("next_token", "fill_blank", "prefix_lm")


def page_problem(checkpoint: Checkpoint) -> str | None:
    """Why the page cannot represent the checkpoint, in one line; None where it can."""
    config, task = checkpoint.model.config, checkpoint.task
    if config.mixer is not Mixer.attention:
        mixer = config.mixer.value
        recurrent = f"a recurrent layer, {mixer.upper()} (model.mixer={mixer})"
        return f"it mixes the positions with {recurrent}: the page computes attention only"
    if not isinstance(checkpoint.tokenizer.model, models.WordLevel):
        return "its tokenizer is byte-level BPE (tokenizer.kind=bpe): the page reads the character tokenizer only"
    if task.name not in TASKS:
        return f"its task is {task.name}: the page computes {', '.join(TASKS)} only"
    return None


def page_model(checkpoint: Checkpoint) -> dict:
    """Everything page.js needs of one checkpoint the page can represent (page_problem None), as JSON values."""
    model, task, tokenizer = checkpoint.model, checkpoint.task, checkpoint.tokenizer
    config = model.config
    mask = mask_value(config)
    ids = list(range(config.vocab_size))
    added = tokenizer.get_added_tokens_decoder()
    return {
        "step": checkpoint.step,
        "config": {
            "vocab_size": config.vocab_size,
            "block_size": config.block_size,
            "d_model": config.d_model,
            "d_k": config.d_k,
            "d_v": config.d_v,
            "n_layer": config.n_layer,
            "mlp": config.mlp,
            "scale": config.scale,
            "causal": config.causal,
            "softcap": config.softcap,
            "mask_value": None if mask == -float("inf") else mask,  # None: minus infinity, which JSON cannot carry
            "projections": config.projections,
            "qk_norm": config.qk_norm,
            "positions": config.positions.value,
        },
        "task": {
            "name": task.name,
            "continues_text": task.continues_text,
            "blank": task.blank,
            "prefix": task.mask.prefix,  # the first keys of a window read both ways (model/mask.py's Mask)
            "strips": [asdict(kind) for kind in task.strips(config)],
            "words": asdict(words_of(task)),
        },
        "tokenizer": {
            "tokens": [tokenizer.id_to_token(i) for i in ids],  # a character each, but the added tokens
            "pieces": [tokenizer.decode([i]) for i in ids],  # what each token decodes to ("" for a special one)
            "labels": token_labels(tokenizer, ids),  # how each token is drawn
            "unknown": tokenizer.token_to_id("[UNK]"),
            # The added tokens a person's text is searched for before it is cut into characters ([UNK] typed whole
            # is the unknown token); a task that reads special tokens as text (the blank's) searches for none.
            "added": {
                token.content: i
                for i, token in added.items()
                if not (token.special and tokenizer.encode_special_tokens)
            },
        },
        "weights": weights_json(model.state_dict()),
    }


def weights_json(state: dict) -> dict:
    """Every tensor as little-endian float32, one after another in one base64 string, each found by its name's
    offset (in floats) and shape."""
    parts, tensors, offset = [], {}, 0
    for name, tensor in state.items():
        values = tensor.detach().float().cpu().numpy().astype("<f4").ravel()
        tensors[name] = {"offset": offset, "shape": list(tensor.shape)}
        parts.append(values)
        offset += values.size
    data = np.concatenate(parts).tobytes() if parts else b""
    return {"base64": base64.b64encode(data).decode("ascii"), "tensors": tensors}


def page_data(chosen: list[tuple[RunCheckpoints, list[int | None]]]) -> dict:
    """The page's data for the chosen runs, each at its chosen steps (None: the run's default checkpoint):
    {"runs": what answers.runs answers of the runs under their directory, with the runs and steps held here,
     "models": {run name: {str(step): page_model with the checkpoint's "file" and "run_note"}},
     "constants": the numbers viewer/ decides by, for page.js to decide alike,
     "left_out": [{"run": name, "reason": one line}, ...], the runs the page cannot represent}.
    A run whose default checkpoint is not among its chosen steps is read by default at its latest chosen step."""
    kept, found, left_out = {}, {}, []
    for entry, steps in chosen:
        try:
            found[entry.name] = chosen_models(entry, steps)
        except PageRefusal as refusal:
            left_out.append({"run": entry.name, "reason": str(refusal)})
            continue
        kept[entry.name] = entry
    listing = {"runs": []}
    for root in dict.fromkeys(root_of(entry) for entry in kept.values()):
        listed = answers.runs(root)
        listing = listed | {
            "runs": listing["runs"]
            + [restricted(run, found[run["name"]]) for run in listed["runs"] if run["name"] in kept]
        }
    held = {run["name"] for run in listing["runs"]}
    for name, entry in kept.items():
        if name not in held:  # a checkpoint file that is not a run's best.pt or last.pt: no run lists it
            left_out.append({"run": name, "reason": unlisted(entry)})
    return {"runs": listing, "models": found, "constants": constants(), "left_out": left_out}


def unlisted(entry: RunCheckpoints) -> str:
    return (
        f"{entry.checkpoint}: not a run's best.pt or last.pt, and a page holds runs by their directory: give the run's "
        "directory (steps=[N] for a step it kept)"
    )


def constants() -> dict:
    """The numbers the answers are decided by, from where viewer/ and answers.py hold them."""
    return {
        "seed": answers.SEED,
        "seeds": [str(bound) for bound in SEEDS],  # beyond what a JavaScript number holds exactly
        "saturated": SATURATED,
        "leak": LEAK,
        "top": TOP,
        "counterfactuals": list(COUNTERFACTUALS),
        "far": FAR,
        "notable": NOTABLE,
        "part": PART,
        "close": CLOSE,
        "unexpected": UNEXPECTED,
    }


class PageRefusal(Exception):
    """Why a run is left out of the page, in one line."""


def chosen_models(entry: RunCheckpoints, steps: list[int | None]) -> dict[str, dict]:
    """The run's chosen checkpoints as page models by step, or PageRefusal."""
    if entry.checkpoint is None:
        raise PageRefusal(entry.problem or "no checkpoint (best.pt or last.pt) yet")
    models = {}
    for step in dict.fromkeys(steps or [None]):
        try:
            path, checkpoint = load_at(entry, step)
        except (ConfigError, CheckpointError) as error:
            raise PageRefusal(str(error).replace(f"{entry.run_dir}/", "")) from None
        if problem := page_problem(checkpoint):
            raise PageRefusal(problem)
        file = path.relative_to(entry.run_dir).as_posix()
        note = entry.note if path == entry.checkpoint else ""
        models[str(checkpoint.step)] = page_model(checkpoint) | {"file": file, "run_note": note}
    return models


def root_of(entry: RunCheckpoints) -> Path:
    """The directory the run was listed under: its name is its path there ("." for the directory itself)."""
    return entry.run_dir if entry.name == "." else entry.run_dir.parents[entry.name.count("/")]


def restricted(run: dict, models: dict[str, dict]) -> dict:
    """The listing's entry of a run with only the steps the page holds; its default the latest of them where the
    run's own default is not among them."""
    steps = [kept for kept in run["steps"] if str(kept["step"]) in models]
    if str(run["step"]) not in models:
        latest = steps[-1]
        run = run | {"step": latest["step"], "checkpoint": latest["file"], "note": ""}
    return run | {"steps": steps}
