"""Where the training text comes from: the embedded Shakespeare, local text files, a hub data set, or a text made on the
fly (data=copy, data/synthetic.py).

Each source opens as a Corpus: what identifies its text (cheap to get: the token cache is keyed by it) and a
way to read the text in chunks, so a large corpus is never held in memory whole.
"""

import functools
import socket
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterator, Optional
from urllib.parse import urlparse

from huggingface_hub import constants as hub_constants

from data.errors import DataError
from data.shakespeare import plays_identity, shakespeare_text
from data.synthetic import copy_identity, copy_problems, copy_text
from data.textfiles import checked_paths, file_digest, text_chunks
from data.tokenizer import TokenizerConfig

HUB_ROWS_PER_CHUNK = 1000


class Source(Enum):
    shakespeare = "shakespeare"
    text = "text"
    hub = "hub"
    copy = "copy"  # made on the fly: random blocks of data.distance letters, each repeated


@dataclass
class DataConfig:
    source: Source = Source.shakespeare
    path: Optional[str] = None  # text: a file or a glob of files, read in sorted order
    name: Optional[str] = None  # hub: the data set's name, e.g. "karpathy/tiny_shakespeare"
    subset: Optional[str] = None  # hub: the data set's configuration, if it has several
    split: str = "train"  # hub: the split to read
    text_column: str = "text"  # hub: the column that holds the text
    distance: int = 16  # copy: the next token of a repeated block is the one this many positions back
    val_fraction: float = 0.1  # the last part of the text is held out for validation
    cache_dir: Optional[str] = None  # token cache; default $XDG_CACHE_HOME/tinylm or ~/.cache/tinylm


@dataclass(frozen=True)
class Corpus:
    identity: dict  # tells this text apart from any other, without reading it whole
    read: Callable[[], Iterator[str]]  # the text, in chunks; each call reads it from the start

    def read_part(self, start: int, stop: Optional[int] = None) -> Iterator[str]:
        """Characters start to stop of the text (to its end if stop is None), in chunks."""
        position = 0
        for chunk in self.read():
            if stop is not None and position >= stop:
                return
            part = chunk[max(start - position, 0) : None if stop is None else stop - position]
            if part:
                yield part
            position += len(chunk)


# The settings that one source alone reads: set under another, they would be ignored without a word (data.path=FILE
# without data=text trains on Shakespeare).
READ_BY = {"path": Source.text, "name": Source.hub, "subset": Source.hub}


def data_problems(config: DataConfig, tokenizer: TokenizerConfig, block_size: int) -> list[str]:
    """What cannot work in these data settings, one line each naming the setting (trainer/config.py's checks)."""
    problems = [
        f"data.{key}={getattr(config, key)}: only data={source.value} reads it, and this run's data is "
        f"data={config.source.value}; add data={source.value} to train on it"
        for key, source in READ_BY.items()
        if getattr(config, key) is not None and config.source is not source
    ]
    if config.source is Source.copy:
        problems += copy_problems(config.distance, block_size, tokenizer.kind.value)
    return problems


def open_corpus(config: DataConfig) -> Corpus:
    """The text config names, checked so far as that is cheap; faults in the text itself come up as it is read."""
    if config.source is Source.shakespeare:
        text = functools.cache(shakespeare_text)  # converted once, when first read
        return Corpus({"shakespeare": plays_identity()}, lambda: iter([text()]))
    if config.source is Source.text:
        return local_files(config.path)
    if config.source is Source.copy:
        text = functools.cache(copy_text)
        return Corpus(copy_identity(config.distance), lambda: iter([text(config.distance)]))
    return hub_data_set(config)


def load_text(config: DataConfig) -> str:
    """The whole text, in memory."""
    return "".join(open_corpus(config).read())


def local_files(pattern: Optional[str]) -> Corpus:
    # Known by their contents alone: an edit in place is seen whatever the file system's clock granularity,
    # and merely touching a file keeps its cache entry.
    paths = checked_paths(pattern)
    digests = [file_digest(path) for path in paths]
    return Corpus({"text": digests}, lambda: text_chunks(pattern, paths, digests))


def hub_data_set(config: DataConfig) -> Corpus:
    if not config.name:
        raise DataError("data.name: data=hub needs a data set name, e.g. data.name=karpathy/tiny_shakespeare")
    instead = "train on local files with data=text data.path=FILE, or on the embedded corpus with data=shakespeare"
    if not hub_constants.HF_HUB_OFFLINE and not hub_resolves():
        # Without this check the hub client retries for half a minute before it gives up.
        raise DataError(
            f"data.name={config.name}: the Hugging Face hub cannot be reached (no network?); {instead}, "
            "or set HF_HUB_OFFLINE=1 to read a copy already in the local cache"
        )
    import datasets  # only here: it takes half a second to import

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
    rows = rows.select_columns([config.text_column])

    def read() -> Iterator[str]:  # the rows, one to a line
        for number, batch in enumerate(rows.iter(batch_size=HUB_ROWS_PER_CHUNK)):
            yield ("\n" if number else "") + "\n".join(batch[config.text_column])

    # The fingerprint names the data set's version and every transform applied to it (datasets' own cache key).
    where = {"name": config.name, "subset": config.subset, "split": config.split, "column": config.text_column}
    return Corpus({"hub": where | {"fingerprint": rows._fingerprint}}, read)


def hub_resolves() -> bool:
    try:
        socket.getaddrinfo(urlparse(hub_constants.ENDPOINT).hostname, 443)
    except OSError:
        return False
    return True
