"""What a turn used (|acp-usage|) when the chat's session goes on in another agent
process: :AcpRestart, a prompt after the agent died, a stored chat reopened. Real
agents differ there: Claude's adapter counts its cost from zero in a new process
(before its SDK 0.3.277) or on (since), opencode counts its cost on and reports it
at the resume, every one reports the context it resumed. The "rewind" agents
(tests/fakes/scenarios/rewind.py) stand for both: "+resume" counts from zero in a
new process, "+resume+store" counts on."""

from __future__ import annotations

import pytest

from tests.nvim.conftest import WINBAR, Editor
from tests.nvim.test_history import kept
from tests.nvim.test_rewind import kill_the_agent, start, turn

KINDS = ["rewind+resume", "rewind+resume+store"]


def new_process(editor: Editor, scenario: str, how: str) -> None:
    """The chat's agent is started again ``how``; the next prompt goes to the new
    process (for "died" and "reopened", that prompt starts it)."""
    if how == "restarted":
        editor.nvim.command("AcpRestart")
        editor.wait_event("AcpSessionReady", count=2)
    elif how == "died":
        kill_the_agent(editor, scenario, 1)
    else:
        [entry] = kept(editor, "two")
        stored = f"require('acp.host').request('export', {{history = {entry['id']}}})"
        editor.wait(f"select(2, {stored}:gsub('Turn ended', '')) == 2", what="its turn ends kept")
        editor.nvim.command("AcpClose")
        editor.reopen_last()


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("scenario", KINDS)
@pytest.mark.parametrize("how", ["restarted", "died", "reopened"])
def test_the_first_turn_in_a_new_process_shows_what_it_used(
    editor: Editor, how: str, scenario: str, version: int
) -> None:
    """The turn was measured against the last report of the process before: "-1.2k
    tokens · $-0.05" where the new one counted from zero, and, in a reopened chat,
    the whole session ("3.7k tokens · $0.15") where it counted on."""
    start(editor, scenario, version)
    turn(editor, "one", 1)
    turn(editor, "two", 2)
    new_process(editor, scenario, how)
    turn(editor, "three", 3)
    assert editor.transcript()[-1] == "*— end_turn · 1.2k tokens · $0.05 —*"
    usage = editor.lua("return require('acp').status().usage")
    assert usage["turn"] == {"tokens": 1234, "cost": {"amount": pytest.approx(0.05), "currency": "USD"}}
    # The session's three turns, and its cost so far: the winbar's.
    assert usage["session"] == {"tokens": 3702, "cost": {"amount": pytest.approx(0.15), "currency": "USD"}}
    assert usage["cost"]["amount"] == pytest.approx(0.15)
    editor.wait(f"{WINBAR}():find('$0.15', 1, true) ~= nil", what="the session's cost in the winbar")


@pytest.mark.parametrize("version", [1, 2])
def test_the_agents_own_count_of_a_turn_shows_at_its_end(editor: Editor, version: int) -> None:
    """opencode answers a prompt with ``usage`` (v1's unstable field: the tokens its
    model read and wrote in the turn), which was never read; v2 has it on the idle
    ``state_update`` that ends the turn, read by neither. It shows on the turn's end
    line beside the context's growth, and in ``status().usage.turn_tokens``; a turn
    answered without it shows none of the turn before."""
    agents = {"fake": editor.fake_agent("counted")}
    editor.setup(agents=agents, default_agent="fake", protocol_version=version)
    editor.open_chat()
    editor.lua("require('acp').send('one')")
    editor.wait_event("AcpTurnEnd")
    assert editor.transcript()[-1] == "*— end_turn · 1.2k tokens · $0.05 · 35.0k in · 900 out —*"
    usage = editor.lua("return require('acp').status().usage")
    assert usage["turn_tokens"] == {
        "input": 35_000, "output": 900, "total": 36_400,
        "thought": 500, "cached_read": 30_000, "cached_write": 0,
    }  # fmt: skip
    assert usage["turn"] == {"tokens": 1234, "cost": {"amount": pytest.approx(0.05), "currency": "USD"}}
    editor.lua("require('acp').send('quiet')")
    editor.wait_event("AcpTurnEnd", count=2)
    assert editor.transcript()[-1] == "*— end_turn · 1.2k tokens · $0.05 —*"
    assert "turn_tokens" not in editor.lua("return require('acp').status().usage")


@pytest.mark.parametrize("version", [1, 2])
def test_a_reopened_chat_says_what_its_last_turn_used(editor: Editor, version: int) -> None:
    """Reopened, a chat's status said nothing of its usage (no ``turn``, no
    ``turn_tokens``, not even the context) while its last turn's end line shows
    the figures: a statusline built on ``status().usage`` went blank until the
    next turn. It says what it said before the chat closed."""
    agents = {"fake": editor.fake_agent("counted")}
    editor.setup(agents=agents, default_agent="fake", protocol_version=version)
    editor.open_chat()
    editor.lua("require('acp').send('one')")
    editor.wait_event("AcpTurnEnd")
    before = editor.lua("return require('acp').status().usage")
    assert set(before) >= {"turn", "turn_tokens", "session", "used"}
    [entry] = kept(editor, "one")
    stored = f"require('acp.host').request('export', {{history = {entry['id']}}})"
    editor.wait(f"{stored}:find('Turn ended', 1, true) ~= nil", what="its turn end kept")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    assert editor.transcript()[-1] == "*— end_turn · 1.2k tokens · $0.05 · 35.0k in · 900 out —*"
    assert editor.lua("return require('acp').status().usage") == before
