"""The Attention tab's routes against a real `tensorboard --logdir` on a real tiny leak sweep, and attend.py on it."""

import json
import math
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from attention_browser import tensorboard
from page_engine import prefix_lm, random_run

from conftest import ROOT, cli
from model import TinyLM, attention
from task import TASKS
from trainer.checkpoint import kept_path, load_checkpoint, model_config
from viewer.words import WORDS

TEXT = "To be, or not to be"
DAMAGED = "9_damaged"  # a run whose last.pt is not a checkpoint
DAMAGED_BEST = "9_damaged_best"  # a run whose best.pt is damaged beside a whole last.pt
UNSTARTED = "9_unstarted"  # a run with TensorBoard events and no checkpoint yet
CAUSAL, UNMASKED = 0, 1  # the sweep's jobs: model.causal=true, model.causal=false


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory, leak_sweep) -> Path:
    """A copy of the session's leak sweep (conftest's SWEEP: 10 steps, d_k 16), and beside its jobs three runs that
    are damaged or unstarted."""
    sweep_dir = Path(shutil.copytree(leak_sweep, tmp_path_factory.mktemp("sweep") / "sweep"))
    (sweep_dir / DAMAGED).mkdir()
    (sweep_dir / DAMAGED / "last.pt").write_bytes(b"not a checkpoint")
    (sweep_dir / DAMAGED_BEST).mkdir()
    shutil.copy(sweep_dir / job_name(sweep_dir, CAUSAL) / "last.pt", sweep_dir / DAMAGED_BEST / "last.pt")
    damaged_copy(sweep_dir / job_name(sweep_dir, CAUSAL) / "best.pt", sweep_dir / DAMAGED_BEST / "best.pt")
    (sweep_dir / UNSTARTED).mkdir()
    shutil.copy(next((sweep_dir / job_name(sweep_dir, 0)).glob("events.out.tfevents.*")), sweep_dir / UNSTARTED)
    return sweep_dir


def damaged_copy(checkpoint: Path, damaged: Path) -> Path:
    """The checkpoint with its tensors' bytes overwritten, the zip's directory left whole: its CRCs no longer match."""
    damaged.write_bytes(checkpoint.read_bytes())
    with zipfile.ZipFile(damaged) as archive, open(damaged, "r+b") as file:
        for member in archive.infolist():
            if "/data/" in member.filename:
                file.seek(member.header_offset + 26)
                name_length, extra_length = (int.from_bytes(file.read(2), "little") for _ in range(2))
                file.seek(member.header_offset + 30 + name_length + extra_length)
                file.write(b"\xff" * member.file_size)
    return damaged


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


def model_of(checkpoint_path: Path) -> TinyLM:
    checkpoint = load_checkpoint(checkpoint_path)
    model = TinyLM(model_config(checkpoint))
    model.load_state_dict(checkpoint["model"])
    return model.eval()


def ids_of(checkpoint_path: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(load_checkpoint(checkpoint_path)["tokenizer"]).encode(text).ids


@pytest.mark.slow
def test_tensorboard_lists_the_tab_as_enabled(plugin_url):
    listing = get(plugin_url.replace("plugin/tinylm_attention/", "plugins_listing"))
    assert listing["tinylm_attention"]["enabled"] and listing["tinylm_attention"]["tab_name"] == "Attention"
    module = urllib.request.urlopen(plugin_url + "index.js", timeout=30)
    served = module.read()  # TensorBoard's loader calls the render() the module exports by name
    assert module.headers["Content-Type"].startswith("text/javascript") and served.endswith(b"export { render };\n")
    source = (ROOT / "tensorboard_plugin_tinylm" / "static" / "index.js").read_bytes()
    assert b"export { render }" not in source and b"export default { render };" in source  # anywidget's form alone


@pytest.mark.slow
def test_every_run_is_listed_with_its_checkpoint_steps_and_step_or_why_not(plugin_url, sweep_dir):
    listing = get(plugin_url + "runs")
    runs = {run["name"]: run for run in listing["runs"]}
    assert list(runs) == [job_name(sweep_dir, 0), job_name(sweep_dir, 1), DAMAGED, DAMAGED_BEST, UNSTARTED]
    assert (listing["max_generate"], listing["temperatures"]) == (500, [0.001, 100.0])
    for number, causal in enumerate(["True", "False"]):
        run = runs[job_name(sweep_dir, number)]
        assert (run["checkpoint"], run["step"], run["problem"], run["note"]) == ("best.pt", 10, "", "")
        assert run["label"] == f"model.causal={causal}"  # the overrides every job shares are left out
    for number in (CAUSAL, UNMASKED):  # every evaluation kept (trainer.keep_checkpoints); step 10 is best.pt's
        assert runs[job_name(sweep_dir, number)]["steps"] == [
            {"step": 0, "file": "steps/step-0.pt"},
            {"step": 5, "file": "steps/step-5.pt"},
            {"step": 10, "file": "best.pt"},
        ]
    assert runs[DAMAGED]["problem"] == "last.pt: not a tinylm checkpoint (not a complete file written by torch.save)"
    assert (runs[DAMAGED]["checkpoint"], runs[DAMAGED]["steps"]) == (None, [])
    damaged_best = runs[DAMAGED_BEST]
    assert (damaged_best["checkpoint"], damaged_best["step"], damaged_best["problem"]) == ("last.pt", 10, "")
    assert damaged_best["note"].startswith("best.pt: damaged (") and damaged_best["note"].endswith(
        "does not match its checksum); reading last.pt (step 10)"
    )
    assert (runs[UNSTARTED]["checkpoint"], runs[UNSTARTED]["step"], runs[UNSTARTED]["problem"]) == (None, None, "")


def reference_weights(checkpoint_path: Path, ids: list[int]) -> torch.Tensor:
    """The one layer's weights through model/attention.py's attention(), computed here from the checkpoint."""
    model = model_of(checkpoint_path)
    block = model.blocks[0]
    with torch.no_grad():
        idx = torch.tensor([ids])
        x = model.token_embedding(idx) + model.position_embedding(torch.arange(len(ids)))
        q, k, v = block.attn.project(block.ln_attn(x))
        return attention(q, k, v, scale=block.attn.scale, causal=block.attn.causal).weights[0]


@pytest.mark.slow
@pytest.mark.parametrize("number", [CAUSAL, UNMASKED])
def test_the_weights_for_a_text_are_the_reference_paths(plugin_url, sweep_dir, number):
    run = job_name(sweep_dir, number)
    status, answer = post(plugin_url + "attention", {"run": run, "text": TEXT, "layer": 0})
    assert status == 200, answer
    assert answer["tokens"] == ["T", "o", "␣", "b", "e", ",", "␣", "o", "r", "␣", "n", "o", "t", "␣", "t", "o",
                                "␣", "b", "e"]  # fmt: skip
    assert (answer["step"], answer["file"], answer["n_layer"], answer["note"]) == (10, "best.pt", 1, "")
    assert (answer["scale"], answer["causal"]) == (True, number == CAUSAL)
    checkpoint = sweep_dir / run / "best.pt"
    ids = ids_of(checkpoint, TEXT)
    assert torch.allclose(torch.tensor(answer["weights"]), reference_weights(checkpoint, ids), atol=1e-6, rtol=0)
    masked = [answer["fed"][i][j] is None for i in range(len(ids)) for j in range(i + 1, len(ids))]  # -inf
    assert all(masked) if number == CAUSAL else not any(masked)
    assert len(answer["verdicts"]) == len(ids) and len(answer["stats"]["entropy"]) == len(ids)


@pytest.mark.slow
@pytest.mark.parametrize("number", [CAUSAL, UNMASKED])
def test_the_loss_strips_and_the_top_five_are_the_models_own_forward(plugin_url, sweep_dir, number):
    run = job_name(sweep_dir, number)
    status, answer = post(plugin_url + "attention", {"run": run, "text": TEXT, "temperature": 0.5})
    assert status == 200, answer
    checkpoint = sweep_dir / run / "best.pt"
    model, ids = model_of(checkpoint), ids_of(checkpoint, TEXT)
    vocab_size = model.config.vocab_size
    assert (answer["vocab_size"], answer["uniform_loss"]) == (vocab_size, pytest.approx(math.log(vocab_size)))
    expected = [("as trained", "val/loss", number == CAUSAL, None)]
    if number == UNMASKED:
        expected.append(("mask put back", "val/loss_causal", True, True))
    assert [(strip["name"], strip["tag"], strip["causal"]) for strip in answer["strips"]] == [e[:3] for e in expected]
    for strip, (*_, causal) in zip(answer["strips"], expected):
        with torch.no_grad():
            logits = model(torch.tensor([ids]), causal=causal)[0]
        losses = F.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
        assert strip["losses"][-1] is None  # the text ends: nothing to predict
        torch.testing.assert_close(torch.tensor(strip["losses"][:-1]), losses, atol=1e-6, rtol=0)
        assert strip["mean"] == pytest.approx(losses.mean().item(), abs=1e-6)
        probabilities = F.softmax(logits / 0.5, dim=-1)
        for i, prediction in enumerate(strip["predictions"]):
            top = probabilities[i].topk(5)
            assert [p for _, p in prediction["top"]] == pytest.approx(top.values.tolist(), abs=1e-6)
            assert len({label for label, _ in prediction["top"]}) == 5
            if i + 1 < len(ids):
                assert prediction["p_next"] == pytest.approx(probabilities[i, ids[i + 1]].item(), abs=1e-6)
                assert prediction["loss"] == strip["losses"][i]
    if number == UNMASKED:  # the mask put back changes what it predicts
        assert answer["strips"][0]["losses"] != answer["strips"][1]["losses"]


@pytest.mark.slow
@pytest.mark.parametrize("number", [CAUSAL, UNMASKED])
def test_the_counterfactuals_are_the_one_code_paths(plugin_url, sweep_dir, number):
    from viewer.checkpoints import load
    from viewer.predictions import predict
    from viewer.readings import read

    run = job_name(sweep_dir, number)
    status, answer = post(plugin_url + "attention", {"run": run, "text": TEXT})
    assert status == 200, answer
    trained = load(sweep_dir / run / "best.pt")
    predictions = predict(trained, read(trained, TEXT), layer=0, temperature=1.0)
    assert answer["counterfactuals"][-1] is None and answer["problem"] == ""
    for i, (sent, computed) in enumerate(zip(answer["counterfactuals"][:-1], predictions.counterfactuals)):
        for kind in ("trained", "masked", "uniform", "no_look"):
            assert sent[kind] == pytest.approx(getattr(computed, kind), abs=1e-6)
        assert sent["words"] == computed.words and sent["words"]
        assert sent["trained"] == pytest.approx(math.exp(-answer["strips"][0]["losses"][i]), abs=1e-6)
        if number == CAUSAL:  # nothing in the future to mask
            assert sent["masked"] == pytest.approx(sent["trained"], abs=1e-5)


@pytest.mark.slow
def test_a_step_the_run_kept_is_read_at_that_step(plugin_url, sweep_dir):
    run = job_name(sweep_dir, UNMASKED)
    status, answer = post(plugin_url + "attention", {"run": run, "text": TEXT, "step": 0})
    assert status == 200, answer
    assert (answer["step"], answer["file"]) == (0, "steps/step-0.pt")
    expected = reference_weights(kept_path(sweep_dir / run, 0), ids_of(kept_path(sweep_dir / run, 0), TEXT))
    assert torch.allclose(torch.tensor(answer["weights"]), expected, atol=1e-6, rtol=0)
    trained = post(plugin_url + "attention", {"run": run, "text": TEXT, "step": 10})[1]
    assert trained["file"] == "best.pt" and trained["weights"] != answer["weights"]


@pytest.mark.slow
def test_the_whole_checkpoint_beside_a_damaged_best_is_read_and_named(plugin_url):
    status, answer = post(plugin_url + "attention", {"run": DAMAGED_BEST, "text": TEXT})
    assert status == 200, answer
    assert (answer["file"], answer["step"]) == ("last.pt", 10)
    assert answer["run_note"].endswith("; reading last.pt (step 10)")


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.8, 1.0])
def test_generate_writes_what_sample_py_prints(plugin_url, sweep_dir, temperature):
    run = job_name(sweep_dir, UNMASKED)
    request = {"run": run, "text": "ROMEO:", "tokens": 40, "temperature": temperature, "seed": 7}
    status, answer = post(plugin_url + "generate", request)
    assert status == 200, answer
    checkpoint = sweep_dir / run / "best.pt"
    settings = ["prompt=ROMEO:", "max_new_tokens=40", f"temperature={temperature}", "seed=7", "device=cpu"]
    printed = cli("sample.py", f'ckpt="{checkpoint}"', *settings)
    assert printed.returncode == 0, printed.stderr
    assert answer["text"] + "\n" == printed.stdout
    assert answer["text"] == "ROMEO:" + answer["continuation"] and len(answer["tokens"]) == 40
    assert (answer["step"], answer["file"], answer["prompt"]) == (10, "best.pt", "ROMEO:")


@pytest.mark.slow
def test_a_text_over_the_context_is_cut_and_says_so(plugin_url, sweep_dir):
    status, answer = post(plugin_url + "attention", {"run": job_name(sweep_dir, 0), "text": "ab" * 30})
    assert status == 200 and len(answer["tokens"]) == 32
    assert answer["note"] == "cut to its first 32 of 60 tokens: the model's context is model.block_size=32"
    assert None not in answer["strips"][0]["losses"]  # the last token read predicts the first one left out


@pytest.mark.slow
def test_a_one_token_text_has_its_attention_and_nothing_to_score(plugin_url, sweep_dir):
    status, answer = post(plugin_url + "attention", {"run": job_name(sweep_dir, UNMASKED), "text": "T"})
    assert status == 200, answer
    assert answer["weights"] == [[1.0]] and answer["counterfactuals"] == [None]
    assert [(strip["losses"], strip["mean"]) for strip in answer["strips"]] == [([None], None)] * 2
    assert answer["problem"] == "the text is one token ('T'): there is no next token to score"


@pytest.mark.slow
def test_bad_requests_get_one_line_and_the_server_serves_on(plugin_url, sweep_dir):
    run = job_name(sweep_dir, UNMASKED)
    attention_cases = {
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
        "layer": ({"run": run, "text": TEXT, "layer": 1}, "layer=1: this model has 1 layer (layer=0 to 0)"),
        "not JSON": (b"{text", "the request is not JSON"),
        "not an object": (b"[1, 2]", "the request must be a JSON object"),
        "step not kept": (
            {"run": run, "text": TEXT, "step": 123},
            f"step=123: {run} kept no checkpoint at that step (kept: 0, 5, 10)",
        ),
        "step not a number": ({"run": run, "text": TEXT, "step": "5"}, "step='5': must be a whole number"),
        "temperature zero": ({"run": run, "text": TEXT, "temperature": 0}, "temperature=0: must be positive"),
        "temperature a word": ({"run": run, "text": TEXT, "temperature": "hot"}, "temperature='hot': must be a number"),
        "temperature nan": (b'{"run": "%s", "text": "To", "temperature": NaN}' % run.encode(), "must be a finite"),
        "temperature huge": (
            {"run": run, "text": TEXT, "temperature": 1000},
            "temperature=1000: must be between 0.001 and 100",
        ),
    }
    generate_cases = {
        "no tokens": ({"run": run, "text": TEXT}, "tokens=None: must be a whole number from 1 to 500"),
        "too many tokens": ({"run": run, "text": TEXT, "tokens": 501}, "tokens=501: must be a whole number from 1"),
        "seed": ({"run": run, "text": TEXT, "tokens": 5, "seed": 1.5}, "seed=1.5: must be a whole number"),
        "empty text": ({"run": run, "text": "", "tokens": 5}, "text: give the text to continue"),
        "step not kept": ({"run": run, "text": TEXT, "tokens": 5, "step": 7}, "step=7: "),
        "temperature": ({"run": run, "text": TEXT, "tokens": 5, "temperature": -1}, "temperature=-1: must be positive"),
    }
    for route, cases in (("attention", attention_cases), ("generate", generate_cases)):
        for case, (body, expected) in cases.items():
            status, answer = post(plugin_url + route, body)
            assert status == 400 and expected in answer["error"] and "\n" not in answer["error"], (route, case, answer)
    assert post(plugin_url + "attention", {"run": run, "text": TEXT})[0] == 200
    assert post(plugin_url + "generate", {"run": run, "text": TEXT, "tokens": 3})[0] == 200


def attend(*args: str) -> subprocess.CompletedProcess:
    """`python attend.py ARGS`, in this process (conftest's cli); a reader that stops early and a full disk are given
    its real stdout, in a process of its own."""
    return cli("attend.py", *args)


@pytest.mark.slow
def test_attend_prints_the_steps_for_every_run_and_writes_the_heat_maps(sweep_dir, tmp_path):
    result = attend(f"ckpt={sweep_dir}", 'text="To be, or not"', "query=3", f"out={tmp_path}")
    out = result.stdout
    assert out.count("query i=3 'b', keys j <= i") == 2  # the causal job and the copy beside a damaged best.pt
    assert out.count("query i=3 'b', every key j: this run does not mask the future") == 1
    assert "divided by sqrt(d_k) = sqrt(16) = 4.000" in out and "step 4, weighted sum" in out
    assert f"== {DAMAGED}\n{sweep_dir / DAMAGED / 'last.pt'}: not a tinylm checkpoint" in out
    assert f"{sweep_dir / DAMAGED_BEST / 'best.pt'}: damaged (" in out
    assert f"; reading {sweep_dir / DAMAGED_BEST / 'last.pt'} (step 10)\nlast.pt, step 10" in out
    assert "no checkpoint (best.pt or last.pt) yet" in out
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 3 and all(png.read_bytes().startswith(b"\x89PNG") for png in pngs)
    # a run with no whole checkpoint fails the command, in one line naming it, after the others were read
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: 1 run with no whole checkpoint: {sweep_dir / DAMAGED / 'last.pt'}: not")


@pytest.mark.slow
def test_attend_prints_the_losses_the_top_five_and_the_counterfactuals(sweep_dir, tmp_path):
    from viewer.checkpoints import load
    from viewer.predictions import predict, probability
    from viewer.readings import read

    run_dir = sweep_dir / job_name(sweep_dir, UNMASKED)
    result = attend(f'ckpt="{run_dir}"', f'text="{TEXT}"', "query=3", "temperature=0.5", f"out={tmp_path / 'q.png'}")
    assert result.returncode == 0, result.stderr
    trained = load(run_dir / "best.pt")
    predictions = predict(trained, read(trained, TEXT), 0, 0.5)
    as_trained, put_back = predictions.strips
    out = result.stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if re.match(r"  +(\d+|mean) ", line)}
    means = [f"{as_trained.mean:.3f}", f"{put_back.mean:.3f}"]
    assert rows["mean"] == [*means, "(val/loss,", "val/loss_causal)"]
    assert rows["3"] == ["'b'", "'e'", f"{as_trained.losses[3]:.3f}", f"{put_back.losses[3]:.3f}", "<-", "query"]
    assert rows["18"] == ["'e'"]  # the text ends: nothing to predict
    top = "  ".join(f"{label!r} {probability(p)}" for label, p in as_trained.predictions[3].top)
    assert f"  as trained:    {top};  p('e') {probability(as_trained.predictions[3].p_next)}, loss" in out
    assert "query i=3 'b': its five likeliest next tokens at temperature 0.5 (the text's next token is 'e')" in out
    found = predictions.counterfactuals[3]
    looks = [probability(p) for p in (found.trained, found.masked, found.uniform, found.no_look)]
    assert (
        f"what the look contributes, p('e') at layer 0: as trained {looks[0]}, future masked {looks[1]}, uniform "
        f"{looks[2]}, no look {looks[3]}\n{found.words}\n" in out
    )


@pytest.mark.slow
def test_attend_reads_the_whole_last_beside_a_damaged_best_and_names_both(sweep_dir, tmp_path):
    run_dir = sweep_dir / DAMAGED_BEST
    result = attend(f"ckpt={run_dir}", f"out={tmp_path / 'a.png'}")
    assert result.returncode == 0, result.stderr
    note = next(line for line in result.stdout.splitlines() if ": damaged (" in line)
    assert note.startswith(f"{run_dir / 'best.pt'}: damaged (")
    assert note.endswith(f"does not match its checksum); reading {run_dir / 'last.pt'} (step 10)")
    assert "\nlast.pt, step 10, layer 0;" in result.stdout and (tmp_path / "a.png").exists()


@pytest.mark.slow
def test_attend_to_a_reader_that_stops_early_ends_quietly_and_still_draws(sweep_dir, tmp_path):
    command = [sys.executable, "attend.py", f"ckpt={sweep_dir / DAMAGED_BEST}", f"out={tmp_path / 'a.png'}"]
    reader = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(reader.stdout.read(10)) == 10
    reader.stdout.close()  # as `| head -c 10` does
    assert (reader.wait(timeout=120), reader.stderr.read()) == (0, b"")  # its work done; nothing said
    assert (tmp_path / "a.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_attend_to_a_full_disk_says_so_in_one_line_and_still_draws(sweep_dir, tmp_path):
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "attend.py", f"ckpt={sweep_dir / DAMAGED_BEST}", f"out={tmp_path / 'a.png'}"],
            cwd=ROOT,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert (result.returncode, result.stderr) == (
        1,
        "error: stdout: cannot be written (No space left on device); the rest of the output goes nowhere, the work "
        "goes on\n",
    )
    assert (tmp_path / "a.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_attend_reads_a_kept_step(sweep_dir, tmp_path):
    run_dir = sweep_dir / job_name(sweep_dir, UNMASKED)
    result = attend(f'ckpt="{run_dir}"', "step=0", f"out={tmp_path / 'step0.png'}")
    assert result.returncode == 0, result.stderr
    assert "\nstep-0.pt, step 0, layer 0;" in result.stdout and (tmp_path / "step0.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["ckpt=nowhere"], "error: ckpt=nowhere: no such run directory or checkpoint file"),
        ([], "error: ckpt: give a checkpoint file, a run directory or a sweep"),
        (["query=99"], "error: query=99: the model reads 32 tokens of this text (query=0 to 31, or negative)"),
        (["layer=2"], "error: layer=2: this model has 1 layer (layer=0 to 0)"),
        (['text="☃"'], "error: text: '☃' never occurred in this model's training text"),
        (["step=3"], "error: step=3: 0_"),
        (["temperature=0"], "error: temperature=0.0: must be positive"),
        (["temperature=1e9"], "error: temperature=1000000000.0: must be between 0.001 and 100"),
        (["text=T"], "error: text='T': one token, so there is no next token to score; give two or more"),
        (["out=last.pt"], "error: out=last.pt: the PNG to write, a name ending in .png, e.g. out=attention.png"),
    ],
)
def test_attend_refuses_bad_settings_in_one_line(sweep_dir, args, message):
    if args and not args[0].startswith("ckpt="):
        args = [f'ckpt="{sweep_dir / job_name(sweep_dir, 0)}"', *args]  # quoted: the job's name holds = and ,
    result = attend(*args)
    assert result.returncode == 1 and result.stderr.startswith(message) and result.stderr.count("\n") == 1, (
        result.stderr
    )
    assert "wrote" not in result.stdout


def test_index_js_names_no_task_and_holds_none_of_the_viewers_words():
    """What the panel says of a task comes in the answer's `words` (viewer/words.py): index.js names no task and
    holds no phrase of any task's words but the button's opening label, which a next-token run's words repeat."""
    source = (ROOT / "tensorboard_plugin_tinylm" / "static" / "index.js").read_text()
    assert [name for name in TASKS if name in source] == []
    phrases = {phrase for words in WORDS.values() for phrase in asdict(words).values() if phrase}
    assert [phrase for phrase in phrases if phrase in source] == ["Continue the text"]


def test_the_plugin_module_imports_neither_torch_nor_tinylm():
    code = ("import sys, tensorboard_plugin_tinylm.plugin; "
            "print(sorted({'torch', 'model', 'trainer', 'summary', 'data', 'viewer'} & set(sys.modules)))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_without_the_repository_beside_it_the_tab_says_so_in_one_line(tmp_path):
    shutil.copytree(ROOT / "tensorboard_plugin_tinylm", tmp_path / "tensorboard_plugin_tinylm")  # a plain install
    code = ("from tensorboard.plugins.base_plugin import TBContext; "
            "from tensorboard_plugin_tinylm.plugin import AttentionPlugin; "
            "plugin = AttentionPlugin(TBContext(logdir='.')); response = plugin.answer(None); "
            "print(plugin.is_active(), response.status_code, response.get_data(as_text=True))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})  # fmt: skip
    active, status, body = result.stdout.split(" ", 2)
    assert (active, status) == ("True", "400"), result.stderr  # shown, to say what is missing
    assert json.loads(body)["error"].startswith(f"tinylm's sources are not beside this plugin ({tmp_path} has no")


@pytest.mark.slow
def test_the_hidden_keys_are_the_runs_own_mask_a_prefix_lms_open_both_ways_inside_its_prefix(leak_sweep, tmp_path):
    from tensorboard_plugin_tinylm import answers

    state = load_checkpoint(next(leak_sweep.glob("0_*")) / "last.pt")
    random_run(tmp_path, "prefix", prefix_lm(state), 0)
    text = "So foul and fair a day I have not seen."  # cut to the 32 tokens of model.block_size, a prefix of 16
    answer = answers.attention(tmp_path, {"run": "prefix", "text": text})
    size, prefix = len(answer["tokens"]), 16
    assert answer["hidden_keys"] == [list(range(max(i + 1, prefix), size)) for i in range(size)]
    hidden = answer["hidden_keys"]
    assert hidden[0] == hidden[prefix - 1] == list(range(prefix, size))  # the prefix both ways
    assert answer["hidden_keys"][prefix] == list(range(prefix + 1, size))  # the triangle after it
    assert all(answer["weights"][i][j] == 0 for i, keys in enumerate(answer["hidden_keys"]) for j in keys)
    assert answer["weights"][0][prefix - 1] > 0  # the prefix's first token reads its last
    assert answer["mask_note"] == (
        "the prefix ends at token 15: tokens 0 to 15 read each other both ways, each later one reads up to itself"
    )
    assert answer["targets_ahead"] and answer["causal"]
    short = answers.attention(tmp_path, {"run": "prefix", "text": "So foul"})
    assert short["hidden_keys"] == [[]] * 7
    assert short["mask_note"] == "the text's 7 tokens lie inside the prefix of 16: each reads every other both ways"
    triangle = answers.attention(leak_sweep, {"run": next(leak_sweep.glob("0_*")).name, "text": TEXT})
    assert triangle["hidden_keys"] == [list(range(i + 1, len(TEXT))) for i in range(len(TEXT))]
    assert triangle["mask_note"] == ""
