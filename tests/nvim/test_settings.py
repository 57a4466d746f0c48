"""Modes, models and settings, and session history, over ACP v1 (as released agents
speak it) and v2: what reaches the agent and what the user sees."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from tests.nvim.conftest import NOTE_BATCHES, Editor, logged
from tests.nvim.test_faults import fake_pids

CLOSES_SENT = logged(">>", '"session/close"')


def calls(editor: Editor, turn: int = 1) -> list[list[Any]]:
    """The settings and history requests the fake agent received, in order."""
    editor.lua("require('acp').send('calls')")
    editor.wait_event("AcpTurnEnd", count=turn)
    [line] = [ln for ln in editor.transcript() if ln.startswith("[")][-1:]
    return list(json.loads(line))


def pick_first_session(editor: Editor, ready: int | None = 2) -> list[str]:
    """:AcpSessions with the first session picked (and "resume", where the agent
    deletes sessions too); returns how it offered them. Waits for the ``ready``-th
    AcpSessionReady (None: the pick opens no chat)."""
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice)"
        " if opts.format_item then _G.offered = vim.tbl_map(opts.format_item, items) end"
        " on_choice(items[1]) end"
    )
    editor.nvim.command("AcpSessions")
    if ready is not None:
        editor.wait_event("AcpSessionReady", count=ready)
    else:
        editor.wait("_G.offered ~= nil")
    return list(editor.lua("return _G.offered"))


def test_the_session_picker_opens_once_the_batch_that_brought_the_list_is_applied(
    editor: Editor,
) -> None:
    """Opened inside that batch, the default vim.ui.select held Neovim there until
    the user picked: another client's request, an agent's read of a buffer and
    every chat's stream waited for it."""
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('remember me')")
    editor.wait_event("AcpTurnEnd")
    editor.lua(NOTE_BATCHES)
    editor.lua("vim.ui.select = function() _G.picked_in_batch = _G.in_batch end")
    editor.nvim.command("AcpSessions")
    editor.wait("_G.picked_in_batch ~= nil", what="the session picker")
    assert editor.lua("return _G.picked_in_batch") is False


def test_a_configured_mode_is_set_before_the_first_prompt(editor: Editor) -> None:
    # qwen starts in "auto", where nothing asks the user: the preset asks for "default".
    editor.setup(
        agents={"qwen": {**editor.fake_agent("settings"), "mode": "default"}},
        default_agent="qwen",
    )
    status = editor.open_chat()
    assert calls(editor) == [["session/set_mode", {"sessionId": "fake-1", "modeId": "default"}]]
    status = editor.lua("return require('acp').status()")
    assert status["modes"] == {
        "current": "default",
        "available": [
            {"id": "auto", "name": "Auto"},
            {"id": "default", "name": "Default"},
            {"id": "plan", "name": "Plan"},
        ],
    }
    assert status["models"]["current"] == "small"
    assert "mode Default" in editor.winbar() and "Small" in editor.winbar()


def test_qwens_configured_mode_is_sent_the_one_way_qwen_switches(editor: Editor) -> None:
    """qwen offers its mode both as v1 modes and as a config option, and the config
    option won: the configured "default" went by session/set_config_option, which
    leaves qwen in "auto", where nothing is asked. The built-in qwen sets `set_mode`."""
    qwen = {**editor.fake_agent("qwen"), "mode": "default", "set_mode": True}
    editor.setup(agents={"qwen": qwen}, default_agent="qwen")
    editor.open_chat()
    editor.lua("require('acp').send('which mode?')")
    editor.wait_event("AcpTurnEnd")
    assert "working in mode default" in editor.transcript_text()
    assert editor.lua("return require('acp').status().modes.current") == "default"
    editor.nvim.command("AcpMode plan")  # a switch later goes the same way
    editor.wait("require('acp').status().modes.current == 'plan'")
    editor.lua("require('acp').send('which mode now?')")
    editor.wait_event("AcpTurnEnd", count=2)
    assert "working in mode plan" in editor.transcript_text()


def test_acpmode_and_acpmodel_switch_over_v1(editor: Editor) -> None:
    editor.setup(agents={"qwen": editor.fake_agent("settings")}, default_agent="qwen")
    editor.open_chat()
    editor.nvim.command("AcpMode plan")
    editor.wait("require('acp').status().modes.current == 'plan'")
    editor.lua("require('acp').set_model('Large')")  # a name works as well as an id
    editor.wait("require('acp').status().models.current == 'large'")
    assert calls(editor) == [
        ["session/set_mode", {"sessionId": "fake-1", "modeId": "plan"}],
        ["session/set_model", {"sessionId": "fake-1", "modelId": "large"}],
    ]
    assert editor.lua("return vim.fn.getcompletion('AcpMode ', 'cmdline')") == [
        "auto",
        "default",
        "plan",
    ]
    # What the agent does not offer is told here, not sent for the agent to refuse.
    for typed, said in (
        ("AcpConfig nope on", "acp: no setting 'nope' (offered: mode, model)"),
        ("AcpConfig mode nope", "acp: no mode 'nope' (offered: auto, default, plan)"),
    ):
        editor.lua("_G.acp_notices = {}")
        editor.nvim.command(typed)
        editor.wait("#_G.acp_notices > 0", what=typed)
        assert editor.lua("return _G.acp_notices")[0]["msg"] == said
    editor.nvim.command("AcpConfig mode Default")  # a name, as with :AcpMode
    editor.wait("require('acp').status().modes.current == 'default'")
    assert calls(editor, turn=2)[2:] == [["session/set_mode", {"sessionId": "fake-1", "modeId": "default"}]]


def test_acpconfig_with_a_setting_alone_picks_its_value_and_more_is_refused(
    editor: Editor,
) -> None:
    """`:AcpConfig mode` opened the picker of every setting, not of the modes;
    `:AcpConfig mode auto extra` switched the mode, `extra` dropped unsaid."""
    editor.setup(agents={"qwen": editor.fake_agent("settings")}, default_agent="qwen")
    editor.open_chat()
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice)"
        " _G.offered = vim.tbl_map(opts.format_item, items) on_choice(items[3]) end"
    )
    editor.nvim.command("AcpConfig mode")
    editor.wait("require('acp').status().modes.current == 'plan'")
    assert editor.lua("return _G.offered") == ["Auto (current)", "Default", "Plan"]
    for typed, said in (
        ("AcpConfig mode auto extra", "acp: E488: Trailing characters: extra"),
        ("AcpConfig nope", "acp: no setting 'nope' (offered: mode, model)"),
    ):
        editor.lua("_G.acp_notices = {}")
        editor.nvim.command(typed)
        assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [said], typed
    assert calls(editor) == [["session/set_mode", {"sessionId": "fake-1", "modeId": "plan"}]]


def test_a_default_the_agent_does_not_offer_is_reported(editor: Editor) -> None:
    editor.setup(
        agents={"qwen": {**editor.fake_agent("settings"), "model": "huge"}},
        default_agent="qwen",
    )
    editor.open_chat()
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
        " 'acp: qwen does not offer model \\'huge\\' (offered: small, large)')"
    )
    assert "qwen does not offer model 'huge' (offered: small, large)" in editor.transcript_text()
    assert calls(editor) == []


def test_config_options_win_over_modes(editor: Editor) -> None:
    editor.setup(agents={"codex": editor.fake_agent("configs")}, default_agent="codex")
    editor.open_chat()
    editor.lua("require('acp').set_mode('ask')")
    editor.wait("require('acp').status().modes.current == 'ask'")
    assert calls(editor) == [
        [
            "session/set_config_option",
            {"sessionId": "fake-1", "configId": "approval", "value": "ask"},
        ]
    ]
    # The models, which no config option covers, stay offered.
    assert editor.lua("return require('acp').status().models.current") == "small"


def test_set_mode_over_v2_uses_the_mode_setting(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    editor.open_chat()
    before = editor.lua("return require('acp').status().modes")
    other = next(c for c in before["available"] if c["id"] != before["current"])
    editor.lua("require('acp').set_mode(...)", other["name"])
    editor.wait(f"require('acp').status().modes.current == {other['id']!r}")


def test_session_history_over_v1(editor: Editor) -> None:
    editor.setup(agents={"hist": editor.fake_agent("history")}, default_agent="hist")
    editor.open_chat()
    # The picker offers the listed sessions (both pages); the first one is picked.
    offered = pick_first_session(editor)
    assert [o.split(" · ")[:2] for o in offered] == [["First", "hist"], ["Second", "hist"]]
    assert editor.lua("return require('acp').status().session_id") == "old-1"
    text = editor.transcript_text()
    assert "## You\nan old question" in text and "## Agent\nan old answer" in text
    editor.nvim.command("AcpClose")
    # The close goes out from a task of its own: the delete asked after it must not
    # pass it on the wire (the order below is the agent's).
    editor.wait(f"#{CLOSES_SENT} == 1", what="session/close sent")
    editor.nvim.command("AcpChat")  # the first chat, whose agent logged the calls
    editor.nvim.command("AcpDeleteSession old-2")
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
        " 'acp: deleted session old-2')"
    )
    history = calls(editor)
    assert [c[0] for c in history] == [
        "session/list",
        "session/list",
        "session/load",
        "session/close",
        "session/delete",
    ]
    assert history[4][1] == {"sessionId": "old-2"}
    # Only the sessions of this directory are asked for.
    cwd = editor.lua("return vim.fn.getcwd()")
    assert history[0][1] == {"cwd": cwd} and history[1][1] == {"cwd": cwd, "cursor": "page2"}


# vim.ui.select answered from _G.picks, by the item shown (the next of the list each
# time); every call's prompt and items are kept in _G.asked.
PICK_BY_NAME = """
_G.asked = {}
vim.ui.select = function(items, opts, on_choice)
  local shown = vim.tbl_map(opts.format_item or tostring, items)
  table.insert(_G.asked, { prompt = opts.prompt, items = shown })
  local want = table.remove(_G.picks, 1)
  for i, item in ipairs(shown) do
    if vim.startswith(item, want) then
      return on_choice(items[i])
    end
  end
end
"""


@pytest.mark.parametrize("version", [1, 2])
def test_the_session_picker_deletes_a_session_where_the_agent_offers_it(
    editor: Editor, version: int
) -> None:
    """An agent that declares sessionCapabilities.delete: a session picked in
    :AcpSessions is resumed or deleted as the user then picks. It only resumed: a
    session could be deleted only by typing its id to :AcpDeleteSession."""
    editor.setup(
        agents={"hist": editor.fake_agent("history")},
        default_agent="hist",
        protocol_version=version,
    )
    editor.open_chat()
    editor.lua(PICK_BY_NAME)
    editor.lua("_G.picks = {'Second', 'delete'}")
    editor.nvim.command("AcpSessions")
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
        " 'acp: deleted session old-2')"
    )
    # :AcpResume no longer completes it (it did until the next list).
    editor.wait(
        "vim.deep_equal(vim.fn.getcompletion('AcpResume old', 'cmdline'), {'old-1'})",
        what="old-2 out of :AcpResume's completion",
    )
    assert editor.events("AcpSessionDeleted") == [
        {"chat": 1, "agent": "hist", "session_id": "old-2"}
    ]
    asked = editor.lua("return _G.asked")
    assert asked[0]["prompt"] == "Resume or delete a session"
    assert asked[1] == {"prompt": "Second", "items": ["resume", "delete"]}
    assert [c for c in calls(editor) if c[0] != "session/list"] == [
        ["session/delete", {"sessionId": "old-2"}]
    ]
    # "resume" resumes it; a session a chat here is on is shown at once (not deleted
    # under that chat).
    editor.lua("_G.asked = {} _G.picks = {'First', 'resume'}")
    editor.nvim.command("AcpSessions")
    editor.wait_event("AcpSessionReady", count=2)
    assert editor.lua("return require('acp').status().session_id") == "old-1"
    editor.lua("_G.asked = {} _G.picks = {'First'}")
    editor.nvim.command("AcpSessions")
    editor.wait("#_G.asked == 1")  # the stub picks at once: the pick is done
    assert editor.lua("return _G.asked")[0]["prompt"] == "Resume or delete a session"
    assert len(editor.events("AcpSessionReady")) == 2
    assert editor.lua("return require('acp').status().session_id") == "old-1"


def test_deleting_the_session_a_chat_is_on_is_refused(editor: Editor) -> None:
    """:AcpDeleteSession completes the ids of the sessions chats here are on, and
    deleted the one picked though a chat went on in it: the agent dropped the
    conversation under the chat, whose next prompt went to a session gone. As the
    picker, it refuses and says which chat is on it."""
    editor.setup(agents={"hist": editor.fake_agent("history")}, default_agent="hist")
    editor.open_chat()
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    session = editor.lua("return require('acp').status().session_id")
    editor.nvim.command(f"AcpDeleteSession {session}")
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
        f" 'acp: chat 1 is on session {session}: close it first to delete the session')"
    )
    assert [c for c in calls(editor, turn=2) if c[0] == "session/delete"] == []


def test_the_session_picker_only_resumes_where_the_agent_deletes_no_session(
    editor: Editor,
) -> None:
    """Without sessionCapabilities.delete nothing offers a delete the agent would
    refuse: the picked session is resumed at once, and :AcpDeleteSession says why."""
    editor.setup()  # the demo agent over v1: it lists sessions, deletes none
    editor.open_chat()
    editor.lua("require('acp').send('remember me')")
    editor.wait_event("AcpTurnEnd")
    editor.lua(PICK_BY_NAME)
    editor.lua("_G.picks = {'remember me'}")
    editor.nvim.command("AcpSessions")
    editor.wait("#_G.asked == 1")
    assert editor.lua("return _G.asked")[0]["prompt"] == "Resume session"
    editor.nvim.command("AcpDeleteSession demo-1")
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
        " \"acp: agent 'demo': deleting sessions is not offered by this agent\")"
    )


def test_closing_a_v2_chat_closes_its_session(editor: Editor) -> None:
    editor.setup(agents={"v2": editor.fake_agent("fork")}, default_agent="v2", protocol_version=2)
    assert editor.open_chat()["protocol_version"] == 2
    editor.nvim.command("AcpClose")
    editor.wait(f"#{CLOSES_SENT} == 1", what="session/close sent")
    assert '"params":{"sessionId":"fake-1"}' in editor.lua(f"return {CLOSES_SENT}")[0]


def test_acpresume_completes_the_agents_session_ids(editor: Editor) -> None:
    editor.setup(agents={"hist": editor.fake_agent("history")}, default_agent="hist")
    editor.open_chat()
    # The open chat's session at once; the saved ones once listed (asked for now).
    assert editor.lua("return vim.fn.getcompletion('AcpResume ', 'cmdline')") == ["fake-1"]
    editor.wait(
        "#vim.fn.getcompletion('AcpResume old', 'cmdline') == 2", what="the listed sessions"
    )
    assert editor.lua("return vim.fn.getcompletion('AcpResume ', 'cmdline')") == [
        "old-1",
        "old-2",
        "fake-1",
    ]


def test_a_dead_agent_restarts_into_its_session_over_v1(editor: Editor) -> None:
    editor.setup(agents={"hist": editor.fake_agent("history")}, default_agent="hist")
    editor.open_chat()
    [pid] = fake_pids(editor, "history")
    os.kill(pid, signal.SIGKILL)
    editor.wait_event("AcpError")
    # session/resume, not session/load: the transcript shows the history already.
    [(method, params)] = calls(editor)
    assert method == "session/resume" and params["sessionId"] == "fake-1"
    assert params["cwd"] == editor.lua("return vim.fn.getcwd()")
    assert editor.events("AcpSessionReady")[1]["session_id"] == "fake-1"
    text = editor.transcript_text()
    assert "an old answer" not in text and "A new session begins" not in text


def test_acpresume_over_v1_resumes_without_a_replay(editor: Editor) -> None:
    # The fake offers session/resume, not session/load: no history comes back.
    editor.setup(
        agents={"qwen": {**editor.fake_agent("settings"), "mode": "default"}},
        default_agent="qwen",
    )
    first = editor.open_chat()
    editor.nvim.command("AcpResume fake-1")  # the chat's own session: shown, not opened again
    assert len(editor.lua("return require('acp').chats()")) == 1
    editor.nvim.command("AcpResume old-1")
    editor.wait_event("AcpSessionReady", count=2)
    status = editor.lua("return require('acp').status()")
    assert status["chat"] != first["chat"] and status["session_id"] == "old-1"
    assert "The agent resumes this session without showing its history." in (
        editor.transcript_text()
    )
    # The configured mode is set on the resumed session as on a new one.
    resumed = calls(editor)
    assert [c[0] for c in resumed] == [
        "session/set_mode",
        "session/resume",
        "session/set_mode",
    ]
    assert resumed[1][1]["sessionId"] == "old-1"
    assert resumed[1][1]["cwd"] == editor.lua("return vim.fn.getcwd()")
    assert resumed[2][1] == {"sessionId": "old-1", "modeId": "default"}


def test_a_prompt_sent_while_the_settings_are_applied_runs_to_its_end(editor: Editor) -> None:
    """The chat is ready (AcpSessionReady) before its configured mode is set; a prompt
    sent in between started a turn, and the end of the start, finding the chat not
    "ready" but "running", released the agent: the turn died with exit code -15 (the
    flaky test_a_configured_mode_is_set_before_the_first_prompt)."""
    qwen = {**editor.fake_agent("settings_late"), "mode": "default"}
    editor.setup(agents={"qwen": qwen}, default_agent="qwen")
    editor.open_chat()
    # The fake answers set_mode once this prompt came, and ends the turn on a cancel.
    editor.lua("require('acp').send('calls')")
    editor.wait("require('acp').status().mode == 'Default'", what="the mode set")
    editor.lua("require('acp').cancel()")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    assert editor.events("AcpError") == []
    assert editor.lua("return require('acp').status().state") == "ready"


def test_a_restart_keeps_the_settings_the_user_chose(editor: Editor) -> None:
    editor.setup(
        agents={"qwen": {**editor.fake_agent("settings"), "mode": "default"}},
        default_agent="qwen",
    )
    editor.open_chat()
    editor.nvim.command("AcpMode plan")
    editor.lua("require('acp').set_model('large')")
    editor.wait("require('acp').status().models.current == 'large'")
    [pid] = fake_pids(editor, "settings")
    os.kill(pid, signal.SIGKILL)
    editor.wait_event("AcpError")
    # The next send restarts the agent; it resumes the session in its own start mode
    # ("auto"), and the chat sets the user's mode and model again, not the defaults.
    restarted = calls(editor)
    assert [c[0] for c in restarted] == ["session/resume", "session/set_mode", "session/set_model"]
    assert restarted[0][1]["sessionId"] == "fake-1"
    assert restarted[1:] == [
        ["session/set_mode", {"sessionId": "fake-1", "modeId": "plan"}],
        ["session/set_model", {"sessionId": "fake-1", "modelId": "large"}],
    ]
    assert "A new session begins" not in editor.transcript_text()
    status = editor.lua("return require('acp').status()")
    assert status["modes"]["current"] == "plan" and status["models"]["current"] == "large"
    assert "mode Plan" in editor.winbar() and "Large" in editor.winbar()


def test_settings_the_agent_changes_over_v1_are_shown(editor: Editor) -> None:
    editor.setup(agents={"qwen": editor.fake_agent("settings")}, default_agent="qwen")
    editor.open_chat()
    assert "mode Auto" in editor.winbar()
    # current_mode_update, then a config_option_update with a setting of its own.
    editor.lua("require('acp').send('switch')")
    editor.wait_event("AcpTurnEnd")
    status = editor.lua("return require('acp').status()")
    assert status["modes"]["current"] == "plan" and status["mode"] == "Plan"
    assert status["thought_level"] == "High"
    # The modes and models, which no config option replaces, stay offered.
    assert [o["id"] for o in status["config_options"]] == ["thought", "mode", "model"]
    assert status["models"]["current"] == "small"
    assert "mode Plan" in editor.winbar() and "Small" in editor.winbar()


def test_a_config_option_update_over_v1_moves_the_mode(editor: Editor) -> None:
    editor.setup(agents={"codex": editor.fake_agent("configs")}, default_agent="codex")
    editor.open_chat()
    assert editor.lua("return require('acp').status().modes.current") == "auto"
    editor.lua("require('acp').send('switch')")
    editor.wait_event("AcpTurnEnd")
    status = editor.lua("return require('acp').status()")
    assert status["modes"]["current"] == "ask" and status["mode"] == "Ask"
    assert "mode Ask" in editor.winbar()


@pytest.mark.parametrize("version", [1, 2])
def test_the_demo_agent_logs_in_and_lists_and_resumes_its_sessions(
    editor: Editor, version: int
) -> None:
    editor.setup(protocol_version=version)
    first = editor.open_chat()
    assert first["protocol_version"] == version
    editor.wait("#(require('acp.chat.registry').get().status.login_methods or {}) == 1")
    editor.nvim.command("AcpLogin")  # its only method: nothing to pick
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
        " 'acp: logged in to demo')"
    )
    login = '"method":"authenticate"' if version == 1 else '"method":"auth/login"'
    assert any(login in line for line in editor.lua("return require('acp.host').request('log')"))
    editor.lua("require('acp').send('remember me')")
    editor.wait_event("AcpTurnEnd")
    # :AcpSessions lists this directory's sessions; one a chat shows goes to that chat.
    editor.lua("require('acp').open({new = true})")
    editor.wait_event("AcpSessionReady", count=2)
    offered = pick_first_session(editor, ready=None)
    title, agent, *_, shown = offered[0].split(" · ")
    assert (title, agent, shown) == ("remember me", "demo", "open in chat #1")
    assert editor.lua("return require('acp').status().chat") == first["chat"]
    assert len(editor.lua("return require('acp').chats()")) == 2
    # A closed one opens in a new chat.
    editor.lua("require('acp').close()")
    pick_first_session(editor, ready=3)
    status = editor.lua("return require('acp').status()")
    assert status["chat"] != first["chat"] and status["session_id"] == first["session_id"]
    # Its history is shown again (session/load over v1, a replaying resume over v2).
    editor.wait(
        "vim.fn.join(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf,"
        " 0, -1, false), '\\n'):find('You said: %*remember me%*') ~= nil"
    )
    assert "## You\nremember me" in editor.transcript_text()
    resumed = '"method":"session/load"' if version == 1 else '"method":"session/resume"'
    assert any(resumed in line for line in editor.lua("return require('acp.host').request('log')"))


def test_a_failed_session_list_leaves_no_picker_behind(editor: Editor) -> None:
    """Issue 27.7: :AcpSessions waited for its list with a `once` autocmd for any chat;
    a list that failed left it behind, and the next list opened two pickers."""
    editor.setup(
        agents={"plain": editor.fake_agent("terminal"), "keeper": editor.fake_agent("history")}
    )
    editor.open_chat("plain")
    editor.nvim.command("AcpSessions")  # this agent lists no sessions: an error
    editor.wait(
        "#vim.tbl_filter(function(n) return n.msg:find('listing sessions') end, _G.acp_notices) > 0",
        what="the failure told",
    )
    editor.lua("require('acp').open({agent = 'keeper', new = true})")
    editor.wait_event("AcpSessionReady", count=2)
    editor.lua("_G.pickers = 0; vim.ui.select = function() _G.pickers = _G.pickers + 1 end")
    editor.nvim.command("AcpSessions")
    editor.wait("_G.pickers > 0", what="the picker")  # every autocmd ran in that one event
    assert editor.lua("return _G.pickers") == 1


@pytest.mark.parametrize("version", [1, 2])
def test_a_session_the_agent_does_not_know_costs_no_chat(editor: Editor, version: int) -> None:
    """:AcpResume with a mistyped id opened a chat in place of the one shown, failed
    in it: the user had to close it and find their chat again."""
    editor.setup(protocol_version=version)
    first = editor.open_chat()
    windows = editor.lua("return vim.tbl_map(vim.api.nvim_win_get_buf, vim.api.nvim_list_wins())")
    editor.nvim.command("AcpResume bogus")
    editor.wait(
        "#vim.tbl_filter(function(n) return n.msg:find('session bogus', 1, true) end,"
        " _G.acp_notices) > 0",
        what="the agent's refusal told",
    )
    [chat] = editor.lua("return require('acp').chats()")
    assert chat["id"] == first["chat"]
    assert editor.lua("return require('acp').status().chat") == first["chat"]
    shown = editor.lua("return vim.tbl_map(vim.api.nvim_win_get_buf, vim.api.nvim_list_wins())")
    assert shown == windows  # the chat shown before, in its windows
    # A prompt sent to it while it started goes back to its input: it stays, failed.
    editor.lua("vim.cmd('AcpResume bogus'); require('acp').send('keep me')")
    editor.wait_event("AcpError", count=2)
    _kept_failed(editor, first)


def _kept_failed(editor: Editor, first: dict[str, Any]) -> None:
    """The refused chat holds what was sent to it, failed; ``first`` goes on as it was."""
    status = editor.lua("return require('acp').status()")
    assert status["chat"] != first["chat"]
    editor.wait(
        f"vim.deep_equal(vim.api.nvim_buf_get_lines({status['input_buf']}, 0, -1, true),"
        " {'keep me'})",
        what="the prompt back in the input",
    )
    assert editor.lua("return require('acp').status().state") == "error"
    assert [e["chat"] for e in editor.events("AcpSessionReady")] == [first["chat"]]
    session = "return require('acp.chat.registry').chats[...].status.session_id"
    assert editor.lua(session, first["chat"]) == first["session_id"]


@pytest.mark.parametrize("version", [1, 2])
def test_a_prompt_sent_as_the_refusal_comes_back_too(editor: Editor, version: int) -> None:
    """The refusal may reach Neovim before the prompt sent as the chat started
    reaches Python: Neovim closed the chat (its input was empty) and Python, finding
    it failed, restarted its agent, ending the other chat's session. The prompt was
    lost."""
    editor.setup(protocol_version=version)
    first = editor.open_chat()
    # What Python draws in the new chat reaches Neovim only after the prompt left.
    editor.lua(
        """
        local host, first = require('acp.host'), ...
        local render, held = host.handlers.render, {}
        host.handlers.render = function(item)
          if item.chat == first then return render(item) end
          table.insert(held, item)
        end
        _G.release = function()
          host.handlers.render = render
          for _, item in ipairs(held) do render(item) end
        end
        """,
        first["chat"],
    )
    editor.nvim.command("AcpResume bogus")
    editor.wait_event("AcpError")  # Python refused: the chat still starts, as Neovim shows it
    editor.lua("require('acp').send('keep me'); _G.release()")
    _kept_failed(editor, first)


def test_a_listed_session_titled_only_white_space_goes_by_its_id(editor: Editor) -> None:
    """Its entry in :AcpSessions was empty: nothing to tell it by."""
    agent = {**editor.fake_agent("history"), "env": {"FAKE_SECOND_TITLE": " \u2028\t "}}
    editor.setup(agents={"hist": agent}, default_agent="hist")
    editor.open_chat()
    offered = pick_first_session(editor)
    assert [o.split(" · ")[:2] for o in offered] == [["First", "hist"], ["old-2", "hist"]]


# A title of 200 characters, and as every place shows it: its first 79, then "…".
LONG_TITLE = "word " * 40
SHOWN_TITLE = LONG_TITLE[:79] + "…"


def test_a_long_title_is_cut_alike_wherever_it_comes_from(editor: Editor) -> None:
    """A first prompt's title was cut at 80 characters, an agent's not at all: the
    winbar, the history and :AcpSessions showed a line of any length."""
    listing = {**editor.fake_agent("history"), "env": {"FAKE_SECOND_TITLE": LONG_TITLE}}
    agents = {"hist": listing, "titled": editor.fake_agent("titled"), "echo": editor.fake_agent("echo")}
    editor.setup(agents=agents, default_agent="hist")
    editor.open_chat()
    assert pick_first_session(editor)[1].split(" · ")[0] == SHOWN_TITLE
    # The agent's title, then the first prompt's.
    for turns, agent in enumerate(("titled", "echo"), 1):
        editor.open_chat(agent, ready=False)
        editor.wait_event("AcpSessionReady", count=2 + turns)
        editor.lua("require('acp').send(...)", LONG_TITLE)
        editor.wait_event("AcpTurnEnd", count=turns)
        editor.wait(f"(require('acp').history()[1] or {{}}).title == {SHOWN_TITLE!r}", what="the chat kept")
        if agent == "titled":
            assert editor.lua("return require('acp').status().title") == SHOWN_TITLE
