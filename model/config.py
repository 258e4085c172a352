"""The model's settings, configs/model/tinylm.yaml's schema: ModelConfig, and the choices three of them take. The layer
(attention.py) and the model (tinylm.py) are both built from it whole."""

from dataclasses import dataclass
from enum import Enum
from typing import Optional


class QKInit(Enum):
    """How W^Q and W^K start, which decides whether unscaled scores saturate the softmax."""

    unit = "unit"  # N(0, 1/d_model): unit-variance q and k on layer-normed inputs, the lesson's premise
    gpt2 = "gpt2"  # N(0, 0.02^2): small scores at small width, so saturation barely shows
    torch = "torch"  # PyTorch's nn.Linear default, uniform(-1/sqrt(d_model), 1/sqrt(d_model))


class Positions(Enum):
    """How the model tells the positions apart, the word order."""

    learned = "learned"  # an embedding per position, added to the token's (GPT-2's)
    none = "none"  # none: only a mask can tell a position how many tokens precede it (Haviv et al. 2022)


class Mixer(Enum):
    """What mixes the positions in each block."""

    attention = "attention"  # the lesson's single-head self-attention: every pair one hop apart
    gru = "gru"  # torch.nn.GRU of width d_model: position t reads the past through h_{t-1}
    lstm = "lstm"  # torch.nn.LSTM of width d_model, likewise, with its gated cell


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
    # Apply the task's mask (task/: the causal triangle, j <= i, or a prefix LM's); false: every query sees every key
    causal: bool = True
    qk_init: QKInit = QKInit.unit
    fused: bool = True  # train through F.scaled_dot_product_attention; false: the explicit reference path
    qk_norm: bool = False  # LayerNorm q and k over their d_k features: bounds the scores whatever W^Q, W^K become
    softcap: float = 0.0  # c > 0: scores become c tanh(s / c) before the mask (Gemma 2); takes the reference path
    # What the mask writes over the hidden keys' scores: null (or -inf) is minus infinity, exactly zero weight; a finite
    # number (-1e4, Hugging Face GPT-2's masked_bias; minGPT masks with minus infinity) replaces those scores, as that
    # GPT-2 code did, and takes the reference path.
    mask_value: Optional[float] = None
    projections: bool = True  # W^Q, W^K, W^V and W^O; false: q = k = v = x, the weighted sum of the x_j themselves
    mixer: Mixer = Mixer.attention  # gru or lstm: a recurrent layer in attention's place, the rest as it is
    positions: Positions = Positions.learned  # none: no position embedding, the tokens alone
