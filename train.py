"""Train TinyLM, the single-head self-attention language model, and log it for TensorBoard.

python train.py                                   # the defaults: char-level Shakespeare, about a minute on a CPU
python train.py model.scale=false model.d_k=512   # switch off 1/sqrt(d_k) and watch the softmax saturate
python train.py -m model.causal=true,false        # a sweep: one job per value
tensorboard --logdir outputs                      # (or multirun) to see the curves
"""

import logging
import math
import signal
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Optional

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from torch.nn.parallel import DistributedDataParallel
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from data import DataError, check_fits, get_batch, prepare_tokens
from model import TinyLM
from trainer import (
    ConfigError,
    allow_tf32,
    TrainConfig,
    estimate_loss,
    learning_rate,
    log_attention,
    log_grad_norms,
    log_hparams,
    log_sample,
    make_optimizer,
    pick_device,
    probe_windows,
    register_schema,
    to_train_config,
    train_step,
)
from trainer import distributed
from trainer.checkpoint import BEST, LAST, load_checkpoint, restore_training_state, save_checkpoint, training_state
from trainer.cli import run_with_one_line_errors
from trainer.distributed import Ranks
from trainer.interrupt import Interrupted, NonFiniteLoss, StopSignals
from trainer.resume import checkpoint_path, resumed_config
from trainer.run_dir import register_resolvers

log = logging.getLogger("tinylm")
register_schema()
register_resolvers()  # configs/train.yaml's hydra.run.dir: resumed runs and torchrun ranks share one directory


def train(
    config: TrainConfig, run_dir: Path, checkpoint: Optional[dict] = None, ranks: Optional[Ranks] = None
) -> dict[str, float]:
    """Train as `config` says, writing into `run_dir`, from the start or from `checkpoint`; under torchrun,
    `ranks` says which process this is (rank 0 alone writes).

    Returns the last evaluation's losses. Raises Interrupted after SIGINT or SIGTERM (a checkpoint is saved
    first) and NonFiniteLoss when the loss stops being a number (the last good checkpoint stays).
    """
    settings = config.trainer
    ranks = ranks or Ranks(device=pick_device(settings.device))
    device = ranks.device
    torch.manual_seed(settings.seed)  # the same initial weights on every rank
    allow_tf32()

    # The data: token ids from the cache (tokenized on first use, by rank 0), and the tokenizer that made them.
    started = time.perf_counter()
    with ranks.main_first():
        data = prepare_tokens(config.data, config.tokenizer)
    splits = {"train": data.train, "val": data.val}
    check_fits(splits, config.model.block_size)
    if checkpoint and checkpoint["tokenizer"] != data.tokenizer.to_str():
        raise DataError("trainer.resume: the training text or tokenizer changed since the checkpoint was written")
    if ranks.main:
        data.tokenizer.save(str(run_dir / "tokenizer.json"))
    vocab_size = data.tokenizer.get_vocab_size()
    log.info(
        "data: %s train and %s val tokens, vocabulary %d (%s %s in %.1fs)",
        f"{len(data.train):,}", f"{len(data.val):,}", vocab_size,
        "tokenized into" if data.built else "read from", data.path, time.perf_counter() - started,
    )  # fmt: skip

    # The model and its optimizer, fresh or as the checkpoint left them; each rank draws its own batches.
    config = replace(config, model=replace(config.model, vocab_size=vocab_size))
    model = TinyLM(config.model).to(device)
    optimizer = make_optimizer(model, config.optim)
    batches = torch.Generator().manual_seed(ranks.seed(settings.seed))
    first_step, best_val, loss_sum = 1, math.inf, torch.zeros((), device=device)
    if checkpoint:
        first_step, best_val, loss_sum = restore_training_state(checkpoint, model, optimizer, batches, ranks)
        loss_sum = loss_sum.to(device)  # a log window may span the interruption
        log.info("resumed from step %d of %s", first_step - 1, run_dir)
    if settings.compile:
        model.compile()  # compiles forward in place: state_dict keys and model.loss stay as they are
    # DistributedDataParallel averages the ranks' gradients in backward; one process trains the model itself.
    trained = DistributedDataParallel(model) if ranks.distributed else model
    log.info(
        "model: %s parameters on %s%s, threads=%d; scale=%s causal=%s d_k=%d qk_init=%s",
        f"{sum(p.numel() for p in model.parameters()):,}", device,
        f" x {ranks.world_size} processes" if ranks.distributed else "", torch.get_num_threads(),
        config.model.scale, config.model.causal, config.model.d_k, config.model.qk_init.name,
    )  # fmt: skip

    # TensorBoard drops whatever a killed run logged after its checkpoint: no step appears twice.
    writer = SummaryWriter(run_dir, purge_step=first_step if checkpoint else None) if ranks.main else None
    tokens_per_step = settings.batch_size * config.model.block_size * ranks.world_size

    probe = probe_windows(data.val, config.model.block_size, settings.seed + 2, device)  # the same at every evaluation
    prompt = torch.tensor([data.tokenizer.encode("\n").ids], device=device)

    def sample_text() -> str:
        generator = torch.Generator(device).manual_seed(settings.seed)
        return data.tokenizer.decode(model.generate(prompt, settings.sample_tokens, generator=generator)[0].tolist())

    def evaluate(step: int) -> dict[str, float]:
        """Both splits' losses (averaged over ranks), and on rank 0 what the attention does and what the model writes."""
        losses = ranks.mean(estimate_loss(
            model, splits, settings.batch_size, settings.eval_iters, ranks.seed(settings.seed + 1), device,
            settings.precision,
        ))  # seed + 1: not the windows of the first training steps  # fmt: skip
        leak = "" if config.model.causal else f" (with the causal mask forced on: {losses['val_causal']:.4f})"
        log.info("step %d: train loss %.4f, val loss %.4f%s", step, losses["train"], losses["val"], leak)
        if ranks.main:
            writer.add_scalar("train/loss_eval", losses["train"], step)
            writer.add_scalar("val/loss", losses["val"], step)
            writer.add_scalar("val/loss_causal", losses["val_causal"], step)  # what a leaky model really knows
            log_attention(writer, model, probe, data.tokenizer, step)
            log_sample(writer, sample_text(), step)
        return losses

    def save(name: str, step: int) -> None:
        state = training_state(step, config, model, optimizer, batches, loss_sum, best_val, data.tokenizer, ranks)
        if ranks.main:
            writer.flush()  # everything logged up to this step is on disk before the checkpoint says so
            save_checkpoint(state, run_dir / name)

    def close() -> None:
        if ranks.main:
            writer.close()

    # The loop: a step on a random batch; every log_interval steps the mean training loss, every
    # eval_interval steps (and at the first and the last) the loss on both splits and a checkpoint of the
    # best model; every ckpt_interval steps (and at the last) a checkpoint to resume from.
    losses = evaluate(0) if not checkpoint else {}
    first_nonfinite = torch.zeros((), dtype=torch.long, device=device)  # a step number, kept on the device
    progress = tqdm(initial=first_step - 1, total=settings.max_steps, desc="train", unit="step",
                    disable=None if ranks.main else True, dynamic_ncols=True)  # fmt: skip
    with StopSignals() as stop:
        last_log = time.perf_counter()
        for step in range(first_step, settings.max_steps + 1):
            lr = learning_rate(step, config.optim, settings.max_steps)
            x, y = get_batch(data.train, settings.batch_size, config.model.block_size, batches, device)
            last = step == settings.max_steps
            log_now = step % settings.log_interval == 0 or last
            grad_norms = (
                partial(log_grad_norms, writer, model, step) if log_now and ranks.main else None
            )  # before clipping
            loss = train_step(trained, optimizer, x, y, lr, config.optim.grad_clip, settings.precision, grad_norms)
            # Both stay on the device: reading them waits for the step, so only when logging or saving.
            loss_sum += loss
            first_nonfinite = torch.where((first_nonfinite == 0) & ~loss.isfinite(), step, first_nonfinite)
            progress.update()

            # Every rank takes the same decisions at the same step; a signal from now on counts at the next one.
            stopping = ranks.maximum(stop.requested or 0)
            eval_now = step % settings.eval_interval == 0 or last
            save_now = step % settings.ckpt_interval == 0 or last or stopping
            if (log_now or eval_now or save_now) and (nonfinite_step := ranks.maximum(int(first_nonfinite))):
                close()
                raise NonFiniteLoss(nonfinite_step, run_dir)
            if log_now and ranks.main:
                steps_logged = step % settings.log_interval or settings.log_interval
                now = time.perf_counter()
                train_loss, tokens_per_sec = (
                    loss_sum.item() / steps_logged,
                    steps_logged * tokens_per_step / (now - last_log),
                )
                writer.add_scalar("train/loss", train_loss, step)
                writer.add_scalar("train/lr", lr, step)
                writer.add_scalar("perf/tokens_per_sec", tokens_per_sec, step)
                progress.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tokens_per_sec:,.0f}", refresh=False)
                loss_sum.zero_()
                last_log = time.perf_counter()
            if eval_now:
                eval_started = time.perf_counter()
                losses = evaluate(step)
                if losses["val"] < best_val:
                    best_val = losses["val"]
                    save(BEST, step)
                last_log += time.perf_counter() - eval_started  # evaluation time is not training throughput
            if save_now:
                save(LAST, step)
            if stopping and not last:
                close()
                raise Interrupted(signal.Signals(stopping), step, run_dir, ranks.world_size)
    progress.close()
    if ranks.distributed:
        agree = ranks.replicas_agree(model)
        (log.info if agree else log.error)("weights after the last step: %s on all %d processes",
                                           "identical" if agree else "NOT identical", ranks.world_size)  # fmt: skip

    # The run's settings next to its final metrics, and what the model writes now.
    if ranks.main:
        final_metrics = [
            "train/loss",
            "train/loss_eval",
            "val/loss",
            "val/loss_causal",
            "attn/entropy",
            "attn/saturated_frac",
        ]
        log_hparams(writer, config, final_metrics)
        log.info("sample after %d steps:\n%s", settings.max_steps, sample_text())
    close()
    ranks.barrier()  # all ranks leave together: torchrun takes one that ends early and abruptly for a failure
    return losses


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="train")
def main(cfg: DictConfig) -> float:
    try:
        # Every value is checked before any work starts; a resumed run takes its settings from its checkpoint.
        checkpoint, run_dir = None, Path(HydraConfig.get().runtime.output_dir)
        if cfg.trainer.resume:
            path = checkpoint_path(cfg.trainer.resume)
            checkpoint, run_dir = load_checkpoint(path), path.parent
            config = resumed_config(checkpoint["config"], cfg, HydraConfig.get().overrides.task, checkpoint["step"])
        else:
            config = to_train_config(cfg)
        ranks = distributed.start(config.trainer.device)
        distributed.quiet_other_ranks(ranks)
        with logging_redirect_tqdm():
            started = time.perf_counter()
            try:
                losses = train(config, run_dir, checkpoint, ranks)
            finally:
                distributed.stop(ranks)
        log.info(
            "done in %.0fs: val loss %.4f; tensorboard --logdir %s",
            time.perf_counter() - started,
            losses["val"],
            run_dir,
        )
    except (ConfigError, DataError, NonFiniteLoss) as error:
        sys.exit(f"error: {error}")  # one line, no traceback: the message names the setting
    except Interrupted as stopped:
        if ranks.main:
            print(stopped, file=sys.stderr)
        sys.exit(stopped.exit_status)
    return losses["val"]  # for Hydra sweepers that minimise it


if __name__ == "__main__":
    run_with_one_line_errors(main)
