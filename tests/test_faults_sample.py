"""sample.py on what a user's machine throws at it: sizes it cannot hold, a damaged checkpoint, stdout that closes
or fills. Each ends in one line (or, for a reader that stops early, quietly), never a traceback."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import sample
from conftest import ROOT, cli
from trainer.cli import run_with_one_line_errors
from viewer.checkpoints import choose

pytestmark = pytest.mark.slow

TINY = ["trainer.max_steps=2", "trainer.eval_interval=2", "trainer.eval_iters=1", "trainer.batch_size=4",
        "trainer.sample_tokens=4", "model.block_size=16", "model.d_model=16", "model.d_k=16", "model.d_v=16",
        "optim.warmup_steps=1"]  # fmt: skip


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, cache_dir) -> Path:
    run_dir = tmp_path_factory.mktemp("tiny")
    trained = cli("train.py", *TINY, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}")
    assert trained.returncode == 0, trained.stderr
    return run_dir / "last.pt"


def run_sample(*settings: str) -> subprocess.CompletedProcess:
    return cli("sample.py", *settings)


def test_more_samples_than_memory_holds_are_refused_before_any_work(checkpoint):
    result = run_sample(f"ckpt={checkpoint}", "num_samples=100000000")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: num_samples=100000000: generating them at once needs about ")
    assert line.endswith(" fit), or max_new_tokens")


@pytest.mark.parametrize(
    "failure",
    [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.80 GiB"),
     RuntimeError("[enforce fail at alloc_cpu.cpp:118] DefaultCPUAllocator: can't allocate memory: you tried to "
                  "allocate 13743895347 bytes. Error code 12 (Cannot allocate memory)"),
     MemoryError()],
    ids=["cuda", "cpu", "python"],
)  # fmt: skip
def test_memory_that_runs_out_while_generating_is_one_line_naming_num_samples(checkpoint, monkeypatch, failure):
    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(sample.TinyLM, "generate", fail)
    monkeypatch.setattr(sys, "argv", ["sample.py", f"ckpt={checkpoint}", "num_samples=3"])
    with pytest.raises(SystemExit) as stopped:
        run_with_one_line_errors(sample.main)
    assert stopped.value.code.startswith("error: num_samples=3: generating them ran out of memory (")
    assert stopped.value.code.endswith("); lower num_samples or max_new_tokens")


def damaged_copy(checkpoint: Path, damaged: Path) -> Path:
    """The checkpoint with every tensor's bytes overwritten (torch.save stores them uncompressed), the zip's
    directory left whole: what torch.load does not notice."""
    damaged.write_bytes(checkpoint.read_bytes())
    with zipfile.ZipFile(damaged) as archive, open(damaged, "r+b") as file:
        for member in archive.infolist():
            if "/data/" in member.filename:
                file.seek(member.header_offset + 26)
                name_length, extra_length = (int.from_bytes(file.read(2), "little") for _ in range(2))
                file.seek(member.header_offset + 30 + name_length + extra_length)
                file.write(b"\xff" * member.file_size)  # 0xffffffff: NaN
    return damaged


def test_a_checkpoint_with_damaged_tensors_ends_in_one_line_naming_it(checkpoint, tmp_path):
    damaged = damaged_copy(checkpoint, tmp_path / "damaged.pt")
    result = run_sample(f"ckpt={damaged}", "max_new_tokens=5")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and str(damaged) in line


def test_a_reader_that_stops_early_ends_sampling_quietly(checkpoint):
    command = [sys.executable, "sample.py", f"ckpt={checkpoint}", "num_samples=2000", "max_new_tokens=1"]
    reader = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(reader.stdout.read(10)) == 10
    reader.stdout.close()  # as `| head -c 10` does
    assert (reader.wait(timeout=60), reader.stderr.read()) == (0, b"")  # its work done; nothing said


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_stdout_on_a_full_disk_is_one_line(checkpoint):
    with open("/dev/full", "w") as full:
        command = [sys.executable, "sample.py", f"ckpt={checkpoint}", "max_new_tokens=5"]  # the process's own stdout
        result = subprocess.run(command, cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (
        1,
        "error: stdout: cannot be written (No space left on device); the rest of the output goes nowhere, the work "
        "goes on\n",
    )


def test_a_seed_torch_cannot_take_is_refused_naming_it(checkpoint, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["sample.py", f"ckpt={checkpoint}", f"seed={2**64}"])
    with pytest.raises(SystemExit) as stopped:
        run_with_one_line_errors(sample.main)
    assert stopped.value.code == f"error: seed={2**64}: must be between {-(2**63)} and {2**64 - 1}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal needs a machine without CUDA")
def test_an_absent_device_is_refused_under_the_name_sample_py_takes_it_by():
    from trainer.config import ConfigError
    from trainer.distributed import pick_device

    with pytest.raises(ConfigError, match=r"^device=cuda: not available"):
        pick_device("cuda", "device")


def test_a_damaged_last_beside_a_whole_best_is_named_and_the_best_sampled(checkpoint, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(checkpoint.with_name("best.pt"), run_dir / "best.pt")
    damaged_copy(checkpoint, run_dir / "last.pt")
    result = run_sample(f"ckpt={run_dir}", "max_new_tokens=5")
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.splitlines()  # the samples alone on stdout
    assert line.startswith(f"{run_dir / 'last.pt'}: damaged (")
    assert line.endswith(f"does not match its checksum); reading {run_dir / 'best.pt'} (step 2)")
    assert result.stdout.startswith("\n") and len(result.stdout) > 2  # the default prompt, then 5 tokens


def test_a_directory_where_last_should_be_is_named_and_the_best_read_by_every_reader(checkpoint, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "last.pt").mkdir(parents=True)
    shutil.copy(checkpoint.with_name("best.pt"), run_dir / "best.pt")
    passed = f"{run_dir / 'last.pt'}: not a checkpoint file (a directory); reading {run_dir / 'best.pt'} (step 2)"
    result = run_sample(f"ckpt={run_dir}", "max_new_tokens=5")
    assert (result.returncode, result.stderr.splitlines()) == (0, [passed]), result.stderr
    assert choose(run_dir, ("last.pt", "best.pt")).note == passed  # attend.py's and the tab's choice, read first
    resumed = cli("train.py", f"trainer.resume={run_dir}", "trainer.max_steps=3")
    assert (resumed.returncode, resumed.stderr.strip()) == (
        1,
        f"error: {run_dir / 'last.pt'}: not a checkpoint file (a directory)",
    )  # the run's own last.pt is what trainer.resume takes: named, not passed over


def test_a_run_with_no_whole_checkpoint_ends_in_one_line_naming_each(checkpoint, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    damaged_copy(checkpoint, run_dir / "last.pt")
    (run_dir / "best.pt").write_bytes(b"cut short")
    result = run_sample(f"ckpt={run_dir}", "max_new_tokens=5")
    assert (result.returncode, result.stdout) == (1, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: ckpt={run_dir}: {run_dir / 'last.pt'}: damaged (")
    assert line.endswith(
        f"; {run_dir / 'best.pt'}: not a tinylm checkpoint (not a complete file written by torch.save)"
    )
