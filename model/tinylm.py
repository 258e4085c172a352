"""TinyLM: embeddings, n_layer pre-LayerNorm blocks of single-head self-attention (+ MLP), an LM head.

The blocks can mix the positions with a recurrent layer instead (model.mixer=gru or lstm): the lesson's
alternative, with the same embeddings, MLP and head around it.
"""

import logging
import math
from dataclasses import replace
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from model.attention import Probe, SingleHeadSelfAttention, reference_path
from model.config import Mixer, ModelConfig, Positions
from model.mask import CAUSAL, Mask, mask_value

log = logging.getLogger(__name__)


def model_problems(config: ModelConfig) -> list[str]:
    """The settings of `config` that cannot work (together), one line each naming the setting: trainer/config.py's
    checks call this beside their own."""
    problems = []
    mask = mask_value(config)
    if math.isnan(mask) or mask >= 0:
        problems.append(
            f"model.mask_value={config.mask_value}: must be negative: null or -inf (the true mask), or e.g. -1e4"
        )
    if not config.projections:
        problems += [
            f"model.{key}={getattr(config, key)}: must equal model.d_model={config.d_model} without projections "
            "(model.projections=false): q, k and v are x itself"
            for key in ("d_k", "d_v")
            if getattr(config, key) != config.d_model
        ]
        if config.qk_norm:
            problems.append("model.qk_norm=True: needs the projections; without them q = k = x, already layer-normed")
    if config.mixer is not Mixer.attention:
        attention_only = {
            "causal": not config.causal,  # a recurrent layer reads only the past, however this is set
            "mask_value": mask > -math.inf,
            "projections": not config.projections,
            "qk_norm": config.qk_norm,
            "softcap": config.softcap != 0,
        }
        problems += [
            f"model.{key}={getattr(config, key)}: applies to attention only, not to model.mixer={config.mixer.value}"
            for key, set_here in attention_only.items()
            if set_here
        ]
    return problems


def stores_scores(config: ModelConfig) -> bool:
    """Whether training keeps every layer's (T, T) scores and weights: the reference path, which a finite mask, the
    softcap or model.fused=false take; the fused kernel keeps none, nor does a recurrent layer."""
    return config.mixer is Mixer.attention and bool(reference_path(config))


def reads_only_the_past(config: ModelConfig) -> bool:
    """Whether the model's own forward pass hides what the task's mask hides, exactly, so that the loss with the true
    mask forced on (val/loss_causal) is its loss itself: a recurrent model, or attention masked with minus infinity."""
    return config.mixer is not Mixer.attention or (config.causal and mask_value(config) == -math.inf)


class MLP(nn.Sequential):
    def __init__(self, config: ModelConfig):
        super().__init__(
            nn.Linear(config.d_model, 4 * config.d_model),
            nn.GELU(),
            nn.Linear(4 * config.d_model, config.d_model),
            nn.Dropout(config.dropout),
        )


class Recurrence(nn.Module):
    """A GRU or LSTM of width d_model over the sequence, in the attention layer's place: h_t = f(x_t, h_{t-1}), so
    position t reads position t - d through d steps of the recurrence, and step t waits for step t - 1."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        layer = nn.GRU if config.mixer is Mixer.gru else nn.LSTM
        self.rnn = layer(config.d_model, config.d_model, batch_first=True)  # PyTorch's own init

    def forward(self, x: Tensor) -> Tensor:
        return self.rnn(x)[0]  # every position's hidden state h_t, (B, T, d_model)


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.d_model)  # before the mixer, attention or recurrence
        attends = config.mixer is Mixer.attention
        self.attn = SingleHeadSelfAttention(config) if attends else None
        self.recurrence = None if attends else Recurrence(config)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.ln_mlp = nn.LayerNorm(config.d_model) if config.mlp else None
        self.mlp = MLP(config) if config.mlp else None

    def forward(self, x: Tensor, mask: Mask, causal: Optional[bool] = None, probe: Optional[Probe] = None) -> Tensor:
        """`mask`, `causal` and `probe` as in TinyLM.forward; a recurrent block reads only the past, probed by none."""
        h = self.ln_attn(x)
        mixed = self.recurrence(h) if self.attn is None else self.attn(h, mask=mask, causal=causal, probe=probe)
        x = x + self.attn_dropout(mixed)
        if self.mlp is not None:
            x = x + self.mlp(self.ln_mlp(x))
        return x


class TinyLM(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.vocab_size is None:
            raise ValueError("ModelConfig.vocab_size is not set (it comes from the tokenizer)")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        learned = config.positions is Positions.learned
        self.position_embedding = nn.Embedding(config.block_size, config.d_model) if learned else None
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(gpt2_init)  # GPT-2 style everywhere, then W^Q and W^K back to what qk_init says
        for layer in self.attention_layers():
            layer.reset_qk()
        if not self.lm_head.weight.is_meta:  # a model built on the meta device only counts parameters
            for note in notes(self):
                log.info(note)

    def attention_layers(self) -> list[SingleHeadSelfAttention]:
        """Each block's attention layer, in order: none in a recurrent model."""
        return [block.attn for block in self.blocks if block.attn is not None]

    def forward(
        self, idx: Tensor, *, mask: Mask = CAUSAL, causal: Optional[bool] = None, probe: Optional[Probe] = None
    ) -> Tensor:
        """Token ids (B, T) -> logits (B, T, vocab_size): what each position predicts (the task says of what; the
        loss is the task's, task/loss.py).

        `mask` is the task's (task.mask), given beside the batch: which keys each query may not see. The model
        applies it where config.causal says; `causal` overrides that: a model trained without the mask (or with a
        finite one), evaluated with the true mask (causal=True: minus infinity), can no longer read what it hides.
        Given a `probe`, every attention layer keeps its internals there (model/attention.py's Probe).
        """
        x = self.token_embedding(idx)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(idx.size(1), device=idx.device))
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x, mask, causal, probe)
        return self.lm_head(self.ln_f(x))

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: Optional[int] = None,
        generator: Optional[torch.Generator] = None,
        mask: Mask = CAUSAL,
    ) -> Tensor:
        """Extend idx (B, T) by max_new_tokens sampled tokens, reading at most block_size tokens of context through
        the task's `mask`."""
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.config.block_size :], mask=mask)[:, -1] / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            next_token = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
            idx = torch.cat([idx, next_token], dim=1)
        return idx


class Uninitialised(TorchFunctionMode):
    """torch.nn.init's functions leave their tensor as it is: on the meta device there are no values to set, and
    there normal_ runs PyTorch's Python reference, which imports torch's compiler."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))


def parameters_of(config: ModelConfig) -> int:
    """The parameters of a TinyLM with these settings, counted on the meta device (no memory): one layer built
    whole, the others as many times one block, so a huge n_layer costs no time either. OverflowError for a size
    no tensor can have."""
    with torch.device("meta"), Uninitialised():
        try:
            one_layer = sum(p.numel() for p in TinyLM(replace(config, n_layer=1)).parameters())
            block = sum(p.numel() for p in Block(config).parameters())
        except (RuntimeError, TypeError) as error:  # a tensor past 2**63 bytes: torch cannot even describe it
            raise OverflowError(str(error)) from None
    return one_layer + (config.n_layer - 1) * block


def notes(model: TinyLM) -> list[str]:
    """What a run's log says of the model beyond its settings: which path trains, what the mixer costs."""
    config, lines = model.config, []
    if config.fused and config.mixer is Mixer.attention and (reason := reference_path(config)):
        lines.append(reason)  # the fused kernel was asked for
    if config.mixer is not Mixer.attention:
        own = sum(p.numel() for p in model.parameters())
        attending = parameters_of(replace(config, mixer=Mixer.attention))
        lines.append(
            f"model.mixer={config.mixer.value}: {own:,} parameters; with attention in its place "
            f"(model.mixer=attention) {attending:,}"
        )
    return lines


def gpt2_init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
