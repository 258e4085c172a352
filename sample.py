"""Generate text from a trained TinyLM checkpoint, with the tokenizer stored in it.

python sample.py ckpt=outputs/DATE/TIME                    # the run's last.pt
python sample.py ckpt=outputs/DATE/TIME/best.pt prompt="ROMEO:" num_samples=3 max_new_tokens=300 temperature=0.8 top_k=40
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import hydra
import torch
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer

from data.tokenizer import UNKNOWN
from model import TinyLM
from trainer.checkpoint import checkpoint_path, load_checkpoint, model_config
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.config import ConfigError, to_typed
from trainer.distributed import pick_device


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


ConfigStore.instance().store(name="sample_schema", node=SampleConfig)  # the first entry of configs/sample.yaml


MAX_NEW_TOKENS = 100_000  # minutes of generation on a CPU; more is a typo, not a wish
TEMPERATURES = (1e-3, 100.0)  # outside, the logits overflow or the softmax is uniform to float precision


def check_sample_config(config: SampleConfig) -> None:
    problems = [] if config.ckpt else ["ckpt: give a checkpoint file or a run directory, e.g. ckpt=outputs/DATE/TIME"]
    if config.num_samples <= 0:
        problems.append(f"num_samples={config.num_samples}: must be positive")
    low, high = TEMPERATURES
    if not math.isfinite(config.temperature):
        problems.append(f"temperature={config.temperature}: must be a finite number")
    elif config.temperature <= 0:
        problems.append(f"temperature={config.temperature}: must be positive")
    elif not low <= config.temperature <= high:
        problems.append(f"temperature={config.temperature}: must be between {low} and {high:g}")
    if not 0 <= config.max_new_tokens <= MAX_NEW_TOKENS:
        problems.append(f"max_new_tokens={config.max_new_tokens}: must be between 0 and {MAX_NEW_TOKENS}")
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


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="sample")
def main(cfg: DictConfig) -> None:
    with one_line_errors():
        config = to_typed(SampleConfig, OmegaConf.to_container(cfg))
        check_sample_config(config)
        checkpoint = load_checkpoint(checkpoint_path(config.ckpt, "ckpt"))  # weights only: no code runs
        tokenizer = Tokenizer.from_str(checkpoint["tokenizer"])
        prompt = encode_prompt(tokenizer, config.prompt)
        device = pick_device(config.device)

    model = TinyLM(model_config(checkpoint)).to(device)
    model.load_state_dict(checkpoint["model"])
    model.eval()
    context = torch.tensor([prompt] * config.num_samples, device=device)
    generator = torch.Generator(device).manual_seed(config.seed)
    generated = model.generate(context, config.max_new_tokens, config.temperature, config.top_k, generator)
    for i, ids in enumerate(generated.tolist()):
        if i:
            print("\n" + "-" * 40)
        print(tokenizer.decode(ids))


if __name__ == "__main__":
    run_with_one_line_errors(main)
