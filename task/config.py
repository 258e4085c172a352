"""configs/task's schema: which task a model is trained on, and the settings of the tasks that have some."""

from dataclasses import dataclass
from typing import Optional


@dataclass
class TaskConfig:
    name: str = "next_token"  # what the model is trained to predict (task=NAME picks configs/task/NAME.yaml)
    blank_share: Optional[float] = None  # fill_blank: the share of each window's tokens hidden behind the blank
    hide: Optional[bool] = None  # fill_blank: false leaves the scored tokens visible in the input (the leak)
    prefix_share: Optional[float] = None  # prefix_lm: the share of each window read both ways, before what is scored
