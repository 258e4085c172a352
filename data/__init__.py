"""The text a model learns from: sources, tokenizers, the token cache and batches."""

from data.batches import check_fits, get_batch
from data.cache import TokenData, prepare_tokens
from data.sources import DataConfig, DataError, Source, load_text
from data.tokenizer import TokenizerConfig, TokenizerKind, encode, train_tokenizer

__all__ = [
    "DataConfig",
    "DataError",
    "Source",
    "TokenData",
    "TokenizerConfig",
    "TokenizerKind",
    "check_fits",
    "encode",
    "get_batch",
    "load_text",
    "prepare_tokens",
    "train_tokenizer",
]
