import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from conftest import ROOT
from test_train import SHORT, curve, events, short_run
from trainer.stopping import NonFiniteLoss

pytestmark = pytest.mark.slow

TAGS = ["train/loss", "train/lr", "train/loss_eval", "val/loss"]


def start_run(run_dir: Path, cache_dir: Path, *overrides: str) -> subprocess.Popen:
    command = [sys.executable, "-u", "train.py", *SHORT, "trainer.ckpt_interval=20", f"data.cache_dir={cache_dir}",
               f"hydra.run.dir={run_dir}", *overrides]  # fmt: skip
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(run: subprocess.Popen, text: str) -> None:
    for line in run.stdout:
        if text in line:
            return
    raise AssertionError(f"the run ended before logging {text!r}: {run.stderr.read()}")


def resume(target: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train.py", f"trainer.resume={target}", *overrides],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)  # fmt: skip


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, cache_dir) -> Path:
    run_dir = tmp_path_factory.mktemp("uninterrupted")
    run = start_run(run_dir, cache_dir)
    assert run.wait(timeout=180) == 0, run.stderr.read()
    return run_dir


def assert_same_run(run_dir: Path, reference: Path) -> None:
    """Bit-identical final weights, and every curve with each step exactly once and the same values."""
    ours, theirs = (
        torch.load(run_dir / "last.pt", weights_only=True),
        torch.load(reference / "last.pt", weights_only=True),
    )
    assert ours["step"] == theirs["step"] == 60
    assert all(torch.equal(ours["model"][name], theirs["model"][name]) for name in theirs["model"])
    for tag in TAGS:
        assert curve(events(run_dir), tag) == curve(events(reference), tag), tag


def test_run_killed_and_resumed_ends_bit_identical_to_an_uninterrupted_one(tmp_path, cache_dir, uninterrupted):
    run = start_run(tmp_path, cache_dir)
    wait_for(run, "step 30:")  # last.pt is at step 20; steps 21-30 are logged, and must not appear twice
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert torch.load(tmp_path / "last.pt", weights_only=True)["step"] in (20, 40)
    resumed = resume(tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert_same_run(tmp_path, uninterrupted)
    assert (tmp_path / ".hydra" / "overrides.yaml").read_text().count("trainer.ckpt_interval=20") == 1  # kept
    assert "resumed from step" in (tmp_path / "train.log").read_text()


@pytest.mark.parametrize("received", [signal.SIGINT, signal.SIGTERM])
def test_signal_saves_a_checkpoint_and_prints_the_command_that_resumes(tmp_path, cache_dir, uninterrupted, received):
    run = start_run(tmp_path, cache_dir)
    wait_for(run, "step 30:")
    run.send_signal(received)
    assert run.wait(timeout=60) == 128 + received
    stderr = run.stderr.read()
    assert f"stopped by {received.name} after step" in stderr
    assert f"Resume with: python train.py trainer.resume={tmp_path}" in stderr
    assert 30 <= torch.load(tmp_path / "last.pt", weights_only=True)["step"] < 60
    resumed = resume(tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert_same_run(tmp_path, uninterrupted)


def test_resume_may_raise_max_steps(tmp_path, cache_dir, uninterrupted):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "last.pt").write_bytes((uninterrupted / "last.pt").read_bytes())
    (run_dir / "best.pt").write_bytes((uninterrupted / "best.pt").read_bytes())
    resumed = resume(run_dir / "last.pt", "trainer.max_steps=80")
    assert resumed.returncode == 0, resumed.stderr
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == 80


def test_non_finite_loss_stops_at_once_naming_the_step_and_keeps_the_last_good_checkpoint(
    tmp_path, cache_dir, monkeypatch
):
    step_of = train.train_step
    calls = []

    def diverging_step(*args, **kwargs):
        calls.append(1)
        loss = step_of(*args, **kwargs)
        return loss * float("nan") if len(calls) >= 25 else loss

    monkeypatch.setattr(train, "train_step", diverging_step)
    with pytest.raises(NonFiniteLoss, match="non-finite at step 25; .*last.pt, the last good checkpoint, is kept"):
        short_run(tmp_path, cache_dir, "trainer.ckpt_interval=20")
    assert len(calls) == 30  # stopped at the first log step after it
    assert torch.load(tmp_path / "last.pt", weights_only=True)["step"] == 20
