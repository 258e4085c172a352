"""The lesson's numeric trace of attention for any text: each layer's raw scores, the scores the softmax is fed,
its weights and its output, computed through the reference `attention()` and nothing else.

It is the one computation behind TensorBoard's Attention tab, attend.py's printed steps and its heat map PNG. Its
hooks sit on the model itself: where threads share a model (the tab's), the caller holds the model's lock
(viewer/readings.py's read does), as for any forward while hooks are on.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from model.attention import attention
from model.tinylm import TinyLM


@dataclass
class LayerTrace:
    """One layer on one text of T tokens: row i is query i, column j key j."""

    raw: Tensor  # (T, T) step 1, q_i . k_j
    fed: Tensor  # (T, T) steps 2 and mask: what the softmax reads (divided by sqrt(d_k) if scaled, capped), -inf masked
    weights: Tensor  # (T, T) step 3, the softmax of each row
    values: Tensor  # (T, d_v) v_j, the vectors step 4 mixes
    output: Tensor  # (T, d_v) step 4, y_i = sum_j a_ij v_j
    scale: bool  # whether this layer divides by sqrt(d_k)
    causal: bool  # whether it masks the future
    softcap: float  # c > 0: the fed scores are c tanh(s / c)
    d_k: int  # the query and key width: the d_k of 1/sqrt(d_k)


def trace(model: TinyLM, ids: list[int]) -> list[LayerTrace]:
    """Every layer's trace for the token ids (at most block_size of them), in layer order."""
    return trace_forward(model, ids)[0]


@torch.no_grad()
def trace_forward(model: TinyLM, ids: list[int]) -> tuple[list[LayerTrace], Tensor]:
    """Every layer's trace for the token ids, and the (T, vocab_size) logits of the forward it was read from.

    Each layer's attention input is captured by a forward pre-hook as the model runs, then its q, k, v are projected
    again and passed through `attention()`: the same equation the lesson writes, whatever kernel the model trains with.
    The logits are the model's own forward's, as trained: the first loss strip reads them.
    """
    inputs: list[Tensor] = []
    hooks = [block.attn.register_forward_pre_hook(lambda _, args: inputs.append(args[0])) for block in model.blocks]
    was_training = model.training
    model.eval()
    try:
        logits = model(torch.tensor([ids], device=next(model.parameters()).device))[0].float().cpu()
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    traces = []
    for block, x in zip(model.blocks, inputs):
        layer = block.attn
        q, k, v = (part[0].float().cpu() for part in layer.project(x))
        settings = {"scale": layer.scale, "causal": layer.causal, "softcap": layer.softcap}
        result = attention(q, k, v, **settings, mask_value=layer.mask_value)  # the value this run's mask writes
        raw = q @ k.T  # step 1 on its own: attention() returns the scores after scaling and the mask
        flags = layer.scale, layer.causal, layer.softcap, q.size(-1)
        traces.append(LayerTrace(raw, result.scores, result.weights, v, result.output, *flags))
    return traces, logits
