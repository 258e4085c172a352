"""Checkpoints: everything a run needs to continue exactly, written atomically, read back without running code.
Which checkpoint a run resumes from, and with which settings, is trainer/resume.py's.

A checkpoint holds only tensors and plain Python containers, so `torch.load(..., weights_only=True)` reads it;
it is written to a temporary file in the same directory, flushed to disk, then renamed over the old one, so a
kill at any instant leaves the previous checkpoint whole. torch.save stores a CRC-32 of every record of its zip
archive, which torch.load never checks: load_checkpoint checks them all before it reads anything.
"""

import errno
import math
import os
import random
import shutil
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np
import torch

from data.textfiles import not_regular
from model import ModelConfig, TinyLM
from trainer.config import TrainConfig, plain_config, to_typed
from trainer.memory import human

if TYPE_CHECKING:  # the readers of trained runs (viewer/) load checkpoints without torch.distributed's machinery
    from trainer.distributed import Ranks

CHECKPOINT_FORMAT = "tinylm-checkpoint-1"
LAST, BEST = "last.pt", "best.pt"
UNFINISHED = ".*.pt.*.tmp"  # save_checkpoint writes .last.pt.HEX.tmp, then renames it
KEYS = {"format", "step", "config", "model", "optimizer", "rng", "loss_sum", "best_val", "tokenizer"}
# A run's earlier checkpoints, kept to look back at (the Attention tab's step selector): RUN/steps/step-500.pt. They
# hold the weights and what reads them, not the optimizer nor the random states: nothing resumes from them.
KEPT = "steps"
KEPT_FORMAT = "tinylm-snapshot-1"  # the name on disk since the first kept checkpoints: unchanged, so they load
KEPT_KEYS = {"format", "step", "config", "model", "tokenizer"}
SHORT_WRITE = "unexpected pos"  # torch's zip writer's words for a write that stopped short (a full disk, often)
EVENTS_WRITER = ("tensorboard.", "torch.utils.tensorboard.")  # the modules that write TensorBoard's events
FULL = 1_000_000  # bytes: a disk with less room than this left after a short write is taken for full


class CheckpointError(Exception):
    """A file that is not a tinylm checkpoint this code can use; the message names the file."""


class Checkpointer:
    """Writes a run's checkpoints: last.pt to resume from, best.pt at each new lowest validation loss, and at each
    evaluation a kept checkpoint (RUN/steps/step-N.pt, weights only) as `kept_steps` decides, `keep` at most. Every
    rank calls it (their random states are gathered); rank 0 alone writes, after `before_write` (TensorBoard's
    flush: nothing a checkpoint says is done may be missing from the curves)."""

    def __init__(
        self,
        run_dir: Path,
        ranks: "Ranks",
        state: Callable[[], dict],
        before_write: Callable[[], None],
        keep: int = 0,
        every: int = 1,
    ):
        self.run_dir, self.ranks, self.state, self.before_write = run_dir, ranks, state, before_write
        self.keep, self.every = keep, every  # trainer.keep_checkpoints, trainer.eval_interval
        self.last = run_dir / LAST
        if ranks.main:  # under the run directory's lock: what an earlier process left unfinished is nobody's
            remove_unfinished(run_dir)

    def save(self, name: str = LAST) -> None:
        state = self.state()
        if not self.ranks.main:
            return
        path = self.run_dir / name
        try:
            self.before_write()
        except OSError as error:  # TensorBoard's events, written first, met a full disk
            raise unwritable_events(self.run_dir, error, path) from None
        self.write(state, path)

    def evaluated(self) -> None:
        """At an evaluation: this step's kept checkpoint joins the others, and those kept_steps lets go are removed
        (after the new one is whole: a kill in between leaves one too many, which the next evaluation removes)."""
        if not self.keep:
            return
        state = self.state()
        if not self.ranks.main:
            return
        on_disk = {int(path.stem.removeprefix("step-")): path for path in kept_checkpoints(self.run_dir)}
        kept = kept_steps(sorted(on_disk), state["step"], self.keep, self.every)
        if state["step"] in kept:
            kept_path(self.run_dir, 0).parent.mkdir(exist_ok=True)
            self.write(kept_state(state), kept_path(self.run_dir, state["step"]))
        for step, path in on_disk.items():
            if step not in kept:
                path.unlink(missing_ok=True)

    def write(self, state: dict, path: Path) -> None:
        try:
            save_checkpoint(state, path)
        except (OSError, RuntimeError) as error:  # a full disk also shows as torch's "unexpected pos"
            reason, full = write_failure(error, path)
            whole = still_whole(self.run_dir, path, full)
            raise CheckpointError(f"{path}: cannot be written ({reason}); {whole}") from None


def unwritable_events(run_dir: Path, error: OSError, checkpoint: Optional[Path] = None) -> CheckpointError:
    """The one line for TensorBoard's events that cannot be written (its writer thread's OSError names no file),
    before `checkpoint` or at any other moment, and what is still whole."""
    reason, full = write_failure(error, run_dir / LAST)
    before = f", so {checkpoint.name} was not written either" if checkpoint else ""
    whole = still_whole(run_dir, checkpoint, full)
    return CheckpointError(f"{run_dir}: the TensorBoard events cannot be written ({reason}){before}; {whole}")


def from_events_writer(error: OSError) -> bool:
    """Whether `error` was raised by TensorBoard's writer (its thread's failure comes back on the main thread naming
    no file): told from where it was raised, so that another write that names no file is not taken for the events'."""
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and frame.tb_frame.f_globals.get("__name__", "").startswith(EVENTS_WRITER)


def still_whole(run_dir: Path, failed: Optional[Path], full: bool) -> str:
    """Which checkpoint of the run is still whole when `failed` could not be written, and, for a full disk, the way
    on."""
    last, best = run_dir / LAST, run_dir / BEST
    if last.exists():
        kept = f"{last}, the last good checkpoint, is whole"
    elif best.exists() and failed != best:
        kept = f"{best}, the only checkpoint so far, is whole"
    else:
        return "no checkpoint was kept" + ("; free some space, then start again" * full)
    return kept + (": free some space, then resume from it" * full)


def kept_steps(kept: list[int], step: int, keep: int, eval_interval: int) -> list[int]:
    """Which evaluation steps a run keeps a checkpoint of once `step` is evaluated, given the steps `kept` so far: at
    most `keep`, so that the set stays bounded however long the run; every evaluation while they are few; then
    spread evenly over log(1 + step / eval_interval), so dense early, where a model learns fastest (the leak preset
    learns to read ahead within its first 100 steps), and ever sparser later. The earliest kept (step 0 of a run
    that kept from its start) and the newest always stay; each step beyond `keep` lets go of the one in between
    whose neighbours lie closest together on that scale (the later one of a tie). Steps past `step`, kept by an
    attempt that a resume from an earlier checkpoint replays, give way. The same kept steps in, the same out: a
    resumed run goes on as an uninterrupted one would."""
    if keep <= 0:
        return []
    steps = sorted({earlier for earlier in kept if earlier < step} | {step})
    if keep == 1:
        return steps[:1]

    def scale(at: int) -> float:
        return math.log1p(at / eval_interval)

    while len(steps) > keep:
        gap, drop = min((scale(steps[i + 1]) - scale(steps[i - 1]), -i) for i in range(1, len(steps) - 1))
        del steps[-drop]
    return steps


def write_failure(error: Exception, path: Path) -> tuple[str, bool]:
    """Why a checkpoint could not be written, in a few words, and whether the disk is full. A full disk reaches
    torch.save's zip writer as an OSError, which it replaces with "unexpected pos N vs M": the OSError beneath is
    named instead, and so is the room left on the disk."""
    cause, seen = error, set()
    while cause is not None and not isinstance(cause, OSError) and id(cause) not in seen:
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    text = str(error).strip().splitlines()[0][:120] if str(error).strip() else type(error).__name__
    reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else text
    free = free_space(path.parent)
    full = isinstance(cause, OSError) and cause.errno == errno.ENOSPC
    if not isinstance(cause, OSError) and SHORT_WRITE in text and free is not None and free < FULL:
        full, reason = True, f"{os.strerror(errno.ENOSPC)}: {text}"
    if full and free is not None:
        reason += f"; the disk holding {path.parent} has {human(free)} free"
    return reason, full


def free_space(directory: Path) -> Optional[int]:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def save_checkpoint(state: dict, path: Path) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # UNFINISHED until renamed
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


def remove_unfinished(run_dir: Path) -> None:
    """Removes the temporary files of checkpoint writes that never finished (a SIGKILL or a second Ctrl-C during
    a save), the kept checkpoints' among them; only the process holding the run directory's lock may call it."""
    for directory in (run_dir, run_dir / KEPT):
        for unfinished in directory.glob(UNFINISHED):
            unfinished.unlink(missing_ok=True)


def load_checkpoint(path: Path) -> dict:
    """The checkpoint at `path`, checked to be tinylm's and to fit its own model settings; else CheckpointError."""
    return load_with_model(path)[0]


def load_with_model(path: Path) -> tuple[dict, TinyLM]:
    """The checkpoint at `path` and the model its weights were checked in (on the CPU): what readers use."""
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint file")
    if not path.is_file():  # named as what it is: a reader that passes over it to another says why
        kind = "a directory" if path.is_dir() else (not_regular(str(path)) or ("not a regular file",))[0]
        raise CheckpointError(f"{path}: not a checkpoint file ({kind})")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; a truncated one has lost its directory
        raise CheckpointError(f"{path}: not a tinylm checkpoint (not a complete file written by torch.save)")
    if damaged := damaged_record(path):
        raise CheckpointError(f"{path}: damaged ({damaged} does not match its checksum); {whole_sibling(path)}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)  # never unpickles code
    except Exception as error:  # truncated, random bytes, a pickle of arbitrary objects: all refused alike
        raise CheckpointError(f"{path}: not a tinylm checkpoint ({load_failure(error)})") from None
    keys = {CHECKPOINT_FORMAT: KEYS, KEPT_FORMAT: KEPT_KEYS}.get(
        state.get("format") if isinstance(state, dict) else None
    )
    if keys is None or not keys <= state.keys():
        raise CheckpointError(f"{path}: not a tinylm checkpoint (format {CHECKPOINT_FORMAT} expected)")
    try:
        model = TinyLM(model_config(state))
        model.load_state_dict(state["model"])
    except Exception as error:
        reason = str(error).strip().splitlines()[0]
        raise CheckpointError(f"{path}: its weights do not fit its model settings ({reason[:160]})") from None
    return state, model


def kept_state(state: dict) -> dict:
    """What a kept checkpoint holds of a checkpoint's contents: the weights, the settings and the tokenizer."""
    return {key: state[key] for key in KEPT_KEYS} | {"format": KEPT_FORMAT}


def kept_path(run_dir: Path, step: int) -> Path:
    return run_dir / KEPT / f"step-{step}.pt"


def kept_checkpoints(run_dir: Path) -> list[Path]:
    """The run's kept checkpoints (RUN/steps/step-N.pt), in the order of their steps."""
    steps = {path: path.stem.removeprefix("step-") for path in (run_dir / KEPT).glob("step-*.pt")}
    return sorted((path for path, step in steps.items() if step.isdigit()), key=lambda path: int(steps[path]))


def glance(path: Path) -> Optional[dict]:
    """A checkpoint's step, its run's max_steps and its format (CHECKPOINT_FORMAT, or KEPT_FORMAT for a kept
    one), read without checks and without reading its weights (memory-mapped), for deciding where a run writes and
    for messages; None when it cannot be read. The one reader of a checkpoint's step that loads no weights."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return {
            "step": int(state["step"]),
            "max_steps": int(state["config"]["trainer"]["max_steps"]),
            "format": state.get("format"),
        }
    except Exception:  # damaged or foreign: load_checkpoint says how, if it is ever loaded
        return None


def is_kept(path: Path) -> bool:
    """Whether `path` is a kept checkpoint (weights only), which nothing resumes from."""
    seen = glance(path) if path.is_file() else None
    return bool(seen) and seen["format"] == KEPT_FORMAT


def damaged_record(path: Path) -> Optional[str]:
    """The first record of the checkpoint's zip archive whose bytes do not match the CRC-32 stored with them, or
    None when all do (a file that is no zip archive at all is is_zipfile's to refuse)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip()
    except (zipfile.BadZipFile, OSError) as error:
        return f"its zip directory ({error})"


def whole_sibling(path: Path) -> str:
    """Which other checkpoint of the run directory (last.pt, best.pt) is whole, for a message about `path`."""
    others = [path.with_name(name) for name in (LAST, BEST) if name != path.name]
    whole = [other for other in others if zipfile.is_zipfile(other) and not damaged_record(other)]
    return f"{whole[0]} is whole" if whole else "no other checkpoint of that run directory is whole"


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


def checkpoint_state(step: int, config: TrainConfig, ranks: "Ranks", **parts) -> dict:
    """A checkpoint's contents: `parts` are model, optimizer, loss_sum, best_val, tokenizer, data (as plain values) and
    batch_generator, whose state joins this process's other random states; every rank's are gathered."""
    rng = ranks.gather(rng_states(parts.pop("batch_generator")))
    return {"format": CHECKPOINT_FORMAT, "step": step, "config": plain_config(config), "rng": rng, **parts}


def rng_states(batch_generator: torch.Generator) -> dict:
    numpy_state = np.random.get_state(legacy=False)
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {
            **numpy_state,
            "state": {
                "key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
                "pos": numpy_state["state"]["pos"],
            },
        },
        "python": random.getstate(),
        "batches": batch_generator.get_state(),  # the generator that draws the training windows
    }


def restore_rng_states(states: dict, batch_generator: torch.Generator) -> None:
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    numpy_state = states["numpy"]
    key = numpy_state["state"]["key"].numpy().astype(np.uint32)
    np.random.set_state({**numpy_state, "state": {"key": key, "pos": numpy_state["state"]["pos"]}})
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    batch_generator.set_state(states["batches"])


def checkpoint_path(name: str, setting: str = "trainer.resume") -> Path:
    """The checkpoint that `setting` names: a run directory (its last.pt) or a checkpoint file."""
    path = Path(name).expanduser()
    if not path.exists():
        raise CheckpointError(f"{setting}={name}: no such run directory or checkpoint file")
    return path / LAST if path.is_dir() else path
