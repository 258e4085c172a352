"""Train TinyLM, the single-head self-attention language model, and log it for TensorBoard.

    python train.py                                   # the defaults: char-level Shakespeare, about a minute on a CPU
    python train.py model.scale=false model.d_k=512   # switch off 1/sqrt(d_k) and watch the softmax saturate
    python train.py -m model.causal=true,false        # a sweep: one job per value
    tensorboard --logdir outputs                      # (or multirun) to see the curves
"""

import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from data import DataError, check_fits, get_batch, prepare_tokens
from model import TinyLM
from trainer import (
    ConfigError,
    TrainConfig,
    estimate_loss,
    learning_rate,
    log_hparams,
    log_sample,
    make_optimizer,
    pick_device,
    register_schema,
    to_train_config,
    train_step,
)

log = logging.getLogger("tinylm")
register_schema()


def train(config: TrainConfig, run_dir: Path) -> dict[str, float]:
    """Train as `config` says, writing into `run_dir`; returns the final evaluation's losses."""
    settings = config.trainer
    device = pick_device(settings.device)
    torch.manual_seed(settings.seed)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # float32 matmuls on tensor cores

    # The data: token ids from the cache (tokenized on first use), and the tokenizer that made them.
    started = time.perf_counter()
    data = prepare_tokens(config.data, config.tokenizer)
    splits = {"train": data.train, "val": data.val}
    check_fits(splits, config.model.block_size)
    data.tokenizer.save(str(run_dir / "tokenizer.json"))
    vocab_size = data.tokenizer.get_vocab_size()
    log.info(
        "data: %s train and %s val tokens, vocabulary %d (%s %s in %.1fs)",
        f"{len(data.train):,}", f"{len(data.val):,}", vocab_size,
        "tokenized into" if data.built else "read from", data.path, time.perf_counter() - started,
    )  # fmt: skip

    # The model and its optimizer.
    config = replace(config, model=replace(config.model, vocab_size=vocab_size))
    model = TinyLM(config.model).to(device)
    optimizer = make_optimizer(model, config.optim)
    if settings.compile:
        model.compile()  # compiles forward in place: state_dict keys and model.loss stay as they are
    log.info(
        "model: %s parameters on %s; scale=%s causal=%s d_k=%d qk_init=%s",
        f"{sum(p.numel() for p in model.parameters()):,}", device,
        config.model.scale, config.model.causal, config.model.d_k, config.model.qk_init.name,
    )  # fmt: skip

    # The loop: a step on a random batch; every log_interval steps the mean training loss, every
    # eval_interval steps (and at the first and the last) the loss on both splits.
    writer = SummaryWriter(run_dir)
    batches = torch.Generator().manual_seed(settings.seed)
    tokens_per_step = settings.batch_size * config.model.block_size
    loss_sum = torch.zeros((), device=device)

    def evaluate(step: int) -> dict[str, float]:
        losses = estimate_loss(
            model, splits, settings.batch_size, settings.eval_iters, settings.seed + 1, device, settings.precision
        )  # seed + 1: not the windows of the first training steps
        writer.add_scalar("train/loss_eval", losses["train"], step)
        writer.add_scalar("val/loss", losses["val"], step)
        log.info("step %d: train loss %.4f, val loss %.4f", step, losses["train"], losses["val"])
        return losses

    losses = evaluate(0)
    last_log = time.perf_counter()
    progress = tqdm(total=settings.max_steps, desc="train", unit="step", disable=None, dynamic_ncols=True)
    for step in range(1, settings.max_steps + 1):
        lr = learning_rate(step, config.optim, settings.max_steps)
        x, y = get_batch(data.train, settings.batch_size, config.model.block_size, batches, device)
        loss_sum += train_step(model, optimizer, x, y, lr, config.optim.grad_clip, settings.precision)
        # loss_sum stays on the device: reading it out waits for the step, so only at log intervals

        if step % settings.log_interval == 0 or step == settings.max_steps:
            steps_logged = step % settings.log_interval or settings.log_interval
            now = time.perf_counter()
            train_loss, tokens_per_sec = loss_sum.item() / steps_logged, steps_logged * tokens_per_step / (now - last_log)
            writer.add_scalar("train/loss", train_loss, step)
            writer.add_scalar("train/lr", lr, step)
            writer.add_scalar("perf/tokens_per_sec", tokens_per_sec, step)
            progress.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tokens_per_sec:,.0f}", refresh=False)
            loss_sum.zero_()
            last_log = time.perf_counter()
        progress.update()
        if step % settings.eval_interval == 0 or step == settings.max_steps:
            eval_started = time.perf_counter()
            losses = evaluate(step)
            last_log += time.perf_counter() - eval_started  # evaluation time is not training throughput
    progress.close()

    # What the model writes now, and the run's settings next to its final losses.
    prompt = torch.tensor([data.tokenizer.encode("\n").ids], device=device)
    generated = model.generate(prompt, settings.sample_tokens, generator=torch.Generator(device).manual_seed(settings.seed))
    sample = data.tokenizer.decode(generated[0].tolist())
    log.info("sample after %d steps:\n%s", settings.max_steps, sample)
    log_sample(writer, sample, settings.max_steps)
    log_hparams(writer, config, ["train/loss", "train/loss_eval", "val/loss"])
    writer.close()
    return losses


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        config = to_train_config(cfg)  # every value checked before any work starts
        with logging_redirect_tqdm():
            started = time.perf_counter()
            losses = train(config, run_dir)
        log.info("done in %.0fs: val loss %.4f; tensorboard --logdir %s", time.perf_counter() - started, losses["val"], run_dir)
    except (ConfigError, DataError) as error:
        sys.exit(f"error: {error}")  # one line, no traceback: the message names the setting
    return losses["val"]  # for Hydra sweepers that minimise it


if __name__ == "__main__":
    main()
