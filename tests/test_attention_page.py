"""The Attention tab in a real browser (Debian's chromium through Playwright), on a tiny leak sweep, then on a tiny
fill-in-the-blank run beside one of its jobs: one browser session for every check, in the order a person goes."""

import json
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from attention_browser import (
    WIDTH,
    browser_page,
    continue_text,
    move_step,
    open_tab,
    panel_of,
    point_at,
    point_at_token,
    set_temperature,
    skip_without_chromium,
    steps_table,
    tensorboard,
    type_text,
    wait_for_panels,
)
from page_engine import prefix_lm, random_run

from conftest import cli
from trainer.checkpoint import load_checkpoint
from viewer.predictions import probability

pytestmark = pytest.mark.slow
skip_without_chromium()
TEXT = "To be, or not"
INDEX_JS = Path(__file__).resolve().parents[1] / "tensorboard_plugin_tinylm" / "static" / "index.js"
# Where a formatter may part from Python's: ties on the exact double (0.125, 0.0625: JS rounds them up), a carry into
# the next digit (0.0999, 9.96e-06), the switch to an exponent below 1e-4 (JS's toPrecision writes 0.000021), and the
# ends; then every odd multiple of 2^-m down to 2^-12 and two digits at every power of ten down to 1e-9.
PROBABILITIES = [0.0, 1.0, 0.996, 0.43, 0.125, 0.375, 0.1, 0.0999, 0.0625, 0.031, 0.0029, 0.00095, 0.0001]
PROBABILITIES += [0.00009996, 2.1e-05, 1e-05, 9.96e-06, 1e-07, 5e-324]
PROBABILITIES += [n / 2**m for m in range(1, 13) for n in range(1, 2**m, 2)]
PROBABILITIES += [k * 10.0**-d for d in range(1, 10) for k in range(10, 100)]
PAGE_ERRORS: list[str] = []  # what the page threw, from the start of the browser session


@pytest.fixture(scope="module")
def tab(sweep_tensorboard):
    """The tab open in one browser page for all the checks below, on the session's leak sweep (conftest's SWEEP,
    served by its tensorboard), with the server's own address."""
    with browser_page() as page:
        page.on("pageerror", lambda error: PAGE_ERRORS.append(f"{error.name}: {error.message}\n{error.stack}"))
        yield page, open_tab(page, sweep_tensorboard), sweep_tensorboard


def names(leak_sweep: Path) -> dict[str, str]:
    """model.causal's value -> the job's run name."""
    return {"masked": next(leak_sweep.glob("0_*")).name, "unmasked": next(leak_sweep.glob("1_*")).name}


def test_the_tabs_name_shows_whole_in_the_top_bar(tab):
    page, _, _ = tab
    label = page.locator("a, [role=tab]", has_text=re.compile(r"^\s*attention\s*$", re.I)).first
    assert label.is_visible()
    assert label.evaluate("e => e.scrollWidth <= e.clientWidth + 1")


def test_both_runs_are_listed_with_their_checkpoint_and_open_with_the_validation_line(tab, leak_sweep):
    _, frame, _ = tab
    runs = frame.locator(".run")
    assert runs.count() == 2
    for row, key in zip(runs.all(), ["masked", "unmasked"]):
        assert row.get_attribute("data-run") == names(leak_sweep)[key]
        assert row.locator(".meta").inner_text() == "best.pt, step 10"  # SWEEP's last step, its lowest val loss
    assert frame.locator("#text").input_value() == "So foul and fair a day I have not seen."
    wait_for_panels(frame)
    assert frame.locator(".panel").count() == 2
    assert frame.locator(".panel .label").all_inner_texts() == ["model.causal=True", "model.causal=False"]


def test_pointing_at_a_query_shows_the_cells_weight_and_the_future_in_the_unmasked_run(tab, leak_sweep):
    _, frame, url = tab
    type_text(frame, TEXT)
    run = names(leak_sweep)["unmasked"]
    point_at(frame, run, 3, 5)
    panel = frame.locator(f'.panel[data-run="{run}"]')
    expected = served_weights(url, run)[3][5]
    cell = panel.locator("p.cell").inner_text()
    assert cell == f"a[3,5] = {expected:.3f}: query 'b' reading key ',' (j > i: the future)"
    steps = steps_table(frame, run, 3)
    row = steps.locator('tr[data-key="5"]')
    assert row.locator("td.weight").inner_text() == f"{expected:.3f}"
    assert row.locator(".leak").inner_text() == "future"
    assert steps.locator("tr").count() == 1 + len(TEXT)  # every key, the future ones included
    assert panel.locator(".over-text .token.leak").count() == len(TEXT) - 4
    assert panel.locator(".over-text .token.query").inner_text() == "b"


def test_the_masked_run_lists_only_the_keys_up_to_the_query(tab, leak_sweep):
    _, frame, _ = tab
    run = names(leak_sweep)["masked"]
    point_at(frame, run, 3, 1)
    panel = frame.locator(f'.panel[data-run="{run}"]')
    steps = steps_table(frame, run, 3)
    assert steps.locator("tr[data-key]").count() == 4
    hidden = "j = 4 to 12: hidden by the mask (j > i), weight exactly 0"
    assert steps.locator("tr.hidden-keys").inner_text() == hidden
    assert panel.locator(".leak").count() == 0


def test_the_unmasked_runs_top_prediction_as_trained_and_with_the_mask_is_the_routes(tab, leak_sweep):
    _, frame, url = tab
    run = names(leak_sweep)["unmasked"]
    point_at(frame, run, 3, 5)
    panel = panel_of(frame, run)
    served = served_attention(url, run)
    assert [strip["tag"] for strip in served["strips"]] == ["val/loss", "val/loss_causal"]
    for strip in served["strips"]:
        column = panel.locator(f'.prediction .setting[data-tag="{strip["tag"]}"]')
        assert column.locator(".setting-name").inner_text() == strip["name"]
        rows = column.locator("tr.choice")
        assert rows.count() == 5
        label, p = strip["predictions"][3]["top"][0]
        assert rows.first.locator("td.guess").inner_text() == label
        assert float(rows.first.locator("td.p").inner_text()) == pytest.approx(p, abs=5e-4)
        p_next, loss = strip["predictions"][3]["p_next"], strip["predictions"][3]["loss"]
        actual = re.fullmatch(r"next token 'e': p (\S+) · loss (\S+) nats", column.locator("p.actual").inner_text())
        assert float(actual[1]) == pytest.approx(p_next, abs=5e-4, rel=0.06)  # 2 decimals, or 2 digits below 0.1
        assert float(actual[2]) == pytest.approx(loss, abs=5e-4)
    assert panel.locator("p.prediction-caption").inner_text().startswith("After i=3 'b', the next token")


def test_two_runs_panels_sit_side_by_side_at_1400_px_with_nothing_cut(tab):
    _, frame, _ = tab
    left, right = (panel.bounding_box() for panel in frame.locator(".panel").all())
    assert left["y"] == right["y"]
    assert left["x"] + left["width"] <= right["x"]
    assert right["x"] + right["width"] <= frame.evaluate("document.documentElement.clientWidth")
    for part in (".panel", ".strips", ".prediction", ".counterfactual", ".step-row"):
        for element in frame.locator(part).all():  # nothing wider than its box: no text cut or spilling over
            assert element.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), part


def test_pointing_at_a_token_of_a_strip_picks_that_query_everywhere_in_the_panel(tab, leak_sweep):
    _, frame, url = tab
    run = names(leak_sweep)["unmasked"]
    point_at_token(frame, run, "val/loss_causal", 7)
    panel = panel_of(frame, run)
    served = served_attention(url, run)
    assert panel.locator(".strip-tokens .token.query").all_inner_texts() == ["o", "o"]  # both strips
    assert panel.locator(".over-text .token.query").inner_text() == "o"
    assert panel.locator("p.stats").inner_text().startswith("row i=7:")
    assert panel.locator("p.prediction-caption").inner_text().startswith("After i=7 'o'")
    losses = [strip["losses"][7] for strip in served["strips"]]
    assert (
        panel.locator("p.strip-point")
        .inner_text()
        .startswith(f"i=7 'o' → 'r': as trained {losses[0]:.3f} nats, predicts")
    )
    look = served["counterfactuals"][7]
    for kind in ("trained", "masked", "uniform", "no_look"):
        shown = panel.locator(f'.cf[data-kind="{kind}"] .cf-p').inner_text()
        assert float(shown) == pytest.approx(look[kind], abs=5e-4, rel=0.06)  # 2 decimals, or 2 digits below 0.1
    assert panel.locator("p.cf-words").inner_text() == look["words"]


def test_each_strips_mean_is_the_routes_and_named_after_its_curve(tab, leak_sweep):
    _, frame, url = tab
    for key in ("masked", "unmasked"):
        run = names(leak_sweep)[key]
        strips = served_attention(url, run)["strips"]
        shown = panel_of(frame, run).locator(".strip")
        assert shown.count() == len(strips) == (1 if key == "masked" else 2)
        for row, strip in zip(shown.all(), strips):
            assert row.locator(".strip-tag").inner_text() == strip["tag"]
            assert row.locator(".mean").inner_text() == f"{strip['mean']:.3f}"
            assert row.locator(".token").count() == len(TEXT)


def test_moving_the_step_selector_redraws_the_panel_at_that_step(tab, leak_sweep):
    _, frame, url = tab
    run = names(leak_sweep)["unmasked"]
    panel = panel_of(frame, run)
    [kept] = [listed["steps"] for listed in served(url, "runs")["runs"] if listed["name"] == run]
    steps = sorted({entry["step"] for entry in kept})  # one position per step: best.pt may share last.pt's
    assert len(steps) >= 2, kept
    assert panel.locator("input.step").get_attribute("max") == str(len(steps) - 1)
    move_step(frame, run, 0)
    then, now = served_attention(url, run, step=steps[0]), served_attention(url, run)
    assert panel.get_attribute("data-step") == str(steps[0])
    assert panel.locator("p.meta").inner_text().startswith(f"{then['file']}, step {steps[0]}")
    assert panel.locator(".step-readout").inner_text().startswith(f"step {steps[0]} · ")
    assert then["strips"][0]["mean"] != now["strips"][0]["mean"]
    assert panel.locator('.strip[data-tag="val/loss"] .mean').inner_text() == f"{then['strips'][0]['mean']:.3f}"
    point_at_token(frame, run, "val/loss", 2)
    label, p = then["strips"][1]["predictions"][2]["top"][0]
    top = panel.locator('.setting[data-tag="val/loss_causal"] tr.choice').first
    assert top.locator("td.guess").inner_text() == label
    assert float(top.locator("td.p").inner_text()) == pytest.approx(p, abs=5e-4)
    move_step(frame, run, len(steps) - 1)
    last = served_attention(url, run, step=steps[-1])
    assert panel.get_attribute("data-step") == str(steps[-1])
    assert panel.locator('.strip[data-tag="val/loss"] .mean').inner_text() == f"{last['strips'][0]['mean']:.3f}"


def test_continuing_the_text_shows_each_runs_continuation(tab, leak_sweep):
    _, frame, url = tab
    continue_text(frame, 12)
    for key in ("masked", "unmasked"):
        run = names(leak_sweep)[key]
        step = int(panel_of(frame, run).get_attribute("data-step"))
        written = served(url, "generate", {"run": run, "text": TEXT, "step": step, "tokens": 12, "seed": 1337})
        assert len(written["tokens"]) == 12
        assert panel_of(frame, run).locator(".continuation .written").inner_text() == written["continuation"]
        assert panel_of(frame, run).locator(".continuation .prompt").inner_text() == TEXT


def test_bad_settings_get_one_line_in_the_panel_and_the_tab_serves_on(tab, leak_sweep):
    _, frame, url = tab
    run = names(leak_sweep)["unmasked"]
    set_temperature(frame, "0")
    expected = served_attention(url, run, temperature=0)["error"]
    assert "temperature" in expected
    assert frame.locator(".panel p.error").all_inner_texts() == [expected] * 2
    set_temperature(frame, "1")
    assert frame.locator(".panel p.error").count() == 0
    too_many = served(url, "runs")["max_generate"] + 1
    continue_text(frame, too_many)
    lines = frame.locator(".panel .generation p.error").all_inner_texts()
    assert lines == [served(url, "generate", {"run": run, "text": TEXT, "tokens": too_many})["error"]] * 2
    type_text(frame, "T")  # one token: nothing to score, the attention still drawn
    problem = served_attention(url, run, text="T")["problem"]
    assert problem
    assert panel_of(frame, run).locator("p.problem").inner_text() == problem
    assert panel_of(frame, run).locator("canvas.heatmap").count() == 1
    assert panel_of(frame, run).locator('.strip[data-tag="val/loss"] .mean').inner_text() == "—"


def test_an_empty_text_gets_a_message_in_each_panel_and_a_panel_can_be_removed(tab, leak_sweep):
    _, frame, _ = tab
    frame.locator("#text").fill("")
    wait_for_panels(frame)
    frame.locator(".panel p.error").first.wait_for()
    assert (
        frame.locator(".panel p.error").all_inner_texts() == ["text: empty; give the text whose attention to show"] * 2
    )
    run = names(leak_sweep)["masked"]
    frame.locator(f'.panel[data-run="{run}"] button.close').click()
    assert frame.locator(".panel").count() == 1
    assert not frame.locator(f'.run[data-run="{run}"] input').is_checked()


def test_a_probability_reads_as_the_servers_sentence_writes_it(tab):
    """index.js's formatter gives viewer/predictions.py's probability(p) to the character. The module is imported
    whole from a Blob URL in a blank page, as a Jupyter widget would import it, with its formatter exported."""
    page, _, _ = tab
    blank = page.context.browser.new_page()  # a context of its own: about:blank
    try:
        shown = blank.evaluate(
            """async ([source, values]) => {
              const module = new Blob([source + "\\nexport { probability };"], { type: "text/javascript" });
              const { probability } = await import(URL.createObjectURL(module));
              return values.map(probability);
            }""",
            [INDEX_JS.read_text(), PROBABILITIES],
        )
    finally:
        blank.close()
    assert shown == [probability(p) for p in PROBABILITIES]


def test_the_page_threw_nothing_through_all_of_the_above(tab):
    assert PAGE_ERRORS == []


# A fill-in-the-blank run (task=fill_blank, the mask off) as long as the leak sweep's and as small (checkpoints at
# steps 0 and 10), beside a copy of the sweep's masked next-token job: a tensorboard of their own, read in a second
# page of the same browser.
FILL = ["task=fill_blank", "model.causal=false", "trainer.max_steps=10", "trainer.eval_interval=10",
        "trainer.eval_iters=2", "trainer.log_interval=5", "trainer.batch_size=8", "model.block_size=16",
        "model.d_model=32", "model.d_k=16", "model.d_v=16", "optim.warmup_steps=2"]  # fmt: skip
BLANK_TEXT = "To b_, or not"  # a blank typed at token 4
HIDDEN = 7  # the token hidden by position: the "o" of "or"
BLANK_PAGE_ERRORS: list[str] = []


@pytest.fixture(scope="module")
def blank_tab(tab, leak_sweep, shared_cache_dir, tmp_path_factory):
    page, _, _ = tab
    logdir = tmp_path_factory.mktemp("blank-runs")
    trained = cli("train.py", *FILL, f"data.cache_dir={shared_cache_dir}", f"hydra.run.dir={logdir / 'fill'}")
    assert trained.returncode == 0, trained.stderr
    shutil.copytree(next(leak_sweep.glob("0_*")), logdir / "next")
    with tensorboard(logdir, tmp_path_factory.mktemp("tensorboard-blank") / "tensorboard.log") as url:
        with second_tab(page, url, BLANK_TEXT, BLANK_PAGE_ERRORS) as frame:
            yield frame, url


@contextmanager
def second_tab(page, url: str, text: str, errors: list[str]) -> Iterator[object]:
    """The tab of the tensorboard at `url` in a second page of `page`'s browser, `text` typed; what the page throws
    is kept in `errors`."""
    second = page.context.browser.new_page(viewport={"width": WIDTH, "height": 900})
    second.on("pageerror", lambda error: errors.append(f"{error.name}: {error.message}"))
    try:
        frame = open_tab(second, url)
        type_text(frame, text)
        yield frame
    finally:
        second.close()


def test_a_typed_blank_shows_its_top_five_and_the_right_side_counterfactual_as_the_route_answers(blank_tab):
    frame, url = blank_tab
    point_at_token(frame, "fill", "val/loss_one_blank", 4)
    panel = panel_of(frame, "fill")
    served_blank = served_attention(url, "fill", text=BLANK_TEXT)
    assert served_blank["blanks"] == [4] and served_blank["tokens"][4] == "□"
    label, p = served_blank["strips"][0]["predictions"][4]["top"][0]
    top = panel.locator('.setting[data-tag="val/loss_one_blank"] tr.choice').first
    assert (top.locator("td.guess").inner_text(), top.locator("td.p").inner_text()) == (label, probability(p))
    words = served_blank["words"]
    assert panel.locator("p.actual").inner_text() == f"{words['missing']}: no {words['target']} to score"
    look = served_blank["counterfactuals"][4]
    assert look["target"] == label  # a typed blank is asked about its likeliest token
    assert panel.locator('.cf[data-kind="masked"] .cf-name').inner_text().strip() == "right side hidden"
    for kind in ("trained", "masked", "uniform", "no_look"):
        assert panel.locator(f'.cf[data-kind="{kind}"] .cf-p').inner_text() == probability(look[kind])
    assert panel.locator("p.cf-words").inner_text() == look["words"]
    left, right = (served_blank["stats"][side][4] for side in ("past_mass", "future_mass"))
    assert f"{left:.3f} on the left" in panel.locator("p.stats").inner_text()
    assert f"{right:.3f} on the right" in panel.locator("p.stats").inner_text()
    assert panel.locator(".leak").count() == 0  # the right side is no leak
    assert words["lifted"] in panel.locator("p.meta").inner_text()  # the run reads both sides: model.causal=false
    assert panel.locator("p.strips-caption").inner_text() == words["strip_caption"]
    assert panel.locator("p.blanks-how").inner_text() == words["blank_how"]
    assert frame.locator(".blank-hint").inner_text() == words["blank_hint"]


def test_the_strip_blanks_each_token_alone_named_after_its_curve_and_says_once_it_is_no_likelihood(blank_tab):
    frame, url = blank_tab
    strip = served_attention(url, "fill", text=BLANK_TEXT)["strips"][0]
    panel = panel_of(frame, "fill")
    assert panel.locator(".strip-tag").all_inner_texts() == ["val/loss_one_blank"]
    assert panel.locator(".strip .mean").inner_text() == f"{strip['mean']:.3f}"
    assert panel.locator(".strip .token.none").count() == 1  # the typed blank: its token unknown
    [line] = panel.locator("p.strip-note").all_inner_texts()
    assert "pseudo-log-likelihood" in line and "Salazar et al. 2020" in line


def test_the_next_token_panel_beside_refuses_the_typed_blank_in_one_line_and_the_button_says_both(blank_tab):
    frame, url = blank_tab
    expected = served_attention(url, "next", text=BLANK_TEXT)["error"]
    assert panel_of(frame, "next").locator("p.error").all_inner_texts() == [expected]
    assert frame.locator("#generate").inner_text() == "Continue the text / fill the blanks"
    assert frame.locator(".blank-hint").is_visible()


def test_a_shift_click_hides_a_token_and_the_panel_reads_its_probability(blank_tab):
    frame, url = blank_tab
    panel = panel_of(frame, "fill")
    panel.locator(f'.strip .token[data-query="{HIDDEN}"]').click(modifiers=["Shift"])
    wait_for_panels(frame)
    hidden = served_attention(url, "fill", text=BLANK_TEXT, blanks=[HIDDEN])
    assert hidden["blanks"] == [4, HIDDEN]
    prediction = hidden["strips"][0]["predictions"][HIDDEN]
    assert prediction["next"] == "o"
    shown = f"hidden token 'o': p {probability(prediction['p_next'])} · loss {prediction['loss']:.3f} nats"
    assert panel.locator("p.actual").inner_text() == shown
    assert panel.locator("button.unhide").all_inner_texts() == [f"{HIDDEN} 'o' ×"]
    assert panel.locator("p.cf-words").inner_text() == hidden["counterfactuals"][HIDDEN]["words"]
    assert panel.locator("button.hide").inner_text() == "Show 'o' again"


def test_fill_the_blanks_fills_the_typed_and_the_hidden_ones(blank_tab):
    frame, url = blank_tab
    continue_text(frame, 12)
    step = int(panel_of(frame, "fill").get_attribute("data-step"))
    body = {"run": "fill", "text": BLANK_TEXT, "step": step, "blanks": [HIDDEN], "seed": 1337}
    filled = served(url, "generate", body)
    assert filled["filled"] and len(filled["tokens"]) == 2
    assert panel_of(frame, "fill").locator(".continuation .written").all_inner_texts() == filled["tokens"]
    frame.locator('.panel[data-run="next"] button.close').click()
    assert frame.locator("#generate").inner_text() == "Fill the blanks"
    assert not frame.locator(".continue .length").is_visible()  # a filling has no length to ask


def test_showing_the_hidden_token_again_and_moving_the_step_selector_redraw_the_fill_panel(blank_tab):
    frame, url = blank_tab
    panel = panel_of(frame, "fill")
    panel.locator("button.unhide").click()
    wait_for_panels(frame)
    assert panel.locator("button.unhide").count() == 0
    move_step(frame, "fill", 0)
    then = served_attention(url, "fill", text=BLANK_TEXT, step=int(panel.get_attribute("data-step")))
    assert panel.locator(".strip .mean").inner_text() == f"{then['strips'][0]['mean']:.3f}"


def test_the_blank_page_threw_nothing(blank_tab):
    assert BLANK_PAGE_ERRORS == []


PREFIX_TEXT = "So foul and fair a day I have not seen."  # cut to model.block_size=32: a prefix of 16, then 16
PREFIX_PAGE_ERRORS: list[str] = []
# Which cells of a heat map are hatched, read from the canvas's pixels: the hatching's orange is redder than it is
# blue, which no colour of the Blues map is; each cell is read inside a margin, off the outlines and the diagonal.
HATCHED = """(canvas) => {
  const ratio = canvas.width / parseFloat(canvas.style.width);
  const [left, top, cell, size] = ["left", "top", "cell", "size"].map((key) => Number(canvas.dataset[key]));
  const context = canvas.getContext("2d");
  const margin = 4;
  return Array.from({ length: size }, (_, i) =>
    Array.from({ length: size }, (_, j) => {
      const [x, y, side] = [left + j * cell + margin, top + i * cell + margin, cell - 2 * margin].map((v) => v * ratio);
      const { data } = context.getImageData(x, y, side, side);
      for (let k = 0; k < data.length; k += 4) if (data[k] - data[k + 2] > 40) return true;
      return false;
    }),
  );
}"""


@pytest.fixture(scope="module")
def prefix_tab(tab, leak_sweep, tmp_path_factory):
    """The tab in a second page, on a prefix LM of random weights (task=prefix_lm, task.prefix_share=0.5) made from
    the masked job's checkpoint."""
    page, _, _ = tab
    logdir = tmp_path_factory.mktemp("prefix-runs")
    random_run(logdir, "prefix", prefix_lm(load_checkpoint(next(leak_sweep.glob("0_*")) / "last.pt")), 0)
    with tensorboard(logdir, tmp_path_factory.mktemp("tensorboard-prefix") / "tensorboard.log") as url:
        with second_tab(page, url, PREFIX_TEXT, PREFIX_PAGE_ERRORS) as frame:
            yield frame, url


def test_a_prefix_lms_heat_map_hatches_its_own_hidden_keys_and_the_panel_says_where_the_prefix_ends(prefix_tab):
    frame, url = prefix_tab
    served_prefix = served_attention(url, "prefix", text=PREFIX_TEXT)
    size, prefix = len(served_prefix["tokens"]), 16
    point_at(frame, "prefix", 3, 0)
    panel = panel_of(frame, "prefix")
    hatched = panel.locator("canvas.heatmap").evaluate(HATCHED)
    expected = [[j > i and j >= prefix for j in range(size)] for i in range(size)]  # the prefix both ways, then j > i
    assert [[cell for j, cell in enumerate(row) if j != i] for i, row in enumerate(hatched)] == [
        [cell for j, cell in enumerate(row) if j != i] for i, row in enumerate(expected)
    ]
    assert served_prefix["mask_note"] in panel.locator("p.note").all_inner_texts()
    steps = steps_table(frame, "prefix", 3)
    assert steps.locator("tr[data-key]").count() == prefix  # query 3 reads the whole prefix
    hidden = steps.locator("tr.hidden-keys")
    assert hidden.inner_text() == f"j = 16 to {size - 1}: hidden by the mask, weight exactly 0"
    words = served_prefix["words"]  # the task's: the panel says what the server says of a query with nothing to score
    assert panel.locator("p.actual").inner_text() == f"{words['missing']}: no {words['target']} to score"
    assert panel.locator("p.cf-caption").inner_text().lower() == f"{words['no_counterfactual']}.".lower()
    point_at(frame, "prefix", 20, 0)
    assert panel.locator("table.steps tr[data-key]").count() == 21
    assert hidden.inner_text() == f"j = 21 to {size - 1}: hidden by the mask (j > i), weight exactly 0"
    assert panel.locator(".leak").count() == 0  # the mask is applied: no key it hides is read


def test_the_prefix_lms_panel_says_what_the_server_sends_of_its_task(prefix_tab):
    frame, url = prefix_tab
    words = served_attention(url, "prefix", text=PREFIX_TEXT)["words"]
    panel = panel_of(frame, "prefix")
    assert words["applied"] in panel.locator("p.meta").inner_text()
    assert panel.locator("p.strips-caption").inner_text() == words["strip_caption"]
    point_at(frame, "prefix", 20, 0)
    assert panel.locator("p.prediction-caption").inner_text().startswith("After i=20 ")  # words["top_caption"]
    assert panel.locator("p.blanks-how").count() == 0 and not frame.locator(".blank-hint").is_visible()


def test_the_prefix_page_threw_nothing(prefix_tab):
    assert PREFIX_PAGE_ERRORS == []


def served(url: str, route: str, body: dict | None = None) -> dict:
    """The tab's route answering as the page asks it (POST JSON), a 400's one line included."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + f"data/plugin/tinylm_attention/{route}", data)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        assert error.code == 400
        return json.load(error)


def served_attention(url: str, run: str, text: str = TEXT, **settings) -> dict:
    return served(url, "attention", {"run": run, "text": text, "layer": 0, **settings})


def served_weights(url: str, run: str) -> list[list[float]]:
    return served_attention(url, run)["weights"]
