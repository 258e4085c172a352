"""Generate text from a trained TinyLM checkpoint, with the tokenizer stored in it.

python sample.py ckpt=outputs/DATE/TIME                    # the run's last.pt (its best.pt if last.pt is damaged)
python sample.py ckpt=outputs/DATE/TIME/best.pt prompt="ROMEO:" num_samples=3 max_new_tokens=300 temperature=0.8 \
    top_k=40
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)
import trainer.startup  # noqa: F401 (first of all: a Ctrl-C while torch loads ends in one line, trainer/startup.py)

# isort: split
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import hydra
import torch
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer

from model import ModelConfig, TinyLM
from task import Task
from trainer.checkpoint import BEST, LAST, CheckpointError
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.config import ConfigError, to_typed
from trainer.distributed import pick_device
from trainer.memory import free_bytes
from viewer.checkpoints import load, named_checkpoint
from viewer.generation import blanks_problem, seed_problem, temperature_problem, write


@dataclass
class SampleConfig:
    ckpt: Optional[str] = None  # a checkpoint file, or a run directory (its last.pt; its best.pt if that is damaged)
    prompt: str = "\n"  # the text the samples continue
    num_samples: int = 1
    max_new_tokens: int = 500
    temperature: float = 1.0  # below 1: safer, more repetitive; above 1: wilder
    top_k: Optional[int] = None  # sample only among the k likeliest tokens
    seed: int = 1337
    likeliest: bool = False  # take each token's likeliest (top_k=1): greedy text, or each blank's best guess
    device: str = "auto"


ConfigStore.instance().store(name="sample_schema", node=SampleConfig)  # the first entry of configs/sample.yaml


MAX_NEW_TOKENS = 100_000  # minutes of generation on a CPU; more is a typo, not a wish
READ_ORDER = (LAST, BEST)  # a run directory's checkpoint: the latest, else the lowest validation loss


def check_sample_config(config: SampleConfig) -> None:
    problems = [] if config.ckpt else ["ckpt: give a checkpoint file or a run directory, e.g. ckpt=outputs/DATE/TIME"]
    if config.num_samples <= 0:
        problems.append(f"num_samples={config.num_samples}: must be positive")
    if problem := temperature_problem(config.temperature):
        problems.append(problem)
    if not 0 <= config.max_new_tokens <= MAX_NEW_TOKENS:
        problems.append(f"max_new_tokens={config.max_new_tokens}: must be between 0 and {MAX_NEW_TOKENS}")
    if config.top_k is not None and config.top_k <= 0:
        problems.append(f"top_k={config.top_k}: must be positive")
    if problem := seed_problem(config.seed):
        problems.append(problem)
    if problems:
        raise ConfigError("; ".join(problems))


def encode_prompt(task: Task, prompt: str) -> list[int]:
    """The prompt's token ids; characters a char-level model never saw are refused (BPE encodes any text), and so is
    a prompt the run cannot write from (one without a blank, for a model that fills blanks)."""
    if not prompt:
        raise ConfigError('prompt: must not be empty; the default is a line break, prompt="\\n"')
    ids = task.encode(prompt, "prompt")
    if problem := blanks_problem(task, ids, "prompt"):
        raise ConfigError(problem)
    return ids


def generation_bytes(config: SampleConfig, prompt_tokens: int, model: ModelConfig) -> int:
    """About the most memory generating takes at once: each sample's forward pass over its context (the logits
    over the vocabulary, the MLP's activations, the attention scores), and the ids as they grow, twice while
    torch.cat copies them, and once more as Python's list."""
    context = min(model.block_size, prompt_tokens + config.max_new_tokens)
    forward = 4 * context * (model.vocab_size + 4 * model.d_model + context)  # float32
    ids = 3 * 8 * (prompt_tokens + config.max_new_tokens)
    return config.num_samples * (forward + ids)


def check_memory(config: SampleConfig, prompt_tokens: int, model: ModelConfig, device: torch.device) -> None:
    """Refuse, before any work, a num_samples whose generation cannot fit in the memory free now."""
    needed, free = generation_bytes(config, prompt_tokens, model), free_bytes(device)
    if free is not None and needed > free:
        fits = free * config.num_samples // needed
        raise ConfigError(
            f"num_samples={config.num_samples}: generating them at once needs about {needed / 1e9:,.1f} GB on "
            f"{device.type}, and {free / 1e9:,.1f} GB is free; lower num_samples (at most about {fits} fit), "
            "or max_new_tokens"
        )


def generate(
    task: Task, model: TinyLM, prompt: list[int], config: SampleConfig, device: torch.device
) -> list[list[int]]:
    """Each sample's ids as the task writes them (continued, or its blanks filled); what the estimate missed (memory
    that ran out, weights that give no probabilities) becomes one line."""
    try:
        top_k = 1 if config.likeliest else config.top_k
        settings = config.max_new_tokens, config.temperature, top_k, config.seed, config.num_samples
        return write(task, model, prompt, *settings, device=device)
    except (MemoryError, RuntimeError) as error:  # torch.OutOfMemoryError is a RuntimeError
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        if isinstance(error, MemoryError) or "allocate" in reason or "out of memory" in reason:
            raise ConfigError(
                f"num_samples={config.num_samples}: generating them ran out of memory ({reason}); lower num_samples "
                "or max_new_tokens"
            ) from None
        if "probability tensor" in reason:  # NaN or inf among the softmax's outputs
            raise CheckpointError(
                f"ckpt={config.ckpt}: the model's next-token probabilities are not numbers (NaN or inf): its weights "
                "are damaged; sample from another checkpoint of the run (best.pt or last.pt)"
            ) from None
        raise


def print_samples(tokenizer: Tokenizer, samples: list[list[int]]) -> None:
    """The samples on stdout, a line of dashes between them (a reader that stops early, or a full disk: trainer/cli.py's
    Output)."""
    for i, ids in enumerate(samples):
        if i:
            print("\n" + "-" * 40)
        print(tokenizer.decode(ids))


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="sample")
def main(cfg: DictConfig) -> None:
    with one_line_errors():
        config = to_typed(SampleConfig, OmegaConf.to_container(cfg))
        check_sample_config(config)
        chosen = named_checkpoint(config.ckpt, "ckpt", READ_ORDER)
        if chosen.note:  # the run's last.pt is damaged: its best.pt is read, and said so
            print(chosen.note, file=sys.stderr)
        checkpoint = load(chosen.path)  # weights only: no code runs
        prompt = encode_prompt(checkpoint.task, config.prompt)
        device = pick_device(config.device, "device")
        check_memory(config, len(prompt), checkpoint.model.config, device)
        model = checkpoint.model.to(device)
        print_samples(checkpoint.tokenizer, generate(checkpoint.task, model, prompt, config, device))


if __name__ == "__main__":
    run_with_one_line_errors(main)
