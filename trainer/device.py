"""Which device to train on."""

import torch


def pick_device(name: str) -> torch.device:
    """`auto` is the best device present: cuda, then mps, then cpu; any other name is taken as given."""
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
