"""The notebook's panel (tensorboard_plugin_tinylm/widget.py) answers every message, one that is not an object
included, with one line: a panel that sends a message is never left waiting."""

import os

import pytest

if not os.environ.get("CI"):  # CI installs the extra (.ci/run): there a missing one fails these tests
    pytest.importorskip("anywidget", reason='needs the notebook extra: pip install -e ".[notebook]"')

from tensorboard_plugin_tinylm.widget import AttentionPanel  # noqa: E402


@pytest.mark.parametrize("message", ["runs", ["runs"], 3, None, True])
def test_a_message_that_is_not_an_object_is_answered_with_one_line(tmp_path, message):
    panel, sent = AttentionPanel(tmp_path), []
    panel.send = sent.append
    panel.answer(message)
    [reply] = sent
    assert reply["id"] is None and list(reply["answer"]) == ["error"]
    assert reply["answer"]["error"].endswith(": not an object; the panel sends {id, route, body}")
    assert "\n" not in reply["answer"]["error"]


def test_a_route_the_panel_does_not_ask_is_answered_to_its_id(tmp_path):
    panel, sent = AttentionPanel(tmp_path), []
    panel.send = sent.append
    panel.answer({"id": 7, "route": "weights"})
    assert sent == [{"id": 7, "answer": {"error": "route 'weights': the panel asks runs, attention, generate"}}]
