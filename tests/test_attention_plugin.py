"""The Attention tab's routes against a real `tensorboard --logdir` on a real tiny sweep, and attend.py on it."""

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
from attention_browser import tensorboard

from conftest import ROOT, train_sweep
from model import TinyLM, attention
from trainer.checkpoint import load_checkpoint, model_config

TINY = ["trainer.max_steps=10", "trainer.eval_interval=5", "trainer.eval_iters=2", "trainer.log_interval=5",
        "trainer.batch_size=8", "trainer.sample_tokens=20", "model.block_size=32", "model.d_model=32",
        "model.d_k=16", "model.d_v=16", "optim.warmup_steps=2"]  # fmt: skip
TEXT = "To be, or not to be"
DAMAGED = "9_damaged"  # a run whose last.pt is not a checkpoint
UNSTARTED = "9_unstarted"  # a run with TensorBoard events and no checkpoint yet


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory, cache_dir) -> Path:
    sweep_dir = train_sweep(tmp_path_factory.mktemp("sweep"), cache_dir, "model.scale=true,false", *TINY)
    (sweep_dir / DAMAGED).mkdir()
    (sweep_dir / DAMAGED / "last.pt").write_bytes(b"not a checkpoint")
    (sweep_dir / UNSTARTED).mkdir()
    shutil.copy(next((sweep_dir / job_name(sweep_dir, 0)).glob("events.out.tfevents.*")), sweep_dir / UNSTARTED)
    return sweep_dir


def job_name(sweep_dir: Path, number: int) -> str:
    return next(path.name for path in sweep_dir.iterdir() if path.name.startswith(f"{number}_"))


@pytest.fixture(scope="module")
def plugin_url(sweep_dir, tmp_path_factory):
    with tensorboard(sweep_dir, tmp_path_factory.mktemp("tensorboard") / "tensorboard.log") as url:
        yield url + "data/plugin/tinylm_attention/"


def post(url: str, body: object) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response)


@pytest.mark.slow
def test_tensorboard_lists_the_tab_as_enabled(plugin_url):
    listing = get(plugin_url.replace("plugin/tinylm_attention/", "plugins_listing"))
    assert listing["tinylm_attention"]["enabled"] and listing["tinylm_attention"]["tab_name"] == "Attention"
    module = urllib.request.urlopen(plugin_url + "index.js", timeout=30)
    assert (
        module.headers["Content-Type"].startswith("text/javascript")
        and b"export async function render" in module.read()
    )


@pytest.mark.slow
def test_every_run_is_listed_with_its_checkpoint_and_step_or_why_not(plugin_url, sweep_dir):
    runs = {run["name"]: run for run in get(plugin_url + "runs")["runs"]}
    assert list(runs) == [job_name(sweep_dir, 0), job_name(sweep_dir, 1), DAMAGED, UNSTARTED]
    for number, scale in enumerate(["True", "False"]):
        run = runs[job_name(sweep_dir, number)]
        assert (run["checkpoint"], run["step"], run["problem"]) == ("best.pt", 10, "")
        assert run["label"] == f"model.scale={scale}"  # the overrides every job shares are left out
    assert runs[DAMAGED]["problem"].endswith(
        "last.pt: not a tinylm checkpoint (not a complete file written by torch.save)"
    )
    assert (runs[UNSTARTED]["checkpoint"], runs[UNSTARTED]["step"]) == (None, None)


def reference_weights(checkpoint_path: Path, ids: list[int]) -> torch.Tensor:
    """The one layer's weights through model/attention.py's attention(), computed here from the checkpoint."""
    checkpoint = load_checkpoint(checkpoint_path)
    model = TinyLM(model_config(checkpoint))
    model.load_state_dict(checkpoint["model"])
    block = model.blocks[0]
    with torch.no_grad():
        idx = torch.tensor([ids])
        x = model.token_embedding(idx) + model.position_embedding(torch.arange(len(ids)))
        q, k, v = block.attn.project(block.ln_attn(x))
        return attention(q, k, v, scale=block.attn.scale, causal=block.attn.causal).weights[0]


@pytest.mark.slow
@pytest.mark.parametrize("number", [0, 1])
def test_the_weights_for_a_text_are_the_reference_paths(plugin_url, sweep_dir, number):
    from tokenizers import Tokenizer

    run = job_name(sweep_dir, number)
    status, answer = post(plugin_url + "attention", {"run": run, "text": TEXT, "layer": 0})
    assert status == 200, answer
    assert answer["tokens"] == ["T", "o", "␣", "b", "e", ",", "␣", "o", "r", "␣", "n", "o", "t", "␣", "t", "o",
                                "␣", "b", "e"]  # fmt: skip
    assert (answer["step"], answer["n_layer"], answer["scale"], answer["note"]) == (10, 1, number == 0, "")
    checkpoint = sweep_dir / run / "best.pt"
    ids = Tokenizer.from_str(load_checkpoint(checkpoint)["tokenizer"]).encode(TEXT).ids
    expected = reference_weights(checkpoint, ids)
    assert torch.allclose(torch.tensor(answer["weights"]), expected, atol=1e-6, rtol=0)
    assert all(answer["fed"][i][j] is None for i in range(len(ids)) for j in range(i + 1, len(ids)))  # masked: -inf
    assert len(answer["verdicts"]) == len(ids) and len(answer["stats"]["entropy"]) == len(ids)
    assert answer["stats"]["future_mass"] == [0.0] * len(ids)


@pytest.mark.slow
def test_a_text_over_the_context_is_cut_and_says_so(plugin_url, sweep_dir):
    status, answer = post(plugin_url + "attention", {"run": job_name(sweep_dir, 0), "text": "ab" * 30})
    assert status == 200 and len(answer["tokens"]) == 32
    assert answer["note"] == "cut to its first 32 of 60 tokens: the model's context is model.block_size=32"


@pytest.mark.slow
def test_bad_requests_get_one_line_and_the_server_serves_on(plugin_url, sweep_dir):
    run = job_name(sweep_dir, 0)
    cases = {
        "unknown run": ({"run": "nowhere", "text": TEXT}, "run 'nowhere': no such run under the logdir"),
        "outside the logdir": ({"run": "../..", "text": TEXT}, "run '../..': no such run under the logdir"),
        "no checkpoint": (
            {"run": UNSTARTED, "text": TEXT},
            f"run '{UNSTARTED}': no checkpoint (best.pt or last.pt) yet",
        ),
        "damaged": ({"run": DAMAGED, "text": TEXT}, "last.pt: not a tinylm checkpoint"),
        "empty": ({"run": run, "text": ""}, "text: empty; give the text whose attention to show"),
        "unknown characters": (
            {"run": run, "text": "To be ☃"},
            "text: '☃' never occurred in this model's training text",
        ),
        "too long": ({"run": run, "text": "a" * 100_001}, "text: 100,001 characters; at most 100,000"),
        "layer": ({"run": run, "text": TEXT, "layer": 1}, "layer=1: this model has 1 layer (0 to 0)"),
        "not JSON": (b"{text", "the request is not JSON"),
    }
    for case, (body, expected) in cases.items():
        status, answer = post(plugin_url + "attention", body)
        assert status == 400 and expected in answer["error"] and "\n" not in answer["error"], (case, answer)
    assert post(plugin_url + "attention", {"run": run, "text": TEXT})[0] == 200


def attend(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "attend.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_attend_prints_the_steps_for_every_run_and_writes_the_heat_maps(sweep_dir, tmp_path):
    result = attend(f"ckpt={sweep_dir}", 'text="To be, or not"', "query=3", f"out={tmp_path}")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("query i=3 'b', keys j <= i") == 2 and "step 4, weighted sum" in out
    assert "divided by sqrt(d_k) = sqrt(16) = 4.000" in out and "unscaled, this run feeds the raw scores" in out
    assert (
        f"== {DAMAGED}\n" in out
        and "not a tinylm checkpoint" in out
        and "no checkpoint (best.pt or last.pt) yet" in out
    )
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 2 and all(png.read_bytes().startswith(b"\x89PNG") for png in pngs)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["ckpt=nowhere"], "error: ckpt=nowhere: no such run directory or checkpoint file"),
        ([], "error: ckpt: give a checkpoint file, a run directory or a sweep"),
        (["query=99"], "error: query=99: the model reads 32 tokens of this text (query=0 to 31, or negative)"),
        (["layer=2"], "error: layer=2: this model has 1 layer (layer=0 to 0)"),
        (['text="☃"'], "error: text: '☃' never occurred in this model's training text"),
    ],
)
def test_attend_refuses_bad_settings_in_one_line(sweep_dir, args, message):
    if args and not args[0].startswith("ckpt="):
        args = [f'ckpt="{sweep_dir / job_name(sweep_dir, 0)}"', *args]  # quoted: the job's name holds = and ,
    result = attend(*args)
    assert result.returncode == 1 and result.stderr.startswith(message) and result.stderr.count("\n") == 1, (
        result.stderr
    )


def test_the_plugin_module_imports_neither_torch_nor_tinylm():
    code = ("import sys, tensorboard_plugin_tinylm.plugin; "
            "print(sorted({'torch', 'model', 'trainer', 'summary', 'data'} & set(sys.modules)))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_without_the_repository_beside_it_the_tab_says_so_in_one_line(tmp_path):
    shutil.copytree(ROOT / "tensorboard_plugin_tinylm", tmp_path / "tensorboard_plugin_tinylm")  # a plain install
    code = ("from tensorboard_plugin_tinylm.plugin import answer; response = answer(None); "
            "print(response.status_code, response.get_data(as_text=True))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})  # fmt: skip
    status, body = result.stdout.split(" ", 1)
    assert status == "400", result.stderr
    assert json.loads(body)["error"].startswith(f"tinylm's sources are not beside this plugin ({tmp_path} has no")
