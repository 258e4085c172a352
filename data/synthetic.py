"""A corpus made on the fly, for the lesson's claim about distance: data=copy, where the next token is fixed by the
token data.distance positions back.

The text is segments of 2d + 1 characters: a block of d letters drawn uniformly at random, the same block again,
and a line break. A letter of the second block is the letter d positions back; nothing else predicts it. So at
those positions a model that can read d tokens back predicts exactly (loss 0), one that cannot does no better than
a guess among the 26 letters (ln 26 = 3.26 nats). The first block is noise to every model, the line break is
fixed by counting. The same distance always gives the same text (a fixed seed), so it is cached like any other.
"""

import string

import numpy as np
import torch
from torch import Tensor

from data.errors import DataError

LETTERS = string.ascii_lowercase
COPY_CHARS = 1 << 20  # about a million characters: 940k to train on, 105k to validate
COPY_SEED = 0  # the text is data: the same for every trainer.seed
COPY_FORMAT = 1  # bump when the text changes


def period(distance: int) -> int:
    """The length of one segment: a block, its copy, a line break."""
    return 2 * distance + 1


def copy_text(distance: int, chars: int = COPY_CHARS) -> str:
    """`chars` characters (whole segments, the last one cut) of random blocks of `distance` letters, each repeated."""
    if distance < 1:
        raise DataError(f"data.distance={distance}: must be positive")
    segments = -(-chars // period(distance))
    blocks = np.random.default_rng(COPY_SEED).integers(len(LETTERS), size=(segments, distance))
    alphabet = np.frombuffer(LETTERS.encode(), dtype=np.uint8)
    lines = np.concatenate([alphabet[blocks], alphabet[blocks], np.full((segments, 1), ord("\n"), np.uint8)], axis=1)
    return lines.tobytes()[:chars].decode("ascii")


def copy_identity(distance: int) -> dict:
    """What tells this text apart, for the token cache's key."""
    return {"copy": {"distance": distance, "chars": COPY_CHARS, "seed": COPY_SEED, "format": COPY_FORMAT}}


def copy_problems(distance: int, block_size: int, tokenizer: str) -> list[str]:
    """What cannot work in data=copy's settings, one line each naming the setting (trainer/config.py's checks)."""
    problems = []
    if distance < 1:
        problems.append(f"data.distance={distance}: must be positive")
    elif distance > block_size:
        problems.append(
            f"data.distance={distance}: must be at most model.block_size={block_size}: the token the next one "
            "copies must be inside the window"
        )
    if tokenizer != "char":
        problems.append(f"tokenizer={tokenizer}: data=copy is single letters, one token each; use tokenizer=char")
    return problems


def far_targets(starts: Tensor, block_size: int, distance: int) -> Tensor:
    """(B, block_size) booleans for windows that start at character `starts` (B,) of the text: true where the target
    (the next token, y[p] = text[start + p + 1]) is a copy of the token `distance` back and that token is in the window
    (p + 1 - distance >= 0), so the model can read it: the positions that need the far token."""
    p = torch.arange(block_size)
    target = starts[:, None] + p + 1  # the target's place in the text
    offset = target % period(distance)
    in_copy = (offset >= distance) & (offset < 2 * distance)  # the second block: offsets d .. 2d - 1 of a segment
    return in_copy & (p + 1 >= distance)
