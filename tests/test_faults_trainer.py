"""Never lose a run, part 4 (issue 26), the trainer's points, through the commands a user types: a grown text named
on resume, trainer.compile on a CPU, a stop at any moment of the start, a resume=auto that finds only an attempt's
curves, and a disk that fills during a save (a branch that says where it came from: tests/test_never_lose.py). Each
ends in one line (or the right behaviour), a non-zero exit where it failed, no traceback, and nothing lost."""

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import torch

from conftest import ROOT, SHORT, Forked, cli, curve, default_sigint, events, short_run, wait_for
from data import DataConfig, DataError
from data.sources import Source
from trainer.checkpoint import load_checkpoint
from trainer.resume import check_same_data
from trainer.step import COMPILE_ON_CPU

TEXT = "".join(f"line {i}: to be, or not to be, that is the question\n" for i in range(400))
SMALL = [*SHORT, "trainer.max_steps=20", "trainer.eval_interval=10", "trainer.ckpt_interval=20"]


def train(*overrides: str, cache_dir: Path) -> subprocess.CompletedProcess:
    """`python train.py OVERRIDES`, in this process (conftest's cli): what it prints and its exit status. The tests
    that stop a run with a signal start it in a process of its own (started)."""
    return cli("train.py", *overrides, f"data.cache_dir={cache_dir}")


def error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def files(directory: Path) -> dict[str, bytes]:
    """Every file below `directory` and its bytes, but the log a refused command appends to and the lock it took."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in directory.rglob("*")
        if path.is_file() and path.name not in ("train.log", ".train.lock")
    }


def started(code: str, *arguments: str) -> subprocess.Popen:
    """`python train.py ARGUMENTS` as a user starts it, with `code` run first (before torch is imported)."""
    run_train_py = 'sys.argv = ["train.py", *sys.argv[1:]]; runpy.run_path("train.py", run_name="__main__")'
    return subprocess.Popen(
        [sys.executable, "-u", "-c", f"import runpy, sys, time\n{code}\n{run_train_py}", *arguments],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip


# Point 4 ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_resume_on_a_text_that_grew_or_gained_characters_is_refused_naming_what_changed_and_the_ways_on(
    tmp_path, cache_dir
):
    text, run_dir = tmp_path / "notes.txt", tmp_path / "run"
    text.write_text(TEXT)
    trained = train(*SMALL, "data=text", f"data.path={text}", f"hydra.run.dir={run_dir}", cache_dir=cache_dir)
    assert trained.returncode == 0, trained.stderr
    text.write_text(TEXT + TEXT[:2000])  # the same characters: the tokenizer stays, the train/val cut moves
    before = files(run_dir)
    grown = train(f"trainer.resume={run_dir}", "trainer.max_steps=30", cache_dir=cache_dir)
    assert error_line(grown) == (
        f"error: trainer.resume: the training text changed since the checkpoint was written (data.path={text}: was "
        f"{len(TEXT):,} bytes, is {len(TEXT) + 2000:,} now), so the run would not go on as it began; resume with the "
        f"text and tokenizer it was trained on (put the text back as it was), or start a new run on the text as it is "
        f"now (python train.py data=text data.path={text})"
    )
    assert {name: data for name, data in files(run_dir).items() if "resume-" not in name} == before
    text.write_text("ROMEO: é\n" + TEXT)  # new characters in the training part: a new vocabulary too
    renewed = train(f"trainer.resume={run_dir}", "trainer.max_steps=30", cache_dir=cache_dir)
    assert "error: trainer.resume: the training text and the tokenizer changed since" in error_line(renewed)
    text.write_text(TEXT)  # put back as it was: the run goes on
    resumed = train(f"trainer.resume={run_dir}", "trainer.max_steps=30", cache_dir=cache_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(run_dir / "last.pt")["step"] == 30


def test_a_checkpoint_from_before_the_files_record_still_resumes_and_its_refusal_names_the_setting(tmp_path):
    settings = DataConfig(source=Source.text, path=str(tmp_path / "notes.txt"))
    then = {"text": {"text": ["a"]}, "tokens": {"train.npy": {"bytes": 1, "crc32": 2}}}  # no "files": older
    now = {"text": {"text": ["b"]}, "tokens": {"train.npy": {"bytes": 3, "crc32": 4}}, "files": [[settings.path, 9]]}
    check_same_data({"tokenizer": "T", "data": then}, "T", then | {"files": [[settings.path, 9]]}, settings)
    with pytest.raises(DataError, match=r"\(data.path=.*notes.txt; this checkpoint predates the record of its files"):
        check_same_data({"tokenizer": "T", "data": then}, "T", now, settings)


# Point 5 ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_compile_on_a_cpu_says_so_in_one_line_before_compiling_and_the_evaluations_never_recompile(
    tmp_path, cache_dir, caplog, monkeypatch
):
    from torch._dynamo.utils import counters

    # What is pinned is dynamo's (the graphs it captures, when it recompiles), not the code inductor would generate
    # from them: the eager backend runs each captured graph as it is, in a fraction of inductor's seconds.
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    torch._dynamo.reset()
    counters.clear()
    caplog.set_level(logging.INFO, logger="tinylm")
    tiny = ["model.d_model=16", "model.d_k=16", "model.d_v=16", "model.block_size=8", "trainer.batch_size=4"]
    # Unmasked: val/loss_causal forces the mask; 12 sample tokens run through every context length up to 8 and on.
    short_run(
        tmp_path / "run", cache_dir, *tiny, "model.causal=false", "trainer.compile=true", "trainer.device=cpu",
        "trainer.max_steps=6", "trainer.eval_interval=3", "trainer.sample_tokens=12",
    )  # fmt: skip
    said = [record.getMessage() for record in caplog.records]
    assert said.count(COMPILE_ON_CPU) == 1
    assert said.index(COMPILE_ON_CPU) < next(i for i, line in enumerate(said) if line.startswith("step 0:"))
    # The training step's forward alone: evaluation (no_grad, the forced mask), the diagnostics' capture and the
    # sampling run the model eager.
    assert counters["stats"]["unique_graphs"] == 1


# Point 6 ------------------------------------------------------------------------------------------------------------

# Announces the import of `name`, then takes `seconds` over it (inside the import machinery, as a slow disk would).
SLOW_IMPORT = """
import importlib.machinery, os
class SlowImport:
    def find_spec(self, name, path, target=None):
        if name != {name!r}:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = spec.loader
        class Slow:
            def create_module(self, spec):
                return loader.create_module(spec)
            def exec_module(self, module):
                print("importing", name, flush=True)
                # held {seconds} s, or until the test says its signal is sent (the file {release!r} made)
                held = time.monotonic() + {seconds}
                while time.monotonic() < held and not os.path.exists({release!r}):
                    time.sleep(0.01)
                loader.exec_module(module)
                print("imported", name, flush=True)
        spec.loader = Slow()
        return spec
sys.meta_path.insert(0, SlowImport())
"""


@pytest.mark.slow
@pytest.mark.parametrize("received", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_torch_is_imported_ends_in_one_line_with_128_plus_the_signal(received, tmp_path):
    # The import holds until the signal ends the process: it lands while torch is imported, however loaded the machine.
    run = started(SLOW_IMPORT.format(name="torch", seconds=3600, release=""), f"hydra.run.dir={tmp_path / 'run'}")
    wait_for(run, "importing torch")
    run.send_signal(received)
    assert run.wait(timeout=30) == 128 + received
    assert run.stderr.read().strip() == f"stopped by {received.name} while train.py was starting or ending, when " + (
        "nothing is written"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_stop_during_an_import_later_on_waits_for_the_import_to_finish_then_ends_in_one_line(tmp_path, cache_dir):
    # The first AdamW imports torch._dynamo, while the run is built: an exception raised inside that import once
    # left it half done, and the run crashed at its first checkpoint ("ImportError: initialization failed").
    run = started(
        SLOW_IMPORT.format(name="torch._dynamo", seconds=3600, release=str(tmp_path / "sent")), *SHORT,
        f"data.cache_dir={cache_dir}", f"hydra.run.dir={tmp_path / 'run'}",
    )  # fmt: skip
    wait_for(run, "importing torch._dynamo")
    run.send_signal(signal.SIGINT)  # inside the import, whatever the machine's load: it goes on only once this is sent
    (tmp_path / "sent").touch()  # the signal is pending before kill() returns: taken before the import can end
    assert run.wait(timeout=30) == 128 + signal.SIGINT, run.stderr.read()
    assert "imported torch._dynamo" in run.stdout.read()  # the import went to its end before the stop
    # The signal is taken again 50 ms after the import ends (trainer/stopping.py): on a loaded machine the run may
    # be in its loop by then, and stops after its step as any Ctrl-C there does. Either way, one line.
    [line] = run.stderr.read().splitlines()
    outside = "stopped by SIGINT outside the training loop, where no checkpoint is written: any checkpoint already in "
    inside = re.fullmatch(
        r"stopped by SIGINT after step (\d+); (\S+) holds it\. Resume with: python train\.py .*", line
    )
    assert line == outside + "the run directory is whole" or (
        inside and torch.load(inside[2], weights_only=True)["step"] == int(inside[1])
    ), line


# Conditions a test makes instead of a race it hopes to win, whatever the machine's load: the run holds, saying so,
# right after it wrote a checkpoint file named {name}, until the test kills it (HOLD_AFTER_WRITE); or right after
# it logged its evaluation of step {step}, until a stop signal came (HOLD_AFTER_EVALUATION), then trains on.
HOLD_AFTER_WRITE = """
import trainer.checkpoint
write = trainer.checkpoint.Checkpointer.write
def write_then_hold(self, state, path):
    write(self, state, path)
    if path.name == {name!r}:
        print("wrote", path.name, flush=True)
        time.sleep(3600)
trainer.checkpoint.Checkpointer.write = write_then_hold
"""
HOLD_AFTER_EVALUATION = """
import threading, trainer.record, trainer.stopping
asked = threading.Event()
handle = trainer.stopping.StopSignals.handle
def handle_and_tell(self, number, frame):
    asked.set()
    handle(self, number, frame)
trainer.stopping.StopSignals.handle = handle_and_tell
evaluation = trainer.record.Recorder.evaluation
def evaluation_then_hold(self, step, losses):
    evaluation(self, step, losses)
    while step == {step} and not asked.wait(0.05):
        pass
trainer.record.Recorder.evaluation = evaluation_then_hold
"""


@pytest.mark.slow
def test_resume_auto_after_a_kill_before_the_first_checkpoint_starts_afresh_without_the_first_attempts_curves(
    tmp_path, cache_dir
):
    run_dir = tmp_path / "run"
    command = [*SHORT, "trainer.ckpt_interval=60", f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]
    first = Forked(*command, "trainer.resume=auto", patch=HOLD_AFTER_WRITE.format(name="step-0.pt"))
    wait_for(first, "wrote step-0.pt")  # kept once step 0 is evaluated
    first.send_signal(signal.SIGKILL)  # before step 30 writes best.pt: no checkpoint at all
    first.wait(timeout=30)
    assert not list(run_dir.glob("*.pt")) and len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    again = train(*command, "trainer.resume=auto", cache_dir=cache_dir)
    assert again.returncode == 0, again.stderr
    assert (
        f"trainer.resume=auto: {run_dir} holds no checkpoint to resume from, only what an attempt stopped before its "
        "first checkpoint wrote (1 TensorBoard events file and the kept checkpoint of step 0); removed, so that "
        "TensorBoard shows the steps of this fresh start once"
    ) in again.stdout
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    for tag in ("val/loss", "train/loss"):
        steps = [step for step, _ in curve(events(run_dir), tag)]
        assert steps == sorted(set(steps)) and steps[-1] == 60, tag  # every step once
    assert load_checkpoint(run_dir / "last.pt")["step"] == 60


def test_resume_auto_takes_best_pt_when_a_stopped_attempt_wrote_no_last_pt(tmp_path):
    from trainer.resume import checkpoint_to_resume

    (tmp_path / "best.pt").write_bytes(b"")
    assert checkpoint_to_resume("auto", tmp_path) == tmp_path / "best.pt"
    (tmp_path / "last.pt").write_bytes(b"")
    assert checkpoint_to_resume("auto", tmp_path) == tmp_path / "last.pt"


# Point 7 ------------------------------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path) -> Path:
    """A file system of 8 MB of its own (a tmpfs), that the test fills up."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"no tmpfs can be mounted here ({mounted.stderr.decode().strip()[:80]})")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


@pytest.mark.slow
def test_a_disk_that_fills_during_a_save_is_named_and_the_run_resumes_once_there_is_room(small_disk, cache_dir):
    run_dir = small_disk / "run"
    first = train(*SMALL, "trainer.keep_checkpoints=2", f"hydra.run.dir={run_dir}", cache_dir=cache_dir)
    assert first.returncode == 0, first.stderr
    room = shutil.disk_usage(small_disk).free - 500_000  # room for the curves, not for the next best.pt
    (small_disk / "filler").write_bytes(b"\0" * room)
    full = train(f"trainer.resume={run_dir}", "trainer.max_steps=40", cache_dir=cache_dir)
    line = error_line(full)
    assert line.startswith(f"error: {run_dir}/best.pt: cannot be written (No space left on device; the disk holding ")
    whole = f"{run_dir}/last.pt, the last good checkpoint, is whole: free some space, then resume from it"
    assert line.endswith(f" free); {whole}")
    assert "inline_container" not in line and "unexpected pos" not in line
    assert load_checkpoint(run_dir / "last.pt")["step"] == 20  # whole, every record's CRC checked
    assert not [path for path in small_disk.rglob("*") if path.name.endswith(".tmp")]
    os.unlink(small_disk / "filler")
    resumed = train(f"trainer.resume={run_dir}", "trainer.max_steps=40", cache_dir=cache_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(run_dir / "last.pt")["step"] == 40
