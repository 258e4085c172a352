"""The single-head attention language model of the lesson."""

from model.attention import QKInit, SingleHeadSelfAttention, attention
from model.tinylm import ModelConfig, TinyLM

__all__ = ["ModelConfig", "QKInit", "SingleHeadSelfAttention", "TinyLM", "attention"]
