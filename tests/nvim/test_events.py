"""The User events a statusline, a spinner or an auto-save hook listens to, and the
notices about chats the user is not looking at (issue 28, point 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.nvim.conftest import Editor


def notices(editor: Editor) -> list[str]:
    return [n["msg"] for n in editor.lua("return _G.acp_notices")]


def test_a_turn_fires_its_start_tool_calls_and_recorded_changes(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "hello.py"
    path.write_text("print('hi')\n")
    editor.setup(permission_policy="allow_all")
    chat = editor.open_chat()["chat"]
    editor.lua("require('acp').send('edit hello.py')")
    editor.wait_event("AcpTurnEnd")
    assert editor.events("AcpTurnStart") == [{"chat": chat, "prompt": "edit hello.py"}]
    calls = editor.events("AcpToolCall")
    assert [(c["title"], c["kind"], c["status"]) for c in calls] == [
        ("Edit hello.py", "edit", "pending"),
        ("Edit hello.py", "edit", "completed"),
    ]
    assert {c["chat"] for c in calls} == {chat} and calls[0]["id"] == calls[1]["id"]
    assert editor.events("AcpChangesRecorded") == [{"chat": chat, "files": [str(path)]}]
    names = [e["name"] for e in editor.lua("return _G.acp_events")]
    assert names.index("AcpTurnStart") < names.index("AcpToolCall")
    assert names.index("AcpChangesRecorded") < names.index("AcpTurnEnd")


@pytest.mark.parametrize("version", [1, 2])
def test_a_file_the_agent_wrote_itself_fires_changes_recorded(editor: Editor, version: int) -> None:
    """What a v2 agent writes (on disk: v2 has no editor writes) is recorded too."""
    from tests.nvim.test_rewind import start

    path = editor.tmp / "project" / "a.txt"
    path.write_text("zero\n")
    start(editor, "rewind", version)
    chat = editor.lua("return require('acp').status().chat")
    editor.lua("require('acp').send('write a.txt one')")
    editor.wait_event("AcpTurnEnd")
    assert editor.events("AcpChangesRecorded") == [{"chat": chat, "files": [str(path)]}]
    names = [e["name"] for e in editor.lua("return _G.acp_events")]
    assert names.index("AcpChangesRecorded") < names.index("AcpTurnEnd")


def test_a_v2_tool_call_fires_on_create_and_each_status_not_on_content(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    chat = editor.open_chat()["chat"]
    editor.lua("require('acp').send('tool')")
    editor.wait_event("AcpTurnEnd")
    assert editor.events("AcpTurnStart") == [{"chat": chat, "prompt": "tool"}]
    calls = editor.events("AcpToolCall")
    assert [(c["id"], c["title"], c["kind"], c["status"]) for c in calls] == [
        ("read-1", "Read notes.txt", "read", status)
        for status in ("pending", "in_progress", "completed")
    ]


@pytest.mark.parametrize("version", [1, 2])
def test_a_prompt_sent_during_a_turn_is_queued_then_counted_out(
    editor: Editor, version: int
) -> None:
    """The turn runs until its permission prompt is answered: the second prompt is
    sent during it. (Two sends at once raced the demo's quick first turn: on a busy
    machine it could end before the second send came, which then went at once.)"""
    editor.setup(protocol_version=version)
    chat = editor.open_chat()["chat"]
    editor.lua("require('acp').send('permission')")
    editor.wait_event("AcpPermissionRequest")
    editor.lua("require('acp').send('two')")
    editor.wait_event("AcpQueued")
    editor.lua("vim.ui.select = function(items, opts, on_choice) on_choice(items[1], 1) end")
    editor.nvim.command("AcpPermission")
    editor.wait_event("AcpTurnEnd", count=2)
    assert editor.events("AcpQueued") == [{"chat": chat, "count": 1}, {"chat": chat, "count": 0}]


@pytest.mark.parametrize("version", [1, 2])
def test_a_hidden_chat_says_its_turn_ended_by_name(editor: Editor, version: int) -> None:
    editor.setup(protocol_version=version)
    editor.open_chat()
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    assert notices(editor) == []  # shown: the transcript says it
    editor.lua("require('acp').toggle()")
    editor.lua("require('acp').send('again')")
    editor.wait_event("AcpTurnEnd", count=2)
    # Named by its agent and title (the session's: the first prompt's words).
    assert notices(editor) == ['acp: demo in "hello" ended its turn (end_turn)']


def test_a_hidden_chat_that_fails_says_so_by_name(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').toggle()")
    editor.lua("require('acp').send('crash')")
    editor.wait_event("AcpError")
    editor.wait("#_G.acp_notices > 0")
    assert notices(editor) == [
        "acp: demo in chat #1 failed: agent 'demo' exited during the turn (exit code 3)"
    ]


@pytest.mark.parametrize(("when", "hide", "told"), [("always", False, True), (False, True, False)])
def test_the_notify_option_tells_always_or_never(
    editor: Editor, when: str | bool, hide: bool, told: bool
) -> None:
    editor.setup(notify=when)
    editor.open_chat()
    if hide:
        editor.lua("require('acp').toggle()")
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    assert any("ended its turn" in n for n in notices(editor)) is told
