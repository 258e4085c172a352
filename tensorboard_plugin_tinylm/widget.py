"""The Attention tab as a notebook widget (anywidget, the `notebook` extra): the same panel, drawn by the tab's own
static/index.js and answered by the same answers.py, in the kernel instead of TensorBoard's server.

    from tensorboard_plugin_tinylm.widget import AttentionPanel
    AttentionPanel("multirun/leak")   # the runs under a directory, as tensorboard --logdir reads them

anywidget imports index.js into the page and calls its render({model, el}); the module then asks its routes (runs,
attention, generate) as widget messages {id, route, body}, answered here by one message {id, answer}: the JSON the
tab's routes answer, an {"error": one line} included. The stylesheet is the tab's, scoped to the widget's element so
that it styles nothing else on the notebook's page.
"""

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anywidget

from tensorboard_plugin_tinylm.plugin import STATIC, answered
from tensorboard_plugin_tinylm.sources import SourcesMissing, use_sources

WIDGET_CLASS = "tinylm-attention"  # index.js's WIDGET_CLASS: the element the panel is drawn in
ROUTES = ("runs", "attention", "generate")
# Each message answered in a thread of its own, as TensorBoard answers each request: the panels of several runs are
# computed side by side, not one after another in the kernel's one thread (viewer/'s checkpoints are shared safely).
ANSWERING = ThreadPoolExecutor(max_workers=os.cpu_count(), thread_name_prefix="tinylm-panel")


class AttentionPanel(anywidget.AnyWidget):
    """The Attention tab's panel on the runs under `logdir`: type a text, point at a query, move a run's step."""

    _esm = STATIC / "index.js"
    # CSS nesting: every rule of the tab's stylesheet applies inside the widget's element only.
    _css = f".{WIDGET_CLASS} {{\n{(STATIC / 'style.css').read_text()}\n}}"

    def __init__(self, logdir: str | Path, **kwargs) -> None:
        super().__init__(**kwargs)
        self.logdir = Path(logdir).expanduser()
        try:
            use_sources()
            self.sources_missing = ""
        except SourcesMissing as error:  # every answer says so, in one line
            self.sources_missing = str(error)
        self.on_msg(lambda widget, message, buffers: ANSWERING.submit(self.answer, message))

    def answer(self, message: object) -> None:
        """One message from the panel, {id, route, body}: the route's answer, as TensorBoard's plugin gives it. Every
        message is answered, one that is not an object too (with no id to answer to: null)."""
        asked = message if isinstance(message, dict) else {}
        route, body = asked.get("route"), asked.get("body")

        def compute(answers):
            if asked is not message:
                shown = json.dumps(message, default=repr)[:80]
                raise answers.BadRequest(f"message {shown}: not an object; the panel sends {{id, route, body}}")
            if route not in ROUTES:
                raise answers.BadRequest(f"route {route!r}: the panel asks {', '.join(ROUTES)}")
            if route == "runs":
                return answers.runs(self.logdir)
            return getattr(answers, route)(self.logdir, body)

        reply = {"error": self.sources_missing} if self.sources_missing else answered(compute, "the kernel's log")[0]
        self.send({"id": asked.get("id"), "answer": reply})
