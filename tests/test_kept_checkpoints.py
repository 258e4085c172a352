"""The earlier checkpoints a run keeps to look back at (RUN/steps/step-N.pt, trainer.keep_checkpoints): which steps
(kept_steps, a pure function), what they hold, and that nothing ever resumes from one."""

import shutil
import signal
import sys
from pathlib import Path

import pytest
import torch
from test_faults_trainer import HOLD_AFTER_WRITE

import train
from conftest import SHORT, Forked, cli, short_run, wait_for
from trainer.checkpoint import KEPT_FORMAT, KEPT_KEYS, kept_checkpoints, kept_steps, load_checkpoint
from trainer.cli import run_with_one_line_errors

EVERY_10 = ["trainer.eval_interval=10", "trainer.ckpt_interval=20", "trainer.keep_checkpoints=4"]


def evaluations(max_steps: int, interval: int, start: int = 0) -> list[int]:
    """The steps a run evaluates at, as trainer/schedule.py says: every `interval`, and the last."""
    steps = list(range(start, max_steps + 1, interval))
    return steps + ([max_steps] if max_steps % interval else [])


def kept_over(steps: list[int], keep: int, interval: int, kept: tuple[int, ...] = ()) -> list[int]:
    kept = list(kept)
    for step in steps:
        kept = kept_steps(kept, step, keep, interval)
    return kept


def steps_on_disk(run_dir: Path) -> list[int]:
    return [int(path.stem.removeprefix("step-")) for path in kept_checkpoints(run_dir)]


def test_every_evaluation_is_kept_while_they_are_few():
    assert kept_over(evaluations(3000, 500), keep=8, interval=500) == [0, 500, 1000, 1500, 2000, 2500, 3000]


def test_many_evaluations_are_spread_log_like_dense_where_the_leak_is_learned():
    # The leak preset: 500 steps, evaluated every 50; it learns to read ahead within its first 100.
    assert kept_over(evaluations(500, 50), keep=8, interval=50) == [0, 50, 100, 150, 200, 300, 400, 500]
    assert kept_over(evaluations(1000, 100), keep=8, interval=100) == [0, 100, 200, 300, 400, 600, 800, 1000]


@pytest.mark.parametrize("max_steps", [10_000, 1_000_000])
def test_the_set_stays_bounded_whatever_max_steps_and_keeps_the_first_and_the_newest(max_steps):
    kept = kept_over(evaluations(max_steps, 500), keep=8, interval=500)
    assert len(kept) == 8 and kept[0] == 0 and kept[-1] == max_steps
    gaps = [later - earlier for earlier, later in zip(kept, kept[1:])]
    assert gaps == sorted(gaps)  # ever sparser later


def test_none_or_one_kept():
    assert kept_over(evaluations(500, 50), keep=0, interval=50) == []
    assert kept_over(evaluations(500, 50), keep=1, interval=50) == [0]  # the untrained model, which no other holds


def test_a_resumed_run_goes_on_as_an_uninterrupted_one_and_steps_past_the_newest_give_way():
    through_250 = kept_over(evaluations(250, 50), keep=4, interval=50)
    resumed = kept_over(evaluations(500, 50, start=300), keep=4, interval=50, kept=tuple(through_250))
    assert resumed == kept_over(evaluations(500, 50), keep=4, interval=50)
    # An attempt killed after keeping step 300 resumes from last.pt at step 250: 300 is written again, not doubled.
    assert kept_steps([0, 100, 250, 300], 300, keep=4, eval_interval=50) == kept_steps([0, 100, 250], 300, 4, 50)
    assert 350 not in kept_steps([0, 100, 250, 350], 300, keep=4, eval_interval=50)


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory, cache_dir) -> Path:
    run_dir = tmp_path_factory.mktemp("kept") / "run"
    short_run(run_dir, cache_dir, *EVERY_10)
    return run_dir


@pytest.mark.slow
def test_a_run_keeps_the_steps_the_policy_names_each_a_whole_copy_of_its_weights(kept_run):
    assert steps_on_disk(kept_run) == kept_over(evaluations(60, 10), keep=4, interval=10) == [0, 10, 20, 60]
    last = torch.load(kept_run / "last.pt", weights_only=True)
    for path in kept_checkpoints(kept_run):
        kept = load_checkpoint(path)  # every record's CRC checked, the weights fit their settings
        assert kept.keys() == KEPT_KEYS and kept["format"] == KEPT_FORMAT
        assert path.stat().st_size < (kept_run / "last.pt").stat().st_size / 2  # no optimizer, no random states
    final = load_checkpoint(kept_run / "steps" / "step-60.pt")
    assert all(torch.equal(final["model"][name], last["model"][name]) for name in last["model"])
    assert not list((kept_run / "steps").glob(".*.tmp"))


def run_train(monkeypatch, *overrides: str) -> str:
    monkeypatch.setattr(sys, "argv", ["train.py", *overrides])
    with pytest.raises(SystemExit) as stopped:
        run_with_one_line_errors(train.main)
    return stopped.value.code


@pytest.mark.slow
def test_naming_a_kept_checkpoint_to_resume_from_is_refused_naming_the_runs_last_pt(kept_run, tmp_path, monkeypatch):
    run_dir = Path(shutil.copytree(kept_run, tmp_path / "run"))
    before = sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*"))
    error = run_train(monkeypatch, f"trainer.resume={run_dir}/steps/step-20.pt", "trainer.max_steps=80")
    assert error == (
        f"error: trainer.resume={run_dir}/steps/step-20.pt: a kept checkpoint, which holds the weights only (no "
        f"optimizer state, no random states), so no run resumes from it; resume the run from {run_dir}/last.pt "
        f"(step 60): python train.py trainer.resume={run_dir}"
    )
    after = sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*") if path.name != "train.log")
    assert after == [name for name in before if not name.endswith("train.log")]  # no Hydra record, no branch


@pytest.mark.slow
def test_a_resumed_run_keeps_by_the_same_policy_and_a_branch_keeps_its_own(kept_run, tmp_path, cache_dir):
    run_dir = Path(shutil.copytree(kept_run, tmp_path / "run"))
    at_60 = (run_dir / "last.pt").read_bytes()
    resumed = cli("train.py", f"trainer.resume={run_dir}", "trainer.max_steps=90")
    assert resumed.returncode == 0, resumed.stderr
    assert steps_on_disk(run_dir) == kept_over(evaluations(90, 10), keep=4, interval=10)
    parent = steps_on_disk(run_dir)
    (run_dir / "best.pt").write_bytes(at_60)  # older than last.pt (step 90): a resume from it branches
    branched = cli("train.py", f"trainer.resume={run_dir}/best.pt", "trainer.max_steps=100")
    assert branched.returncode == 0, branched.stderr
    branch = run_dir / "branch-from-step-60"
    assert steps_on_disk(branch) == kept_over(evaluations(100, 10, start=70), keep=4, interval=10) == [70, 80, 90, 100]
    assert steps_on_disk(run_dir) == parent  # the parent's stay as they were


@pytest.mark.slow
def test_resume_auto_after_a_kill_takes_last_pt_though_a_newer_checkpoint_was_kept(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    settings = [*SHORT, *EVERY_10, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}", "trainer.resume=auto"]
    run = Forked(*settings, patch=HOLD_AFTER_WRITE.format(name="step-30.pt"))
    wait_for(run, "wrote step-30.pt")  # evaluated at 30 and kept; last.pt holds step 20
    run.send_signal(signal.SIGKILL)  # before last.pt at step 40: the run holds until then
    run.wait(timeout=60)
    assert steps_on_disk(run_dir) == [0, 10, 20, 30]
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == 20
    again = cli("train.py", *settings)  # the same command again, in this process (conftest's cli)
    assert again.returncode == 0, again.stderr
    assert "resumed from step 20" in again.stdout
    assert steps_on_disk(run_dir) == [0, 10, 20, 60]  # as the uninterrupted run keeps them
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == 60
