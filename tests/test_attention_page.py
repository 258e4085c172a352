"""The Attention tab in a real browser (Debian's chromium through Playwright), on a tiny leak sweep: one browser
session for every check, in the order a person goes."""

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from attention_browser import CHROMIUM, browser_page, open_tab, point_at, tensorboard, type_text, wait_for_panels

from conftest import ROOT

pytestmark = pytest.mark.slow
if not Path(CHROMIUM).exists() and not os.environ.get("CI"):  # CI installs it (.ci/run): there it never skips
    pytest.skip(f"needs Debian's chromium at {CHROMIUM}: apt-get install chromium", allow_module_level=True)
TINY = ["trainer.max_steps=40", "trainer.eval_interval=20", "trainer.eval_iters=2", "trainer.log_interval=10",
        "trainer.batch_size=8", "trainer.sample_tokens=20", "model.block_size=32", "model.d_model=32",
        "model.d_k=16", "model.d_v=16", "optim.warmup_steps=2"]  # fmt: skip
TEXT = "To be, or not"


@pytest.fixture(scope="module")
def leak_sweep(tmp_path_factory, cache_dir) -> Path:
    sweep_dir = tmp_path_factory.mktemp("leak")
    result = subprocess.run(
        [sys.executable, "train.py", "+experiment=leak", *TINY, f"data.cache_dir={cache_dir}",
         f"hydra.sweep.dir={sweep_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return sweep_dir


@pytest.fixture(scope="module")
def tab(leak_sweep, tmp_path_factory):
    """The tab open in one browser page for all the checks below, with the server's own address."""
    with tensorboard(leak_sweep, tmp_path_factory.mktemp("tensorboard") / "tensorboard.log") as url:
        with browser_page() as page:
            yield page, open_tab(page, url), url


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
        assert row.locator(".meta").inner_text() == "best.pt, step 40"
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
    row = panel.locator('table.steps tr[data-key="5"]')
    assert row.locator("td.weight").inner_text() == f"{expected:.3f}"
    assert row.locator(".future").inner_text() == "future"
    assert panel.locator("table.steps tr").count() == 1 + len(TEXT)  # every key, the future ones included
    assert panel.locator(".over-text .token.future").count() == len(TEXT) - 4
    assert panel.locator(".over-text .token.query").inner_text() == "b"


def test_the_masked_run_lists_only_the_keys_up_to_the_query(tab, leak_sweep):
    _, frame, _ = tab
    run = names(leak_sweep)["masked"]
    point_at(frame, run, 3, 1)
    panel = frame.locator(f'.panel[data-run="{run}"]')
    assert panel.locator("table.steps tr[data-key]").count() == 4
    assert panel.locator("table.steps tr.masked").inner_text() == "j = 4 to 12: masked (j > i), weight exactly 0"
    assert panel.locator(".future").count() == 0


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


def served_weights(url: str, run: str) -> list[list[float]]:
    body = json.dumps({"run": run, "text": TEXT, "layer": 0}).encode()
    request = urllib.request.Request(url + "data/plugin/tinylm_attention/attention", body)
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["weights"]
