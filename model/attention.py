"""Single-head self-attention, step by step as in the lesson: score, scale, mask, softmax, weighted sum."""

import math
from collections.abc import Callable
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.config import ModelConfig, QKInit


class AttentionResult(NamedTuple):
    output: Tensor  # (..., T, d_v): the weighted sums of the values
    weights: Tensor  # (..., T, T): row i is query i's distribution over the keys
    scores: Tensor  # (..., T, T): what the softmax was fed: the scaled (and capped) scores; the mask value where masked


Reweigh = Callable[[Tensor], Tensor]  # weights (..., T, T) -> the weights to mix the values with instead


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: bool = True,
    causal: bool = True,
    softcap: float = 0.0,
    mask_value: float = -math.inf,
    reweigh: Optional[Reweigh] = None,
) -> AttentionResult:
    """softmax(q k^T / sqrt(d_k)) v for q, k of shape (..., T, d_k) and v of shape (..., T, d_v).

    The reference path: besides the output it returns the weights and scores that the diagnostics read.
    A positive `softcap` c squashes the scaled scores into (-c, c) before the mask (Gemma 2); 0 leaves them.
    `mask_value` is what the mask writes over the future keys' scores: minus infinity, the lesson's (exactly zero
    weight), or a finite stand-in such as minGPT's -1e4, which replaces those scores (an allowed score below it
    loses to the future). `reweigh` asks what the output would be had the queries looked elsewhere: the values are
    mixed with reweigh(weights), and those weights are returned.
    """
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)  # score: q_i . k_j for every pair
    if scale:
        scores = scores / math.sqrt(d_k)  # scale: keep the spread of the scores independent of d_k
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)  # cap: near-linear for small scores, never beyond c
    if causal:
        future = future_keys(scores.size(-1), scores.device)
        scores = scores.masked_fill(future, mask_value)  # mask: keys j > i get -inf, zero weight (or a finite stand-in)
    weights = F.softmax(scores, dim=-1)  # softmax over the keys
    if reweigh is not None:
        weights = reweigh(weights)  # a counterfactual look: other weights, the same values
    return AttentionResult(weights @ v, weights, scores)  # weighted sum of the values


def future_keys(T: int, device: torch.device) -> Tensor:
    """(T, T), true where key j comes after query i (j > i): the upper triangle the causal mask hides."""
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(diagonal=1)


class MaskReading(NamedTuple):
    """What the mask let through in a training forward pass, read while it happens (the reference path)."""

    future_mass: Tensor  # mean over query rows of the weight on keys j > i: exactly 0 under a mask of minus infinity
    allowed_min: Tensor  # the smallest score the softmax was fed at an allowed key j <= i


@torch.no_grad()
def read_mask(result: AttentionResult) -> MaskReading:
    future = future_keys(result.scores.size(-1), result.scores.device)
    future_mass = result.weights.masked_fill(~future, 0).sum(-1).mean()
    return MaskReading(future_mass, result.scores.masked_fill(future, math.inf).amin())


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
        self.scale, self.causal, self.softcap = config.scale, config.causal, config.softcap  # what attention() reads
        self.mask_value = mask_value(config)
        self.qk_init, self.fused = config.qk_init, config.fused
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
        self,
        x: Tensor,
        *,
        causal: bool | None = None,
        capture: list[AttentionResult] | None = None,
        reweigh: Optional[Reweigh] = None,
    ) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model).

        `causal` overrides the layer's own setting: True forces the true mask on (minus infinity, whatever the
        layer's mask_value), False takes it off. Given a `capture` list, the layer takes the reference path (the
        fused kernel returns no weights) and appends its AttentionResult to it; given `reweigh`, the reference path
        mixes the values with reweigh(weights) (see attention()). A training forward pass on the reference path
        keeps what its mask let through in `reading`.
        """
        mask = self.mask_value if causal is None else -math.inf
        causal = self.causal if causal is None else causal
        q, k, v = self.project(x)
        finite_mask = causal and mask > -math.inf
        # the fused kernel can neither cap, capture nor reweigh, and its is_causal mask is minus infinity
        if capture is not None or reweigh is not None or not self.fused or self.softcap or finite_mask:
            result = attention(
                q, k, v, scale=self.scale, causal=causal, softcap=self.softcap, mask_value=mask, reweigh=reweigh
            )
            if capture is not None:
                capture.append(result)
            if causal and self.training and torch.is_grad_enabled():
                self.reading = read_mask(result)
            return self.W_O(result.output)
        # The fused kernel, on views (B, 1 head, T, d) of the projection: scale=1.0 switches the division off.
        # Its CPU flash path wants d_k == d_v; otherwise it takes its math path, which up to block 256 takes
        # 0.6-0.9x the time of zero-padding q, k, v to one width for the flash path (at 1024, up to 1.8x).
        scale = 1 / math.sqrt(q.size(-1)) if self.scale else 1.0
        y = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=causal, scale=scale)
        return self.W_O(y[:, 0])

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v of x, each with its own W but in one matmul against W^Q, W^K, W^V stacked; q and k normed.
        Without projections, x itself three times."""
        if not self.projections:
            return x, x, x
        weight = torch.cat([self.W_Q.weight, self.W_K.weight, self.W_V.weight])
        d_k, d_v = self.W_Q.out_features, self.W_V.out_features
        q, k, v = F.linear(x, weight).split([d_k, d_k, d_v], dim=-1)  # views of one (B, T, 2 d_k + d_v) product
        return self.q_norm(q), self.k_norm(k), v


def mask_value(config: ModelConfig) -> float:
    """The score the mask writes over future keys: model.mask_value, null meaning minus infinity."""
    return -math.inf if config.mask_value is None else config.mask_value
