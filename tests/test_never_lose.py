"""Never lose a run, through the commands a user types: a fresh run never replaces one, an older best.pt branches,
a damaged checkpoint is refused, and the resume command is quoted to parse back whatever the directory is called
(pasted into bash after a Ctrl-C: tests/test_resume.py; a changed text named on resume: test_faults_trainer.py)."""

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from conftest import SHORT, cli, curve, events
from data import DataConfig, DataError
from trainer.config import ConfigError
from trainer.overrides import PARSER, override
from trainer.resume import check_same_data
from trainer.run_dir import check_fresh_start, resume_dir

CKPT_20 = ["trainer.ckpt_interval=20"]


def train(*overrides: str, cache_dir: Path) -> subprocess.CompletedProcess:
    """`python train.py OVERRIDES`, in this process (conftest's cli): what it prints and its exit status. The test
    that stops a run with Ctrl-C and pastes its resume command into bash starts both as a user does."""
    return cli("train.py", *overrides, f"data.cache_dir={cache_dir}")


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file below `directory` (hidden ones included) and its bytes."""
    return {str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*") if path.is_file()}


def error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


@pytest.fixture(scope="module")
def finished(tmp_path_factory, cache_dir) -> tuple[Path, bytes]:
    """A run that stopped at step 30 and was resumed to its end at 60, both with train.py; and its step-30 last.pt."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    first = train(*SHORT, *CKPT_20, "trainer.max_steps=30", f"hydra.run.dir={run_dir}", cache_dir=cache_dir)
    assert first.returncode == 0, first.stderr
    at_30 = (run_dir / "last.pt").read_bytes()
    resumed = train(f"trainer.resume={run_dir}", "trainer.max_steps=60", cache_dir=cache_dir)
    assert resumed.returncode == 0, resumed.stderr
    return run_dir, at_30


def copy_of(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "run", symlinks=True))


@pytest.mark.slow
def test_a_fresh_run_aimed_at_a_finished_run_is_refused_naming_it_and_the_ways_on_and_writes_nothing(
    finished, tmp_path, cache_dir
):
    run_dir = copy_of(finished[0], tmp_path)
    before = snapshot(run_dir)
    refused = train(*SHORT, f"hydra.run.dir={run_dir}", cache_dir=cache_dir)
    assert error_line(refused) == (
        f"error: hydra.run.dir={run_dir}: holds a run at step 60 of 60 (last.pt), which a fresh run would replace; "
        f"resume it (python train.py trainer.resume={run_dir} trainer.max_steps=120), pick a new hydra.run.dir, or "
        f"add trainer.start_over=true to start over there (the earlier run's files are kept in "
        f"{run_dir}/earlier-DATE_TIME)"
    )
    assert snapshot(run_dir) == before  # checkpoints, curves, log and Hydra's record: not a byte written


@pytest.mark.slow
def test_start_over_moves_the_earlier_run_aside_whole_and_the_new_run_has_the_directory_to_itself(
    finished, tmp_path, cache_dir
):
    run_dir = copy_of(finished[0], tmp_path)
    before = snapshot(run_dir)
    new = ["trainer.max_steps=20", "trainer.eval_interval=10", "trainer.start_over=true"]
    started = train(*SHORT, *new, f"hydra.run.dir={run_dir}", cache_dir=cache_dir)
    assert started.returncode == 0, started.stderr
    (aside,) = run_dir.glob("earlier-*")
    moved = snapshot(aside)
    assert {name: data for name, data in moved.items() if name != "train.log"} == {
        name: data for name, data in before.items() if name not in ("train.log", ".train.lock")
    }
    assert moved["train.log"] == before["train.log"]  # copied before the new run's log began
    assert f"was moved into {aside}, whole" in (run_dir / "train.log").read_text()
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == 20
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1  # the curves are not doubled
    assert [step for step, _ in curve(events(run_dir), "val/loss")] == [0, 10, 20]
    assert "trainer.start_over=true" in (run_dir / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.slow
def test_a_resume_from_a_best_pt_older_than_last_pt_branches_keeping_the_run_into_a_record_of_where_it_came_from(
    finished, tmp_path, cache_dir
):
    run_dir = copy_of(finished[0], tmp_path)
    (run_dir / "best.pt").write_bytes(finished[1])  # best.pt at step 30, last.pt at step 60
    before = snapshot(run_dir)
    resumed = train(f"trainer.resume={run_dir}/best.pt", "trainer.max_steps=40", cache_dir=cache_dir)
    assert resumed.returncode == 0, resumed.stderr
    branch = run_dir / "branch-from-step-30"
    assert (
        f"trainer.resume: {run_dir}/best.pt (step 30) is older than {run_dir}/last.pt (step 60); this run branches "
        f"into {branch}, so that {run_dir}/last.pt and the curves past step 30 stay as they are"
    ) in resumed.stdout
    assert {name: data for name, data in snapshot(run_dir).items() if not name.startswith(branch.name)} == before
    assert torch.load(branch / "last.pt", weights_only=True)["step"] == 40
    assert [step for step, _ in curve(events(branch), "val/loss")] == [40]
    for name in ("config.yaml", "overrides.yaml", "hydra.yaml"):  # the parent's record
        assert (branch / ".hydra" / name).read_bytes() == (run_dir / ".hydra" / name).read_bytes(), name
    record = OmegaConf.load(branch / ".hydra" / "branch.yaml")
    assert (record.branched_from, record.step, record.parent, record.parent_last_step) == (
        str(run_dir / "best.pt"), 30, str(run_dir), 60,
    )  # fmt: skip
    assert "model.d_model=64" in OmegaConf.load(branch / ".hydra" / "overrides.yaml")  # TensorBoard names it so
    assert "this run branches into" in (branch / "train.log").read_text()


def test_a_checkpoint_from_before_the_text_record_is_checked_by_its_tokenizer_alone_with_a_warning(caplog):
    now = {"text": {"text": ["a digest"]}, "tokens": {"train.npy": {"bytes": 1, "crc32": 2}}}
    check_same_data({"tokenizer": "T"}, "T", now, DataConfig())
    assert "predates the record of its training text; only its tokenizer is checked" in caplog.text
    with pytest.raises(DataError, match="trainer.resume: the tokenizer changed since"):
        check_same_data({"tokenizer": "T"}, "U", now, DataConfig())


def damage_largest_record(path: Path) -> None:
    """Random bytes over the middle of the largest tensor record; the zip's directory stays whole."""
    with zipfile.ZipFile(path) as archive:
        record = max(archive.infolist(), key=lambda info: info.file_size)
    with open(path, "r+b") as file:
        file.seek(record.header_offset + 26)
        name_length, extra_length = (int.from_bytes(file.read(2), "little") for _ in range(2))
        file.seek(record.header_offset + 30 + name_length + extra_length + record.file_size // 2)
        file.write(os.urandom(64))


@pytest.mark.slow
def test_a_checkpoint_with_damaged_tensor_bytes_is_refused_naming_the_whole_one(finished, tmp_path, cache_dir):
    run_dir = copy_of(finished[0], tmp_path)
    damage_largest_record(run_dir / "last.pt")
    resumed = train(f"trainer.resume={run_dir}", "trainer.max_steps=80", cache_dir=cache_dir)
    line = error_line(resumed)
    assert line.startswith(f"error: {run_dir}/last.pt: damaged (archive/data/")
    assert line.endswith(f"does not match its checksum); {run_dir}/best.pt is whole")
    sampled = cli("sample.py", f"ckpt={run_dir}", "max_new_tokens=5")
    # sample.py reads: it names the damaged last.pt and samples from the whole best.pt (one rule for every reader)
    assert sampled.returncode == 0 and sampled.stdout.strip(), sampled.stderr
    assert sampled.stderr.strip().startswith(f"{run_dir}/last.pt: damaged (archive/data/")
    assert sampled.stderr.strip().endswith(f"does not match its checksum); reading {run_dir}/best.pt (step 60)")
    damage_largest_record(run_dir / "best.pt")
    sampled = cli("sample.py", f"ckpt={run_dir}/best.pt")
    assert error_line(sampled).endswith("; no other checkpoint of that run directory is whole")


@pytest.mark.parametrize("value", ["/home/josé/runs", "/runs/café", "~/runs", "/runs/~x", "a\\b", "a\\\\b", "null"])
def test_a_value_outside_hydras_unquoted_grammar_is_quoted_and_parses_back_the_same(value):
    (parsed,) = PARSER.parse_overrides([override("trainer.resume", value)])
    assert parsed.value() == value


def fake_checkpoint(path: Path, step: int) -> None:
    """What glance reads of a checkpoint: its step and max_steps."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"step": step, "config": {"trainer": {"max_steps": 60}}}, path)


def test_only_a_checkpoint_older_than_last_pt_branches_and_each_branch_gets_a_directory_of_its_own(tmp_path):
    fake_checkpoint(tmp_path / "last.pt", 40)
    fake_checkpoint(tmp_path / "best.pt", 40)
    assert resume_dir(tmp_path / "best.pt") == resume_dir(tmp_path / "last.pt") == tmp_path
    fake_checkpoint(tmp_path / "best.pt", 20)
    assert resume_dir(tmp_path / "best.pt") == tmp_path / "branch-from-step-20"
    (tmp_path / "branch-from-step-20" / ".hydra").mkdir(parents=True)  # what Hydra makes before the run starts
    assert resume_dir(tmp_path / "best.pt") == tmp_path / "branch-from-step-20"
    fake_checkpoint(tmp_path / "branch-from-step-20" / "last.pt", 30)  # that branch has a run now
    assert resume_dir(tmp_path / "best.pt") == tmp_path / "branch-from-step-20-2"


def test_a_fresh_start_is_refused_where_a_checkpoint_or_curves_are_and_allowed_where_only_hydras_record_is(tmp_path):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / "train.log").write_text("")
    check_fresh_start(tmp_path)  # a start refused before it trained leaves these: nothing to lose
    (tmp_path / "events.out.tfevents.1.host.2.0").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"holds a run's TensorBoard curves \(no checkpoint\), .*; pick a new"):
        check_fresh_start(tmp_path)
    fake_checkpoint(tmp_path / "last.pt", 30)
    with pytest.raises(ConfigError, match=r"step 30 of 60 \(last.pt\), .*resume it \(python train.py trainer.res"):
        check_fresh_start(tmp_path)
