"""Tokenizers through HF `tokenizers`: character level, or byte-level BPE.

Both give back exactly the text they encode: byte-level BPE for any text, the character tokenizer for
text made of the characters of its training split (others become [UNK]).

Text is learned from and encoded a bounded piece at a time, so memory does not grow with the text or its lines
(byte-level BPE's trainer still keeps a count of each distinct word of the training split).
The character tokenizer is applied as a lookup table over code points (the ids `tokenizers` would give, many
times faster). Byte-level BPE cuts the text into pieces just before a whitespace character that precedes a
non-whitespace one: its pre-tokenizer (GPT-2's rule: " word" is one pre-token, a run of whitespace gives its last
character to the word after it) splits the whole text there too, so the pieces' tokens are the whole text's, and
the tokenizer learns the same merges from them. Where the last CUT_SEARCH characters before a piece's limit hold no
such place (a long run without spaces, or of spaces only) the piece is cut at its limit; the tokens next to that
cut may differ from the whole text's, and decoding still gives back the text exactly.
"""

import re
from dataclasses import dataclass
from enum import Enum
from itertools import chain, islice
from typing import Iterable, Iterator, Optional, Union

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from data.errors import DataError

UNKNOWN = "[UNK]"  # a character that never occurs in the training split
CODE_POINTS = 0x110000  # every Unicode character
ESCAPED_BYTES = (0xDC80, 0xDCFF)  # the surrogates Python decodes bytes 0x80-0xFF of argv to when they are not UTF-8
CHARS_PER_PART = 1 << 16  # characters looked up at once by the character tokenizer (small parts: fast, little memory)
PIECE_CHARS = 1 << 14  # the longest piece byte-level BPE encodes at once
PIECES_PER_BATCH = 16  # `tokenizers` encodes the pieces of a batch in parallel; their encodings take ~80 B a token
CUT_SEARCH = 256  # how far back from PIECE_CHARS a piece looks for a place to end
WORD_START = re.compile(r"\s(?=\S)")


class TokenizerKind(Enum):
    char = "char"
    bpe = "bpe"


@dataclass
class TokenizerConfig:
    kind: TokenizerKind = TokenizerKind.char
    vocab_size: Optional[int] = None  # bpe only: the vocabulary to learn, 256 byte tokens included


def train_tokenizer(config: TokenizerConfig, text: Union[str, Iterable[str]]) -> Tokenizer:
    """A tokenizer learned from `text` (the training split), whole or in chunks."""
    chunks = [text] if isinstance(text, str) else text
    if config.kind is TokenizerKind.char:
        seen = np.zeros(CODE_POINTS, dtype=bool)
        for part in parts(chunks):
            seen[code_points(part)] = True
        vocab = {UNKNOWN: 0} | {chr(code): i + 1 for i, code in enumerate(np.flatnonzero(seen))}
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
    tokenizer.train_from_iterator(word_pieces(chunks), trainer)
    return tokenizer


def token_dtype(tokenizer: Tokenizer) -> np.dtype:
    return np.dtype(np.uint16 if tokenizer.get_vocab_size() <= 1 << 16 else np.uint32)


def encode(tokenizer: Tokenizer, text: str) -> np.ndarray:
    """Token ids of `text`, as compact unsigned integers."""
    return np.concatenate([np.empty(0, token_dtype(tokenizer)), *encode_chunks(tokenizer, [text])])


def encode_chunks(tokenizer: Tokenizer, chunks: Iterable[str]) -> Iterator[np.ndarray]:
    """Token ids of a text given in chunks, a bounded part at a time; together, the ids of the whole text."""
    dtype = token_dtype(tokenizer)
    if isinstance(tokenizer.model, models.WordLevel):  # the character tokenizer
        table = np.full(CODE_POINTS, tokenizer.token_to_id(UNKNOWN), dtype=dtype)
        for char, token_id in tokenizer.get_vocab().items():
            if char != UNKNOWN:
                table[ord(char)] = token_id
        for part in parts(chunks):
            yield table[code_points(part)]
        return
    pieces = word_pieces(chunks)
    while batch := list(islice(pieces, PIECES_PER_BATCH)):
        # encode_batch_fast leaves out the offsets: a third less time.
        encodings = tokenizer.encode_batch_fast(batch, add_special_tokens=False)
        yield np.fromiter(chain.from_iterable(encoding.ids for encoding in encodings), dtype)


def encode_known(tokenizer: Tokenizer, text: str, setting: str) -> list[int]:
    """The token ids of a text a person typed (a prompt, a text to trace). Characters the character tokenizer never
    saw in training would silently become [UNK]; they are refused instead, naming `setting` (BPE encodes any text),
    and so is text that is not valid Unicode (not_unicode)."""
    if problem := not_unicode(text, setting):
        raise DataError(problem)
    encoding = tokenizer.encode(text)
    unknown_id = tokenizer.token_to_id(UNKNOWN)
    unknown = sorted(
        {text[start:end] for token, (start, end) in zip(encoding.ids, encoding.offsets) if token == unknown_id}
    )
    if unknown:
        raise DataError(f"{setting}: {', '.join(map(repr, unknown))} never occurred in this model's training text")
    return encoding.ids


def not_unicode(text: str, setting: str) -> str:
    """'' for text that is valid Unicode, else one line naming `setting` and the first character that is not: a lone
    surrogate (JSON's "\\ud800", half of a UTF-16 pair), or a byte of the command line that is not UTF-8, which
    Python keeps as a surrogate too (U+DC80 to U+DCFF: 0xE9 typed in a Latin-1 terminal, under LC_ALL=C)."""
    try:
        text.encode("utf-8")
        return ""
    except UnicodeEncodeError as error:
        at, code = error.start, ord(text[error.start])
    if ESCAPED_BYTES[0] <= code <= ESCAPED_BYTES[1]:
        what = f"the byte 0x{code - 0xDC00:02x}, which is not UTF-8"
    else:
        what = f"U+{code:04X}, a lone surrogate (half of a UTF-16 pair)"
    return f"{setting}: not valid Unicode: character {at} (counting from 0) is {what}; give the text as UTF-8"


def parts(chunks: Iterable[str]) -> Iterator[str]:
    """The chunks, each cut into parts of at most CHARS_PER_PART characters."""
    for chunk in chunks:
        for start in range(0, len(chunk), CHARS_PER_PART):
            yield chunk[start : start + CHARS_PER_PART]


def code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def word_pieces(chunks: Iterable[str]) -> Iterator[str]:
    """The text re-cut into pieces of at most PIECE_CHARS characters, each ending where the module's docstring says;
    the same pieces however the text is cut into chunks."""
    rest = ""
    for chunk in chunks:
        text, start = rest + chunk, 0
        while len(text) - start > PIECE_CHARS:
            limit = start + PIECE_CHARS
            cuts = WORD_START.finditer(text, max(start + 1, limit - CUT_SEARCH), limit)
            end = next((match.start() for match in reversed(list(cuts))), limit)
            yield text[start:end]
            start = end
        rest = text[start:]
    if rest:
        yield rest
