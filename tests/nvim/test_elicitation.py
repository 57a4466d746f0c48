"""Elicitation: an agent asks for a form's values or to open a page; the answers
(accept, decline, cancel) are checked as the agent receives them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.nvim.conftest import NOTE_BATCHES, Editor
from tests.nvim.test_chats import STUB_UI

FORM = {
    "mode": "form",
    "message": "How should I refactor?",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "strategy": {"type": "string", "oneOf": [
                {"const": "safe", "title": "Conservative"},
                {"const": "bold", "title": "Aggressive"},
            ]},
            "count": {"type": "integer", "title": "Files", "minimum": 1, "maximum": 5, "default": 2},
            "name": {"type": "string", "title": "Branch"},
            "dry": {"type": "boolean", "title": "Dry run"},
        },
        "required": ["strategy", "name"],
    },
}  # fmt: skip
# The round trips run over v1 (as released agents speak it) and v2.
VERSIONS = pytest.mark.parametrize("version", [1, 2])


def start(editor: Editor, version: int = 1) -> None:
    editor.setup(
        agents={"fake": editor.fake_agent("elicit")}, default_agent="fake", protocol_version=version
    )
    assert editor.open_chat()["protocol_version"] == version
    editor.lua("_G.opened = {}; vim.ui.open = function(url) table.insert(_G.opened, url) end")


def run(editor: Editor, steps: list[dict[str, Any]], turn: int = 1) -> list[Any]:
    """Send the steps; the agent's RESULT lines, once the turn ended."""
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpTurnEnd", count=turn)
    return [
        json.loads(line.removeprefix("RESULT "))
        for line in editor.transcript()
        if line.startswith("RESULT ")
    ]


def test_a_form_is_asked_once_the_batch_that_brought_it_is_applied(editor: Editor) -> None:
    """Asked inside that batch, the default vim.ui.select held Neovim there until
    the user answered: another client's request, an agent's read of a buffer and
    every chat's stream waited for it."""
    start(editor)
    editor.lua(NOTE_BATCHES)
    editor.lua(
        "_G.asked_in_batch = {}"
        " vim.ui.select = function(items, opts, on_choice)"
        " table.insert(_G.asked_in_batch, _G.in_batch) on_choice(nil) end"
    )
    [result] = run(editor, [{"create": FORM}])
    assert result["action"] == "cancel"
    assert editor.lua("return _G.asked_in_batch") == [False]


@VERSIONS
def test_a_form_asks_each_field_and_the_agent_gets_the_values(editor: Editor, version: int) -> None:
    start(editor, version)
    # answer; strategy: Aggressive; files: "x" (refused), then 3; branch; dry run: yes; send
    editor.lua(STUB_UI, 1, 2, "x", "3", "topic", 1, 1)
    results = run(editor, [{"caps": None}, {"create": FORM}])
    assert results == [
        {"action": "accept", "content": {"count": 3, "dry": True, "name": "topic", "strategy": "bold"}}
    ]
    assert 'CAPS {"form": {}, "url": {}}' in editor.transcript_text()
    asked = editor.lua("return _G.asked")
    assert asked[0] == {"prompt": "fake in chat #1 asks: How should I refactor?", "items": ["answer", "decline"]}
    assert asked[1] == {"prompt": "strategy (required)", "items": ["Conservative", "Aggressive"]}
    assert asked[2] == {"prompt": "Files: ", "default": "2"}
    assert asked[3] == {"prompt": "Files: ", "default": "2"}  # asked again
    assert asked[4] == {"prompt": "Branch (required): "}
    assert asked[6]["prompt"] == (
        "fake in chat #1: send strategy = bold; Files = 3; Branch = topic; Dry run = true?"
    )
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert "acp: Files: a whole number expected" in notices
    assert "*fake asked: How should I refactor? (answered)*" in editor.transcript_text()


@VERSIONS
def test_decline_and_dismiss_are_answered_as_such(editor: Editor, version: int) -> None:
    start(editor, version)
    editor.lua(STUB_UI, 2)  # decline the first; nothing picked for the second
    results = run(editor, [{"create": FORM}, {"create": FORM}])
    assert results == [{"action": "decline"}, {"action": "cancel"}]
    text = editor.transcript_text()
    assert "(declined)*" in text and "(dismissed)*" in text


def test_a_field_dismissed_mid_form_cancels(editor: Editor) -> None:
    start(editor)
    editor.lua(STUB_UI, 1, 1)  # answer, strategy; then the files input is dismissed
    assert run(editor, [{"create": FORM}]) == [{"action": "cancel"}]


@VERSIONS
def test_a_url_shows_its_host_and_opens_only_when_asked(editor: Editor, version: int) -> None:
    start(editor, version)
    url = "https://auth.example.com/connect?elicitationId=e1"
    create = {"create": {"mode": "url", "elicitationId": "e1", "url": url, "message": "Log in"}}
    editor.lua(STUB_UI, 2)  # decline
    assert run(editor, [create]) == [{"action": "decline"}]
    assert editor.lua("return _G.opened") == []
    asked = editor.lua("return _G.asked")[0]
    assert asked["items"] == ["open auth.example.com", "decline"]
    assert asked["prompt"] == f"fake in chat #1 asks: Log in\nOpen {url} (host auth.example.com)?"

    editor.lua(STUB_UI, 1)  # open
    assert run(editor, [create, {"complete": "e1"}, {"complete": "unknown"}], turn=2)[-1] == {
        "action": "accept"
    }
    assert editor.lua("return _G.opened") == [url]
    editor.wait(
        "vim.iter(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf, 0, -1,"
        " false)):any(function(l) return l:find('the page you opened is done with', 1, true) end)"
    )


def test_a_hidden_chat_notifies_and_asks_when_shown(editor: Editor) -> None:
    start(editor)
    editor.lua(STUB_UI, 2)
    editor.nvim.command("AcpToggle")
    editor.wait("#vim.fn.win_findbuf(require('acp').status().transcript_buf) == 0")
    editor.lua("require('acp').send(...)", json.dumps([{"create": FORM}]))
    editor.wait(
        "vim.iter(_G.acp_notices):any(function(n) return n.msg:find('asks:', 1, true) end)"
    )
    notice = editor.lua("return _G.acp_notices[#_G.acp_notices].msg")
    assert notice == "acp: fake in chat #1 asks: How should I refactor? (open the chat to answer)"
    assert editor.lua("return _G.asked") == []
    editor.nvim.command("AcpChat")
    editor.wait_event("AcpTurnEnd")
    assert '{"action": "decline"}' in editor.transcript_text()


def test_a_question_of_a_cancelled_turn_is_not_asked_later(editor: Editor) -> None:
    start(editor)
    editor.lua(STUB_UI, 2)
    editor.nvim.command("AcpToggle")
    editor.wait("#vim.fn.win_findbuf(require('acp').status().transcript_buf) == 0")
    editor.lua("require('acp').send(...)", json.dumps([{"create": FORM}]))
    editor.wait("#(require('acp.chat.registry').chats[1].elicits or {}) == 1", what="the question held")
    editor.lua("require('acp').cancel()")
    editor.wait_event("AcpTurnEnd")
    assert '{"action": "cancel"}' in editor.transcript_text()
    assert editor.lua("return require('acp.chat.registry').chats[1].elicits") == []
    editor.nvim.command("AcpChat")
    assert editor.lua("return _G.asked") == []


def test_only_web_addresses_are_offered_to_open(editor: Editor) -> None:
    start(editor)
    editor.lua(STUB_UI)
    create = {"mode": "url", "elicitationId": "e2", "url": "file:///etc/passwd", "message": "See"}
    assert run(editor, [{"create": create}]) == [{"action": "decline"}]
    assert editor.lua("return _G.asked") == [] and editor.lua("return _G.opened") == []
    notice = editor.lua("return _G.acp_notices[#_G.acp_notices].msg")
    assert notice == "acp: fake in chat #1 asks to open file:///etc/passwd: not a web address, declined"


@VERSIONS
def test_a_default_of_the_wrong_type_is_dropped_and_a_bound_past_int64_refused(
    editor: Editor, version: int
) -> None:
    """Issue 29.4: a boolean field with a string default decoded to a struct the form
    builder did not know (-32603, nothing asked). 29.3: a minimum of 2**64 decoded,
    then failed msgpack on its way to Neovim."""
    start(editor, version)
    editor.lua(STUB_UI, 1, 1, 1)  # answer; dry run: yes; send
    dry = {"type": "boolean", "title": "Dry run", "default": "x"}
    form = {"mode": "form", "message": "Go?", "requestedSchema": {"properties": {"dry": dry}}}
    count = {"type": "integer", "title": "Files", "minimum": 2**64}
    huge = {"mode": "form", "message": "How many?", "requestedSchema": {"properties": {"n": count}}}
    assert run(editor, [{"create": form}, {"create": huge}]) == [
        {"action": "accept", "content": {"dry": True}},
        {"error": -32602},
    ]
    assert editor.lua("return _G.asked")[1] == {"prompt": "Dry run", "items": ["yes", "no"]}
