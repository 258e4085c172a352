"""AdamW with linear warmup and cosine decay, as in nanoGPT."""

import math

import torch
from torch import nn

from trainer.config import OptimConfig


def make_optimizer(model: nn.Module, config: OptimConfig) -> torch.optim.AdamW:
    # Decay matrices and embeddings; leave biases and LayerNorm gains alone.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2))


def learning_rate(step: int, config: OptimConfig, max_steps: int) -> float:
    """The learning rate of optimizer step `step` (1 to max_steps): a linear rise to lr, then a cosine to min_lr.
    A warmup longer than the run is cut to the run, so the rise still ends at lr."""
    warmup_steps = min(config.warmup_steps, max_steps)
    if step <= warmup_steps:
        return config.lr * step / warmup_steps
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))
