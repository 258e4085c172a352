"""The single-head attention language model of the lesson."""

from model.attention import AttentionResult, Probe, SingleHeadSelfAttention, attention, reference_path
from model.config import Mixer, ModelConfig, Positions, QKInit
from model.mask import CAUSAL, Mask, future_keys, mask_value
from model.softmax_jacobian import softmax_jacobian_norm
from model.statistics import MaskReading
from model.tinylm import (
    TinyLM,
    model_problems,
    parameters_of,
    reads_only_the_past,
    stores_scores,
)

__all__ = [
    "CAUSAL",
    "AttentionResult",
    "Mask",
    "MaskReading",
    "Mixer",
    "ModelConfig",
    "Positions",
    "Probe",
    "QKInit",
    "SingleHeadSelfAttention",
    "TinyLM",
    "attention",
    "future_keys",
    "mask_value",
    "model_problems",
    "parameters_of",
    "reads_only_the_past",
    "reference_path",
    "softmax_jacobian_norm",
    "stores_scores",
]
