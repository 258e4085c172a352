"""The exported page's engine (static/page.js) in Debian's chromium against TinyLM and answers.py: its logits for every
setting the page represents, its answers to the tab's routes on a tiny leak sweep, a tiny fill-in-the-blank run and
runs of random weights (a prefix LM, no positions, ...; requests drawn by Hypothesis, bad ones among them), and the
runs viewer/page.py refuses. With TINYLM_PAGE_TIMING=1,
also the time the page takes to answer "attention" at the default model's size (printed, never asserted)."""

import json
import os
import shutil
import statistics
import unicodedata
from pathlib import Path

import pytest
import torch
from attention_browser import skip_without_chromium
from hypothesis import assume, event, example, given
from hypothesis import strategies as st
from page_engine import (
    LOGITS,
    ask,
    assert_same,
    engine_page,
    give,
    largest_difference,
    prefix_lm,
    random_run,
    served,
)
from test_attention_page import PROBABILITIES
from test_properties import ANY_JSON, examples

from conftest import cli
from data.tokenizer import TokenizerConfig, TokenizerKind, train_tokenizer
from trainer.checkpoint import LAST
from viewer.checkpoints import load
from viewer.page import page_data, page_problem
from viewer.predictions import probability
from viewer.runs import list_runs

pytestmark = pytest.mark.slow
skip_without_chromium()

# A fill-in-the-blank run as small as the leak sweep's jobs, with checkpoints kept at steps 0, 5 and 10.
FILL = ["task=fill_blank", "model.causal=false", "trainer.max_steps=10", "trainer.eval_interval=5",
        "trainer.eval_iters=2", "trainer.log_interval=5", "trainer.batch_size=8", "model.block_size=16",
        "model.d_model=32", "model.d_k=16", "model.d_v=16", "optim.warmup_steps=2"]  # fmt: skip
# Every model setting the page computes, each on its own, on random weights: model.* settings by name.
SETTINGS = {
    "scaled, masked": {},
    "not scaled": {"scale": False},
    "not masked": {"causal": False},
    "QK-norm": {"qk_norm": True},
    "softcap": {"softcap": 2.0, "scale": False},
    "a finite mask value": {"mask_value": -1.0},
    "no projections": {"projections": False, "d_k": 32, "d_v": 32},
    "no MLP": {"mlp": False},
    "two layers": {"n_layer": 2},
    "no positions": {"positions": "none"},
}
VALIDATION = "So foul and fair a day I have not seen."
SEEN = [*dict.fromkeys(VALIDATION + "\n")]  # characters every run here was trained on
UNSEEN = ["~", "é", "\U0001f600", "[UNK]", "\ud800"]  # one never seen, typed [UNK], a lone surrogate
MARKERS = ["_", "\\_"]  # a blank, and the marker itself (which a next-token run's text may not hold either)


def is_json(value: object) -> bool:
    """Whether JSON can carry the value (not nan nor an infinity, which a page never sends)."""
    try:
        json.dumps(value, allow_nan=False)
        return True
    except ValueError:
        return False


JSON_VALUES = ANY_JSON.filter(is_json)


def state_of(run_dir: Path) -> dict:
    return torch.load(run_dir / LAST, weights_only=True)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, leak_sweep, shared_cache_dir) -> Path:
    """The leak sweep's two jobs, a fill-in-the-blank run, and runs of random weights with two layers (one of each
    task), with a finite mask value, without positions, and a prefix LM (with two layers too), under one
    directory."""
    root = tmp_path_factory.mktemp("page-runs")
    for run in sorted(leak_sweep.glob("[01]_*")):
        shutil.copytree(run, root / run.name)
    trained = cli("train.py", *FILL, f"data.cache_dir={shared_cache_dir}", f"hydra.run.dir={root / 'fill'}")
    assert trained.returncode == 0, trained.stderr
    next_token, fill = state_of(next(root.glob("0_*"))), state_of(root / "fill")
    for seed, (name, state, settings) in enumerate(
        [
            ("two layers", next_token, {"n_layer": 2}),
            ("fill, two layers", fill, {"n_layer": 2, "qk_norm": True}),
            ("a finite mask value", next_token, {"mask_value": -1.0, "softcap": 3.0}),
            ("no positions", next_token, {"positions": "none"}),
            ("prefix LM", prefix_lm(next_token), {}),
            ("prefix LM, two layers", prefix_lm(next_token), {"n_layer": 2}),
        ]  # fmt: skip
    ):
        random_run(root, name, state, seed, **settings)
    return root


@pytest.fixture(scope="module")
def data(logdir) -> dict:
    """The page's data of every run under the logdir, at every step it kept."""
    return page_data([(run, [None, *(kept.step for kept in run.steps)]) for run in list_runs(logdir)])


@pytest.fixture(scope="module")
def page(data):
    with engine_page() as opened:
        give(opened, "runs", data)
        yield opened


def test_the_pages_logits_equal_tinylms_for_every_setting(page, logdir, tmp_path):
    next_token, fill = state_of(next(logdir.glob("0_*"))), state_of(logdir / "fill")
    for seed, (name, settings) in enumerate(SETTINGS.items()):
        random_run(tmp_path, name, next_token, seed, **settings)
    random_run(tmp_path, "fill in the blank", fill, len(SETTINGS))
    random_run(tmp_path, "prefix LM", prefix_lm(next_token), len(SETTINGS) + 1, n_layer=2)
    models = page_data([(run, [None]) for run in list_runs(tmp_path)])["models"]
    assert models.keys() == {*SETTINGS, "fill in the blank", "prefix LM"}
    for name, by_step in models.items():
        checkpoint = load(tmp_path / name / LAST)
        model, mask = checkpoint.model, checkpoint.task.mask
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(model.config.vocab_size, (model.config.block_size,), generator=generator).tolist()
        for causal in (None, True):
            with torch.no_grad():
                expected = model(torch.tensor([ids]), mask=mask, causal=causal)[0].tolist()
            got = page.evaluate(
                """([model, ids, causal]) => {
                  const { prepared, forwardAll } = engine.forTests;
                  return forwardAll(prepared(model), ids, causal).logits.map((row) => Array.from(row));
                }""",
                [next(iter(by_step.values())), ids, causal],
            )
            assert largest_difference(expected, got) <= LOGITS, f"{name}, causal={causal}"


def test_the_runs_listed_are_the_servers(page, logdir):
    _, answer = ask(page, "runs", "runs", bodiless=True)
    assert answer == json.loads(json.dumps(served(logdir, "runs")))


@st.composite
def attention_requests(draw, data: dict) -> dict:
    """A request as the tab sends it, mostly one the server answers: a text of characters the runs know (blanks in
    a fill-in-the-blank run's), a kept step, the first layer, positions to hide in a run that hides them, a
    temperature; and now and then something the server refuses in each of them."""
    runs = data["runs"]["runs"]
    run = draw(st.sampled_from(runs) | st.sampled_from([run for run in runs if run["name"].startswith("fill")]))
    fills = run["name"].startswith("fill")
    rarely = lambda usual, other: st.one_of(usual, usual, usual, other)  # noqa: E731
    usual = st.lists(st.sampled_from(SEEN + ["_"] * fills), min_size=1, max_size=40)
    text = "".join(draw(rarely(usual, st.lists(st.sampled_from(SEEN + MARKERS + UNSEEN), max_size=40))))
    steps = [kept["step"] for kept in run.get("steps", [])] or [None]
    within = st.integers(0, max(len(text) - 1, 0))
    optional = {
        "step": rarely(st.none() | st.sampled_from(steps), st.integers(-1, 12)),
        "layer": rarely(st.integers(0, run["name"].count("two layers")), st.integers(-1, 2)),
        "blanks": rarely(st.lists(within, max_size=3 * fills), st.lists(st.integers(-1, 45), max_size=3)),
        "temperature": st.sampled_from([1, 0.5, 2.0, 1e-3, 100]) | st.floats(1e-3, 100),
    }
    body = {"run": run["name"], "text": text}
    return body | draw(st.fixed_dictionaries({}, optional=optional))


def test_the_pages_attention_answers_are_the_servers(page, data, logdir):
    @examples(40)
    @given(body=attention_requests(data))
    @example(body={"run": "two layers", "text": VALIDATION, "layer": 1})
    @example(body={"run": "a finite mask value", "text": VALIDATION, "temperature": 0.5})
    @example(body={"run": "fill, two layers", "text": "So f_ul and fair", "layer": 1, "blanks": [0, 9]})
    @example(body={"run": "prefix LM, two layers", "text": VALIDATION, "layer": 1})
    @example(body={"run": "prefix LM", "text": "So foul"})
    @example(body={"run": "no positions", "text": VALIDATION})
    def check(body):
        sent, answer = ask(page, "runs", "attention", body)
        expected = json.loads(json.dumps(served(logdir, "attention", sent)))
        event(expected["error"].split(":")[0] if "error" in expected else f"answered, {expected['task']}")
        assert_same(expected, answer)

    check()


def test_a_text_asked_after_another_is_answered_as_if_asked_alone(page, data):
    """Each model keeps its latest forward and takes from it what the next text leaves unchanged (page.js's
    forwardAll): in every run (masked, unmasked, a finite mask value, prefix LMs, fill in the blank, two layers), a
    chain of texts typed one after another (a key added at the end, the same text, one removed, a token changed
    inside the prefix and after it, a longer one) gets exactly the answer a page asked that text alone gives."""
    chain = [VALIDATION[:20], VALIDATION[:21], VALIDATION[:21], VALIDATION[:19], "Sx" + VALIDATION[2:19],
             VALIDATION[:18] + "x", VALIDATION]  # fmt: skip
    bodies = []
    for run in data["runs"]["runs"]:
        fills = run["name"].startswith("fill")
        layer = {"layer": 1} if "two layers" in run["name"] else {}
        for text in chain:
            body = {"run": run["name"], "text": text[:3] + "_" + text[4:] if fills else text, **layer}
            bodies.append(body | ({"blanks": [len(text) - 2]} if fills else {}))
    page.evaluate("(text) => { window.pageData = text; }", json.dumps(data))
    answers = page.evaluate(
        """async (bodies) => {
          const typed = engine.answering(JSON.parse(pageData));
          const answers = [];
          for (const body of bodies) {
            const alone = engine.answering(JSON.parse(pageData));
            answers.push([await typed("attention", body), await alone("attention", body)].map(JSON.stringify));
          }
          return answers;
        }""",
        bodies,
    )
    assert len(answers) == len(bodies) > len(chain) * 8
    for body, (typed, alone) in zip(bodies, answers, strict=True):
        assert "error" not in json.loads(alone), (body, alone)
        assert typed == alone, body


@pytest.fixture(scope="module")
def decisive(page, logdir, tmp_path_factory) -> Path:
    """A next-token run and a fill-in-the-blank run of random weights, whose logits lie far apart (unlike those of
    the tiny runs trained for ten steps): at the lowest temperature each token drawn is the likeliest by far."""
    root = tmp_path_factory.mktemp("decisive")
    random_run(root, "next_token", state_of(next(logdir.glob("0_*"))), 0)
    random_run(root, "fill_blank", state_of(logdir / "fill"), 1)
    random_run(root, "prefix_lm", prefix_lm(state_of(next(logdir.glob("0_*")))), 2)
    give(page, "decisive", page_data([(run, [None]) for run in list_runs(root)]))
    return root


def test_the_page_writes_the_likeliest_text_as_the_server_does(page, decisive):
    """At the lowest temperature both write each token's likeliest (sample.py's likeliest=true)."""
    data = {"runs": {"runs": [{"name": "next_token"}, {"name": "fill_blank"}, {"name": "prefix_lm"}]}}

    @examples(15)
    @given(body=attention_requests(data), tokens=st.integers(1, 40), seed=st.integers(0, 2**40))
    def check(body, tokens, seed):
        body = body | {"tokens": tokens, "seed": seed, "temperature": 1e-3, "step": None}
        sent, answer = ask(page, "decisive", "generate", body)
        assert_same(json.loads(json.dumps(served(decisive, "generate", sent))), answer)

    check()


def test_the_page_samples_from_its_own_generator_and_says_the_rest_as_the_server(page, data, logdir):
    """At other temperatures the page draws from its own generator: the same text for the same seed, as many tokens
    as the server writes, and every other field as the server says it."""

    @examples(15)
    @given(body=attention_requests(data), tokens=st.integers(1, 40), seed=st.integers(0, 2**40))
    def check(body, tokens, seed):
        body = body | {"tokens": tokens, "seed": seed}
        sent, answer = ask(page, "runs", "generate", body)
        expected = json.loads(json.dumps(served(logdir, "generate", sent)))
        if "error" not in expected:
            assert ask(page, "runs", "generate", body)[1] == answer
            assert len(answer["tokens"]) == len(expected["tokens"])
            for drawn in ("continuation", "tokens", "text"):
                del expected[drawn], answer[drawn]
        assert_same(expected, answer)

    check()


def test_a_bad_request_gets_the_servers_line(page, data, logdir):
    runs = [run["name"] for run in data["runs"]["runs"]]
    keys = ["text", "step", "layer", "blanks", "temperature", "tokens", "seed"]

    @examples(60)
    @given(
        route=st.sampled_from(["attention", "generate"]),
        body=st.fixed_dictionaries({"run": st.sampled_from(runs)}, optional=dict.fromkeys(keys, JSON_VALUES))
        | JSON_VALUES.filter(lambda body: not isinstance(body, dict)),
    )
    def check(route, body):
        sent, answer = ask(page, "runs", route, body)
        assert_same(json.loads(json.dumps(served(logdir, route, sent))), answer)

    check()


def test_the_page_writes_values_as_python_writes_them(page):
    """page.js's ports of Python's repr (of any JSON value), of probability() (viewer/predictions.py) and of the
    fixed-point format give Python's text to the character; for characters Python's Unicode tables know (newer ones
    the browser may print where Python escapes them)."""

    @examples(150)
    @given(value=JSON_VALUES, p=st.floats(0, 1) | st.sampled_from(PROBABILITIES), places=st.sampled_from([2, 4, 7]))
    def check(value, p, places):
        # Nor lone surrogates: no text a person types holds one, and JSON's round trip pairs two of them into one.
        assume(not any(unicodedata.category(c) in ("Cn", "Cs") for c in json.dumps(value, ensure_ascii=False)))
        seen, written = page.evaluate(
            """([text, p, places]) => {
              const value = JSON.parse(text);
              const { repr, probability, fixed } = engine.forTests;
              return [JSON.stringify(value), JSON.stringify([repr(value), probability(p), fixed(p, places)])];
            }""",
            [json.dumps(value), p, places],
        )
        assert json.loads(written) == [repr(json.loads(seen)), probability(p), f"{p:.{places}f}"]

    check()


def test_a_run_exported_at_some_steps_lists_those_and_opens_at_the_latest(page, logdir):
    """Without the run's default checkpoint (best.pt, step 10) among the steps exported, the page reads the latest
    one exported by default, and a step it does not hold is refused as a step the run did not keep."""
    [fill] = [run for run in list_runs(logdir) if run.name == "fill"]
    data = page_data([(fill, [0, 5])])
    give(page, "some steps", data)
    held = [{"step": 0, "file": "steps/step-0.pt"}, {"step": 5, "file": "steps/step-5.pt"}]
    assert data["runs"]["runs"][0] | {"label": ""} == {
        "name": "fill", "label": "", "checkpoint": "steps/step-5.pt", "step": 5, "problem": "", "note": "",
        "steps": held,
    }  # fmt: skip
    _, answer = ask(page, "some steps", "attention", {"run": "fill", "text": "So f_ul"})
    assert (answer["step"], answer["file"], answer["steps"]) == (5, "steps/step-5.pt", held)
    _, answer = ask(page, "some steps", "attention", {"run": "fill", "text": "So f_ul", "step": 10})
    assert answer == {"error": "step=10: fill kept no checkpoint at that step (kept: 0, 5)", "steps": held}


def test_a_run_not_in_the_page_is_named_in_one_line(page):
    _, answer = ask(page, "runs", "attention", {"run": "../elsewhere", "text": "So"})
    assert answer == {"error": "run '../elsewhere': no such run in this page"}


def test_the_page_refuses_a_recurrent_run_and_a_bpe_run_in_one_line_each(logdir, tmp_path):
    state = state_of(next(logdir.glob("0_*")))
    random_run(tmp_path, "gru", state, 0, mixer="gru")
    bpe = train_tokenizer(TokenizerConfig(TokenizerKind.bpe, 300), VALIDATION * 20)
    state = state | {"tokenizer": bpe.to_str()}
    state["config"] = state["config"] | {"tokenizer": {"kind": "bpe", "vocab_size": 300}}
    random_run(tmp_path, "bpe", state, 0, vocab_size=bpe.get_vocab_size())
    gru = "it mixes the positions with a recurrent layer, GRU (model.mixer=gru): the page computes attention only"
    bpe = "its tokenizer is byte-level BPE (tokenizer.kind=bpe): the page reads the character tokenizer only"
    assert page_problem(load(tmp_path / "gru" / LAST)) == gru
    assert page_problem(load(tmp_path / "bpe" / LAST)) == bpe
    left_out = page_data([(run, [None]) for run in list_runs(tmp_path)])["left_out"]
    assert left_out == [{"run": "bpe", "reason": bpe}, {"run": "gru", "reason": gru}]


@pytest.mark.skipif(not os.environ.get("TINYLM_PAGE_TIMING"), reason="set TINYLM_PAGE_TIMING=1 to time the page")
def test_time_the_page_takes_to_answer_at_the_default_size(page, logdir, tmp_path):
    """Prints the milliseconds page.js takes to answer "attention" for a 64-token text at the default model's size
    (model.block_size=64, model.d_model=128), for next-token prediction masked and unmasked and fill in the blank (a
    forward per token): a key typed as the text's last character, with the pointed query's counterfactual looks read
    as the panel reads them; a text whose first token changed (every position computed again); and every look read
    (JSON.stringify, as the tests read answers). Then the time to write 500 tokens."""
    size = {"block_size": 64, "d_model": 128, "d_k": 128, "d_v": 128}
    next_token = state_of(next(logdir.glob("0_*")))
    random_run(tmp_path, "next_token", next_token, 0, **size)
    random_run(tmp_path, "next_token, unmasked", next_token, 0, **size, causal=False)
    random_run(tmp_path, "fill_blank", state_of(logdir / "fill"), 0, **size)
    give(page, "default size", page_data([(run, [None]) for run in list_runs(tmp_path)]))
    text = (VALIDATION * 2)[:64]
    runs = [("next_token", text, []), ("next_token, unmasked", text, []), ("fill_blank", "_" + text[1:], [9, 30])]
    for run, typed, blanks in runs:
        times = page.evaluate(
            """async ([run, text, blanks]) => {
              const ask = (text) => asks["default size"]("attention", { run, text, blanks });
              const timed = async (texts, read) => {
                const times = [];
                for (const text of texts) {
                  const start = performance.now();
                  read(await ask(text));
                  times.push(performance.now() - start);
                }
                return times.slice(1); // the first warms the engine up
              };
              const keys = [..."abcdefg"].map((key) => text.slice(0, -1) + key);
              const starts = [..."abcdefg"].map((key) => key + text.slice(1));
              const pointed = (answer) => answer.counterfactuals[answer.tokens.length - 1];
              return {
                "a key typed at the end": await timed(keys, pointed),
                "the first token changed": await timed(starts, pointed),
                "every look read": await timed(keys, JSON.stringify),
              };
            }""",
            [run, typed, blanks],
        )
        for case, took in times.items():
            print(f"page.js attention, {run}, 64 tokens, {case}: median {statistics.median(took):.1f} ms of "
                  f"{[round(t, 1) for t in took]}")  # fmt: skip
    written = page.evaluate(
        """async () => {
          const start = performance.now();
          await asks["default size"]("generate", { run: "next_token", text: "So foul", tokens: 500, seed: 1 });
          return performance.now() - start;
        }"""
    )
    print(f"page.js generate, next_token, 500 tokens after a 7-token prompt: {written:.0f} ms")
