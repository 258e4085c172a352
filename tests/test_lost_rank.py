"""A torchrun rank that is killed, whichever rank goes first: one line naming it and the resume command that works,
no traceback, the checkpoint whole. In a file of its own: its four torchrun launches take the longest of any test,
and a worker of their own balances the suite."""

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

from conftest import ROOT, SHORT
from trainer.distributed import ENDED, process_state


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
    r"error: torchrun: rank (\d) \(process (\d+)\) was lost: its process (ended|stopped answering) mid-run, and the "
    r"other cannot train without it; (\S+)/last\.pt \(step (\d+)\) is whole\. Resume with: (torchrun --standalone "
    r"--nproc_per_node=2 train\.py trainer\.resume=\S+)"
)


LOSSES = [
    (1, signal.SIGKILL, False),
    (0, signal.SIGKILL, False),
    (1, signal.SIGKILL, True),
    (1, signal.SIGSTOP, True),
]  # rank 1 killed; rank 0; rank 1 with torchrun's own SIGTERM reaching rank 0 at once; rank 1 stopped, so that rank 0
# waits on it inside gloo's collective (in C++, where no Python handler runs) when its SIGTERM comes, every time


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
    for lost_rank, sent, terminated in LOSSES:
        case = f"rank {lost_rank} sent {sent.name}{', then SIGTERM to the other' if terminated else ''}"
        ours, pid, stderr = lose_a_rank(pasted, run_dir, environment, lost_rank, sent, terminated)
        assert len(ours) == 1, (
            case,
            ours,
            stderr[-3000:],
        )  # no gloo traceback, no "outside the training loop", no abort
        lost = LOST.fullmatch(ours[0])
        became = "ended" if sent == signal.SIGKILL else "stopped answering"
        assert lost and (int(lost[1]), int(lost[2]), lost[3], lost[4]) == (lost_rank, pid, became, str(run_dir)), (
            case,
            ours[0],
        )
        assert not list(run_dir.glob(".*.tmp")), case  # a checkpoint the killed rank 0 was writing is not left
        assert int(lost[5]) > step, case  # trained on from where the line before left it
        step, pasted = int(lost[5]), lost[6]
        assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == step, case  # whole, at the step named
    resumed = subprocess.run(["bash", "-c", f"{pasted} trainer.max_steps={step + 20}"], cwd=ROOT, env=environment,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == step + 20


def lose_a_rank(
    pasted: str, run_dir: Path, environment: dict, lost: int, sent: signal.Signals, terminated: bool
) -> tuple[list[str], int, str]:
    """Runs `pasted` in bash until it writes a checkpoint, sends rank `lost` the signal `sent` (SIGKILL, or SIGSTOP:
    a rank that stops answering) and SIGTERMs the other if `terminated`; the lines of stderr that are tinylm's or a
    rank's own, the lost rank's process id, and all of stderr. Once the rank left has ended, a stopped rank is
    killed."""
    before = checkpoint_written(run_dir)
    torchrun = subprocess.Popen(["bash", "-c", pasted], cwd=ROOT, env=environment, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        ranks = ranks_of(environment["TINYLM_TEST"])
        deadline = time.monotonic() + 120
        while checkpoint_written(run_dir) == before:  # this attempt's first checkpoint
            assert torchrun.poll() is None and time.monotonic() < deadline, torchrun.stderr.read()
            time.sleep(0.05)
        os.kill(ranks[lost], sent)
        if terminated:  # torchrun's own SIGTERM, at the moment it could come first
            os.kill(ranks[1 - lost], signal.SIGTERM)
        left = ranks[1 - lost]
        waited = time.monotonic() + 120  # a bound for a failure only: rank 0 ends well within torchrun's 30 s
        while process_state(left) != ENDED:
            assert time.monotonic() < waited, f"rank {1 - lost} (process {left}) never ended"
            time.sleep(0.05)
        if sent == signal.SIGSTOP:  # torchrun would wait its grace on it: a rank is a process group of its own
            os.kill(ranks[lost], signal.SIGKILL)
        stderr = torchrun.stderr.read()
        torchrun.wait(timeout=120)
    finally:
        if torchrun.poll() is None:
            os.killpg(torchrun.pid, signal.SIGKILL)
    ours = [line for line in stderr.splitlines() if line.startswith(("error:", "[rank", "stopped", "terminate"))]
    return ours, ranks[lost], stderr


def checkpoint_written(run_dir: Path) -> tuple[int, int] | None:
    """last.pt's inode and modification time: a new one each time a save replaces it."""
    try:
        status = (run_dir / "last.pt").stat()
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_mtime_ns
