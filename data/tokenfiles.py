"""Token ids on disk: one-dimensional .npy files, written a part at a time and read back as memory maps."""

from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy

from data.errors import naming


def write_tokens(path: Path, dtype: np.dtype, parts: Iterable[np.ndarray]) -> int:
    """The ids, given a part at a time, as a .npy file; returns how many there are. Written through the file rather
    than a memory map: pages of a written map count in the process's resident memory until it is closed. A write
    that fails names `path`; the parts are read outside `naming`, so that a failed read of the text stays its own."""
    file = open(path, "wb")
    try:
        with naming(path):
            write_header(file, dtype, 0)
        start, length = file.tell(), 0
        for ids in parts:
            with naming(path):
                file.write(ids.astype(dtype, copy=False).tobytes())
            length += len(ids)
        with naming(path):
            # numpy pads a header so that the length can grow in place: the rewrite leaves the ids where they are.
            file.seek(0)
            write_header(file, dtype, length)
        if file.tell() != start:
            raise RuntimeError(f"{path}: numpy wrote a longer .npy header for {length} ids than for none")
    finally:
        with naming(path):
            file.close()  # what the buffer still holds is written here
    return length


def write_header(file: BinaryIO, dtype: np.dtype, length: int) -> None:
    npy.write_array_header_1_0(file, {"descr": npy.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)})


def map_tokens(file: BinaryIO) -> np.memmap:
    """The ids in an open .npy file (as write_tokens writes it), mapped read-only; the map stays valid after the
    file is closed, renamed or deleted."""
    file.seek(0)
    npy.read_magic(file)
    shape, _, dtype = npy.read_array_header_1_0(file)
    return np.memmap(file, dtype=dtype, mode="r", offset=file.tell(), shape=shape)
