"""The mask each run trained with, as a picture for the summary's figures: the run's task's Mask, built from its
saved settings (Hydra's config.yaml, its last resume's) and its tokenizer as train.py built it, applied where
model.causal is true; drawn as TensorBoard's attn/mask draws it (trainer/diagnostics.py's mask_picture)."""

from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer

from model import Mixer, ModelConfig
from summary.runs import hydra_config
from task import TaskConfig, task_for
from trainer.config import ConfigError, TrainConfig, check_values, to_typed
from trainer.diagnostics import mask_picture


def trained_mask(run_dir: Path) -> np.ndarray | None:
    """The picture (height, width, RGB) of the mask the run in `run_dir` trained with; None for a run without its
    settings or tokenizer (one Hydra did not start), whose settings no longer read, or whose model mixes the
    positions by a recurrence (it has no mask)."""
    settings, tokenizer = hydra_config(run_dir), run_dir / "tokenizer.json"
    if settings is None or not tokenizer.is_file():
        return None
    try:
        config = TrainConfig(model=group(ModelConfig, settings, "model"), task=group(TaskConfig, settings, "task"))
        check_values(config)
    except ConfigError:
        return None
    if config.model.mixer is not Mixer.attention:
        return None
    task = task_for(config, Tokenizer.from_file(str(tokenizer)))
    picture = mask_picture(task.mask, config.model.causal, config.model.block_size, f"task={task.name}")
    return picture.astype(np.float32) / 255


def group(schema: type, settings: DictConfig, name: str) -> object:
    """One group of the run's settings (model, task) typed by its schema; its defaults where the run has none."""
    values = settings.get(name)
    return to_typed(schema, OmegaConf.to_container(values, resolve=True) if values is not None else {})
