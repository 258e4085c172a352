"""Stopping at any moment and sizes a machine cannot hold (issue 19, points 5, 7 and 9): every way ends in one line
and an exit status, never a traceback, and leaves nothing half-written."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, SHORT


def train_py_where(patch: str) -> list[str]:
    """`python train.py ARGS` as a user starts it, with `patch` run first: it slows one part down (printing when it
    starts), so that a signal lands in the middle of it."""
    run_train_py = 'sys.argv = ["train.py", *sys.argv[1:]]; runpy.run_path("train.py", run_name="__main__")'
    return ["-c", f"import runpy, sys, time, torch\n{patch}\n{run_train_py}"]


# Every checkpoint after step 20 is written slowly: a part of the file, then a pause.
SLOW_SAVE = """
save = torch.save
def slow_save(state, file):
    if state["step"] > 20:
        file.write(b"half a checkpoint")
        print("saving step", state["step"], flush=True)
        time.sleep(60)
    save(state, file)
torch.save = slow_save
"""
# The model is made slowly: the run is being built, the training loop has not begun.
SLOW_BUILD = """
import trainer.run
build_model = trainer.run.build_model
def slow_build(*args):
    print("building the model", flush=True)
    time.sleep(60)
    return build_model(*args)
trainer.run.build_model = slow_build
"""


def start(run_dir: Path, cache_dir: Path, *overrides: str, script: list[str] = ("train.py",)) -> subprocess.Popen:
    command = [sys.executable, "-u", *script, *SHORT, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]
    return subprocess.Popen([*command, *overrides], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(run: subprocess.Popen, text: str) -> None:
    for line in run.stdout:
        if text in line:
            return
    raise AssertionError(f"the run ended before printing {text!r}: {run.stderr.read()}")


@pytest.mark.slow
def test_a_second_ctrl_c_during_the_save_ends_at_once_in_one_line_naming_the_whole_checkpoint(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    run = start(run_dir, cache_dir, "trainer.ckpt_interval=20", script=train_py_where(SLOW_SAVE))
    wait_for(run, "step 30:")  # last.pt holds step 20
    run.send_signal(signal.SIGINT)  # stop after this step: its checkpoint is saved, slowly
    wait_for(run, "saving step")
    run.send_signal(signal.SIGINT)  # now
    started = time.monotonic()
    assert run.wait(timeout=20) == 128 + signal.SIGINT
    assert time.monotonic() - started < 10  # not after the minute-long save
    stderr = run.stderr.read().strip()
    assert stderr == (
        f"stopped at once by a second SIGINT; a checkpoint being written was dropped, {run_dir}/last.pt (step 20) is "
        f"whole. Resume with: python train.py trainer.resume={run_dir}"
    )
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == 20
    assert not [path.name for path in run_dir.iterdir() if path.name.endswith(".tmp")]


@pytest.mark.slow
@pytest.mark.parametrize("received", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_run_is_built_ends_in_one_line_with_128_plus_the_signal(received, tmp_path, cache_dir):
    run = start(tmp_path / "run", cache_dir, script=train_py_where(SLOW_BUILD))
    wait_for(run, "building the model")
    run.send_signal(received)
    assert run.wait(timeout=20) == 128 + received
    assert run.stderr.read().strip() == (
        f"stopped by {received.name} outside the training loop, where no checkpoint is written: any checkpoint "
        "already in the run directory is whole"
    )
