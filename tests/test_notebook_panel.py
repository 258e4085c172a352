"""The Attention panel inline in a notebook (tensorboard_plugin_tinylm/widget.py), in JupyterLab in Debian's chromium
through Playwright, on the session's tiny leak sweep: typed into, pointed at, its prediction what attend.py prints."""

import ast
import os
import re

import pytest
from attention_browser import browser_page, panel_of, point_at, skip_without_chromium, type_text

from conftest import cli

pytestmark = pytest.mark.slow
if not os.environ.get("CI"):  # CI installs the extra and chromium (.ci/run): there a missing one fails these tests
    for module in ("jupyterlab", "anywidget", "ipykernel"):
        pytest.importorskip(module, reason='needs the notebook extra: pip install -e ".[notebook]"')
skip_without_chromium()

from notebook_browser import PANEL, jupyter_lab, open_panel, write_notebook  # noqa: E402

TEXT = "To be, or not"
QUERY = 3


def test_the_panel_in_jupyterlab_redraws_as_typed_and_predicts_what_attend_py_prints(leak_sweep, tmp_path):
    unmasked = next(leak_sweep.glob("1_*"))
    write_notebook(tmp_path, leak_sweep)
    errors = []
    with jupyter_lab(tmp_path, tmp_path / "lab.log") as url, browser_page() as page:
        page.on("pageerror", lambda error: errors.append(f"{error.name}: {error.message}"))
        page.on("console", lambda line: errors.append(line.text) if "Deprecation" in line.text else None)
        open_panel(page, url)
        assert page.locator(f"{PANEL} .panel .label").all_inner_texts() == ["model.causal=True", "model.causal=False"]
        type_text(page, TEXT)  # key by key, until every panel shows the text
        point_at(page, unmasked.name, QUERY, QUERY)
        top = panel_of(page, unmasked.name).locator('.prediction .setting[data-tag="val/loss"] tr.choice').first
        shown = (top.locator("td.guess").inner_text(), top.locator("td.p").inner_text())
    assert errors == []
    printed = cli("attend.py", f'ckpt="{unmasked}"', f'text="{TEXT}"', f"query={QUERY}", f"out={tmp_path / 'q.png'}")
    label, p = re.search(r"^  as trained: +('[^']*'|\"[^\"]*\") (\S+)", printed.stdout, re.MULTILINE).groups()
    assert shown == (ast.literal_eval(label), p)
