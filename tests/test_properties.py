"""Bad input found by a library, not by hand (issue 40): Hypothesis generates every parameter of the Attention tab's
routes (strings of any code points, lone surrogates and NUL among them, huge and negative numbers, NaN and
infinities, any JSON at all, any bytes as a body, any method) and the settings that take free values: train.py's
numbers, paths and texts, through the checks it makes before any work (a value they take would train a run), and
sample.py's and attend.py's, through the commands themselves. Each input gets a correct result or one line naming
what is wrong (HTTP 400 {"error": ...}, or `error: ...` and exit status 1): never a 5xx, a traceback or a hang.
Inputs that once failed are kept as explicit examples, which run every time.

Within the suite's budget: a fixed number of examples per test, derandomized (the same inputs on every run and in
CI, no example database), each example under a deadline. The routes are the plugin's own WSGI apps, in this process,
on the session's runs (the leak sweep's two jobs, the recurrent run), trained once."""

import json
import logging
import math
import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from hydra.errors import HydraException
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from test_never_lose_more import Tab, recurrent_run  # noqa: F401 (recurrent_run: a fixture)
from werkzeug.test import Client

from conftest import cli, compose_config
from data import DataError
from trainer.checkpoint import CheckpointError, load_checkpoint
from trainer.cli import one_line, printable
from trainer.config import ConfigError, to_train_config
from trainer.distributed import pick_device
from trainer.memory import check_memory
from trainer.overrides import override
from trainer.resume import checkpoint_to_resume


def examples(count: int):
    """`count` examples, the same ones every run, each within a deadline that only a hang exceeds."""
    return settings(
        max_examples=count,
        deadline=timedelta(seconds=30),
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# Any character at all: every general category, the surrogates (Cs) and the controls (Cc, NUL among them) included;
# and, drawn on their own as well, text of the categories that break code most often: surrogates, controls, line and
# paragraph separators.
ANY_CHARACTER = st.characters(categories=["L", "M", "N", "P", "S", "Z", "C"])
BREAKING = st.characters(categories=["Cs", "Cc", "Zl", "Zp"])
ANY_TEXT = st.text(ANY_CHARACTER, max_size=40) | st.text(BREAKING, min_size=1, max_size=4)
NUMBERS = st.integers() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats()
ANY_JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=6,
)
RUNS = ("causal", "unmasked", "gru")
TEXT = "To be, or not to be"


@pytest.fixture(scope="module")
def tab(tmp_path_factory, leak_sweep, recurrent_run) -> Tab:  # noqa: F811 (test_never_lose_more's fixture)
    """The tab on a logdir holding copies of the leak sweep's two jobs and the recurrent run, by short names."""
    logdir = tmp_path_factory.mktemp("logdir")
    for name, run in zip(RUNS, [*sorted(leak_sweep.glob("[01]_*")), recurrent_run]):
        shutil.copytree(run, logdir / name)
    return Tab(logdir)


def answered(status: int, answer: dict, caplog) -> bool:
    """Whether the route answered (200), after checking that it refused in one line otherwise; no traceback logged."""
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR], caplog.text
    event(f"HTTP {status}")  # --hypothesis-show-statistics: how many got through to an answer
    if status == 200:
        return True
    assert status == 400, answer
    # One line, and beside it only what the page needs to go on: the steps the run keeps now, when a step was gone.
    assert set(answer) <= {"error", "steps"} and answer["error"] and "\n" not in answer["error"], answer
    kept = ", ".join(str(kept["step"]) for kept in answer.get("steps", []))
    assert "steps" not in answer or f"{kept})" in answer["error"], answer  # the steps the line names
    return False


def mostly(valid: st.SearchStrategy, hostile: st.SearchStrategy) -> st.SearchStrategy:
    """`valid` four times in five, so that a request whose every field is drawn so gets past the checks to the code
    behind them often enough; else `hostile`."""
    return st.sampled_from([True] * 4 + [False]).flatmap(lambda ok: valid if ok else hostile)


HOSTILE = NUMBERS | ANY_JSON
# Text a char model of the corpus reads (any length: a long one is cut to the context), or any text at all.
TEXTS = mostly(st.text(st.sampled_from(sorted(set(f"{TEXT}, that is the question:\nROMEO"))), min_size=1), ANY_TEXT)
FIELDS = {
    "run": mostly(st.sampled_from(RUNS), st.sampled_from(["", ".", "..", "/", "../..", "causal/steps"]) | HOSTILE),
    "text": mostly(TEXTS, st.just("a" * 100_001) | HOSTILE),
    "step": mostly(st.sampled_from([None, 0, 5, 10]), HOSTILE),
    "layer": mostly(st.just(0), HOSTILE),
    "temperature": mostly(st.floats(min_value=0.001, max_value=100) | st.sampled_from([0.001, 1, 100]), HOSTILE),
    "tokens": mostly(st.integers(min_value=1, max_value=30), HOSTILE),
    "seed": mostly(st.integers(min_value=-(2**63), max_value=2**64 - 1), HOSTILE),
}


def request(required: list[str], optional: list[str]) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {name: FIELDS[name] for name in required}, optional={name: FIELDS[name] for name in optional}
    )


# HTTP 500s that generated requests found (a lone surrogate, a NUL in a run's name), kept as examples that always run.
@pytest.mark.slow
@examples(60)
@given(body=request(["run", "text"], ["step", "layer", "temperature"]))
@example(body={"run": "causal", "text": "\ud800"})
@example(body={"run": "causal\x00", "text": TEXT})
def test_every_attention_request_gets_its_reading_or_one_line(tab, caplog, body):
    status, answer = tab.post("/attention", body)
    if not answered(status, answer, caplog):
        return
    tokens, weights = answer["tokens"], answer["weights"]
    assert answer["run"] == body["run"] and answer["step"] in [step["step"] for step in answer["steps"]]
    assert 1 <= len(tokens) <= answer["block_size"] and len(weights) == len(tokens)
    for i, row in enumerate(weights):
        assert math.isclose(sum(row), 1, abs_tol=1e-4) and all(0 <= weight <= 1 for weight in row)
        assert not answer["causal"] or not any(row[j] for j in answer["hidden_keys"][i])  # the mask's keys hold none
    assert answer["hidden_keys"] == [list(range(i + 1, len(tokens))) for i in range(len(tokens))]  # the causal triangle
    assert answer["temperature"] == float(body.get("temperature", 1.0))


@pytest.mark.slow
@examples(40)
@given(body=request(["run", "text", "tokens"], ["seed", "step", "temperature"]))
@example(body={"run": "unmasked", "text": "ROMEO\udce9", "tokens": 3})
def test_every_generate_request_gets_its_continuation_or_one_line(tab, caplog, body):
    status, answer = tab.post("/generate", body)
    if not answered(status, answer, caplog):
        return
    assert answer["text"] == body["text"] + answer["continuation"]  # a char model gives the prompt back exactly
    assert len(answer["tokens"]) == body["tokens"] and answer["seed"] == body.get("seed", 1337)


@pytest.mark.slow
@examples(30)
@given(
    route=st.sampled_from(["/attention", "/generate"]),
    body=st.binary(max_size=200)
    | st.integers(min_value=1, max_value=200_000).map(lambda depth: b"[" * depth)
    | ANY_JSON.map(lambda value: json.dumps(value).encode()),
)
@example(route="/attention", body=b"[" * 100_000)  # JSON nested deeper than Python's parser goes: once HTTP 500
def test_any_body_of_any_bytes_gets_an_answer_or_one_line(tab, caplog, route, body):
    response = Client(tab.apps[route]).post(route, data=body, content_type="application/json")
    answered(response.status_code, json.loads(response.get_data(as_text=True)), caplog)


@pytest.mark.slow
@examples(30)
@given(
    route=st.sampled_from(["/index.js", "/style.css", "/runs", "/attention", "/generate"]),
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
    | st.from_regex(r"[A-Z]{1,12}", fullmatch=True),
)
def test_any_method_on_any_route_is_served_or_answered_405_with_the_methods_served(tab, route, method):
    response = tab.open(route, method, {"run": "causal", "text": TEXT, "tokens": 2})
    served = "POST" if route in ("/attention", "/generate") else "GET, HEAD"
    if method in served.split(", "):
        assert response.status_code == 200
    else:
        assert (response.status_code, response.headers["Allow"]) == (405, served)


# The settings that take free values ---------------------------------------------------------------------------------

# train.py's number settings, whole and real, each drawn with values of its kind most of the time; and the group a
# setting needs to be read (a BPE vocabulary, data=copy's distance).
WHOLE = ["model.block_size", "model.d_model", "model.d_k", "model.d_v", "model.n_layer", "optim.warmup_steps",
         "trainer.max_steps", "trainer.batch_size", "trainer.grad_accum_steps", "trainer.eval_interval",
         "trainer.eval_iters", "trainer.log_interval", "trainer.seed", "trainer.sample_tokens", "trainer.ckpt_interval",
         "trainer.keep_checkpoints", "tokenizer.vocab_size", "data.distance"]  # fmt: skip
REAL = ["model.dropout", "model.softcap", "model.mask_value", "optim.lr", "optim.min_lr", "optim.weight_decay",
        "optim.beta1", "optim.beta2", "optim.grad_clip", "data.val_fraction"]  # fmt: skip
GROUP = {"tokenizer.vocab_size": ["tokenizer=bpe"], "data.distance": ["data=copy"]}
# Its path and text settings, with the group that reads them.
TEXT_SETTINGS = {"data.path": ["data=text"], "trainer.resume": [], "trainer.device": []}
# What a shell passes: any bytes but NUL, decoded as Python decodes argv (a byte that is not UTF-8 as a surrogate).
ARGV_TEXT = st.binary(min_size=1, max_size=24).filter(lambda typed: b"\0" not in typed).map(os.fsdecode) | st.text(
    min_size=1, max_size=24
)


def typed(key: str, value: object, quoted: bool) -> str:
    """`key=value` as a person types it: a number as Python writes it, a text as it is or quoted for Hydra."""
    if not isinstance(value, str):
        return f"{key}={value!r}"
    return override(key, value) if quoted else f"{key}={value}"


def verdict(run_dir: Path, *overrides: str) -> tuple[str | None, DictConfig | None]:
    """What train.py checks before any work, on these overrides, for a run in `run_dir`: the line it ends with (after
    `error: `, as trainer/cli.py words Hydra's refusals and makes every line printable) or None when it takes them,
    and the composed settings."""
    composed = None
    try:
        composed = compose_config(*overrides)
        config = to_train_config(composed)
        check_memory(config)
        pick_device(config.trainer.device)
        if resumed := checkpoint_to_resume(config.trainer.resume, run_dir):
            load_checkpoint(resumed)
    except (ConfigError, DataError, CheckpointError) as refused:
        return printable(str(refused)), composed
    except (HydraException, OmegaConfBaseException) as refused:
        return printable(one_line(refused)), composed
    return None, composed


def setting_and_value(keys: list[str], values: st.SearchStrategy) -> st.SearchStrategy:
    return st.sampled_from(keys).flatmap(lambda key: st.tuples(st.just(key), mostly(values, NUMBERS | ARGV_TEXT)))


@pytest.mark.slow
@examples(40)
@given(
    setting=setting_and_value(WHOLE, st.sampled_from([0, -1, 1, 2**62 + 1, 2**63, 2**80]) | st.integers())
    | setting_and_value(REAL, st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]) | st.floats()),
    quoted=st.booleans(),
)
@example(setting=("model.block_size", 2**63), quoted=False)  # found so: torch's TypeError from the memory estimate
def test_any_value_of_a_number_setting_is_taken_as_typed_or_refused_in_one_line_naming_it(setting, quoted, tmp_path):
    key, value = setting
    line, composed = verdict(tmp_path, *GROUP.get(key, []), typed(key, value, quoted))
    if line is None:  # taken: as a number, the one typed (-inf for model.mask_value: the true mask)
        taken = OmegaConf.select(composed, key)
        assert taken is None or isinstance(taken, int | float), (key, value, taken)
        assert isinstance(value, str) or taken == value, (key, value, taken)
    else:
        assert "\n" not in line and (key in line or key.split(".")[-1] in line), (key, value, line)


@pytest.mark.slow
@examples(25)
@given(key=st.sampled_from(sorted(TEXT_SETTINGS)), value=ARGV_TEXT, quoted=st.booleans())
@example(key="data.path", value="\n", quoted=False)  # found so: Hydra's refusal of it printed the line break
def test_any_path_or_text_of_a_setting_is_taken_or_refused_in_one_line_naming_it(key, value, quoted, tmp_path):
    line, _ = verdict(tmp_path, *TEXT_SETTINGS[key], typed(key, value, quoted))
    assert line is None or ("\n" not in line and line), (key, value, line)


@pytest.mark.slow
@examples(12)
@given(
    prompt=ARGV_TEXT | st.sampled_from(["ROMEO:", "To be"]),
    temperature=NUMBERS | st.sampled_from([0.8, 1.0]),
    top_k=st.none() | st.integers(min_value=1, max_value=100) | st.integers(),
    seed=st.integers(),
    # Few and short where they are taken: a valid size that is merely large (max_new_tokens=90000) only takes long.
    num_samples=st.integers(min_value=1, max_value=3) | st.integers(max_value=0) | st.integers(min_value=10**15),
    max_new_tokens=st.integers(min_value=0, max_value=20)
    | st.integers(max_value=-1)
    | st.integers(min_value=10**5 + 1),
    quoted=st.booleans(),
)
@example(prompt=os.fsdecode(b"ROM\xe9O"), temperature=1.0, top_k=None, seed=0, num_samples=1, max_new_tokens=5,
         quoted=True)  # fmt: skip
def test_any_sampling_setting_gets_samples_or_one_line(
    leak_sweep, prompt, temperature, top_k, seed, num_samples, max_new_tokens, quoted
):
    run = next(leak_sweep.glob("0_*"))
    numbers = {"temperature": temperature, "top_k": top_k, "seed": seed, "num_samples": num_samples,
               "max_new_tokens": max_new_tokens}  # fmt: skip
    rest = [typed(key, value, quoted) for key, value in numbers.items() if value is not None]
    result = cli("sample.py", override("ckpt", str(run)), typed("prompt", prompt, quoted), *rest)
    assert "Traceback" not in result.stderr, result.stderr
    if result.returncode == 0:  # unquoted, Hydra may read the prompt as another value (true: True)
        assert result.stdout.startswith(prompt if quoted else "") and result.stdout.count("-" * 40) == num_samples - 1
    else:
        assert result.returncode == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


@pytest.mark.slow
@examples(8)
@given(
    text=ARGV_TEXT | st.sampled_from([TEXT]),
    query=st.none() | st.integers(),
    layer=st.sampled_from([0]) | st.integers(),
    step=st.none() | st.sampled_from([0, 5, 10]) | st.integers(),
    temperature=NUMBERS | st.sampled_from([1.0]),
    quoted=st.booleans(),
)
@example(text=os.fsdecode(b"ROM\xe9O"), query=None, layer=0, step=None, temperature=1.0, quoted=True)
def test_any_attend_setting_gets_its_trace_or_one_line(
    leak_sweep, tmp_path_factory, text, query, layer, step, temperature, quoted
):
    out = tmp_path_factory.mktemp("attend") / "a.png"
    numbers = {"query": query, "layer": layer, "step": step, "temperature": temperature}
    rest = [typed(key, value, quoted) for key, value in numbers.items() if value is not None]
    run = next(leak_sweep.glob("1_*"))
    result = cli("attend.py", override("ckpt", str(run)), typed("text", text, quoted), *rest, f"out={out}")
    assert "Traceback" not in result.stderr, result.stderr
    if result.returncode == 0:
        assert out.read_bytes().startswith(b"\x89PNG") and f"wrote {out}" in result.stdout
    else:
        assert result.returncode == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
        assert not out.exists()
