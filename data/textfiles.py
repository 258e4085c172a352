"""Local UTF-8 text files, read in bounded blocks: checked, identified by a hash of their bytes, and decoded as
Python's text mode would ("\\r\\n" and a lone "\\r" become "\\n")."""

import codecs
import glob
import hashlib
import io
import os
import stat
from typing import Iterator, Optional

from data.binary import binary_kind, is_utf16
from data.errors import DataError

READ_BLOCK_BYTES = 1 << 16  # read at once: memory stays bounded however long the file or its lines


# What a path can be besides a regular file or a directory (by os.stat's mode), and why tinylm cannot train on it.
NOT_REGULAR = {
    stat.S_ISFIFO: ("a pipe", "a pipe gives its text once"),
    stat.S_ISSOCK: ("a socket", "a socket gives its text once"),
    stat.S_ISCHR: ("a device", "a device may never end or give other bytes each time"),
    stat.S_ISBLK: ("a block device", "a disk is not a text file"),
}


def checked_paths(pattern: Optional[str]) -> list[str]:
    """The files data.path names, each an existing, non-empty regular file; else DataError saying which is not.
    Whether each is UTF-8 text is found out while reading it (text_chunks)."""
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
        if kind := not_regular(path):
            name, why = kind
            raise DataError(
                f"data.path={pattern}: {path} is {name}, not a regular file; tinylm reads the text more than once (a "
                f"hash of its bytes finds its token cache entry, then it is tokenized), and {why}: save the text to "
                "a file and give that"
            )
        if os.path.getsize(path) == 0:
            raise DataError(f"data.path={pattern}: {path} is empty")
    return paths


def not_regular(path: str) -> Optional[tuple[str, str]]:
    """What `path` is, if not a regular file: a pipe (a FIFO, <(...), /dev/stdin from one), a device (/dev/zero,
    a terminal) or a socket. Told from os.stat, which opens nothing: opening a FIFO waits for its writer, and
    a device such as /dev/zero never ends. The file system gives every one of them the size 0."""
    mode = os.stat(path).st_mode
    return next((kind for is_kind, kind in NOT_REGULAR.items() if is_kind(mode)), None)


def new_digest():
    # 128 bits: two different texts never share a cache entry. blake2b is fast and needs no hardware support.
    return hashlib.blake2b(digest_size=16)


def file_digest(path: str) -> str:
    """The hash of a file's bytes, read in blocks."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, new_digest).hexdigest()


def text_chunks(pattern: str, paths: list[str], digests: list[str]) -> Iterator[str]:
    """The files' text in chunks of at most READ_BLOCK_BYTES characters, joined on line breaks: a file that does not end
    with one gets one before the next file begins. `digests` are the files' hashes (file_digest) when they were
    identified: a file whose bytes differ by the time it is read to its end is refused, so its cache entry
    holds the text its key names."""
    for number, (path, digest) in enumerate(zip(paths, digests, strict=True)):
        last = ""
        for chunk in file_chunks(pattern, path, digest):
            last = chunk
            yield chunk
        if number < len(paths) - 1 and not last.endswith("\n"):
            yield "\n"


def file_chunks(pattern: str, path: str, digest: str) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines = io.IncrementalNewlineDecoder(decoder, translate=True)  # what open() in text mode does
    read = new_digest()
    offset = 0  # of the block being decoded, in the file
    holds_text = False
    with open(path, "rb") as file:
        head = file.read(READ_BLOCK_BYTES)  # what the file is, if it is not text
        file.seek(0)
        utf16 = is_utf16(head)
        while True:
            block = file.read(READ_BLOCK_BYTES)
            held_back = len(decoder.getstate()[0])  # the start of a character cut by the previous block
            if not utf16 and (nul := block.find(b"\x00")) >= 0:  # UTF-8 text holds none, whatever its language
                raise not_text(pattern, path, binary_kind(head) or f"binary data (a NUL byte at offset {offset + nul})")
            try:
                chunk = lines.decode(block, final=not block)
            except UnicodeDecodeError as error:  # error.object: the held-back bytes, then this block
                if kind := binary_kind(head):
                    raise not_text(pattern, path, kind) from None
                convert = "iconv -f utf-16 -t utf-8" if utf16 else "iconv -f latin1 -t utf-8"
                raise DataError(
                    f"data.path={pattern}: {path} is not UTF-8 text (byte 0x{error.object[error.start]:02x} at "
                    f"offset {offset - held_back + error.start}); convert it first, e.g. {convert}"
                ) from None
            if chunk:
                holds_text = holds_text or not chunk.isspace()
                yield chunk
            if not block:
                break
            read.update(block)
            offset += len(block)
    if not holds_text:
        raise DataError(f"data.path={pattern}: {path} holds only whitespace")
    if read.hexdigest() != digest:
        raise DataError(f"data.path={pattern}: {path} changed while it was being read; run again")


def not_text(pattern: str, path: str, kind: str) -> DataError:
    return DataError(f"data.path={pattern}: {path} is {kind}, not text; give a text file (UTF-8)")
