"""The Attention panel inline, in JupyterLab in a real browser: a `jupyter lab` server on a notebook whose one cell
shows the panel (tensorboard_plugin_tinylm/widget.py) on some runs, Debian's chromium driven by Playwright, and the
steps a person takes (attention_browser.py's). The notebook panel test uses it, and run as a script it takes the
docs' screenshot:

python tests/notebook_browser.py multirun/leak/DATE --text "To be, or not to be, that is the question:" \
    --query 17 --out docs/notebook-panel.png
python tests/notebook_browser.py multirun/leak/DATE --time --out /tmp/panel.png \
    --text "To be, or not to be, that is the question: Whether 'tis nobler i"   # and first, typing's redraws
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attention_browser import browser_page, click_query, type_text, wait_for_panels

NOTEBOOK = "panel.ipynb"
PANEL = ".tinylm-attention"  # the widget's element (widget.py's WIDGET_CLASS)
START_SECONDS = 120  # JupyterLab's server, then its page and the kernel, on a busy machine


def panel_notebook(logdir: Path) -> dict:
    """A notebook whose one cell shows the Attention panel on the runs under `logdir`, as a person writes it."""
    source = (
        "from tensorboard_plugin_tinylm.widget import AttentionPanel\n\n"
        f"AttentionPanel({str(logdir)!r})"
    )  # fmt: skip
    cell = {"cell_type": "code", "execution_count": None, "id": "panel", "metadata": {}, "outputs": [],
            "source": source}  # fmt: skip
    kernel = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    return {"cells": [cell], "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def jupyter_lab(root: Path, log_path: Path) -> Iterator[str]:
    """`jupyter lab` serving `root` on this machine, without a token, its settings and workspaces kept in a scratch
    directory beside the log; yields its address once it answers. The app is exposed to the page (window.jupyterapp)
    so that a test runs the notebook's cells through JupyterLab's own command."""
    scratch = log_path.parent / "jupyter"
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(scratch / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(scratch / "runtime"))  # fmt: skip
    port = free_port()
    arguments = [f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
                 f"--ServerApp.root_dir={root}", "--IdentityProvider.token=", "--ServerApp.password=", "--no-browser",
                 "--allow-root", "--LabApp.expose_app_in_browser=True",
                 "--LabApp.extension_manager=readonly"]  # fmt: skip
    news = scratch / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True, exist_ok=True)
    news.write_text('{"fetchNews": "false"}')  # JupyterLab would ask, in a toast over the page
    with log_path.open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "jupyterlab", *arguments], stdout=log, stderr=log, env=env)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + START_SECONDS
        while not answers(url + "api/status"):
            assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def open_panel(page, url: str, notebook: str = NOTEBOOK):
    """Open `notebook` in JupyterLab, run its cells, and wait for the panel to list its runs and draw their panels."""
    page.goto(f"{url}lab/tree/{notebook}")
    page.wait_for_function("() => window.jupyterapp?.shell?.currentWidget?.context?.sessionContext?.session?.kernel",
                           timeout=START_SECONDS * 1000)  # fmt: skip
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.ready; }")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.locator(f"{PANEL} .run").first.wait_for(timeout=START_SECONDS * 1000)
    wait_for_panels(page)
    return page


def write_notebook(directory: Path, logdir: Path) -> None:
    (directory / NOTEBOOK).write_text(json.dumps(panel_notebook(logdir.resolve()), indent=1))


def time_redraws(page, text: str) -> None:
    """The text's last character typed, five times a different one, until every panel has drawn it."""
    took = []
    for last in "abcde":
        started = time.perf_counter()
        page.locator(f"{PANEL} #text").fill(text[:-1] + last)
        wait_for_panels(page)
        took.append(time.perf_counter() - started)
    panels = page.locator(f"{PANEL} .panel").count()
    print(f"{panels} panel(s), {len(text)} characters: {statistics.median(took):.3f} s median of 5 "
          f"({', '.join(f'{t:.3f}' for t in took)}), typing pause of 0.12 s included")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description="A screenshot of the Attention panel inline in JupyterLab.")
    parser.add_argument("logdir", type=Path)
    parser.add_argument("--text", required=True)
    parser.add_argument("--query", type=int, help="the query row each panel keeps (default: the last token)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--height", type=int, default=2000)
    parser.add_argument("--width", type=int, default=2000, help="wide enough for two runs' panels side by side")
    parser.add_argument("--time", action="store_true", help="first, how long typing takes to redraw the panels")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tinylm-lab-") as scratch:
        write_notebook(Path(scratch), args.logdir)
        with (
            jupyter_lab(Path(scratch), Path(scratch) / "lab.log") as url,
            browser_page(args.height, args.width) as page,
        ):
            open_panel(page, url)
            if args.time:
                time_redraws(page, args.text)
            type_text(page, args.text)
            if args.query is not None:
                for run in page.locator(f"{PANEL} .panel").evaluate_all("panels => panels.map(p => p.dataset.run)"):
                    click_query(page, run, args.query)
            page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
            page.locator(PANEL).evaluate("panel => panel.scrollIntoView()")
            page.mouse.move(0, 0)
            page.screenshot(path=str(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
