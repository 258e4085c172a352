"""Token ids cached on disk, keyed by the text and the tokenizer settings, so a second run starts at once.

A cache entry is a directory holding train.npy and val.npy (read back as memory maps) and tokenizer.json.
It is built under a temporary name and renamed into place, so a reader never sees a half-written entry.
"""

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from data.sources import DataConfig, load_text
from data.tokenizer import TokenizerConfig, encode, train_tokenizer

FORMAT = 1  # bump when the layout of a cache entry or the tokenization changes


@dataclass
class TokenData:
    train: np.ndarray
    val: np.ndarray
    tokenizer: Tokenizer
    path: Path  # the cache entry
    built: bool  # False when read from an existing entry


def cache_root(config: DataConfig) -> Path:
    if config.cache_dir:
        return Path(config.cache_dir).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinylm"


def cache_key(text: str, data: DataConfig, tokenizer: TokenizerConfig) -> str:
    settings = {"format": FORMAT, "val_fraction": data.val_fraction, "tokenizer": asdict(tokenizer)}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(text.encode("utf-8"))
    return digest.hexdigest()[:20]


def prepare_tokens(data: DataConfig, tokenizer_config: TokenizerConfig) -> TokenData:
    """The corpus as train and val token ids, from the cache or freshly tokenized."""
    text = load_text(data)
    entry = cache_root(data) / cache_key(text, data, tokenizer_config)
    built = not entry.exists()
    if built:
        build_entry(entry, text, data.val_fraction, tokenizer_config)
    return TokenData(
        train=np.load(entry / "train.npy", mmap_mode="r"),
        val=np.load(entry / "val.npy", mmap_mode="r"),
        tokenizer=Tokenizer.from_file(str(entry / "tokenizer.json")),
        path=entry,
        built=built,
    )


def build_entry(entry: Path, text: str, val_fraction: float, tokenizer_config: TokenizerConfig) -> None:
    # Contiguous split, validation at the end; the tokenizer learns from the training part only.
    cut = int(len(text) * (1 - val_fraction))
    train_text, val_text = text[:cut], text[cut:]
    tokenizer = train_tokenizer(tokenizer_config, train_text)
    staging = entry.parent / f".{entry.name}.{uuid.uuid4().hex}"  # a name no other process uses
    staging.mkdir(parents=True)
    try:
        np.save(staging / "train.npy", encode(tokenizer, train_text))
        np.save(staging / "val.npy", encode(tokenizer, val_text))
        tokenizer.save(str(staging / "tokenizer.json"))
        os.rename(staging, entry)
    except OSError:
        if not entry.exists():  # another process may have won the race, with an identical entry
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
