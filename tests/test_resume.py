import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_faults_trainer import HOLD_AFTER_EVALUATION

import train
from conftest import ROOT, SHORT, SHORT_RUN, Forked, cli, compose_config, curve, events, short_run, wait_for
from trainer.config import to_train_config
from trainer.step import TrainStep
from trainer.stopping import Interrupted, NonFiniteLoss

pytestmark = pytest.mark.slow

TAGS = ["train/loss", "train/lr", "train/loss_eval", "val/loss"]


def settings(run_dir: Path, cache_dir: Path, *overrides: str) -> list[str]:
    """SHORT with a checkpoint every 20 steps (conftest's SHORT_RUN, as the uninterrupted run) into `run_dir`."""
    return [*SHORT, *SHORT_RUN, f"data.cache_dir={cache_dir}", f'hydra.run.dir="{run_dir}"', *overrides]


def start_run(run_dir: Path, cache_dir: Path, *overrides: str) -> Forked:
    """`python train.py SETTINGS` in a process of its own, to be stopped by a signal."""
    return Forked(*settings(run_dir, cache_dir, *overrides))


def resume(target: Path, *overrides: str) -> subprocess.CompletedProcess:
    """`python train.py trainer.resume=TARGET OVERRIDES`, in this process (conftest's cli)."""
    return cli("train.py", f"trainer.resume={target}", *overrides)


@pytest.fixture(scope="module")
def uninterrupted(short_run_dir) -> Path:
    """SHORT_RUN from its start to its end, trained once per session (conftest's short_run_dir): read only."""
    return short_run_dir


def assert_same_run(run_dir: Path, reference: Path, steps: int = 60) -> None:
    """Bit-identical final weights after `steps`, and every curve with each step exactly once and the same values."""
    ours, theirs = (
        torch.load(run_dir / "last.pt", weights_only=True),
        torch.load(reference / "last.pt", weights_only=True),
    )
    assert ours["step"] == theirs["step"] == steps
    assert all(torch.equal(ours["model"][name], theirs["model"][name]) for name in theirs["model"])
    for tag in TAGS:
        assert curve(events(run_dir), tag) == curve(events(reference), tag), tag


def test_run_killed_and_started_again_with_resume_auto_ends_bit_identical_to_an_uninterrupted_one(
    tmp_path, cache_dir, uninterrupted
):
    run = start_run(tmp_path, cache_dir, "trainer.resume=auto")  # no last.pt yet: auto starts fresh
    wait_for(run, "step 30:")  # last.pt is at step 20; steps 21-30 are logged, and must not appear twice
    run.send_signal(signal.SIGKILL)  # as a preempted cluster job: no chance to save
    run.wait()
    assert torch.load(tmp_path / "last.pt", weights_only=True)["step"] in (20, 40)
    requeued = cli("train.py", *settings(tmp_path, cache_dir, "trainer.resume=auto"))  # the same again, a requeue
    assert requeued.returncode == 0, requeued.stderr
    assert_same_run(tmp_path, uninterrupted)
    assert (tmp_path / ".hydra" / "overrides.yaml").read_text().count("trainer.ckpt_interval=20") == 1  # kept
    assert "resumed from step" in (tmp_path / "train.log").read_text()


# SIGTERM is handled as SIGINT is (tests/test_loop.py pins both, the exit status and the plain path's resume
# command); a real SIGTERM stops the in-process run of the gradient-accumulation test below.
def test_sigint_saves_a_checkpoint_and_prints_a_resume_command_that_works_when_pasted(
    tmp_path, cache_dir, uninterrupted
):
    # Whatever the directory is called: not ASCII, a tilde where bash would expand one, and a sweep job's name with
    # Hydra's syntax and a space.
    run_dir = tmp_path / "~josé" / "café" / "1_model.causal=True,x y"
    run = Forked(*settings(run_dir, cache_dir), patch=HOLD_AFTER_EVALUATION.format(step=30))
    wait_for(run, "step 30:")
    run.send_signal(signal.SIGINT)  # the run holds at step 30 until it comes, before step 60 ends it
    assert run.wait(timeout=60) == 128 + signal.SIGINT
    stderr = run.stderr.read()
    assert "stopped by SIGINT after step" in stderr
    assert 30 <= torch.load(run_dir / "last.pt", weights_only=True)["step"] < 60
    command = stderr.split("Resume with: ")[1].strip()
    assert "josé" in command and "~" in command
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # `python`: this one
    resumed = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, (command, resumed.stderr)
    assert_same_run(run_dir, uninterrupted)
    assert [step for step, _ in curve(events(run_dir), "val/loss")] == [0, 30, 60]


def test_resume_may_raise_max_steps(tmp_path, cache_dir, uninterrupted):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "last.pt").write_bytes((uninterrupted / "last.pt").read_bytes())
    (run_dir / "best.pt").write_bytes((uninterrupted / "best.pt").read_bytes())
    resumed = resume(run_dir / "last.pt", "trainer.max_steps=80")
    assert resumed.returncode == 0, resumed.stderr
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == 80


def test_resume_auto_on_a_finished_run_says_so_and_trains_nothing(tmp_path, cache_dir, uninterrupted):
    """A sweep run again with trainer.resume=auto to finish it goes past a job that had ended, which a checkpoint
    named outright would refuse (it asks to train on)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("last.pt", "best.pt"):
        (run_dir / name).write_bytes((uninterrupted / name).read_bytes())
    before = (run_dir / "last.pt").stat().st_mtime_ns
    again = cli("train.py", *settings(run_dir, cache_dir, "trainer.resume=auto"))
    assert again.returncode == 0, again.stderr
    assert f"{run_dir}: finished at step 60 already (trainer.resume=auto): nothing to train" in again.stdout
    assert (run_dir / "last.pt").stat().st_mtime_ns == before and not list(run_dir.glob("events.*"))


def test_non_finite_loss_stops_at_once_naming_the_step_and_keeps_the_last_good_checkpoint(
    tmp_path, cache_dir, monkeypatch
):
    step_of = TrainStep.__call__
    calls = []

    def diverging_step(*args, **kwargs):
        calls.append(1)
        loss = step_of(*args, **kwargs)
        return loss * float("nan") if len(calls) >= 25 else loss

    monkeypatch.setattr(TrainStep, "__call__", diverging_step)
    with pytest.raises(NonFiniteLoss, match="non-finite at step 25; .*last.pt, the last good checkpoint, is kept"):
        short_run(tmp_path, cache_dir, "trainer.ckpt_interval=20")
    assert len(calls) == 30  # stopped at the first log step after it
    assert torch.load(tmp_path / "last.pt", weights_only=True)["step"] == 20


def test_a_second_process_aiming_at_a_run_directory_in_use_is_refused_and_the_run_ends_untouched(
    tmp_path, cache_dir, uninterrupted
):
    run = start_run(tmp_path, cache_dir)
    wait_for(run, "step 30:")  # last.pt exists; the run holds its directory's lock
    run.send_signal(signal.SIGSTOP)  # it keeps the lock while the others try
    try:
        # Two resumes of a run that is still going, and a fresh run aimed at its directory, all at once.
        commands = [[f"trainer.resume={tmp_path}"]] * 2
        commands.append([*SHORT, f"data.cache_dir={cache_dir}", f"hydra.run.dir={tmp_path}"])
        started = [Forked(*command, stdout=False) for command in commands]
        refusals = [(process.wait(timeout=120), process.stderr.read()) for process in started]
    finally:
        run.send_signal(signal.SIGCONT)
    for returncode, stderr in refusals:
        assert returncode == 1
        assert stderr.strip() == (
            f"error: {tmp_path}: this run directory is in use by process {run.pid} on {os.uname().nodename}; wait "
            "for it to end (or stop it) before resuming or starting a run there"
        )
    assert run.wait(timeout=120) == 0, run.stderr.read()
    assert_same_run(tmp_path, uninterrupted)  # no step of the others, no purged curve
    assert (tmp_path / "train.log").read_text().count("step 60: train loss") == 1


def test_a_run_with_gradient_accumulation_filling_blanks_stopped_mid_run_resumes_bit_identical(
    tmp_path, cache_dir, monkeypatch
):
    # Filling blanks: the blanks are drawn from the run's batch generator, which the checkpoint holds. 30 steps: the
    # five after the stop, a log and an evaluation among them, show any state the resume did not put back.
    accumulating = ["trainer.grad_accum_steps=4", "trainer.ckpt_interval=20", "task=fill_blank", "model.causal=false",
                    "trainer.max_steps=30"]  # fmt: skip
    short_run(tmp_path / "whole", cache_dir, *accumulating)
    step_of, calls = TrainStep.__call__, []

    def signalled_at_step_25(*args, **kwargs):
        calls.append(1)
        if len(calls) == 25:
            os.kill(os.getpid(), signal.SIGTERM)  # as a cluster's preemption would
        return step_of(*args, **kwargs)

    monkeypatch.setattr(TrainStep, "__call__", signalled_at_step_25)
    with pytest.raises(Interrupted, match="stopped by SIGTERM after step 25"):
        short_run(tmp_path / "stopped", cache_dir, *accumulating)
    monkeypatch.setattr(TrainStep, "__call__", step_of)
    checkpoint = torch.load(tmp_path / "stopped" / "last.pt", weights_only=True)
    config = to_train_config(compose_config(*SHORT, f"data.cache_dir={cache_dir}", *accumulating))
    train.train(config, tmp_path / "stopped", checkpoint)
    assert_same_run(tmp_path / "stopped", tmp_path / "whole", steps=30)
