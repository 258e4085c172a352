"""What a trained model predicts on a text, and what its look contributes: one computation for the Attention tab,
attend.py's lines and its PNG, from the model's own forward.

- The loss strips: each position's cross-entropy (nats) for the text's next token, as trained, and for a model
  trained without the mask, with the mask put back (the model's `causal=` override): the per-token terms of the
  curves val/loss and val/loss_causal (trainer/evaluate.py averages the same terms over its windows).
- Each position's top five next tokens at a temperature (the softmax of logits / T, as sampling draws them) and
  the actual next token's probability.
- The counterfactuals of a query i at one layer, each through model/attention.py's `reweigh` in one batched forward
  (a forward pre-hook on that layer adds reweigh=): the next token's probability (a) as trained, (b) with the
  query's future keys masked and its weights renormalised over j <= i, (c) with uniform weights over the keys it
  may see (j <= i under the mask, every key without it), (d) with no weight at all: the residual stream alone.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model import TinyLM, reads_only_the_past
from trainer.diagnostics import token_labels
from viewer.checkpoints import Trained
from viewer.readings import Reading

TOP = 5  # next tokens shown per position
AS_TRAINED = ("as trained", "val/loss")  # a strip's name and the curve its mean is a term of
MASK_PUT_BACK = ("mask put back", "val/loss_causal")
COUNTERFACTUALS = ("masked", "uniform", "silent")  # (b), (c), (d); (a) is the as-trained strip's
FORWARD_TOKENS = 16_384  # tokens per counterfactual forward: a 64-token text's every query in one batch
FAR = 3.0  # a probability at least this many times another (and NOTABLE above it) is another answer
NOTABLE = 0.05
PART = 0.2  # masking the future takes at least this much off, short of FAR: the prediction was read in part
CLOSE = 0.1  # two probabilities within this share of the larger (or 0.01) are the same answer
UNEXPECTED = 0.02  # below this in every setting, the model does not expect the token at all


@dataclass
class Prediction:
    top: list[tuple[str, float]]  # the likeliest next tokens and their probabilities at the temperature
    next: str | None  # the text's next token (None where the text ends)
    p_next: float | None  # its probability at the temperature
    loss: float | None  # its cross-entropy in nats, at temperature 1 (what the curves average)


@dataclass
class Strip:
    name: str  # "as trained", "mask put back"
    tag: str  # the curve whose mean over its windows is the mean of such losses: val/loss, val/loss_causal
    causal: bool  # the mask the forward used
    losses: list[float | None]  # per position i: the loss of predicting token i+1; None where there is none
    predictions: list[Prediction]

    @property
    def mean(self) -> float | None:
        scored = [loss for loss in self.losses if loss is not None]
        return sum(scored) / len(scored) if scored else None


@dataclass
class Counterfactual:
    """Query i's next token's probability (temperature 1) with its row of weights at one layer as trained, its
    future keys masked, uniform, or silent (zero: the residual stream alone); and what they say, in words."""

    trained: float
    masked: float
    uniform: float
    silent: float
    words: str


@dataclass
class Predictions:
    strips: list[Strip]  # as trained; for a run trained without the mask, then with the mask put back
    counterfactuals: list[Counterfactual | None]  # per query at the layer; None where there is no next token
    problem: str = ""  # why nothing could be scored (a one-token text), else ""


def is_causal(model: TinyLM) -> bool:
    """Whether the model's forward reads only the past: else a second strip puts the true mask back (a finite
    mask value too: the future may have beaten it)."""
    return reads_only_the_past(model.config)


def predict(trained: Trained, reading: Reading, layer: int = 0, temperature: float = 1.0) -> Predictions:
    """Every number the tab's panel and attend.py show of the text's predictions, holding the model meanwhile."""
    model = trained.model
    with trained.lock:
        strips = [strip(trained, reading, None, temperature, AS_TRAINED)]
        if not is_causal(model):
            strips.append(strip(trained, reading, True, temperature, MASK_PUT_BACK))
        looks = counterfactuals(trained, reading, layer, strips[0])
    scored = any(target is not None for target in reading.targets)
    problem = "" if scored else f"the text is one token ({reading.labels[0]!r}): there is no next token to score"
    return Predictions(strips, looks, problem)


@torch.no_grad()
def next_token_logits(model: TinyLM, ids: list[int], causal: bool | None = None) -> Tensor:
    """(T, vocab_size) logits of the model's own forward (its kernel, as evaluation runs it); `causal` as there."""
    device = next(model.parameters()).device
    return model(torch.tensor([ids], device=device), causal=causal)[0].float().cpu()


def token_losses(logits: Tensor, targets: list[int | None]) -> list[float | None]:
    """Each position's cross-entropy of its target, as F.cross_entropy computes the training loss; None without one."""
    scored = [i for i, target in enumerate(targets) if target is not None]
    losses: list[float | None] = [None] * len(targets)
    if scored:
        chosen = torch.tensor([targets[i] for i in scored])
        for i, loss in zip(scored, F.cross_entropy(logits[scored], chosen, reduction="none").tolist()):
            losses[i] = loss
    return losses


def distribution(logits: Tensor, temperature: float) -> Tensor:
    """The next-token probabilities sampling draws from at `temperature` (model.generate's softmax of logits / T)."""
    return F.softmax(logits / temperature, dim=-1)


def strip(trained: Trained, reading: Reading, causal: bool | None, temperature: float, named: tuple) -> Strip:
    model, targets = trained.model, reading.targets
    as_trained = causal is None and reading.logits is not None  # the trace's own forward gave them
    logits = reading.logits if as_trained else next_token_logits(model, reading.ids, causal)
    losses = token_losses(logits, targets)
    probabilities = distribution(logits, temperature)
    top = probabilities.topk(min(TOP, probabilities.size(-1)), dim=-1)
    predictions = []
    for i, (values, ids) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        ranked = list(zip(token_labels(trained.tokenizer, ids), values))
        target = targets[i]
        if target is None:
            predictions.append(Prediction(ranked, None, None, None))
        else:
            label = token_labels(trained.tokenizer, [target])[0]
            predictions.append(Prediction(ranked, label, probabilities[i, target].item(), losses[i]))
    used = is_causal(model) if causal is None else causal
    return Strip(*named, used, losses, predictions)


def counterfactual_rows(reading: Reading, layer: int, i: int) -> dict[str, Tensor]:
    """Query i's rows of weights for (b)-(d) at `layer`. (b) is the softmax of its fed scores over j <= i: the
    trained row renormalised there, without the 0/0 of a row whose past weights underflowed."""
    trace = reading.layers[layer]
    keys = torch.arange(trace.fed.size(-1))
    masked = F.softmax(trace.fed[i].masked_fill(keys > i, float("-inf")), dim=-1)
    visible = (keys <= i) if trace.causal else torch.ones_like(keys, dtype=torch.bool)
    uniform = visible.float() / visible.sum()
    return {"masked": masked, "uniform": uniform, "silent": torch.zeros_like(uniform)}


@torch.no_grad()
def looked_again(model: TinyLM, ids: list[int], layer: int, queries: list[int], rows: Tensor) -> Tensor:
    """(B, vocab_size) logits at position queries[b] of the text, when `layer` mixes query queries[b]'s values
    with rows[b] instead of its own weights; the other rows, and every other layer, as trained."""
    device = next(model.parameters()).device
    per_forward = max(1, FORWARD_TOKENS // len(ids))
    attn, logits = model.blocks[layer].attn, []
    for start in range(0, len(queries), per_forward):
        where = torch.tensor(queries[start : start + per_forward], device=device)
        these = rows[start : start + per_forward].to(device)
        batch = torch.arange(where.numel(), device=device)

        def reweigh(weights: Tensor, where=where, these=these, batch=batch) -> Tensor:
            changed = weights.clone()
            changed[batch, where] = these.to(weights.dtype)
            return changed

        def add_reweigh(_, args: tuple, kwargs: dict, reweigh=reweigh) -> tuple[tuple, dict]:
            return args, kwargs | {"reweigh": reweigh}

        hook = attn.register_forward_pre_hook(add_reweigh, with_kwargs=True)
        try:
            out = model(torch.tensor([ids], device=device).expand(where.numel(), -1))
        finally:
            hook.remove()
        logits.append(out[batch, where].float().cpu())
    return torch.cat(logits)


def counterfactuals(trained: Trained, reading: Reading, layer: int, as_trained: Strip) -> list[Counterfactual | None]:
    """(a)-(d) and their sentence for every query of the text that has a next token, in one batched forward."""
    targets = reading.targets
    queries = [i for i, target in enumerate(targets) if target is not None]
    found: list[Counterfactual | None] = [None] * len(targets)
    if not queries:
        return found
    variants = [(i, kind) for i in queries for kind in COUNTERFACTUALS]
    all_rows = {i: counterfactual_rows(reading, layer, i) for i in queries}
    rows = torch.stack([all_rows[i][kind] for i, kind in variants])
    logits = looked_again(trained.model, reading.ids, layer, [i for i, _ in variants], rows)
    chosen = torch.tensor([targets[i] for i, _ in variants])
    probabilities = F.softmax(logits, dim=-1)[torch.arange(len(variants)), chosen].tolist()
    p = {variant: probability for variant, probability in zip(variants, probabilities)}
    causal = reading.layers[layer].causal
    for i in queries:
        numbers = {"trained": math.exp(-as_trained.losses[i]), **{kind: p[i, kind] for kind in COUNTERFACTUALS}}
        label = as_trained.predictions[i].next
        found[i] = Counterfactual(**numbers, words=words(label, numbers, causal))
    return found


def probability(p: float) -> str:
    """As a person reads it: 1.00, 0.43, 0.031, 0.0029, 2.1e-05."""
    return f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


def far(x: float, y: float) -> bool:
    return x >= FAR * y and x - y >= NOTABLE


def close(x: float, y: float) -> bool:
    return abs(x - y) <= max(CLOSE * max(x, y), 0.01)


def words(label: str, numbers: dict[str, float], causal: bool) -> str:
    """What the four probabilities say, in one sentence: the first rule that holds, from the telling to the plain."""
    a, b, c, d = (probability(numbers[kind]) for kind in ("trained", *COUNTERFACTUALS))
    trained, masked, uniform, silent = (numbers[kind] for kind in ("trained", *COUNTERFACTUALS))
    name = f"p({label!r})"
    if not causal and far(trained, masked):
        return f"masking the future takes {name} from {a} to {b}: the prediction was read, not inferred"
    if not causal and trained - masked >= PART:
        return f"masking the future takes {name} from {a} to {b}: part of the prediction was read, part inferred"
    if not causal and far(masked, trained):
        return f"masking the future raises {name} from {a} to {b}: what it read ahead pointed elsewhere"
    if max(numbers.values()) < UNEXPECTED:
        highest = probability(max(numbers.values()))
        return f"{name} is at most {highest} whichever way it looks ({a} as trained): it does not expect it here"
    if close(trained, silent):
        return f"without the look {name} is {d} ({a} as trained): the residual alone predicts it"
    if close(trained, uniform):
        return (
            f"uniform weights give {name} {c} ({a} as trained, {d} without the look): that it looks matters, not where"
        )
    if trained > uniform:
        return (
            f"where it looks raises {name} from {c} (uniform weights) to {a} ({d} without the look): the look matters"
        )
    return f"its look lowers {name}: {a} as trained, {c} with uniform weights, {d} without the look"
