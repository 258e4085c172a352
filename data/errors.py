"""The errors of data/: a setting that cannot work, and a failed write that names its file."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class DataError(Exception):
    """A data setting that cannot work; the message names the setting."""


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """An OSError of a write to `path` with the file's name, which Python's writes leave out (a full disk's ENOSPC):
    whoever reports it names the file that failed, not a guess."""
    try:
        yield
    except OSError as error:
        if error.filename is None:
            error.filename = str(path)
        raise
