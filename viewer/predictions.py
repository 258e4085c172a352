"""What a trained model predicts on a text, and what its look contributes: one computation for the Attention tab,
attend.py's lines and its PNG, from the model's own forward. What a position predicts is the task's (task/).

- The loss strips (the task's Strip kinds): each position's cross-entropy (nats) for its target, as trained and, for
  a model that reads what the task's mask hides, with that mask put back (the model's `causal=` override): the per-token
  terms of the curves the strips are named after (trainer/evaluate.py averages the same terms over its windows).
- Each position's top five tokens at a temperature (the softmax of logits / T, as sampling draws them) and its
  target's probability.
- The counterfactuals of a query i at one layer, each through the model's Probe with a reweighed row in one batched
  forward: the target's probability (a) as trained, (b) with the keys the task's mask hides from the query masked
  and its weights renormalised over the rest, (c) with uniform weights over the keys it may see (those the mask
  leaves, every key without it), (d) with no look at all: the residual stream alone.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model import CAUSAL, Mask, Probe, TinyLM
from task.base import StripKind
from trainer.diagnostics import token_labels
from viewer.checkpoints import Checkpoint
from viewer.readings import Reading
from viewer.words import Words, words_of

TOP = 5  # tokens shown per position
COUNTERFACTUALS = ("masked", "uniform", "no_look")  # (b), (c), (d); (a) is the text's own forward's
FORWARD_TOKENS = 16_384  # tokens per counterfactual forward: a 64-token text's every query in one batch
FAR = 3.0  # a probability at least this many times another (and NOTABLE above it) is another answer
NOTABLE = 0.05
PART = 0.2  # masking the hidden keys takes at least this much off, short of FAR: the prediction was read in part
CLOSE = 0.1  # two probabilities within this share of the larger (or 0.01) are the same answer
UNEXPECTED = 0.02  # below this in every setting, the model does not expect the token at all


@dataclass
class Prediction:
    top: list[tuple[str, float]]  # the likeliest tokens and their probabilities at the temperature
    next: str | None  # the position's target (for next-token prediction the text's next token); None: none
    p_next: float | None  # its probability at the temperature
    loss: float | None  # its cross-entropy in nats, at temperature 1 (what the curves average)


@dataclass
class Strip:
    name: str  # "as trained", "mask put back"
    tag: str  # the curve whose mean over its windows is the mean of such losses: val/loss, val/loss_causal
    causal: bool  # whether the forward applied the task's mask
    losses: list[float | None]  # per position i: the loss of predicting its target; None where there is none
    predictions: list[Prediction]

    @property
    def mean(self) -> float | None:
        scored = [loss for loss in self.losses if loss is not None]
        return sum(scored) / len(scored) if scored else None


@dataclass
class Counterfactual:
    """Query i's target's probability (temperature 1) with its row of weights at one layer as trained, its hidden
    keys masked, uniform, or with no look (zero weights: the residual stream alone); and what they say, in words."""

    trained: float
    masked: float
    uniform: float
    no_look: float
    target: str  # the token whose probability these are: the query's target, or a blank's likeliest filling
    words: str


@dataclass
class Predictions:
    strips: list[Strip]  # as trained; for a run trained without the mask, then with the mask put back
    counterfactuals: list[Counterfactual | None]  # per query at the layer; None where there is no next token
    problem: str = ""  # why nothing could be scored (a one-token text), else ""


def predict(checkpoint: Checkpoint, reading: Reading, layer: int = 0, temperature: float = 1.0) -> Predictions:
    """Every number the tab's panel and attend.py show of the text's predictions, holding the model meanwhile."""
    task, model = checkpoint.task, checkpoint.model
    targets = task.strip_targets(reading.ids, reading.targets)
    with checkpoint.lock:
        logits = [strip_logits(checkpoint, reading, kind.causal) for kind in task.strips(model.config)]
        strips = [
            strip(checkpoint, kind, found, targets, temperature)
            for kind, found in zip(task.strips(model.config), logits)
        ]
        looks = counterfactuals(checkpoint, reading, layer, logits[0])
    scored = any(target is not None for target in targets)
    return Predictions(strips, looks, "" if scored else task.nothing_to_score(reading.labels))


@torch.no_grad()
def strip_logits(checkpoint: Checkpoint, reading: Reading, causal: bool | None) -> Tensor:
    """(T, vocab_size): each position's logits as the task reads its prediction there (task.query_inputs), through
    the model's own forward (its kernel, as evaluation runs it); `causal` as there."""
    positions = list(range(len(reading.ids)))
    inputs = checkpoint.task.query_inputs(reading.ids, positions).to(next(checkpoint.model.parameters()).device)
    out = checkpoint.model(inputs, mask=checkpoint.task.mask, causal=causal)
    rows = torch.arange(len(positions)) if inputs.size(0) > 1 else 0
    return out[rows, positions].float().cpu()


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


def strip(
    checkpoint: Checkpoint, kind: StripKind, logits: Tensor, targets: list[int | None], temperature: float
) -> Strip:
    """One loss strip of the text: each position's loss on its target and its top five."""
    losses = token_losses(logits, targets)
    probabilities = distribution(logits, temperature)
    top = probabilities.topk(min(TOP, probabilities.size(-1)), dim=-1)
    predictions = []
    for i, (values, ids) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        ranked = list(zip(token_labels(checkpoint.tokenizer, ids), values))
        target = targets[i]
        if target is None:
            predictions.append(Prediction(ranked, None, None, None))
        else:
            label = token_labels(checkpoint.tokenizer, [target])[0]
            predictions.append(Prediction(ranked, label, probabilities[i, target].item(), losses[i]))
    causal = checkpoint.model.config.causal if kind.causal is None else kind.causal
    return Strip(kind.name, kind.tag, causal, losses, predictions)


def counterfactual_rows(reading: Reading, layer: int, i: int) -> dict[str, Tensor]:
    """Query i's rows of weights for (b)-(d) at `layer`. (b) is the softmax of its fed scores over the keys the
    task's mask leaves it: the trained row renormalised there, without the 0/0 of a row whose visible weights
    underflowed."""
    trace = reading.layers[layer]
    hidden = reading.hidden[i]  # query i's row of the task's mask
    masked = F.softmax(trace.fed[i].masked_fill(hidden, float("-inf")), dim=-1)
    visible = ~hidden if trace.causal else torch.ones_like(hidden)
    uniform = visible.float() / visible.sum()
    return {"masked": masked, "uniform": uniform, "no_look": torch.zeros_like(uniform)}


@torch.no_grad()
def looked_again(
    model: TinyLM, inputs: Tensor, layer: int, queries: list[int], rows: Tensor, mask: Mask = CAUSAL
) -> Tensor:
    """(B, vocab_size) logits at position queries[b] of inputs[b] (a (1, T) input serves every b), when `layer`
    mixes query queries[b]'s values with rows[b] instead of its own weights; the other rows, and every other layer,
    as trained, through the task's `mask`."""
    device = next(model.parameters()).device
    per_forward = max(1, FORWARD_TOKENS // inputs.size(1))
    logits = []
    for start in range(0, len(queries), per_forward):
        where = torch.tensor(queries[start : start + per_forward], device=device)
        these = rows[start : start + per_forward].to(device)
        batch = torch.arange(where.numel(), device=device)
        texts = inputs[start : start + per_forward] if inputs.size(0) > 1 else inputs.expand(where.numel(), -1)

        def reweigh(weights: Tensor, where=where, these=these, batch=batch) -> Tensor:
            changed = weights.clone()
            changed[batch, where] = these.to(weights.dtype)
            return changed

        out = model(texts.to(device), mask=mask, probe=Probe({layer: reweigh}))
        logits.append(out[batch, where].float().cpu())
    return torch.cat(logits)


def counterfactuals(
    checkpoint: Checkpoint, reading: Reading, layer: int, logits: Tensor
) -> list[Counterfactual | None]:
    """(a)-(d) and their sentence for every query of the text that has a target (or whose likeliest token the task
    asks about instead: a blank nobody filled), in batched forwards; (a) from the as-trained strip's `logits`."""
    task, ids, targets = checkpoint.task, reading.ids, reading.targets
    asked = [
        target if target is not None or not task.guess(ids, i) else int(logits[i].argmax())
        for i, target in enumerate(targets)
    ]
    queries = [i for i, target in enumerate(asked) if target is not None]
    found: list[Counterfactual | None] = [None] * len(ids)
    if not queries:
        return found
    variants = [(i, kind) for i in queries for kind in COUNTERFACTUALS]
    all_rows = {i: counterfactual_rows(reading, layer, i) for i in queries}
    rows = torch.stack([all_rows[i][kind] for i, kind in variants])
    inputs = task.query_inputs(ids, [i for i, _ in variants])
    looked = looked_again(checkpoint.model, inputs, layer, [i for i, _ in variants], rows, task.mask)
    chosen = torch.tensor([asked[i] for i, _ in variants])
    probabilities = F.softmax(looked, dim=-1)[torch.arange(len(variants)), chosen].tolist()
    p = {variant: probability for variant, probability in zip(variants, probabilities)}
    trained = F.softmax(logits, dim=-1)
    causal = reading.layers[layer].causal
    for i in queries:
        numbers = {"trained": trained[i, asked[i]].item(), **{kind: p[i, kind] for kind in COUNTERFACTUALS}}
        label = token_labels(checkpoint.tokenizer, [asked[i]])[0]
        found[i] = Counterfactual(**numbers, target=label, words=words(label, numbers, causal, words_of(task)))
    return found


def probability(p: float) -> str:
    """As a person reads it: 1.00, 0.43, 0.031, 0.0029, 2.1e-05."""
    return f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


def far(x: float, y: float) -> bool:
    return x >= FAR * y and x - y >= NOTABLE


def close(x: float, y: float) -> bool:
    return abs(x - y) <= max(CLOSE * max(x, y), 0.01)


def words(label: str, numbers: dict[str, float], causal: bool, right: Words) -> str:
    """What the four probabilities say, in one sentence: the first rule that holds, from the telling to the plain."""
    a, b, c, d = (probability(numbers[kind]) for kind in ("trained", *COUNTERFACTUALS))
    trained, masked, uniform, no_look = (numbers[kind] for kind in ("trained", *COUNTERFACTUALS))
    name = f"p({label!r})"
    if not causal and far(trained, masked):
        return f"{right.hiding} takes {name} from {a} to {b}: {right.read}"
    if not causal and trained - masked >= PART:
        return f"{right.hiding} takes {name} from {a} to {b}: {right.partly}"
    if not causal and far(masked, trained):
        return f"{right.hiding} raises {name} from {a} to {b}: {right.elsewhere}"
    if max(numbers.values()) < UNEXPECTED:
        highest = probability(max(numbers.values()))
        return f"{name} is at most {highest} whichever way it looks ({a} as trained): it does not expect it here"
    if close(trained, no_look):
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
