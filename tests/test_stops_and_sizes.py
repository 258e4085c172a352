"""Stopping at any moment and sizes a machine cannot hold (issue 19, points 5, 7 and 9): every way ends in one line
and an exit status, never a traceback, and leaves nothing half-written."""

import re
import signal
import sys
import time
from pathlib import Path

import pytest
import torch

import train
import trainer.run
from conftest import SHORT, Forked, cli, compose_config, wait_for
from model import Mixer, ModelConfig, TinyLM, parameters_of
from trainer.cli import run_with_one_line_errors
from trainer.config import to_train_config
from trainer.memory import check_memory, human, machine_memory

# Every checkpoint after step 20 is written slowly: a part of the file, then a pause.
SLOW_SAVE = """
save = torch.save
def slow_save(state, file):
    if state["step"] > 20:
        file.write(b"half a checkpoint")
        print("saving step", state["step"], flush=True)
        time.sleep(60)
    save(state, file)
torch.save = slow_save
"""
# The model is made slowly: the run is being built, the training loop has not begun.
SLOW_BUILD = """
import trainer.run
build_model = trainer.run.build_model
def slow_build(*args):
    print("building the model", flush=True)
    time.sleep(60)
    return build_model(*args)
trainer.run.build_model = slow_build
"""


def start(run_dir: Path, cache_dir: Path, *overrides: str, patch: str) -> Forked:
    """`python train.py SHORT OVERRIDES` in a process of its own, `patch` run first: it slows one part down (printing
    when it starts), so that a signal lands in the middle of it."""
    return Forked(*SHORT, f"data.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}", *overrides, patch=patch)


@pytest.mark.slow
def test_a_second_ctrl_c_during_the_save_ends_at_once_in_one_line_naming_the_whole_checkpoint(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    run = start(run_dir, cache_dir, "trainer.ckpt_interval=20", patch=SLOW_SAVE)
    wait_for(run, "step 30:")  # last.pt holds step 20
    run.send_signal(signal.SIGINT)  # stop after this step: its checkpoint is saved, slowly
    wait_for(run, "saving step")
    run.send_signal(signal.SIGINT)  # now
    started = time.monotonic()
    assert run.wait(timeout=20) == 128 + signal.SIGINT
    assert time.monotonic() - started < 10  # not after the minute-long save
    stderr = run.stderr.read().strip()
    assert stderr == (
        f"stopped at once by a second SIGINT; a checkpoint being written was dropped, {run_dir}/last.pt (step 20) is "
        f"whole. Resume with: python train.py trainer.resume={run_dir}"
    )
    assert torch.load(run_dir / "last.pt", weights_only=True)["step"] == 20
    assert not [path.name for path in run_dir.iterdir() if path.name.endswith(".tmp")]


@pytest.mark.slow
@pytest.mark.parametrize("received", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_run_is_built_ends_in_one_line_with_128_plus_the_signal(received, tmp_path, cache_dir):
    run = start(tmp_path / "run", cache_dir, patch=SLOW_BUILD)
    wait_for(run, "building the model")
    run.send_signal(received)
    assert run.wait(timeout=20) == 128 + received
    assert run.stderr.read().strip() == (
        f"stopped by {received.name} outside the training loop, where no checkpoint is written: any checkpoint "
        "already in the run directory is whole"
    )


def run_train(monkeypatch, *overrides: str) -> str:
    """train.py's command line, in this process; returns what it printed as its error."""
    monkeypatch.setattr(sys, "argv", ["train.py", *overrides])
    with pytest.raises(SystemExit) as stopped:
        run_with_one_line_errors(train.main)
    return stopped.value.code


def test_a_model_no_machine_can_hold_is_refused_before_any_work_naming_the_setting(tmp_path):
    run_dir = tmp_path / "run"
    result = cli("train.py", "model.d_model=1000000", "trainer.device=cpu", f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: model.d_model=1000000: this run needs at least 128.1 TB (the weights, their gradients and AdamW's "
        f"two moments: 8,000,589,000,000 parameters x 16 bytes), more than the {human(machine_memory())} of this "
        "machine's memory; lower it"
    )
    assert not list(run_dir.glob("*.pt")) and not list(run_dir.glob("events.*"))


@pytest.mark.parametrize(
    "overrides, named, piece",
    [
        (["trainer.batch_size=100000000"], "trainer.batch_size=100000000", "one training step's activations"),
        (["model.d_k=1000000000"], "model.d_k=1000000000", "one training step's activations"),
        (["model.n_layer=100000000"], "model.n_layer=100000000", "one training step's activations"),
        (["model.block_size=100000000"], "model.block_size=100000000", "one training step's activations"),
        (["model.d_model=4096", "model.n_layer=20000"], "model.d_model=4096, model.n_layer=20000", "the weights"),
        (
            ["trainer.eval_iters=100000000", "trainer.max_steps=100000000"],
            "trainer.eval_iters=100000000",
            "an evaluation's 100000000 batches",
        ),
    ],
)
def test_sizes_beyond_the_machine_are_refused_in_one_line_naming_them(overrides, named, piece, monkeypatch, tmp_path):
    error = run_train(monkeypatch, *overrides, "trainer.device=cpu", f"hydra.run.dir={tmp_path}")
    assert re.fullmatch(
        rf"error: {re.escape(named)}: this run needs at least [\d.]+ [TP]B \({re.escape(piece)}.*\), more than "
        rf"the {re.escape(human(machine_memory()))} of this machine's memory; lower (it|them)",
        error,
    ), error


@pytest.mark.parametrize(
    "overrides",
    [[], ["+experiment=saturation", "model.d_k=1024", "hydra.mode=RUN"], ["tokenizer=bpe"], ["model.fused=false"]],
)
def test_the_default_run_and_the_presets_pass_the_estimate(overrides):
    check_memory(to_train_config(compose_config(*overrides)))  # raises ConfigError if refused


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"n_layer": 3, "d_k": 8, "d_v": 24},
        {"projections": False},
        {"qk_norm": True},
        {"mixer": Mixer.gru},
        {"mixer": Mixer.lstm, "n_layer": 2},
    ],
    ids=["default", "three-layers", "no-projections", "qk-norm", "gru", "lstm"],
)
def test_the_estimate_counts_the_parameters_a_built_model_has(settings):
    config = ModelConfig(vocab_size=77, **settings)
    assert parameters_of(config) == sum(p.numel() for p in TinyLM(config).parameters())


# How torch on a CPU, numpy and CUDA say it, after the estimate let a run through (a machine busy with other work,
# say), by the size each could not allocate.
ALLOCATION_FAILURES = {
    "2.0 GB": RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
        "allocate 1966080000 bytes. Error code 12 (Cannot allocate memory)"
    ),
    "24.6 GiB": MemoryError("Unable to allocate 24.6 GiB for an array with shape (100000000, 33) and data type int64"),
    "20.00 GiB": torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity..."
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("tried, failure", ALLOCATION_FAILURES.items(), ids=ALLOCATION_FAILURES.keys())
def test_memory_running_out_mid_run_ends_in_one_line_naming_the_sizes_set_and_the_whole_checkpoint(
    tried, failure, tmp_path, cache_dir, monkeypatch
):
    batch, calls = trainer.run.TrainingRun.batch, []

    def batch_then_out_of_memory(run):
        calls.append(1)
        if len(calls) > 7:  # last.pt holds step 5
            raise failure
        return batch(run)

    monkeypatch.setattr(trainer.run.TrainingRun, "batch", batch_then_out_of_memory)
    run_dir = tmp_path / "run"
    error = run_train(
        monkeypatch,
        *SHORT,
        "trainer.max_steps=10",
        "trainer.eval_interval=10",
        "trainer.ckpt_interval=5",
        f"data.cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    )
    assert error == (
        f"error: out of memory: could not allocate {tried}. The sizes set: trainer.eval_iters=4 trainer.batch_size=16 "
        "model.block_size=32 model.d_model=64; lower them, or split the batch with trainer.grad_accum_steps; "
        f"{run_dir}/last.pt, the last checkpoint, is whole"
    )


def run_bench(monkeypatch, *overrides: str) -> str:
    """bench.py's command line, in this process; returns what it printed as its error."""
    import bench

    monkeypatch.setattr(sys, "argv", ["bench.py", *overrides])
    with pytest.raises(SystemExit) as stopped:
        run_with_one_line_errors(bench.main)
    return stopped.value.code


@pytest.mark.parametrize(
    "override, message",
    [
        ("bench.json_path={tmp}", "bench.json_path={tmp}: is a directory; name a file in it, e.g. bench.json"),
        (
            "bench.json_path={tmp}/file",
            "bench.json_path={tmp}/file: the JSON file to write, a name ending in .json, e.g. bench.json",
        ),
        (
            "bench.json_path={tmp}/file/b.json",
            "bench.json_path={tmp}/file/b.json: {tmp}/file is a file, not a directory",
        ),
        (
            "bench.matmul_size=10000000",
            "bench.matmul_size=10000000: its matmul needs 1.2 PB (three n x n matrices), "
            "more than the {memory} of this machine's memory; lower it",
        ),
        (
            "bench.block_sizes=[100000000]",
            "bench.attention_batch_size=8, bench.block_sizes=[100000000]: the attention "
            "comparison at block size 100000000 needs at least 960.0 PB (one training step's activations: 800,000,000 "
            "tokens), more than the {memory} of this machine's memory; lower them",
        ),
    ],
)
def test_bench_refuses_a_place_or_size_that_cannot_work_before_measuring(override, message, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    overrides = [override.format(tmp=tmp_path), "trainer.device=cpu", f"hydra.run.dir={tmp_path}/run"]
    error = run_bench(monkeypatch, *overrides)
    assert error == "error: " + message.format(tmp=tmp_path, memory=human(machine_memory()))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["trainer.seed=100000000000000000000000"],
            "trainer.seed=100000000000000000000000: must be between "
            "-4611686018427387904 and 4611686018427387904 (2**62)",
        ),
        (
            ["trainer.sample_tokens=1000000000"],
            "trainer.sample_tokens=1000000000: must be at most 100000: each is a forward pass",
        ),
        (
            ["tokenizer=bpe", "tokenizer.vocab_size=1000000000"],
            "tokenizer.vocab_size=1000000000: this run needs at "
            "least 70.0 GB (the BPE trainer's tables for 1,000,000,000 tokens), more than the {memory} of this "
            "machine's memory; lower it",
        ),
    ],
)
def test_numbers_that_crashed_or_hung_a_run_are_refused_in_one_line(overrides, message, tmp_path, monkeypatch):
    if "70.0 GB" in message and machine_memory() > 70e9:
        pytest.skip("this machine could hold the BPE trainer's tables")
    error = run_train(monkeypatch, *overrides, "trainer.device=cpu", f"hydra.run.dir={tmp_path}")
    assert error == "error: " + message.format(memory=human(machine_memory()))
