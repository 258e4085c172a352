"""The Attention tab: a TensorBoard plugin (TBPlugin) with its routes, served under /data/plugin/tinylm_attention/.

Imported when TensorBoard starts, so it imports only what TensorBoard has loaded already. Made once per TensorBoard,
it puts tinylm's repository on sys.path (sources.py); its is_active walks the logdir with viewer/walk.py, which
needs nothing more; torch and the rest of tinylm's code come with the tab's first request (answers.py), and each
run's model is kept while its checkpoint stays the same.
"""

import json
import logging
from functools import cache
from pathlib import Path

from tensorboard.plugins import base_plugin
from werkzeug import Response, wrappers

from tensorboard_plugin_tinylm.sources import SourcesMissing, use_sources

STATIC = Path(__file__).parent / "static"
MAX_BODY = 1 << 20  # bytes: a text of 100,000 characters fits, several times over
READS, POSTS = ("GET", "HEAD"), ("POST",)  # the methods a route serves: a page's files and the listing; the forms
# TensorBoard's loader imports the tab's module and calls the render() it exports by name; index.js exports only its
# default, { render }, the form anywidget reads (it warns of a module that exports render by name), so the module
# TensorBoard is served ends with that name exported too.
TENSORBOARDS_ENTRY = b"\nexport { render };\n"

log = logging.getLogger(__name__)


class AttentionPlugin(base_plugin.TBPlugin):
    plugin_name = "tinylm_attention"

    def __init__(self, context: base_plugin.TBContext):
        self.logdir = Path(context.logdir).expanduser() if context.logdir else None  # None: --logdir_spec
        self.active = False
        try:
            use_sources()
            self.sources_missing = ""
        except SourcesMissing as error:  # every request says so, in one line
            self.sources_missing = str(error)

    def get_plugin_apps(self) -> dict:
        routes = {
            "/index.js": (READS, self.static_file("index.js", "text/javascript", TENSORBOARDS_ENTRY)),
            "/style.css": (READS, self.static_file("style.css", "text/css")),
            "/runs": (READS, self.serve_runs),
            "/attention": (POSTS, self.serve_post("attention")),
            "/generate": (POSTS, self.serve_post("generate")),
        }
        return {route: served_only(methods, app) for route, (methods, app) in routes.items()}

    def is_active(self) -> bool:
        """Whether the logdir holds a checkpoint: the tab is only offered where it can show something (and where
        tinylm's sources are missing, to say so)."""
        if self.sources_missing:
            return True
        if not self.active and self.logdir is not None:  # once found, no walk at every page load
            from viewer.walk import walk_runs  # the standard library only: no torch at TensorBoard's start

            self.active = next(walk_runs(self.logdir, events=False), None) is not None
        return self.active

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Attention", disable_reload=True)

    @staticmethod
    def static_file(name: str, content_type: str, ending: bytes = b""):
        @wrappers.Request.application
        def serve(request: wrappers.Request) -> Response:
            return Response((STATIC / name).read_bytes() + ending, content_type=content_type)

        return serve

    @wrappers.Request.application
    def serve_runs(self, request: wrappers.Request) -> Response:
        return self.answer(lambda answers: answers.runs(self.logdir))

    def serve_post(self, route: str):
        """A route that reads a JSON object from the request's body: answers.attention, answers.generate."""

        @wrappers.Request.application
        def serve(request: wrappers.Request) -> Response:
            def compute(answers):
                if (request.content_length or 0) > MAX_BODY:
                    raise answers.BadRequest(
                        f"the request is over {MAX_BODY:,} bytes; a text is read up to 100,000 characters"
                    )
                try:
                    body = json.loads(request.get_data(as_text=True))
                except ValueError:
                    raise answers.BadRequest(
                        "the request is not JSON: expected an object such as {run, text}"
                    ) from None
                except RecursionError:  # JSON, nested deeper than Python's parser goes
                    raise answers.BadRequest(
                        "the request nests its arrays or objects too deeply: expected an object such as {run, text}"
                    ) from None
                return getattr(answers, route)(self.logdir, body)

            return self.answer(compute)

        return serve

    def answer(self, compute) -> Response:
        """compute(answers) as JSON; a request it cannot answer as HTTP 400 {"error": one line}, the server serving
        on."""
        if self.sources_missing:
            return json_response({"error": self.sources_missing}, 400)
        one_thread()
        return json_response(*answered(compute, "TensorBoard's log"))


@cache
def one_thread() -> None:
    """The tab's forwards are small (one text, one model) and TensorBoard answers each request in a thread of its own:
    torch's intra-op threads would only wait on each other, and on a busy machine wait far longer than they compute.
    Set once, at the first request, in the TensorBoard process alone: a notebook's kernel, whose panel answers with
    the same code (widget.py), keeps its threads for training."""
    import torch

    torch.set_num_threads(1)


def answered(compute, details: str) -> tuple[dict, int]:
    """compute(answers) with its HTTP status; a request the tab cannot answer as 400 {"error": one line}, a fault of
    the tab's own as 500 {"error": one line}, its traceback logged where `details` says. TensorBoard's routes and the
    notebook's panel (widget.py) answer through here."""
    from tensorboard_plugin_tinylm import answers  # tinylm's code and torch: imported on the first request

    try:
        return compute(answers), 200
    except answers.BadRequest as error:
        return {"error": str(error), **error.fields}, 400
    except Exception as error:  # a fault of the tab's own: one line in the panel, the traceback in the log
        log.exception("the Attention tab could not answer")
        reason = (str(error).strip().splitlines() or [""])[0][:200]
        return {"error": f"the tab could not answer ({type(error).__name__}: {reason}); {details} has the details"}, 500


def served_only(methods: tuple[str, ...], app):
    """`app` for the `methods` it serves; any other method (PUT, DELETE, a POST to a file) is answered 405 with the
    methods it serves, in one line and in the Allow header, and never reaches it."""
    allowed = ", ".join(methods)

    def serve(environ: dict, start_response):
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method in methods:
            return app(environ, start_response)
        route = environ.get("PATH_INFO", "")
        refused = json_response({"error": f"{method} {route}: this address answers {allowed} only"}, 405)
        refused.headers["Allow"] = allowed
        return refused(environ, start_response)

    return serve


def json_response(value: object, status: int = 200) -> Response:
    return Response(json.dumps(value, allow_nan=False), status=status, content_type="application/json")
