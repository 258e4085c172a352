"""A trained model's attention on a text a person gives: the text checked and cut to the model's context, the trace
of every layer (viewer/trace.py), each query row's statistics and what they say in words. The Attention tab sends
it as JSON and attend.py prints it, so both say the same; viewer/predictions.py adds what the model predicts."""

from dataclasses import dataclass, field

from torch import Tensor

from data.errors import DataError
from data.tokenizer import encode_known
from model.config import Mixer
from trainer.diagnostics import SATURATED, entropy, future_mass, max_weight, token_labels
from viewer.checkpoints import Trained
from viewer.trace import LayerTrace, trace_forward

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
    following: int | None = None  # the text's next token after those read (a cut text): the last one predicts it
    logits: Tensor | None = field(default=None, repr=False)  # (T, vocab_size), the traced forward's: as trained

    @property
    def targets(self) -> list[int | None]:
        """What each position predicts: the next token of the text, None where the text ends."""
        return [*self.ids[1:], self.following]


def read(trained: Trained, text: str, setting: str = "text") -> Reading:
    """The trace of `text` (its first block_size tokens); a DataError naming `setting` for a text it cannot read."""
    mixer = trained.model.config.mixer
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
    return read_ids(trained, encode_known(trained.tokenizer, text, setting))


def read_ids(trained: Trained, ids: list[int]) -> Reading:
    """The trace of the token ids' first block_size, holding the model while its hooks are on."""
    block_size = trained.model.config.block_size
    kept, following = ids[:block_size], (ids[block_size] if len(ids) > block_size else None)
    with trained.lock:
        layers, logits = trace_forward(trained.model, kept)
    return Reading(kept, token_labels(trained.tokenizer, kept), len(ids), block_size, layers, following, logits)


def cut_note(reading: Reading) -> str:
    """'' for a text the model reads whole; else what was left out."""
    if reading.given <= len(reading.ids):
        return ""
    kept, context = len(reading.ids), f"model.block_size={reading.block_size}"
    return f"cut to its first {kept} of {reading.given} tokens: the model's context is {context}"


def row_statistics(weights: Tensor) -> dict[str, list[float]]:
    """Each query row's entropy (nats), largest weight and weight on the future (keys j > i)."""
    rows = range(weights.size(0))
    return {
        "entropy": [entropy(weights[i]).item() for i in rows],
        "max_weight": [max_weight(weights[i]).item() for i in rows],
        "future_mass": [future_mass(weights[i : i + 1, i:]).item() for i in rows],  # column 0 of the slice is key i
    }


def verdict(layer: LayerTrace, query: int) -> str:
    """What row `query` of the weights says in words, '' when nothing stands out: the leak, saturation."""
    row = layer.weights[query]
    words = []
    if query + 1 < row.numel() and row[query + 1] > LEAK:
        share = f"{row[query + 1]:.2f} of the weight sits on token {query + 1}"
        words.append(f"{share}, the very token it is asked to predict: the leak")
    elif future_mass(layer.weights[query : query + 1, query:]) > LEAK:
        words.append("most of the weight sits on future tokens (j > i), which the causal mask would hide")
    if row.max() > SATURATED:
        words.append(f"one-hot: the softmax is saturated (largest weight {row.max():.4f})")
    return "; ".join(words)
