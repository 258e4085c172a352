"""Building a run: its data, model, optimizer and training state (TrainingRun), fresh or as a checkpoint left them.

bench.py builds its models with the same build_model, so it measures what train.py trains.
"""

import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Optional

import torch
from torch import Tensor

from data import TokenData, check_fits, prepare_tokens
from model import TinyLM
from task import Task, task_for
from trainer.checkpoint import checkpoint_state, restore_rng_states
from trainer.config import ConfigError, TrainConfig
from trainer.diagnostics import probe_windows
from trainer.distributed import Ranks, allow_tf32
from trainer.optim import make_optimizer
from trainer.resume import check_same_data, trained_on
from trainer.step import TrainStep, check_precision, grad_scaler

log = logging.getLogger("tinylm")


@dataclass
class TrainingRun:
    """A run being trained: what the loop reads and changes (summary/runs.py's RunCurves is a finished one's events,
    viewer/runs.py's RunCheckpoints its checkpoints)."""

    config: TrainConfig  # with model.vocab_size set from the tokenizer
    ranks: Ranks
    data: TokenData
    task: Task  # what the model is trained to predict, reading with task.tokenizer
    model: TinyLM
    train_step: TrainStep  # the optimizer, the loss scaler, and under torchrun the DistributedDataParallel wrap
    batch_generator: torch.Generator  # draws this rank's training windows
    step: int  # the last step finished: 0 for a fresh run
    best_val: float  # the lowest validation loss so far
    loss_sum: Tensor  # the training losses since the last log step, summed on the device
    probe: Tensor  # the validation windows the attention diagnostics read, the same at every evaluation
    prompt: Tensor  # what samples continue: a line break
    trained_on: dict  # what identifies the training text and its tokens (resume.py trained_on), checked on resume

    def batch(self) -> tuple[Tensor, Tensor]:
        """The next training batch of this rank: inputs and labels."""
        return self.task.draw(self.data.train, self.config.trainer.batch_size, self.batch_generator, self.ranks.device)

    def sample(self) -> str | None:
        """What the model writes after a line break, the same draw at every call; None for a task that does not
        continue a text."""
        if not self.task.continues_text:
            return None
        generator = torch.Generator(self.ranks.device).manual_seed(self.config.trainer.seed)
        tokens = self.config.trainer.sample_tokens
        ids = self.model.generate(self.prompt, tokens, generator=generator, mask=self.task.mask)[0]
        return self.task.tokenizer.decode(ids.tolist())

    def state(self) -> dict:
        """Everything a checkpoint holds, for the step just finished; every rank calls it."""
        return checkpoint_state(
            self.step,
            self.config,
            self.ranks,
            model=self.model.state_dict(),
            optimizer=self.train_step.optimizer.state_dict(),
            batch_generator=self.batch_generator,
            scaler=self.train_step.scaler.state_dict(),
            loss_sum=self.loss_sum.detach().cpu(),
            best_val=self.best_val,
            tokenizer=self.task.tokenizer.to_str(),
            data=self.trained_on,
        )


def build_model(config: TrainConfig, device: torch.device) -> tuple[TinyLM, torch.optim.Optimizer]:
    """The model (config.model.vocab_size set) on `device`, initialised from the seed, and its optimizer. The model
    stays as it is: TrainStep.of compiles the training step's forward where trainer.compile says so."""
    check_precision(device, config.trainer.precision)
    torch.manual_seed(config.trainer.seed)  # the same initial weights on every rank
    allow_tf32()
    model = TinyLM(config.model).to(device)
    return model, make_optimizer(model, config.optim)


def build_run(config: TrainConfig, ranks: Ranks, checkpoint: Optional[dict] = None) -> TrainingRun:
    """A run as `config` says, from the start or from `checkpoint`, on this rank's device."""
    settings, device = config.trainer, ranks.device
    data, record = training_data(config, ranks)
    task = task_for(config, data.tokenizer)
    if checkpoint:
        check_same_data(checkpoint, task.tokenizer.to_str(), record, config.data)
    config = replace(config, model=replace(config.model, vocab_size=task.tokenizer.get_vocab_size()))
    model, optimizer = build_model(config, device)
    batch_generator = torch.Generator().manual_seed(ranks.seed(settings.seed))  # each rank its own batches
    scaler = grad_scaler(device, settings.precision)
    step, best_val, loss_sum = 0, math.inf, torch.zeros(())
    if checkpoint:
        step, best_val, loss_sum = restore(checkpoint, model, optimizer, batch_generator, scaler, ranks)
    log.info(model_line(config, model, ranks))
    return TrainingRun(
        config=config,
        ranks=ranks,
        data=data,
        task=task,
        model=model,
        train_step=TrainStep.of(config, model, optimizer, scaler, ranks.distributed, task.mask),
        batch_generator=batch_generator,
        step=step,
        best_val=best_val,
        loss_sum=loss_sum.to(device),
        probe=probe_windows(task, data.val, settings.seed + 2, device),
        prompt=torch.tensor([task.tokenizer.encode("\n").ids], device=device),
        trained_on=record,
    )


def training_data(config: TrainConfig, ranks: Ranks) -> tuple[TokenData, dict]:
    """The run's tokens (rank 0 tokenizes into the cache, the others read it), checked to fill a window of each
    split, and what a checkpoint records of them (resume.py: build_run checks them on resume)."""
    started = time.perf_counter()
    with ranks.main_first():
        data = prepare_tokens(config.data, config.tokenizer)
    check_fits({"train": data.train, "val": data.val}, config.model.block_size)
    record = trained_on(data, config.data)
    log.info(
        "data: %s train and %s val tokens, vocabulary %d (%s %s in %.1fs)",
        f"{len(data.train):,}",
        f"{len(data.val):,}",
        data.tokenizer.get_vocab_size(),
        "tokenized into" if data.built else "read from",
        data.path,
        time.perf_counter() - started,
    )
    return data, record


def model_line(config: TrainConfig, model: TinyLM, ranks: Ranks) -> str:
    """The log line that says what trains where: the size, the device and the lesson's switches."""
    settings = config.model
    processes = f" x {ranks.world_size} processes" if ranks.distributed else ""
    return (
        f"model: {sum(p.numel() for p in model.parameters()):,} parameters on {ranks.device}{processes}, "
        f"threads={torch.get_num_threads()}; scale={settings.scale} causal={settings.causal} d_k={settings.d_k} "
        f"qk_init={settings.qk_init.name} qk_norm={settings.qk_norm} softcap={settings.softcap:g}"
    )


def restore(
    checkpoint: dict,
    model: TinyLM,
    optimizer: torch.optim.Optimizer,
    batch_generator: torch.Generator,
    scaler: torch.amp.GradScaler,
    ranks: Ranks,
) -> tuple[int, float, Tensor]:
    """Puts the model, the optimizer and this rank's random states back; returns the step, the best val loss so far
    and the running sum of the training losses of the unfinished log window (it may span the interruption)."""
    if len(checkpoint["rng"]) != ranks.world_size:
        processes = len(checkpoint["rng"])
        raise ConfigError(
            f"trainer.resume: the checkpoint was written by {processes} processes; resume it with as many "
            f"(torchrun --nproc_per_node={processes}) to draw the same batches"
        )
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    if checkpoint.get("scaler"):  # a float16 run's loss scale; empty for others
        scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_states(checkpoint["rng"][ranks.rank], batch_generator)
    log.info("resumed from step %d", checkpoint["step"])
    return checkpoint["step"], checkpoint["best_val"], checkpoint["loss_sum"]
