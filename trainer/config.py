"""The structured config schema of configs/: TrainConfig gathers each group's dataclass (ModelConfig from
model/, DataConfig and TokenizerConfig from data/, OptimConfig and TrainerConfig here), so Hydra checks
every key and type; check_values then checks the ranges. Whether the sizes fit the machine is trainer/memory.py's
check_memory, which train.py calls next: the settings know nothing of the machine."""

import functools
import logging
import math
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from operator import attrgetter
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from data import DataConfig, TokenizerConfig, TokenizerKind
from data.sources import data_problems
from model import ModelConfig
from model.tinylm import model_problems
from task import TASKS, TaskConfig, task_problems

log = logging.getLogger("tinylm")


class ConfigError(Exception):
    """A setting that cannot work; the message names the setting."""


class Precision(Enum):
    fp32 = "fp32"
    bf16 = "bf16"  # autocast to bfloat16 for matmuls; weights and optimizer state stay float32
    fp16 = "fp16"  # autocast to float16, with loss scaling against underflowing gradients (for GPUs without bf16)


class Objective(Enum):
    honest = "honest"  # the task's loss with its targets hidden (next_token: val/loss_causal): a leak cannot fake it
    val_causal = "honest"  # the name it had before tasks: the same setting
    val = "val"  # val/loss: near 0 for a leaky model, so a search minimising it picks model.causal=false


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
    grad_accum_steps: int = 1  # the batch goes through in this many equal parts: the same gradients, less memory
    eval_interval: int = 500  # evaluate both splits every this many steps (and at the first and last)
    eval_iters: int = 40  # batches per split and evaluation
    log_interval: int = 50  # train/loss, train/lr and perf/tokens_per_sec every this many steps
    seed: int = 1337
    device: str = "auto"  # auto picks cuda, then mps, then cpu
    sample_tokens: int = 500  # generated at every evaluation into TensorBoard, and at the end into the log
    precision: Precision = Precision.fp32  # bf16: autocast matmuls to bfloat16 (for GPUs that have it)
    compile: bool = False  # torch.compile the model: slower start, faster steps on a GPU
    ckpt_interval: int = 500  # write last.pt every this many steps (and at the end); best.pt at each new best val loss
    keep_checkpoints: int = 8  # earlier checkpoints kept to look back at (weights only, RUN/steps/); 0 keeps none
    resume: Optional[str] = None  # a run directory or checkpoint file to continue, in its own directory
    start_over: bool = False  # a fresh run in a directory that holds a run: move that run into RUN/earlier-DATE_TIME
    objective: Objective = Objective.honest  # what main returns to a sweeper (Optuna) to minimise


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)


def objective_key(config: TrainConfig) -> str:
    """The evaluation's loss that trainer.objective names: the task's honest curve, or val."""
    if config.trainer.objective is Objective.val:
        return "val"
    return TASKS[config.task.name].honest


def register_schema() -> None:
    """Make the schema available as `train_schema`, the first entry of configs/train.yaml's defaults."""
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)


def to_train_config(cfg: DictConfig) -> TrainConfig:
    """The composed config as typed objects, every key, type and value checked; raises ConfigError."""
    config = to_typed(TrainConfig, OmegaConf.to_container(cfg))
    check_values(config)
    return config


def plain_config(config: object) -> dict:
    """The settings as plain dicts, numbers and strings: what a checkpoint (weights_only) and the HParams tab hold.
    A walk over the dataclasses: OmegaConf.structured would check every value again at each checkpoint."""
    return {setting.name: plain_value(getattr(config, setting.name)) for setting in fields(config)}


def plain_value(value: object) -> object:
    if is_dataclass(value):
        return plain_config(value)
    return value.name if isinstance(value, Enum) else value


def to_typed(schema: type, values: dict) -> object:
    """Plain `values` merged into the dataclass `schema` and built; a ConfigError names a key or type it refuses."""
    try:
        # Hydra lets keys added with "+" through; merging the plain values into the schema catches them.
        return OmegaConf.to_object(OmegaConf.merge(structured(schema), values))
    except OmegaConfBaseException as error:
        raise ConfigError(typed_problem(error)) from error


def typed_problem(error: OmegaConfBaseException) -> str:
    """The key and the problem of a value OmegaConf refuses for its schema, in one line."""
    problem = str(error.msg).splitlines()[0]  # the lines after it repeat the key and the schema's type
    return f"{error.full_key}: {problem}" if error.full_key else problem


@functools.cache
def structured(schema: type) -> DictConfig:
    """The dataclass `schema` as OmegaConf's typed config, built once per process (building it walks every field and
    its type, and every app start and checkpoint read calls to_typed): OmegaConf.merge copies it, never changes it."""
    return OmegaConf.structured(schema)


POSITIVE = [
    "model.block_size",
    "model.d_model",
    "model.d_k",
    "model.d_v",
    "model.n_layer",
    "optim.lr",
    "trainer.max_steps",
    "trainer.batch_size",
    "trainer.grad_accum_steps",
    "trainer.eval_interval",
    "trainer.eval_iters",
    "trainer.log_interval",
    "trainer.ckpt_interval",
]
NOT_NEGATIVE = [
    "model.softcap",
    "optim.min_lr",
    "optim.warmup_steps",
    "optim.weight_decay",
    "optim.grad_clip",
    "trainer.sample_tokens",
    "trainer.keep_checkpoints",
]
BELOW_ONE = ["model.dropout", "optim.beta1", "optim.beta2"]  # and not negative
SEED_LIMIT = 2**62  # torch's generators take 64 bits; the ranks' seeds add to it (trainer/distributed.py)
MAX_SAMPLE_TOKENS = 100_000  # as sample.py's max_new_tokens
MAX_KEPT = 100  # trainer.keep_checkpoints: each is a copy of the weights


def range_problems(config: TrainConfig, nonfinite: list[str]) -> list[tuple[str, str]]:
    """Each setting outside its range, one problem per key: (key, problem)."""

    def value(key: str) -> object:
        return attrgetter(key)(config)

    def finite(keys: list[str]) -> list[str]:
        return [key for key in keys if key not in nonfinite]  # one problem per key

    problems = [(key, "must be a finite number") for key in nonfinite]
    problems += [(key, "must be positive") for key in finite(POSITIVE) if value(key) <= 0]
    problems += [(key, "must not be negative") for key in finite(NOT_NEGATIVE) if value(key) < 0]
    problems += [(key, "must be at least 0 and below 1") for key in finite(BELOW_ONE) if not 0 <= value(key) < 1]
    if not 0 < config.data.val_fraction < 1 and "data.val_fraction" not in nonfinite:
        problems.append(("data.val_fraction", "must be between 0 and 1"))
    if not -SEED_LIMIT <= config.trainer.seed <= SEED_LIMIT:
        problems.append(("trainer.seed", f"must be between -{SEED_LIMIT} and {SEED_LIMIT} (2**62)"))
    if config.trainer.sample_tokens > MAX_SAMPLE_TOKENS:
        problems.append(("trainer.sample_tokens", f"must be at most {MAX_SAMPLE_TOKENS}: each is a forward pass"))
    if config.trainer.keep_checkpoints > MAX_KEPT:
        problems.append(("trainer.keep_checkpoints", f"must be at most {MAX_KEPT}: each is a copy of the weights"))
    return problems


def relation_problems(config: TrainConfig, nonfinite: bool) -> list[tuple[str, str]]:
    """The settings that cannot work together, (key, problem) each; the optimizer's only where every number is
    finite."""
    optim, trainer, problems = config.optim, config.trainer, []
    if optim.lr > 1 and not nonfinite:
        problems.append(("optim.lr", "must be at most 1: AdamW moves every weight by about lr at each step"))
    if 0 < optim.lr <= 1 and optim.lr * optim.weight_decay >= 1 and not nonfinite:
        weights = "each step scales the weights by 1 - lr * weight_decay"
        problems.append(("optim.weight_decay", f"times optim.lr={optim.lr} must be below 1: {weights}"))
    if 0 < optim.lr < optim.min_lr and not nonfinite:
        problems.append(("optim.min_lr", f"must not exceed optim.lr={optim.lr}: the schedule decays from lr to min_lr"))
    if trainer.grad_accum_steps > 0 and trainer.batch_size % trainer.grad_accum_steps:
        problems.append(("trainer.grad_accum_steps", f"must divide trainer.batch_size={trainer.batch_size}"))
    if 0 < trainer.max_steps < trainer.eval_interval:
        problems.append(("trainer.eval_interval", f"must not exceed trainer.max_steps={trainer.max_steps}"))
    return problems


def tokenizer_problems(config: TrainConfig) -> list[tuple[str, str]]:
    """The vocabulary settings that cannot work, (key, problem) each."""
    problems, bpe = [], config.tokenizer.kind is TokenizerKind.bpe
    if config.model.vocab_size is not None:
        problems.append(
            ("model.vocab_size", "comes from the tokenizer; to change it use tokenizer=bpe tokenizer.vocab_size=N")
        )
    if bpe and (config.tokenizer.vocab_size or 0) < 256:
        problems.append(
            ("tokenizer.vocab_size", "must be at least 256 for tokenizer=bpe: its alphabet is the 256 bytes")
        )
    if not bpe and config.tokenizer.vocab_size is not None:
        problems.append(
            ("tokenizer.vocab_size", "applies to tokenizer=bpe only; a char vocabulary is the text's characters")
        )
    return problems


def float_keys(config: TrainConfig) -> list[str]:
    """Every setting of type float, e.g. "optim.lr"."""
    return [
        f"{group.name}.{setting.name}"
        for group in fields(config)
        for setting in fields(getattr(config, group.name))
        if setting.type is float
    ]


def check_values(config: TrainConfig) -> None:
    """The ranges that types cannot express; one ConfigError names every bad key."""
    nonfinite = [key for key in float_keys(config) if not math.isfinite(attrgetter(key)(config))]
    problems = range_problems(config, nonfinite) + relation_problems(config, bool(nonfinite))
    problems += tokenizer_problems(config)
    # The model's, the data's and the task's own checks (model/tinylm.py, data/sources.py, task/), worded already.
    worded = model_problems(config.model) + data_problems(config.data, config.tokenizer, config.model.block_size)
    worded += task_problems(config)
    if problems or worded:
        named = [f"{key}={attrgetter(key)(config)}: {problem}" for key, problem in problems]
        raise ConfigError("; ".join(named + worded))
    if config.optim.warmup_steps > config.trainer.max_steps:
        log.warning(
            "optim.warmup_steps=%d is longer than the run: the learning rate rises over all %d steps",
            config.optim.warmup_steps,
            config.trainer.max_steps,
        )


SHARED_SETTINGS = ("encoder",)  # a preset's settings its runs share, named as the group of its runs' configs


def without_shared_settings(cfg: DictConfig, choices: dict) -> DictConfig:
    """The run's settings with a preset's shared ones taken into the settings that read them and then left out, as
    no run's schema holds them: +encoder.blank_share, which the blank-filling runs of +experiment=encoder read
    (configs/encoder/). Given to a run that is not one of the preset's jobs, they are kept, for the schema to refuse."""
    shared = [key for key in SHARED_SETTINGS if key in cfg and choices.get(key)]
    if not shared:
        return cfg
    settings = OmegaConf.to_container(cfg, resolve=True)
    for key in shared:
        del settings[key]
    return OmegaConf.create(settings)
