"""Single-head self-attention, step by step as in the lesson: score, scale, mask, softmax, weighted sum."""

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.config import ModelConfig, QKInit
from model.mask import CAUSAL, Mask, mask_value
from model.statistics import MaskReading, read_mask


class AttentionResult(NamedTuple):
    output: Tensor  # (..., T, d_v): the weighted sums of the values
    weights: Tensor  # (..., T, T): row i is query i's distribution over the keys
    scores: Tensor  # (..., T, T): what the softmax was fed: the scaled (and capped) scores; the mask value where masked
    raw: Tensor  # (..., T, T): step 1 alone, q_i . k_j
    values: Tensor  # (..., T, d_v): the v_j the weighted sum mixes


Reweigh = Callable[[Tensor], Tensor]  # weights (..., T, T) -> the weights to mix the values with instead


@dataclass
class Probe:
    """The one way to see inside the attention of a forward pass: given to TinyLM's forward, every attention layer
    takes the reference path and appends its AttentionResult to `results`, in layer order; a layer whose index
    `reweigh` holds mixes its values with reweigh[layer](weights) instead of its own weights (a counterfactual look)."""

    reweigh: dict[int, Reweigh] = field(default_factory=dict)
    results: list[AttentionResult] = field(default_factory=list)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, **settings) -> AttentionResult:
        """attention() for the next layer (layers call in order, so the results so far number its index), kept."""
        result = attention(q, k, v, reweigh=self.reweigh.get(len(self.results)), **settings)
        self.results.append(result)
        return result


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: bool = True,
    causal: bool = True,
    mask: Mask = CAUSAL,
    softcap: float = 0.0,
    mask_value: float = -math.inf,
    reweigh: Optional[Reweigh] = None,
) -> AttentionResult:
    """softmax(q k^T / sqrt(d_k)) v for q, k of shape (..., T, d_k) and v of shape (..., T, d_v).

    The reference path: besides the output it returns the weights and scores that the diagnostics read.
    A positive `softcap` c squashes the scaled scores into (-c, c) before the mask (Gemma 2); 0 leaves them.
    `causal` applies `mask` (the task's: which keys each query may not see, the triangle j > i by default); false,
    every query sees every key. `mask_value` is what the mask writes over the hidden keys' scores: minus infinity,
    the lesson's (exactly zero weight), or a finite stand-in such as Hugging Face GPT-2's -1e4, which replaces those
    scores (an allowed score below it loses to a hidden key). `reweigh` asks what the output would be had the
    queries looked elsewhere: the values are mixed with reweigh(weights), and those weights are returned.
    """
    d_k = q.size(-1)
    scores = raw = q @ k.transpose(-2, -1)  # score: q_i . k_j for every pair
    if scale:
        scores = scores / math.sqrt(d_k)  # scale: keep the spread of the scores independent of d_k
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)  # cap: near-linear for small scores, never beyond c
    if causal:
        hidden = mask.hidden_keys(scores.size(-1), scores.device)
        scores = scores.masked_fill(hidden, mask_value)  # mask: hidden keys (j > i) get -inf, zero weight
    weights = F.softmax(scores, dim=-1)  # softmax over the keys
    if reweigh is not None:
        weights = reweigh(weights)  # a counterfactual look: other weights, the same values
    return AttentionResult(weights @ v, weights, scores, raw, v)  # weighted sum of the values


class SingleHeadSelfAttention(nn.Module):
    """The lesson's layer, built from the model's settings (ModelConfig): W^Q, W^K, W^V project x into q, k, v,
    attention() mixes the values, W^O maps the mix back to d_model. Without projections (config.projections false)
    q = k = v = x: the lesson's first equation, scores x_i . x_j, the x_j themselves mixed, and no W^O."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        d_model, d_k, d_v = config.d_model, config.d_k, config.d_v
        self.projections = config.projections
        if self.projections:
            self.W_Q = nn.Linear(d_model, d_k, bias=False)
            self.W_K = nn.Linear(d_model, d_k, bias=False)
            self.W_V = nn.Linear(d_model, d_v, bias=False)
        self.W_O = nn.Linear(d_v, d_model, bias=False) if self.projections else nn.Identity()
        # qk_norm: each q and k LayerNormed over its d_k features, so |q . k| <= d_k times the gains however large
        # W^Q and W^K grow. No bias: a key bias b would add q_i . b to all of row i's scores, which the softmax ignores.
        qk_norm = config.qk_norm and self.projections
        self.q_norm, self.k_norm = (nn.LayerNorm(d_k, bias=False) if qk_norm else nn.Identity() for _ in range(2))
        self.config = config
        self.scale, self.causal, self.softcap = config.scale, config.causal, config.softcap  # what attention() reads
        self.mask_value = mask_value(config)
        self.qk_init = config.qk_init
        self.reading: Optional[MaskReading] = None  # the last training forward pass's, on the reference path
        self.reset_qk()

    def reset_qk(self) -> None:
        for W in (self.W_Q, self.W_K) if self.projections else ():
            if self.qk_init is QKInit.unit:
                nn.init.normal_(W.weight, std=W.in_features**-0.5)
            elif self.qk_init is QKInit.gpt2:
                nn.init.normal_(W.weight, std=0.02)
            else:
                W.reset_parameters()

    def forward(
        self, x: Tensor, *, mask: Mask = CAUSAL, causal: bool | None = None, probe: Optional[Probe] = None
    ) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model), each query reading the keys `mask` (the task's) leaves it.

        `causal` overrides the layer's own setting (model.causal), whether it applies the mask: True forces it on
        (minus infinity, whatever the layer's mask_value), False takes it off. Given a `probe`, the layer takes the
        reference path (the fused kernel returns no weights) and keeps its AttentionResult there. A training forward
        pass on the reference path keeps what its mask let through in `reading`.
        """
        value = self.mask_value if causal is None else -math.inf
        causal = self.causal if causal is None else causal
        q, k, v = self.project(x)
        if probe is None and not reference_path(self.config, causal, value):
            # The fused kernel, on views (B, 1 head, T, d) of the projection: scale=1.0 switches the division off.
            # Its CPU flash path wants d_k == d_v; otherwise it takes its math path, which at tinylm's block sizes
            # is faster than zero-padding q, k, v to one width (docs/benchmark.md). The triangle is its is_causal
            # fast path; any other mask goes in as attn_mask (true: may attend), the two never together.
            scale = 1 / math.sqrt(q.size(-1)) if self.scale else 1.0
            is_causal, allowed = causal and mask.triangle, None
            if causal and not mask.triangle:
                allowed = ~mask.hidden_keys(x.size(1), x.device)
            y = F.scaled_dot_product_attention(
                q[:, None], k[:, None], v[:, None], attn_mask=allowed, is_causal=is_causal, scale=scale
            )
            return self.W_O(y[:, 0])
        settings = {"scale": self.scale, "causal": causal, "mask": mask, "softcap": self.softcap, "mask_value": value}
        result = probe.attend(q, k, v, **settings) if probe is not None else attention(q, k, v, **settings)
        if causal and self.training and torch.is_grad_enabled():
            self.reading = read_mask(result, mask.hidden_keys(x.size(1), x.device))
        return self.W_O(result.output)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v of x, each with its own W but in one matmul against W^Q, W^K, W^V stacked; q and k normed.
        Without projections, x itself three times."""
        if not self.projections:
            return x, x, x
        weight = torch.cat([self.W_Q.weight, self.W_K.weight, self.W_V.weight])
        d_k, d_v = self.W_Q.out_features, self.W_V.out_features
        q, k, v = F.linear(x, weight).split([d_k, d_k, d_v], dim=-1)  # views of one (B, T, 2 d_k + d_v) product
        return self.q_norm(q), self.k_norm(k), v


def reference_path(config: ModelConfig, causal: bool | None = None, mask: float | None = None) -> str:
    """Why attention with these settings takes the reference path rather than the fused kernel
    (F.scaled_dot_product_attention), which can neither cap scores nor write a finite mask value; '' where the kernel
    serves. `causal` and `mask` are a forward's own (None: the settings')."""
    causal = config.causal if causal is None else causal
    mask = mask_value(config) if mask is None else mask
    path = "training takes the reference path"
    if not config.fused:
        return f"model.fused=false: {path}"
    if config.softcap:
        return f"model.softcap={config.softcap:g}: the fused attention kernel cannot cap scores; {path}"
    if causal and mask > -math.inf:
        return (
            f"model.mask_value={config.mask_value:g}: the fused kernel's causal mask is minus infinity; {path}, which "
            "writes this value over the future keys' scores"
        )
    return ""
