"""Login over v1 and v2: an agent that needs it says so at session/new, and each kind
of method (the agent's own flow, a terminal, a variable) gets the chat going."""

from __future__ import annotations

from typing import Any

import pytest

from tests.nvim.conftest import Editor

# The agent's own flow, by version.
LOGIN = {1: '"method":"authenticate"', 2: '"method":"auth/login"'}
LOGOUT = {1: '"method":"logout"', 2: '"method":"auth/logout"'}


def open_needing_login(editor: Editor, version: int = 1) -> dict[str, Any]:
    marker = editor.tmp / "logged-in"
    agent = {**editor.fake_agent("auth"), "env": {"FAKE_AUTH_MARKER": str(marker)}}
    editor.setup(agents={"locked": agent}, default_agent="locked", protocol_version=version)
    editor.open_chat(ready=False)
    error = editor.wait_event("AcpError")
    assert "Authentication required: log in with :AcpLogin" in error["message"]
    editor.wait("#(require('acp.chat.registry').get().status.login_methods or {}) == 3")
    status: dict[str, Any] = editor.lua("return require('acp').status()")
    return status


@pytest.mark.parametrize("version", [1, 2])
def test_an_agent_offering_logins_with_its_key_in_the_environment_is_never_logged_in(
    editor: Editor, version: int
) -> None:
    """Released agents list login methods (codex three, gemini four) yet, with an API
    key in the environment, need none: the chat starts with no login asked or sent."""
    agent = {**editor.fake_agent("auth"), "env": {"FAKE_KEY": "sekret"}}
    editor.setup(agents={"keyed": agent}, default_agent="keyed", protocol_version=version)
    editor.open_chat()
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    assert "echo: hello" in editor.transcript_text()
    assert editor.events("AcpError") == []
    log = editor.lua("return require('acp.host').request('log')")
    assert not any(LOGIN[version] in line for line in log)


@pytest.mark.parametrize("version", [1, 2])
def test_the_agents_own_login_then_the_session_starts(editor: Editor, version: int) -> None:
    open_needing_login(editor, version)
    editor.nvim.command("AcpLogin browser")
    assert editor.wait_event("AcpSessionReady")["protocol_version"] == version
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    assert "echo: hello" in editor.transcript_text()
    log = editor.lua("return require('acp.host').request('log')")
    assert any(LOGIN[version] in line for line in log)


@pytest.mark.parametrize("version", [1, 2])
def test_a_variable_login_asks_hidden_and_never_logs_the_value(
    editor: Editor, version: int
) -> None:
    open_needing_login(editor, version)
    editor.lua("vim.fn.inputsecret = function(prompt) _G.asked = prompt return 'sekret' end")
    editor.lua("require('acp').login('key')")
    editor.wait_event("AcpSessionReady")
    assert editor.lua("return _G.asked") == "FAKE_KEY: "
    log = "\n".join(editor.lua("return require('acp.host').request('log')"))
    assert "sekret" not in log


@pytest.mark.parametrize("version", [1, 2])
def test_a_terminal_login_runs_the_agent_interactively(editor: Editor, version: int) -> None:
    open_needing_login(editor, version)
    editor.lua("require('acp').login('tui')")
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(b) return vim.bo[b].buftype end,"
        " vim.api.nvim_list_bufs()), 'terminal')"
    )
    editor.wait("vim.bo.buftype == 'terminal'", what="the login terminal in front")
    editor.wait("vim.fn.join(vim.api.nvim_buf_get_lines(0, 0, -1, false)):find('Press Enter') ~= nil")
    editor.lua("vim.api.nvim_chan_send(vim.bo.channel, '\\r')")
    editor.wait_event("AcpSessionReady")
    assert (editor.tmp / "logged-in").exists()


@pytest.mark.parametrize("version", [1, 2])
def test_acplogout_logs_out_where_the_agent_offers_it(editor: Editor, version: int) -> None:
    open_needing_login(editor, version)
    editor.nvim.command("AcpLogin browser")
    editor.wait_event("AcpSessionReady")
    editor.nvim.command("AcpLogout")
    editor.wait("vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
                " 'acp: logged out of locked')")  # fmt: skip
    log = editor.lua("return require('acp.host').request('log')")
    assert any(LOGOUT[version] in line for line in log)
    # Logged out: the agent's next session needs a login again.
    editor.nvim.command("AcpChat!")
    error = editor.wait_event("AcpError", count=2)
    assert "Authentication required: log in with :AcpLogin" in error["message"]


def test_acplogout_where_the_agent_offers_none_says_so(editor: Editor) -> None:
    editor.setup(agents={"plain": editor.fake_agent("echo")}, default_agent="plain")
    editor.open_chat()
    editor.nvim.command("AcpLogout")
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices),"
        " 'acp: agent \\'plain\\': logging out is not offered by this agent')"
    )
