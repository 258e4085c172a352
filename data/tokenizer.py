"""Tokenizers through HF `tokenizers`: character level, or byte-level BPE.

Both give back exactly the text they encode: byte-level BPE for any text, the character tokenizer for
text made of the characters of its training split (others become [UNK])."""

from dataclasses import dataclass
from enum import Enum
from itertools import chain
from typing import Optional

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

UNKNOWN = "[UNK]"  # a character that never occurs in the training split
LINES_PER_BATCH = 10_000  # lines encoded at once


class TokenizerKind(Enum):
    char = "char"
    bpe = "bpe"


@dataclass
class TokenizerConfig:
    kind: TokenizerKind = TokenizerKind.char
    vocab_size: Optional[int] = None  # bpe only: the vocabulary to learn, 256 byte tokens included


def chunks(text: str) -> list[str]:
    # Lines (newlines kept) let `tokenizers` encode in parallel; their concatenation is the text.
    return text.splitlines(keepends=True)


def train_tokenizer(config: TokenizerConfig, text: str) -> Tokenizer:
    """A tokenizer learned from `text` (the training split)."""
    if config.kind is TokenizerKind.char:
        vocab = {UNKNOWN: 0} | {char: i + 1 for i, char in enumerate(sorted(set(text)))}
        tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNKNOWN))
        tokenizer.add_special_tokens([UNKNOWN])  # so decode leaves it out of generated text
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"(?m:.)"), behavior="isolated")
        tokenizer.decoder = decoders.Fuse()  # without it, decode joins tokens with spaces
        return tokenizer
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(chunks(text), trainer)
    return tokenizer


def token_dtype(tokenizer: Tokenizer) -> np.dtype:
    return np.dtype(np.uint16 if tokenizer.get_vocab_size() <= 1 << 16 else np.uint32)


def encode(tokenizer: Tokenizer, text: str) -> np.ndarray:
    """Token ids of `text`, as compact unsigned integers."""
    # A batch at a time: the Encoding objects cost far more memory than the ids they hold.
    lines = chunks(text)
    batches = (tokenizer.encode_batch(lines[i : i + LINES_PER_BATCH]) for i in range(0, len(lines), LINES_PER_BATCH))
    ids = chain.from_iterable(encoding.ids for batch in batches for encoding in batch)
    return np.fromiter(ids, dtype=token_dtype(tokenizer))
