"""The structured config schema: every key and type of configs/ is declared here and checked by Hydra."""

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from data import DataConfig, TokenizerConfig
from model import ModelConfig


class ConfigError(Exception):
    """A setting that cannot work; the message names the setting."""


@dataclass
class OptimConfig:
    lr: float = 3e-3  # peak learning rate, reached after warmup
    min_lr: float = 3e-4  # the cosine decay ends here, at trainer.max_steps
    warmup_steps: int = 100
    weight_decay: float = 0.1  # on weight matrices and embeddings only
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # max global gradient norm; 0 switches clipping off


@dataclass
class TrainerConfig:
    max_steps: int = 3000
    batch_size: int = 32
    eval_interval: int = 500  # evaluate both splits every this many steps (and at the first and last)
    eval_iters: int = 40  # batches per split and evaluation
    log_interval: int = 50  # train/loss, train/lr and perf/tokens_per_sec every this many steps
    seed: int = 1337
    device: str = "auto"  # auto picks cuda, then mps, then cpu
    sample_tokens: int = 500  # generated at the end, into the log and TensorBoard


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)


def register_schema() -> None:
    """Make the schema available as `train_schema`, the first entry of configs/train.yaml's defaults."""
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)


def to_train_config(cfg: DictConfig) -> TrainConfig:
    """The composed config as typed objects, with every value resolved."""
    try:
        return OmegaConf.to_object(cfg)
    except OmegaConfBaseException as error:  # e.g. a mandatory value (???) left unset
        key = getattr(error, "full_key", None)
        raise ConfigError(f"{key}: {error.msg}" if key else str(error)) from error
