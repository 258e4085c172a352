import os
import signal
import time
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from conftest import curve, events
from trainer.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


@pytest.fixture(scope="module")
def run_dir(short_run_dir):
    """SHORT with a checkpoint every 20 steps, trained once per session (conftest's short_run_dir): read only."""
    return short_run_dir


@pytest.mark.slow
def test_checkpoint_holds_all_a_resume_needs_in_plain_types(run_dir):
    state = torch.load(run_dir / "last.pt", weights_only=True)  # tensors and plain containers only
    assert state["step"] == 60 and state["format"] == "tinylm-checkpoint-1"
    assert {"model", "optimizer", "rng", "loss_sum", "best_val", "config", "tokenizer"} <= state.keys()
    assert len(state["rng"]) == 1 and set(state["rng"][0]) == {
        "torch",
        "cuda",
        "numpy",
        "python",
        "batches",
    }  # per rank
    assert state["config"]["model"]["d_model"] == 64 and state["config"]["model"]["qk_init"] == "unit"
    assert state["optimizer"]["state"]  # Adam's moments
    assert Tokenizer.from_str(state["tokenizer"]).get_vocab_size() == state["config"]["model"]["vocab_size"]


@pytest.mark.slow
def test_best_checkpoint_is_the_lowest_validation_loss(run_dir):
    best, val = load_checkpoint(run_dir / "best.pt"), curve(events(run_dir), "val/loss")
    assert (best["step"], best["best_val"]) == min(val, key=lambda point: point[1])


def test_a_failed_write_leaves_the_previous_checkpoint_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint({"step": 1}, path)

    def crash_midway(state, file):
        file.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(OSError):
        save_checkpoint({"step": 2}, path)
    assert torch.load(path, weights_only=True) == {"step": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def writer(path: Path) -> tuple[int, int]:
    """A process that saves checkpoints to `path` one after the other, step 1, 2, 3..., saying each step once it is
    saved: forked from this one, torch already imported. Its process id, and the pipe it says the steps into."""
    said, says = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: it never returns, and ends only when killed
        try:
            os.close(said)
            torch.set_num_threads(1)  # no thread pool of this process's (fork keeps only this thread)
            step = 0
            while True:
                step += 1
                save_checkpoint({"step": step, "weights": torch.full((500_000,), float(step))}, path)
                os.write(says, b"%d\n" % step)
        finally:
            os._exit(1)
    os.close(says)
    return pid, said


@pytest.mark.slow
def test_a_kill_at_any_instant_leaves_a_whole_checkpoint(tmp_path):
    path = tmp_path / "last.pt"
    for delay in (0.0, 0.003, 0.007, 0.013, 0.021, 0.034):  # different points of a write (each takes ~10 ms)
        pid, said = writer(path)
        assert os.read(said, 16)  # the first checkpoint is written
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        assert os.waitpid(pid, 0)[1] == signal.SIGKILL  # killed, mid-write or between two
        os.close(said)
        state = torch.load(path, weights_only=True)
        assert torch.equal(state["weights"], torch.full((500_000,), float(state["step"])))


def test_random_bytes_are_refused(tmp_path):
    path = tmp_path / "noise.pt"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(CheckpointError, match="noise.pt: not a tinylm checkpoint"):
        load_checkpoint(path)


def test_a_pickle_that_would_run_code_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    path = tmp_path / "evil.pt"
    torch.save({"model": Payload()}, path)
    with pytest.raises(CheckpointError, match="refused to unpickle it"):
        load_checkpoint(path)
    assert not marker.exists()


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        load_checkpoint(tmp_path / "nope.pt")


def test_a_foreign_state_dict_is_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.save(torch.nn.Linear(3, 3).state_dict(), path)
    with pytest.raises(CheckpointError, match="format tinylm-checkpoint-1 expected"):
        load_checkpoint(path)


@pytest.mark.slow
def test_a_truncated_checkpoint_is_refused(run_dir, tmp_path):
    path = tmp_path / "cut.pt"
    path.write_bytes((run_dir / "last.pt").read_bytes()[:50_000])
    with pytest.raises(CheckpointError, match="cut.pt: not a tinylm checkpoint .not a complete file"):
        load_checkpoint(path)


@pytest.mark.slow
def test_weights_of_another_model_shape_are_refused(run_dir, tmp_path):
    state = torch.load(run_dir / "last.pt", weights_only=True)
    state["config"]["model"]["d_model"] = 32  # settings that do not fit the stored weights
    path = tmp_path / "reshaped.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointError, match="its weights do not fit its model settings"):
        load_checkpoint(path)


def test_the_writer_of_a_run_removes_the_unfinished_files_a_killed_save_left_and_nothing_else(tmp_path):
    from trainer.checkpoint import Checkpointer
    from trainer.distributed import Ranks

    left = [tmp_path / ".last.pt.0123abcd.tmp", tmp_path / ".best.pt.4567ef.tmp"]
    kept = [tmp_path / "last.pt", tmp_path / "notes.tmp", tmp_path / ".hydra"]
    for path in left + kept:
        path.write_bytes(b"x")
    Checkpointer(tmp_path, Ranks(device=torch.device("cpu")), state=dict, before_write=lambda: None)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(path.name for path in kept)


@pytest.mark.slow
def test_a_checkpoint_written_before_tasks_reads_as_next_token_and_resumes(run_dir, tmp_path):
    """Checkpoints from before task/ hold no task settings and name the objective val_causal: they read as
    next-token runs, in the viewer and on resume."""
    from trainer.config import Objective, TrainConfig, objective_key, to_typed
    from viewer.checkpoints import load

    state = torch.load(run_dir / "last.pt", weights_only=True)
    del state["config"]["task"]
    state["config"]["trainer"]["objective"] = "val_causal"
    before = tmp_path / "last.pt"
    save_checkpoint(state, before)
    checkpoint = load(before)
    assert checkpoint.task.name == "next_token" and checkpoint.step == 60
    config = to_typed(TrainConfig, load_checkpoint(before)["config"])
    assert config.trainer.objective is Objective.honest and objective_key(config) == "val_causal"
