"""Which device to train on."""

import torch

from trainer.config import ConfigError


def pick_device(name: str) -> torch.device:
    """`auto` is the best device present: cuda, then mps, then cpu; any other name must be present."""
    if name != "auto":
        try:
            device = torch.device(name)
        except RuntimeError:
            raise ConfigError(f"trainer.device={name}: not a device; use auto, cpu, cuda, cuda:N or mps") from None
        available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
        if not available.get(device.type, False):
            raise ConfigError(f"trainer.device={name}: not available to this machine's torch; use auto or cpu")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def allow_tf32() -> None:
    """float32 matmuls on tensor cores. Here, not in train.py: joblib's launcher pickles train.py's functions by
    value, with the modules they reach, and torch.backends cannot be pickled."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
