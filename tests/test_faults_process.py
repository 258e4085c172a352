"""What the processes around a run throw at it, through the commands a user types: a stdout that its reader closes
early or that a full disk cannot take, a preset of the user's own that is not YAML, and sweeps that meet in one
directory (a torchrun rank that is killed: tests/test_lost_rank.py). Each ends in at most one line, loses nothing
and leaves nothing behind."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT, SHORT, cli, train_sweep
from trainer.run_dir import RunLock

FULL = Path("/dev/full")
NOWHERE = (
    "error: stdout: cannot be written (No space left on device); the rest of the output goes nowhere, the work goes on"
)


# SHORT cut to 10 steps: what these tests check comes at a run's start and end, not in between.
TINY = [*SHORT, "trainer.max_steps=10", "trainer.eval_interval=10"]


def command(script: str, *args: str) -> list[str]:
    return [sys.executable, script, *map(str, args)]


def finished_at(run_dir: Path) -> int:
    """The step of the run's last.pt; its train.log ends with the line that says the run is done."""
    assert "done in" in (run_dir / "train.log").read_text().splitlines()[-1]
    return torch.load(run_dir / "last.pt", weights_only=True)["step"]


def records(directory: Path) -> dict[str, bytes]:
    """Every file below `directory` and its bytes, but the run locks' (they name the process holding them)."""
    files = [path for path in directory.rglob("*") if path.is_file() and path.name != ".train.lock"]
    return {str(path.relative_to(directory)): path.read_bytes() for path in files}


@pytest.fixture(scope="module")
def read_three_lines(tmp_path_factory, cache_dir) -> tuple[Path, int, str]:
    """`python train.py | head -n 3`: the run, its exit status and its stderr."""
    run_dir = tmp_path_factory.mktemp("head") / "run"
    train = subprocess.Popen(command("train.py", *TINY, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"),
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    for _ in range(3):
        train.stdout.readline()
    train.stdout.close()  # as head does after its third line
    stderr = train.stderr.read()
    return run_dir, train.wait(timeout=180), stderr


@pytest.mark.slow
def test_a_reader_that_closes_stdout_early_ends_no_run_and_says_nothing(read_three_lines):
    run_dir, status, stderr = read_three_lines
    assert (status, stderr) == (0, "")  # no "--- Logging error ---", no status 120: the run finished
    assert finished_at(run_dir) == 10
    assert "step 10: train loss" in (run_dir / "train.log").read_text()  # the whole log, where it always is


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, args",
    [("report.py", ["RUN"]), ("sample.py", ["ckpt=RUN", "max_new_tokens=2000"]), ("attend.py", ["ckpt=RUN"])],
)
def test_every_entry_point_whose_reader_closes_stdout_at_once_does_its_work_and_says_nothing(
    read_three_lines, script, args
):
    run_dir = read_three_lines[0]
    before = {path.name for path in run_dir.iterdir()}
    closed = subprocess.Popen(command(script, *(arg.replace("RUN", str(run_dir)) for arg in args)), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    closed.stdout.close()  # `| head -c 0`
    assert (closed.wait(timeout=120), closed.stderr.read()) == (0, "")
    made = {path.name for path in run_dir.iterdir()} - before
    if script == "report.py":  # not "the summary files cannot be written (Broken pipe)": all were written
        assert {"summary.csv", "summary.md", "summary.png"} <= {path.name for path in run_dir.iterdir()}
    if script == "attend.py":
        assert made == {"attention.png"}


@pytest.mark.slow
@pytest.mark.skipif(not FULL.exists(), reason="needs Linux's /dev/full")
def test_stdout_on_a_full_disk_is_said_once_and_the_run_trains_to_its_end(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    with FULL.open("w") as full:
        train = subprocess.run(command("train.py", *TINY, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"),
                               cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=180)  # fmt: skip
        report = subprocess.run(command("report.py", run_dir), cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=120)  # fmt: skip
    assert (train.returncode, train.stderr) == (1, NOWHERE + "\n")  # not a line of logging traceback per log line
    assert finished_at(run_dir) == 10
    assert (report.returncode, report.stderr) == (1, NOWHERE + "\n")
    assert "| run |" in (run_dir / "summary.md").read_text()  # what stdout could not show is in its file


def test_a_preset_of_the_users_own_that_is_not_yaml_is_one_line_naming_file_line_and_column(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text(
        "# @package _global_\nmodel:\n  d_k: 16\ntrainer:\n  max_steps: [1000\n  eval_interval: 100\n"
    )
    run_dir = tmp_path / "run"
    result = cli("train.py", "+experiment=mine", f"hydra.searchpath=[file://{tmp_path}]", f"hydra.run.dir={run_dir}")
    assert (result.returncode, result.stderr) == (
        1,
        f"error: {tmp_path}/experiment/mine.yaml: not YAML (expected ',' or ']', but got ':', line 6, column 16; "
        "while parsing a flow sequence from line 5, column 14)\n",
    )
    assert not run_dir.exists()


@pytest.mark.slow
def test_a_sweep_job_refused_in_a_directory_that_holds_a_run_writes_no_record_there(tmp_path, cache_dir):
    sweep_dir = tmp_path / "sweep"  # both jobs aimed at one directory: the second is refused
    result = cli("train.py", "-m", "model.d_k=16,32", *TINY, f"data.cache_dir={cache_dir}",
                 f"hydra.sweep.dir={sweep_dir}", "hydra.sweep.subdir=one")  # fmt: skip
    job = sweep_dir / "one"
    assert result.returncode == 1 and result.stderr.startswith(f"error: hydra.run.dir={job}: holds a run at step 10")
    assert len(result.stderr.splitlines()) == 1
    assert (job / ".hydra" / "overrides.yaml").read_text().splitlines()[0] == "- model.d_k=16"  # the first job's
    assert "d_k: 16" in (job / ".hydra" / "config.yaml").read_text()
    assert sorted(path.name for path in (job / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert torch.load(job / "last.pt", weights_only=True)["config"]["model"]["d_k"] == 16


@pytest.mark.slow
def test_a_second_sweep_into_a_sweep_directory_in_use_or_holding_a_sweep_is_refused_and_writes_nothing(
    tmp_path, cache_dir
):
    sweep_dir = train_sweep(tmp_path / "sweep", cache_dir, "model.d_k=16,32", *TINY)
    records_before = records(sweep_dir)
    second = ["-m", "model.d_k=16,64", *TINY, f"data.cache_dir={cache_dir}", f"hydra.sweep.dir={sweep_dir}"]
    (first_job,) = sweep_dir.glob("0_*")
    with RunLock(first_job):  # as the first sweep's job holds it while it trains (its own open file: flock's)
        running = cli("train.py", *second)  # in this process (conftest's cli), the lock's holder named
    assert (running.returncode, running.stderr) == (
        1,
        f"error: hydra.sweep.dir={sweep_dir}: a sweep is running there ({first_job.name} is in use by process "
        f"{os.getpid()} on {os.uname().nodename}); wait for it to end (or stop it), or pick a new hydra.sweep.dir\n",
    )
    held = cli("train.py", *second)
    jobs = sorted(path.name for path in sweep_dir.iterdir() if path.is_dir())
    assert (held.returncode, held.stderr) == (
        1,
        f"error: hydra.sweep.dir={sweep_dir}: holds a sweep (2 runs: {', '.join(jobs)}), which this one would mix "
        "with; pick a new hydra.sweep.dir, or add trainer.resume=auto to resume that sweep's jobs\n",
    )
    assert records(sweep_dir) == records_before  # multirun.yaml, each job's .hydra, checkpoints and curves
