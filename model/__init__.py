"""The single-head attention language model of the lesson."""

from model.attention import AttentionResult, QKInit, SingleHeadSelfAttention, attention
from model.softmax_jacobian import softmax_jacobian_norm
from model.tinylm import ModelConfig, TinyLM

__all__ = [
    "AttentionResult",
    "ModelConfig",
    "QKInit",
    "SingleHeadSelfAttention",
    "TinyLM",
    "attention",
    "softmax_jacobian_norm",
]
