"""The Hydra callback (registered in configs/train.yaml) that writes a sweep's summary when the sweep ends."""

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


class SweepSummary(Callback):
    """At the end of every multirun, the summary files in the sweep directory (registered in configs/train.yaml)."""

    def __init__(self, x: str | None = None) -> None:
        # A swept number to plot the final values against (hydra.callbacks.sweep_summary.x=optim.lr); None: every
        # swept number with 3 values or more.
        self.x = x

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
        log.info("sweep summary:\n%s\n%s\nTo see the sweep: %s", written[1].read_text(), "\n".join(map(str, written)),
                 tensorboard_command(sweep_dir))  # fmt: skip
