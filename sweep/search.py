"""The Hydra callback of +experiment=search (configs/experiment/search.yaml)."""

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepDirFirst(Callback):
    """The sweep directory before the sweep starts: Optuna's sqlite storage (hydra.sweeper.storage) opens its file
    there before the launcher, which would make it, starts the first trial."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        Path(config.hydra.sweep.dir).mkdir(parents=True, exist_ok=True)
