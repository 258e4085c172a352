"""Text from a trained model: the one sampling code that sample.py prints and the Attention tab's /generate
answers, so that the same checkpoint, prompt, length, temperature and seed give the same text in both."""

import math

import torch

from model import TinyLM

TEMPERATURES = (1e-3, 100.0)  # outside, the logits overflow or the softmax is uniform to float precision
SEEDS = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed takes


def temperature_problem(temperature: object, setting: str = "temperature") -> str:
    """'' for a temperature sampling can use, else the one line saying why not."""
    low, high = TEMPERATURES
    if not isinstance(temperature, int | float) or isinstance(temperature, bool):
        return f"{setting}={temperature!r}: must be a number"
    if not math.isfinite(temperature):
        return f"{setting}={temperature}: must be a finite number"
    if temperature <= 0:
        return f"{setting}={temperature}: must be positive"
    if not low <= temperature <= high:
        return f"{setting}={temperature}: must be between {low} and {high:g}"
    return ""


def seed_problem(seed: object, setting: str = "seed") -> str:
    if not isinstance(seed, int) or isinstance(seed, bool):
        return f"{setting}={seed!r}: must be a whole number"
    if not SEEDS[0] <= seed <= SEEDS[1]:
        return f"{setting}={seed}: must be between {SEEDS[0]} and {SEEDS[1]}"
    return ""


def sample_ids(
    model: TinyLM,
    prompt: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 1337,
    num_samples: int = 1,
    device: torch.device | None = None,
) -> list[list[int]]:
    """Each sample's ids, prompt first: `num_samples` continuations drawn together by the model's generate, from
    one generator seeded with `seed` on `device` (the model's own by default)."""
    device = device or next(model.parameters()).device
    context = torch.tensor([prompt] * num_samples, device=device)
    generator = torch.Generator(device).manual_seed(seed)
    return model.generate(context, max_new_tokens, temperature, top_k, generator).tolist()
