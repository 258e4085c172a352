"""The text a model learns from: sources, tokenizers, the token cache and batches."""

from data.batches import check_fits, draw_windows, window_at
from data.cache import TokenData, prepare_tokens
from data.errors import DataError
from data.sources import DataConfig, Source, data_problems, load_text
from data.tokenizer import TokenizerConfig, TokenizerKind, encode, encode_chunks, train_tokenizer

__all__ = [
    "DataConfig",
    "DataError",
    "Source",
    "TokenData",
    "TokenizerConfig",
    "TokenizerKind",
    "check_fits",
    "data_problems",
    "draw_windows",
    "encode",
    "encode_chunks",
    "load_text",
    "prepare_tokens",
    "train_tokenizer",
    "window_at",
]
