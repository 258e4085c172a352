"""Where the training text comes from: the embedded Shakespeare, local text files, or a hub data set."""

import socket
from dataclasses import dataclass
from enum import Enum
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
    if not config.path:
        raise DataError("data.path: data=text needs a file, e.g. data.path=notes.txt")
    # One row per file (sample_by="document") keeps every line break; "\r\n" comes back as "\n".
    files = datasets.load_dataset("text", data_files=config.path, sample_by="document", split="train")["text"]
    # Each file ends its last line before the next file begins.
    return "".join(text if text.endswith("\n") else text + "\n" for text in files[:-1]) + files[-1]


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
        raise DataError(f"data.name={config.name}: the hub cannot be reached and the data set is not in the local cache; {instead}") from error
    if config.text_column not in rows.column_names:
        raise DataError(f"data.text_column={config.text_column}: not a column of {config.name}; it has {rows.column_names}")
    return "\n".join(rows[config.text_column])


def hub_resolves() -> bool:
    try:
        socket.getaddrinfo(urlparse(hub_constants.ENDPOINT).hostname, 443)
    except OSError:
        return False
    return True
