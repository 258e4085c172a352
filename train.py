"""Train TinyLM, the single-head self-attention language model, and log it for TensorBoard.

python train.py                                   # the defaults: char-level Shakespeare, about a minute on a CPU
python train.py model.scale=false model.d_k=512   # switch off 1/sqrt(d_k) and watch the softmax saturate
python train.py -m model.causal=true,false        # a sweep: one job per value
tensorboard --logdir outputs                      # (or multirun) to see the curves
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)
import trainer.startup  # noqa: F401 (first of all: a Ctrl-C while torch loads ends in one line, trainer/startup.py)

# isort: split
import logging
import time
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from tqdm.contrib.logging import logging_redirect_tqdm

from trainer import distributed
from trainer.checkpoint import BEST, Checkpointer, from_events_writer, load_checkpoint, unwritable_events
from trainer.cli import lost_rank, one_line_errors, run_with_one_line_errors
from trainer.config import TrainConfig, objective_key, register_schema, to_train_config, without_shared_settings
from trainer.distributed import Ranks, pick_device
from trainer.evaluate import estimate_loss
from trainer.memory import check_memory
from trainer.optim import learning_rate
from trainer.record import NullRecorder, Recorder, recorder_for, tensorboard_command
from trainer.resume import checkpoint_to_resume, finished_already, resumed_config
from trainer.run import TrainingRun, build_run
from trainer.run_dir import (
    RunLock,
    branch_note,
    check_fresh_start,
    clear_unfinished_attempt,
    record_branch,
    register_resolvers,
    removed_if_refused,
    resume_dir,
)
from trainer.schedule import Schedule
from trainer.stopping import Interrupted, NonFiniteGuard, PeerWatch, StopSignals

log = logging.getLogger("tinylm")
register_schema()
register_resolvers()  # configs/train.yaml's hydra.run.dir: resumed runs and torchrun ranks share one directory


def train(
    config: TrainConfig, run_dir: Path, checkpoint: Optional[dict] = None, ranks: Optional[Ranks] = None
) -> dict[str, float]:
    """Train as `config` says, writing into `run_dir`, from the start or from `checkpoint`; under torchrun, `ranks`
    says which process this is. Returns the last evaluation's losses. Raises Interrupted after SIGINT or SIGTERM
    (a checkpoint is saved first) and NonFiniteLoss when the loss stops being a number (the last good checkpoint
    stays)."""
    ranks = ranks or Ranks(device=pick_device(config.trainer.device))
    with RunLock(run_dir, holds=ranks.main):  # one writer per run directory
        try:
            return training_loop(config, run_dir, checkpoint, ranks)
        except OSError as error:
            if not from_events_writer(error):  # any other names its file: trainer/cli.py says it
                raise
            raise unwritable_events(run_dir, error) from None  # TensorBoard's writer thread names no file


def training_loop(config: TrainConfig, run_dir: Path, checkpoint: Optional[dict], ranks: Ranks) -> dict[str, float]:
    """The loop itself: step, log, evaluate, save, stop; `train` holds the run directory's lock around it."""
    run = build_run(config, ranks, checkpoint)
    if not checkpoint:
        clear_unfinished_attempt(run_dir, config.trainer.resume)  # auto, killed before its first checkpoint
    settings, optim = run.config.trainer, run.config.optim
    schedule, guard = Schedule.of(settings), NonFiniteGuard(ranks.device)
    losses = {}
    with recorder_for(run, run_dir, resumed=checkpoint is not None) as recorder, StopSignals(run_dir) as stop:
        checkpointer = Checkpointer(
            run_dir, ranks, run.state, recorder.flush, keep=settings.keep_checkpoints, every=settings.eval_interval
        )
        if not checkpoint:
            losses = evaluate(run, recorder, checkpointer)
        for step in schedule.steps(run.step):
            lr = learning_rate(step, optim, schedule.max_steps)
            x, y = run.batch()
            on_gradients = recorder.gradient_norms(step) if schedule.logs(step) else None
            with ranks.waiting():  # DDP's backward waits on every rank
                loss = run.train_step(x, y, lr, on_gradients)
            run.step = step
            run.loss_sum += loss  # in place, on the device: reading it would wait for the step
            guard.watch(step, loss)
            recorder.stepped()

            received = stop.agreed(ranks)  # a signal from now on counts at the next step
            if schedule.reads_loss(step) or received:
                guard.check(ranks, checkpointer.last)
            if schedule.logs(step):
                recorder.training(step, lr, schedule.window(step), run.loss_sum.item())
                run.loss_sum.zero_()
            if schedule.evaluates(step):
                losses = evaluate(run, recorder, checkpointer)
                if losses["val"] < run.best_val:
                    run.best_val = losses["val"]
                    checkpointer.save(BEST)
            if schedule.saves(step) or received:
                checkpointer.save()
            if received and not schedule.is_last(step):
                raise Interrupted(received, step, checkpointer.last, ranks.world_size)
        ranks.log_replica_agreement(run.model)
        recorder.finished()
    ranks.barrier()  # all ranks leave together: torchrun takes one that ends early and abruptly for a failure
    return losses


def evaluate(run: TrainingRun, recorder: Recorder | NullRecorder, checkpointer: Checkpointer) -> dict[str, float]:
    """Both splits' losses, averaged over the ranks, recorded with what the attention does, and the step's weights
    kept (RUN/steps/step-N.pt) where kept_steps says so; the throughput clock stops meanwhile."""
    settings, ranks, data = run.config.trainer, run.ranks, run.data
    with recorder.evaluating():
        splits = {"train": data.train, "val": data.val}
        seed = ranks.seed(settings.seed + 1)  # not the windows of the first training steps
        losses = estimate_loss(run.model, run.task, splits, run.config, seed, ranks.device, len(data.train))
        losses = ranks.mean(losses)
        recorder.evaluation(run.step, losses)
        checkpointer.evaluated()
    return losses


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="train")
def main(cfg: DictConfig) -> float:
    with one_line_errors(), removed_if_refused():  # a start refused before it trains leaves nothing behind
        # Every value is checked before any work starts; a resumed run takes its settings from its checkpoint.
        checkpoint, run_dir = None, Path(HydraConfig.get().runtime.output_dir)
        if path := checkpoint_to_resume(cfg.trainer.resume, run_dir):
            checkpoint, run_dir = load_checkpoint(path), resume_dir(path)  # an older best.pt branches
            if done := finished_already(cfg.trainer.resume, checkpoint, path, cfg.trainer.max_steps):
                log.info(done)
                return checkpoint["best_val"]  # what a sweeper reads of a run it cannot train again
            config = resumed_config(checkpoint["config"], cfg, HydraConfig.get().overrides.task, checkpoint["step"])
            if run_dir != path.parent:
                log.warning(branch_note(path, run_dir, checkpoint["step"]))
                record_branch(path, run_dir, checkpoint["step"])  # the parent's settings and where it branched
        else:
            if not cfg.trainer.resume:
                check_fresh_start(run_dir)  # no run replaces another
            config = to_train_config(without_shared_settings(cfg, HydraConfig.get().runtime.choices))
        check_memory(config)  # sizes that cannot fit this machine, before any work
        ranks = distributed.start(config.trainer.device)
        distributed.quiet_other_ranks(ranks)
        started = time.perf_counter()
        with logging_redirect_tqdm(), PeerWatch(ranks, on_lost=lost_rank):  # a rank lost while another waits on it
            try:
                losses = train(config, run_dir, checkpoint, ranks)
            finally:
                distributed.stop(ranks)
        done = time.perf_counter() - started
        log.info("done in %.0fs: val loss %.4f. To see it: %s", done, losses["val"], tensorboard_command(run_dir))
    # What a Hydra sweeper (Optuna, Nevergrad, Ax) minimises, trainer.objective: by default the task's loss with its
    # targets hidden, which a leaky run cannot fake (for a causal next-token run it is val/loss itself).
    return losses[objective_key(config)]


if __name__ == "__main__":
    run_with_one_line_errors(main)
