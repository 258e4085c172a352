"""Text from a trained model: the one sampling code that sample.py prints and the Attention tab's /generate
answers, so that the same checkpoint, prompt, length, temperature and seed give the same text in both. A model
trained to predict the next token continues a text; one trained to fill blanks fills the blanks of a text."""

import math

import torch

from model import CAUSAL, Mask, TinyLM
from task import Task

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
    mask: Mask = CAUSAL,
) -> list[list[int]]:
    """Each sample's ids, prompt first: `num_samples` continuations drawn together by the model's generate through
    the task's `mask` (a prefix LM's prefix is the window's first tokens: the prompt's, when it holds as many), from
    one generator seeded with `seed` on `device` (the model's own by default)."""
    device = device or next(model.parameters()).device
    context = torch.tensor([prompt] * num_samples, device=device)
    generator = torch.Generator(device).manual_seed(seed)
    return model.generate(context, max_new_tokens, temperature, top_k, generator, mask).tolist()


@torch.no_grad()
def fill_blanks(
    model: TinyLM,
    ids: list[int],
    blank: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 1337,
    num_samples: int = 1,
    device: torch.device | None = None,
    mask: Mask = CAUSAL,
) -> list[list[int]]:
    """Each sample's ids: the text with every blank replaced by a token drawn from the model's prediction there at
    `temperature` (among the `top_k` likeliest; top_k=1 takes the likeliest). One forward reads the whole text
    through the task's `mask` (an unmasked model: every blank filled from both of its sides at once), each blank
    drawn on its own."""
    device = device or next(model.parameters()).device
    text = torch.tensor([ids], device=device)
    blanks = (text[0] == blank).nonzero().flatten()
    logits = model(text, mask=mask)[0, blanks] / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    generator = torch.Generator(device).manual_seed(seed)
    samples = []
    for _ in range(num_samples):
        filled = text[0].clone()
        filled[blanks] = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
        samples.append(filled.tolist())
    return samples


def blanks_problem(task: Task, ids: list[int], setting: str) -> str:
    """'' for a text the task's model can write from, else the one line saying why not: a model that fills blanks
    needs a blank in a text it reads whole."""
    if task.continues_text:
        return ""
    if task.blank not in ids:
        return (
            f"{setting}: this run fills blanks (task={task.name}) and does not continue a text: mark each missing "
            "token with _ (a literal _ is \\_)"
        )
    block_size = task.block_size
    if len(ids) > block_size:
        return f"{setting}: {len(ids)} tokens; a model that fills blanks reads at most model.block_size={block_size}"
    return ""


def write(
    task: Task,
    model: TinyLM,
    prompt: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 1337,
    num_samples: int = 1,
    device: torch.device | None = None,
) -> list[list[int]]:
    """Each sample's ids as the task writes: the prompt continued by max_new_tokens tokens, or its blanks filled."""
    drawing = temperature, top_k, seed, num_samples, device, task.mask
    if task.continues_text:
        return sample_ids(model, prompt, max_new_tokens, *drawing)
    return fill_blanks(model, prompt, task.blank, *drawing)
