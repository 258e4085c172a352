"""hydra/launcher=parallel (Hydra's joblib launcher): a preset's jobs, over seeds, side by side, sharing the cores;
the same numbers as one run alone."""

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_summary import read_csv
from tqdm import tqdm

from conftest import ROOT, cli
from summary.runs import read_runs
from sweep.parallel import one_write_per_line

TINY = ["trainer.max_steps=4", "trainer.eval_interval=2", "trainer.ckpt_interval=2", "trainer.eval_iters=1",
        "trainer.sample_tokens=1", "trainer.batch_size=4", "model.d_model=32", "model.block_size=16"]  # fmt: skip


def train(*overrides: str) -> subprocess.CompletedProcess:
    result = cli("train.py", *overrides, *TINY)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory, cache_dir) -> tuple[Path, str]:
    """`python train.py +experiment=leak trainer.seed=0,1 hydra/launcher=parallel`, no -m: four jobs."""
    sweep_dir = tmp_path_factory.mktemp("parallel")
    command = [sys.executable, "train.py", "+experiment=leak", "trainer.seed=0,1", "hydra/launcher=parallel", *TINY,
               f"data.cache_dir={cache_dir}", f"hydra.sweep.dir={sweep_dir}"]  # fmt: skip
    # A process of its own: the jobs, in joblib's worker processes, write their lines to its stdout and stderr, as a
    # user sees them (and a process of conftest's Forked, a daemon, may not start any: joblib would run them one by
    # one in it).
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return sweep_dir, result.stdout + result.stderr


@pytest.mark.slow
def test_a_preset_over_two_seeds_runs_side_by_side_and_sums_up_per_configuration(sweep_dir):
    sweep_dir, output = sweep_dir
    at_once = re.search(r"(\d+) jobs side by side, 1 thread\(s\) each", output)  # the tests' workers: one thread each
    assert at_once, output
    assert {line.split("]")[0] for line in output.splitlines() if "step 4: train loss" in line} == {
        f"[job {job}" for job in range(4)
    }, output  # every job's lines say whose they are
    jobs = sorted(path for path in sweep_dir.iterdir() if path.is_dir())
    assert [job.name.split("_")[0] for job in jobs] == ["0", "1", "2", "3"]  # named by number and overrides
    assert ["model.causal=True" in job.name.split(",") for job in jobs] == [True, True, False, False]
    assert all((job / "last.pt").exists() and list(job.glob("events.out.tfevents.*")) for job in jobs)
    logs = [(job / "train.log").read_text().splitlines() for job in jobs]
    assert all("threads=1;" in "".join(log) for log in logs)  # as that line said
    (_, ended), (next_started, _) = [(log[0][:24], log[-1][:24]) for log in logs[:2]]
    assert next_started < ended or int(at_once[1]) == 1  # job 1 began before job 0 was done, where cores allow
    rows = read_csv(sweep_dir / "summary.csv")
    assert [(row["overrides"].split()[0], row["n"], row["seeds"]) for row in rows] == [
        ("model.causal=True", "2", "0 1"), ("model.causal=False", "2", "0 1")
    ]  # fmt: skip


@pytest.mark.slow
def test_a_job_beside_others_ends_where_it_ends_alone(sweep_dir, tmp_path, cache_dir):
    sweep_dir, _ = sweep_dir
    train("+experiment=leak", "model.causal=false", "trainer.seed=1", "hydra/launcher=basic",
          f"data.cache_dir={cache_dir}", f"hydra.sweep.dir={tmp_path}")  # fmt: skip
    alone = read_runs([tmp_path])[0]
    beside = next(run for run in read_runs([sweep_dir]) if run.name.startswith("3_"))  # causal false, seed 1
    assert beside.settings == alone.settings
    assert beside.curves["val/loss"] == alone.curves["val/loss"]
    assert beside.curves["train/loss"] == alone.curves["train/loss"]


class Writes(io.RawIOBase):
    """A file that keeps each write it is given."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.writes.append(bytes(data))
        return len(data)


def test_a_jobs_log_line_leaves_in_one_write_though_its_worker_writes_straight_through():
    file = Writes()
    stdout = io.TextIOWrapper(file, write_through=True)  # as a loky worker's stdout is (python -u)
    one_write_per_line(stdout)
    tqdm.write("[job 3] step 4: train loss 4.1719", file=stdout)  # as logging_redirect_tqdm's handler writes a record
    stdout.flush()
    assert file.writes == [b"[job 3] step 4: train loss 4.1719\n"]  # another job's line cannot land inside it
