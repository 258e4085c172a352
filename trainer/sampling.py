"""Settings of sample.py, and turning its prompt into token ids the model knows."""

from dataclasses import dataclass
from typing import Optional

from tokenizers import Tokenizer

from data.tokenizer import UNKNOWN
from trainer.config import ConfigError


@dataclass
class SampleConfig:
    ckpt: Optional[str] = None  # a checkpoint file, or a run directory (its last.pt)
    prompt: str = "\n"  # the text the samples continue
    num_samples: int = 1
    max_new_tokens: int = 500
    temperature: float = 1.0  # below 1: safer, more repetitive; above 1: wilder
    top_k: Optional[int] = None  # sample only among the k likeliest tokens
    seed: int = 1337
    device: str = "auto"


def check_sample_config(config: SampleConfig) -> None:
    problems = [] if config.ckpt else ["ckpt: give a checkpoint file or a run directory, e.g. ckpt=outputs/DATE/TIME"]
    problems += [f"{key}={getattr(config, key)}: must be positive"
                 for key in ("num_samples", "temperature") if getattr(config, key) <= 0]  # fmt: skip
    if config.max_new_tokens < 0:
        problems.append(f"max_new_tokens={config.max_new_tokens}: must not be negative")
    if config.top_k is not None and config.top_k <= 0:
        problems.append(f"top_k={config.top_k}: must be positive")
    if problems:
        raise ConfigError("; ".join(problems))


def encode_prompt(tokenizer: Tokenizer, prompt: str) -> list[int]:
    """The prompt's token ids; characters a char-level model never saw are refused (BPE encodes any text)."""
    if not prompt:
        raise ConfigError('prompt: must not be empty; the default is a line break, prompt="\\n"')
    encoding = tokenizer.encode(prompt)
    unknown_id = tokenizer.token_to_id(UNKNOWN)
    unknown = sorted(
        {prompt[start:end] for token, (start, end) in zip(encoding.ids, encoding.offsets) if token == unknown_id}
    )
    if unknown:
        raise ConfigError(f"prompt: {', '.join(map(repr, unknown))} never occurred in this model's training text")
    return encoding.ids
