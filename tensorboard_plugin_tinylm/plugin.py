"""The Attention tab: a TensorBoard plugin (TBPlugin) with its routes, served under /data/plugin/tinylm_attention/.

Imported when TensorBoard starts, so it imports only what TensorBoard has loaded already; tinylm's code and torch
come with the tab's first request (answers.py), and each run's model is kept while its checkpoint stays the same.
"""

import json
import os
from pathlib import Path

from tensorboard.plugins import base_plugin
from werkzeug import Response, wrappers

from tensorboard_plugin_tinylm.sources import SourcesMissing, use_sources

STATIC = Path(__file__).parent / "static"
CHECKPOINT_NAMES = {"best.pt", "last.pt"}  # trainer/checkpoint.py's BEST and LAST: not imported, it imports torch
MAX_BODY = 1 << 20  # bytes: a text of 100,000 characters fits, several times over


class AttentionPlugin(base_plugin.TBPlugin):
    plugin_name = "tinylm_attention"

    def __init__(self, context: base_plugin.TBContext):
        self.logdir = Path(context.logdir).expanduser() if context.logdir else None  # None: --logdir_spec
        self.active = False

    def get_plugin_apps(self) -> dict:
        return {
            "/index.js": self.static_file("index.js", "text/javascript"),
            "/style.css": self.static_file("style.css", "text/css"),
            "/runs": self.serve_runs,
            "/attention": self.serve_attention,
        }

    def is_active(self) -> bool:
        """Whether the logdir holds a checkpoint: the tab is only offered where it can show something."""
        if not self.active and self.logdir is not None:  # once found, no walk at every page load
            self.active = any(CHECKPOINT_NAMES & set(files) for _, _, files in os.walk(self.logdir))
        return self.active

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Attention", disable_reload=True)

    @staticmethod
    def static_file(name: str, content_type: str):
        @wrappers.Request.application
        def serve(request: wrappers.Request) -> Response:
            return Response((STATIC / name).read_bytes(), content_type=content_type)

        return serve

    @wrappers.Request.application
    def serve_runs(self, request: wrappers.Request) -> Response:
        return answer(lambda answers: answers.runs(self.logdir))

    @wrappers.Request.application
    def serve_attention(self, request: wrappers.Request) -> Response:
        def attention(answers):
            if (request.content_length or 0) > MAX_BODY:
                raise answers.BadRequest(
                    f"the request is over {MAX_BODY:,} bytes; a text is read up to 100,000 characters"
                )
            try:
                body = json.loads(request.get_data(as_text=True))
            except ValueError:
                raise answers.BadRequest("the request is not JSON: expected {run, text, layer}") from None
            return answers.attention(self.logdir, body)

        return answer(attention)


def answer(compute) -> Response:
    """compute(answers) as JSON; a request it cannot answer as HTTP 400 {"error": one line}, the server serving on."""
    try:
        use_sources()
    except SourcesMissing as error:
        return json_response({"error": str(error)}, 400)
    from tensorboard_plugin_tinylm import answers  # tinylm's code and torch: imported on the first request

    try:
        return json_response(compute(answers))
    except answers.BadRequest as error:
        return json_response({"error": str(error)}, 400)


def json_response(value: object, status: int = 200) -> Response:
    return Response(json.dumps(value, allow_nan=False), status=status, content_type="application/json")
