"""viewer/: the one walk that finds runs, the checkpoint each reader takes (the whole one, named), the kept steps, a
loaded model kept while its file is unchanged, and the tab's process free of the training machinery."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from conftest import ROOT, compose_config
from data import train_tokenizer
from model import TinyLM
from summary.runs import find_runs
from trainer.checkpoint import BEST, KEPT_FORMAT, LAST, kept_path, load_checkpoint, save_checkpoint
from trainer.config import ConfigError, plain_config, to_train_config
from viewer.checkpoints import choose, load, named_checkpoint, peek
from viewer.runs import checkpoint_at, list_runs
from viewer.walk import CHECKPOINT_FILES, EVENTS_FILES, find_run_dirs, walk_runs

TEXT = "To be, or not to be, that is the question:"


def write_checkpoint(path: Path, step: int, seed: int = 0) -> Path:
    """A real checkpoint file of a small model (the kept checkpoints' format, which every reader takes), as
    save_checkpoint writes it; its weights drawn from `seed`."""
    config = to_train_config(compose_config("model.block_size=16", "model.d_model=16", "model.d_k=8", "model.d_v=8"))
    tokenizer = train_tokenizer(config.tokenizer, TEXT)
    config.model.vocab_size = tokenizer.get_vocab_size()
    torch.manual_seed(seed)
    state = {
        "format": KEPT_FORMAT,
        "step": step,
        "config": plain_config(config),
        "model": TinyLM(config.model).state_dict(),
        "tokenizer": tokenizer.to_str(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(state, path)
    return path


def damage(path: Path) -> None:
    """Flip bytes in the middle of the file: a tensor record's CRC no longer matches."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(255 - b for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def test_the_walk_finds_runs_by_their_checkpoints_or_events_in_natural_order(tmp_path):
    for name in ["10_b", "2_a"]:
        (tmp_path / "sweep" / name).mkdir(parents=True)
    (tmp_path / "sweep" / "10_b" / LAST).write_bytes(b"")
    (tmp_path / "sweep" / "2_a" / "events.out.tfevents.1.host").write_bytes(b"")
    (tmp_path / "sweep" / "2_a" / ".hydra").mkdir()
    (tmp_path / "sweep" / "2_a" / ".hydra" / BEST).write_bytes(b"")  # hidden: not entered
    kept_path(tmp_path / "sweep" / "10_b", 0).parent.mkdir()
    (kept_path(tmp_path / "sweep" / "10_b", 0)).write_bytes(b"")  # a kept checkpoint makes no run of its own
    assert find_run_dirs(tmp_path) == [tmp_path / "sweep" / "2_a", tmp_path / "sweep" / "10_b"]
    assert find_run_dirs(tmp_path, events=False) == [tmp_path / "sweep" / "10_b"]
    assert find_run_dirs(tmp_path, checkpoints=False) == [tmp_path / "sweep" / "2_a"]
    assert find_runs([tmp_path]) == [(tmp_path / "sweep" / "2_a").resolve()]  # report.py's summary: the same walk
    assert CHECKPOINT_FILES == (BEST, LAST) and EVENTS_FILES == "events.out.tfevents.*"


def test_the_walk_stops_at_the_first_run_asked_for(tmp_path, monkeypatch):
    for number in range(50):
        (tmp_path / f"{number}_run").mkdir()
        (tmp_path / f"{number}_run" / LAST).write_bytes(b"")
    looked_at, walk = [], os.walk

    def counted_walk(top):
        for found in walk(top):
            looked_at.append(found[0])
            yield found

    monkeypatch.setattr("viewer.walk.os.walk", counted_walk)
    walked = walk_runs(tmp_path, events=False)
    assert next(walked).parent == tmp_path
    assert len(looked_at) == 2  # the logdir and its first run, not all fifty: is_active asks for one
    assert len(list(walked)) == 49


def test_a_damaged_best_beside_a_whole_last_is_named_and_the_last_read(tmp_path):
    write_checkpoint(tmp_path / BEST, 40)
    write_checkpoint(tmp_path / LAST, 50)
    damage(tmp_path / BEST)
    choice = choose(tmp_path)
    assert (choice.path, choice.step, choice.problem) == (tmp_path / LAST, 50, "")
    assert choice.note.startswith(f"{tmp_path / BEST}: damaged (")
    assert choice.note.endswith(f"does not match its checksum); reading {tmp_path / LAST} (step 50)")
    assert "is whole" not in choice.note  # load_checkpoint's pointer to the whole sibling: the note says it itself


def test_with_no_whole_checkpoint_each_is_named_with_its_reason(tmp_path):
    write_checkpoint(tmp_path / BEST, 40)
    damage(tmp_path / BEST)
    (tmp_path / LAST).write_bytes(b"cut short")
    choice = choose(tmp_path, named=lambda path: path.name)
    assert (choice.path, choice.step, choice.note) == (None, None, "")
    assert choice.problem.startswith("best.pt: damaged (") and choice.problem.endswith(
        "; last.pt: not a tinylm checkpoint (not a complete file written by torch.save)"
    )
    assert choose(tmp_path / "nothing") == choose(tmp_path / "nothing", named=str)  # none yet: no problem
    assert choose(tmp_path / "nothing").problem == ""


def test_sample_py_takes_a_run_directory_from_its_last_then_its_best(tmp_path):
    write_checkpoint(tmp_path / BEST, 40)
    write_checkpoint(tmp_path / LAST, 50)
    assert named_checkpoint(str(tmp_path), "ckpt", (LAST, BEST)).path == tmp_path / LAST
    damage(tmp_path / LAST)
    chosen = named_checkpoint(str(tmp_path), "ckpt", (LAST, BEST))
    assert chosen.path == tmp_path / BEST and chosen.note.endswith(f"; reading {tmp_path / BEST} (step 40)")
    damage(tmp_path / BEST)
    with pytest.raises(
        Exception, match=rf"^ckpt={tmp_path}: {tmp_path / LAST}: damaged .*; {tmp_path / BEST}: damaged"
    ):
        named_checkpoint(str(tmp_path), "ckpt", (LAST, BEST))


def test_the_listing_gives_every_kept_step_once_without_loading_a_model(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    write_checkpoint(kept_path(run_dir, 0), 0)
    write_checkpoint(kept_path(run_dir, 100), 100)
    write_checkpoint(kept_path(run_dir, 200), 200)
    write_checkpoint(run_dir / BEST, 200)
    write_checkpoint(run_dir / LAST, 300)
    damage(kept_path(run_dir, 100))
    monkeypatch.setattr("viewer.checkpoints.load_with_model", lambda path: pytest.fail("a model was built"))
    [entry] = list_runs(tmp_path)
    assert (entry.name, entry.checkpoint, entry.step, entry.note) == ("run", run_dir / BEST, 200, "")
    assert [(step.step, step.path.relative_to(run_dir).as_posix()) for step in entry.steps] == [
        (0, "steps/step-0.pt"),
        (200, "best.pt"),  # the same step as steps/step-200.pt: the default file is named
        (300, "last.pt"),
    ]  # step 100's file is damaged: left out
    assert entry.label == ""  # no Hydra record to name it by, and the listing reads no checkpoint for a label
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(load_checkpoint(run_dir / LAST)["config"], run_dir / ".hydra" / "config.yaml")
    assert list_runs(tmp_path)[0].label == "model.scale=True model.causal=True model.d_k=8"  # the lesson's switches
    assert checkpoint_at(entry, None) == run_dir / BEST and checkpoint_at(entry, 0) == kept_path(run_dir, 0)
    with pytest.raises(ConfigError, match=r"^step=100: run kept no checkpoint at that step \(kept: 0, 200, 300\)$"):
        checkpoint_at(entry, 100)


def test_a_loaded_model_is_kept_until_its_file_changes(tmp_path):
    path = write_checkpoint(tmp_path / LAST, 10, seed=1)
    first = load(path)
    assert load(path) is first and first.step == 10
    write_checkpoint(tmp_path / LAST, 20, seed=2)  # the run saved again: replaced, as save_checkpoint replaces
    os.utime(path, ns=(1, 1))  # a different time, however coarse the file system's clock
    second = load(path)
    assert second is not first and second.step == 20 and peek(path).step == 20
    assert not torch.equal(second.model.lm_head.weight, first.model.lm_head.weight)


TAB_PROCESS = """
import json, sys
from tensorboard.plugins.base_plugin import TBContext
from werkzeug.test import Client
from tensorboard_plugin_tinylm.plugin import AttentionPlugin

plugin = AttentionPlugin(TBContext(logdir=sys.argv[1]))
assert plugin.is_active()
assert "torch" not in sys.modules, "is_active imported torch"
apps = plugin.get_plugin_apps()
runs = Client(apps["/runs"]).get("/").get_json()
body = json.dumps({"run": "run", "text": "To be", "step": 0})
answer = Client(apps["/attention"]).post("/", data=body, content_type="application/json").get_json()
body = json.dumps({"run": "run", "text": "To be", "tokens": 5})
written = Client(apps["/generate"]).post("/", data=body, content_type="application/json").get_json()
loaded = [name for name in sys.argv[2:] if name in sys.modules]
print(json.dumps({"runs": [run["name"] for run in runs["runs"]], "strips": len(answer["strips"]),
                  "written": len(written["tokens"]), "loaded": loaded}))
"""
TRAINING_MACHINERY = ["trainer.record", "trainer.run", "trainer.distributed", "trainer.step", "torch.utils.tensorboard"]


@pytest.fixture(scope="module")
def tab_process(tmp_path_factory) -> dict:
    """What a TensorBoard process holds once the tab has answered /runs, /attention and /generate."""
    logdir = tmp_path_factory.mktemp("logdir")
    write_checkpoint(logdir / "run" / BEST, 10)
    write_checkpoint(kept_path(logdir / "run", 0), 0)
    command = [sys.executable, "-c", TAB_PROCESS, str(logdir), *TRAINING_MACHINERY]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "module",
    TRAINING_MACHINERY,
)
def test_the_tabs_process_needs_no_training_machinery(tab_process, module):
    assert (tab_process["runs"], tab_process["strips"], tab_process["written"]) == (["run"], 1, 5)
    assert module not in tab_process["loaded"]
