"""Fork (:AcpFork, acp.fork()): a new chat on the same agent continues a fork of the
chat's session, over ACP v1 and v2 (session/fork of the unstable schemas)."""

from __future__ import annotations

import json

import pytest

from acp_nvim.client.errors import NO_AGENT
from tests.nvim.conftest import Editor
from tests.nvim.test_rewind import start, turn


def transcript_of(editor: Editor, chat: int) -> list[str]:
    return editor.lua(  # type: ignore[no-any-return]
        "return vim.api.nvim_buf_get_lines(require('acp.chat.registry').chats[...].transcript, 0, -1, false)",
        chat,
    )


def last_notice(editor: Editor) -> str:
    return str(editor.lua("return _G.acp_notices[#_G.acp_notices].msg"))


def wait_notice(editor: Editor, part: str) -> None:
    """Wait for a notice holding ``part``."""
    editor.wait(
        f"#vim.tbl_filter(function(n) return n.msg:find({part!r}, 1, true) end, _G.acp_notices) > 0",
        what=part,
    )


@pytest.mark.parametrize("version", [1, 2])
def test_fork_opens_a_chat_that_continues_the_session(editor: Editor, version: int) -> None:
    editor.setup(
        agents={"fake": editor.fake_agent("fork")}, default_agent="fake", protocol_version=version
    )
    parent = editor.open_chat()
    assert parent["protocol_version"] == version and parent["mode"] == "Ask"
    editor.lua("require('acp').send('first question')")
    editor.wait_event("AcpTurnEnd")
    before = transcript_of(editor, parent["chat"])
    assert "fake-1: echo first question" in before

    editor.nvim.command("AcpFork")
    editor.wait_event("AcpSessionReady", count=2)
    fork = editor.lua("return require('acp').status()")
    assert fork["chat"] != parent["chat"]
    assert fork["session_id"] == "fork-1" and fork["protocol_version"] == version
    assert fork["mode"] == "Plan"  # the fork's settings come from the agent's answer
    # The fork's transcript starts with the parent's, then says where it came from.
    lines = transcript_of(editor, fork["chat"])
    assert lines[: len(before)] == before
    # Named by its agent and title (its first prompt here), which mean something in a
    # saved file or another Neovim, where "chat 1" does not.
    assert lines[len(before) + 1] == (
        "*Forked from fake's chat “first question”: from here on, this chat goes its own way.*"
    )
    assert editor.lua("return #require('acp').chats()") == 2
    assert editor.lua("return #vim.fn.win_findbuf(require('acp').status().transcript_buf)") == 1
    # It opens at its end, where the conversation goes on.
    assert editor.lua(
        "local buf = require('acp').status().transcript_buf"
        " return vim.api.nvim_win_get_cursor(vim.fn.bufwinid(buf))[1] == vim.api.nvim_buf_line_count(buf)"
    )

    # On the wire: session/fork named the parent's session and the session's directory.
    editor.lua("require('acp').send('calls')")
    editor.wait_event("AcpTurnEnd", count=2)
    said = next(line for line in transcript_of(editor, fork["chat"]) if line.startswith("[["))
    [(method, params)] = json.loads(said)
    assert method == "session/fork"
    assert params["sessionId"] == "fake-1"
    assert params["cwd"] == str(editor.tmp / "project")

    # Each chat goes on in its own session; the parent's transcript is not touched.
    editor.lua("require('acp').send('in the fork')")
    editor.wait_event("AcpTurnEnd", count=3)
    assert "fork-1: echo in the fork" in transcript_of(editor, fork["chat"])
    editor.lua(
        "require('acp.chat').send(require('acp.chat.registry').chats[...], 'in the parent')",
        parent["chat"],
    )
    editor.wait_event("AcpTurnEnd", count=4)
    text = "\n".join(transcript_of(editor, parent["chat"]))
    assert "fake-1: echo in the parent" in text and "in the fork" not in text


def test_an_agent_without_fork_says_so_in_one_line(editor: Editor) -> None:
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.nvim.command("AcpFork")
    assert last_notice(editor) == "acp: fake does not offer fork"
    assert editor.lua("return select(2, pcall(require('acp').fork))") == (
        "acp: fake does not offer fork"
    )
    assert editor.lua("return #require('acp').chats()") == 1


def test_no_fork_during_a_turn(editor: Editor) -> None:
    editor.setup(agents={"fake": editor.fake_agent("fork")}, default_agent="fake")
    editor.open_chat()
    editor.lua("require('acp').send('hold')")
    editor.wait("require('acp').status().state == 'running'")
    editor.nvim.command("AcpFork")
    assert last_notice(editor) == "acp: cannot fork during a turn: cancel it first"
    assert editor.lua("return #require('acp').chats()") == 1
    editor.nvim.command("AcpCancel")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    assert editor.lua("return require('acp').fork()") == 2
    editor.wait_event("AcpSessionReady", count=2)


@pytest.mark.parametrize("version", [1, 2])
def test_the_demo_agent_forks(editor: Editor, version: int) -> None:
    editor.setup(protocol_version=version)
    parent = editor.open_chat()
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    fork = editor.lua("return require('acp').fork()")
    editor.wait_event("AcpSessionReady", count=2)
    status = editor.lua("return require('acp').status()")
    assert status["chat"] == fork and status["protocol_version"] == version
    assert status["session_id"] != parent["session_id"]
    # Named by its parent's title, where the agent gave one.
    assert "*Forked from demo's chat “hello”: from here" in editor.transcript_text()
    editor.lua("require('acp').send('again')")
    assert editor.wait_event("AcpTurnEnd", count=2)["chat"] == fork
    assert editor.transcript_text().count("## You") == 2  # the parent's turn, then its own


@pytest.mark.parametrize("version", [1, 2])
def test_a_fork_answered_with_the_parents_id_is_refused_and_the_parent_goes_on(
    editor: Editor, version: int
) -> None:
    """Issue 29.2: the parent's id taken for the fork sent the parent's replies to the
    fork (v1) or left the parent running forever (v2, its idle went to the fork)."""
    agent = {**editor.fake_agent("fork"), "env": {"FAKE_FORK_ID": "fake-1"}}
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    parent = editor.open_chat()["chat"]
    editor.lua("require('acp').fork()")
    refused = "acp: agent 'fake': it answered session/fork with session id 'fake-1', "
    wait_notice(editor, refused)
    assert last_notice(editor) == f"{refused}chat {parent}'s: refused"
    editor.lua(
        "require('acp.chat').send(require('acp.chat.registry').chats[...], 'still mine')", parent
    )
    assert editor.wait_event("AcpTurnEnd")["chat"] == parent
    assert "fake-1: echo still mine" in transcript_of(editor, parent)
    # The refused fork opened no chat (decision 0083): the parent has its windows back.
    assert [c["id"] for c in editor.lua("return require('acp').chats()")] == [parent]
    assert editor.lua("return require('acp').status().chat") == parent


@pytest.mark.parametrize("version", [1, 2])
def test_a_fork_the_agent_refuses_opens_no_chat(editor: Editor, version: int) -> None:
    """A fork the agent answered with an error left a failed chat over the parent's
    windows, a copy of its transcript above the error, kept in the history: one
    more chat to close, and to find the parent behind it."""
    start(editor, "rewind+nofork", version)
    turn(editor, "first", 1)
    parent = editor.lua("return require('acp').status().chat")
    editor.wait("#require('acp').history() == 1", what="the parent kept")
    editor.lua("require('acp').fork()")
    wait_notice(editor, "fork failed")
    assert last_notice(editor) == (
        "acp: agent 'fake' failed forking a session: -32603 Internal error: fork failed"
    )
    assert [c["id"] for c in editor.lua("return require('acp').chats()")] == [parent]
    assert editor.lua("return require('acp').status().chat") == parent
    # Nor is it kept in the history (its row went with it).
    editor.wait("#require('acp').history() == 1", what="only the parent kept")


def test_a_reopened_chat_forks_once_its_agent_has_started(editor: Editor) -> None:
    """A chat reopened from the history, its agent not started, said "demo does not
    offer fork"; :AcpSessions said the chat had no running agent."""
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('hello zebra')")
    editor.wait_event("AcpTurnEnd")
    editor.wait("#require('acp').history({query = 'zebra'}) == 1", what="the chat kept")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    unstarted = NO_AGENT
    editor.nvim.command("AcpFork")
    assert last_notice(editor) == f"acp: cannot fork: {unstarted}"
    editor.nvim.command("AcpMode")
    assert last_notice(editor) == f"acp: {unstarted}"
    editor.nvim.command("AcpSessions")
    editor.wait(f"_G.acp_notices[#_G.acp_notices].msg == 'acp: {unstarted}'", what="the reason")
    assert editor.lua("return #require('acp').chats()") == 1

    editor.nvim.command("AcpRestart")
    editor.wait_event("AcpSessionReady", count=2)
    fork = editor.lua("return require('acp').fork()")
    assert editor.wait_event("AcpSessionReady", count=3)["chat"] == fork
    assert "hello zebra" in "\n".join(transcript_of(editor, fork))
