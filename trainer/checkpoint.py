"""Checkpoints: everything a run needs to continue exactly, written atomically, read back without running code.

A checkpoint holds only tensors and plain Python containers, so `torch.load(..., weights_only=True)` reads it;
it is written to a temporary file in the same directory, flushed to disk, then renamed over the old one, so a
kill at any instant leaves the previous checkpoint whole.
"""

import os
import random
import uuid
import zipfile
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from tokenizers import Tokenizer

from model import ModelConfig, TinyLM
from trainer.config import ConfigError, TrainConfig, to_typed
from trainer.distributed import Ranks

FORMAT = "tinylm-checkpoint-1"
LAST, BEST = "last.pt", "best.pt"
KEYS = {"format", "step", "config", "model", "optimizer", "rng", "loss_sum", "best_val", "tokenizer"}


class CheckpointError(ConfigError):
    """A file that is not a tinylm checkpoint this code can use; the message names the file."""


def save_checkpoint(state: dict, path: Path) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself reaches the disk
    finally:
        os.close(directory)


def load_checkpoint(path: Path) -> dict:
    """The checkpoint at `path`, checked to be tinylm's and to fit its own model settings; else CheckpointError."""
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; a truncated one has lost its directory
        raise CheckpointError(f"{path}: not a tinylm checkpoint (not a complete file written by torch.save)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)  # never unpickles code
    except Exception as error:  # truncated, random bytes, a pickle of arbitrary objects: all refused alike
        raise CheckpointError(f"{path}: not a tinylm checkpoint ({load_failure(error)})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT or not KEYS <= state.keys():
        raise CheckpointError(f"{path}: not a tinylm checkpoint (format {FORMAT} expected)")
    try:
        TinyLM(model_config(state)).load_state_dict(state["model"])
    except Exception as error:
        reason = str(error).strip().splitlines()[0]
        raise CheckpointError(f"{path}: its weights do not fit its model settings ({reason[:160]})") from None
    return state


def load_failure(error: Exception) -> str:
    """The gist of torch.load's message, which runs to several paragraphs."""
    text = str(error).strip() or type(error).__name__
    if text.startswith("Weights only load failed"):  # the object it would have had to build or call
        marker = "WeightsUnpickler error:"
        rest = text.split(marker)[-1] if marker in text else text.split("\n", 1)[-1]
        gist = next((line.strip() for line in rest.splitlines() if line.strip()), "")
        return f"refused to unpickle it: {gist[:120]}"
    return text.splitlines()[0].split(". ")[0][:120]


def model_config(state: dict) -> ModelConfig:
    return to_typed(ModelConfig, state["config"]["model"])


def plain_config(config: TrainConfig) -> dict:
    """The resolved settings as plain dicts and strings: what weights_only loading accepts."""
    return OmegaConf.to_container(OmegaConf.structured(config), enum_to_str=True)


def training_state(
    step: int, config: TrainConfig, model: TinyLM, optimizer: torch.optim.Optimizer, batches: torch.Generator,
    loss_sum: torch.Tensor, best_val: float, tokenizer: Tokenizer, ranks: Ranks,
) -> dict:  # fmt: skip
    """What a run needs to go on exactly where it is; every rank calls it (their random states are gathered)."""
    return {
        "format": FORMAT, "step": step, "config": plain_config(config), "model": model.state_dict(),
        "optimizer": optimizer.state_dict(), "rng": ranks.gather(rng_states(batches)),
        "loss_sum": loss_sum.detach().cpu(), "best_val": best_val, "tokenizer": tokenizer.to_str(),
    }  # fmt: skip


def restore_training_state(
    state: dict, model: TinyLM, optimizer: torch.optim.Optimizer, batches: torch.Generator, ranks: Ranks
) -> tuple[int, float, torch.Tensor]:
    """Puts the model, the optimizer and this rank's random states back; returns the next step, the best val
    loss so far and the running sum of the training losses of the unfinished log window."""
    if len(state["rng"]) != ranks.world_size:
        raise ConfigError(
            f"trainer.resume: the checkpoint was written by {len(state['rng'])} processes; resume it with as many "
            f"(torchrun --nproc_per_node={len(state['rng'])}) to draw the same batches"
        )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    restore_rng_states(state["rng"][ranks.rank], batches)
    return state["step"] + 1, state["best_val"], state["loss_sum"]


def rng_states(batches: torch.Generator) -> dict:
    numpy_state = np.random.get_state(legacy=False)
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {**numpy_state, "state": {"key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
                                           "pos": numpy_state["state"]["pos"]}},
        "python": random.getstate(),
        "batches": batches.get_state(),  # the generator that draws the training windows
    }  # fmt: skip


def restore_rng_states(states: dict, batches: torch.Generator) -> None:
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    numpy_state = states["numpy"]
    key = numpy_state["state"]["key"].numpy().astype(np.uint32)
    np.random.set_state({**numpy_state, "state": {"key": key, "pos": numpy_state["state"]["pos"]}})
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    batches.set_state(states["batches"])
