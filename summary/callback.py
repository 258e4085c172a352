"""The Hydra callback (registered in configs/train.yaml) of every sweep: before it starts, a sweep directory that
another sweep holds is refused; when it ends, the summary."""

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from trainer.config import ConfigError
from trainer.run_dir import holder_of, run_found, study_file

log = logging.getLogger(__name__)


class SweepSummary(Callback):
    """At the end of every multirun, the summary files in the sweep directory (registered in configs/train.yaml)."""

    def __init__(self, x: str | None = None) -> None:
        # A swept number to plot the final values against (hydra.callbacks.sweep_summary.x=optim.lr); None: every
        # swept number with 3 values or more.
        self.x = x

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Before the sweeper writes multirun.yaml (hydra/_internal/hydra.py: on_multirun_start, then the sweep).
        # Hydra turns a callback's Exception into a warning and goes on (hydra/_internal/callbacks.py): the refusal
        # ends the process itself, in one line.
        try:
            check_sweep_dir(Path(config.hydra.sweep.dir), config.trainer, continues_a_study(config))
        except ConfigError as refused:
            sys.exit(f"error: {refused}")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        # Imported here: Hydra builds its callbacks at the start of every run, and matplotlib and TensorBoard's
        # reader would add half a second to each.
        from summary.runs import SummaryError
        from summary.summarize import summarize
        from trainer.record import tensorboard_command

        sweep_dir = Path(config.hydra.sweep.dir)
        logging.getLogger("tensorboard").setLevel(logging.WARNING)  # its reader logs each events file it ends
        try:
            try:
                written = summarize([sweep_dir], sweep_dir, self.x)
            except SummaryError as error:  # an x this sweep does not sweep: the rest of the summary still helps
                log.warning("hydra.callbacks.sweep_summary.x: %s", error)
                written = summarize([sweep_dir], sweep_dir)
        except FileNotFoundError as error:  # no job got as far as its first TensorBoard event
            log.warning("no sweep summary: %s", error)
            return
        files, command = "\n".join(map(str, written)), tensorboard_command(sweep_dir)
        log.info("sweep summary:\n%s\n%s\nTo see the sweep: %s", written[1].read_text(), files, command)


def continues_a_study(config: DictConfig) -> bool:
    """Whether this sweep is a search whose study (Optuna's sqlite storage) is already on disk: started again in its
    sweep directory, a search continues its study (configs/experiment/search.yaml), it does not mix with it."""
    study = study_file(config)
    return study is not None and study.is_file()


def check_sweep_dir(sweep_dir: Path, trainer: DictConfig, continues: bool = False) -> None:
    """A sweep writes where no other sweep is: one whose directory holds a job in use (a sweep running there) is
    refused, and a fresh one (no trainer.resume, no trainer.start_over, not a search that `continues` its study)
    where another sweep's jobs hold runs; its multirun.yaml, which the HParams tab reads its columns from, and its
    jobs' records stay as they are. A sweep that resumes its jobs (trainer.resume=auto) goes on."""

    jobs = sorted(path for path in sweep_dir.iterdir() if path.is_dir()) if sweep_dir.is_dir() else []
    for job in jobs:
        if holder := holder_of(job):
            raise ConfigError(
                f"hydra.sweep.dir={sweep_dir}: a sweep is running there ({job.name} is in use by {holder}); wait for "
                "it to end (or stop it), or pick a new hydra.sweep.dir"
            )
    if trainer.resume or trainer.start_over or continues:
        return
    held = [job.name for job in jobs if run_found(job)]
    if held:
        runs = f"{len(held)} run{'s' * (len(held) > 1)}: {', '.join(held[:3])}{', ...' * (len(held) > 3)}"
        raise ConfigError(
            f"hydra.sweep.dir={sweep_dir}: holds a sweep ({runs}), which this one would mix with; pick a new "
            "hydra.sweep.dir, or add trainer.resume=auto to resume that sweep's jobs"
        )
