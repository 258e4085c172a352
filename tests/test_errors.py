"""docs/troubleshooting.md's table, row by row: each mistake gives one line naming the setting or file,
exit status 1, and leaves nothing behind that could break the next run."""

import errno
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

import train
from trainer.cli import run_with_one_line_errors

# (overrides, the whole message); {tmp} is a scratch directory holding the files the row needs.
ROWS = [
    (["model.dk=3"], "model.dk: Key 'dk' not in 'ModelConfig'"),
    (["+model.heads=2"], "model.heads: Key 'heads' not in 'ModelConfig'"),
    (["model.d_k=abc"], "model.d_k: Value 'abc' of type 'str' could not be converted to Integer"),
    (["data=wiki"], "In 'train': Could not find 'data/wiki' Available options in 'data': copy hub shakespeare text"),
    (["model.d_model=0"], "model.d_model=0: must be positive"),
    (["model.d_k=-8"], "model.d_k=-8: must be positive"),
    (["model.d_v=0"], "model.d_v=0: must be positive"),
    (["model.n_layer=0"], "model.n_layer=0: must be positive"),
    (["model.block_size=0"], "model.block_size=0: must be positive"),
    (["trainer.batch_size=0"], "trainer.batch_size=0: must be positive"),
    (["trainer.max_steps=0"], "trainer.max_steps=0: must be positive"),
    (["trainer.eval_iters=0"], "trainer.eval_iters=0: must be positive"),
    (["optim.lr=0"], "optim.lr=0.0: must be positive"),
    (["optim.lr=-0.001"], "optim.lr=-0.001: must be positive"),
    (["optim.lr=1e-4"], "optim.min_lr=0.0003: must not exceed optim.lr=0.0001: the schedule decays from lr to min_lr"),
    (["optim.lr=nan"], "optim.lr=nan: must be a finite number"),
    (["optim.lr=inf"], "optim.lr=inf: must be a finite number"),
    (["optim.lr=1e308"], "optim.lr=1e+308: must be at most 1: AdamW moves every weight by about lr at each step"),
    (["optim.grad_clip=nan"], "optim.grad_clip=nan: must be a finite number"),
    (["optim.min_lr=nan"], "optim.min_lr=nan: must be a finite number"),
    (["optim.weight_decay=1e6"], "optim.weight_decay=1000000.0: times optim.lr=0.003 must be below 1: each step "
     "scales the weights by 1 - lr * weight_decay"),
    (["optim.weight_decay=inf"], "optim.weight_decay=inf: must be a finite number"),
    (["optim.beta2=nan"], "optim.beta2=nan: must be a finite number"),
    (["data.val_fraction=nan"], "data.val_fraction=nan: must be a finite number"),
    (["model.softcap=-30"], "model.softcap=-30.0: must not be negative"),
    (["model.softcap=nan"], "model.softcap=nan: must be a finite number"),
    (["model.mask_value=0"], "model.mask_value=0.0: must be negative: null or -inf (the true mask), or e.g. -1e4"),
    (["model.mask_value=5"], "model.mask_value=5.0: must be negative: null or -inf (the true mask), or e.g. -1e4"),
    (["model.mask_value=nan"], "model.mask_value=nan: must be negative: null or -inf (the true mask), or e.g. -1e4"),
    (["model.mask_value=inf"], "model.mask_value=inf: must be negative: null or -inf (the true mask), or e.g. -1e4"),
    (["model.projections=false", "model.d_k=64"], "model.d_k=64: must equal model.d_model=128 without projections "
     "(model.projections=false): q, k and v are x itself"),
    (["model.projections=false", "model.d_v=64"], "model.d_v=64: must equal model.d_model=128 without projections "
     "(model.projections=false): q, k and v are x itself"),
    (["model.projections=false", "model.qk_norm=true"], "model.qk_norm=True: needs the projections; without them "
     "q = k = x, already layer-normed"),
    (["model.mixer=rnn"], "model.mixer: Invalid value 'rnn', expected one of [attention, gru, lstm]"),
    (["model.mixer=gru", "model.causal=false"], "model.causal=False: applies to attention only, not to "
     "model.mixer=gru"),
    (["model.mixer=gru", "model.mask_value=-1e4"], "model.mask_value=-10000.0: applies to attention only, not to "
     "model.mixer=gru"),
    (["model.mixer=gru", "model.projections=false"], "model.projections=False: applies to attention only, not to "
     "model.mixer=gru"),
    (["model.mixer=lstm", "model.qk_norm=true"], "model.qk_norm=True: applies to attention only, not to "
     "model.mixer=lstm"),
    (["model.mixer=lstm", "model.softcap=5"], "model.softcap=5.0: applies to attention only, not to "
     "model.mixer=lstm"),
    (["data=copy", "data.distance=0"], "data.distance=0: must be positive"),
    (["data=copy", "data.distance=65"], "data.distance=65: must be at most model.block_size=64: the token the next "
     "one copies must be inside the window"),
    (["data=copy", "tokenizer=bpe"], "tokenizer=bpe: data=copy is single letters, one token each; use "
     "tokenizer=char"),
    (["data.path={tmp}/short.txt"], "data.path={tmp}/short.txt: only data=text reads it, and this run's data is "
     "data=shakespeare; add data=text to train on it"),
    (["data=copy", "data.name=karpathy/tiny_shakespeare"], "data.name=karpathy/tiny_shakespeare: only data=hub reads "
     "it, and this run's data is data=copy; add data=hub to train on it"),
    (["model.dropout=1"], "model.dropout=1.0: must be at least 0 and below 1"),
    (["model.dropout=-0.1"], "model.dropout=-0.1: must be at least 0 and below 1"),
    (["trainer.eval_interval=5000"], "trainer.eval_interval=5000: must not exceed trainer.max_steps=3000"),
    (["data=text", "data.path={tmp}/short.txt"], "model.block_size=64: the val split has only 22 tokens; "
     "lower model.block_size, or give it more text (data.val_fraction sets the val share)"),
    (["data=text"], "data.path: data=text needs a file, e.g. data.path=notes.txt"),
    (["data=text", "data.path={tmp}/missing.txt"], "data.path={tmp}/missing.txt: no such file"),
    (["data=text", "data.path={tmp}/*.md"], "data.path={tmp}/*.md: no such file matches"),
    (["data=text", "data.path={tmp}"], "data.path={tmp}: {tmp} is a directory; give a file, or a glob such as "
     "{tmp}/*.txt"),
    (["data=text", "data.path={tmp}/empty.txt"], "data.path={tmp}/empty.txt: {tmp}/empty.txt is empty"),
    (["data=text", "data.path={tmp}/blank.txt"], "data.path={tmp}/blank.txt: {tmp}/blank.txt holds only whitespace"),
    (["data=text", "data.path={tmp}/latin1.txt"], "data.path={tmp}/latin1.txt: {tmp}/latin1.txt is not UTF-8 text "
     "(byte 0xe9 at offset 3); convert it first, e.g. iconv -f latin1 -t utf-8"),
    (["tokenizer=bpe", "tokenizer.vocab_size=100"], "tokenizer.vocab_size=100: must be at least 256 for tokenizer=bpe: "
     "its alphabet is the 256 bytes"),
    (["data=hub", "data.name=karpathy/tiny_shakespeare"], "data.name=karpathy/tiny_shakespeare: the hub cannot be "
     "reached and the data set is not in the local cache; train on local files with data=text data.path=FILE, or "
     "on the embedded corpus with data=shakespeare"),
    (["trainer.resume={tmp}/nowhere"], "trainer.resume={tmp}/nowhere: no such run directory or checkpoint file"),
    (["trainer.resume={tmp}"], "{tmp}/last.pt: no such checkpoint file"),
    (["trainer.resume={tmp}/short.txt"], "{tmp}/short.txt: not a tinylm checkpoint (not a complete file written "
     "by torch.save)"),
]  # fmt: skip


@pytest.fixture
def scratch(tmp_path) -> Path:
    (tmp_path / "short.txt").write_text("to be, or not to be: that is the question.\n" * 5)  # 220 characters
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text(" \n\t\n")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    return tmp_path


def run_train(monkeypatch, *overrides: str) -> str:
    """train.py's command line, in this process; returns what it printed as its error."""
    monkeypatch.setattr(sys, "argv", ["train.py", *overrides])
    with pytest.raises(SystemExit) as stopped:
        run_with_one_line_errors(train.main)
    return stopped.value.code


@pytest.mark.parametrize("overrides, message", ROWS, ids=[" ".join(overrides) for overrides, _ in ROWS])
def test_mistake_gets_one_line_naming_the_setting(overrides, message, scratch, cache_dir, monkeypatch):
    run_dir = scratch / "run"
    overrides = [override.format(tmp=scratch) for override in overrides]
    error = run_train(monkeypatch, *overrides, f"hydra.run.dir={run_dir}", f"data.cache_dir={cache_dir}")
    assert error == "error: " + message.format(tmp=scratch)
    assert not list(run_dir.glob("*.pt")) and not list(run_dir.glob("events.*"))  # nothing a later run could trip on
    assert not [path for path in cache_dir.iterdir() if path.name.startswith(".")]  # no half-built cache entry


@pytest.mark.slow
def test_resume_refuses_to_change_the_model_or_data_naming_the_keys(tmp_path, short_run_dir, monkeypatch):
    shutil.copytree(short_run_dir, tmp_path, dirs_exist_ok=True)  # the session's SHORT_RUN, at step 60
    error = run_train(
        monkeypatch, f"trainer.resume={tmp_path}", "model.d_k=64", "data.val_fraction=0.2", "trainer.max_steps=100"
    )
    assert error == (
        "error: trainer.resume: data.val_fraction, model.d_k cannot change when a run resumes (its settings come "
        "from the checkpoint); only trainer.max_steps, trainer.ckpt_interval, trainer.keep_checkpoints, "
        "trainer.device, trainer.sample_tokens, data.cache_dir can. Start a new run to change them"
    )
    error = run_train(monkeypatch, f"trainer.resume={tmp_path}", "trainer.max_steps=40")
    assert error == (
        "error: trainer.max_steps=40: the run being resumed is at step 60 already; raise trainer.max_steps to train on"
    )


SHORT_CLI = [
    "trainer.max_steps=40",
    "trainer.eval_interval=20",
    "trainer.ckpt_interval=20",
    "trainer.eval_iters=2",
    "trainer.sample_tokens=5",
    "model.block_size=16",
    "model.d_model=32",
    "trainer.batch_size=8",
    "trainer.keep_checkpoints=0",  # last.pt and best.pt alone: the kept checkpoints have their own test
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "failure, after, reason, kept",
    [(OSError(errno.ENOSPC, "No space left on device"), 2,
      r"No space left on device; the disk holding {run} has [\d.]+ (bytes|[KMGT]B) free",
      "{run}/last.pt, the last good checkpoint, is whole: free some space, then resume from it"),
     (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0"), 0,
      re.escape("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0"), "no checkpoint was kept")],
    ids=["disk full after two checkpoints", "a write cut short on a disk with room"],
)  # fmt: skip
def test_a_full_disk_during_a_checkpoint_ends_in_one_line_naming_what_is_still_safe(
    failure, after, reason, kept, tmp_path, cache_dir, monkeypatch
):
    save, calls = torch.save, []

    def full_disk(state, file):
        calls.append(1)
        if len(calls) > after:  # best.pt and last.pt at step 20, then the disk is full
            raise failure
        save(state, file)

    monkeypatch.setattr(torch, "save", full_disk)
    run = tmp_path / "run"
    error = run_train(monkeypatch, *SHORT_CLI, f"hydra.run.dir={run}", f"data.cache_dir={cache_dir}")
    assert re.fullmatch(
        rf"error: {run}/(best|last)\.pt: cannot be written \({reason.format(run=run)}\); "
        + re.escape(kept.format(run=run)),
        error,
    ), error
    if after:
        assert torch.load(run / "last.pt", weights_only=True)["step"] == 20


def test_a_run_directory_that_cannot_be_made_ends_in_one_line_naming_it(scratch, monkeypatch):
    run = scratch / "short.txt" / "run"  # below a file: no directory can be made there, not even by root
    assert run_train(monkeypatch, f"hydra.run.dir={run}") == f"error: {run}: Not a directory"
