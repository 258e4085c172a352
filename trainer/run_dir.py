"""Where a run writes: Hydra's run directory (configs/train.yaml's hydra.run.dir) through two resolvers, the lock
that keeps a second process from writing into a run directory in use, and the rule that no run replaces another.

A fresh run gets outputs/DATE/TIME with microseconds, so runs started in the same second never share one.
A resumed run writes on into its own directory, unless it resumes from a checkpoint older than that directory's
last.pt: then it branches into a new directory inside it. A fresh run aimed at a directory that holds a run is
refused (check_fresh_start), or with trainer.start_over=true moves the earlier run's files aside first. Under
torchrun every rank must agree on the directory, and only rank 0 writes Hydra's files there.
"""

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from filelock import FileLock, Timeout
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from trainer.checkpoint import BEST, KEPT, LAST, glance, is_kept, kept_checkpoints, still_whole, write_failure
from trainer.config import ConfigError
from trainer.resume import AUTO, resume_override, run_dir_of, run_of_kept

LOCK = ".train.lock"
EVENTS = "events.out.tfevents.*"
EARLIER = "earlier-"  # trainer.start_over moves an earlier run's files into RUN/earlier-DATE_TIME
HYDRA_LOG = "train.log"  # Hydra's job log, open for appending before the resolvers run
BRANCH_RECORD = "branch.yaml"  # in a branch's .hydra/: where it came from (record_branch)

log = logging.getLogger("tinylm")


class RunDirInUse(Exception):
    """Another process trains in the run directory; the message names both."""


class RunLock:
    """An exclusive lock on the run directory while a run writes there (filelock's, an flock on Unix): the OS
    releases it when the process ends, however it ends, so a killed run never leaves a stale lock. The file names
    its holder. Rank 0 holds it for every rank of a torchrun."""

    def __init__(self, run_dir: Path, holds: bool = True):
        self.path, self.holds, self.lock = run_dir / LOCK, holds, FileLock(run_dir / LOCK)

    def __enter__(self) -> "RunLock":
        if not self.holds:
            return self
        if holder := held_by(self.lock):
            raise in_use(self.path.parent, holder)
        self.path.write_text(f"process {os.getpid()} on {os.uname().nodename}\n")  # the lock is ours: name it
        return self

    def __exit__(self, *exc_info) -> None:
        if self.lock.is_locked:
            self.lock.release()


def held_by(lock: FileLock) -> Optional[str]:
    """Takes `lock`; if another process holds it, who that is (the file names it)."""
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return Path(lock.lock_file).read_text().strip() or "another process"
    return None


def in_use(run_dir: Path, holder: str) -> RunDirInUse:
    return RunDirInUse(
        f"{run_dir}: this run directory is in use by {holder}; wait for it to end (or stop it) before resuming or "
        "starting a run there"
    )


def holder_of(run_dir: Path) -> Optional[str]:
    """Who holds the run directory's lock now, if anyone; creates nothing (a lock file exists if a run ever ran)."""
    if not (run_dir / LOCK).is_file():
        return None
    lock = FileLock(run_dir / LOCK)
    holder = held_by(lock)
    if lock.is_locked:
        lock.release()  # it was free: this took it to see
    return holder


def run_found(run_dir: Path) -> Optional[str]:
    """What a run left in `run_dir`, for a message ("a run at step 40 of 60 (last.pt)"), or None when it holds no
    checkpoint and no TensorBoard events: nothing that a fresh run there would replace or double."""
    for name in (LAST, BEST):
        if (run_dir / name).exists():
            seen = glance(run_dir / name)
            return f"a run at step {seen['step']} of {seen['max_steps']} ({name})" if seen else f"a run ({name})"
    if any(run_dir.glob(EVENTS)):
        return "a run's TensorBoard curves (no checkpoint)"
    return "a run's kept checkpoints (no last.pt)" if kept_checkpoints(run_dir) else None


def check_fresh_start(run_dir: Path) -> None:
    """A fresh run writes where no run is: one aimed at a directory in use, or at one that holds a run (that
    trainer.start_over did not move aside, see hydra_subdir), is refused in one line naming the ways on. Rank 0
    decides for all ranks of a torchrun."""
    if not rank_zero():
        return
    if holder := holder_of(run_dir):
        raise in_use(run_dir, holder)
    if found := run_found(run_dir):
        resume = ""
        if seen := glance(run_dir / LAST):
            finished = seen["step"] >= seen["max_steps"]
            more = f" trainer.max_steps={2 * seen['max_steps']}" if finished else ""  # it trains on
            resume = f"resume it (python train.py {resume_override(run_dir)}{more}), "
        raise ConfigError(
            f"hydra.run.dir={run_dir}: holds {found}, which a fresh run would replace; {resume}pick a new "
            f"hydra.run.dir, or add trainer.start_over=true to start over there (the earlier run's files are kept in "
            f"{run_dir}/{EARLIER}DATE_TIME)"
        )


def clear_unfinished_attempt(run_dir: Path, resume: Optional[str]) -> None:
    """trainer.resume=auto that starts fresh, for want of a checkpoint: what an attempt stopped before its first
    checkpoint wrote, its TensorBoard events and kept checkpoints, is removed (this start writes the same steps again),
    so that TensorBoard shows every step once; one line says so. Call it under the run directory's lock, after the
    run is built (a start that fails before it removes nothing); rank 0 alone removes."""
    if resume != AUTO or not rank_zero():
        return
    events, kept = sorted(run_dir.glob(EVENTS)), kept_checkpoints(run_dir)
    if not events and not kept:
        return
    for path in [*events, *kept]:
        path.unlink()
    if (run_dir / KEPT).is_dir() and not any((run_dir / KEPT).iterdir()):
        (run_dir / KEPT).rmdir()
    what = [f"{len(events)} TensorBoard events file{'s' * (len(events) != 1)}"] if events else []
    steps = ", ".join(path.stem.removeprefix("step-") for path in kept)
    what += [f"the kept checkpoint{'s' * (len(kept) != 1)} of step{'s' * (len(kept) != 1)} {steps}"] if kept else []
    log.warning(
        "trainer.resume=auto: %s holds no checkpoint to resume from, only what an attempt stopped before its first "
        "checkpoint wrote (%s); removed, so that TensorBoard shows the steps of this fresh start once",
        run_dir,
        " and ".join(what),
    )


def start_over(run_dir: Path) -> None:
    """trainer.start_over=true: the earlier run's files move into RUN/earlier-DATE_TIME, whole, under the run
    directory's lock, before Hydra writes this run's record; Hydra's log, already open, is copied, then emptied."""
    aside = run_dir / f"{EARLIER}{datetime.now():%Y-%m-%d_%H-%M-%S-%f}"
    with RunLock(run_dir):
        found = run_found(run_dir)
        aside.mkdir()
        for entry in run_dir.iterdir():
            if entry.name == LOCK or entry.name.startswith(EARLIER):
                continue
            if entry.name == HYDRA_LOG:
                shutil.copy2(entry, aside / entry.name)
                os.truncate(entry, 0)  # Hydra appends to it from its (new) end
            else:
                os.rename(entry, aside / entry.name)
    log.info("trainer.start_over: %s was moved into %s, whole; this run starts over in %s", found, aside, run_dir)


def resume_dir(checkpoint: Path) -> Path:
    """Where a resume from `checkpoint` writes: its directory, unless the checkpoint is older than that directory's
    last.pt (best.pt after a later last.pt): writing there would replace last.pt and purge the curves past the
    checkpoint's step, so the run branches into DIR/branch-from-step-N (-2, -3: the first that holds no run)."""
    if is_kept(checkpoint):  # refused (checkpoint_to_resume), in the run's own directory, writing nothing
        return run_of_kept(checkpoint)
    directory, last = checkpoint.parent, checkpoint.parent / LAST
    if checkpoint.name == LAST or not last.exists():
        return directory
    seen, newest = glance(checkpoint), glance(last)
    if not seen or (newest and newest["step"] <= seen["step"]):
        return directory  # one that cannot be read is refused by load_checkpoint, naming it
    step = seen["step"]
    branch = directory / f"branch-from-step-{step}"
    number = 1
    while run_found(branch):
        number += 1
        branch = directory / f"branch-from-step-{step}-{number}"
    return branch


def branch_note(checkpoint: Path, branch: Path, step: int) -> str:
    """The line that says a resume from `checkpoint` (at `step`) branches into `branch`, and why."""
    last = checkpoint.parent / LAST
    newest = glance(last)
    at = f"step {newest['step']}" if newest else "unreadable"
    return (
        f"trainer.resume: {checkpoint} (step {step}) is older than {last} ({at}); this run branches into {branch}, "
        f"so that {last} and the curves past step {step} stay as they are"
    )


def record_branch(checkpoint: Path, branch: Path, step: int) -> None:
    """What a branch needs to say where it came from: its parent's Hydra record (.hydra/config.yaml, overrides.yaml,
    hydra.yaml: the settings and the command line that started the run, which also name the branch in TensorBoard)
    copied into the branch's .hydra/, beside .hydra/branch.yaml: the checkpoint it branched from, its step, the
    parent run and its last.pt's step then. Rank 0 alone writes."""
    if not rank_zero():
        return
    record = branch / ".hydra"
    record.mkdir(parents=True, exist_ok=True)
    for path in sorted((checkpoint.parent / ".hydra").glob("*.yaml")):
        if not (record / path.name).exists():
            shutil.copy2(path, record / path.name)
    newest = glance(checkpoint.parent / LAST)
    note = {
        "branched_from": str(checkpoint),
        "step": step,
        "parent": str(checkpoint.parent),
        "parent_last_step": newest["step"] if newest else None,
        "when": f"{datetime.now():%Y-%m-%d %H:%M:%S}",
    }
    OmegaConf.save(OmegaConf.create(note), record / BRANCH_RECORD)


def rank_zero() -> bool:
    return os.environ.get("RANK", "0") == "0"  # under torchrun, before its process group starts


def run_dir(resume: Optional[str], fresh: str) -> str:
    if resume and resume != AUTO:  # auto resumes in the run's own directory, whatever the launcher made it
        named = Path(resume).expanduser()
        return str(resume_dir(named) if named.is_file() else run_dir_of(resume))
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")  # torchrun's rendezvous id, shared by all ranks
    if run_id != "none":  # a clock reading would differ between ranks; the rendezvous id does not
        return str(Path(fresh).parent / f"torchrun-{run_id[:8]}")
    return fresh


def hydra_subdir(resume: Optional[str], run_dir: str, _root_: Optional[DictConfig] = None) -> Optional[str]:
    """Where Hydra writes the composed config: nowhere for ranks other than 0, nor for a fresh run that
    check_fresh_start will refuse; for a resume, or any start in a directory that has a run already
    (trainer.resume=auto, a process the run lock will refuse), beside the first's, which stays as it was.
    A fresh run with trainer.start_over=true (read from the config's root, `_root_`) moves an earlier run aside
    here: the last moment before Hydra writes into the directory."""
    if not rank_zero():
        return None
    directory = Path(run_dir)
    see_job_start(directory)
    if resume and resume != AUTO and is_kept(Path(resume).expanduser()):
        return None  # a kept checkpoint, which checkpoint_to_resume refuses: nothing to record
    if not resume and run_found(directory):
        if not (_root_ is not None and _root_.trainer.start_over) or holder_of(directory):
            return None
        start_over(directory)
    again = (resume and resume != AUTO) or (directory / ".hydra").exists()
    return f".hydra/resume-{datetime.now():%Y-%m-%d_%H-%M-%S-%f}" if again else ".hydra"


def register_resolvers() -> None:
    OmegaConf.register_new_resolver("run_dir", run_dir)
    OmegaConf.register_new_resolver("hydra_subdir", hydra_subdir)


# A start refused before its run trains (a setting out of range, a missing file, a model no machine holds) leaves
# nothing behind: Hydra makes hydra.run.dir, opens train.log there and writes its record (.hydra/) before train.py's
# main runs, so what the directory held before is looked at first, by a Hydra callback (configs/train.yaml).
RECORD = ".hydra"
RECORD_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")  # what Hydra writes into a run's record, in order
SWEEP_RECORD = "multirun.yaml"  # what the sweeper writes into a sweep's directory before its first job


@dataclass(frozen=True)
class Before:
    """What hydra.run.dir (or a sweep's hydra.sweep.dir) held before Hydra made it or wrote into it."""

    directory: Path
    made: tuple[Path, ...]  # the directory and those above it that were not there (Hydra makes them), deepest first
    entries: frozenset[str] = frozenset()  # the names in it
    records: frozenset[str] = frozenset()  # the names in its .hydra/ (a resume's record is .hydra/resume-DATE_TIME)
    log_size: Optional[int] = None  # train.log's size; None: there was none


_before: Optional[Before] = None  # this process's start, seen by StartRecord
_sweep_before: Optional[Before] = None  # this process's sweep (hydra.sweep.dir), seen by StartRecord
_sweep_records: frozenset[str] = frozenset()  # the names of the files its sweeper writes there before its first job


class StartRecord(Callback):
    """Hydra's callback (configs/train.yaml) that sees hydra.run.dir before Hydra makes it and writes into it, so that
    a start refused before it trains can remove what it made (remove_refused_start). A sweep's jobs are seen later,
    by see_job_start; the sweep's own directory here, before the sweeper makes it and writes multirun.yaml there
    (remove_refused_sweep)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _before
        _before = seen_if_rank_zero(config.hydra.run)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _sweep_before, _sweep_records
        _sweep_before = seen_if_rank_zero(config.hydra.sweep)
        study = study_file(config)
        in_sweep_dir = study is not None and study.parent.absolute() == Path(config.hydra.sweep.dir).absolute()
        _sweep_records = frozenset({SWEEP_RECORD, study.name} if in_sweep_dir else {SWEEP_RECORD})


def study_file(config: DictConfig) -> Optional[Path]:
    """The file of a search's study (Optuna's sqlite storage, hydra.sweeper.storage); None for any other sweep."""
    storage = str(config.hydra.sweeper.get("storage") or "")
    return Path(storage.removeprefix("sqlite:///")) if storage.startswith("sqlite:///") else None


def seen_if_rank_zero(hydra_dir: DictConfig) -> Optional[Before]:
    """What hydra.run.dir or hydra.sweep.dir (`hydra_dir.dir`) holds now, on rank 0."""
    try:
        return seen_before(Path(hydra_dir.dir).absolute()) if rank_zero() else None
    except Exception:  # a directory Hydra cannot resolve or make either: it says why, next, and makes none
        return None


def see_job_start(job_dir: Path) -> None:
    """A sweep's job, which StartRecord does not see: what its directory held, seen here, in hydra_subdir, the first
    moment a job's code runs, after Hydra made the directory and opened train.log in it. Hydra made it for this job
    if it holds nothing but that log, empty. The sweep's directory is the sweep's to remove (remove_refused_sweep):
    a job may run in a process of its own (hydra/launcher=parallel) that never saw it made."""
    global _before
    job_dir = job_dir.absolute()
    if not sweeping() or (_before is not None and _before.directory == job_dir):
        return  # a run, which StartRecord saw; or this job, seen already (Hydra resolves the setting twice)
    log = job_dir / HYDRA_LOG
    if not (names_in(job_dir) <= {HYDRA_LOG} and (not log.exists() or log.stat().st_size == 0)):
        _before = seen_before(job_dir)
        return
    _before = Before(job_dir, (job_dir,))


def sweeping() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def forget_start() -> None:
    """No start seen: each entry point's own (trainer/cli.py), never a start an earlier one in this process saw."""
    global _before, _sweep_before, _sweep_records
    _before = _sweep_before = None
    _sweep_records = frozenset()


def seen_before(run_dir: Path) -> Before:
    made = []
    directory = run_dir
    while not directory.exists() and directory != directory.parent:
        made.append(directory)
        directory = directory.parent
    if made:
        return Before(run_dir, tuple(made))
    log = run_dir / HYDRA_LOG
    size = log.stat().st_size if log.is_file() else None
    return Before(run_dir, (), names_in(run_dir), names_in(run_dir / RECORD), size)


def names_in(directory: Path) -> frozenset[str]:
    return frozenset(os.listdir(directory)) if directory.is_dir() else frozenset()


@contextmanager
def removed_if_refused() -> Iterator[None]:
    """train.py's main inside it: an error before the run trained removes what its start made (remove_refused_start);
    a stop (Ctrl-C, SIGTERM) removes nothing."""
    try:
        yield
    except Exception:
        remove_refused_start()
        raise


def remove_refused_start() -> None:
    """What this start made for a run that never trained: the run directory if Hydra made it (and the directories
    above it that it made), else Hydra's record in .hydra/, the lines it added to train.log and the lock file. Never
    what was there before, nothing once the run wrote a file of its own (its curves, a checkpoint), and nothing while
    another process holds the directory."""
    before = _before
    if before is None or not rank_zero() or not before.directory.is_dir() or holder_of(before.directory):
        return
    run_dir = before.directory
    new = names_in(run_dir) - before.entries
    if new - {RECORD, HYDRA_LOG, LOCK}:
        return  # the run trained: what it wrote is a run's
    if before.made:
        remove_made(before)
        return
    for path in [run_dir / name for name in new] + [run_dir / RECORD / name for name in records_made(before)]:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    log = run_dir / HYDRA_LOG
    if before.log_size is not None and log.is_file() and log.stat().st_size > before.log_size:
        os.truncate(log, before.log_size)


def remove_made(before: Before) -> None:
    """The directory Hydra made, and those above it that it made and that hold nothing else now."""
    shutil.rmtree(before.directory)
    for directory in before.made[1:]:
        try:
            directory.rmdir()  # only if empty: another run or sweep may have begun in it meanwhile
        except OSError:
            break


@contextmanager
def removed_sweep_if_refused() -> Iterator[None]:
    """An entry point's main inside it (trainer/cli.py): a sweep that ends refused (an error, not a stop) removes what
    it made (remove_refused_sweep)."""
    try:
        yield
    except (SystemExit, Exception) as ended:
        # An error, or its one line (SystemExit with a message); a stop ends with its status, and removes nothing.
        if not isinstance(ended, SystemExit) or isinstance(ended.code, str):
            with suppress(OSError):  # what could not be removed stays: the refusal's line is what the user needs
                remove_refused_sweep()
        raise


def remove_refused_sweep() -> None:
    """What a sweep refused before any job trained made: the sweep's directory if the sweep made it (and those above it
    that it made), else what the sweeper wrote into it (its multirun.yaml, a new search's study). Nothing once a job
    has a directory there (a job refused removes its own, remove_refused_start) or anything else is new in it, and
    never what was there before (a study a search continues)."""
    before = _sweep_before
    if before is None or not before.directory.is_dir():
        return
    new = names_in(before.directory) - before.entries
    if new - _sweep_records:
        return  # a job's directory: the sweep ran
    if before.made:
        remove_made(before)
        return
    for name in new:
        (before.directory / name).unlink()


def records_made(before: Before) -> frozenset[str]:
    """The records this start wrote in a .hydra/ that was there before: a resume's .hydra/resume-DATE_TIME."""
    return names_in(before.directory / RECORD) - before.records if RECORD in before.entries else frozenset()


def unwritten_record(error: OSError) -> str:
    """Hydra's OSError while it wrote this start's record names no file (a full disk as config.yaml is closed): the
    file, why (a full disk: the room left) and the checkpoint still whole, in one line, once what the start made is
    removed (remove_refused_start). '' for an error that names its file, or a start not seen."""
    before = _before
    if error.filename is not None or before is None:
        return ""
    run_dir = before.directory
    made = [run_dir / RECORD] if RECORD not in before.entries else [run_dir / RECORD / n for n in records_made(before)]
    written = [record / name for record in made for name in RECORD_FILES if (record / name).exists()]
    if not written:
        return ""
    reason, full = write_failure(error, run_dir / RECORD)  # the disk named: the one holding the run directory
    whole = still_whole(run_dir, None, full) if run_found(run_dir) else "no run was there, and none was started"
    remove_refused_start()
    return f"{written[-1]}: cannot be written ({reason}); {whole}"
