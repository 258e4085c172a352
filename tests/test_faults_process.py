"""What the processes around a run throw at it, through the commands a user types: a stdout that its reader closes
early or that a full disk cannot take, a torchrun rank that is killed, a preset of the user's own that is not YAML,
and sweeps that meet in one directory. Each ends in at most one line, loses nothing and leaves nothing behind."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, SHORT, cli, train_sweep
from trainer.run_dir import RunLock

FULL = Path("/dev/full")
NOWHERE = (
    "error: stdout: cannot be written (No space left on device); the rest of the output goes nowhere, the work goes on"
)


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
    train = subprocess.Popen(command("train.py", *SHORT, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"),
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
    assert finished_at(run_dir) == 60
    assert "step 60: train loss" in (run_dir / "train.log").read_text()  # the whole log, where it always is


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
        train = subprocess.run(command("train.py", *SHORT, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"),
                               cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=180)  # fmt: skip
        report = subprocess.run(command("report.py", run_dir), cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=120)  # fmt: skip
    assert (train.returncode, train.stderr) == (1, NOWHERE + "\n")  # not 322 lines of logging tracebacks
    assert finished_at(run_dir) == 60
    assert (report.returncode, report.stderr) == (1, NOWHERE + "\n")
    assert "| run |" in (run_dir / "summary.md").read_text()  # what stdout could not show is in its file


def ranks_of(marker: str) -> dict[int, int]:
    """{rank: process id} of the torchrun worker processes whose environment holds TINYLM_TEST=`marker`."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = {}
        for entry in Path("/proc").iterdir():
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            settings = dict(item.split(b"=", 1) for item in environ if b"=" in item)
            if b"RANK" in settings and settings.get(b"TINYLM_TEST") == marker.encode():
                found[int(settings[b"RANK"])] = int(entry.name)
        if len(found) == 2:
            return found
        time.sleep(0.2)
    raise AssertionError("torchrun's two ranks did not start")


LOST = re.compile(
    r"error: torchrun: rank (\d) \(process (\d+)\) was lost: its process ended mid-run, and the other cannot train "
    r"without it; (\S+)/last\.pt \(step (\d+)\) is whole\. Resume with: (torchrun --standalone --nproc_per_node=2 "
    r"train\.py trainer\.resume=\S+)"
)


LOSSES = [
    (1, False),
    (0, False),
    (1, True),
]  # rank 1; rank 0; rank 1 with torchrun's own SIGTERM reaching rank 0 at once


@pytest.mark.slow
def test_a_killed_torchrun_rank_is_named_in_one_line_with_the_resume_command_that_works(tmp_path, cache_dir):
    """One run loses a rank three ways: each attempt is the command the last one printed, pasted into bash, and
    the run trains on from the step that line names; the last line's command trains it to its end."""
    run_dir = tmp_path / "run"
    settings = [*SHORT, "trainer.max_steps=100000", "trainer.ckpt_interval=20", f"data.cache_dir={cache_dir}"]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TINYLM_TEST": str(tmp_path)}
    environment["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # `torchrun`: this one
    pasted = shlex.join([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                         "train.py", *settings, f"hydra.run.dir={run_dir}"])  # fmt: skip
    step = -1
    for killed, terminated in LOSSES:
        case = f"rank {killed} killed{', then SIGTERM to the other' if terminated else ''}"
        ours, pid = lose_a_rank(pasted, run_dir, environment, killed, terminated)
        assert len(ours) == 1, (case, ours)  # no gloo traceback, no "outside the training loop", no abort
        lost = LOST.fullmatch(ours[0])
        assert lost and (int(lost[1]), int(lost[2]), lost[3]) == (killed, pid, str(run_dir)), (case, ours[0])
        assert not list(run_dir.glob(".*.tmp")), case  # a checkpoint the killed rank 0 was writing is not left
        assert int(lost[4]) > step, case  # trained on from where the line before left it
        step, pasted = int(lost[4]), lost[5]
        assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == step, case  # whole, at the step named
    resumed = subprocess.run(["bash", "-c", f"{pasted} trainer.max_steps={step + 20}"], cwd=ROOT, env=environment,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == step + 20


def lose_a_rank(pasted: str, run_dir: Path, environment: dict, killed: int, terminated: bool) -> tuple[list[str], int]:
    """Runs `pasted` in bash until it writes a checkpoint, SIGKILLs rank `killed` (and SIGTERMs the other if
    `terminated`); the lines of stderr that are tinylm's or a rank's own, and the killed rank's process id."""
    before = checkpoint_written(run_dir)
    torchrun = subprocess.Popen(["bash", "-c", pasted], cwd=ROOT, env=environment, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        ranks = ranks_of(environment["TINYLM_TEST"])
        deadline = time.monotonic() + 120
        while checkpoint_written(run_dir) == before:  # this attempt's first checkpoint
            assert torchrun.poll() is None and time.monotonic() < deadline, torchrun.stderr.read()
            time.sleep(0.05)
        os.kill(ranks[killed], signal.SIGKILL)
        if terminated:  # torchrun's own SIGTERM, at the moment it could come first
            os.kill(ranks[1 - killed], signal.SIGTERM)
        stderr = torchrun.stderr.read()
        torchrun.wait(timeout=120)
    finally:
        if torchrun.poll() is None:
            os.killpg(torchrun.pid, signal.SIGKILL)
    ours = [line for line in stderr.splitlines() if line.startswith(("error:", "[rank", "stopped", "terminate"))]
    return ours, ranks[killed]


def checkpoint_written(run_dir: Path) -> tuple[int, int] | None:
    """last.pt's inode and modification time: a new one each time a save replaces it."""
    try:
        status = (run_dir / "last.pt").stat()
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_mtime_ns


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


TINY = [*SHORT, "trainer.max_steps=10", "trainer.eval_interval=10"]


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
