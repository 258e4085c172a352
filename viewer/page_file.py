"""The one-file page's HTML (export.py writes it): the Attention tab's own index.js and style.css, the in-page engine
page.js, the curves drawn with uPlot, and the runs' data, all inlined, under a Content-Security-Policy that lets the
page load nothing from anywhere and run no script but its own.

The code and the data ride in `<script type="application/json">` blocks, which no browser runs; the page's one
script (static/export/start.js, allowed by its hash) imports each module from a Blob URL of its text. Blob URLs are
made by the page itself, so they work from file:// and from any static host alike, where a module's relative
import would need a server, and the policy needs nothing looser than `blob:` for them.
"""

import base64
import hashlib
import html
import json

from tensorboard_plugin_tinylm.plugin import STATIC

EXPORT, VENDOR = STATIC / "export", STATIC / "vendor"
MODULES = {"index.js": STATIC / "index.js", "page.js": STATIC / "page.js", "curves.js": EXPORT / "curves.js"}
SCRIPTS = {"uPlot": VENDOR / "uPlot.iife.min.js"}  # a classic script: it defines the global uPlot
STYLES = [VENDOR / "uPlot.min.css", STATIC / "style.css", EXPORT / "page.css"]
START = EXPORT / "start.js"


DOCTYPE = "<!doctype html>"  # how every page begins
ANSWERS = "tinylm-answers"  # the id of the block of the runs' data, in every page


def page_html(title: str, note: str, answers: dict, curves: dict) -> str:
    """The page: `answers` what page.js answers the panel's routes from (viewer/page.py's page_data), `curves` the
    charts (viewer/page_curves.py's page_curves), under `title` and a line saying where they come from, `note`."""
    code = {name: path.read_text(encoding="utf-8") for name, path in (MODULES | SCRIPTS).items()}
    style = "\n".join(path.read_text(encoding="utf-8") for path in STYLES)
    start = START.read_text(encoding="utf-8")
    policy = "; ".join(
        [
            "default-src 'none'",  # nothing from the network, nor from the disk beside the file
            f"script-src {digest(start)} blob:",  # the start script, and the modules it makes from the inlined code
            f"style-src {digest(style)}",
            "connect-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    heading = html.escape(title)
    return f"""{DOCTYPE}
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{html.escape(policy)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{heading}</title>
<style>{style}</style>
</head>
<body>
<header class="page-head"><h1>{heading}</h1><p class="page-note">{html.escape(note)}</p></header>
<section class="curves" id="curves" aria-label="Curves"></section>
<section class="attention" id="attention" aria-label="Attention"></section>
{data_block("tinylm-code", code)}
{data_block("tinylm-curves", curves)}
{data_block(ANSWERS, answers)}
<script type="module">{start}</script>
</body>
</html>
"""


def data_block(name: str, value: object) -> str:
    """`value` as JSON in a block no browser runs. Every `<` is written as its JSON escape: no text from the runs (a
    run's name, a token, a sample) can end the block or open a tag, whatever it holds."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return f"{block_start(name)}{text}</script>"


def block_start(name: str) -> str:
    return f'<script type="application/json" id="{name}">'


def digest(text: str) -> str:
    """A Content-Security-Policy source that allows an inline script or style of exactly this text."""
    return f"'sha256-{base64.b64encode(hashlib.sha256(text.encode('utf-8')).digest()).decode()}'"
