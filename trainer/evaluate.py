"""Loss estimates on both splits, over the same batches at every evaluation, and the task's extra curves."""

import numpy as np
import torch

from model import TinyLM
from task import Evaluation, Task
from task.curves import batches_loss
from trainer.config import TrainConfig
from trainer.step import autocast


@torch.no_grad()
def estimate_loss(
    model: TinyLM,
    task: Task,
    splits: dict[str, np.ndarray],
    config: TrainConfig,
    seed: int,
    device: torch.device,
    val_offset: int = 0,
) -> dict[str, float]:
    """Mean loss per split over trainer.eval_iters batches of the task, and each of the task's extra curves that
    applies to this run ("val_causal", ...). A fixed seed keeps the batches (the windows, and whatever the task draws
    for them), and so the curves, comparable. `val_offset` is where the val split starts in the text, in tokens."""
    was_training = model.training
    model.eval()
    settings = config.trainer
    generator = torch.Generator().manual_seed(seed)
    losses = {}
    for name, tokens in splits.items():
        batches = [task.draw(tokens, settings.batch_size, generator, device) for _ in range(settings.eval_iters)]
        with autocast(device, settings.precision):
            losses[name] = batches_loss(model, batches, task.mask)
            if name == "val":
                val = losses["val"]
                sizes = settings.batch_size, settings.eval_iters
                evaluation = Evaluation(
                    task, model, batches, val, config.data, *sizes, tokens, val_offset, seed, device
                )
                for key, curve in task.curves.items():
                    if (value := curve.measure(evaluation)) is not None:
                        losses[key] = value
    model.train(was_training)
    return losses
