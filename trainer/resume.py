"""Resuming a run: where its checkpoint is, and which settings a resume command may change."""

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from trainer.checkpoint import LAST, CheckpointError
from trainer.config import ConfigError, TrainConfig, to_train_config

# A resume continues the same run; only these may differ from the checkpoint's settings.
RESUMABLE = ["trainer.resume", "trainer.max_steps", "trainer.ckpt_interval", "trainer.device", "trainer.sample_tokens",
             "data.cache_dir"]  # fmt: skip


def checkpoint_path(resume: str) -> Path:
    """trainer.resume names a run directory (its last.pt) or a checkpoint file."""
    path = Path(resume).expanduser()
    if not path.exists():
        raise CheckpointError(f"trainer.resume={resume}: no such run directory or checkpoint file")
    return path / LAST if path.is_dir() else path


def resumed_config(saved: dict, cfg: DictConfig, overrides: list[str], step: int) -> TrainConfig:
    """The checkpoint's settings `saved`, with the command line's `overrides` of the RESUMABLE keys applied.

    An override of any other key that differs from the saved value is refused, naming the keys.
    """
    given = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    resumed = OmegaConf.create(saved)
    refused = []
    for key in sorted({override.split("=", 1)[0].lstrip("+~") for override in overrides}):
        if key.startswith("hydra"):
            continue
        if key in RESUMABLE:
            OmegaConf.update(resumed, key, OmegaConf.select(given, key))
        elif OmegaConf.select(given, key) != OmegaConf.select(resumed, key):
            refused.append(key)
    if refused:
        raise ConfigError(
            f"trainer.resume: {', '.join(refused)} cannot change when a run resumes (its settings come from the "
            f"checkpoint); only {', '.join(RESUMABLE[1:])} can. Start a new run to change them"
        )
    resumed.model.vocab_size = None  # set again from the tokenizer, as in a new run
    config = to_train_config(resumed)
    if config.trainer.max_steps <= step:
        raise ConfigError(
            f"trainer.max_steps={config.trainer.max_steps}: the run being resumed is at step {step} already; "
            f"raise trainer.max_steps to train on"
        )
    return config
