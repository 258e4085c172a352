"""Single-head self-attention, step by step as in the lesson: score, scale, mask, softmax, weighted sum."""

import math
from enum import Enum

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def attention(q: Tensor, k: Tensor, v: Tensor, *, scale: bool = True, causal: bool = True) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(d_k)) v for q, k of shape (..., T, d_k) and v of shape (..., T, d_v).

    The reference path: returns the output (..., T, d_v) and the attention weights (..., T, T).
    """
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)  # score: q_i . k_j for every pair
    if scale:
        scores = scores / math.sqrt(d_k)  # scale: keep the spread of the scores independent of d_k
    if causal:
        T = scores.size(-1)
        future = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))  # mask: keys j > i get exactly zero weight
    weights = F.softmax(scores, dim=-1)  # softmax over the keys
    return weights @ v, weights  # weighted sum of the values


class QKInit(Enum):
    """How W^Q and W^K start, which decides whether unscaled scores saturate the softmax."""

    unit = "unit"  # N(0, 1/d_model): unit-variance q and k on layer-normed inputs, the lesson's premise
    gpt2 = "gpt2"  # N(0, 0.02^2): small scores at small width, so saturation barely shows
    torch = "torch"  # PyTorch's nn.Linear default, uniform(-1/sqrt(d_model), 1/sqrt(d_model))


class SingleHeadSelfAttention(nn.Module):
    def __init__(
        self, d_model: int, d_k: int, d_v: int, *, scale: bool, causal: bool, qk_init: QKInit, fused: bool = True
    ):
        super().__init__()
        self.W_Q = nn.Linear(d_model, d_k, bias=False)
        self.W_K = nn.Linear(d_model, d_k, bias=False)
        self.W_V = nn.Linear(d_model, d_v, bias=False)
        self.W_O = nn.Linear(d_v, d_model, bias=False)
        self.scale, self.causal, self.qk_init, self.fused = scale, causal, qk_init, fused
        self.reset_qk()

    def reset_qk(self) -> None:
        for W in (self.W_Q, self.W_K):
            if self.qk_init is QKInit.unit:
                nn.init.normal_(W.weight, std=W.in_features**-0.5)
            elif self.qk_init is QKInit.gpt2:
                nn.init.normal_(W.weight, std=0.02)
            else:
                W.reset_parameters()

    def forward(self, x: Tensor, return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """x (B, T, d_model) -> (B, T, d_model); with return_weights, also the weights (B, T, T)."""
        q, k, v = self.W_Q(x), self.W_K(x), self.W_V(x)
        if return_weights or not self.fused:  # the reference path; the fused kernel does not return weights
            y, weights = attention(q, k, v, scale=self.scale, causal=self.causal)
            return (self.W_O(y), weights) if return_weights else self.W_O(y)
        # The fused kernel: scale=1.0 switches the division off. Its CPU flash path wants one width for
        # q, k and v, so the narrower side gets zero columns, which change no dot product and no sum.
        scale = 1 / math.sqrt(q.size(-1)) if self.scale else 1.0
        d_v, width = v.size(-1), max(q.size(-1), v.size(-1))
        q, k, v = (F.pad(t, (0, width - t.size(-1)))[:, None] for t in (q, k, v))  # (B, 1 head, T, width)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, scale=scale)
        return self.W_O(y[:, 0, :, :d_v])
