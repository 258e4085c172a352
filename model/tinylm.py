"""TinyLM: embeddings, n_layer pre-LayerNorm blocks of single-head self-attention (+ MLP), an LM head."""

import logging
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.attention import AttentionResult, QKInit, SingleHeadSelfAttention

log = logging.getLogger(__name__)


@dataclass
class ModelConfig:
    vocab_size: Optional[int] = None  # set from the tokenizer
    block_size: int = 64  # context length in tokens
    d_model: int = 128
    d_k: int = 128  # query and key width: the d_k of 1/sqrt(d_k)
    d_v: int = 128  # value width
    n_layer: int = 1
    mlp: bool = True
    dropout: float = 0.0
    scale: bool = True  # divide the scores by sqrt(d_k)
    causal: bool = True  # mask the future: position i sees only j <= i
    qk_init: QKInit = QKInit.unit
    fused: bool = True  # train through F.scaled_dot_product_attention; false: the explicit reference path
    qk_norm: bool = False  # LayerNorm q and k over their d_k features: bounds the scores whatever W^Q, W^K become
    softcap: float = 0.0  # c > 0: scores become c tanh(s / c) before the mask (Gemma 2); takes the reference path


class MLP(nn.Sequential):
    def __init__(self, config: ModelConfig):
        super().__init__(
            nn.Linear(config.d_model, 4 * config.d_model),
            nn.GELU(),
            nn.Linear(4 * config.d_model, config.d_model),
            nn.Dropout(config.dropout),
        )


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.d_model)
        self.attn = SingleHeadSelfAttention(
            config.d_model, config.d_k, config.d_v, scale=config.scale, causal=config.causal,
            qk_init=config.qk_init, fused=config.fused, qk_norm=config.qk_norm, softcap=config.softcap,
        )  # fmt: skip
        self.attn_dropout = nn.Dropout(config.dropout)
        self.ln_mlp = nn.LayerNorm(config.d_model) if config.mlp else None
        self.mlp = MLP(config) if config.mlp else None

    def forward(
        self, x: Tensor, causal: Optional[bool] = None, capture: Optional[list[AttentionResult]] = None
    ) -> Tensor:
        x = x + self.attn_dropout(self.attn(self.ln_attn(x), causal=causal, capture=capture))
        if self.mlp is not None:
            x = x + self.mlp(self.ln_mlp(x))
        return x


class TinyLM(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.vocab_size is None:
            raise ValueError("ModelConfig.vocab_size is not set (it comes from the tokenizer)")
        self.config = config
        if config.softcap and config.fused:
            log.info(
                "model.softcap=%g: the fused attention kernel cannot cap scores; training takes the reference path",
                config.softcap,
            )
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.block_size, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(gpt2_init)  # GPT-2 style everywhere, then W^Q and W^K back to what qk_init says
        for block in self.blocks:
            block.attn.reset_qk()

    def forward(
        self,
        idx: Tensor,
        targets: Optional[Tensor] = None,
        *,
        causal: Optional[bool] = None,
        capture: Optional[list[AttentionResult]] = None,
    ) -> Tensor:
        """Token ids (B, T) -> next-token logits (B, T, vocab_size); given targets (B, T), their loss instead.

        The loss goes through forward so that DistributedDataParallel, which wraps forward, sees it.
        `causal` overrides config.causal: a model trained without the mask, evaluated with it, can no longer
        read the answer. Given a `capture` list, every layer appends its AttentionResult to it, in order.
        """
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.dropout(self.token_embedding(idx) + self.position_embedding(positions))
        for block in self.blocks:
            x = block(x, causal, capture)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # mean over tokens, nats per token

    def loss(self, idx: Tensor, targets: Tensor, *, causal: Optional[bool] = None) -> Tensor:
        """Mean cross-entropy of the next-token predictions, in nats per token; `causal` as in forward."""
        return self(idx, targets, causal=causal)

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: Optional[int] = None,
        generator: Optional[torch.Generator] = None,
    ) -> Tensor:
        """Extend idx (B, T) by max_new_tokens sampled tokens, reading at most block_size tokens of context."""
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.config.block_size :])[:, -1] / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            next_token = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
            idx = torch.cat([idx, next_token], dim=1)
        return idx


def gpt2_init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
