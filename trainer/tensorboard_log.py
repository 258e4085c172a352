"""What a run writes for TensorBoard beyond plain scalars: its generated sample and its hyperparameters."""

from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from trainer.config import TrainConfig


def log_sample(writer: SummaryWriter, text: str, step: int) -> None:
    # TensorBoard renders text as Markdown: a code block keeps line breaks and spaces.
    writer.add_text("sample", "```\n" + text + "\n```", step)


def log_hparams(writer: SummaryWriter, config: TrainConfig, metric_tags: list[str]) -> None:
    """The run's settings in the HParams tab, next to the last values of `metric_tags`.

    Written through the writer's own file writer: `add_hparams` would open a second run directory.
    """
    settings = flatten(OmegaConf.to_container(OmegaConf.structured(config), enum_to_str=True))
    for summary in hparams(settings, {tag: 0.0 for tag in metric_tags}):  # values unused: the scalars are read
        writer.file_writer.add_summary(summary)


def flatten(tree: dict, prefix: str = "") -> dict:
    """{"model": {"d_k": 128, "x": None}} -> {"model.d_k": 128}: unset settings would only crowd the table."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat |= flatten(value, f"{prefix}{key}.")
        elif value is not None:
            flat[prefix + key] = value
    return flat
