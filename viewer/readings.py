"""A trained model's attention on a text a person gives: the text checked and cut to the model's context, the trace
of every layer (viewer/trace.py), each query row's statistics and what they say in words. The Attention tab sends
it as JSON and attend.py prints it, so both say the same; viewer/predictions.py adds what the model predicts."""

from dataclasses import dataclass

from torch import Tensor

from data.errors import DataError
from model.config import Mixer
from model.statistics import SATURATED, entropy, future_share, hidden_share, max_weight, past_share
from task import Task
from trainer.diagnostics import token_labels
from viewer.checkpoints import Checkpoint
from viewer.trace import LayerTrace, trace

# A line of the embedded corpus's validation split (Macbeth, the last tenth of the plays): the text a reading starts
# with, so the Attention tab is never blank; a model trained on it has not seen it.
VALIDATION_LINE = "So foul and fair a day I have not seen."
MAX_CHARS = 100_000  # far beyond any model's context; more is a paste gone wrong, and encoding it would take seconds
LEAK = 0.5  # a row putting more than this on the very next token reads the answer


@dataclass
class Reading:
    ids: list[int]  # the tokens traced: the text's first block_size
    labels: list[str]  # each token's text, whitespace drawn (␣ ↵ ⇥)
    given: int  # how many tokens the whole text has (more than len(ids) when it was cut)
    block_size: int
    layers: list[LayerTrace]
    targets: list[int | None]  # what each position predicts, as the task says (None: nothing it can score)
    task: Task  # what the model was trained to predict
    hidden: Tensor  # (T, T) bool: the keys the task's mask hides from each query (applied where layers[l].causal)
    following: int | None = None  # the text's next token after those read (a cut text)


def layer_problem(layer: object, n_layer: int, setting: str = "layer") -> str:
    """'' for a layer the model has, else the one line saying why not."""
    if not isinstance(layer, int) or isinstance(layer, bool):
        return f"{setting}={layer!r}: must be a whole number"
    if not 0 <= layer < n_layer:
        return f"{setting}={layer}: this model has {n_layer} layer{'s' * (n_layer > 1)} ({setting}=0 to {n_layer - 1})"
    return ""


def read(
    checkpoint: Checkpoint, text: str, setting: str = "text", blanks: list[int] = (), blanks_setting: str = "blanks"
) -> Reading:
    """The trace of `text` (its first block_size tokens), with the tokens at positions `blanks` hidden where the task
    hides tokens; a DataError naming `setting` (or `blanks_setting`) for what it cannot read."""
    mixer = checkpoint.model.config.mixer
    if mixer is not Mixer.attention:
        raise DataError(
            f"this run mixes the positions with a recurrence (model.mixer={mixer.value}): it has no "
            "attention weights to show"
        )
    if not text:
        raise DataError(f"{setting}: empty; give the text whose attention to show")
    if len(text) > MAX_CHARS:
        raise DataError(
            f"{setting}: {len(text):,} characters; at most {MAX_CHARS:,} (the model reads its first tokens)"
        )
    ids, hidden = checkpoint.task.hide(checkpoint.task.encode(text, setting), list(blanks), blanks_setting)
    return read_ids(checkpoint, ids, hidden)


def read_ids(checkpoint: Checkpoint, ids: list[int], hidden: dict[int, int] | None = None) -> Reading:
    """The trace of the token ids' first block_size, holding the model meanwhile; `hidden` the tokens the task hid
    by position."""
    block_size, task = checkpoint.model.config.block_size, checkpoint.task
    kept, following = ids[:block_size], (ids[block_size] if len(ids) > block_size else None)
    with checkpoint.lock:
        layers = trace(checkpoint.model, kept, task.mask)
    labels, targets = token_labels(checkpoint.tokenizer, kept), task.targets(kept, following, hidden or {})
    hidden_keys = task.mask.hidden_keys(len(kept))
    return Reading(kept, labels, len(ids), block_size, layers, targets, task, hidden_keys, following)


def cut_note(reading: Reading) -> str:
    """'' for a text the model reads whole; else what was left out."""
    if reading.given <= len(reading.ids):
        return ""
    kept, context = len(reading.ids), f"model.block_size={reading.block_size}"
    return f"cut to its first {kept} of {reading.given} tokens: the model's context is {context}"


def row_statistics(weights: Tensor) -> dict[str, list[float]]:
    """Each query row's entropy (nats), largest weight, and weight on the past (keys j < i, the left) and on the
    future (keys j > i, the right)."""
    rows = range(weights.size(0))
    return {
        "entropy": [entropy(weights[i]).item() for i in rows],
        "max_weight": [max_weight(weights[i]).item() for i in rows],
        "past_mass": past_share(weights).tolist(),
        "future_mass": future_share(weights).tolist(),
    }


def verdict(reading: Reading, layer: int, query: int) -> str:
    """What row `query` of a layer's weights says in words, '' when nothing stands out: the leak, saturation."""
    weights = reading.layers[layer].weights
    row, target = weights[query], reading.task.target_key(query)  # where the query's target would sit in the input
    shown = target < row.numel() and reading.ids[target] == reading.targets[query]  # and it does: the input holds it
    words = []
    if shown and row[target] > LEAK:
        share = f"{row[target]:.2f} of the weight sits on token {target}"
        words.append(f"{share}, the very token it is asked to predict: the leak")
    elif target > query and hidden_share(weights, reading.hidden)[query] > LEAK:
        words.append("most of the weight sits on future tokens (j > i) that the task's mask hides")
    if row.max() > SATURATED:
        words.append(f"one-hot: the softmax is saturated (largest weight {row.max():.4f})")
    return "; ".join(words)
