"""What a model is trained to predict: the task, one seam between the data, the model, evaluation and the viewer
(task/base.py says what a task provides). Next-token prediction is the causal language model's; each task's module
registers it by name."""

from tokenizers import Tokenizer

from task import fill_blank, next_token, prefix_lm  # noqa: F401 (each registers its task)
from task.base import IGNORE, TASKS, Batch, Evaluation, Task, register
from task.config import TaskConfig

DRAWN = {token: label for task in TASKS.values() for token, label in task.drawn.items()}  # every task's, by token


def task_for(config, tokenizer: Tokenizer) -> Task:
    """The task `config` (a TrainConfig) trains, reading with `tokenizer`."""
    return TASKS[config.task.name](config, tokenizer)


def task_problems(config) -> list[str]:
    """The task settings that cannot work, one line each naming the setting (trainer/config.py's checks call it)."""
    chosen = TASKS.get(config.task.name)
    if chosen is None:
        return [f"task.name={config.task.name}: no such task; the tasks are {', '.join(sorted(TASKS))}"]
    return chosen.problems(config)


__all__ = [
    "DRAWN",
    "IGNORE",
    "TASKS",
    "Batch",
    "Evaluation",
    "Task",
    "TaskConfig",
    "register",
    "task_for",
    "task_problems",
]
