"""Everything a run reports: TensorBoard, the progress bar, the log, and the throughput clock.

Rank 0 records; the other ranks of a torchrun get a NullRecorder that does nothing, so the training loop never asks
which rank it runs on. A Recorder is a context manager: its files are closed on every way out of the loop.
"""

import logging
import os
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams
from tqdm.auto import tqdm

from trainer.config import TrainConfig, plain_config
from trainer.diagnostics import log_attention, log_grad_norms, log_mask, log_mask_readings
from trainer.overrides import (
    SWITCHES,
    flatten,
    keys_varied_by_sweep,
    naming_overrides,
    override_key,
    read_overrides,
    switches_label,
)
from trainer.run import TrainingRun
from trainer.run_dir import EVENTS
from trainer.tags import FINAL_TAGS, layout, loss_tag

log = logging.getLogger("tinylm")
thread_excepthook = threading.excepthook


def quiet_writer_thread(args: threading.ExceptHookArgs) -> None:
    """TensorBoard's writer thread prints its own traceback when the disk fills; the same OSError comes back on the
    main thread at the next flush, where train.py's train() names it in one line (trainer/checkpoint.py)."""
    if not (isinstance(args.thread, _AsyncWriterThread) and isinstance(args.exc_value, OSError)):
        thread_excepthook(args)


threading.excepthook = quiet_writer_thread


def wait_to_sort_last(run_dir: Path) -> None:
    """TensorBoard reads a run's event files in the order of their names, which start with the second each was made
    in, then the host and the process id. A resumed run's purge of the steps after its checkpoint acts on what was
    read before it: its file must sort after the earlier ones, so this waits (under a second) until the clock is
    past the second of the newest of them, as it is unless the earlier run began in this very second."""
    seconds = [int(stamp) for path in run_dir.glob(EVENTS) if (stamp := path.name.split(".")[3]).isdigit()]
    remaining = max(seconds, default=0) + 1 - time.time()
    if 0 < remaining <= 1:  # further off, the file was dated by another clock, which no wait here would pass
        time.sleep(remaining)


class Recorder:
    def __init__(self, run: TrainingRun, run_dir: Path, resumed: bool):
        self.run = run
        # A resumed run drops whatever the killed one logged after its checkpoint: no step appears twice.
        if resumed:
            wait_to_sort_last(run_dir)
        self.writer = SummaryWriter(run_dir, purge_step=run.step + 1 if resumed else None)
        if not resumed:
            self.writer.add_custom_scalars(layout(read_overrides(run_dir)))
        self.overrides = naming_overrides(read_overrides(run_dir))  # paths and presets left out
        # The HParams columns: the keys a sweep varies; outside a sweep, what the command line set, or the switches.
        self.hparams = keys_varied_by_sweep(run_dir) or [override_key(item) for item in self.overrides] or SWITCHES
        self.label = " ".join(self.overrides) or switches_label(plain_config(run.config))
        run.task.tokenizer.save(str(run_dir / "tokenizer.json"))
        settings = run.config.trainer
        self.progress = tqdm(
            initial=run.step,
            total=settings.max_steps,
            desc="train",
            unit="step",
            dynamic_ncols=True,
            disable=bool(os.environ.get("TQDM_DISABLE")) or None,
        )  # None: no bar when not a terminal, but a notebook's (tqdm.auto's) in one; TQDM_DISABLE: none beside other
        # jobs (hydra/launcher=parallel)
        self.tokens_per_step = settings.batch_size * run.config.model.block_size * run.ranks.world_size
        self.drawing, self.drawn = ThreadPoolExecutor(max_workers=1), []  # figures drawn while training goes on
        if not resumed:
            log_mask(self.writer, run.model, run.task.mask, f"task={run.task.name}", self._draw_later)
        self.clock_started = time.perf_counter()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc_info) -> None:
        self.progress.close()
        self.drawing.shutdown(wait=True)
        self.writer.close()

    def _draw_later(self, job: Callable[[], None]) -> None:
        """Runs the drawing `job` on the drawing thread, while training goes on."""
        self.drawn.append(self.drawing.submit(job))

    def stepped(self) -> None:
        self.progress.update()

    def gradient_norms(self, step: int) -> Callable[[], None]:
        """What a training step calls between backward and clipping, on the raw gradients."""
        return partial(log_grad_norms, self.writer, self.run.model, step)

    def training(self, step: int, lr: float, steps: int, loss_sum: float) -> None:
        """The window of `steps` steps ending at `step`: its mean loss and its throughput."""
        train_loss = loss_sum / steps
        tokens_per_sec = steps * self.tokens_per_step / (time.perf_counter() - self.clock_started)
        self.writer.add_scalar("train/loss", train_loss, step)
        self.writer.add_scalar("train/lr", lr, step)
        self.writer.add_scalar("perf/tokens_per_sec", tokens_per_sec, step)
        log_mask_readings(self.writer, self.run.model, step)  # what this step's forward pass let through the mask
        self.progress.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tokens_per_sec:,.0f}", refresh=False)
        self.clock_started = time.perf_counter()

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """Evaluation time is not training throughput: the clock stops meanwhile."""
        paused = time.perf_counter()
        yield
        self.clock_started += time.perf_counter() - paused

    def evaluation(self, step: int, losses: dict[str, float]) -> None:
        """Both splits' losses and the task's extra curves, what the attention does and what the model writes now."""
        for key, loss in losses.items():
            self.writer.add_scalar(loss_tag(key), loss, step)
        log.info("step %d: %s", step, evaluation_line(losses, self.run.task.curves))
        log_attention(
            self.writer,
            self.run.model,
            self.run.probe,
            self.run.task.tokenizer,
            step,
            self.label,
            self._draw_later,
            self.run.task.mask,
            self.run.task.targets_ahead,
        )
        if (sample := self.run.sample()) is not None:
            self.writer.add_text("sample", sample_markdown(sample, f"step {step} · {self.label}"), step)

    def flush(self) -> None:
        """Everything recorded so far on disk, the figures being drawn included."""
        for figure in self.drawn:
            figure.result()  # raises what the drawing raised
        self.drawn.clear()
        self.writer.flush()

    def finished(self) -> None:
        """The run's settings beside its final metrics in the HParams tab, and its last sample in the log."""
        log_hparams(self.writer, self.run.config, self.hparams, FINAL_TAGS)
        if (sample := self.run.sample()) is not None:
            log.info("sample after %d steps:\n%s", self.run.step, sample)


class NullRecorder:
    """What ranks other than 0 record: nothing."""

    def __enter__(self) -> "NullRecorder":
        return self

    def __exit__(self, *exc_info) -> None:
        pass

    def stepped(self) -> None:
        pass

    def gradient_norms(self, step: int) -> None:
        return None

    def training(self, step: int, lr: float, steps: int, loss_sum: float) -> None:
        pass

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        yield

    def evaluation(self, step: int, losses: dict[str, float]) -> None:
        pass

    def flush(self) -> None:
        pass

    def finished(self) -> None:
        pass


def evaluation_line(losses: dict[str, float], curves: dict) -> str:
    """An evaluation in the log: both splits' losses, then each extra curve that says more than val/loss (for a
    model that cannot see its targets, the true mask forced on gives val/loss itself) with what it measures."""
    words = [f"train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"]
    words += [
        f"{loss_tag(key)} {losses[key]:.4f} ({curve.meaning})"
        for key, curve in curves.items()
        if key in losses and losses[key] != losses["val"]
    ]
    return "; ".join(words)


def tensorboard_command(logdir: Path) -> str:
    """How to open TensorBoard on the lesson's charts: Custom Scalars puts both losses of every run on one chart,
    unsmoothed (the curves have few points), with every attention-pattern image kept."""
    return (
        f"tensorboard --logdir {shlex.quote(str(logdir))} --samples_per_plugin images=1000, then open "
        "http://localhost:6006/#custom_scalars&_smoothingWeight=0"
    )


def recorder_for(run: TrainingRun, run_dir: Path, resumed: bool) -> Recorder | NullRecorder:
    """Rank 0's Recorder; a NullRecorder on the other ranks."""
    return Recorder(run, run_dir, resumed) if run.ranks.main else NullRecorder()


def sample_markdown(text: str, header: str) -> str:
    """A sample for TensorBoard's Text tab, which renders Markdown: the header, then the text in a code block (line
    breaks and spaces kept), its leading blank lines dropped so the box never looks empty."""
    lines = text.lstrip("\n")
    dropped = len(text) - len(lines)
    note = f" (after {dropped} line breaks)" if dropped > 1 else ""
    return f"**{header}**{note}\n\n```\n{lines}\n```"


def log_hparams(writer: SummaryWriter, config: TrainConfig, keys: list[str], metric_tags: list[str]) -> None:
    """The settings `keys` in the HParams tab, marked as the ones that differ, next to the last values of
    `metric_tags`. TensorBoard shows five settings' columns before the metrics': the keys a sweep varies (and only
    they) leave the metrics in view. Booleans as words, not 1.0 and 0.0. Every setting is in .hydra/config.yaml.

    Written through the writer's own file writer: `add_hparams` would open a second run directory.
    """
    settings = flatten(plain_config(config))
    shown = {
        key: str(settings[key]).lower() if isinstance(settings[key], bool) else settings[key]
        for key in keys
        if key in settings
    }
    experiment, session_start, session_end = hparams(shown, {tag: 0.0 for tag in metric_tags})  # values unused
    plugin_data = experiment.value[0].metadata.plugin_data
    content = HParamsPluginData.FromString(plugin_data.content)
    for info in content.experiment.hparam_infos:
        info.differs = True  # TensorBoard lists these first and ticks the first five
    plugin_data.content = content.SerializeToString()
    for summary in (experiment, session_start, session_end):
        writer.file_writer.add_summary(summary)
