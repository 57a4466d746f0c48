"""Going back (issue 23): rewind the files and the conversation, branches, editing an
earlier prompt, regenerating, steering a running turn, rejecting with a reason,
per-turn usage, compaction and notices; over ACP v1 and v2 with the scripted
"rewind" agents (tests/fakes/agent.py, class Rewind)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acp_nvim.client.errors import STARTING
from tests.nvim.conftest import FAKE, ROOT, WINBAR, Editor
from tests.nvim.screen import Screen
from tests.nvim.test_chats import STUB_UI, input_lines
from tests.nvim.test_faults import fake_pids
from tests.nvim.test_history import kept
from tests.nvim.test_permissions import focus_transcript, wait_text
from tests.proc import wait_gone

VERSIONS = [1, 2]


def start(editor: Editor, scenario: str, version: int) -> Path:
    """A chat with the ``scenario`` agent; returns the file its requests go to."""
    calls = editor.tmp / "calls.jsonl"
    agent = {"cmd": [sys.executable, str(FAKE), scenario], "env": {"FAKE_CALLS": str(calls)}}
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.open_chat()
    return calls


def calls(path: Path, method: str | None = None) -> list[Any]:
    """The agent's requests so far ([method, params]), or the params of ``method``'s."""
    found = [json.loads(line) for line in path.read_text().splitlines()]
    return found if method is None else [params for m, params in found if m == method]


def turn(editor: Editor, text: str, number: int) -> None:
    editor.lua("require('acp').send(...)", text)
    editor.wait_event("AcpTurnEnd", count=number)


def three_turns(editor: Editor) -> Path:
    """Three turns, each writing a.txt (loaded in a buffer: the review's "before" text
    of an agent that writes on disk, as v2 agents do); returns it."""
    a = editor.tmp / "project" / "a.txt"
    a.write_text("zero\n")
    editor.lua("vim.fn.bufload(vim.fn.bufadd(...))", str(a))
    for number, word in enumerate(("one", "two", "three"), 1):
        turn(editor, f"write a.txt {word}", number)
    assert a.read_text() == "three\n"
    return a


def session_changed(editor: Editor, count: int) -> dict[str, Any]:
    """Wait for the ``count``-th AcpSessionReady; the status then."""
    editor.wait_event("AcpSessionReady", count=count)
    return editor.lua("return require('acp').status()")  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", VERSIONS)
def test_rewind_forks_at_the_last_agent_message_and_keeps_the_branch(
    editor: Editor, version: int
) -> None:
    wire = start(editor, "rewind", version)
    a = three_turns(editor)

    editor.lua("require('acp').rewind(2)")
    status = session_changed(editor, 2)
    # The files as after turn 1.
    assert a.read_text() == "one\n"
    # The conversation forks the first session at turn 1's last agent message.
    [fork] = calls(wire, "session/fork")
    assert fork["sessionId"] == "s1"
    assert fork["_meta"] == {"jetbrains": {"air": {"fork": {"version": 1, "messageId": "s1-m1"}}}}
    assert status["session_id"] == "s2"
    # The transcript: turn 1, a mark where the other branch leaves, nothing of 2 and 3.
    text = editor.transcript_text()
    assert "write a.txt one" in text and "write a.txt two" not in text
    assert "write a.txt three" not in text
    assert "Another branch leaves here" in text
    assert "Rewound to before turn 2, the conversation and the files (`a.txt`)." in text

    # The next prompt goes to the fork.
    turn(editor, "write b.txt new", 4)
    assert calls(wire, "session/prompt")[-1]["sessionId"] == "s2"
    assert "s2: " not in editor.transcript_text()  # (it wrote a file; said so)
    branches = editor.lua("return require('acp').branches()")
    assert [(b["id"], b["current"], b["turns"]) for b in branches] == [(2, True, 2), (1, False, 3)]
    assert branches[1]["leaves_at"] == 2 and branches[1]["prompt"] == "write a.txt two"

    # The branch left behind can be picked, shown, and goes on in its session.
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "write a.txt three")
    text = editor.transcript_text()
    assert "write b.txt new" not in text and "write a.txt two" in text
    assert text.count("Another branch leaves here") == 1
    # The rows come before the switch's end (a batch or the agent's answer later).
    assert editor.wait_event("AcpSessionReady", count=3)["session_id"] == "s1"
    assert editor.lua("return require('acp').status().session_id") == "s1"
    turn(editor, "go on", 5)
    assert calls(wire, "session/prompt")[-1]["sessionId"] == "s1"
    assert "s1: go on" in editor.transcript_text()
    # And back: the branch of the rewind again, its turn 2 with it.
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "write b.txt new")
    assert "write a.txt two" not in editor.transcript_text()
    assert editor.wait_event("AcpSessionReady", count=4)["session_id"] == "s2"
    assert editor.lua("return require('acp').status().session_id") == "s2"


def test_the_history_counts_the_turns_of_the_branch_shown(editor: Editor) -> None:
    """A rewound chat showed 3 turns in history() (4 once it went on), where reopening
    it shows the 1 (then 2) of its branch in view."""
    start(editor, "rewind", 1)
    three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    turn(editor, "write b.txt new", 4)
    editor.wait("#require('acp').history({query = 'b.txt'}) == 1", what="the new turn kept")
    [found] = kept(editor, "b.txt")
    assert found["turns"] == 2  # "write a.txt one", "write b.txt new"
    editor.lua("require('acp').close()")
    other = editor.lua("return require('acp').open({history = ...})", found["id"])
    editor.wait(f"require('acp').status().chat == {other} and #require('acp').branches() == 2")
    assert editor.lua("return #require('acp.chat.branches').turns()") == found["turns"]


def windows_show_their_end_filled(editor: Editor) -> bool:
    """Whether each window on the transcript shows its end at the bottom with as
    much above as fits: it starts at the top, or one more line would not fit."""
    return editor.lua(  # type: ignore[no-any-return]
        """
        local buf = require('acp').status().transcript_buf
        local wins = vim.fn.win_findbuf(buf)
        for _, win in ipairs(wins) do
          local view = vim.api.nvim_win_call(win, vim.fn.winsaveview)
          local info = vim.fn.getwininfo(win)[1]
          local height = info.height - info.winbar
          local above = vim.api.nvim_win_text_height(win, { start_row = view.topline - 2 }).all
          if view.lnum ~= vim.api.nvim_buf_line_count(buf) or (view.topline > 1 and above <= height) then
            return false
          end
        end
        return #wins > 0
        """
    )


def test_after_a_rewind_or_a_switch_the_window_shows_what_is_left(editor: Editor) -> None:
    """A rewind takes rows off the transcript's end: its window showed the last few
    rows left above empty ones, the rest out of view above, as if the conversation
    were gone. So did a switch to a shorter branch."""
    Screen(editor, 100, 60)  # a tall window: a branch switched to fits in it
    start(editor, "rewind", 1)
    three_turns(editor)
    assert windows_show_their_end_filled(editor)
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 2)
    wait_text(editor, "Rewound to before turn 2")
    assert windows_show_their_end_filled(editor)

    turn(editor, "write b.txt new", 4)
    for switch in (1, 2):  # to the longer branch left behind, then back
        editor.lua(STUB_UI, 1)
        editor.nvim.command("AcpBranches")
        wait_text(editor, f"Switched to branch {switch}")
        assert windows_show_their_end_filled(editor)


REWOUND = ("Rewound to before turn 2", "Continued in a new session")


def notes_in(text: str) -> tuple[int, ...]:
    """How often the transcript says each of :data:`REWOUND`, and that it switched."""
    return (*(text.count(note) for note in REWOUND), text.count("Switched to branch"))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rewinds_and_a_switchs_notes_show_on_their_branch_only(
    editor: Editor, version: int
) -> None:
    """A rewind's notes went into the part of the transcript every branch shares: the
    first branch showed "Continued in a new session" above its own turns, which ran in
    the first session, and three rewinds to turn 2 made three notes under turn 1. A
    switch's note stayed at its branch's end: 1 → 2 → 1 said "Switched to branch 1"
    twice in a row. Now the notes of a rewind or a switch go with the turn sent after
    it (its branch's), and go away with the view when none was; so it is kept."""
    from tests.nvim.test_history import reopened_elsewhere

    start(editor, "rewind+plain", version)
    for number, word in enumerate(("alpha", "beta", "gamma"), 1):
        turn(editor, word, number)
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 2)
    turn(editor, "beta edited", 4)
    text = editor.transcript_text()
    order = ["Another branch leaves here", *REWOUND, "beta edited"]
    assert sorted(order, key=text.index) == order and notes_in(text) == (1, 1, 0)
    for branch in (1, 2, 1):
        editor.lua(STUB_UI, 1)
        editor.nvim.command("AcpBranches")
        wait_text(editor, f"Switched to branch {branch}")
        text = editor.transcript_text()
        assert notes_in(text) == (branch == 2, branch == 2, 1)
        assert text.count("Another branch leaves here") == 1
    turn(editor, "delta", 5)  # the switch's note goes with it
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 6)
    turn(editor, "beta again", 6)
    assert notes_in(editor.transcript_text()) == (1, 1, 0)
    [entry] = kept(editor, "again")

    other, _ = reopened_elsewhere(editor, entry, "rewind+plain", version)
    try:
        assert notes_in(other.transcript_text()) == (1, 1, 0)
        buf = other.lua("return require('acp.chat.history').export(nil, {history = ...})", entry["id"])
        assert notes_in("\n".join(other.nvim.buffers[buf][:])) == (1, 1, 0)
        other.nvim.command("tabclose")
        # Branch 1 as it was drawn: back there before "delta" was sent, once.
        others = [b["id"] for b in other.lua("return require('acp').branches()") if not b["current"]]
        other.lua(STUB_UI, others.index(1) + 1)
        other.nvim.command("AcpBranches")
        other.wait("require('acp').branches()[1].id == 1", what="branch 1 shown")
        # The branch comes back two turns a batch (decision 0076), its note with the last.
        other.wait(
            "select(2, table.concat(vim.api.nvim_buf_get_lines("
            "require('acp').status().transcript_buf, 0, -1, false), '\\n')"
            ":gsub('Switched to branch', '')) == 2",
            what="the switch's note",
        )
        text = other.transcript_text()
        assert notes_in(text) == (0, 0, 2)
        assert text.index("gamma") < text.index("Switched to branch 1") < text.index("delta")
    finally:
        other.quit()


MARK = "Another branch leaves here"


def rewind_picker(editor: Editor) -> list[str]:
    """What :AcpRewind offers (nothing picked)."""
    editor.lua(STUB_UI)
    editor.nvim.command("AcpRewind")
    return editor.lua("return _G.asked[1].items")  # type: ignore[no-any-return]


def test_a_long_chat_lists_its_turns_and_branches_right_after_a_rewind_and_a_switch(
    editor: Editor,
) -> None:
    """A turn start sends Lua only the new turn and the shown branch's entry (decision
    0110): the turns :AcpRewind offers and acp.branches() stay whole through many
    turns, a rewind and a switch back."""
    start(editor, "rewind", 1)
    count = 30
    for number in range(1, count + 1):
        turn(editor, f"prompt {number}\nits second line", number)
    assert rewind_picker(editor) == [f"turn {n} · prompt {n}" for n in range(count, 0, -1)]

    editor.lua(STUB_UI, count - 25 + 1)  # turn 25, newest first
    editor.nvim.command("AcpRewind")
    session_changed(editor, 2)
    turn(editor, "after the rewind", count + 1)
    turn(editor, "prompt 3", count + 2)  # an earlier prompt's text, sent again
    shown = ["turn 26 · prompt 3", "turn 25 · after the rewind"]
    shown += [f"turn {n} · prompt {n}" for n in range(24, 0, -1)]
    assert rewind_picker(editor) == shown
    assert editor.transcript_text().count("## You\nprompt 3\n") == 2
    branches = editor.lua("return require('acp').branches()")
    assert [(b["id"], b["current"], b["turns"], b["leaves_at"]) for b in branches] == [
        (2, True, 26, None),
        (1, False, count, 25),
    ]
    assert (branches[0]["prompt"], branches[0]["last_prompt"]) == ("prompt 3", "prompt 3")
    assert branches[1]["prompt"].startswith("prompt 25\n")
    assert branches[1]["last_prompt"].startswith(f"prompt {count}\n")

    show_branch(editor, 1)
    turn(editor, "on the first branch", count + 3)
    assert rewind_picker(editor) == [f"turn {count + 1} · on the first branch"] + [
        f"turn {n} · prompt {n}" for n in range(count, 0, -1)
    ]
    assert editor.lua("return require('acp.chat.branches').turns()")[0] == str(count + 1)
    branches = editor.lua("return require('acp').branches()")
    assert [(b["id"], b["current"], b["turns"], b["leaves_at"]) for b in branches] == [
        (1, True, count + 1, None),
        (2, False, 26, 25),
    ]
    assert branches[0]["prompt"] == "on the first branch"


def show_branch(editor: Editor, branch: int) -> str:
    """Pick branch ``branch`` in :AcpBranches; the transcript then."""
    others = [b["id"] for b in editor.lua("return require('acp').branches()") if not b["current"]]
    editor.lua(STUB_UI, others.index(branch) + 1)
    editor.nvim.command("AcpBranches")
    editor.wait(f"require('acp').branches()[1].id == {branch}", what=f"branch {branch} shown")
    wait_text(editor, f"Switched to branch {branch}")
    return editor.transcript_text()


def test_a_mark_goes_when_no_branch_leaves_there_any_more(editor: Editor) -> None:
    """After :AcpRewind 2 and :AcpBranches back to branch 1 before anything was sent,
    the rewound branch, which had no turn, was gone, but its mark "Another branch
    leaves here" stayed, in the transcript and in the history (a reopened chat showed
    it again). Now the mark goes with the last branch leaving there; one where a
    branch still leaves stays."""
    from tests.nvim.test_history import reopened_elsewhere

    start(editor, "rewind+plain", 2)
    for number, word in enumerate(("alpha", "beta", "gamma"), 1):
        turn(editor, word, number)
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 2)
    assert editor.transcript_text().count(MARK) == 1
    text = show_branch(editor, 1)
    assert MARK not in text and len(editor.lua("return require('acp').branches()")) == 1
    assert text.index("alpha") < text.index("beta") < text.index("gamma")

    # Rewound again and kept so (this Neovim closes): reopened, it has its mark, and
    # loses it, in the history too, when its branch is left the same way.
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 3)
    [entry] = kept(editor, "gamma")
    editor.quit()
    other, _ = reopened_elsewhere(editor, entry, "rewind+plain", 2)
    try:
        assert other.transcript_text().count(MARK) == 1
        assert MARK not in show_branch(other, 1)
        turn(other, "delta", 1)
        kept(other, "delta")
        export = editor.tmp / "chat.md"
        other.lua("require('acp').export(...)", str(export), {"history": entry["id"]})
        assert "delta" in export.read_text() and MARK not in export.read_text()

        # Left while another branch leaves there too: the mark stays.
        other.nvim.command("AcpRewind 2")
        session_changed(other, 2)
        turn(other, "beta again", 2)
        other.nvim.command("AcpRewind 2")
        session_changed(other, 3)
        assert show_branch(other, 1).count(MARK) == 1
        assert len(other.lua("return require('acp').branches()")) == 2
    finally:
        other.quit()

    again, _ = reopened_elsewhere(editor, entry, "rewind+plain", 2)
    try:
        assert again.transcript_text().count(MARK) == 1
    finally:
        again.quit()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("embed", [False, True])
def test_without_forks_at_a_message_a_new_session_gets_the_conversation(
    editor: Editor, version: int, embed: bool
) -> None:
    wire = start(editor, "rewind+plain" + ("+embed" if embed else ""), version)
    a = three_turns(editor)
    editor.nvim.command("AcpRewind 2")
    assert session_changed(editor, 2)["session_id"] == "s2"
    assert a.read_text() == "one\n"
    assert calls(wire, "session/fork") == []
    assert [c["cwd"] for c in calls(wire, "session/new")] == [str(editor.tmp / "project")] * 2

    turn(editor, "write a.txt again", 4)
    first = calls(wire, "session/prompt")[-1]
    assert first["sessionId"] == "s2"
    *seed, text = first["prompt"]
    assert text == {"type": "text", "text": "write a.txt again"}
    if embed:  # an introduction, then the conversation as a resource
        assert [block["type"] for block in seed] == ["text", "resource"]
        said = seed[1]["resource"]["text"]
        assert seed[1]["resource"]["uri"] == "acp://conversation.md"
    else:
        [only] = seed
        assert only["type"] == "text"
        said = only["text"]
    assert "write a.txt one" in said and "wrote a.txt" in said
    assert "write a.txt two" not in said and "three" not in said
    line = (
        "Continued in a new session; the agent is given the conversation so far"
        " with the next prompt."
    )
    assert line in editor.transcript_text()
    # Only the first prompt of the new session carries it.
    turn(editor, "and then", 5)
    assert len(calls(wire, "session/prompt")[-1]["prompt"]) == 1


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("embed", [False, True])
def test_an_agent_echoing_a_seeded_prompt_shows_only_what_was_typed(
    editor: Editor, version: int, embed: bool
) -> None:
    """An agent echoes a prompt as it went into its history (v2 acknowledges every
    prompt so; a v1 agent may): the first prompt of a seeded session carries the
    conversation before the user's words, and the echo put all of it into the
    user's message (the transcript, the history, the next seed)."""
    start(editor, "rewind+plain" + ("+embed" if embed else "") + "+echo", version)
    three_turns(editor)
    editor.nvim.command("AcpRewind 2")
    assert session_changed(editor, 2)["session_id"] == "s2"
    turn(editor, "write a.txt again", 4)
    text = editor.transcript_text()
    assert "## You\nwrite a.txt again\n" in text
    assert "began earlier" not in text and "conversation.md" not in text
    assert text.count("write a.txt one") == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_an_agent_whose_forks_drop_the_message_named_is_forked_at_the_next_prompt(
    editor: Editor, version: int
) -> None:
    """An agent advertising forks at a message with ``inclusive: false`` drops the
    message named: forked at turn 1's answer, its fork lost that answer though the
    transcript shows it. It is forked at turn 2's prompt (v2: the agent's id of it),
    else (v1 prompts have no id of the agent's) the conversation is told anew."""
    wire = start(editor, "rewind+exclusive", version)
    three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    assert session_changed(editor, 2)["session_id"] == "s2"
    forks = calls(wire, "session/fork")
    if version == 2:
        [fork] = forks
        assert fork["_meta"]["jetbrains"]["air"]["fork"]["messageId"] == "s1-u2"
    else:
        assert forks == []
    turn(editor, "write b.txt new", 4)
    prompt = calls(wire, "session/prompt")[-1]["prompt"]
    told = "Continued in a new session" in editor.transcript_text()
    assert (told, len(prompt) > 1) == (version == 1, version == 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_rewind_to_the_first_turn_begins_afresh_and_out_of_range_is_an_error(
    editor: Editor, version: int
) -> None:
    wire = start(editor, "rewind", version)
    turn(editor, "write a.txt one", 1)
    editor.lua("require('acp').rewind(3)")
    editor.wait(
        "vim.iter(_G.acp_notices):any(function(n)"
        " return n.msg == 'acp: no turn 3 to rewind to (turns 1 to 1)' end)"
    )
    editor.lua("require('acp').rewind(1)")
    session_changed(editor, 2)
    assert not (editor.tmp / "project" / "a.txt").exists()
    assert calls(wire, "session/fork") == []
    # Back there again: a turn was sent, it is the branch shown that has none (it
    # said "no turn was sent yet").
    editor.lua("require('acp').rewind(1)")
    editor.wait(
        "vim.iter(_G.acp_notices):any(function(n)"
        " return n.msg == 'acp: no turn 1 to rewind to (the branch shown has none:"
        " :AcpBranches shows another)' end)"
    )
    turn(editor, "hello", 2)
    # Nothing was said before turn 1: no conversation to carry.
    assert calls(wire, "session/prompt")[-1]["prompt"] == [{"type": "text", "text": "hello"}]


def seed_of(prompt: dict[str, Any]) -> str:
    """The conversation a session's first prompt carries ahead of the user's text."""
    *seed, _ = prompt["prompt"]
    return "\n".join(block.get("text", "") for block in seed)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_fork_goes_back_into_the_turns_it_continues(editor: Editor, version: int) -> None:
    """A fork's transcript shows its parent's turns: they are its turns too. It was
    told of none: :AcpRewind 1 in a fork lost the conversation shown (the agent got a
    bare new session), and before its own first turn nothing could be picked."""
    wire = start(editor, "rewind+plain", version)
    turn(editor, "my name is Zorro remember it", 1)
    turn(editor, "second turn text", 2)
    editor.lua("require('acp').fork()")
    assert session_changed(editor, 2)["session_id"] == "s2"
    assert [c["turns"] for c in editor.lua("return require('acp').chats()")] == [2, 2]
    editor.lua(STUB_UI)  # the picker is cancelled
    editor.nvim.command("AcpRewind")
    items = ["turn 2 · second turn text", "turn 1 · my name is Zorro remember it"]
    assert editor.lua("return _G.asked")[0]["items"] == items
    editor.nvim.command("AcpEdit")
    editor.wait("require('acp.chat.registry').get().editing == 2")
    input_buf = editor.lua("return require('acp').status().input_buf")
    assert editor.lua(f"return vim.api.nvim_buf_get_lines({input_buf}, 0, -1, false)") == [
        "second turn text"
    ]
    editor.lua(f"vim.api.nvim_set_current_win(vim.fn.bufwinid({input_buf}))")
    editor.nvim.input("ggdG")  # not this edit after all
    editor.wait("require('acp.chat.registry').get().editing == nil", what="the edit ended")

    turn(editor, "in the fork one", 3)
    assert calls(wire, "session/prompt")[-1]["sessionId"] == "s2"
    # Back to right after the fork: the conversation it continued goes on.
    editor.nvim.command("AcpRewind 3")
    assert session_changed(editor, 3)["session_id"] == "s3"
    text = editor.transcript_text()
    assert "second turn text" in text and "in the fork one" not in text
    turn(editor, "after rewind in fork", 4)
    first = calls(wire, "session/prompt")[-1]
    assert first["sessionId"] == "s3"
    said = seed_of(first)
    assert "my name is Zorro remember it" in said and "s1: second turn text" in said
    assert "in the fork one" not in said

    # Before its parent's first turn: nothing was said, in the transcript as for the agent.
    editor.nvim.command("AcpRewind 1")
    session_changed(editor, 4)
    assert "Zorro" not in editor.transcript_text()
    turn(editor, "hello", 5)
    assert calls(wire, "session/prompt")[-1]["prompt"] == [{"type": "text", "text": "hello"}]


def test_a_fork_picked_back_before_its_own_first_turn_goes_on_in_its_session(
    editor: Editor,
) -> None:
    """Until it has a turn of its own, the fork's session holds just the turns it
    continues: a branch of those, picked again, goes on there with no request
    (decision 0041). The fork is kept in the history with that conversation."""
    wire = start(editor, "rewind", 1)
    turn(editor, "my name is Zorro remember it", 1)
    turn(editor, "second turn text", 2)
    editor.lua("require('acp').fork()")
    assert session_changed(editor, 2)["session_id"] == "s2"
    editor.nvim.command("AcpRewind 2")
    assert session_changed(editor, 3)["session_id"] == "s3"
    assert "second turn text" not in editor.transcript_text()
    asked = len(calls(wire))
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "Switched to branch 1")
    assert "second turn text" in editor.transcript_text()
    turn(editor, "go on", 3)
    prompt = {"sessionId": "s2", "prompt": [{"type": "text", "text": "go on"}]}
    assert calls(wire)[asked:] == [["session/prompt", prompt]]
    assert {c["turns"] for c in kept(editor, "Zorro", 2)} == {2, 3}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rewind_during_a_turn_cancels_it_first(editor: Editor, version: int) -> None:
    wire = start(editor, "rewind", version)
    turn(editor, "write a.txt one", 1)
    editor.lua("require('acp').send('hold')")
    editor.wait("require('acp').status().state == 'running'")
    editor.lua("require('acp').rewind(2)")
    assert editor.wait_event("AcpTurnEnd", count=2)["stop_reason"] == "cancelled"
    assert session_changed(editor, 2)["session_id"] == "s2"
    methods = [m for m, _ in calls(wire)]
    assert methods.index("session/cancel") < methods.index("session/fork")
    assert "holding" not in editor.transcript_text()


def hold_a_turn(editor: Editor, scenario: str, version: int) -> Path:
    """Turn 1, then turn 2 held by the ``scenario`` agent (``hold``), with 0.5 s for
    the agent to end a turn after a cancel. The agent's calls file."""
    calls_file = editor.tmp / "calls.jsonl"
    agent = {"cmd": [sys.executable, str(FAKE), scenario], "env": {"FAKE_CALLS": str(calls_file)}}
    editor.setup(
        agents={"fake": agent}, default_agent="fake", protocol_version=version,
        timeouts={"cancel": 0.5},
    )  # fmt: skip
    editor.open_chat()
    turn(editor, "alpha", 1)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    return calls_file


def rewind_past_a_turn_the_agent_goes_on_with(editor: Editor, scenario: str, version: int) -> Path:
    """Turn 1, then a held turn 2 rewound to before it: the agent of ``scenario``
    never acts on the cancel, and the chat goes on in session s2. The agent's calls
    file."""
    calls_file = hold_a_turn(editor, scenario, version)
    editor.lua("require('acp').rewind(2)")
    assert editor.wait_event("AcpTurnEnd", count=2)["stop_reason"] == "cancelled"
    assert session_changed(editor, 2)["session_id"] == "s2"
    return calls_file


@pytest.mark.parametrize("version", VERSIONS)
def test_a_prompt_after_a_rewind_goes_though_the_agent_never_ended_the_cancelled_turn(
    editor: Editor, version: int
) -> None:
    """It waited for the turn the rewind cancelled, in the session left behind, to end:
    an agent that never answers that cancel held it for ever ("still ending the
    cancelled turn")."""
    calls_file = rewind_past_a_turn_the_agent_goes_on_with(editor, "rewind+deaf", version)
    turn(editor, "after", 3)
    assert editor.events("AcpTurnEnd")[2]["stop_reason"] == "end_turn"
    assert calls(calls_file, "session/prompt")[-1]["sessionId"] == "s2"
    assert "s2: after" in editor.transcript_text()
    assert "still ending the cancelled turn" not in editor.transcript_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_switch_back_to_the_session_of_a_turn_left_behind_goes_once_the_agent_ended_it(
    editor: Editor, version: int
) -> None:
    """The rewind left the cancelled turn to the agent, in a session the chat had
    left: over v2 the end the agent then gave it (its idle) was taken for an update
    come early, and a prompt after a switch back to that branch waited for ever
    ("still ending the cancelled turn")."""
    calls_file = rewind_past_a_turn_the_agent_goes_on_with(editor, "rewind+deaf+late", version)
    turn(editor, "after", 3)  # the agent ends the held turn of s1 before it answers
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "Switched to branch 1")
    assert editor.lua("return require('acp').status().session_id") == "s1"
    turn(editor, "back", 4)
    assert editor.events("AcpTurnEnd")[3]["stop_reason"] == "end_turn"
    assert calls(calls_file, "session/prompt")[-1]["sessionId"] == "s1"
    assert "still ending the cancelled turn" not in editor.transcript_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_file_a_turn_left_behind_writes_is_not_the_next_turns(editor: Editor, version: int) -> None:
    """The agent went on with the turn a rewind cancelled and wrote late.txt while the
    chat's next turn ran: the review of that turn asked about late.txt. The branch
    left names it where it says the agent ended that turn."""
    rewind_past_a_turn_the_agent_goes_on_with(editor, "rewind+deaf+late+write", version)
    turn(editor, "write b.txt new", 3)  # the agent ends the held turn of s1 first
    project = editor.tmp / "project"
    assert (project / "late.txt").read_text() == "late\n"
    changes = editor.lua("return require('acp').changes()")
    assert [(c["path"], c["turn"]) for c in changes] == [(str(project / "b.txt"), 3)]
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "Files it named meanwhile, not in the review: `late.txt`")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_file_the_next_turn_writes_too_is_its_own_though_a_turn_left_behind_named_it(
    editor: Editor, version: int
) -> None:
    """What the open turn's own tool calls name is its change, reviewed, though the
    turn left behind wrote there first (the two cannot be told apart on disk)."""
    rewind_past_a_turn_the_agent_goes_on_with(editor, "rewind+deaf+late+write", version)
    turn(editor, "write late.txt mine", 3)
    late = editor.tmp / "project" / "late.txt"
    assert late.read_text() == "mine\n"
    changes = editor.lua("return require('acp').changes()")
    assert [(c["path"], c["turn"]) for c in changes] == [(str(late), 3)]


def release(editor: Editor) -> None:
    """Let the "release" agent end its held turn (see ``rewind_past_a_turn_the_agent_goes_on_with``)."""
    with open(editor.tmp / "project" / "release", "wb"):
        pass


@pytest.mark.parametrize("version", VERSIONS)
def test_a_turn_left_behind_shows_nothing_on_its_branch_shown_again_but_its_end(
    editor: Editor, version: int
) -> None:
    """A prompt after the rewind unmuted the chat while the agent still ran the turn
    it had left behind: switched back to that branch, the agent's late " done" was
    drawn there, as if the cancelled turn had answered."""
    os.mkfifo(editor.tmp / "project" / "release")
    rewind_past_a_turn_the_agent_goes_on_with(editor, "rewind+deaf+release", version)
    turn(editor, "after", 3)
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "Switched to branch 1")
    release(editor)  # the agent goes on with the turn of s1, and ends it
    turn(editor, "back", 4)  # goes once the agent has ended that turn
    text = editor.transcript_text()
    assert "holding" in text and "done" not in text
    assert text.count("The agent went on with the cancelled turn and has ended it now") == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_the_end_of_a_turn_left_behind_is_told_when_its_branch_is_shown_again(
    editor: Editor, version: int
) -> None:
    os.mkfifo(editor.tmp / "project" / "release")
    rewind_past_a_turn_the_agent_goes_on_with(editor, "rewind+deaf+release", version)
    release(editor)
    turn(editor, "after", 3)  # s2: the agent answers once it is done with s1's turn
    assert "has ended it now" not in editor.transcript_text()  # not on this branch
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "has ended it now")
    assert "done" not in editor.transcript_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_turn_left_behind_asks_nothing_through_the_editors_mcp_server(
    editor: Editor, version: int
) -> None:
    """The rewind left the held turn of s1 to the agent; going on with it, the agent ran
    a command with the editor's MCP tool, over the server offered with s1: the chat,
    on s2 by then, asked the user to allow it there (the server knew the chat, not the
    session), and the agent's turn waited on that prompt (so did s2's answer)."""
    calls_file = rewind_past_a_turn_the_agent_goes_on_with(editor, "rewind+deaf+late+mcp", version)
    # s2: the agent first goes on with s1's turn, its command, and ends it; then answers.
    turn(editor, "after", 3)
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "has ended it now")  # s1's turn ended: nothing waited on the user
    text = editor.transcript_text()
    assert "Run `true`" not in text and "`other` · failed" not in text  # nor its stray end
    [result] = calls(calls_file, "mcp")
    assert result["isError"] is True
    assert "cancelled" in result["content"][0]["text"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_branch_switch_during_a_turn_cancels_it_and_says_so(
    editor: Editor, version: int
) -> None:
    wire = start(editor, "rewind", version)
    turn(editor, "alpha", 1)
    turn(editor, "beta", 2)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    editor.lua("require('acp').send('hold')")
    # The agent holds the turn: its prompt is recorded before the cancel can be.
    wait_text(editor, "holding")
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    assert editor.wait_event("AcpTurnEnd", count=3)["stop_reason"] == "cancelled"
    wait_text(editor, "Switched to branch 1")
    assert "*Switched to branch 1 (2 turns); the turn running on branch 2 was cancelled.*" in (
        editor.transcript_text()
    )
    assert [m for m, _ in calls(wire)][-1] == "session/cancel"
    # The cancelled turn is kept with its branch.
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "holding")
    assert "*— cancelled" in editor.transcript_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_edit_an_earlier_prompt_then_send_is_a_rewind_and_a_send(
    editor: Editor, version: int
) -> None:
    wire = start(editor, "rewind", version)
    a = three_turns(editor)
    editor.nvim.command("AcpEdit 2")
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'write a.txt two'")  # fmt: skip
    input_buf = editor.lua("return require('acp').status().input_buf")
    editor.lua(f"vim.api.nvim_buf_set_lines({input_buf}, 0, -1, false, {{'write a.txt TWO'}})")
    editor.lua(f"vim.api.nvim_set_current_buf({input_buf})")
    editor.nvim.input("<CR>")
    editor.wait_event("AcpTurnEnd", count=4)
    assert a.read_text() == "TWO\n"
    assert calls(wire, "session/prompt")[-1]["sessionId"] == "s2"
    text = editor.transcript_text()
    assert "write a.txt TWO" in text and "write a.txt two" not in text

    # <CR> on one of the user's messages in the transcript: its prompt in the input.
    transcript = editor.lua("return require('acp').status().transcript_buf")
    row = editor.transcript().index("write a.txt one") + 1
    editor.lua(f"vim.api.nvim_set_current_buf({transcript}); vim.api.nvim_win_set_cursor(0, {{{row}, 0}})")
    editor.nvim.input("<CR>")
    editor.wait(f"vim.api.nvim_buf_get_lines({input_buf}, 0, -1, false)[1] == 'write a.txt one'")
    assert editor.lua("return require('acp.chat.registry').get().editing") == 1


def test_enter_on_the_mark_where_a_branch_leaves_picks_a_branch(editor: Editor) -> None:
    """The mark names :AcpBranches, yet <CR> on it only moved the cursor down."""
    start(editor, "rewind", 1)
    turn(editor, "one", 1)
    turn(editor, "two", 2)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    row = next(i for i, line in enumerate(editor.transcript()) if "Another branch leaves" in line)
    editor.lua(STUB_UI, 1)
    focus_transcript(editor, row)
    editor.nvim.input("<CR>")
    wait_text(editor, "Switched to branch 1 (2 turns).")
    assert editor.lua("return _G.asked")[0]["prompt"] == "Branches"
    assert "s1: two" in editor.transcript_text()


def test_an_edit_says_so_in_the_input_and_ends_when_the_input_is_emptied(
    editor: Editor,
) -> None:
    """Sending an edit rewinds files and conversation: the input says so while it
    holds one, and a prompt typed after emptying it (or walking the prompt history
    off it) is sent as a new prompt, nothing rewound."""
    wire = start(editor, "rewind", 1)
    a = three_turns(editor)
    screen = Screen(editor, 160, 40)
    input_buf = editor.lua("return require('acp').status().input_buf")
    input_win = editor.lua(f"return vim.fn.bufwinid({input_buf})")

    def input_row() -> str:
        """The input's text and the note under it, as the window shows them."""
        return " ".join(row for row in screen.window(input_win) if row != "~")

    editor.nvim.command("AcpEdit 2")
    editor.wait("require('acp.chat.registry').get().editing == 2")
    assert input_row() == "write a.txt two ← editing turn 2: sent, it rewinds"
    editor.lua(f"vim.api.nvim_set_current_win({input_win})")
    editor.nvim.input("ggdG")
    editor.wait("require('acp.chat.registry').get().editing == nil", what="the edit ended")
    assert "editing" not in input_row()
    editor.nvim.input("iwrite a.txt four<Esc><CR>")  # sent with the input's key
    editor.wait_event("AcpTurnEnd", count=4)
    assert calls(wire, "session/fork") == [] and a.read_text() == "four\n"

    editor.nvim.command("AcpEdit 1")
    editor.wait("require('acp.chat.registry').get().editing == 1")
    editor.nvim.input("<Down>")  # off the edited prompt, to what was typed before it
    editor.wait("require('acp.chat.registry').get().editing == nil", what="the edit ended")
    assert "editing" not in input_row()


def test_a_narrow_input_shows_the_whole_edit_note_under_the_prompt(editor: Editor) -> None:
    """The note that sending the input rewinds stood after the prompt's text, on its
    row: in a chat 24 columns wide it was cut after "← editing turn 2:", and a prompt
    as wide as the window hid it altogether. It wraps under the prompt's last line,
    and follows it there as lines are typed."""
    start(editor, "rewind", 1)
    three_turns(editor)
    screen = Screen(editor, 100, 40)
    input_win = editor.lua("return vim.fn.bufwinid(require('acp').status().input_buf)")
    editor.lua(f"vim.api.nvim_win_set_width({input_win}, 24)")
    editor.nvim.command("AcpEdit 2")
    editor.wait("require('acp.chat.registry').get().editing == 2")

    def shown() -> str:
        return " ".join(" ".join(screen.window(input_win)).split())

    assert shown().startswith("write a.txt two ← editing turn 2: sent, it rewinds")
    editor.lua(f"vim.api.nvim_set_current_win({input_win})")
    editor.nvim.input("othen more<Esc>")
    editor.wait("vim.api.nvim_buf_line_count(require('acp').status().input_buf) == 2")
    assert shown().startswith("write a.txt two then more ← editing turn 2: sent, it rewinds")


def test_an_edit_ends_when_its_turn_leaves_the_view(editor: Editor) -> None:
    """An edit of turn 3 ("beta", after "alpha") still said "editing turn 3" once
    another branch was shown; sent, it rewound that branch's turn 3, took its files
    back and put "beta" after its turn 2, a conversation the user never had. An
    edit of a turn the view still shows as it was (turn 1) goes on."""
    wire = start(editor, "rewind", 1)
    a = three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    turn(editor, "alpha", 4)
    turn(editor, "beta", 5)
    editor.nvim.command("AcpEdit 3")
    editor.wait("require('acp.chat.registry').get().editing == 3")
    show_branch(editor, 1)
    editor.wait("require('acp.chat.registry').get().editing == nil", what="the edit ended")
    assert any("turn 3 is no longer shown" in n["msg"] for n in editor.lua("return _G.acp_notices"))
    assert input_lines(editor) == ["beta"]  # the text stays
    input_buf = editor.lua("return require('acp').status().input_buf")
    editor.lua(f"vim.api.nvim_set_current_buf({input_buf})")
    editor.nvim.input("<CR>")
    editor.wait_event("AcpTurnEnd", count=6)
    # A new prompt: nothing rewound (the files stay as the switch left them; the one
    # fork is the rewind's, before alpha).
    assert a.read_text() == "one\n" and len(calls(wire, "session/fork")) == 1
    assert editor.lua("return require('acp.chat.registry').get().status.turns") == [
        "write a.txt one", "write a.txt two", "write a.txt three", "beta"
    ]

    editor.nvim.command("AcpEdit 1")
    editor.wait("require('acp.chat.registry').get().editing == 1")
    show_branch(editor, 2)  # parts at turn 2: turn 1 is shown as it was
    assert editor.lua("return require('acp.chat.registry').get().editing") == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_regenerate_sends_the_last_prompt_again_from_before_its_answer(
    editor: Editor, version: int
) -> None:
    wire = start(editor, "rewind", version)
    turn(editor, "first", 1)
    turn(editor, "second", 2)
    editor.nvim.command("AcpRegenerate")
    editor.wait_event("AcpTurnEnd", count=3)
    [fork] = calls(wire, "session/fork")
    assert fork["_meta"]["jetbrains"]["air"]["fork"]["messageId"] == "s1-m1"
    last = calls(wire, "session/prompt")[-1]
    assert (last["sessionId"], last["prompt"][-1]["text"]) == ("s2", "second")
    text = editor.transcript_text()
    assert text.count("s1: second") == 0 and "s2: second" in text


def test_an_edit_carries_the_attachments_given_apart_from_its_text(editor: Editor) -> None:
    """A prompt sent with ``send(text, {context = ...})`` then edited (:AcpEdit) went
    without notes.md, which :AcpRegenerate keeps: only the ``@`` mentions of the
    text were attached again. A mention the edit removes (``@b.txt``) goes no more."""
    wire = start(editor, "rewind", 1)
    project = editor.tmp / "project"
    (project / "notes.md").write_text("the notes\n")
    (project / "b.txt").write_text("bee\n")
    editor.lua(
        "require('acp').send(..., {context = {{type = 'file', path = select(2, ...)}}})",
        "look @b.txt", str(project / "notes.md"),
    )  # fmt: skip
    editor.wait_event("AcpTurnEnd", count=1)
    editor.nvim.command("AcpEdit 1")
    editor.wait("require('acp.chat.registry').get().editing == 1")
    input_buf = editor.lua("return require('acp').status().input_buf")
    editor.lua(f"vim.api.nvim_set_current_buf({input_buf})")
    editor.nvim.input("ccagain<Esc><CR>")
    editor.wait_event("AcpTurnEnd", count=2)
    first, edited = (call["prompt"] for call in calls(wire, "session/prompt"))

    def named(blocks: list[dict[str, Any]]) -> list[str]:
        uris = [block.get("resource", block).get("uri", "") for block in blocks]
        return [os.path.basename(uri) for uri in uris if uri]

    assert sorted(named(first)) == ["b.txt", "notes.md"]
    assert named(edited) == ["notes.md"]
    assert [block["text"] for block in edited if block["type"] == "text"] == ["again"]


def kill_the_agent(editor: Editor, scenario: str, errors: int) -> None:
    [pid] = fake_pids(editor, scenario)
    os.kill(pid, signal.SIGKILL)
    editor.wait_event("AcpError", count=errors)


def test_regenerate_and_rewind_start_a_dead_agent_as_a_prompt_would(editor: Editor) -> None:
    """A chat whose agent died refused :AcpRegenerate and :AcpRewind 1 ("the chat has
    no running agent"), where a reopened chat, without an agent too, starts it and
    does them; sending a prompt to it restarts it (|:AcpRestart|)."""
    start(editor, "rewind", 2)
    turn(editor, "first", 1)
    turn(editor, "second", 2)
    kill_the_agent(editor, "rewind", 1)
    editor.lua("vim.api.nvim_buf_set_lines(require('acp').status().input_buf, 0, -1, false, {'my draft'})")
    editor.nvim.command("AcpRegenerate")
    editor.wait_event("AcpTurnEnd", count=3)
    assert editor.lua("return require('acp.chat.registry').get().status.turns") == ["first", "second"]
    after = editor.transcript_text().split("*Rewound to before turn 2, the conversation")[1]
    # Its session resumed by the agent started again, forked at turn 1's reply.
    assert "## You\nsecond\n\n## Agent\ns2: second" in after
    assert input_lines(editor) == ["my draft"]

    kill_the_agent(editor, "rewind", 2)
    editor.nvim.command("AcpRewind 1")
    editor.wait("#require('acp.chat.registry').get().status.turns == 0", what="the rewind")
    assert editor.lua("return require('acp').status().state") == "ready"
    assert "*Rewound to before turn 1, the conversation and the files" in editor.transcript_text()


def test_a_branch_picked_in_a_dead_agent_chat_goes_on_at_the_next_prompt(editor: Editor) -> None:
    """:AcpBranches in a chat whose agent died said "the chat has no running agent";
    as in a reopened chat, it shows the branch now and the next prompt starts the
    agent and goes on in that branch's session."""
    wire = start(editor, "rewind", 2)
    turn(editor, "first", 1)
    turn(editor, "second", 2)
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 2)
    turn(editor, "elsewhere", 3)
    kill_the_agent(editor, "rewind", 1)
    text = show_branch(editor, 1)
    assert "second" in text and "elsewhere" not in text
    assert editor.lua("return require('acp').status().state") == "error"
    turn(editor, "go on", 4)
    assert editor.lua("return require('acp.chat.registry').get().status.turns") == [
        "first", "second", "go on"
    ]
    # Branch 1's session (the first), resumed by the agent started again.
    assert calls(wire, "session/resume")[-1]["sessionId"] == "s1"
    assert calls(wire, "session/prompt")[-1]["sessionId"] == "s1"
    assert "## You\ngo on" in editor.transcript_text().split("*Switched to branch 1")[1]


def test_regenerate_and_rewind_refused_while_the_agent_starts_change_nothing(
    editor: Editor,
) -> None:
    """A refused :AcpRegenerate put the last prompt under the draft in the input;
    :AcpRewind without a turn opened the turn picker, then failed."""
    start(editor, "rewind", 2)
    turn(editor, "first", 1)
    kill_the_agent(editor, "rewind", 1)
    release = editor.tmp / "project" / "release"
    os.mkfifo(release)
    editor.setup(agents={"fake": editor.fake_agent("held_init")}, default_agent="fake")
    editor.nvim.command("AcpRestart")
    editor.wait("require('acp').status().state == 'starting'")
    editor.lua("vim.api.nvim_buf_set_lines(require('acp').status().input_buf, 0, -1, false, {'my draft'})")
    editor.lua(STUB_UI, 1)
    for command in ("AcpRewind", "AcpRegenerate"):
        editor.lua("_G.acp_notices = {}")
        editor.nvim.command(command)
        editor.wait("#_G.acp_notices > 0", what=f"what {command} says")
        assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [f"acp: {STARTING}"]
    assert editor.lua("return _G.asked") == []
    assert input_lines(editor) == ["my draft"]
    with open(release, "wb"):  # the agent answers its initialize now
        pass
    editor.wait_event("AcpSessionReady", count=2)
    assert editor.lua("return require('acp.chat.registry').get().status.turns") == ["first"]


# The user's redo lands right after the review read the buffer their undo left (the
# read that gave the review its text, at the undo's changedtick: not a read left from
# before the undo, nor one whose text Python's copy still lacked), before anything else
# the review asks of Neovim; with TextChanged as Neovim's loop fires it after a command
# (not inside vim.wait, where the test waits).
REDO_AFTER_THE_READ = """
local path = ...
local buffers = require('acp.editor.buffers')
local read, edit = buffers.read, buffers.edit
local state = 'armed'
_G.edited_at = {}
local function redo_once()
  if state == 'read' then
    state = 'redone'
    vim.api.nvim_buf_call(vim.fn.bufnr(path), function() vim.cmd('redo') end)
    vim.api.nvim_exec_autocmds('TextChanged', { buffer = vim.fn.bufnr(path) })
  end
end
buffers.read = function(file, load, want, known, ...)
  if file ~= path then
    return read(file, load, want, known, ...)
  end
  redo_once()
  local result = read(file, load, want, known, ...)
  local text_given = result ~= nil and (result.text ~= nil or (type(known) == 'table' and known[2] == result.tick))
  if state == 'armed' and text_given and result.tick == _G.undo_tick then
    state = 'read'
  end
  return result
end
buffers.edit = function(file, tick, ...)
  if file == path then redo_once() end
  local result = edit(file, tick, ...)
  if file == path then table.insert(_G.edited_at, tick) end
  return result
end
"""


@pytest.mark.parametrize("version", VERSIONS)
def test_an_undo_and_redo_right_after_a_rewind_never_save_the_users_unsaved_text(
    editor: Editor, version: int
) -> None:
    """Decisions 0015 and 0027: the file follows an undo or redo of the agent's lines,
    never with the user's unsaved text. A redo straight after the undo left the disk
    without the undo while the review took it; the redo, followed from there, clashed
    and took the whole buffer to disk, saved (2 runs in 8)."""
    start(editor, "rewind", version)
    a = editor.tmp / "project" / "a.txt"
    a.write_text("zero\nkeep me\n")
    editor.nvim.command(f"wincmd t | edit {a}")
    for number, text in enumerate(
        ("write a.txt one\nkeep me", "write b.txt b-two", "write a.txt three\nkeep me"), 1
    ):
        turn(editor, text, number)
    # Typed in a.txt, not saved: the rewind's restore keeps it in the buffer.
    # The TextChanged Neovim fires before the user's next command: the review has
    # the line before the rewind meets the buffer.
    typed = """local buf = vim.fn.bufnr(...)
    vim.api.nvim_buf_set_lines(buf, 0, 0, false, {'USER TOP LINE'})
    vim.api.nvim_exec_autocmds('TextChanged', { buffer = buf })"""
    editor.lua(typed, str(a))
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    editor.nvim.command(f"wincmd t | buffer {a}")
    kept = "{'USER TOP LINE', 'one', 'keep me'}"
    editor.wait(f"vim.deep_equal(vim.api.nvim_buf_get_lines(0, 0, -1, false), {kept})")
    assert a.read_text() == "one\nkeep me\n"

    editor.lua(REDO_AFTER_THE_READ, str(a))
    undo = """vim.cmd('undo')
    _G.undo_tick = vim.api.nvim_buf_get_changedtick(0)
    vim.api.nvim_exec_autocmds('TextChanged', { buffer = 0 })"""
    editor.lua(undo)
    # Both followed: the last write follows the buffer as the redo left it.
    editor.wait("vim.tbl_contains(_G.edited_at, vim.api.nvim_buf_get_changedtick(0))")
    assert editor.lua(f"return vim.deep_equal(vim.api.nvim_buf_get_lines(0, 0, -1, false), {kept})")
    assert a.read_text() == "one\nkeep me\n"
    assert editor.lua("return vim.bo.modified") is True
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert not [n for n in notices if "clashes" in n]  # each followed, none refused


def test_restore_rewind_and_edit_complete_the_turns_the_transcript_shows(editor: Editor) -> None:
    """After a rewind the review numbers every turn run (4 here), the transcript the
    shown branch's (turn 2): :AcpRestore completes what it takes, the latter, as
    :AcpRewind and :AcpEdit do."""

    def complete(line: str) -> list[str]:
        return list(editor.lua("return vim.fn.getcompletion(..., 'cmdline')", line))

    start(editor, "rewind", 1)
    a = three_turns(editor)
    assert complete("AcpRewind ") == complete("AcpEdit ") == ["3", "2", "1"]
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    turn(editor, "write a.txt again", 4)
    assert complete("AcpRestore ") == complete("AcpRewind ") == complete("AcpEdit ") == ["2", "1"]
    assert complete("AcpEdit 1") == ["1"]
    editor.nvim.command("AcpRestore 2")
    wait_text(editor, "Restored the files to before turn 2")
    assert a.read_text() == "one\n"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("how", ["api", "key"])
def test_send_now_steers_where_the_agent_steers(editor: Editor, version: int, how: str) -> None:
    wire = start(editor, "rewind+steer", version)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    if how == "api":
        editor.lua("require('acp').send('turn left', {now = true})")
    else:  # the input's chat.send_now_key
        input_buf = editor.lua("return require('acp').status().input_buf")
        editor.lua(f"vim.api.nvim_set_current_buf({input_buf})")
        editor.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'turn left'})")
        editor.nvim.input("<M-CR>")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    [steering] = calls(wire, "_session/steering")
    assert steering["idleBehavior"] == "promptRequired"
    assert steering["prompt"] == [{"type": "text", "text": "turn left"}]
    assert calls(wire, "session/cancel") == []
    # What the agent streamed on in the same message (its id) ends the line it was
    # writing, above the user's message: no word cut in two blocks.
    text = editor.transcript_text()
    assert (
        "## Agent\nholding steered: turn left\n\n"
        "## You\nturn left\n\n*Sent into the running turn.*"
    ) in text
    assert len(calls(wire, "session/prompt")) == 1
    # One turn, as :AcpChats counts it: the steered message is of that turn.
    assert [c["turns"] for c in editor.lua("return require('acp').chats()")] == [1]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_too_late_for_the_turn_goes_as_the_next_prompt(
    editor: Editor, version: int
) -> None:
    """The agent's turn ended as the message came: it answers ``promptRequired``
    (``noRunningTurn``, as Claude's and Codex's adapters do). The message is the next
    prompt once the turn has ended; nothing is cancelled, nothing shown as steered."""
    wire = start(editor, "rewind+steer+late", version)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').send('turn left', {now = true})")
    assert editor.wait_event("AcpTurnEnd", count=2)["stop_reason"] == "end_turn"
    assert len(calls(wire, "_session/steering")) == 1
    assert [p["prompt"][-1]["text"] for p in calls(wire, "session/prompt")] == ["hold", "turn left"]
    assert calls(wire, "session/cancel") == []
    text = editor.transcript_text()
    assert "Sent into the running turn" not in text
    assert "## Agent\nholding done" in text and "## You\nturn left\n" in text
    assert "s1: turn left" in text


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_whose_steering_fails_waits_for_the_turn_and_stops_nothing(
    editor: Editor, version: int
) -> None:
    """The agent failed the ``_session/steering`` request: "send now" then cancelled
    the turn and sent the message first, though the user asked to add a message,
    not to stop the agent. It waits in the queue and goes when the turn ends."""
    os.mkfifo(editor.tmp / "project" / "release")
    wire = start(editor, "rewind+steer+release+broken", version)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').send('turn left', {now = true})")
    assert "steering broke" in editor.wait_event("AcpError")["message"]
    wait_text(editor, "waits in the queue")
    # The queue's count comes in a status of its own, maybe drawn after the notice.
    editor.wait("require('acp').status().queued == 1", what="the message queued")
    release(editor)
    assert editor.wait_event("AcpTurnEnd", count=2)["stop_reason"] == "end_turn"
    assert calls(wire, "session/cancel") == []
    assert [p["prompt"][-1]["text"] for p in calls(wire, "session/prompt")] == ["hold", "turn left"]
    text = editor.transcript_text()
    assert "## Agent\nholding done" in text and "s1: turn left" in text


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_the_agent_never_takes_into_the_turn_comes_back_when_the_turn_ends(
    editor: Editor, version: int
) -> None:
    """The agent never answered the ``_session/steering`` request: the message sent
    now was shown nowhere, neither in the transcript nor queued nor in the input,
    once the user cancelled the turn; it was lost. It is back in the input."""
    calls_file = editor.tmp / "calls.jsonl"
    env = {"FAKE_CALLS": str(calls_file), "FAKE_FAULT": "hang:_session/steering"}
    agent = {"cmd": [sys.executable, str(FAKE), "rewind+steer"], "env": env}
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.open_chat()
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').send('turn left', {now = true})")
    wait_asked(editor, calls_file, "_session/steering")
    editor.lua("require('acp').cancel()")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'turn left'")  # fmt: skip
    wait_text(editor, "it is back in the input")
    assert [p["prompt"][-1]["text"] for p in calls(calls_file, "session/prompt")] == ["hold"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_steered_in_a_code_block_parts_after_the_block(
    editor: Editor, version: int
) -> None:
    """Parted inside a code block, the agent's message left its fence open above the
    user's message: Markdown read the user's message as code, and the closing fence
    that came after opened a block running to the transcript's end."""
    start(editor, "rewind+steer", version)
    editor.lua("require('acp').send('hold code')")
    wait_text(editor, "x = 1")
    editor.lua("require('acp').send('turn left', {now = true})")
    editor.wait_event("AcpTurnEnd")
    text = editor.transcript_text()
    before, steered, after = text.partition("## You\nturn left\n")
    assert steered and "y = 2\n```" in before  # the block closes above it
    assert before.count("```") % 2 == 0 and after.count("```") % 2 == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_send_now_cancels_then_sends_first_elsewhere(editor: Editor, version: int) -> None:
    wire = start(editor, "rewind", version)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').send('later')")  # queued
    editor.nvim.command("AcpSend! turn left")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    editor.wait_event("AcpTurnEnd", count=3)
    assert calls(wire, "_session/steering") == []
    prompts = [p["prompt"][-1]["text"] for p in calls(wire, "session/prompt")]
    assert prompts == ["hold", "turn left", "later"]
    methods = [m for m, _ in calls(wire)]
    assert methods.index("session/cancel") < len(methods) - methods[::-1].index("session/prompt")


@pytest.mark.parametrize("version", VERSIONS)
def test_two_messages_sent_now_go_in_the_order_sent(editor: Editor, version: int) -> None:
    """Without steering, each message sent now went to the front of the queue: two
    sent before the agent ended the turn went last first, and the queue showed
    `queued 1/2 · two`."""
    wire = start(editor, "rewind", version)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').send('later')")  # queued
    editor.lua("require('acp').send('one', {now = true}); require('acp').send('two', {now = true})")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    editor.wait_event("AcpTurnEnd", count=4)
    prompts = [p["prompt"][-1]["text"] for p in calls(wire, "session/prompt")]
    assert prompts == ["hold", "one", "two", "later"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_sent_now_after_a_cancel_waits_for_the_turn_to_end(
    editor: Editor, version: int
) -> None:
    """<C-c>, then a message sent now while the agent still ends the turn: it was
    steered into the turn being stopped ("Sent into the running turn" under a turn
    the user cancelled, its answer muted should the agent be left behind), and an
    agent without steering was sent a second cancel. Written after the cancel, it
    goes first once the turn has ended (decision 0080)."""
    wire = start(editor, "rewind+deaf+steer", version)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').cancel()")
    editor.wait("require('acp').status().turn_state == 'cancelling'")
    editor.lua("require('acp').send('turn left', {now = true})")
    editor.wait("require('acp').status().queued == 1 or require('acp').status().state == 'ready'")
    assert calls(wire, "_session/steering") == []
    assert editor.lua("return require('acp').queue()") == ["turn left"]
    # The agent ignores the cancel: the turn ends here, and the message goes next.
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    wait_text(editor, "## You\nturn left")
    assert "Sent into the running turn" not in editor.transcript_text()
    assert len(calls(wire, "session/cancel")) == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rejected_hunks_reason_reaches_the_agent(editor: Editor, version: int) -> None:
    wire = start(editor, "rewind", version)
    turn(editor, "write a.txt one", 1)
    path = str(editor.tmp / "project" / "a.txt")
    editor.wait("#require('acp').changes() == 1")
    editor.lua("require('acp').reject(..., nil, {reason = 'keep it empty'})", path)
    editor.wait_event("AcpTurnEnd", count=2)
    said = calls(wire, "session/prompt")[-1]["prompt"][-1]["text"]
    assert said == "I rejected your change to `a.txt`: keep it empty"
    assert not (editor.tmp / "project" / "a.txt").exists()


def cancel_noting_turn_states(editor: Editor) -> None:
    """:AcpCancel, with every turn state the winbar draws from now on noted in
    ``_G.turn_states`` (one the user saw only between two waits is kept too)."""
    editor.lua(
        """
        local winbar = require('acp.chat.winbar')
        local update = winbar.update
        _G.turn_states = {}
        winbar.update = function(chat)
          table.insert(_G.turn_states, chat.status.turn_state)
          return update(chat)
        end
        require('acp').cancel()
        """
    )

def test_a_cancel_at_a_permission_prompt_says_cancelling_until_the_turn_ends(
    editor: Editor,
) -> None:
    """<C-c> at a permission prompt answered it `cancelled`, and the answer set the
    turn back to "running": the winbar and status().turn_state said the agent worked
    on while it was being stopped, until it ended the turn."""
    calls_file = editor.tmp / "calls.jsonl"
    agent = {"cmd": [sys.executable, str(FAKE), "rewind"], "env": {"FAKE_CALLS": str(calls_file)}}
    # The agent ends the turn on its own, 5 s after the answer: before the client would.
    editor.setup(agents={"fake": agent}, default_agent="fake", timeouts={"cancel": 60})
    editor.open_chat()
    editor.lua("require('acp').send('ask')")
    editor.wait("require('acp').status().turn_state == 'requires_action'")
    cancel_noting_turn_states(editor)
    wait_text(editor, "answered None")  # the agent goes on once answered `cancelled`
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    states = editor.lua("return _G.turn_states")
    assert states[-1] == "idle" and set(states[:-1]) == {"cancelling"}, states


def test_a_cancel_says_cancelling_though_the_agent_reports_itself_running(
    editor: Editor,
) -> None:
    """A v2 agent still running a tool as <C-c> came reported ``running``, then
    ``requires_action`` with a permission request, before it ended the turn: each
    set "cancelling" back, as if the turn went on. The request is answered
    ``cancelled``, nobody asked."""
    calls_file = editor.tmp / "calls.jsonl"
    agent = {"cmd": [sys.executable, str(FAKE), "rewind+busy"], "env": {"FAKE_CALLS": str(calls_file)}}
    editor.setup(
        agents={"fake": agent}, default_agent="fake", protocol_version=2, timeouts={"cancel": 60}
    )
    editor.open_chat()
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    cancel_noting_turn_states(editor)
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    states = editor.lua("return _G.turn_states")
    assert states[-1] == "idle" and set(states[:-1]) == {"cancelling"}, states
    assert calls(calls_file, "answered") == [{"outcome": {"outcome": "cancelled"}}]


def test_a_rejected_permissions_reason_reaches_the_agent(editor: Editor) -> None:
    editor.setup(agents={"fake": editor.fake_agent("permission")}, default_agent="fake")
    editor.open_chat()
    editor.lua("require('acp').send('edit')")
    wait_text(editor, "- `s` Reject, and say why")
    editor.lua(STUB_UI, "not that file")
    transcript = editor.lua("return require('acp').status().transcript_buf")
    editor.lua(f"vim.api.nvim_set_current_buf({transcript})")
    editor.nvim.input("s")
    wait_text(editor, "permission: selected cancel")  # the reject option, answered
    wait_text(editor, "I rejected Fake edit: not that file")  # the next prompt
    assert editor.lua("return _G.asked")[0]["prompt"] == "Why reject Fake edit? "


def test_a_rejected_permissions_reason_shows_above_what_a_fast_agent_says_next(
    editor: Editor,
) -> None:
    """Steered in after the answer, the reason showed when `injected` came back: below
    what a fast agent had said by then. Told first, it shows where it went in."""
    start(editor, "rewind+steer", 1)
    editor.lua("require('acp').send('ask')")
    wait_text(editor, "- `s` Reject, and say why")
    editor.lua(STUB_UI, "keep them")
    transcript = editor.lua("return require('acp').status().transcript_buf")
    editor.lua(f"vim.api.nvim_set_current_buf({transcript})")
    editor.nvim.input("s")
    editor.wait_event("AcpTurnEnd")
    text = editor.transcript_text()
    reason = text.index("## You\nI rejected Delete notes: keep them")
    assert reason < text.index("answered no") < text.index("steered: I rejected Delete notes")


@pytest.mark.parametrize("version", VERSIONS)
def test_each_turn_shows_what_it_used(editor: Editor, version: int) -> None:
    start(editor, "rewind", version)
    turn(editor, "one", 1)
    assert "*— end_turn · 1.2k tokens · $0.05 —*" in editor.transcript()
    turn(editor, "two", 2)
    usage = editor.lua("return require('acp').status().usage")
    assert usage["turn"] == {"tokens": 1234, "cost": {"amount": pytest.approx(0.05), "currency": "USD"}}
    assert usage["session"]["tokens"] == 2468
    assert usage["session"]["cost"]["amount"] == pytest.approx(0.10)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_forks_first_turn_counts_from_the_context_it_was_given(
    editor: Editor, version: int
) -> None:
    """A session forked at a message starts with the parent's context up to there: its
    first turn showed that whole context as what the turn used."""
    start(editor, "rewind", version)
    for number, word in enumerate(("one", "two", "three"), 1):
        turn(editor, word, number)
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 2)
    turn(editor, "two again", 4)
    # The fork holds turn 1 (1234 tokens); the turn added 1234. Its cost is the
    # agent's report (this one counts the parent's in: nothing says whether real ones do).
    assert editor.transcript()[-1] == "*— end_turn · 1.2k tokens · $0.10 —*"
    assert editor.lua("return require('acp').status().usage")["turn"]["tokens"] == 1234


@pytest.mark.parametrize("version", VERSIONS)
def test_compaction_is_a_folded_block_and_a_notice_one_line(editor: Editor, version: int) -> None:
    start(editor, "rewind", version)
    turn(editor, "compact", 1)
    lines = editor.transcript()
    start_row = lines.index("#### Context compacted")
    assert lines[start_row + 1] == "Kept: the plan."
    assert "*⚠ Context compacted — older turns summarised*" in lines
    kind = editor.lua(
        "local c = require('acp.chat.registry').get()"
        " return require('acp.chat.blocks').kind_at(c.transcript, c.blocks, ...)",
        start_row + 1,
    )
    # (Over v1 the fake compacts only where the client advertised compaction.)
    assert kind == "compaction"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_compaction_patched_with_null_clears_its_summary_and_error(
    editor: Editor, version: int
) -> None:
    """The compaction contract the client advertises over v1: ``summary`` and
    ``error`` are patches, ``null`` clears them. Over v1 a null was read as left out:
    the cleared summary and error stayed on screen."""
    start(editor, "rewind", version)
    turn(editor, "compact", 1)
    turn(editor, "uncompact", 2)
    lines = editor.transcript()
    first = lines.index("#### Context compacted")
    assert lines[first + 1] != "Kept: the plan." and "Kept: the plan." not in lines
    failed = lines.index("#### Context compaction failed")
    assert not lines[failed + 1].startswith("**Error:**")
    assert "**Error:** summariser busy" not in lines


@pytest.mark.parametrize("version", VERSIONS)
def test_a_tool_calls_name_reaches_the_tool_call_event(editor: Editor, version: int) -> None:
    """The unstable tool-call ``name`` (the tool's own, as Claude's and Codex's
    adapters send it): an autocmd on AcpToolCall can tell tools apart without
    reading titles. It was dropped."""
    start(editor, "rewind", version)
    turn(editor, "write a.txt hi", 1)
    calls = editor.events("AcpToolCall")
    assert [(c["status"], c.get("name")) for c in calls] == [
        ("in_progress", "Write"),
        ("completed", "Write"),
    ]


def test_rewind_without_a_turn_picks_one_and_the_queue_sends_now(editor: Editor) -> None:
    wire = start(editor, "rewind", 1)
    turn(editor, "first", 1)
    turn(editor, "second\nline two", 2)
    editor.lua(STUB_UI, 1)  # newest first, as the completion: turn 2
    editor.nvim.command("AcpRewind")
    session_changed(editor, 2)
    assert editor.lua("return _G.asked")[0]["items"] == ["turn 2 · second", "turn 1 · first"]
    point = calls(wire, "session/fork")[0]["_meta"]["jetbrains"]["air"]["fork"]
    assert point["messageId"] == "s1-m1"

    # :AcpQueue's "send now": the picked prompt goes first (the turn is cancelled).
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    for text in ("later", "sooner"):
        editor.lua("require('acp').send(...)", text)
    editor.wait("require('acp').status().queued == 2")
    editor.lua(STUB_UI, 2, 3)  # "sooner", then "send now"
    editor.nvim.command("AcpQueue")
    editor.wait_event("AcpTurnEnd", count=5)
    prompts = [p["prompt"][-1]["text"] for p in calls(wire, "session/prompt")]
    assert prompts[-3:] == ["hold", "sooner", "later"]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_hunk_key_rejects_and_says_why(editor: Editor, version: int) -> None:
    wire = start(editor, "rewind", version)
    a = editor.tmp / "project" / "a.txt"
    a.write_text("zero\n")
    buf = editor.lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b", str(a))
    turn(editor, "write a.txt one", 1)
    editor.wait("#require('acp').changes() == 1")
    editor.lua(f"vim.api.nvim_set_current_buf({buf}); vim.api.nvim_win_set_cursor(0, {{1, 0}})")
    editor.lua(STUB_UI, "zero is right")
    editor.nvim.command("AcpHunk reject_why")
    editor.wait_event("AcpTurnEnd", count=2)
    said = calls(wire, "session/prompt")[-1]["prompt"][-1]["text"]
    assert said == "I rejected your change to `a.txt`: zero is right"
    assert a.read_text() == "zero\n"


def review_headings(editor: Editor) -> list[str]:
    """The turn headings of the current chat's :AcpReview, drawn anew."""
    editor.nvim.command("AcpReview")
    lines = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    editor.nvim.command("tabclose")
    return [line for line in lines if line.startswith("Turn ")]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_review_says_which_turns_the_transcript_shows_and_as_which(
    editor: Editor, version: int
) -> None:
    """The review numbers every turn run, the transcript those of the branch shown:
    once they part, each review turn says where it is."""
    start(editor, "rewind", version)
    three_turns(editor)
    assert review_headings(editor) == ["Turn 3 (latest)", "Turn 2", "Turn 1"]
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    turn(editor, "write b.txt new", 4)
    other = " · on another branch (:AcpBranches)"
    assert review_headings(editor) == [
        "Turn 4 (latest) · turn 2 of the transcript",
        "Turn 3" + other,
        "Turn 2" + other,
        "Turn 1",
    ]
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "write a.txt three")
    # The review hears of the branch shown in a notification of its own, which may
    # come after the transcript's.
    editor.wait(
        "vim.deep_equal(require('acp.review.state').by_chat[require('acp').status().chat]"
        ".shown, { 1, 2, 3, vim.NIL })",
        what="the review told of the branch shown",
    )
    assert review_headings(editor) == ["Turn 4 (latest)" + other, "Turn 3", "Turn 2", "Turn 1"]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_demo_takes_a_steered_message_at_its_next_paragraph(
    editor: Editor, version: int
) -> None:
    """As a model takes a steered message at its next step: the long reply stops at
    its paragraph's end (the rest of that paragraph below the user's message, as it
    came) and the answer is a message of its own (the demo had streamed the whole
    reply above the user's message first)."""
    paced = {
        "cmd": [sys.executable, "-m", "acp_nvim.demo_agent"],
        "env": {"ACP_DEMO_DELAY": "0.002", "PYTHONPATH": str(ROOT)},
    }
    editor.setup(agents={"paced": paced}, default_agent="paced", protocol_version=version)
    editor.open_chat()
    editor.lua("require('acp').send('long')")
    wait_text(editor, "word3 ")
    editor.lua("require('acp').send('shorter please', {now = true})")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    assert not any("word40 " in line for line in lines)  # cut at the first paragraph's end
    steered = lines.index("shorter please")
    assert lines[steered - 1] == "## You"
    answer = next(i for i, line in enumerate(lines) if line.startswith("You added, while"))
    assert answer > steered and lines[answer - 1] == "## Agent"
    assert lines[answer].endswith("“shorter please”. Noted — I will take it into account.")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_demo_agent_forks_at_a_message_steers_and_compacts(
    editor: Editor, version: int
) -> None:
    editor.setup(protocol_version=version)
    first = editor.open_chat()["session_id"]
    turn(editor, "hello", 1)
    turn(editor, "again", 2)
    editor.lua("require('acp').rewind(2)")
    forked = session_changed(editor, 2)["session_id"]
    assert forked != first
    text = editor.transcript_text()
    assert "hello" in text and "## You\nagain" not in text
    assert "Continued in a new session" not in text  # a fork, not a seeded session

    # The permission prompt holds the turn: the steered message joins it.
    editor.lua("require('acp').send('permission')")
    wait_text(editor, "Permission needed")
    editor.lua("require('acp').send('shorter please', {now = true})")
    wait_text(editor, "Sent into the running turn.")
    transcript = editor.lua("return require('acp').status().transcript_buf")
    editor.lua(f"vim.api.nvim_set_current_buf({transcript})")
    editor.nvim.input("a")
    editor.wait_event("AcpTurnEnd", count=3)
    wait_text(editor, "You added, while I was working: “shorter please”")
    lines = editor.transcript()
    added = next(i for i, line in enumerate(lines) if line.startswith("You added"))
    assert lines[added - 1] == "## Agent"  # the reply's block opens on its text

    turn(editor, "compact", 4)
    lines = editor.transcript()
    assert "#### Context compacted" in lines
    assert "*Context compacted — the older turns are summarised*" in lines
    # The context shrank; what was spent did not.
    [end] = [line for line in lines if line.startswith("*— end_turn")][-1:]
    assert " · $0." in end and "$-" not in end, end


def test_a_branch_picked_after_a_restart_goes_on_in_a_seeded_session(editor: Editor) -> None:
    """The restarted agent does not hold the branch's session (its own first session
    may even have the same id) and resumes none: a new session gets the branch's
    conversation."""
    wire = start(editor, "rewind", 1)
    three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    editor.nvim.command("AcpRestart")
    assert session_changed(editor, 3)["session_id"] == "s1"  # the new process's own
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    assert session_changed(editor, 4)["session_id"] == "s2"
    wait_text(editor, "write a.txt three")
    turn(editor, "go on", 4)
    seed, text = calls(wire, "session/prompt")[-1]["prompt"]
    assert text == {"type": "text", "text": "go on"}
    assert all(f"write a.txt {word}" in seed["text"] for word in ("one", "two", "three"))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_branch_picked_after_a_restart_is_resumed_where_the_agent_resumes(
    editor: Editor, version: int
) -> None:
    wire = start(editor, "rewind+resume", version)
    three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    editor.nvim.command("AcpRestart")
    assert session_changed(editor, 3)["session_id"] == "s2"  # resumed
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    assert session_changed(editor, 4)["session_id"] == "s1"
    assert [c["sessionId"] for c in calls(wire, "session/resume")] == ["s2", "s1"]
    turn(editor, "go on", 4)
    last = calls(wire, "session/prompt")[-1]
    assert last["sessionId"] == "s1" and last["prompt"] == [{"type": "text", "text": "go on"}]


@pytest.mark.parametrize(("scenario", "version"), [("rewind", 1), ("rewind", 2), ("rewind+resume", 1)])
def test_a_rewind_right_after_a_restart_tells_the_agent_only_the_turns_before(
    editor: Editor, scenario: str, version: int
) -> None:
    """After :AcpRestart the agent (resuming nothing) went on in a new session, named
    as the first one was; :AcpRewind 2 forked that one, at a message it never had,
    and the next prompt still carried the whole conversation: turns 2 and 3 too,
    whose files were just taken back. An agent that resumed the session forks it
    (v2 agents resume)."""
    wire = start(editor, scenario, version)
    a = three_turns(editor)
    editor.nvim.command("AcpRestart")
    session_changed(editor, 2)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 3)
    assert a.read_text() == "one\n"
    turn(editor, "go on", 4)
    if "resume" in scenario or version == 2:  # resumed (v2 always): where turn 1 ran
        [fork] = calls(wire, "session/fork")
        assert (fork["sessionId"], fork["_meta"]["jetbrains"]["air"]["fork"]["messageId"]) == (
            "s1", "s1-m1"
        )
        last = calls(wire, "session/prompt")[-1]
        assert last == {"sessionId": "s2", "prompt": [{"type": "text", "text": "go on"}]}
        return
    assert not calls(wire, "session/fork")
    seed, said = calls(wire, "session/prompt")[-1]["prompt"]
    assert said == {"type": "text", "text": "go on"}
    assert "write a.txt one" in seed["text"]
    assert "write a.txt two" not in seed["text"] and "write a.txt three" not in seed["text"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rewind_reaches_a_buffer_holding_unsaved_typing(editor: Editor, version: int) -> None:
    """The agent wrote a.txt on disk (its buffer took each change); then the user
    typed a line there, unsaved. :AcpRewind 2 took the disk back but left the buffer
    showing turn 3's text: the user's next :write (after Neovim's question) put it
    back, undoing the rewind for that file. The buffer gets the rewind too, their
    line kept, still unsaved."""
    start(editor, "rewind", version)
    a = three_turns(editor)
    buf = editor.lua("return vim.fn.bufnr(...)", str(a))
    editor.lua("vim.api.nvim_buf_set_lines(..., -1, -1, false, {'typed by me'})", buf)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    assert a.read_text() == "one\n"
    editor.wait(
        f"vim.api.nvim_buf_get_lines({buf}, 0, 1, false)[1] == 'one'", what="the buffer rewound"
    )
    assert editor.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == [
        "one", "typed by me"
    ]
    assert editor.lua("return vim.bo[...].modified", buf)
    # Neovim's "changed since reading it" is answered: the buffer holds the change.
    editor.lua("vim.api.nvim_buf_call(..., function() vim.cmd('write') end)", buf)
    assert a.read_text() == "one\ntyped by me\n"


def test_a_reject_reaches_a_buffer_holding_unsaved_typing(editor: Editor) -> None:
    """As a rewind's restore: the agent's line rejected went off the disk only, the
    buffer (holding it and the user's unsaved line) kept showing it."""
    start(editor, "rewind", 1)
    a = editor.tmp / "project" / "a.txt"
    a.write_text("zero\n")
    buf = editor.lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b", str(a))
    turn(editor, "write a.txt one", 1)
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 0, 1, false)[1] == 'one'")
    editor.lua("vim.api.nvim_buf_set_lines(..., -1, -1, false, {'typed by me'})", buf)
    editor.lua("require('acp').reject(...)", str(a))
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 0, 1, false)[1] == 'zero'", what="the reject")
    assert a.read_text() == "zero\n"
    assert editor.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == [
        "zero", "typed by me"
    ]
    assert editor.lua("return vim.bo[...].modified", buf)


def test_what_is_asked_right_after_a_restart_waits_for_it(editor: Editor) -> None:
    """:AcpRestart then a prompt at once: the prompt, taking the chat (its agent
    released) for a reopened one, started it a second time; the chat went on in two
    new sessions, each told the conversation (the note twice, once inside the turn).
    :AcpRewind 2 at once took the chat for a reopened one too: the conversation went
    back, the files did not ("the files stay as they are"). Both wait for the
    restart: the prompt is queued, the rewind refused as while any agent starts."""
    wire = start(editor, "rewind", 1)
    a = three_turns(editor)
    editor.lua("vim.cmd.AcpRestart(); require('acp').send('go on')")
    editor.wait_event("AcpTurnEnd", count=4)
    assert [m for m, _ in calls(wire)][-2:] == ["session/new", "session/prompt"]
    assert len(calls(wire, "session/new")) == 2
    status = editor.lua("return require('acp').status()")
    assert calls(wire, "session/prompt")[-1]["sessionId"] == status["session_id"]
    assert editor.transcript_text().count("starts a new session") == 1

    editor.lua("_G.acp_notices = {}")
    editor.lua("vim.cmd.AcpRestart(); require('acp').rewind(2)")
    session_changed(editor, 3)
    assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [f"acp: {STARTING}"]
    assert "the files stay as they are" not in editor.transcript_text()
    assert editor.lua("return #require('acp.chat.registry').get().status.turns") == 4
    assert a.read_text() == "three\n"


def test_a_rewind_into_a_reopened_chats_stored_turns_says_what_it_took_back(
    editor: Editor,
) -> None:
    """Reopened, then a turn sent: :AcpRewind 2 took back that turn's file only (what
    the stored turns changed has no record here), yet said "Rewound to before turn
    2, the conversation and the files (`b.txt`)", as if a.txt were back to turn 1's;
    :AcpRestore alike."""
    start(editor, "rewind", 1)
    a = three_turns(editor)
    kept(editor, "three")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    turn(editor, "write b.txt new", 4)
    b = editor.tmp / "project" / "b.txt"
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 3)
    assert a.read_text() == "three\n" and not b.exists()
    assert (
        "*Rewound to before turn 2, the conversation and the files of the turns run here"
        " (`b.txt`); what turns 2 to 3 changed stays as it is.*"
    ) in editor.transcript_text()
    # So does :AcpRestore.
    turn(editor, "write c.txt new", 5)
    editor.nvim.command("AcpRestore 1")
    wait_text(editor, "Restored the files")
    assert "*Restored the files to before turn 1: `c.txt`; what turn 1 changed stays as it is.*" in (
        editor.transcript_text()
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_a_fork_the_agent_refuses_goes_on_in_a_new_session_told_the_conversation(
    editor: Editor, version: int
) -> None:
    wire = start(editor, "rewind+nofork", version)
    a = three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    assert a.read_text() == "one\n"
    assert "*The fork at turn 1 failed (agent 'fake' failed forking a session: -32603" in (
        editor.transcript_text()
    )
    turn(editor, "go on", 4)
    seed, said = calls(wire, "session/prompt")[-1]["prompt"]
    assert said == {"type": "text", "text": "go on"}
    assert "write a.txt one" in seed["text"] and "write a.txt two" not in seed["text"]


@pytest.mark.parametrize(
    ("scenario", "version"),
    [("rewind+resume+load", 1), ("rewind+resume+load", 2), ("rewind+resume+load+after", 2)],
)
def test_a_resumed_sessions_replayed_history_is_turns_to_go_back_to(
    editor: Editor, scenario: str, version: int
) -> None:
    """After :AcpResume the replayed messages showed, but rewind(2) said "no turn was
    sent yet" and :AcpEdit found no prompt; and so again where a v2 agent replays
    once it has answered the resume ("after")."""
    wire = start(editor, scenario, version)
    editor.nvim.command("AcpResume s9")
    session_changed(editor, 2)
    wait_text(editor, "s9: two")
    editor.nvim.command("AcpEdit 1")
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'one'")  # fmt: skip
    editor.lua("vim.api.nvim_buf_set_lines(require('acp').status().input_buf, 0, -1, false, {})")
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 3)
    # The conversation forks at the replayed answer of turn 1, as the agent named it.
    [fork] = calls(wire, "session/fork")
    assert fork["sessionId"] == "s9"
    assert fork["_meta"] == {"jetbrains": {"air": {"fork": {"version": 1, "messageId": "s9-m1"}}}}
    text = editor.transcript_text()
    assert "s9: one" in text and "s9: two" not in text
    # Its files: never seen here, so not taken back, and the user is told.
    assert "what turn 2 changed stays as it is" in text
    # <CR> on a replayed message edits it too.
    transcript = editor.lua("return require('acp').status().transcript_buf")
    row = editor.transcript().index("one") + 1
    editor.lua(f"vim.api.nvim_set_current_buf({transcript}); vim.api.nvim_win_set_cursor(0, {{{row}, 0}})")
    editor.nvim.input("<CR>")
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'one'")  # fmt: skip
    editor.lua("vim.api.nvim_buf_set_lines(require('acp').status().input_buf, 0, -1, false, {})")
    # The history keeps the replayed turns as turns: reopened, the branch shown
    # leaves the rewound one out, and the other is there to pick.
    turn(editor, "three", 1)
    kept(editor, "three")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    text = editor.transcript_text()
    assert "s9: one" in text and "s10: three" in text and "s9: two" not in text
    branches = editor.lua("return require('acp').branches()")
    assert [(b["turns"], b["last_prompt"]) for b in branches] == [(2, "three"), (2, "two")]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_steered_into_a_turn_is_of_that_turn_when_its_session_is_resumed(
    editor: Editor, version: int
) -> None:
    """A message steered into turn 2 was part of it; :AcpResume of the session
    replayed it as a user message like any other, which began a turn of its own:
    three turns where the user had seen two, and turn 3 was no turn they sent. (Its
    words are turn 1's too: that one stays a turn.)"""
    start(editor, "rewind+steer+resume+load", version)
    turn(editor, "go", 1)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').send('go', {now = true})")
    editor.wait_event("AcpTurnEnd", count=2)
    wait_text(editor, "steered: go")
    live = editor.lua("return require('acp.chat.registry').get().status.turns")
    assert live == ["go", "hold"]
    kept(editor, "steered")
    editor.nvim.command("AcpChat!")  # a new chat: the agent goes on for it
    session_changed(editor, 2)
    editor.lua("require('acp.chat').close(require('acp.chat.registry').chats[1], true)")
    editor.wait("require('acp.chat.registry').chats[1] == nil", what="its chat closed")
    editor.nvim.command("AcpResume s1")
    session_changed(editor, 3)
    wait_text(editor, "steered: go")
    resumed = editor.lua("return require('acp.chat.registry').get().status.turns")
    assert resumed == live
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 4)
    text = editor.transcript_text()
    assert "s1: go" in text and "holding" not in text and "steered" not in text


@pytest.mark.parametrize("version", VERSIONS)
def test_a_steered_message_of_a_session_the_history_does_not_know_is_a_turn_to_go_back_to(
    editor: Editor, version: int
) -> None:
    """Kept so on purpose (decision 0088): with nothing to read the replay against
    (the agent's chats not kept), the message steered into turn 2 comes back as turn
    3, with no answer of its own; going back to before it is a rewind as to any
    turn: the conversation forks at turn 2's answer, and turns 1 and 2 stay."""
    wire = editor.tmp / "calls.jsonl"
    agent = {"cmd": [sys.executable, str(FAKE), "rewind+steer+resume+load"],
             "env": {"FAKE_CALLS": str(wire)}, "history": False}  # fmt: skip
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.open_chat()
    turn(editor, "go", 1)
    editor.lua("require('acp').send('hold')")
    wait_text(editor, "holding")
    editor.lua("require('acp').send('go', {now = true})")
    editor.wait_event("AcpTurnEnd", count=2)
    editor.nvim.command("AcpChat!")
    session_changed(editor, 2)
    editor.lua("require('acp.chat').close(require('acp.chat.registry').chats[1], true)")
    editor.wait("require('acp.chat.registry').chats[1] == nil", what="its chat closed")
    editor.nvim.command("AcpResume s1")
    session_changed(editor, 3)
    wait_text(editor, "steered: go")
    turns = "require('acp.chat.registry').get().status.turns"
    assert editor.lua(f"return {turns}") == ["go", "hold", "go"]
    editor.lua("require('acp').rewind(3)")
    session_changed(editor, 4)
    assert editor.lua(f"return {turns}") == ["go", "hold"]
    assert calls(wire, "session/fork")[-1]["_meta"]["jetbrains"]["air"]["fork"]["messageId"] == "s1-m2"
    assert "Rewound to before turn 3" in editor.transcript_text()


def test_a_replayed_prompt_with_a_file_is_edited_as_its_words(editor: Editor) -> None:
    """A v2 agent replays a user message that carried a file: the transcript names it
    on its Attached line, and :AcpEdit of that turn put that line in the input, to be
    sent as words of the prompt."""
    start(editor, "rewind+resume+load+attach", 2)
    editor.nvim.command("AcpResume s9")
    session_changed(editor, 2)
    wait_text(editor, "s9: two")
    assert "one\n\n*Attached: a.py*" in editor.transcript_text()
    editor.nvim.command("AcpEdit 1")
    editor.wait("require('acp.chat.registry').get().editing == 1")
    assert editor.lua("return vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)") == ["one"]


def leave_a_turn_to_the_agent(editor: Editor, scenario: str, version: int) -> Path:
    """Turn 1, then a held turn 2 cancelled, which the ``scenario`` agent never
    ends: it ends here, left to the agent. The agent's calls file."""
    calls_file = hold_a_turn(editor, scenario, version)
    editor.lua("require('acp').cancel()")
    assert editor.wait_event("AcpTurnEnd", count=2)["stop_reason"] == "cancelled"
    return calls_file


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_sent_now_while_the_prompt_waits_behind_a_turn_left_is_not_steered_into_it(
    editor: Editor, version: int
) -> None:
    """The prompt waiting for the agent to end the turn left to it counted as a
    running turn: "send now" steered the message into the turn left behind, whose
    answer is not shown, and said "Sent into the running turn"."""
    wire = leave_a_turn_to_the_agent(editor, "rewind+deaf+steer", version)
    editor.lua("require('acp').send('after')")
    wait_text(editor, "this prompt goes next")
    editor.lua("require('acp').send('now', {now = true})")
    assert editor.wait_event("AcpTurnEnd", count=3)["stop_reason"] == "cancelled"
    assert calls(wire, "_session/steering") == []
    assert "Sent into the running turn" not in editor.transcript_text()
    wait_text(editor, "Cancelled before it was sent")
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'after'")  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_resumed_after_a_restart_shows_what_a_turn_left_behind_muted(
    editor: Editor, version: int
) -> None:
    """The turn left to the agent muted its session until the agent ended it; the
    agent restarted (the turn gone with it) and the session resumed, the chat must
    show its next answer."""
    leave_a_turn_to_the_agent(editor, "rewind+deaf+resume", version)
    editor.nvim.command("AcpRestart")
    assert session_changed(editor, 2)["session_id"] == "s1"  # resumed
    turn(editor, "after", 3)
    wait_text(editor, "s1: after")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_resumed_session_is_kept_under_its_first_prompt(editor: Editor, version: int) -> None:
    """A resumed session's chat was kept as "chat 2" in :AcpHistory, then under the
    first prompt typed after the resume: not the one its conversation began with. A
    hand-over of it named it so too, and said it had begun when it was resumed here:
    nothing tells when it began, so the line says nothing of it."""
    start(editor, "rewind+resume+load", version)
    editor.nvim.command("AcpResume s9")
    session_changed(editor, 2)
    editor.wait("(require('acp').history({query = 'two'})[1] or {}).turns == 2")
    [found] = kept(editor, "two")
    assert found["title"] == "one"
    turn(editor, "three", 1)
    [found] = kept(editor, "three")
    assert (found["title"], found["turns"]) == ("one", 3)
    editor.nvim.command("AcpHandoff fake")
    editor.wait_event("AcpSessionReady", count=3)
    unknown = "*From fake's chat “one”: fake answers from here.*"
    assert unknown in editor.transcript_text()
    # Reopened from the history, it is still not dated to the resume.
    resumed = editor.events("AcpSessionReady")[1]["chat"]
    editor.lua("require('acp.chat').close(require('acp.chat.registry').chats[...], true)", resumed)
    editor.wait(f"require('acp.chat.registry').chats[{resumed}] == nil", what="its chat closed")
    chat = editor.lua("return require('acp').open({history = ...})", found["id"])
    editor.wait(f"require('acp').status().chat == {chat} and require('acp').status().state == 'ready'")
    editor.nvim.command("AcpHandoff fake")
    editor.wait_event("AcpSessionReady", count=4)
    assert unknown in editor.transcript_text()


@pytest.mark.parametrize("how", ["AcpFork", "AcpHandoff other"])
def test_a_fork_or_hand_over_of_a_rewound_chat_shows_no_branch_it_lacks(
    editor: Editor, how: str
) -> None:
    """Forked or handed over after a rewind, the new chat showed "Another branch
    leaves here (:AcpBranches)" where its :AcpBranches had none, and a hand-over's
    agent was told so: the branch left behind is the first chat's own."""
    wire = editor.tmp / "calls.jsonl"
    agent = {"cmd": [sys.executable, str(FAKE), "rewind"], "env": {"FAKE_CALLS": str(wire)}}
    editor.setup(agents={"fake": agent, "other": agent}, default_agent="fake")
    editor.open_chat()
    turn(editor, "first", 1)
    turn(editor, "second", 2)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    editor.nvim.command(how)
    session_changed(editor, 3)
    text = editor.transcript_text()
    assert "Another branch leaves here" not in text
    assert "s1: first" in text and "Rewound to before turn 2" in text  # what happened
    assert [b["turns"] for b in editor.lua("return require('acp').branches()")] == [1]
    turn(editor, "go on", 3)
    said = json.dumps(calls(wire, "session/prompt")[-1])
    assert "go on" in said and "Another branch" not in said


def two_turns_then_fault(editor: Editor, fault: str, version: int) -> tuple[Path, int]:
    """Two turns with the rewind fake, which then fails as $FAKE_FAULT ``fault`` says:
    the file its calls are recorded in, and its pid."""
    calls_file = editor.tmp / "calls.jsonl"
    env = {"FAKE_CALLS": str(calls_file), "FAKE_FAULT": fault}
    agent = {"cmd": [sys.executable, str(FAKE), "rewind"], "env": env}
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.open_chat()
    turn(editor, "one", 1)
    turn(editor, "two", 2)
    [pid] = fake_pids(editor, "rewind")
    return calls_file, pid


def wait_asked(editor: Editor, calls_file: Path, method: str) -> None:
    """Until the fake agent has recorded in ``calls_file`` that it was asked ``method``."""
    recorded = f"table.concat(vim.fn.readfile({str(calls_file)!r}), '\\n')"
    editor.wait(f"{recorded}:find({method!r}, 1, true)", what=f"{method} asked")


def rewind_into_a_hung_fork(editor: Editor, version: int) -> int:
    """Two turns, then a rewind to the second whose fork the agent never answers,
    once it has been asked: the agent's pid."""
    calls_file, hung = two_turns_then_fault(editor, "hang:session/fork", version)
    editor.lua("require('acp').rewind(2)")
    wait_asked(editor, calls_file, "session/fork")
    return hung


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rewind_whose_fork_hangs_ends_on_cancel_and_gives_the_prompt_back(
    editor: Editor, version: int
) -> None:
    """An agent that never answered the rewind's fork held the chat for ever: a
    prompt sent meanwhile vanished from the input, shown nowhere, and :AcpCancel
    did nothing. The wait ends on the cancel (or timeouts.start) as a start's does;
    the prompt comes back, and the next send starts the agent again."""
    hung = rewind_into_a_hung_fork(editor, version)
    editor.lua("require('acp').send('after')")
    editor.wait_event("AcpQueued")
    assert editor.lua("return require('acp').status().queued") == 1
    editor.lua("require('acp').cancel()")
    error = editor.wait_event("AcpError")
    assert error["message"].startswith("the wait for the session going on from here was cancelled")
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'after'")  # fmt: skip
    editor.lua("vim.api.nvim_buf_set_lines(require('acp').status().input_buf, 0, -1, false, {})")
    editor.lua("require('acp').send('again')")
    editor.wait_event("AcpTurnEnd", count=3)
    wait_text(editor, ": again")
    assert "s1: two" not in editor.transcript_text()
    assert wait_gone([hung]) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_a_branch_picked_while_a_rewinds_fork_hangs_is_shown_once_the_wait_is_cancelled(
    editor: Editor, version: int
) -> None:
    """A branch picked while the rewind's fork hung waited for it; the cancel failed
    the chat, and the switch was then refused ("cannot switch branches: the chat has
    no session"), the pick lost. It goes as in any chat whose agent failed: shown at
    once, the next prompt going on in it."""
    wire, _ = two_turns_then_fault(editor, "hang:session/fork", version)
    editor.lua("require('acp').rewind(2)")
    editor.wait(f"table.concat(vim.fn.readfile({str(wire)!r}), '\\n'):find('session/fork', 1, true)",
                what="the fork asked")  # fmt: skip
    editor.wait("#require('acp').branches() == 2", what="the branch left listed")
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    editor.lua("require('acp').cancel()")
    wait_text(editor, "Switched to branch 1 (2 turns).")
    assert "s1: two" in editor.transcript_text()
    assert not [n for n in editor.lua("return _G.acp_notices") if "cannot switch" in n["msg"]]
    editor.lua("require('acp').send('go on')")
    editor.wait_event("AcpTurnEnd", count=3)
    *seed, text = calls(wire, "session/prompt")[-1]["prompt"]
    assert text == {"type": "text", "text": "go on"}
    if version == 1:  # the fake resumes nothing: a new session is told branch 1
        assert "two" in seed[0]["text"]
    else:  # branch 1's session, resumed
        assert [c["sessionId"] for c in calls(wire, "session/resume")] == ["s1"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_restart_while_a_rewinds_fork_hangs_says_it_restarted(editor: Editor, version: int) -> None:
    """:AcpRestart while the agent never answered the rewind's fork first showed "the
    wait for the session going on from here was cancelled; :AcpRestart tries again"
    (an error, as if the user had cancelled), then restarted."""
    hung = rewind_into_a_hung_fork(editor, version)
    editor.nvim.command("AcpRestart")
    session_changed(editor, 2)
    assert wait_gone([hung]) == []
    assert editor.events("AcpError") == []
    text = editor.transcript_text()
    assert "was cancelled" not in text
    turn(editor, "again", 3)
    wait_text(editor, ": again")
    assert "s1: two" not in editor.transcript_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_an_agent_that_dies_on_a_rewinds_fork_says_so_and_the_next_prompt_restarts_it(
    editor: Editor, version: int
) -> None:
    """The agent exiting on the fork was told in passing, and the chat's error said
    only "agent 'fake' is not running" (a new session tried on the dead agent): the
    exit and its code are the error now, and the next prompt starts the agent again.
    The status said the agent was still connected."""
    _, died = two_turns_then_fault(editor, "crash:session/fork", version)
    editor.lua("require('acp').rewind(2)")
    error = editor.wait_event("AcpError")
    assert error["message"] == "agent 'fake' exited while forking a session (exit code 2)"
    assert wait_gone([died]) == []
    editor.wait("require('acp').status().connected == false", what="the agent told gone")
    editor.lua("require('acp').send('again')")
    editor.wait_event("AcpTurnEnd", count=3)
    wait_text(editor, ": again")


@pytest.mark.parametrize(("scenario", "version"), [("rewind+resume", 1), ("rewind", 2)])
@pytest.mark.parametrize("fault", ["crash:session/fork", "hang:session/fork"])
def test_after_a_rewind_whose_fork_failed_the_agent_is_told_only_the_turns_before(
    editor: Editor, scenario: str, version: int, fault: str
) -> None:
    """The agent died on a rewind's fork (or hung, and :AcpRestart ended the wait):
    the chat said "Rewound to before turn 2", yet the restarted agent resumed the
    session left, turn 2 and all, and went on in it (the v2 fake reusing its ids
    there drew the new turn into turn 1). The next prompt goes to a new session told
    only turn 1."""
    wire = editor.tmp / "calls.jsonl"
    env = {"FAKE_CALLS": str(wire), "FAKE_FAULT": fault}
    agent = {"cmd": [sys.executable, str(FAKE), scenario], "env": env}
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.open_chat()
    turn(editor, "one", 1)
    turn(editor, "two", 2)
    editor.lua("require('acp').rewind(2)")
    editor.wait(f"table.concat(vim.fn.readfile({str(wire)!r}), '\\n'):find('session/fork', 1, true)",
                what="the fork asked")  # fmt: skip
    if fault.startswith("crash"):
        editor.wait_event("AcpError")
    else:
        editor.nvim.command("AcpRestart")
        session_changed(editor, 2)
    editor.lua("require('acp').send('again')")
    editor.wait_event("AcpTurnEnd", count=3)
    assert calls(wire, "session/resume") == []
    seed, text = calls(wire, "session/prompt")[-1]["prompt"]
    assert text == {"type": "text", "text": "again"}
    assert "one" in seed["text"] and "two" not in seed["text"]
    wait_text(editor, "s1: again")
    transcript = editor.transcript()
    assert "one" in transcript and "oneagain" not in transcript


@pytest.mark.parametrize("version", VERSIONS)
def test_a_turn_left_behind_whose_agent_restarts_is_not_said_to_have_ended(
    editor: Editor, version: int
) -> None:
    """:AcpRestart ended the agent that still ran the turn left to it, and the chat
    said "The agent went on with the cancelled turn and has ended it now": the
    request's end at the exit was taken for the agent's. The next prompt goes on,
    without the claim."""
    leave_a_turn_to_the_agent(editor, "rewind+deaf", version)
    [deaf] = fake_pids(editor, "rewind+deaf")
    editor.nvim.command("AcpRestart")
    session_changed(editor, 2)
    assert wait_gone([deaf]) == []
    turn(editor, "after", 3)
    wait_text(editor, ": after")
    assert "has ended it now" not in editor.transcript_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_reopened_chat_whose_agent_dies_on_the_resume_says_so_and_keeps_the_prompt(
    editor: Editor, version: int
) -> None:
    """The agent exiting on the resume of a chat reopened from the history was
    followed by a new session asked of the dead agent: the error said only "agent
    'fake' is not running". It names the exit and its code; the prompt is back in
    the input. Restarted, the chat is ready with no error left in status() (it kept
    the exit's while the chat went on)."""
    wire = editor.tmp / "calls.jsonl"
    agent: dict[str, Any] = {"cmd": [sys.executable, str(FAKE), "rewind+resume"],
                             "env": {"FAKE_CALLS": str(wire)}}  # fmt: skip
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.open_chat()
    turn(editor, "one", 1)
    kept(editor, "one")
    editor.nvim.command("AcpClose")
    agent["env"]["FAKE_FAULT"] = "crash:session/resume"
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.reopen_last()
    editor.lua("require('acp').send('again')")
    error = editor.wait_event("AcpError")
    assert error["message"] == "agent 'fake' exited while resuming a session (exit code 2)"
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'again'")  # fmt: skip
    assert wait_gone(fake_pids(editor, "rewind+resume")) == []
    del agent["env"]["FAKE_FAULT"]
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.nvim.command("AcpRestart")
    editor.wait("require('acp').status().state == 'ready'", what="the restarted chat")
    assert editor.lua("return require('acp').status().error") is None


def test_a_new_session_named_as_the_one_before_a_restart_counts_its_own_use(
    editor: Editor,
) -> None:
    """An agent started again may number its sessions from the start (decision
    0078): its new session named as the chat's last, the first turn there was
    measured from the old session's report and showed "-1.2k tokens · $-0.05"."""
    start(editor, "rewind", 1)
    turn(editor, "one", 1)
    turn(editor, "two", 2)
    editor.nvim.command("AcpRestart")
    assert session_changed(editor, 2)["session_id"] == "s1"  # a new one, the same id
    turn(editor, "three", 3)
    wait_text(editor, "s1: three")
    assert editor.transcript()[-1] == "*— end_turn · 1.2k tokens · $0.05 —*"


REPLAYS = [("rewind+resume+load", 1), ("rewind+resume+load", 2), ("rewind+resume+load+after", 2)]


def die_in_a_replay(editor: Editor, scenario: str, version: int) -> dict[str, Any]:
    """:AcpResume s9 with an agent that dies one turn into the replay (``after``: one
    that replays once it has answered the resume); returns its options."""
    wire = editor.tmp / "calls.jsonl"
    agent: dict[str, Any] = {"cmd": [sys.executable, str(FAKE), scenario],
                             "env": {"FAKE_CALLS": str(wire), "FAKE_FAULT": "crash:replay"}}  # fmt: skip
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.open_chat()
    editor.nvim.command("AcpResume s9")
    editor.wait_event("AcpError")
    wait_text(editor, "s9: one")
    assert "**Error:** agent 'fake' exited" in editor.transcript_text()
    return agent


@pytest.mark.parametrize(("scenario", "version"), REPLAYS)
def test_a_replay_the_agent_died_in_is_shown_whole_once_it_is_restarted(
    editor: Editor, scenario: str, version: int
) -> None:
    """The agent died one turn into the replay of :AcpResume: the restart resumed
    the session without a replay (the transcript shows the history), so turn 2
    never showed, and turn 1, drawn as blocks of no turn, was no turn to go back to
    (:AcpEdit 1: "no prompt was sent in this chat"). The restart replays it again,
    in place of what the replay had drawn. So too where a v2 agent replays after
    its answer (``after``): nothing ends such a replay, so one the agent died in
    before the chat's first prompt was taken for whole."""
    agent = die_in_a_replay(editor, scenario, version)
    del agent["env"]["FAKE_FAULT"]
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.nvim.command("AcpRestart")
    # What the replay the agent died in drew goes once the new one is answered.
    editor.wait("vim.deep_equal(require('acp.chat.registry').get().status.turns, {'one', 'two'})",
                what="the replay's two turns")  # fmt: skip
    wait_text(editor, "s9: two")
    text = editor.transcript_text()
    assert text.count("s9: one") == 1 and text.count("## You\none") == 1
    editor.nvim.command("AcpEdit 1")
    editor.wait("vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)[1]"
                " == 'one'")  # fmt: skip
    # The history keeps the replay once too: reopened, the chat shows it so.
    editor.wait("(require('acp').history({query = 'two'})[1] or {}).turns == 2")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    text = editor.transcript_text()
    assert text.count("s9: one") == 1 and text.count("## You\none") == 1 and "s9: two" in text


def test_a_replay_asked_again_is_numbered_right_before_its_answer(editor: Editor) -> None:
    """A v2 agent that replays after its answer died one turn into the replay; the
    one restarted replays before it answers. The dead replay's mark of a late replay
    was still up, so the new replay's messages became turns as they came, numbered
    after the dead one's (the rewind picker and :AcpBranches listed "one" twice),
    then unmade and numbered again at the answer. They are turns once it is
    answered, numbered once."""
    agent = die_in_a_replay(editor, "rewind+resume+load+after", 2)
    del agent["env"]["FAKE_FAULT"]
    agent["cmd"][-1] = "rewind+resume+load"  # replays before it answers
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=2)
    editor.lua("""_G.turns_at_ready = {}
      vim.api.nvim_create_autocmd("User", {pattern = "AcpSessionReady", callback = function()
        table.insert(_G.turns_at_ready, vim.deepcopy(require('acp.chat.registry').get().status.turns))
      end})""")  # fmt: skip
    editor.nvim.command("AcpRestart")
    editor.wait("vim.deep_equal(require('acp.chat.registry').get().status.turns, {'one', 'two'})",
                what="the replay's two turns")  # fmt: skip
    # When the answer came, only the dead replay's turn was one: the new replay's
    # messages were blocks of no turn until then.
    readies = editor.lua("return _G.turns_at_ready")
    assert readies and all(turns == ["one"] for turns in readies)
    text = editor.transcript_text()
    assert text.count("s9: one") == 1 and text.count("s9: two") == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_a_stored_branch_picked_back_numbers_its_plans_on(editor: Editor, version: int) -> None:
    """A reopened chat's other branch is drawn from its stored turns when picked, each
    turn on its own: its second plan ("Plan 2" when it was made) came back as "Plan"."""
    start(editor, "plans", version)
    turn(editor, "steps", 1)
    turn(editor, "markdown", 2)
    editor.nvim.command("AcpRewind 2")
    session_changed(editor, 2)
    plan = editor.tmp / "plan.md"
    plan.write_text("1. Ship it\n")
    turn(editor, f"file {plan}", 3)
    assert "### Plan 2\n→ " in editor.transcript_text()
    [entry] = kept(editor, "plan.md")
    stored = f"require('acp.host').request('export', {{history = {entry['id']}}})"
    editor.wait(f"select(2, {stored}:gsub('Turn ended', '')) == 2", what="the branch kept")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    text = show_branch(editor, 1)
    assert [text.count(f"### {name}\n") for name in ("Plan", "Plan 2")] == [1, 1]
    assert text.index("### Plan 2\n1. Read the code") > text.index("done: steps")


@pytest.mark.parametrize(("scenario", "version"), REPLAYS)
def test_a_replay_refused_after_the_agent_died_in_one_keeps_what_it_drew(
    editor: Editor, scenario: str, version: int
) -> None:
    """The agent died in the replay of :AcpResume, and started again it refused the
    replay asked again: what the first one drew had already left the transcript, and
    the new session began with nothing to carry ("A new session begins"). It stays
    until a replay is answered: the new session carries it, and the chat says so."""
    agent = die_in_a_replay(editor, scenario, version)
    method = "session/load" if version == 1 else "session/resume"
    agent["env"]["FAKE_FAULT"] = f"refuse:{method}"
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=version)
    editor.nvim.command("AcpRestart")
    wait_text(editor, "the next prompt carries the conversation so far.")
    text = editor.transcript_text()
    assert "*fake starts a new session (agent 'fake' failed resuming a session: -32002 Resource not found)" in text
    assert text.count("s9: one") == 1 and text.count("## You\none") == 1
    turn(editor, "three", 1)
    [seeded] = [p for p in calls(editor.tmp / "calls.jsonl", "session/prompt")]
    assert "s9: one" in seed_of(seeded)


@pytest.mark.parametrize("said", [False, True])
def test_a_resumed_session_never_shown_then_refused_after_a_restart_says_what_is_lost(
    editor: Editor, said: bool
) -> None:
    """:AcpResume of a v1 agent without `loadSession`: it resumes the session without
    showing its history. Restarted, it refused the session: the new session began
    with "A new session begins", or carried "the conversation so far", as if the
    chat held all the session did. What was drawn stays and the new session carries
    it; the note says what the session held before the resume was never shown
    here, and the new session does not know it."""
    wire = editor.tmp / "calls.jsonl"
    agent: dict[str, Any] = {"cmd": [sys.executable, str(FAKE), "rewind+resume"],
                             "env": {"FAKE_CALLS": str(wire)}}  # fmt: skip
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=1)
    editor.open_chat()
    editor.nvim.command("AcpResume s9")
    editor.wait("require('acp').status().session_id == 's9'", what="resumed")
    if said:
        turn(editor, "three", 1)
    agent["env"]["FAKE_FAULT"] = "refuse:session/resume"
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=1)
    editor.nvim.command("AcpRestart")
    wait_text(editor, "and the new one does not know it.*")
    why = "(agent 'fake' failed resuming a session: -32002 Resource not found)"
    lost = "what the session held before it was resumed was never shown here"
    note = (
        f"*fake starts a new session {why}: the next prompt carries the conversation shown"
        f" here; {lost}, and the new one does not know it.*"
        if said
        else f"*A new session begins {why}: {lost}, and the new one does not know it.*"
    )
    text = editor.transcript_text()
    assert "*The agent resumes this session without showing its history.*" in text
    assert note in text
    assert ("s9: three" in text) is said


def test_a_rewind_to_the_first_turn_of_a_session_resumed_unseen_says_what_is_lost(
    editor: Editor,
) -> None:
    """:AcpResume of a v1 agent without `loadSession` shows none of the session's
    history. A rewind to before the chat's first turn there began a new, empty
    session, said only "Rewound to before turn 1": the agent no longer knew what
    the session held before, though nothing said so. The note says it (the branch
    left keeps the resumed session)."""
    wire = start(editor, "rewind+resume", 1)
    editor.nvim.command("AcpResume s9")
    editor.wait("require('acp').status().session_id == 's9'", what="resumed")
    turn(editor, "one", 1)
    turn(editor, "two", 2)
    editor.lua("require('acp').rewind(1)")
    session_changed(editor, 3)
    wait_text(editor, "Continued in a new session: what the session held before it was resumed")
    assert editor.transcript()[-1] == (
        "*Continued in a new session: what the session held before it was resumed was"
        " never shown here, and the new one does not know it.*"
    )
    assert [m for m, _ in calls(wire)][-1] == "session/new"


def test_a_session_resumed_unseen_shows_what_the_history_kept_of_it(editor: Editor) -> None:
    """A v1 agent without `loadSession` resumes a session without showing its
    history. Resumed (`open({session_id})`, as :AcpResume does), a session run here
    before drew an empty chat, though the history held its conversation: it is drawn
    from there, said to be, and the agent goes on in the session it holds (not told
    the conversation again)."""
    wire = start(editor, "rewind+resume", 1)
    turn(editor, "one", 1)
    [entry] = kept(editor, "one")
    editor.nvim.command("AcpClose")
    editor.lua("require('acp').open({session_id = 's1'})")
    editor.wait("require('acp').status().session_id == 's1'", what="resumed")
    wait_text(editor, "not what ran in it elsewhere since.*")
    text = editor.transcript_text()
    began = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry["created_at"]))
    intro = f"*From the history: fake's chat “one” (begun {began}), as this Neovim kept it.*"
    assert text.index(intro) < text.index("## You\none") < text.index("s1: one")
    assert "without showing its history: shown above" in editor.transcript()[-1]
    turn(editor, "two", 2)
    assert "s1: two" in editor.transcript_text()
    [_, prompt] = calls(wire, "session/prompt")
    assert prompt["sessionId"] == "s1" and prompt["prompt"] == [{"type": "text", "text": "two"}]


def test_a_hand_over_of_a_session_resumed_unseen_says_what_the_other_agent_lacks(
    editor: Editor,
) -> None:
    """:AcpResume of a v1 agent without `loadSession` shows none of the session's
    history. :AcpHandoff then gave the other agent the conversation shown and said
    only "Handed over", as if that were all the session held: the note says what
    came before the resume was never shown here, and the other agent does not know it."""
    resumes = {"cmd": [sys.executable, str(FAKE), "rewind+resume"],
               "env": {"FAKE_CALLS": str(editor.tmp / "calls.jsonl")}}  # fmt: skip
    editor.setup(agents={"fake": resumes, "plain": editor.fake_agent("blocks")},
                 default_agent="fake", protocol_version=1)  # fmt: skip
    editor.open_chat()
    editor.nvim.command("AcpResume s9")
    editor.wait("require('acp').status().session_id == 's9'", what="resumed")
    turn(editor, "one", 1)
    editor.nvim.command("AcpHandoff plain")
    editor.wait("require('acp').status().agent == 'plain'", what="handed over")
    wait_text(editor, "Handed over from")
    assert editor.transcript()[-1] == (
        "*Handed over from fake's chat “one” to plain: plain answers from here; what the"
        " session held before it was resumed was never shown here, and the new one does"
        " not know it.*"
    )


def test_a_chat_waiting_for_its_rewinds_fork_says_so_in_the_winbar(editor: Editor) -> None:
    """While a rewind's fork was awaited the winbar said "ready", though a prompt sent
    then only queued: a hung fork looked like an idle chat. It says "going back…"
    (``status().waiting``) until the wait ends."""
    calls_file, _ = two_turns_then_fault(editor, "hang:session/fork", 1)
    editor.lua("require('acp').rewind(2)")
    editor.wait(f"table.concat(vim.fn.readfile({str(calls_file)!r}), '\\n'):find('session/fork', 1, true)",
                what="the fork asked")  # fmt: skip
    winbar = f"{WINBAR}()"  # as drawn: the option is an expression (decision 0096)
    editor.wait(f"{winbar}:find('going back…', 1, true) == 2", what="the winbar")
    assert editor.lua("return require('acp').status().waiting") == "rewind"
    editor.lua("require('acp').cancel()")
    editor.wait_event("AcpError")
    editor.wait(f"{winbar}:find('going back', 1, true) == nil", what="the winbar")
    assert editor.lua("return require('acp').status().waiting") is None


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rewind_to_the_first_turn_leaves_no_title(editor: Editor, version: int) -> None:
    """After :AcpRewind 1 the winbar kept the title of the conversation left behind
    until the agent named its new session: there is none yet, as in a new chat."""
    start(editor, "rewind", version)
    turn(editor, "title Fix the parser", 1)
    # The winbar as a window wide enough for the title draws it.
    winbar = "require('acp.chat.winbar').text(require('acp.chat.registry').get(), 300, '/')"
    editor.wait(f"{winbar}:find('Fix the parser', 1, true) ~= nil", what="the title")
    editor.lua("require('acp').rewind(1)")
    session_changed(editor, 2)
    assert editor.lua("return require('acp').status().title") is None
    assert "Fix the parser" not in editor.lua(f"return {winbar}")
    turn(editor, "title Another thing", 2)
    editor.wait(f"{winbar}:find('Another thing', 1, true) ~= nil", what="the new title")
