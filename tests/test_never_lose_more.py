"""Never lose a run, part 5 (issue 40), one test per named point, through what a user does: the tab while a run thins
its checkpoints, text that is not Unicode, a method a route does not serve, a Ctrl-C while an entry point starts, a
refused start, attend.py on a sweep with a recurrent run, a full disk under a resume's record. Each ends in one line
(or the right behaviour), a non-zero exit or a 4xx where it failed, no traceback, and nothing lost or left behind."""

import importlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_faults_trainer import SLOW_IMPORT, small_disk  # noqa: F401 (small_disk: a fixture)
from werkzeug.test import Client

from conftest import ROOT, SWEEP, cli, default_sigint, made_once, short_run, wait_for


def tree(directory: Path) -> dict[str, bytes | None]:
    """Every file and directory below `directory` (hidden ones included): a file's bytes, None for a directory."""
    return {
        str(path.relative_to(directory)): None if path.is_dir() else path.read_bytes() for path in directory.rglob("*")
    }


def error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


@pytest.fixture(scope="session")
def recurrent_run(tmp_path_factory, shared_cache_dir) -> Path:
    """A run of the leak sweep's size with a GRU in place of attention (model.mixer=gru), trained once per session."""
    return made_once(
        tmp_path_factory, "gru-run", lambda path: short_run(path, shared_cache_dir, *SWEEP, "model.mixer=gru")
    )


def causal_job(leak_sweep: Path) -> Path:
    return next(leak_sweep.glob("0_*"))


def copy_of(run: Path, destination: Path) -> Path:
    return Path(shutil.copytree(run, destination))


class Tab:
    """The Attention tab's routes as TensorBoard serves them: the plugin's own WSGI apps, in this process."""

    def __init__(self, logdir: Path):
        from tensorboard.plugins.base_plugin import TBContext

        from tensorboard_plugin_tinylm.plugin import AttentionPlugin

        self.apps = AttentionPlugin(TBContext(logdir=str(logdir))).get_plugin_apps()

    def open(self, route: str, method: str = "GET", body: object = None):
        data = None if body is None else json.dumps(body).encode()
        return Client(self.apps[route]).open(route, method=method, data=data, content_type="application/json")

    def post(self, route: str, body: object) -> tuple[int, dict]:
        response = self.open(route, "POST", body)
        return response.status_code, json.loads(response.get_data(as_text=True))


# Point 1 ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_kept_checkpoint_thinned_while_the_tab_reads_it_is_left_out_or_named_with_the_steps_kept_now(
    leak_sweep, tmp_path, monkeypatch, caplog
):
    import viewer.checkpoints

    run = copy_of(causal_job(leak_sweep), tmp_path / "run")  # kept: steps/step-0.pt and step-5.pt; best.pt at 10
    tab = Tab(tmp_path)

    def thinned(name: str, read):
        """`read`, with the kept checkpoint `name` removed just before it reads it, as a run that trains does."""

        def reading(path: Path):
            if path.name == name:
                path.unlink(missing_ok=True)
            return read(path)

        return reading

    # Between the listing's is_file() and the stat() that follows:
    monkeypatch.setattr(viewer.checkpoints, "file_key", thinned("step-5.pt", viewer.checkpoints.file_key))
    listed = json.loads(tab.open("/runs").get_data(as_text=True))["runs"]
    assert [step["step"] for step in listed[0]["steps"]] == [0, 10]  # left out
    # Listed, then gone before its weights are read:
    monkeypatch.setattr(viewer.checkpoints, "load_with_model", thinned("step-0.pt", viewer.checkpoints.load_with_model))
    status, answer = tab.post("/attention", {"run": "run", "text": "To be", "step": 0})
    assert (status, answer) == (
        400,
        {
            "error": "step=0: run no longer keeps it: the run thins its kept checkpoints as it trains (kept now: 10)",
            "steps": [{"step": 10, "file": "best.pt"}],  # the steps kept now: the panel moves there
        },
    )
    assert tab.post("/attention", {"run": "run", "text": "To be", "step": 10})[0] == 200  # the server serves on
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]  # no traceback in its log
    assert (run / "best.pt").is_file()


# Point 2 ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory, cache_dir) -> Path:
    """A tiny byte-level BPE run: BPE encodes any text, and still not a lone surrogate."""
    text = tmp_path_factory.mktemp("bpe") / "notes.txt"
    text.write_text("ROMEO: But soft, what light through yonder window breaks?\n" * 100)
    run = text.parent / "run"
    short_run(run, cache_dir, *SWEEP, "data=text", f"data.path={text}", "tokenizer=bpe", "tokenizer.vocab_size=260",
              "trainer.max_steps=2", "trainer.eval_interval=2")  # fmt: skip
    return run


@pytest.mark.slow
def test_text_that_is_not_unicode_is_one_line_naming_the_setting_and_the_position_everywhere(
    leak_sweep, bpe_run, tmp_path
):
    for run in (copy_of(causal_job(leak_sweep), tmp_path / "char"), copy_of(bpe_run, tmp_path / "bpe")):
        tab = Tab(tmp_path)
        for route, body in (("/attention", {"text": "To \ud800be"}), ("/generate", {"text": "To \ud800", "tokens": 3})):
            status, answer = tab.post(route, {"run": run.name, **body})
            assert (status, answer["error"]) == (
                400,
                "text: not valid Unicode: character 3 (counting from 0) is U+D800, a lone surrogate (half of a UTF-16 "
                "pair); give the text as UTF-8",
            ), (run.name, route)
    # A byte that is not UTF-8 on the command line (0xE9 typed in Latin-1, under LC_ALL=C): Python decodes argv so.
    typed = os.fsdecode(b'"ROM\xe9O"')
    byte = "character 3 (counting from 0) is the byte 0xe9, which is not UTF-8; give the text as UTF-8"
    run = tmp_path / "char"
    sampled = cli("sample.py", f"ckpt={run}", f"prompt={typed}", "max_new_tokens=3")
    assert error_line(sampled) == f"error: prompt: not valid Unicode: {byte}"
    traced = cli("attend.py", f"ckpt={run}", f"text={typed}", f"out={tmp_path / 'a.png'}")
    assert error_line(traced) == f"error: text: not valid Unicode: {byte}"
    assert not (tmp_path / "a.png").exists()


# Point 3 ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_method_a_route_does_not_serve_is_answered_405_with_the_methods_it_serves(leak_sweep, tmp_path):
    copy_of(causal_job(leak_sweep), tmp_path / "run")
    tab = Tab(tmp_path)
    served = {"/index.js": "GET, HEAD", "/style.css": "GET, HEAD", "/runs": "GET, HEAD", "/attention": "POST",
              "/generate": "POST"}  # fmt: skip
    assert set(served) == set(tab.apps)  # every route of the plugin
    body = {"run": "run", "text": "To be", "tokens": 2}
    for route, allowed in served.items():
        for method in ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            response = tab.open(route, method, body)
            if method in allowed:
                assert response.status_code == 200, (route, method, response.get_data())
                continue
            assert (response.status_code, response.headers["Allow"]) == (405, allowed), (route, method)
            if method != "HEAD":  # which has the headers alone
                assert response.json == {"error": f"{method} {route}: this address answers {allowed} only"}


# Point 4 ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("script", ["sample.py", "attend.py", "report.py"])
def test_a_ctrl_c_while_an_entry_point_imports_torch_ends_in_one_line_with_130(script, tmp_path):
    held_import = SLOW_IMPORT.format(name="torch", seconds=3600, release="")
    run_script = f'sys.argv = [{script!r}, *sys.argv[1:]]; runpy.run_path({script!r}, run_name="__main__")'
    started = subprocess.Popen(
        [sys.executable, "-u", "-c", f"import runpy, sys, time\n{held_import}\n"
         f"{run_script}", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip
    wait_for(started, "importing torch")
    started.send_signal(signal.SIGINT)  # the import holds until it ends the process
    assert started.wait(timeout=30) == 130
    assert (
        started.stderr.read() == f"stopped by SIGINT while {script} was starting or ending, when nothing is written\n"
    )
    assert list(tmp_path.iterdir()) == []


# Where each reader is stopped (a Ctrl-C sent to itself as it gets there): before it writes what it was asked for.
READERS_AT = {
    "sample.py": ("write", lambda run, out: [f"ckpt={run}"]),
    "attend.py": ("save_figure", lambda run, out: [f"ckpt={run}", f"out={out}/attention.png"]),
    "report.py": ("write_summary", lambda run, out: [str(run), "--out", str(out)]),
    "export.py": ("page_curves", lambda run, out: [f"ckpt={run}", f"out={out}/page.html"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", READERS_AT)
def test_a_ctrl_c_while_a_reader_works_says_the_runs_it_reads_are_as_they_were(
    script, short_run_dir, tmp_path, monkeypatch
):
    run, out = shutil.copytree(short_run_dir, tmp_path / "run"), tmp_path / "out"
    out.mkdir()
    name, arguments = READERS_AT[script]

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the Ctrl-C ends it first

    monkeypatch.setattr(importlib.import_module(script.removesuffix(".py")), name, interrupted)
    before = {path: path.read_bytes() for path in run.rglob("*") if path.is_file()}
    # SIGINT handled and not blocked, as in a terminal, whatever this worker inherited (a job a shell started in the
    # background has it ignored, and tinylm leaves an ignored signal ignored) or an earlier test left.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        result = cli(script, *arguments(run, out))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, previous)
    assert (result.returncode, result.stderr) == (
        130,
        f"stopped by SIGINT before {script} finished; it writes no checkpoint, and the runs it reads are as they "
        "were: run it again for what it writes\n",
    )
    assert {path: path.read_bytes() for path in run.rglob("*") if path.is_file()} == before
    assert list(out.iterdir()) == []


# Point 5 ------------------------------------------------------------------------------------------------------------


REFUSED = [
    (["model.d_k=-1"], "model.d_k=-1: must be positive"),
    (["data=text", "data.path={tmp}/missing.txt"], "data.path={tmp}/missing.txt: no such file"),
    (["model.d_model=1000000"], "model.d_model=1000000: this run needs at least "),
    (["tokenizer=bpe", "tokenizer.vocab_size=100"], "tokenizer.vocab_size=100: must be at least 256"),
]


@pytest.mark.parametrize(
    "refused, message", REFUSED, ids=["a value out of range", "a missing file", "no machine holds it", "BPE below 256"]
)
def test_a_refused_start_leaves_no_directory_behind(refused, message, tmp_path, cache_dir):
    new = tmp_path / "new" / "runs" / "run"  # Hydra makes all three
    refusal = cli("train.py", *[item.format(tmp=tmp_path) for item in refused], f"hydra.run.dir={new}",
                  f"data.cache_dir={cache_dir}")  # fmt: skip
    assert error_line(refusal).startswith("error: " + message.format(tmp=tmp_path))
    assert list(tmp_path.iterdir()) == []  # no .hydra/, no train.log, no .train.lock, no directory


@pytest.mark.slow
def test_a_refused_start_in_a_directory_that_was_there_leaves_it_as_it_was(leak_sweep, tmp_path, cache_dir):
    notes = tmp_path / "notes"  # a directory of the user's own, with a file in it
    notes.mkdir()
    (notes / "keep.txt").write_text("mine")
    resumed = copy_of(causal_job(leak_sweep), tmp_path / "resumed")  # a run, resumed and refused
    before = {path: tree(path) for path in (notes, resumed)}
    for run_dir, settings in ((notes, ["model.d_k=-1"]), (resumed, [f"trainer.resume={resumed}", "model.d_k=-1"])):
        refusal = cli("train.py", *settings, f"hydra.run.dir={run_dir}", f"data.cache_dir={cache_dir}")
        assert refusal.returncode == 1, refusal.stderr
    assert {path: tree(path) for path in (notes, resumed)} == before  # no record, log lines or lock added


# Point 6 ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_attend_on_a_sweep_with_a_recurrent_run_traces_the_others_and_names_the_one_it_skips(
    leak_sweep, recurrent_run, tmp_path
):
    sweep = tmp_path / "sweep"
    copy_of(causal_job(leak_sweep), sweep / "0_attention")
    copy_of(recurrent_run, sweep / "1_gru")
    traced = cli("attend.py", f"ckpt={sweep}", f"out={tmp_path / 'pngs'}")
    assert (traced.returncode, traced.stderr) == (0, "")
    assert "== skipped 1_gru: a recurrent run (model.mixer=gru) has no attention weights to trace\n" in traced.stdout
    assert "== 0_attention" in traced.stdout and "step 4, weighted sum" in traced.stdout
    assert [png.name for png in (tmp_path / "pngs").iterdir()] == ["0_attention_attention.png"]
    alone = cli("attend.py", f"ckpt={sweep / '1_gru'}", f"out={tmp_path / 'gru.png'}")
    assert error_line(alone) == (
        f"error: ckpt={sweep / '1_gru'}: no run to trace; 1_gru: a recurrent run (model.mixer=gru) has no attention "
        "weights to trace"
    )


# Point 7 ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_full_disk_under_a_resumes_record_names_the_file_and_the_room_and_leaves_nothing(
    small_disk,  # noqa: F811 (test_faults_trainer's fixture)
    leak_sweep,
    cache_dir,
):
    run = copy_of(causal_job(leak_sweep), small_disk / "run")
    (small_disk / "filler").write_bytes(b"\0" * shutil.disk_usage(small_disk).free)
    before = tree(run)
    resumed = cli("train.py", f"trainer.resume={run}", "trainer.max_steps=20", f"data.cache_dir={cache_dir}")
    line = error_line(resumed)
    assert line.startswith(f"error: {run}/.hydra/resume-") and "/config.yaml: cannot be written (No space left" in line
    assert line.endswith(
        f"on device; the disk holding {run} has 0 bytes free); {run}/last.pt, the last good checkpoint, is whole: "
        "free some space, then resume from it"
    )
    assert tree(run) == before  # no empty .hydra/resume-*/config.yaml, nothing appended to train.log
    (small_disk / "filler").unlink()
    assert (
        cli("train.py", f"trainer.resume={run}", "trainer.max_steps=12", f"data.cache_dir={cache_dir}").returncode == 0
    )
