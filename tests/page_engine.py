"""The exported page's engine (tensorboard_plugin_tinylm/static/page.js) in Debian's chromium through Playwright, beside
the server it stands in for: page.js imported into a blank page, given viewer/page.py's data of a logdir, asked a
route as index.js asks it; answers.py asked the same request on the same logdir; and the two answers compared. Runs of
random weights (`random_run`) stand in for trained ones where only the forward is compared."""

import copy
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from attention_browser import browser_page

from model import TinyLM
from trainer.checkpoint import KEPT_FORMAT, LAST, model_config, save_checkpoint

PAGE_JS = Path(__file__).resolve().parents[1] / "tensorboard_plugin_tinylm" / "static" / "page.js"
LOGITS = 1e-5  # the page computes in float64 what torch computes in float32
PROBABILITIES = 1e-4
PROBABILITY_KEYS = {"top", "p_next", "trained", "masked", "uniform", "no_look"}
# The scores q_i . k_j: torch's float32 error grows with |q| |k|, so they are held to LOGITS times the largest score
# of their matrix (when above 1).
SCORE_KEYS = {"raw", "fed"}


@contextmanager
def engine_page() -> Iterator[object]:
    """A blank chromium page with page.js imported as `window.engine` (from a Blob URL, as a module is imported
    without a server)."""
    with browser_page() as page:
        page.evaluate(
            """async (source) => {
              const module = new Blob([source], { type: "text/javascript" });
              window.engine = await import(URL.createObjectURL(module));
              window.asks = {};
            }""",
            PAGE_JS.read_text(),
        )
        yield page


def give(page, key: str, data: dict) -> None:
    """page.js's answering(data) kept in the page as `key`."""
    page.evaluate("([key, text]) => { asks[key] = engine.answering(JSON.parse(text)); }", [key, json.dumps(data)])


def ask(page, key: str, route: str, body: object = None, *, bodiless: bool = False) -> tuple[object, dict]:
    """The page's answer to `route` with `body`, and the body as the server would read it: JSON from the page, where
    numbers are doubles (an int beyond 2**53 arrives as the double JavaScript holds)."""
    sent, answer = page.evaluate(
        """async ([key, route, body]) => {
          const sent = body === null ? undefined : JSON.parse(body);
          const answer = await asks[key](route, sent);
          return [sent === undefined ? null : JSON.stringify(sent), JSON.stringify(answer)];
        }""",
        [key, route, None if bodiless else json.dumps(body)],
    )
    return (None if sent is None else json.loads(sent)), json.loads(answer)


def served(logdir: Path, route: str, body: object = None) -> dict:
    """answers.py's answer to the request, as the tab's server sends it: a bad request as {"error", ...}."""
    from tensorboard_plugin_tinylm import answers

    try:
        return answers.runs(logdir) if route == "runs" else getattr(answers, route)(logdir, body)
    except answers.BadRequest as error:
        return {"error": str(error), **error.fields}


def assert_same(
    server: object, page: object, worst: dict[str, float] | None = None, path: str = "", scale: float = 1.0
) -> None:
    """The page's answer is the server's: numbers within LOGITS (PROBABILITIES for probabilities, and scores as
    SCORE_KEYS says), every other value exactly; `worst` keeps the largest difference seen by kind."""
    where = path or "the answer"
    if path.rsplit(".", 1)[-1] in SCORE_KEYS and isinstance(server, list):
        largest = max((abs(x) for row in server for x in row if x is not None), default=0.0)
        for i, (a, b) in enumerate(zip(server, page, strict=True)):
            assert_same(a, b, worst, f"{path}[{i}]", max(1.0, largest))
    elif path.endswith(".top"):
        assert_same_top(server, page, worst, path)
    elif isinstance(server, dict):
        assert isinstance(page, dict) and server.keys() == page.keys(), f"{where}: {server} != {page}"
        for key in server:
            assert_same(server[key], page[key], worst, f"{path}.{key}")
    elif isinstance(server, list):
        assert isinstance(page, list) and len(server) == len(page), f"{where}: {server} != {page}"
        for i, (a, b) in enumerate(zip(server, page)):
            assert_same(a, b, worst, f"{path}[{i}]", scale)
    elif isinstance(server, float) and isinstance(page, int | float) and not isinstance(page, bool):
        key = path.rsplit(".", 1)[-1].split("[")[0]
        kind = "probability" if key in PROBABILITY_KEYS else "score" if key in SCORE_KEYS else "number"
        allowed = PROBABILITIES if kind == "probability" else LOGITS * scale
        difference = abs(server - page)
        if worst is not None:
            worst[kind] = max(worst.get(kind, 0.0), difference)
        assert difference <= allowed, f"{where}: {server} != {page}"
    else:
        assert type(server) is type(page) and server == page, f"{where}: {server!r} != {page!r}"


def assert_same_top(server: list, page: list, worst: dict[str, float] | None, path: str) -> None:
    """A top five: the probabilities as assert_same holds them; the labels where the order is decided to that
    precision, that is where a label's probability is above it and apart from its neighbours' by more (at the
    lowest temperature all but the first underflow to zero in float32, the server's ties in an order of its own)."""
    assert len(server) == len(page), f"{path}: {server} != {page}"
    p = [probability for _, probability in server]
    for k, ((label, probability), (shown, computed)) in enumerate(zip(server, page)):
        assert_same(probability, computed, worst, f"{path}[{k}]")
        neighbours = [p[n] for n in (k - 1, k + 1) if 0 <= n < len(p)]
        if probability > PROBABILITIES and all(abs(probability - q) > PROBABILITIES for q in neighbours):
            assert shown == label, f"{path}[{k}]: {server} != {page}"


def random_run(root: Path, name: str, state: dict, seed: int, **model) -> Path:
    """A run directory `root/name` whose last.pt holds a TinyLM of the checkpoint `state`'s settings changed by
    `model` (model.* settings), with random weights: GPT-2's init, then every parameter moved by noise (so that no
    LayerNorm is the identity), with `state`'s tokenizer and task."""
    chosen = {key: copy.deepcopy(state[key]) for key in ("config", "tokenizer")}
    chosen["config"]["model"].update(model)
    torch.manual_seed(seed)
    built = TinyLM(model_config(chosen))
    with torch.no_grad():
        for parameter in built.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.2)
    run_dir = root / name
    run_dir.mkdir(parents=True)
    save_checkpoint(chosen | {"format": KEPT_FORMAT, "step": 0, "model": built.state_dict()}, run_dir / LAST)
    return run_dir


def prefix_lm(state: dict) -> dict:
    """A next-token run's checkpoint state made a prefix LM's (task=prefix_lm), its prefix half of a window."""
    config = state["config"] | {"task": state["config"]["task"] | {"name": "prefix_lm", "prefix_share": 0.5}}
    return state | {"config": config}


def largest_difference(expected: list[list[float]], got: list[list[float]]) -> float:
    return max((abs(a - b) for row, other in zip(expected, got) for a, b in zip(row, other)), default=math.inf)
