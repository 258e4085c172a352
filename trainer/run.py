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
from torch.nn.parallel import DistributedDataParallel

from data import TokenData, check_fits, get_batch, prepare_tokens
from model import TinyLM
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
    """A run being trained: what the loop reads and changes (summary/runs.py's Run is a finished one read back)."""

    config: TrainConfig  # with model.vocab_size set from the tokenizer
    ranks: Ranks
    data: TokenData
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
        settings = self.config.trainer
        return get_batch(
            self.data.train, settings.batch_size, self.config.model.block_size, self.batch_generator, self.ranks.device
        )

    def sample(self) -> str:
        """What the model writes after a line break, the same draw at every call."""
        generator = torch.Generator(self.ranks.device).manual_seed(self.config.trainer.seed)
        ids = self.model.generate(self.prompt, self.config.trainer.sample_tokens, generator=generator)[0]
        return self.data.tokenizer.decode(ids.tolist())

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
            tokenizer=self.data.tokenizer.to_str(),
            data=self.trained_on,
        )


def build_model(config: TrainConfig, device: torch.device) -> tuple[TinyLM, torch.optim.Optimizer]:
    """The model (config.model.vocab_size set) on `device`, initialised from the seed, compiled if the settings say
    so, and its optimizer."""
    check_precision(device, config.trainer.precision)
    torch.manual_seed(config.trainer.seed)  # the same initial weights on every rank
    allow_tf32()
    model = TinyLM(config.model).to(device)
    optimizer = make_optimizer(model, config.optim)
    if config.trainer.compile:
        model.compile()  # compiles forward in place: state_dict keys and model.loss stay as they are
    return model, optimizer


def build_run(config: TrainConfig, ranks: Ranks, checkpoint: Optional[dict] = None) -> TrainingRun:
    """A run as `config` says, from the start or from `checkpoint`, on this rank's device."""
    settings, device = config.trainer, ranks.device
    started = time.perf_counter()
    with ranks.main_first():  # rank 0 tokenizes into the cache, the others read it
        data = prepare_tokens(config.data, config.tokenizer)
    check_fits({"train": data.train, "val": data.val}, config.model.block_size)
    record = trained_on(data)
    if checkpoint:
        check_same_data(checkpoint, data.tokenizer.to_str(), record)
    log.info(
        "data: %s train and %s val tokens, vocabulary %d (%s %s in %.1fs)",
        f"{len(data.train):,}",
        f"{len(data.val):,}",
        data.tokenizer.get_vocab_size(),
        "tokenized into" if data.built else "read from",
        data.path,
        time.perf_counter() - started,
    )

    if config.optim.warmup_steps > settings.max_steps:
        log.warning(
            "optim.warmup_steps=%d is longer than the run: the learning rate rises over all %d steps",
            config.optim.warmup_steps,
            settings.max_steps,
        )
    config = replace(config, model=replace(config.model, vocab_size=data.tokenizer.get_vocab_size()))
    model, optimizer = build_model(config, device)
    batch_generator = torch.Generator().manual_seed(ranks.seed(settings.seed))  # each rank its own batches
    scaler = grad_scaler(device, settings.precision)
    step, best_val, loss_sum = 0, math.inf, torch.zeros(())
    if checkpoint:
        step, best_val, loss_sum = restore(checkpoint, model, optimizer, batch_generator, scaler, ranks)
        log.info("resumed from step %d", step)
    # DistributedDataParallel averages the ranks' gradients in backward; one process trains the model itself.
    train_step = TrainStep.of(config, DistributedDataParallel(model) if ranks.distributed else model, optimizer, scaler)
    log.info(
        "model: %s parameters on %s%s, threads=%d; scale=%s causal=%s d_k=%d qk_init=%s qk_norm=%s softcap=%g",
        f"{sum(p.numel() for p in model.parameters()):,}",
        device,
        f" x {ranks.world_size} processes" if ranks.distributed else "",
        torch.get_num_threads(),
        config.model.scale,
        config.model.causal,
        config.model.d_k,
        config.model.qk_init.name,
        config.model.qk_norm,
        config.model.softcap,
    )
    probe = probe_windows(data.val, config.model.block_size, settings.seed + 2, device)
    prompt = torch.tensor([data.tokenizer.encode("\n").ids], device=device)
    return TrainingRun(
        config,
        ranks,
        data,
        model,
        train_step,
        batch_generator,
        step,
        best_val,
        loss_sum.to(device),
        probe,
        prompt,
        record,
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
    return checkpoint["step"], checkpoint["best_val"], checkpoint["loss_sum"]
