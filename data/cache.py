"""Token ids cached on disk, keyed by the text and the tokenizer settings, so a second run starts at once.

A cache entry is a directory holding train.npy and val.npy (read back as memory maps), tokenizer.json and,
written last, manifest.json (data/manifest.py). It is built in a staging directory beside it and renamed into
place, so a reader never sees a half-written entry (data/staging.py: a build stopped by a signal removes its
staging directory, the next build removes one a killed build left); one damaged later is found by its manifest,
moved aside under a name of its own (so processes that find it at once do not trip over each other), deleted and
built again.

The key never needs the text read whole: local files are known by a hash of their bytes, the embedded corpus by its
files' sizes and modification times, a hub data set by its fingerprint (data/sources.py). Building reads the text
in bounded chunks and writes the ids as they come, so memory does not grow with the text.
"""

import hashlib
import json
import logging
import os
import shutil
import uuid
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from tokenizers import Tokenizer

from data.errors import DataError, naming
from data.manifest import DamagedEntry, open_checked, write_manifest
from data.sources import Corpus, DataConfig, open_corpus
from data.staging import DAMAGED, Staging, remove_abandoned
from data.tokenfiles import map_tokens, write_tokens
from data.tokenizer import TokenizerConfig, encode_chunks, token_dtype, train_tokenizer

CACHE_FORMAT = 2  # bump when the layout of a cache entry, the tokenization or the embedded corpus's conversion changes
FILES = ("train.npy", "val.npy", "tokenizer.json")

log = logging.getLogger(__name__)


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


def key_settings(corpus: Corpus, data: DataConfig, tokenizer: TokenizerConfig) -> dict:
    """Everything the entry's contents depend on."""
    return {
        "format": CACHE_FORMAT,
        "val_fraction": data.val_fraction,
        "tokenizer": asdict(tokenizer),
        "text": corpus.identity,
    }


def cache_key(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:20]


def prepare_tokens(data: DataConfig, tokenizer_config: TokenizerConfig) -> TokenData:
    """The corpus as train and val token ids, from the cache or freshly tokenized. A build stopped by an exception
    (a SIGINT or SIGTERM arrives as one: trainer/stopping.py) removes what it wrote."""
    corpus = open_corpus(data)
    settings = key_settings(corpus, data, tokenizer_config)
    entry = cache_root(data) / cache_key(settings)
    found = read_entry(entry)
    if found:
        return TokenData(*found, path=entry, built=False)
    build_entry(entry, corpus, data.val_fraction, tokenizer_config, settings)
    built = read_entry(entry)  # ours, or an identical one another process renamed into place first
    if not built:
        raise DataError(
            f"data.cache_dir: {entry} was damaged as soon as it was built; does another program write there?"
        )
    return TokenData(*built, path=entry, built=True)


def read_entry(entry: Path) -> Optional[tuple[np.memmap, np.memmap, Tokenizer]]:
    """The train and val ids and the tokenizer of a whole entry; None if there is none, or it was damaged (a
    warning says how, and it is moved aside)."""
    try:
        directory = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    try:
        with ExitStack() as stack:
            files = open_checked(directory, FILES, stack)
            tokenizer = Tokenizer.from_str(files["tokenizer.json"].read().decode("utf-8"))
            return map_tokens(files["train.npy"]), map_tokens(files["val.npy"]), tokenizer
    except DamagedEntry as damage:
        log.warning("token cache entry %s: %s; building it again", entry, damage)
        set_aside(entry, os.fstat(directory))
        return None
    finally:
        os.close(directory)


def set_aside(entry: Path, damaged: os.stat_result) -> None:
    """Moves a damaged entry out of the way, then deletes it. Processes that have its files open keep reading them;
    one that finds it gone, or already replaced by a whole entry, leaves the path alone."""
    aside = entry.with_name(f".{entry.name}.{DAMAGED}.{uuid.uuid4().hex}")
    try:
        if os.path.samestat(os.stat(entry), damaged):
            os.rename(entry, aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def build_entry(
    entry: Path, corpus: Corpus, val_fraction: float, tokenizer_config: TokenizerConfig, settings: dict
) -> None:
    # A first pass finds where to split, and any fault in the text, before anything is written.
    cut = int(sum(map(len, corpus.read())) * (1 - val_fraction))
    # Contiguous split, validation at the end; the tokenizer learns from the training part only.
    tokenizer = train_tokenizer(tokenizer_config, corpus.read_part(0, cut))
    dtype = token_dtype(tokenizer)
    for path in remove_abandoned(entry.parent):
        log.info("token cache: removed %s, left by a build that was killed", path)
    try:
        with Staging(entry) as staging:
            tokens = {
                split: write_tokens(
                    staging.path / f"{split}.npy", dtype, encode_chunks(tokenizer, corpus.read_part(*part))
                )
                for split, part in {"train": (0, cut), "val": (cut, None)}.items()
            }
            with naming(staging.path / "tokenizer.json"):  # written by Python: a failed write names its file
                (staging.path / "tokenizer.json").write_text(tokenizer.to_str(pretty=True))
            facts = {"key": settings, "dtype": dtype.name, "vocab_size": tokenizer.get_vocab_size(), "tokens": tokens}
            write_manifest(staging.path, FILES, facts)
            staging.publish()
    except OSError:
        if not entry.exists():  # another process may have won the race, with an identical entry
            raise
