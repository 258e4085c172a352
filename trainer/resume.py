"""Resuming: which checkpoint a run continues from (`trainer.resume`: a run directory, a checkpoint file, or
`auto`), with which settings, in which directory, and the command line that resumes a stopped run."""

import json
import logging
import shlex
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from data import DataError, TokenData
from data.manifest import MANIFEST
from trainer.checkpoint import LAST, checkpoint_path
from trainer.config import ConfigError, TrainConfig, to_train_config
from trainer.overrides import override, override_key

AUTO = "auto"  # trainer.resume=auto: resume from the run directory's last.pt if there is one, else start fresh
# A resume continues the same run; besides trainer.resume itself, only these may differ from the checkpoint's settings.
log = logging.getLogger("tinylm")

RESUMABLE = ["trainer.max_steps", "trainer.ckpt_interval", "trainer.device", "trainer.sample_tokens", "data.cache_dir"]


def run_dir_of(resume: str) -> Path:
    """The run directory that trainer.resume names: the directory itself, or the one holding the checkpoint file."""
    path = Path(resume).expanduser()
    return path if path.is_dir() else path.parent


def checkpoint_to_resume(resume: Optional[str], run_dir: Path) -> Optional[Path]:
    """The checkpoint a run continues from, or None for a fresh run: trainer.resume=auto takes the run directory's
    own last.pt when there is one (a requeued cluster job goes on), and otherwise starts fresh."""
    if resume == AUTO:
        return run_dir / LAST if (run_dir / LAST).exists() else None
    return checkpoint_path(resume) if resume else None


def resume_override(run_dir: Path) -> str:
    """`trainer.resume=RUN_DIR` as one shell word that Hydra parses back to the same path."""
    return shlex.quote(override("trainer.resume", str(run_dir)))


def resumed_config(saved: dict, cfg: DictConfig, overrides: list[str], step: int) -> TrainConfig:
    """The checkpoint's settings `saved`, with the command line's `overrides` of the RESUMABLE keys applied.

    An override of any other key that differs from the saved value is refused, naming the keys.
    """
    given = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    resumed = OmegaConf.create(saved)
    refused = []
    for key in sorted({override_key(item) for item in overrides}):
        if key.startswith("hydra"):
            continue
        if key in RESUMABLE or key == "trainer.resume":
            OmegaConf.update(resumed, key, OmegaConf.select(given, key))
        elif OmegaConf.select(given, key) != OmegaConf.select(resumed, key):
            refused.append(key)
    if refused:
        raise ConfigError(
            f"trainer.resume: {', '.join(refused)} cannot change when a run resumes (its settings come from the "
            f"checkpoint); only {', '.join(RESUMABLE)} can. Start a new run to change them"
        )
    resumed.model.vocab_size = None  # set again from the tokenizer, as in a new run
    config = to_train_config(resumed)
    if config.trainer.max_steps <= step:
        raise ConfigError(
            f"trainer.max_steps={config.trainer.max_steps}: the run being resumed is at step {step} already; "
            f"raise trainer.max_steps to train on"
        )
    return config


SPLIT_FILES = ("train.npy", "val.npy")  # the token cache entry's files of the two splits


def trained_on(data: TokenData) -> dict:
    """What a checkpoint records of the tokens its run trains on, from their token cache entry's manifest: the
    text's identity (data/sources.py: local files by a hash of their bytes) and the train and val token files'
    sizes and CRC-32s, which change whenever the text, its train/val cut or its tokenization does."""
    manifest = json.loads((data.path / MANIFEST).read_text())
    return {"text": manifest["key"]["text"], "tokens": {split: manifest["files"][split] for split in SPLIT_FILES}}


def check_same_data(checkpoint: dict, tokenizer: str, now: dict) -> None:
    """Refuses to resume on other tokens than the checkpoint's (`tokenizer` and `now`, what trained_on says of the
    tokens at hand), naming what changed: the training text, the tokenizer, or both. A checkpoint written before
    tinylm recorded its tokens can only have its tokenizer checked."""
    tokenizer_changed = checkpoint["tokenizer"] != tokenizer
    saved = checkpoint.get("data")
    if saved is None:
        log.warning(
            "trainer.resume: this checkpoint predates the record of its training text; only its tokenizer is checked"
        )
    text_changed = saved is not None and saved["tokens"] != now["tokens"]
    # A new tokenizer changes the tokens of the same text too: the text's identity says whether it changed as well.
    text_changed = text_changed and (not tokenizer_changed or saved["text"] != now["text"])
    changed = [what for what, did in (("the training text", text_changed), ("the tokenizer", tokenizer_changed)) if did]
    if changed:
        raise DataError(
            f"trainer.resume: {' and '.join(changed)} changed since the checkpoint was written, so the run would "
            "not go on as it began; resume with the text and tokenizer it was trained on, or start a new run"
        )
