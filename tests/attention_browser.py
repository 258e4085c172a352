"""TensorBoard's Attention tab in a real browser: a `tensorboard --logdir` server, Debian's chromium driven by
Playwright (the system browser: nothing is downloaded), and the steps a person takes. The page tests use it, and
run as a script it takes the README's screenshots:

python tests/attention_browser.py multirun/leak --text "To be, or not to be, that is the question:" \
    --query 17 --height 1250 --out docs/attention-tab-leak.png
python tests/attention_browser.py multirun/leak --text "To be, or not to be, that is the question:" \
    --query 32 --fold attention,steps --continue 80 --height 1150 --out docs/attention-tab-prediction.png
python tests/attention_browser.py multirun/saturation/DATE --text "To be, or not to be, that is the question:" \
    --query 22 --height 1250 --out docs/attention-tab-saturation.png   # the d_k 1024 pair of docs/tensorboard.md
"""

import argparse
import importlib.metadata
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
WIDTH = 1400  # the tab's name shows whole in TensorBoard's top bar from about this width
TAB = "tinylm_attention"
ROOT = Path(__file__).resolve().parents[1]


def plugin_environment(scratch: Path) -> dict[str, str]:
    """The environment TensorBoard finds the plugin in. Installed (pip install -e .), the plugin's entry point is
    there already; in an environment without tinylm installed the same entry point is registered here, through a
    distribution's metadata on PYTHONPATH: TensorBoard still loads it by its own mechanism."""
    env = dict(os.environ)
    if not importlib.metadata.entry_points(group="tensorboard_plugins", name=TAB):
        info = scratch / "tinylm_plugin_shim-0.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinylm-plugin-shim\nVersion: 0\n")
        (info / "entry_points.txt").write_text(
            f"[tensorboard_plugins]\n{TAB} = tensorboard_plugin_tinylm.plugin:AttentionPlugin\n"
        )
        env["PYTHONPATH"] = os.pathsep.join([str(scratch), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def skip_without_chromium() -> None:
    """Skips the calling test module where Debian's chromium is missing, except in CI, which installs it (.ci/run):
    there the page tests always run."""
    import pytest

    if not Path(CHROMIUM).exists() and not os.environ.get("CI"):
        pytest.skip(f"needs Debian's chromium at {CHROMIUM}: apt-get install chromium", allow_module_level=True)


@contextmanager
def tensorboard(logdir: Path, log_path: Path, *extra: str) -> Iterator[str]:
    """`tensorboard --logdir LOGDIR --port 0`, as a person starts it (from another directory); yields its address."""
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", "0", *extra],
            stdout=log, stderr=log, cwd=log_path.parent, env=plugin_environment(log_path.parent / "plugin"),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (address := re.search(r"http://localhost:\d+/", log_path.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        yield address.group(0)
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextmanager
def browser_page(height: int = 900, width: int = WIDTH) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def open_tab(page, url: str):
    """Open the Attention tab; returns the frame its module draws in, once it has listed the runs."""
    page.goto(f"{url}#{TAB}")
    frame = page.wait_for_selector(f'iframe[src*="{TAB}"]').content_frame()
    frame.locator(".run").first.wait_for()
    return frame


def type_text(frame, text: str) -> None:
    """Type `text` into the box as a person does, key by key, and wait for every panel to show it."""
    box = frame.locator("#text")
    box.fill("")
    box.press_sequentially(text, delay=5)
    wait_for_panels(frame)


# Every panel open shows the text in the box: each has answered the latest request (a panel is marked loading from
# the keystroke, or the step selector's move, until the answer to the latest request is drawn).
SHOWN = """() => {
  const panels = [...document.querySelectorAll(".panel")];
  const text = document.getElementById("text").value;
  return panels.length > 0 && panels.every((p) => !p.classList.contains("loading") && p.dataset.text === text);
}"""
WRITTEN = """() => [...document.querySelectorAll(".panel")].every((p) => p.dataset.generated === "yes")"""


def wait_for_panels(frame) -> None:
    frame.wait_for_function(SHOWN, polling="raf")


def panel_of(frame, run: str):
    return frame.locator(f'.panel[data-run="{run}"]')


def set_temperature(frame, value: str) -> None:
    """Type `value` into the temperature box, as a person does, and wait for every panel to answer it."""
    frame.locator("#temperature").fill(value)
    wait_for_panels(frame)


def move_step(frame, run: str, index: int) -> None:
    """Move `run`'s step selector to its `index`-th kept checkpoint and wait for the panel to show that step."""
    panel_of(frame, run).locator("input.step").fill(str(index))
    wait_for_panels(frame)


def continue_text(frame, tokens: int) -> None:
    """Ask every panel's run to write `tokens` tokens after the text, and wait for each to show its answer."""
    frame.locator("#tokens").fill(str(tokens))
    frame.locator("#generate").click()
    frame.wait_for_function(WRITTEN, polling="raf")


def fold(frame, part: str) -> None:
    """Fold a part of every panel ("attention": the heat map and the row's words; "steps": the lesson's table)."""
    unfolded = frame.locator(f".panel details.{part}[open] > summary")
    while unfolded.count():
        unfolded.first.click()


def point_at_token(frame, run: str, tag: str, i: int) -> None:
    """Move the pointer over token i of `run`'s loss strip named by its curve's tag (val/loss, val/loss_causal)."""
    panel_of(frame, run).locator(f'.strip[data-tag="{tag}"] .token[data-query="{i}"]').hover()


def point_at(frame, run: str, i: int, j: int) -> None:
    """Move the pointer over the heat map cell (query i, key j) of `run`'s panel."""
    canvas = panel_of(frame, run).locator("canvas.heatmap")
    data = canvas.evaluate("c => ({...c.dataset})")
    left, top, cell = (float(data[key]) for key in ("left", "top", "cell"))
    canvas.hover(position={"x": left + (j + 0.5) * cell, "y": top + (i + 0.5) * cell})


def steps_table(frame, run: str, i: int | None = None):
    """`run`'s table of the lesson's steps, showing query i (the panel's pointed query if None): scrolled into the
    window, where the panel builds it. The pointer leaves the panel first, so that no token it lands on after the
    scroll points at another query."""
    frame.page.mouse.move(0, 0)
    table = panel_of(frame, run).locator("table.steps")
    table.scroll_into_view_if_needed()
    query = "" if i is None else f'="{i}"'
    frame.wait_for_selector(f'.panel[data-run="{run}"] table.steps[data-query{query}]')
    return table


def click_query(frame, run: str, i: int) -> None:
    point_at(frame, run, i, 0)
    canvas = panel_of(frame, run).locator("canvas.heatmap")
    data = canvas.evaluate("c => ({...c.dataset})")
    canvas.click(position={"x": float(data["left"]) + 0.5 * float(data["cell"]),
                           "y": float(data["top"]) + (i + 0.5) * float(data["cell"])})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description="A screenshot of TensorBoard's Attention tab on some runs.")
    parser.add_argument("logdir", type=Path)
    parser.add_argument("--text", required=True)
    parser.add_argument("--query", type=int, help="the query row each panel keeps (default: the last token)")
    parser.add_argument("--temperature", help="the temperature typed into its box (default: the tab's, 1)")
    parser.add_argument("--continue", type=int, dest="tokens", help="each run writes this many tokens after the text")
    parser.add_argument(
        "--fold", default="", help="parts of every panel folded away: attention, steps (comma-separated)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--height", type=int, default=1100)
    args = parser.parse_args()
    log_path = Path("/tmp") / f"tensorboard-screenshot-{time.time_ns()}.log"
    with tensorboard(args.logdir.resolve(), log_path) as url, browser_page(args.height) as page:
        frame = open_tab(page, url)
        type_text(frame, args.text)
        if args.temperature is not None:
            set_temperature(frame, args.temperature)
        if args.query is not None:
            for run in frame.locator(".panel").evaluate_all("panels => panels.map(p => p.dataset.run)"):
                click_query(frame, run, args.query)
        if args.tokens is not None:
            continue_text(frame, args.tokens)
        for part in filter(None, args.fold.split(",")):
            fold(frame, part)
        for run in frame.locator(".panel:has(details.steps[open])").evaluate_all("ps => ps.map(p => p.dataset.run)"):
            steps_table(frame, run)  # built where the window shows it, for the whole page's screenshot
        frame.evaluate("window.scrollTo(0, 0)")  # clicks and the steps tables may have scrolled the tab's frame
        page.mouse.move(0, 0)
        page.screenshot(path=str(args.out), full_page=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
