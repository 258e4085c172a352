"""A token-cache entry's manifest: written last, it states the size and checksum of each file of the entry (and,
for people and tools, what the entry holds), so a damaged or partial entry is found before anything trains on it."""

import json
import os
import zlib
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import BinaryIO

from data.errors import naming

MANIFEST = "manifest.json"
CRC_BLOCK_BYTES = 1 << 20


class DamagedEntry(Exception):
    """What is wrong with a cache entry, in a few words."""


def checksum(file: BinaryIO) -> int:
    # crc32 finds any damage of up to 32 bits in a row and all but one in 4 billion others, several times faster than
    # blake2b (docs/benchmark.md). (Telling texts apart, where a collision would go unnoticed, takes a real hash.)
    value, block = 0, bytearray(CRC_BLOCK_BYTES)
    view = memoryview(block)
    while size := file.readinto(block):
        value = zlib.crc32(view[:size], value)
    return value


def write_manifest(directory: Path, names: tuple[str, ...], facts: dict) -> None:
    files = {}
    for name in names:
        with open(directory / name, "rb") as file:
            files[name] = {"bytes": os.fstat(file.fileno()).st_size, "crc32": checksum(file)}
    with naming(directory / MANIFEST):
        (directory / MANIFEST).write_text(json.dumps(facts | {"files": files}, indent=1, default=str))


def open_checked(directory: int, names: tuple[str, ...], stack: ExitStack) -> dict[str, BinaryIO]:
    """The files `names` of the entry open at `directory` (a file descriptor: an entry renamed meanwhile is still the
    one read), each checked against the manifest and open at its start, closed with `stack`; else DamagedEntry."""

    def opened(name: str) -> BinaryIO:
        try:
            return stack.enter_context(open(name, "rb", opener=partial(os.open, dir_fd=directory)))
        except FileNotFoundError:
            raise DamagedEntry(f"{name} is missing") from None

    try:
        stated = json.load(opened(MANIFEST))["files"]
        stated = {name: (int(stated[name]["bytes"]), int(stated[name]["crc32"])) for name in names}
    except (ValueError, KeyError, TypeError):
        raise DamagedEntry(f"{MANIFEST} is not a manifest of this entry") from None
    files = {}
    for name, (size, crc32) in stated.items():
        file = files[name] = opened(name)
        if (found := os.fstat(file.fileno()).st_size) != size:
            raise DamagedEntry(f"{name} holds {found} bytes, the manifest says {size}")
        if checksum(file) != crc32:
            raise DamagedEntry(f"{name} does not match its checksum")
        file.seek(0)
    return files
