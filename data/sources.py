"""Where the training text comes from: the embedded Shakespeare, local text files, or a hub data set."""

import glob
import os
import socket
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

import datasets
from huggingface_hub import constants as hub_constants

from data.shakespeare import shakespeare_text


class DataError(Exception):
    """A data setting that cannot work; the message names the setting."""


class Source(Enum):
    shakespeare = "shakespeare"
    text = "text"
    hub = "hub"


@dataclass
class DataConfig:
    source: Source = Source.shakespeare
    path: Optional[str] = None  # text: a file or a glob of files, read in sorted order
    name: Optional[str] = None  # hub: the data set's name, e.g. "karpathy/tiny_shakespeare"
    subset: Optional[str] = None  # hub: the data set's configuration, if it has several
    split: str = "train"  # hub: the split to read
    text_column: str = "text"  # hub: the column that holds the text
    val_fraction: float = 0.1  # the last part of the text is held out for validation
    cache_dir: Optional[str] = None  # token cache; default $XDG_CACHE_HOME/tinylm or ~/.cache/tinylm


def load_text(config: DataConfig) -> str:
    if config.source is Source.shakespeare:
        return shakespeare_text()
    if config.source is Source.text:
        return text_files(config)
    return hub_text(config)


def text_files(config: DataConfig) -> str:
    # One row per file (sample_by="document") keeps every line break; "\r\n" comes back as "\n".
    files = datasets.load_dataset("text", data_files=checked_paths(config.path), sample_by="document", split="train")[
        "text"
    ]
    # Each file ends its last line before the next file begins.
    return "".join(text if text.endswith("\n") else text + "\n" for text in files[:-1]) + files[-1]


def checked_paths(pattern: Optional[str]) -> list[str]:
    """The files data.path names, each an existing, non-empty UTF-8 file; else DataError saying which is not."""
    if not pattern:
        raise DataError("data.path: data=text needs a file, e.g. data.path=notes.txt")
    expanded = os.path.expanduser(pattern)
    paths = sorted(glob.glob(expanded)) if glob.has_magic(expanded) else [expanded]
    if not paths or not os.path.exists(paths[0]):
        raise DataError(f"data.path={pattern}: no such file" + (" matches" if glob.has_magic(expanded) else ""))
    for path in paths:
        if os.path.isdir(path):
            raise DataError(
                f"data.path={pattern}: {path} is a directory; give a file, or a glob such as {path.rstrip('/')}/*.txt"
            )
        raw = Path(path).read_bytes()
        if not raw:
            raise DataError(f"data.path={pattern}: {path} is empty")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataError(
                f"data.path={pattern}: {path} is not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start}); "
                "convert it first, e.g. iconv -f latin1 -t utf-8"
            ) from None
    return paths


def hub_text(config: DataConfig) -> str:
    if not config.name:
        raise DataError("data.name: data=hub needs a data set name, e.g. data.name=karpathy/tiny_shakespeare")
    instead = "train on local files with data=text data.path=FILE, or on the embedded corpus with data=shakespeare"
    if not hub_constants.HF_HUB_OFFLINE and not hub_resolves():
        # Without this check the hub client retries for half a minute before it gives up.
        raise DataError(
            f"data.name={config.name}: the Hugging Face hub cannot be reached (no network?); {instead}, "
            "or set HF_HUB_OFFLINE=1 to read a copy already in the local cache"
        )
    try:
        rows = datasets.load_dataset(config.name, config.subset, split=config.split)
    except ConnectionError as error:  # offline, and the data set is not in the local cache
        raise DataError(
            f"data.name={config.name}: the hub cannot be reached and the data set is not in the local cache; {instead}"
        ) from error
    if config.text_column not in rows.column_names:
        raise DataError(
            f"data.text_column={config.text_column}: not a column of {config.name}; it has {rows.column_names}"
        )
    return "\n".join(rows[config.text_column])


def hub_resolves() -> bool:
    try:
        socket.getaddrinfo(urlparse(hub_constants.ENDPOINT).hostname, 443)
    except OSError:
        return False
    return True
