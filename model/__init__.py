"""The single-head attention language model of the lesson."""

from model.attention import AttentionResult, MaskReading, SingleHeadSelfAttention, attention
from model.config import Mixer, ModelConfig, QKInit
from model.softmax_jacobian import softmax_jacobian_norm
from model.tinylm import (
    TinyLM,
    model_problems,
    parameters_of,
    reads_only_the_past,
    stores_scores,
)

__all__ = [
    "AttentionResult",
    "MaskReading",
    "Mixer",
    "ModelConfig",
    "QKInit",
    "SingleHeadSelfAttention",
    "TinyLM",
    "attention",
    "model_problems",
    "parameters_of",
    "reads_only_the_past",
    "softmax_jacobian_norm",
    "stores_scores",
]
