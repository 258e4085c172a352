"""Data-parallel training under torchrun: two CPU processes (gloo), as a user would start them."""

import signal
import subprocess
import sys

import pytest

from conftest import ROOT, SHORT, curve, events

pytestmark = pytest.mark.slow


def test_two_process_run_shares_one_directory_keeps_replicas_identical_and_lowers_the_loss(tmp_path, cache_dir):
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(ROOT / "train.py"),
        *SHORT,
        "trainer.grad_accum_steps=2",
        f"data.cache_dir={cache_dir}",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[:6000]  # the ranks' own errors come first

    (run_dir,) = tmp_path.glob("outputs/*/*")  # one directory for both ranks, written by rank 0 alone
    assert run_dir.name.startswith("torchrun-")
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert sorted(p.name for p in (run_dir / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    log = (run_dir / "train.log").read_text()
    assert log.count("step 60: train loss") == 1  # one log, not one per rank
    assert "x 2 processes" in log
    assert "weights after the last step: identical on all 2 processes" in log
    val = curve(events(run_dir), "val/loss")
    assert [step for step, _ in val] == [0, 30, 60] and val[-1][1] < val[0][1] - 0.5


def test_slurm_launcher_config_composes_with_the_settings_users_change():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(
            "train", overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu"], return_hydra_config=True
        )
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.timeout_min, launcher.gpus_per_node, launcher.cpus_per_task) == (
        "gpu",
        60,
        1,
        4,
    )


# What gloo said when the other rank was killed (torch 2.13, CPU), and what it says of another fault.
GLOO_PEER_GONE = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:10165. This is typically caused by a remote worker crashing."
)


def test_a_stop_signal_that_comes_while_a_lost_ranks_error_unwinds_still_names_the_lost_rank():
    from trainer.distributed import peer_lost
    from trainer.stopping import StopNow

    try:
        try:
            raise RuntimeError(GLOO_PEER_GONE)
        except RuntimeError:
            raise StopNow(signal.SIGTERM)  # torchrun's SIGTERM, once the loop's own handlers are gone
    except StopNow as stopped:
        assert peer_lost(stopped)
    assert not peer_lost(StopNow(signal.SIGTERM))  # a plain stop is a stop
    assert not peer_lost(RuntimeError("[enforce fail at alloc_cpu.cpp:118] DefaultCPUAllocator: can't allocate memory"))
