"""Runs of different tasks scored on the same tokens: each run's last.pt on the tokens a prefix LM scores (those after
the prefix) of the same validation windows, through its task's true mask. Each task's val/loss scores its own tokens
(every next token, or those after the prefix), so this is the number that compares a causal LM with a prefix LM."""

from dataclasses import replace
from pathlib import Path

import torch

from data import prepare_tokens
from summary.runs import SummaryError, read_runs, shared_of
from summary.seeds import Configuration, by_configuration, sweeps_seeds
from summary.tables import distinct_name, header, row
from task import Batch
from task.config import TaskConfig
from task.curves import batches_loss
from task.next_token import NextToken
from task.prefix_lm import PrefixLM
from trainer.checkpoint import load_with_model
from trainer.config import TrainConfig, to_typed
from viewer.checkpoints import ready

TAG = "after_prefix"  # the value, kept beside a run's curves so that summary.seeds groups it as any final value
BATCHES, WINDOWS, SEED = 10, 32, 0  # 320 validation windows drawn from one seed: the same for every run
LAST = "last.pt"


def after_prefix_table(paths: list[Path], share: float) -> str:
    """A Markdown table of every run under `paths` scored on the tokens after a prefix of `share` of each window:
    where the runs sweep trainer.seed, each configuration's mean ± sd over its finished seeds and each seed's value;
    under it, the runs left out and why."""
    runs, windows, skipped = read_runs(paths), {}, []
    for run in runs:
        loss = after_prefix_loss(run.path / LAST, share, windows)
        if isinstance(loss, str):
            skipped.append(f"`{run.name}`: not scored, {loss}.")
        else:
            run.curves[TAG] = [(run.last_step or 0, loss)]
    lines = [
        f"Nats per token on the tokens after a prefix of {share:g} of each window (those task=prefix_lm scores), of "
        f"the same {BATCHES * WINDOWS} validation windows for every run, read by its {LAST} through its task's true "
        "mask.",
        "",
    ]
    if sweeps_seeds(runs):
        lines += header(["configuration", "after the prefix", "per seed"])
        configurations = by_configuration(runs)
        shared = shared_of(configurations)
        lines += [row(seeds_cells(configuration, shared)) for configuration in configurations]
    else:
        lines += header(["run", "after the prefix"])
        lines += [row([run.name, rounded(run.final(TAG))]) for run in runs]
    return "\n".join([*lines, "", *skipped] if skipped else lines) + "\n"


def seeds_cells(configuration: Configuration, shared: list[str]) -> list[str]:
    name, spread = distinct_name(configuration, shared), configuration.spread(TAG)
    if spread is None:
        return [name, "", ""]
    seeds = ", ".join(rounded(run.final(TAG)) for run in configuration.runs)
    return [name, str(spread), f"({seeds})"]


def rounded(loss: float | None) -> str:
    return "" if loss is None else f"{loss:.3f}"


def after_prefix_loss(path: Path, share: float, windows: dict[tuple, list[Batch]]) -> float | str:
    """The loss of the checkpoint at `path` on the tokens after a prefix of `share`, or why it has none; `windows`
    holds the batches drawn so far, by the data and the window's length, so that every run reads the same ones."""
    if not path.exists():
        return f"no {LAST}"
    state, model = load_with_model(path)
    checkpoint, config = ready(state, model), to_typed(TrainConfig, state["config"])
    if not isinstance(checkpoint.task, NextToken):
        return f"its task predicts no next token (task={checkpoint.task.name})"
    scoring = replace(config, task=TaskConfig(name=PrefixLM.name, prefix_share=share))
    if problems := PrefixLM.problems(scoring):
        raise SummaryError(f"--after-prefix {share:g}: {path}: {problems[0]}")
    data = prepare_tokens(config.data, config.tokenizer)
    key = data.path, config.model.block_size
    if key not in windows:
        task, generator = PrefixLM(scoring, data.tokenizer), torch.Generator().manual_seed(SEED)
        windows[key] = [task.draw(data.val, WINDOWS, generator, torch.device("cpu")) for _ in range(BATCHES)]
    with torch.no_grad():
        return batches_loss(checkpoint.model, windows[key], checkpoint.task.mask, causal=True)
