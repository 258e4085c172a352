"""export.py: a tiny leak sweep, a tiny fill-in-the-blank run and a two-layer run each exported as one HTML page and
opened from disk in Debian's chromium with the network off (the whole page: its curves, and its Attention panel
answering a typed text as the tab's routes do; viewer/page.py's and page.js's own tests check the numbers
exhaustively), the leak page once in firefox-esr too; the runs the page cannot hold left out in one line each; every
bad input refused in one line, with nothing written."""

import json
import os
import re
import shutil
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest
from attention_browser import (
    continue_text,
    move_step,
    panel_of,
    point_at,
    point_at_token,
    skip_without_chromium,
    type_text,
    wait_for_panels,
)
from page_browser import FIREFOX, chromium, firefox_screenshot, opened_page, print_timing

from conftest import SWEEP, cli

pytestmark = pytest.mark.slow
skip_without_chromium()

TEXT = "To be, or not"
BLANK_TEXT = "To b_, or not"  # a blank typed at token 4
TIMING_TEXT = "To be, or not to be, that is the"  # the tiny runs' whole context (32 tokens): a key typed is read
MASKED, UNMASKED = "#ff7043", "#0077bb"  # TensorBoard's first two run colours (summary/styles.py)
DARKEST_BLUE = (0x08, 0x30, 0x6B)  # index.js's BLUES at weight 1: the masked run's query 0 reads key 0 alone
# What the firefox screenshot must show: both runs' curves and the masked run's heat map.
COLOURS = [tuple(int(colour[at : at + 2], 16) for at in (1, 3, 5)) for colour in (MASKED, UNMASKED)] + [DARKEST_BLUE]
PAGE_DATA = re.compile(r'<script type="application/json" id="tinylm-answers">(.*?)</script>', re.S)
CURVES = re.compile(r'<script type="application/json" id="tinylm-curves">(.*?)</script>', re.S)


def export(*settings: str):
    return cli("export.py", *settings)


def page_data(path: Path) -> dict:
    return json.loads(PAGE_DATA.search(path.read_text(encoding="utf-8"))[1])


def served_attention(root: Path, run: str, text: str, **settings) -> dict:
    """What the tab's ./attention route answers for the run under `root` (answers.py, in this process)."""
    from tensorboard_plugin_tinylm import answers

    return answers.attention(root, {"run": run, "text": text, "layer": 0, **settings})


def one_line_error(result) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def train(run_dir: Path, cache: Path, *overrides: str) -> Path:
    """A run of the leak sweep's tiny size (conftest's SWEEP) with `overrides`, as `python train.py` trains it."""
    trained = cli("train.py", *SWEEP, *overrides, f"data.cache_dir={cache}", f"hydra.run.dir={run_dir}")
    assert trained.returncode == 0, trained.stderr
    return run_dir


@pytest.fixture(scope="module")
def pages(leak_sweep, shared_cache_dir, tmp_path_factory) -> Path:
    """The pages and the runs they come from: the leak sweep (last step, and every step), a fill-in-the-blank run, a
    two-layer run, and a sweep that holds a GRU run beside a copy of the masked job."""
    root = tmp_path_factory.mktemp("export")
    runs = root / "runs"
    train(runs / "fill", shared_cache_dir, "task=fill_blank", "model.causal=false")
    train(runs / "two", shared_cache_dir, "model.n_layer=2")
    train(root / "mixed" / "gru", shared_cache_dir, "model.mixer=gru")
    shutil.copytree(next(leak_sweep.glob("0_*")), root / "mixed" / "next")
    for name, settings in {
        "leak": [f"ckpt={leak_sweep}"],
        "leak-all": [f"ckpt={leak_sweep}", "steps=all"],
        "fill": [f"ckpt={runs / 'fill'}"],
        "two": [f"ckpt={runs / 'two'}"],
        "mixed": [f"ckpt={root / 'mixed'}"],
    }.items():
        exported = export(*settings, f"out={root / name}.html")
        assert exported.returncode == 0, exported.stderr
        (root / f"{name}.stdout").write_text(exported.stdout)
    return root


def test_the_leak_sweep_is_one_file_with_a_strict_policy_and_only_its_own_script(pages):
    page = pages / "leak.html"
    assert sorted(path.name for path in pages.iterdir() if path.name.startswith(".")) == []  # no temporary file left
    text = page.read_text(encoding="utf-8")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text)[1].replace("&#x27;", "'")
    assert policy.startswith("default-src 'none'; script-src 'sha256-") and "connect-src 'none'" in policy
    assert re.findall(r"<script(?: [^>]*)?>", text) == [
        '<script type="application/json" id="tinylm-code">',
        '<script type="application/json" id="tinylm-curves">',
        '<script type="application/json" id="tinylm-answers">',
        '<script type="module">',
    ]
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", text)  # nothing the page loads from beside it
    assert "wrote " in (pages / "leak.stdout").read_text() and "model.causal=False at step 10" in text


@pytest.fixture(scope="module")
def browser():
    with chromium() as running:
        yield running


@pytest.fixture(scope="module")
def leak_page(browser, pages):
    with opened_page(browser, pages / "leak.html") as opened:
        if os.environ.get("TINYLM_PAGE_TIMING") == "1":
            print_timing(opened.page, TIMING_TEXT)
        yield opened


def test_the_leak_page_opens_from_disk_asking_nothing_of_the_network_and_logging_no_error(leak_page):
    assert leak_page.requests == []
    assert leak_page.errors == []


def test_the_leak_page_works_the_same_from_a_static_host(browser, pages):
    handler = partial(SimpleHTTPRequestHandler, directory=str(pages))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        Thread(target=server.serve_forever, daemon=True).start()
        try:
            address = f"http://127.0.0.1:{server.server_port}/leak.html"
            with opened_page(browser, pages / "leak.html", address=address) as opened:
                assert opened.page.locator(".panel").count() == 2
                assert opened.requests == [] and opened.errors == []
        finally:
            server.shutdown()


def test_the_leak_pages_first_charts_are_the_presets_own_in_tensorboards_run_colours(leak_page):
    from trainer.tags import layout

    page = leak_page.page
    own = next(iter(layout(["+experiment=leak"]).values()))
    assert page.locator("#curves details[open] summary").all_inner_texts() == ["leak"]
    assert page.locator("#curves details[open] .chart figcaption").all_inner_texts() == list(own)
    for chart in page.locator("#curves details[open] .chart").all():
        assert chart.is_visible()
        assert chart.locator(".u-legend").inner_text().count("model.causal=") >= 2
        for colour in (MASKED, UNMASKED):
            assert chart.locator("canvas").evaluate(DRAWN_IN, colour) > 20, (chart.get_attribute("data-title"), colour)


def test_the_leak_pages_folded_sections_open_on_charts_drawn_for_both_runs(leak_page):
    page = leak_page.page
    folded = page.locator("#curves details:not([open]) > summary")
    titles = folded.all_inner_texts()
    assert titles == ["the lesson", "what the attention does"]  # the layout's other sections
    for title in titles:
        page.locator("#curves summary", has_text=title).click()
    charts = page.locator("#curves .chart").all()
    assert len(charts) > 3
    for chart in charts:
        assert chart.is_visible()
        assert all(chart.locator("canvas").evaluate(DRAWN_IN, colour) > 0 for colour in (MASKED, UNMASKED))
    for title in titles:
        page.locator("#curves summary", has_text=title).click()  # folded again for the tests that follow


# How many of a canvas's pixels are near `colour` (anti-aliased lines are never all of one value).
DRAWN_IN = """(canvas, colour) => {
  const want = [1, 3, 5].map((at) => parseInt(colour.slice(at, at + 2), 16));
  const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  let near = 0;
  for (let at = 0; at < data.length; at += 4) {
    if (data[at + 3] > 200 && want.every((value, k) => Math.abs(data[at + k] - value) < 40)) near++;
  }
  return near;
}"""


def test_the_leak_pages_panel_answers_a_typed_text_as_the_tabs_route_does(leak_page, leak_sweep):
    page = leak_page.page
    assert page.locator(".panel .label").all_inner_texts() == ["model.causal=True", "model.causal=False"]
    type_text(page, TEXT)
    unmasked = next(leak_sweep.glob("1_*")).name
    point_at(page, unmasked, 3, 5)
    expected = served_attention(leak_sweep, unmasked, TEXT)["weights"][3][5]
    cell = panel_of(page, unmasked).locator("p.cell").inner_text()
    assert cell == f"a[3,5] = {expected:.3f}: query 'b' reading key ',' (j > i: the future)"
    assert leak_page.errors == []


def test_the_leak_pages_runs_continue_the_text_in_the_page(leak_page):
    page = leak_page.page
    continue_text(page, 20)
    for panel in page.locator(".panel").all():
        written = panel.locator(".generation")
        assert written.is_visible() and written.locator(".error").count() == 0
        assert written.locator(".gen-caption").inner_text().startswith("Continued by 20 tokens at step 10 ")
        assert written.locator(".prompt").inner_text() == TEXT
    assert leak_page.errors == []


def test_steps_all_holds_every_kept_step_and_the_step_selector_moves_over_them(browser, pages, leak_sweep):
    from viewer.runs import list_runs

    kept = {run.name: [step.step for step in run.steps] for run in list_runs(leak_sweep)}
    last, every = page_data(pages / "leak.html"), page_data(pages / "leak-all.html")
    assert {run["name"]: [s["step"] for s in run["steps"]] for run in last["runs"]["runs"]} == {
        name: steps[-1:] for name, steps in kept.items()
    }
    assert {run["name"]: [s["step"] for s in run["steps"]] for run in every["runs"]["runs"]} == kept
    assert (pages / "leak-all.html").stat().st_size > (pages / "leak.html").stat().st_size
    masked = next(leak_sweep.glob("0_*")).name
    with opened_page(browser, pages / "leak-all.html") as opened:
        type_text(opened.page, TEXT)
        move_step(opened.page, masked, 0)
        step = kept[masked][0]
        assert f"step {step}" in panel_of(opened.page, masked).inner_text()
        assert opened.requests == [] and opened.errors == []


def test_the_fill_in_the_blank_page_reads_a_typed_blank_as_the_tabs_route_does(browser, pages):
    with opened_page(browser, pages / "fill.html") as opened:
        page = opened.page
        type_text(page, BLANK_TEXT)
        point_at_token(page, "fill", "val/loss_one_blank", 4)
        served = served_attention(pages / "runs", "fill", BLANK_TEXT)
        assert served["blanks"] == [4]
        label, _ = served["strips"][0]["predictions"][4]["top"][0]
        top = panel_of(page, "fill").locator('.setting[data-tag="val/loss_one_blank"] tr.choice').first
        assert top.locator("td.guess").inner_text() == label
        assert panel_of(page, "fill").locator(".strip-tag").all_inner_texts() == ["val/loss_one_blank"]
        assert opened.requests == [] and opened.errors == []


def test_the_two_layer_page_shows_the_second_layers_weights_as_the_tabs_route_does(browser, pages):
    with opened_page(browser, pages / "two.html") as opened:
        page = opened.page
        type_text(page, TEXT)
        panel_of(page, "two").locator("select.layer").select_option("1")
        wait_for_panels(page)
        point_at(page, "two", 3, 1)
        expected = served_attention(pages / "runs", "two", TEXT, layer=1)["weights"][3][1]
        assert panel_of(page, "two").locator("p.cell").inner_text().startswith(f"a[3,1] = {expected:.3f}: ")
        assert opened.requests == [] and opened.errors == []


def test_a_gru_run_is_left_out_in_one_line_and_the_others_exported(pages):
    stdout = (pages / "mixed.stdout").read_text()
    [line] = [line for line in stdout.splitlines() if line.startswith("left out")]
    assert line.startswith("left out gru: ") and "GRU" in line
    assert [run["name"] for run in page_data(pages / "mixed.html")["runs"]["runs"]] == ["next"]


def test_a_sweep_of_runs_the_page_cannot_hold_writes_nothing(pages, tmp_path):
    shutil.copytree(pages / "mixed" / "gru", tmp_path / "sweep" / "gru")
    line = one_line_error(export(f"ckpt={tmp_path / 'sweep'}", f"out={tmp_path / 'gru.html'}"))
    assert "no run the page can hold" in line and "gru: " in line and "GRU" in line
    assert not (tmp_path / "gru.html").exists()


def test_a_damaged_checkpoint_is_one_line_and_nothing_is_written(pages, tmp_path):
    run = shutil.copytree(pages / "runs" / "two", tmp_path / "damaged" / "two")
    for checkpoint in run.rglob("*.pt"):
        checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    line = one_line_error(export(f"ckpt={tmp_path / 'damaged'}", f"out={tmp_path / 'page.html'}"))
    assert "two" in line and "no run the page can hold" in line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["damaged"]


def test_an_existing_page_is_refused_unless_force_and_then_replaced_whole(pages, tmp_path):
    out = shutil.copy(pages / "fill.html", tmp_path / "page.html")  # the page of another run
    kept = out.read_bytes()
    line = one_line_error(export(f"ckpt={pages / 'runs' / 'two'}", f"out={out}"))
    assert line == f"error: out={out}: exists; a page is never overwritten silently: add force=true to replace it"
    assert out.read_bytes() == kept
    assert export(f"ckpt={pages / 'runs' / 'two'}", f"out={out}", "force=true").returncode == 0
    assert [run["name"] for run in page_data(out)["runs"]["runs"]] == ["two"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["page.html"]


# What out may be that force=true still never replaces, each made where the page would go, and the line that says so.
NOT_PAGE = (
    "exists and is not a page export.py wrote; force=true replaces a page, never another file: give the page a name of "
    "its own"
)
LINK = "a symbolic link (to {target}); give the file itself"
PIPE = "a pipe, not a regular file; give the HTML file to write"
NOT_A_PAGE = [
    pytest.param(lambda out, pages: shutil.copy(pages / "runs" / "two" / "last.pt", out), NOT_PAGE, id="a checkpoint"),
    pytest.param(lambda out, pages: out.write_text("the teacher's notes"), NOT_PAGE, id="notes"),
    pytest.param(lambda out, pages: out.symlink_to(pages / "fill.html"), LINK, id="a link to a page"),
    pytest.param(lambda out, pages: out.symlink_to(out.with_name("nowhere.html")), LINK, id="a link to nothing"),
    pytest.param(lambda out, pages: os.mkfifo(out), PIPE, id="a pipe"),
]  # fmt: skip


def as_found(path: Path) -> tuple:
    """What `path` is and holds, itself and not what a link leads to."""
    status = os.lstat(path)
    held = os.readlink(path) if path.is_symlink() else None if path.is_fifo() else path.read_bytes()
    return status.st_ino, status.st_mode, status.st_size, status.st_mtime_ns, held


@pytest.mark.parametrize("make, said", NOT_A_PAGE)
def test_force_replaces_a_page_and_never_a_file_link_or_pipe_that_is_not_one(pages, tmp_path, make, said):
    out = tmp_path / "page.html"
    make(out, pages)
    found = as_found(out)
    line = one_line_error(export(f"ckpt={pages / 'runs' / 'two'}", f"out={out}", "force=true"))
    assert line == f"error: out={out}: " + said.format(target=os.readlink(out) if out.is_symlink() else None)
    assert as_found(out) == found
    assert [path.name for path in tmp_path.iterdir()] == ["page.html"]


def test_a_run_whose_hydra_record_is_not_yaml_keeps_its_panel_without_curves_and_a_warning_names_the_file(
    pages, tmp_path
):
    sweep = tmp_path / "sweep"
    shutil.copytree(pages / "runs" / "two", sweep / "two")
    shutil.copytree(pages / "runs" / "fill", sweep / "fill")
    record = sweep / "fill" / ".hydra" / "config.yaml"
    record.write_text(": : :\n")
    result = export(f"ckpt={sweep}", f"out={tmp_path / 'page.html'}")
    assert result.returncode == 0, result.stderr
    [warning] = result.stderr.splitlines()
    assert warning.startswith(f"{record}: not YAML (") and warning.endswith("): its curves are left out of the page")
    assert sorted(run["name"] for run in page_data(tmp_path / "page.html")["runs"]["runs"]) == ["fill", "two"]
    curves = json.loads(CURVES.search((tmp_path / "page.html").read_text(encoding="utf-8"))[1])
    drawn = {
        series["run"] for section in curves["sections"] for chart in section["charts"] for series in chart["series"]
    }
    assert drawn == {"two"}


# Each bad input (RUNS: the directory of the fill and two-layer runs, TMP: the test's own, empty) and its one line.
BAD_INPUTS = [
    ([], "ckpt: give a run directory or a sweep, e.g. ckpt=multirun/leak/DATE"),
    (["ckpt=RUNS"], "out: give the HTML file to write, e.g. out=leak.html"),
    (["ckpt=TMP/nowhere", "out=TMP/page.html"], "ckpt=TMP/nowhere: no such run directory or checkpoint file"),
    (["ckpt=TMP", "out=TMP/page.html"], "ckpt=TMP: no checkpoint (best.pt or last.pt) in it or below it"),
    (["ckpt=RUNS", "out=TMP/no/page.html"], "out=TMP/no/page.html: no folder TMP/no to write it in"),
    (["ckpt=RUNS", "out=TMP"], "out=TMP: a directory; give the HTML file to write, e.g. out=TMP/leak.html"),
    (
        ["ckpt=RUNS", "out=TMP/new/"],
        "out=TMP/new/: a directory; give the HTML file to write, e.g. out=TMP/new/leak.html",
    ),
    (["ckpt=RUNS", "out=/sys/page.html"], "out=/sys/page.html: its folder /sys cannot be written (Permission denied)"),
    (
        ["ckpt=RUNS", "out=TMP/page.html", "steps=first"],
        "steps=first: give last, all, or a list of the steps the runs kept, e.g. steps=[100,500]",
    ),
    (
        ["ckpt=RUNS/two", "out=TMP/page.html", "steps=[5,7]"],
        "steps=[5,7]: two kept no checkpoint at step 7 (kept: 0, 5, 10)",
    ),
    (
        ["ckpt=RUNS/two/steps/step-5.pt", "out=TMP/page.html"],
        "ckpt=RUNS/two/steps/step-5.pt: no run the page can hold; steps: RUNS/two/steps/step-5.pt: not a run's "
        "best.pt or last.pt, and a page holds runs by their directory: give the run's directory (steps=[N] for a step "
        "it kept)",
    ),
]


@pytest.mark.parametrize("settings, said", BAD_INPUTS)
def test_each_bad_input_is_one_line_and_nothing_is_written(pages, tmp_path, settings, said):
    def named(text: str) -> str:
        return text.replace("RUNS", str(pages / "runs")).replace("TMP", str(tmp_path))

    assert one_line_error(export(*map(named, settings))) == "error: " + named(said)
    assert list(tmp_path.iterdir()) == []


def test_help_says_what_the_command_does_and_its_settings():
    result = cli("export.py", "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("export.py: a run or a sweep as one HTML page that any browser opens")
    for setting in ("ckpt=null", "out=null", "steps=last", "force=false", "title=null"):
        assert f"\n  {setting} " in result.stdout


def test_no_text_from_the_runs_can_end_a_data_block():
    from viewer.page_file import data_block

    block = data_block("x", {"run": "</script><script>alert(1)</script>", "token": "<!--"})
    inside = block.removeprefix('<script type="application/json" id="x">').removesuffix("</script>")
    assert "<" not in inside
    assert json.loads(inside) == {"run": "</script><script>alert(1)</script>", "token": "<!--"}


def test_the_title_and_the_heading_line_are_text_not_html():
    from viewer.page_file import page_html

    page = page_html("<b>leak</b>", "from <i>here</i> & there", {}, {"sections": []})
    assert "<b>" not in page and "<i>" not in page
    assert "<title>&lt;b&gt;leak&lt;/b&gt;</title>" in page and "from &lt;i&gt;here&lt;/i&gt; &amp; there" in page


@pytest.mark.skipif(not Path(FIREFOX).exists() and not os.environ.get("CI"), reason="needs Debian's firefox-esr")
def test_the_leak_page_draws_its_curves_and_panels_in_firefox(pages, tmp_path):
    import numpy as np
    from PIL import Image

    for _ in range(3):  # firefox shoots at the load event; the panel is drawn a moment after, on a busy machine later
        shot = tmp_path / "firefox.png"
        result = firefox_screenshot(pages / "leak.html", shot, height=2600)
        assert result.returncode == 0, result.stderr
        pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
        near = {colour: int((abs(pixels - colour) < 30).all(axis=-1).sum()) for colour in COLOURS}
        if all(count > 50 for count in near.values()):
            break
    assert all(count > 50 for count in near.values()), near
