"""The lesson's numeric trace of attention for any text: each layer's raw scores, the scores the softmax is fed,
its weights and its output, computed through the reference `attention()` and nothing else.

It is the one computation behind TensorBoard's Attention tab, attend.py's printed steps and its heat map PNG, read
through the model's Probe (model/attention.py). Where threads share a model (the tab's), the caller holds the model's
lock (viewer/readings.py's read does).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from model import CAUSAL, Mask, Probe, TinyLM


@dataclass
class LayerTrace:
    """One layer on one text of T tokens: row i is query i, column j key j."""

    raw: Tensor  # (T, T) step 1, q_i . k_j
    fed: Tensor  # (T, T) steps 2 and mask: what the softmax reads (divided by sqrt(d_k) if scaled, capped), -inf masked
    weights: Tensor  # (T, T) step 3, the softmax of each row
    values: Tensor  # (T, d_v) v_j, the vectors step 4 mixes
    output: Tensor  # (T, d_v) step 4, y_i = sum_j a_ij v_j
    scale: bool  # whether this layer divides by sqrt(d_k)
    causal: bool  # whether it applies the task's mask (model.causal)
    softcap: float  # c > 0: the fed scores are c tanh(s / c)
    d_k: int  # the query and key width: the d_k of 1/sqrt(d_k)


@torch.no_grad()
def trace(model: TinyLM, ids: list[int], mask: Mask = CAUSAL) -> list[LayerTrace]:
    """Every layer's trace for the token ids (at most block_size of them) through the task's `mask`, in layer order:
    one forward with a Probe, so every layer takes the reference path, attention() step by step as the lesson writes
    it, whatever kernel the model trains with."""
    probe = Probe()
    was_training = model.training
    model.eval()
    try:
        model(torch.tensor([ids], device=next(model.parameters()).device), mask=mask, probe=probe)
    finally:
        model.train(was_training)
    traces = []
    for layer, result in zip(model.attention_layers(), probe.results):
        steps = (result.raw, result.scores, result.weights, result.values, result.output)
        flags = layer.scale, layer.causal, layer.softcap, layer.config.d_k
        traces.append(LayerTrace(*(part[0].float().cpu() for part in steps), *flags))
    return traces
