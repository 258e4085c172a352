"""Helpers of the training loop in train.py: config schema, optimizer, evaluation, device, TensorBoard."""

from trainer.config import ConfigError, OptimConfig, TrainConfig, TrainerConfig, register_schema, to_train_config
from trainer.device import allow_tf32, pick_device
from trainer.diagnostics import log_attention, log_grad_norms, probe_windows
from trainer.evaluate import estimate_loss
from trainer.optim import learning_rate, make_optimizer
from trainer.step import Precision, autocast, train_step
from trainer.tensorboard_log import log_hparams, log_sample

__all__ = [
    "ConfigError",
    "OptimConfig",
    "Precision",
    "TrainConfig",
    "TrainerConfig",
    "allow_tf32",
    "autocast",
    "estimate_loss",
    "learning_rate",
    "log_attention",
    "log_grad_norms",
    "log_hparams",
    "log_sample",
    "make_optimizer",
    "pick_device",
    "probe_windows",
    "register_schema",
    "to_train_config",
    "train_step",
]
