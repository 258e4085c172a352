"""Where a run writes and what it resumes, without training: the run-directory resolvers, the run lock, which
checkpoint trainer.resume names and which settings a resume may change."""

import os
from pathlib import Path

import pytest
import torch

from conftest import cli, compose_config
from trainer.checkpoint import KEPT_FORMAT, CheckpointError
from trainer.config import ConfigError, plain_config, to_train_config
from trainer.resume import checkpoint_to_resume, resume_override, resumed_config
from trainer.run_dir import RunDirInUse, RunLock, hydra_subdir, run_dir


def test_a_fresh_run_writes_where_hydra_says_and_a_resumed_one_in_its_own_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    (tmp_path / "last.pt").write_bytes(b"")
    assert run_dir(None, "outputs/day/time") == "outputs/day/time"
    assert run_dir("auto", "outputs/day/time") == "outputs/day/time"  # auto resumes where the launcher points
    assert run_dir(str(tmp_path), "outputs/day/time") == str(tmp_path)
    assert run_dir(str(tmp_path / "last.pt"), "outputs/day/time") == str(tmp_path)


def test_torchrun_ranks_share_one_directory_named_by_the_rendezvous(monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "0123456789abcdef")
    assert run_dir(None, "outputs/day/time") == "outputs/day/torchrun-01234567"


def test_hydra_files_of_a_resume_go_beside_the_first_runs_and_other_ranks_write_none(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    assert hydra_subdir(None, str(tmp_path)) == ".hydra"
    assert hydra_subdir("auto", str(tmp_path)) == ".hydra"  # nothing there yet: a fresh start
    assert hydra_subdir(str(tmp_path), str(tmp_path)).startswith(".hydra/resume-")
    (tmp_path / ".hydra").mkdir()
    assert hydra_subdir("auto", str(tmp_path)).startswith(".hydra/resume-")
    monkeypatch.setenv("RANK", "1")
    assert hydra_subdir(None, str(tmp_path)) is None


def test_run_lock_refuses_a_second_writer_naming_the_holder_and_is_free_again_after(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(RunDirInUse, match=f"in use by process {os.getpid()} on {os.uname().nodename}; wait"):
            with RunLock(tmp_path):
                pass
        with RunLock(tmp_path, holds=False):  # a rank other than 0: rank 0 holds it for all
            pass
    with RunLock(tmp_path):
        pass


def test_resume_takes_a_run_directorys_last_checkpoint_or_the_file_named(tmp_path):
    assert checkpoint_to_resume(None, tmp_path) is None
    assert checkpoint_to_resume("auto", tmp_path) is None  # nothing to resume yet: a fresh start
    (tmp_path / "last.pt").write_bytes(b"")
    assert checkpoint_to_resume("auto", tmp_path) == tmp_path / "last.pt"
    assert checkpoint_to_resume(str(tmp_path), Path("elsewhere")) == tmp_path / "last.pt"
    with pytest.raises(CheckpointError, match="trainer.resume=.*nowhere: no such run directory or checkpoint file"):
        checkpoint_to_resume(str(tmp_path / "nowhere"), tmp_path)


def test_resume_command_quotes_a_directory_that_hydras_grammar_or_the_shell_would_misread():
    assert resume_override(Path("/runs/day/time")) == "trainer.resume=/runs/day/time"
    assert (
        resume_override(Path("/runs/1_model.causal=True,x y")) == "'trainer.resume=\"/runs/1_model.causal=True,x y\"'"
    )


def resume_with(*overrides: str, step: int = 60):
    saved = plain_config(
        to_train_config(compose_config("trainer.max_steps=60", "trainer.eval_interval=30", "model.d_k=64"))
    )
    return resumed_config(saved, compose_config(*overrides), list(overrides), step)


def test_a_resume_takes_the_checkpoints_settings_and_the_resumable_ones_given():
    config = resume_with("trainer.resume=x", "trainer.max_steps=80", "trainer.sample_tokens=3", "model.d_k=64")
    assert config.model.d_k == 64 and config.trainer.max_steps == 80 and config.trainer.sample_tokens == 3
    assert config.trainer.resume == "x" and config.model.vocab_size is None  # set again from the tokenizer


def test_a_resume_refuses_other_changed_settings_naming_them():
    with pytest.raises(ConfigError, match=r"^trainer.resume: model.d_k, optim.lr cannot change when a run resumes"):
        resume_with("trainer.max_steps=80", "optim.lr=1e-3", "model.d_k=32")


def test_a_resume_must_leave_steps_to_train():
    with pytest.raises(ConfigError, match=r"^trainer.max_steps=60: the run being resumed is at step 60 already"):
        resume_with("trainer.resume=x")


def test_a_kept_checkpoint_named_to_resume_writes_in_its_run_and_records_nothing_before_it_is_refused(tmp_path):
    kept = tmp_path / "steps" / "step-5.pt"
    kept.parent.mkdir()
    torch.save({"format": KEPT_FORMAT, "step": 5, "config": {"trainer": {"max_steps": 60}}}, kept)
    assert run_dir(str(kept), "outputs/day/time") == str(tmp_path)  # not RUN/steps
    assert hydra_subdir(str(kept), str(tmp_path)) is None
    with pytest.raises(CheckpointError, match=rf"a kept checkpoint, .*; {tmp_path} holds no last.pt to resume from$"):
        checkpoint_to_resume(str(kept), tmp_path)


def test_a_sweep_job_refused_before_it_trains_leaves_nothing_behind(tmp_path):
    sweep = tmp_path / "new" / "sweep"
    refused = cli("train.py", "-m", "model.d_k=-8,8", f"hydra.sweep.dir={sweep}")
    assert (refused.returncode, refused.stderr.strip()) == (1, "error: model.d_k=-8: must be positive")
    assert not sweep.parent.exists()  # the job's directory, the sweep's and the one above it, all made by the sweep
    sweep.mkdir(parents=True)  # a sweep directory there before stays as it was: empty, then holding a file
    assert cli("train.py", "-m", "model.d_k=-8,8", f"hydra.sweep.dir={sweep}").returncode == 1
    assert list(sweep.iterdir()) == []
    (sweep / "notes.txt").write_text("mine")
    assert cli("train.py", "-m", "model.d_k=-8,8", f"hydra.sweep.dir={sweep}").returncode == 1
    assert [path.name for path in sweep.iterdir()] == ["notes.txt"]  # no job's directory, no multirun.yaml
    assert (sweep / "notes.txt").read_text() == "mine"
