"""The chat history (|acp-chat-history|): a chat kept, found from another Neovim by a
word of a reply, reopened, continued (session/load, else a seeded session),
exported, handed over to another agent; a damaged or locked file costs the history,
never the chat; two Neovims writing at once keep both chats."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_nvim.client.history import Store, StoredBlock
from tests.fakes.stores import schema_3
from tests.nvim.conftest import FAKE, LONG_TURN, ROOT, Editor, child_editor, logged, wait_gone

HISTORY = "return require('acp').history(...)"


def second_neovim(editor: Editor, wrapper: list[str] | None = None) -> Editor:
    """Another Neovim with the same state directory (the history file) and project."""
    other = child_editor(
        editor.tmp,
        (ROOT / "tests" / "nvim" / "init.lua").read_text(),
        {"ACP_TEST_ROOT": str(ROOT)},
        wrapper,
    )
    other.nvim.command(f"cd {editor.tmp / 'project'}")
    return other


def reopened_elsewhere(
    editor: Editor, entry: dict[str, Any], scenario: str, version: int | None = None
) -> tuple[Editor, Path]:
    """Stored chat ``entry`` reopened in another Neovim, its agent (``scenario`` over
    ``version``, default the plugin's) not started; and where that agent writes the
    requests it gets."""
    wire = editor.tmp / "other-calls.jsonl"
    agent = {"cmd": [sys.executable, str(FAKE), scenario], "env": {"FAKE_CALLS": str(wire)}}
    versions = {} if version is None else {"protocol_version": version}
    other = second_neovim(editor)
    try:
        other.setup(agents={"fake": agent}, default_agent="fake", **versions)
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
    except BaseException:
        other.quit()
        raise
    return other, wire


def agents(editor: Editor) -> dict[str, Any]:
    return {
        "kept": editor.fake_agent("kept"),  # offers session/load
        "plain": editor.fake_agent("blocks"),  # no load: says the prompt's blocks
        "embeds": editor.fake_agent("blocks+embed"),
    }


def send(editor: Editor, text: str, turns: int) -> None:
    editor.lua("require('acp').send(...)", text)
    editor.wait_event("AcpTurnEnd", count=turns)


def kept(editor: Editor, query: str, count: int = 1) -> list[dict[str, Any]]:
    """The stored chats holding ``query``, once ``count`` are found."""
    editor.wait(f"#require('acp').history({{query = {query!r}}}) >= {count}", what=query)
    return editor.lua(HISTORY, {"query": query})  # type: ignore[no-any-return]


def a_kept_chat(editor: Editor) -> dict[str, Any]:
    """One turn with the "kept" agent, found in the history by a word of its prompt."""
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    [entry] = kept(editor, "zebra")
    return entry


def test_a_chat_is_found_reopened_continued_with_load_and_exported(editor: Editor) -> None:
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    target = editor.tmp / "project" / "a.py"
    target.write_text("one\ntwo\n")
    send(editor, "hello zebra", 1)
    send(editor, f"edit {target}", 2)
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').changes()[1].open == false")
    [entry] = kept(editor, "zebra")
    assert editor.lua("return require('acp').status().history") == entry["id"]
    editor.quit()

    other = second_neovim(editor)
    try:
        other.setup(agents=agents(editor), default_agent="kept")
        [found] = other.lua(HISTORY, {"query": "ZEBRA"})
        assert found["id"] == entry["id"] and found["agent"] == "kept"
        assert found["cwd"] == str(editor.tmp / "project") and found["turns"] == 2
        assert found["title"] == "hello zebra" and "echo: hello zebra" in found["snippet"]
        assert other.lua(HISTORY, {"query": "giraffe"}) == []
        assert [f["id"] for f in other.lua(HISTORY, {"query": "echo"})] == [found["id"]]  # replies only

        chat = other.lua("return require('acp').open({history = ...})", found["id"])
        other.wait("require('acp').status().state == 'ready'")
        text = other.transcript_text()
        assert "hello zebra" in text and "echo: hello zebra" in text
        assert f"#### Edit {target}" in text and "-two" in text and "+2" in text
        assert "— end_turn —" in text
        # The turn's end says what became of its changes in the review (the files
        # named as the live chat names them).
        assert "*Review:*\n- `a.py`: `@@ -2 +2 @@` accepted" in text
        assert other.lua("return require('acp').status().history") == found["id"]

        # Sending goes on with the stored session, loaded (without showing it again).
        send(other, "calls", 1)
        calls = json.loads(other.transcript()[-3])
        assert [c[0] for c in calls] == ["session/load"]
        assert calls[0][1]["sessionId"] == "fake-1"
        assert "an old answer" not in other.transcript_text()
        assert other.lua("return require('acp').status().chat") == chat

        # The continued turns are kept in the same stored chat.
        assert kept(other, "calls")[0]["id"] == found["id"]
        path = editor.tmp / "chat.md"
        other.lua("require('acp').export(...)", str(path), {"history": found["id"]})
        markdown = path.read_text()
        assert markdown.startswith("# hello zebra\n")
        assert "- Agent: kept" in markdown and f"- Directory: {editor.tmp / 'project'}" in markdown
        for part in ("## You\n\nhello zebra", "## Agent\n\necho: hello zebra",
                     f"### Tool: Edit {target}", "```diff", "-two", "+2", f"edited {target}",
                     "*Review:*\n- `a.py`: `@@ -2 +2 @@` accepted"):  # fmt: skip
            assert part in markdown, part
        # :AcpExport without a path: the current chat in a buffer of a new tab page. The
        # command returns at once: Neovim goes on while Python writes the Markdown.
        # (In one request: nothing Python sends after the command can come between.)
        tabs = other.lua("return vim.fn.tabpagenr('$')")
        assert other.lua("vim.cmd.AcpExport(); return vim.fn.tabpagenr('$')") == tabs
        other.wait(f"vim.fn.tabpagenr('$') == {tabs + 1}", what="the export's buffer")
        exported = other.nvim.current.buffer
        assert exported[0] == "# hello zebra" and "## You" in exported[:]
        # A Markdown buffer, highlighted as the transcript is (markdown.vim: 20 ms to load).
        assert other.lua("return {vim.bo.filetype, vim.b.current_syntax}") == ["markdown", "acpchat"]
    finally:
        other.quit()


@pytest.mark.parametrize("version", [1, 2])
def test_a_chat_without_load_goes_on_in_a_seeded_session(editor: Editor, version: int) -> None:
    editor.setup(agents=agents(editor), default_agent="plain", protocol_version=version)
    assert editor.open_chat()["protocol_version"] == version
    send(editor, "hello zebra", 1)
    [entry] = kept(editor, "zebra")
    editor.quit()

    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="plain", protocol_version=version)
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        send(other, "and now", 1)
        text = other.transcript_text()
        # One line says why a new session begins (the agent offers no resume over v1,
        # knows no such session over v2) and what it is told.
        [line] = [line for line in text.split("\n") if "new session" in line]
        why = "is not offered by this agent" if version == 1 else "Resource not found"
        assert why in line and "carries the conversation so far" in line
        blocks = json.loads(other.transcript()[-3])
        assert len(blocks) == 2 and blocks[1] == {"type": "text", "text": "and now"}
        assert "## You\n\nhello zebra" in blocks[0]["text"]
        assert "<conversation>" in blocks[0]["text"]
        # Only the first prompt carries it.
        send(other, "then", 2)
        assert json.loads(other.transcript()[-3]) == [{"type": "text", "text": "then"}]


def test_a_prompt_sent_as_a_stored_chat_opens_goes_once_it_is_shown(editor: Editor) -> None:
    entry = a_kept_chat(editor)
    editor.quit()

    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="kept")
        other.lua("require('acp').open({history = ...}); require('acp').send('calls')", entry["id"])
        other.wait_event("AcpTurnEnd")
        text = other.transcript_text()
        assert text.index("echo: hello zebra") < text.index('[["session/load"')
        assert other.lua("return require('acp').status().queued") == 0


def test_a_reopened_chat_handed_over_to_another_agent(editor: Editor) -> None:
    entry = a_kept_chat(editor)
    editor.quit()

    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="kept")
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        other.nvim.command("AcpHandoff plain")
        other.wait_event("AcpSessionReady")
        assert other.lua("return require('acp').status().agent") == "plain"
        send(other, "go on", 1)
        # Its first prompt holds the conversation kept before.
        blocks = json.loads(other.transcript()[-3])
        assert "## You\n\nhello zebra" in blocks[0]["text"]
        assert "## Agent\n\necho: hello zebra" in blocks[0]["text"]
        assert blocks[1] == {"type": "text", "text": "go on"}
        # Both are kept: the stored chat, and the new one that continues it.
        assert {f["agent"] for f in kept(other, "zebra", 2)} == {"kept", "plain"}


def test_a_chat_handed_over_to_another_agent(editor: Editor) -> None:
    editor.setup(agents=agents(editor), default_agent="kept")
    first = editor.open_chat()
    send(editor, "hello zebra", 1)
    [source] = kept(editor, "zebra")
    editor.nvim.command("AcpHandoff embeds")
    editor.wait_event("AcpSessionReady", count=2)
    status = editor.lua("return require('acp').status()")
    assert status["agent"] == "embeds" and status["chat"] != first["chat"]
    # Whose turns are whose, and when the first chat began: named by its title, not
    # a number that means nothing outside this Neovim.
    began = time.strftime("%Y-%m-%d %H:%M", time.localtime(source["created_at"]))
    carried = f"*From kept's chat “hello zebra” (begun {began}): kept answers from here.*"
    handed = "*Handed over from kept's chat “hello zebra” to embeds: embeds answers from here.*"
    text = editor.transcript_text()
    assert text.index(carried) < text.index("echo: hello zebra") < text.index(handed)
    send(editor, "go on", 2)
    blocks = json.loads(editor.transcript()[-3])
    assert blocks[0]["type"] == "text" and "conversation" in blocks[0]["text"]
    assert blocks[1]["type"] == "resource"
    assert blocks[1]["resource"]["mimeType"] == "text/markdown"
    assert carried in blocks[1]["resource"]["text"]  # the new agent is told so too
    assert blocks[2] == {"type": "text", "text": "go on"}
    # The first chat stays, and both are kept.
    assert [c["agent"] for c in editor.lua("return require('acp').chats()")] == ["kept", "embeds"]
    found = kept(editor, "zebra", 2)
    assert {f["agent"] for f in found} == {"kept", "embeds"}
    # Its export says the same.
    [own] = [f for f in found if f["agent"] == "embeds"]
    buf = editor.lua("return require('acp.chat.history').export(nil, {history = ...})", own["id"])
    exported = "\n".join(editor.nvim.buffers[buf][:])
    assert exported.index(carried) < exported.index("echo: hello zebra") < exported.index(handed)


def test_a_hand_over_carries_the_conversation_not_the_chats_notices(editor: Editor) -> None:
    """The chat's notices (an error, a note of the client's) are its words to you,
    not the conversation: the agent a chat is handed over to is not told them (the
    line saying whose turns they were is); the export keeps them."""
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    [source] = kept(editor, "zebra")
    # The agent taken out of the options, a restart fails: the chat says why.
    editor.setup(agents={"embeds": agents(editor)["embeds"]}, default_agent="embeds")
    editor.nvim.command("AcpRestart")
    editor.wait("require('acp').status().state == 'error'")
    error = "**Error:** unknown agent 'kept'"
    assert error in editor.transcript_text()
    editor.nvim.command("AcpHandoff embeds")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "go on", 2)
    carried = json.loads(editor.transcript()[-3])[1]["resource"]["text"]
    assert "kept answers from here.*" in carried and "echo: hello zebra" in carried
    assert "Handed over from kept's chat" in carried
    assert error not in carried
    buf = editor.lua("return require('acp.chat.history').export(nil, {history = ...})", source["id"])
    assert error in "\n".join(editor.nvim.buffers[buf][:])


def test_a_hand_over_to_an_agent_that_cannot_start_is_no_second_copy(editor: Editor) -> None:
    """`:AcpHandoff` to an agent not installed kept the conversation again, under
    that agent, though it never answered: closed, it stayed in the history; and
    once the agent is there, the chat goes on and is kept."""
    setup = agents(editor)
    missing = editor.tmp / "not-installed"
    setup["later"] = {"cmd": [str(missing), *editor.fake_agent("blocks")["cmd"]]}
    editor.setup(agents=setup, default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    editor.nvim.command("AcpHandoff later")
    editor.wait("require('acp').status().state == 'error'")
    assert "not found" in editor.lua("return require('acp').status().error")
    editor.lua("require('acp').open({agent = 'kept', new = true})")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "then okapi", 2)
    kept(editor, "okapi")  # written after the hand-over would have been
    assert [f["agent"] for f in editor.lua(HISTORY, {"query": "zebra"})] == ["kept"]
    # Installed now: the hand-over, switched to (:AcpChats), goes on and is kept.
    missing.write_text('#!/bin/sh\nexec "$@"\n')
    missing.chmod(0o755)
    editor.lua(
        """
        vim.ui.select = function(items, opts, choice)
          choice(opts.prompt == 'Chats' and items[2] or 'switch')
        end
        vim.cmd('AcpChats')
        """
    )
    assert editor.lua("return require('acp').status().agent") == "later"
    editor.nvim.command("AcpRestart")
    editor.wait_event("AcpSessionReady", count=3)
    assert {f["agent"] for f in kept(editor, "zebra", 2)} == {"kept", "later"}


@pytest.mark.parametrize("reopened", [False, True], ids=["live", "reopened"])
def test_a_hand_over_handed_over_again_says_once_where_it_came_from(
    editor: Editor, reopened: bool
) -> None:
    """Handed on again (live, or reopened from the history), a chat's transcript
    began with two "From" lines, the new one saying the middle agent answered the
    first turns; the new agent's conversation and the export did too. One line names
    the chat it came from and the one it began in, whose agent answered first; each
    hand-over keeps its line."""
    wire = editor.tmp / "calls.jsonl"  # the conversation is too long for a reply to say
    scenario = [sys.executable, str(FAKE), "rewind+plain+embed"]
    embeds = {"cmd": scenario, "env": {"FAKE_CALLS": str(wire)}}
    editor.setup(agents={**agents(editor), "embeds": embeds}, default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    editor.nvim.command("AcpHandoff plain")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "go on", 2)
    if reopened:  # the second chat, closed once it is kept, then reopened
        editor.wait("#require('acp').history({query = 'go'}) == 1", what="the second turn kept")
        editor.lua("require('acp').close()")
        editor.reopen_last()
    editor.nvim.command("AcpHandoff embeds")
    editor.wait_event("AcpSessionReady", count=3)
    found = {f["agent"]: f for f in kept(editor, "zebra", 2)}  # the third: once it sends
    began = {agent: time.strftime("%Y-%m-%d %H:%M", time.localtime(f["created_at"]))
             for agent, f in found.items()}  # fmt: skip
    intro = (
        f"*From plain's chat “hello zebra” (begun {began['plain']}), handed over from"
        f" kept's chat “hello zebra” (begun {began['kept']}): kept answers from here.*"
    )
    handed = [
        "*Handed over from kept's chat “hello zebra” to plain: plain answers from here.*",
        "*Handed over from plain's chat “hello zebra” to embeds: embeds answers from here.*",
    ]

    def told_once(text: str) -> None:
        assert [line for line in text.split("\n") if line.startswith("*From ")] == [intro]
        said = [intro, "echo: hello zebra", handed[0], "go on", handed[1]]
        assert [text.index(words) for words in said] == sorted(text.index(w) for w in said)

    told_once(editor.transcript_text())
    send(editor, "and more", 3)
    prompts = [params for method, params in map(json.loads, wire.read_text().splitlines())
               if method == "session/prompt"]  # fmt: skip
    carried = prompts[0]["prompt"][1]["resource"]["text"]
    told_once(carried)
    [own] = [f for f in kept(editor, "zebra", 3) if f["agent"] == "embeds"]
    buf = editor.lua("return require('acp.chat.history').export(nil, {history = ...})", own["id"])
    told_once("\n".join(editor.nvim.buffers[buf][:]))


def test_the_demo_agent_handed_a_conversation_answers_what_was_typed(editor: Editor) -> None:
    """The demo reads the conversation carried ahead of a hand-over's first prompt
    as context. Its replies there say `help`: that is not a request for its help."""
    demo = [sys.executable, "-m", "acp_nvim.demo_agent"]
    editor.setup(agents={"other": {"cmd": demo}})
    editor.open_chat()
    send(editor, "hello", 1)
    editor.nvim.command("AcpHandoff other")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "go on please", 2)
    text = editor.transcript_text()
    assert "Type `help`" in text.split("Handed over", 1)[0]
    assert "You said: *go on please*" in text and "I am the offline demo agent" not in text


def test_an_exports_notices_are_under_a_heading_of_their_own(editor: Editor) -> None:
    """The export put acp.nvim's notices in the section before them: a turn the
    agent refused had its error under `## You`, as if the user had written it, and
    a turn's end (with what the user made of its review) under `## Agent`."""
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('fail')")  # the demo agent answers with an error
    editor.wait_event("AcpTurnEnd")
    send(editor, "hello", 2)
    export = "return vim.api.nvim_buf_get_lines(require('acp').export(), 0, -1, false)"
    lines = editor.lua(export)
    headings = [(row, line) for row, line in enumerate(lines) if line.startswith("## ")]
    error = next(row for row, line in enumerate(lines) if line.startswith("**Error:**"))
    # The section an error, then a turn's end, sit in: the last heading above them.
    assert [line for row, line in headings if row < error][-1] == "## acp.nvim"
    assert lines[-1].startswith("*Turn ended: end_turn") and headings[-1][1] == "## acp.nvim"
    assert [line for _, line in headings].count("## You") == 2


def test_a_v2_chats_export_names_its_changed_files_as_its_transcript_does(editor: Editor) -> None:
    """A v2 tool call's changes, exported: a moved file lost where it came from
    ("- move b.md"), a binary one its kind, and each its transcript's word."""
    editor.setup(protocol_version=2)
    editor.open_chat()
    send(editor, "diff terminal", 1)
    text = editor.transcript_text()
    assert "**moved** a.md → b.md" in text and "**modified** logo.png (binary)" in text
    path = editor.tmp / "chat.md"
    editor.lua("require('acp').export(...)", str(path))
    markdown = path.read_text()
    for part in ("- modified src/config.json", "- added NEWS.md", "- deleted old.txt",
                 "- moved a.md → b.md", "- modified logo.png (binary)", '+  "debug": true',
                 "[terminal t1 · exit 0] make test", "passed: café ✓"):  # fmt: skip
        assert part in markdown, part


def test_a_v2_chat_handed_over_tells_the_next_agent_its_changed_files_as_shown(
    editor: Editor,
) -> None:
    """The conversation a hand-over carries named a v2 move by its new path only
    ("- move b.md"): the next agent could not know where b.md came from."""
    wire = editor.tmp / "calls.jsonl"
    scenario = [sys.executable, str(FAKE), "rewind+plain+embed"]
    editor.setup(agents={"next": {"cmd": scenario, "env": {"FAKE_CALLS": str(wire)}}},
                 protocol_version=2)  # fmt: skip
    editor.open_chat()
    send(editor, "diff", 1)
    editor.nvim.command("AcpHandoff next")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "go on", 2)
    [prompt] = [params for method, params in map(json.loads, wire.read_text().splitlines())
                if method == "session/prompt"]  # fmt: skip
    carried = prompt["prompt"][1]["resource"]["text"]
    assert "- moved a.md → b.md\n- modified logo.png (binary)" in carried


def test_a_v2_chats_plans_keep_their_numbers_handed_over_and_exported(editor: Editor) -> None:
    """A v2 agent's two plans of a turn were "Plan" and "Plan 2" in the chat, but
    "Plan" twice in the chat it was handed over to, and "**Plan**" twice exported."""
    editor.setup(agents=agents(editor), protocol_version=2)
    editor.open_chat()
    send(editor, "plan", 1)
    assert "### Plan\n" in editor.transcript_text() and "### Plan 2\n" in editor.transcript_text()
    editor.nvim.command("AcpHandoff embeds")
    editor.wait_event("AcpSessionReady", count=2)
    text = editor.transcript_text()
    assert text.count("### Plan\n") == 1 and text.count("### Plan 2\n") == 1
    path = editor.tmp / "chat.md"
    editor.lua("require('acp').export(...)", str(path))
    markdown = path.read_text()
    assert markdown.count("**Plan**\n") == 1 and markdown.count("**Plan 2**\n") == 1


@pytest.mark.parametrize("version", [1, 2])
def test_a_reopened_chat_numbers_its_new_plans_on(editor: Editor, version: int) -> None:
    """A chat with two plans ("Plan", "Plan 2") reopened and continued in a new
    session (the agent cannot load it) titled its next plan "Plan" again: two plans
    of one name in the transcript, where the export called it "Plan 3"."""
    plans = {"fake": editor.fake_agent("plans")}
    editor.setup(agents=plans, default_agent="fake", protocol_version=version)
    editor.open_chat()
    send(editor, "steps", 1)
    send(editor, "markdown", 2)
    [entry] = kept(editor, "markdown")
    stored = f"require('acp.host').request('export', {{history = {entry['id']}}})"
    editor.wait(f"select(2, {stored}:gsub('Plan', '')) == 2", what="both plans kept")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    plan = editor.tmp / "plan.md"
    plan.write_text("1. Ship it\n")
    send(editor, f"file {plan}", 3)
    text = editor.transcript_text()
    assert [text.count(f"### {name}\n") for name in ("Plan", "Plan 2", "Plan 3")] == [1, 1, 1]
    assert text.index("### Plan 3\n") > text.index("done: markdown")
    path = editor.tmp / "chat.md"
    editor.lua("require('acp').export(...)", str(path))
    assert "**Plan 3**\n" in path.read_text()


def test_the_agents_thinking_is_exported_under_its_heading_not_in_the_prompt(
    editor: Editor,
) -> None:
    """The export (and the conversation a hand-over carries, made the same way) put
    the demo's thought, as a quote, straight under `## You` and the prompt: it read
    as the user's words, where the transcript heads it `### Thinking`."""
    editor.setup(agents={"demo": {"cmd": [sys.executable, "-m", "acp_nvim.demo_agent"]}})
    editor.open_chat()
    send(editor, "hello", 1)
    shown = editor.transcript()
    thought = shown[shown.index("### Thinking") + 1]
    assert thought.startswith("> ")
    buf = editor.lua("return require('acp').export()")
    exported = editor.nvim.buffers[buf][:]
    at = exported.index(thought)
    assert exported[exported.index("## You") : at + 1] == [
        "## You", "", "hello", "", "## Agent", "", "### Thinking", "", thought
    ]


def outline(markdown: list[str]) -> list[str]:
    """The headings of ``markdown``, outside its code fences."""
    headings, fence = [], None
    for line in markdown:
        ticks = line[: len(line) - len(line.lstrip("`"))]
        if fence is None and len(ticks) >= 3:
            fence = ticks
        elif fence is not None and ticks.startswith(fence) and not line.strip("`"):
            fence = None
        elif fence is None and line.startswith("#"):
            headings.append(line)
    return headings


def test_the_exports_headings_say_who_speaks_whatever_the_prompt_holds(editor: Editor) -> None:
    """A prompt holding Markdown headings (`## Plan`, a line underlined `---`) made
    sections of the export as its `## You` and `## Agent` are, and the agent's
    thought and tool call before its reply were parts of `## You`. The export's own
    headings are its title, who speaks and the agent's parts; a message's are below
    them; code stays as it is."""
    editor.setup(agents={"demo": {"cmd": [sys.executable, "-m", "acp_nvim.demo_agent"]}})
    editor.open_chat()
    prompt = "# Goal\nlook at this\n## You\nSteps to take\n---\n```\n## kept as code\n```\nrun terminal"
    send(editor, prompt, 1)
    buf = editor.lua("return require('acp').export()")
    exported = editor.nvim.buffers[buf][:]
    # The prompt's headings under `## You`; the agent's thought and tool call under
    # `## Agent`, before its reply (a heading of its own, after the tool call's part);
    # the turn's end under acp.nvim's.
    assert outline(exported)[1:] == [
        "## You", "#### Goal", "##### You", "##### Steps to take",
        "## Agent", "### Thinking", "### Tool: Run a command", "## Agent", "## acp.nvim",
    ]  # fmt: skip
    assert exported.index("## kept as code") == exported.index("##### Steps to take") + 2


def test_a_conversation_carried_on_keeps_its_title(editor: Editor) -> None:
    """Handed over, or reopened and continued in a new session, a chat keeps the
    title it had: not the new session's, which the demo agent names after its first
    prompt."""
    demo = {"cmd": [sys.executable, "-m", "acp_nvim.demo_agent"]}
    editor.setup(agents={"demo": demo, "other": demo}, default_agent="demo")
    editor.open_chat()
    send(editor, "tell me about whales", 1)
    title = "return require('acp').status().title"
    assert editor.lua(title) == "tell me about whales"
    editor.nvim.command("AcpHandoff other")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "go on please", 2)
    assert editor.lua(title) == "tell me about whales"
    found = kept(editor, "please")
    assert [f["title"] for f in found] == ["tell me about whales"]

    agents = [
        pid for pid in editor.agent_pids() if b"demo_agent" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    editor.lua("require('acp').close()")  # the hand-over, then the first chat: its agent goes
    editor.lua("require('acp').close()")
    editor.wait("#require('acp').chats() == 0")
    # Reopened on a new process, which knows no session of the one before: not on the
    # one ending, which would still hold it while it answers its session/close.
    assert len(agents) == 2 and wait_gone(agents) == []
    [first] = [f for f in kept(editor, "whales", 2) if f["agent"] == "demo"]
    editor.lua("require('acp').open({history = ...})", first["id"])
    editor.wait("require('acp').status().state == 'ready'")
    editor.lua("require('acp').send(...)", "and dolphins?")
    # Its own turn's end (an event count would take another chat's for it).
    buf = editor.lua("return require('acp').status().transcript_buf")
    ends = f"table.concat(vim.api.nvim_buf_get_lines({buf}, 0, -1, false)):gsub('end_turn', '')"
    editor.wait(f"select(2, {ends}) == 2", what="the end of the turn sent")
    assert "demo starts a new session" in editor.transcript_text()
    assert editor.lua(title) == "tell me about whales"
    editor.wait("#require('acp').history({query = 'dolphins'}) == 1")
    [again] = editor.lua(HISTORY, {"query": "dolphins"})
    assert again["title"] == "tell me about whales"


SHOWN = (
    "vim.iter(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf, 0, -1, false))"
    ":any(function(l) return l:find(%r, 1, true) end)"
)


@pytest.mark.parametrize("version", [1, 2])
def test_a_chat_reopened_while_its_agent_closes_its_session_keeps_it(
    editor: Editor, version: int
) -> None:
    """A chat closed, then reopened from the history and sent to before its agent
    (still running for another chat) answered session/close: the reopened chat resumed
    the session at once, the late close ended it, and its next prompt was refused."""
    release = editor.tmp / "project" / "release"
    os.mkfifo(release)
    agent = {"slow": editor.fake_agent("slow_close")}
    editor.setup(agents=agent, default_agent="slow", protocol_version=version)
    editor.open_chat()
    editor.nvim.command("AcpChat!")  # the agent's second chat, where the turn goes
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "hello zebra", 1)
    editor.nvim.command("AcpClose")  # its session/close waits for the release
    closes = logged(">>", '"session/close"')
    editor.wait(f"#{closes} == 1", what="session/close sent")
    [closing] = editor.lua(f"return {closes}")
    [entry] = kept(editor, "zebra")
    chat = editor.lua("return require('acp').open({history = ...})", entry["id"])
    editor.wait(f"require('acp').status().chat == {chat}", what="the stored chat shown")
    editor.wait("require('acp').status().state == 'ready'", what="the stored chat drawn")
    editor.lua("require('acp').send('go on')")
    # The session resumed at once, or the chat says it waits for the close to end.
    resumes = logged(">>", '"session/resume"')
    editor.wait(f"#{resumes} > 0 or " + SHOWN % "still closing", what="the resume or a wait")
    with open(release, "wb"):  # the agent closes the session now, and answers
        pass
    answer = f'"id":{json.loads(closing.split(" >> ", 1)[1])["id"]},"result"'
    editor.wait(f"#{logged('<<', answer)} > 0", what="the close answered")
    editor.wait_event("AcpTurnEnd", count=2)
    send(editor, "calls", 3)
    assert [e["stop_reason"] for e in editor.events("AcpTurnEnd")] == ["end_turn"] * 3
    text = editor.transcript_text()
    assert "*slow is still closing this session: it goes on once that is done.*" in text
    assert "echo: go on" in text and "Resource not found" not in text
    calls = json.loads([line for line in editor.transcript() if line.startswith("[[")][-1])
    assert [(method, params["sessionId"]) for method, params in calls] == [
        ("session/close", "fake-2"),
        ("session/resume", "fake-2"),
    ]


def test_a_hand_over_whose_chat_closes_while_its_agent_starts_still_says_whose(
    editor: Editor,
) -> None:
    """The chat handed over can close while the new agent starts: the lines naming
    it came from its stored record, gone by then (a KeyError, and no chat)."""
    demo = {"cmd": [sys.executable, "-m", "acp_nvim.demo_agent"]}
    gate = editor.tmp / "gate"
    os.mkfifo(gate)
    late = f"read go < {gate}; exec {sys.executable} -m acp_nvim.demo_agent"
    editor.setup(agents={"demo": demo, "late": {"cmd": ["sh", "-c", late]}}, default_agent="demo")
    first = editor.open_chat()
    send(editor, "tell me about whales", 1)
    editor.nvim.command("AcpHandoff late")
    editor.lua("require('acp.chat').close(require('acp.chat.registry').chats[...], true)", first["chat"])
    opened = os.open(gate, os.O_RDWR)  # unlike a writer's open, never waits for the reader
    try:
        os.write(opened, b"go\n")  # the late agent starts now, its chat handed over closed
        editor.wait_event("AcpSessionReady", count=2)
    finally:
        os.close(opened)
    editor.wait("require('acp').status().state == 'ready'")
    text = editor.transcript_text()
    # "(begun ...)" too when the close came after the record was read.
    assert "*From demo's chat “tell me about whales”" in text
    assert "demo answers from here.*" in text
    assert "*Handed over from demo's chat “tell me about whales” to late" in text
    assert not [e for e in editor.lua("return _G.acp_events") if e["name"] == "AcpError"]


def newer(store: Path) -> None:
    """``store`` as a later acp.nvim's schema would leave it."""
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE chats (id INTEGER PRIMARY KEY, future TEXT)")
        db.execute("PRAGMA user_version = 99")


@pytest.mark.parametrize(
    ("prepare", "why"),
    [
        (lambda store: store.write_bytes(b"this is not a database " * 100), "damaged"),
        (newer, "written by a newer acp.nvim"),
    ],
)
def test_a_damaged_or_newer_store_costs_the_history_not_the_chat(
    editor: Editor, prepare: Any, why: str
) -> None:
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    store.parent.mkdir(parents=True)
    prepare(store)
    before = store.read_bytes()
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello", 1)
    assert "echo: hello" in editor.transcript_text()
    editor.wait("#_G.acp_notices > 0")
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert len(notices) == 1 and "history off" in notices[0] and why in notices[0]
    send(editor, "again", 2)
    assert "echo: again" in editor.transcript_text()
    assert editor.lua("return require('acp').status().history") is None
    assert store.read_bytes() == before


def test_a_search_of_a_store_whose_index_is_damaged_says_so_in_a_line(editor: Editor) -> None:
    """A store whose search index a disk fault damaged: listing the chats works, but
    a search for a word said SQLite's words alone ("history: vtable constructor
    failed: search"), not which file is damaged nor what to do, as other reads do."""
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    kept = Store(str(store))
    try:
        chat = kept.new_chat("kept", str(editor.tmp / "project"))
        kept.write(chat, [StoredBlock(0, "k0", 1, "user", "hello zebra")], {"title": "hello zebra"})
    finally:
        kept.close()
    with contextlib.closing(sqlite3.connect(store)) as db, db:
        db.execute("UPDATE search_data SET block = x'ffffffffffff' WHERE id > 1")
    editor.setup(agents=agents(editor), default_agent="kept")
    assert [e["title"] for e in editor.lua(HISTORY)] == ["hello zebra"]
    failed = editor.lua("return select(2, pcall(require('acp').history, {query = 'zebra'}))")
    assert failed == f"acp: history: {store} is damaged (vtable constructor failed: search): move it away"
    # Moved away as it says: the searches read the file there now (a new one), not
    # the damaged one they had open, until Neovim restarted.
    for kept_file in store.parent.glob("history.sqlite3*"):
        kept_file.rename(kept_file.with_name(kept_file.name.replace("history", "damaged")))
    assert editor.lua(HISTORY, {"query": "zebra"}) == [] and editor.lua(HISTORY) == []


@pytest.mark.parametrize(
    ("read", "found"),
    [
        ("#require('acp').history({query = 'STRASSE'})", 1),  # ß folded: indexed again
        (  # the buffer it shows the chat in
            "table.concat(vim.api.nvim_buf_get_lines(require('acp').export(nil, {history = 1}),"
            " 0, -1, false), '\\n'):find('Die Straße', 1, true) ~= nil",
            True,
        ),
    ],
)
def test_the_first_read_after_an_upgrade_holds_up_nothing_else(
    editor: Editor, read: str, found: object
) -> None:
    """The first open of an older file re-indexes it (schema 4: seconds for a large
    one). A search or export as the first thing opened it on the host's thread
    that takes Neovim's messages: until it was done, nothing else asked of the host
    was answered, and no chat's stream reached Neovim. The host answers meanwhile
    (Neovim's loop runs: it waits with vim.wait), and the search finds the old
    chats by their folded words."""
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    store.parent.mkdir(parents=True)
    # Some 10 MB to index again: far longer than a question to the host and back.
    filler = ["Ёлка и Йошкар-Ола, καφές στην Αθήνα. " * 50] * 20
    schema_3(store, {1: ["Die Straße"]} | {chat: filler for chat in range(2, 300)})
    editor.setup(agents=agents(editor), default_agent="kept")
    answered = editor.lua(
        f"""
        local host = require('acp.host')
        local answered, reply = {{}}, host.handlers.reply
        host.handlers.reply = function(item)
          answered[#answered + 1] = item.result == 'pong' and 'ping' or 'read'
          reply(item)
        end
        -- Asked from Neovim's loop while the read waits for its answer.
        vim.defer_fn(function() host.ask('ping', {{}}, function() end) end, 0)
        local found = {read}
        host.handlers.reply = reply
        return {{answered, found}}
        """
    )
    assert answered == [["ping", "read"], found]


@contextlib.contextmanager
def read_only_neovim(editor: Editor) -> Iterator[Editor]:
    """Another Neovim, set up, that can read the history file (``editor``'s, which
    has quit) but neither write it nor make files beside it."""
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    # Neither the file nor its directory writable; root writes there regardless
    # unless its Neovim (and the Python side it starts) lacks CAP_DAC_OVERRIDE.
    store.chmod(0o444)
    store.parent.chmod(0o555)
    wrapper = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    try:
        with second_neovim(editor, wrapper if os.geteuid() == 0 else None) as other:
            other.setup(agents=agents(editor), default_agent="kept")
            yield other
    finally:
        store.parent.chmod(0o755)
        store.chmod(0o644)


def test_a_read_only_store_costs_the_history_not_the_chat(editor: Editor) -> None:
    a_kept_chat(editor)
    editor.quit()
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    before = store.read_bytes()
    with read_only_neovim(editor) as other:
        other.open_chat()
        send(other, "hello", 1)
        assert "echo: hello" in other.transcript_text()
        other.wait("#_G.acp_notices > 0")
        send(other, "again", 2)
        other.lua("require('acp').open({agent = 'plain'})")
        other.wait_event("AcpSessionReady", count=2)
        send(other, "a second chat", 3)
        [notice] = [n["msg"] for n in other.lua("return _G.acp_notices")]
        assert notice == f"acp: history off: {store} is read-only"
        assert other.lua("return require('acp').status().history") is None
    assert store.read_bytes() == before


def test_a_read_only_store_is_still_searched_and_exported_from(editor: Editor) -> None:
    """A history file you may read but not write (another user's, a read-only
    mount): its chats are found and exported; only keeping new ones is off."""
    entry = a_kept_chat(editor)
    editor.quit()
    with read_only_neovim(editor) as other:
        [found] = other.lua(HISTORY, {"query": "zebra"})
        assert found["id"] == entry["id"]
        path = editor.tmp / "project" / "chat.md"
        other.lua("require('acp').export(...)", str(path), {"history": found["id"]})
        assert "## You\n\nhello zebra" in path.read_text()
        notices = [n["msg"] for n in other.lua("return _G.acp_notices")]
        assert notices == [f"acp: exported to {path}"]


def test_a_locked_store_costs_the_history_not_the_chat(editor: Editor) -> None:
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    store.parent.mkdir(parents=True)
    holder = sqlite3.connect(store, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        editor.setup(agents=agents(editor), default_agent="kept")
        editor.open_chat()
        send(editor, "hello", 1)
        assert "echo: hello" in editor.transcript_text()
        editor.wait("#_G.acp_notices > 0")
        [notice] = [n["msg"] for n in editor.lua("return _G.acp_notices")]
        assert "history off" in notice and "locked" in notice
        send(editor, "again", 2)
        assert "echo: again" in editor.transcript_text()
    finally:
        holder.close()


def test_a_chat_deleted_while_another_neovim_writes_is_deleted_once_it_is_done(
    editor: Editor,
) -> None:
    """The delete was dropped with the write attempt the other Neovim's lock failed:
    `written again` was said, and the chat stayed in the history."""
    entry = a_kept_chat(editor)
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    holder = sqlite3.connect(store, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # longer than the busy timeout
        editor.lua("require('acp').forget(...)", entry["id"])
        editor.wait(
            "vim.iter(_G.acp_notices):any(function(n) return n.msg:find('retrying') end)",
            timeout=30,
        )
        holder.execute("COMMIT")
    finally:
        holder.close()
    editor.wait(
        "vim.iter(_G.acp_notices):any(function(n) return n.msg:find('written again') end)",
        timeout=30,
    )
    assert editor.lua(HISTORY, {}) == []


def test_a_killed_neovim_and_host_lose_nothing_written(editor: Editor) -> None:
    """Each turn is written at its end: killing the Python side and Neovim then
    leaves a file the next Neovim reads whole (WAL, not yet checkpointed)."""
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    send(editor, "then giraffe", 2)
    [entry] = kept(editor, "giraffe")
    host = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    pids = editor.agent_pids()
    os.kill(host, signal.SIGKILL)
    os.kill(editor.pid, signal.SIGKILL)
    assert wait_gone([editor.pid, *pids]) == []
    editor.quit()
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    assert Path(f"{store}-wal").exists()  # closed by nobody

    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="kept")
        [found] = other.lua(HISTORY, {"query": "giraffe"})
        assert (found["id"], found["turns"]) == (entry["id"], 2)
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        text = other.transcript_text()
        assert "echo: hello zebra" in text and "echo: then giraffe" in text


def test_two_neovims_writing_at_once_keep_both_chats(editor: Editor) -> None:
    with second_neovim(editor) as other:
        for nvim in (editor, other):
            nvim.setup(agents=agents(editor), default_agent="kept")
            nvim.open_chat()
        for turn in range(1, 6):
            editor.lua("require('acp').send(...)", f"first{turn} elephant")
            other.lua("require('acp').send(...)", f"second{turn} elephant")
            editor.wait_event("AcpTurnEnd", count=turn)
            other.wait_event("AcpTurnEnd", count=turn)
        # Written once Neovim has drawn the turn's end (decision 0072): each chat's
        # fifth turn lands a moment after its AcpTurnEnd.
        editor.wait(
            "#vim.tbl_filter(function(f) return f.turns == 5 end,"
            " require('acp').history({query = 'elephant'})) == 2",
            what="both chats' fifth turns",
        )
        found = kept(editor, "elephant", 2)
        assert sorted(f["turns"] for f in found) == [5, 5]
        for word in ("first5", "second5", "first1", "second1"):
            assert len(editor.lua(HISTORY, {"query": word})) == 1, word


def two_turns_and_pickers_shown(editor: Editor, pick: bool) -> None:
    """A kept chat of two turns (zebra, giraffe); every vim.ui.select's items listed
    in ``_G.shown`` as shown, the first one picked when ``pick``."""
    a_kept_chat(editor)
    send(editor, "giraffe", 2)
    kept(editor, "giraffe")
    editor.lua(
        """
        local pick = ...
        _G.shown = {}
        vim.ui.select = function(items, opts, choice)
          table.insert(_G.shown, vim.tbl_map(opts.format_item or tostring, items))
          if pick then choice(items[1]) end
        end
        """,
        pick,
    )


def test_the_picker_opens_a_stored_chat(editor: Editor) -> None:
    # vim.ui.select picks the first entry, then "open".
    two_turns_and_pickers_shown(editor, pick=True)
    # Open here: "open" goes to that chat. Two chats on one would both write it.
    editor.nvim.command("AcpHistory zebra")
    shown = editor.lua("return _G.shown")
    assert len(shown[0]) == 1 and shown[0][0].startswith("hello zebra · kept · ")
    assert " · open in chat #1  " in shown[0][0] and "echo: hello zebra" in shown[0][0]
    assert shown[1] == ["open", "export", "rename", "delete"]
    assert [c["id"] for c in editor.lua("return require('acp').chats()")] == [1]
    assert editor.lua("return vim.api.nvim_get_current_buf()") == (
        editor.lua("return require('acp').status().input_buf")
    )
    # Closed, it opens in a new chat.
    editor.nvim.command("AcpClose")
    editor.nvim.command("AcpHistory zebra")
    editor.wait("require('acp').status().history ~= nil and #require('acp').chats() == 1")
    assert " · open in chat" not in editor.lua("return _G.shown")[2][0]
    assert editor.lua("return require('acp').chats()")[0]["id"] == 2
    editor.wait("require('acp').status().state == 'ready'")
    assert "echo: giraffe" in editor.transcript_text()
    # Opened again (the API's way): the chat that shows it.
    assert editor.lua("return require('acp').open({history = require('acp').status().history})") == 2
    assert len(editor.lua("return require('acp').chats()")) == 1


def test_the_picker_finds_a_chat_by_words_of_two_of_its_turns(editor: Editor) -> None:
    """`:AcpHistory zebra giraffe` said "no stored chat holds zebra giraffe" of a chat
    whose first prompt said zebra and second giraffe: every word had to be in one
    prompt, reply or tool call."""
    two_turns_and_pickers_shown(editor, pick=False)
    editor.nvim.command("AcpHistory zebra giraffe")
    [[item]] = editor.lua("return _G.shown")
    assert item.startswith("hello zebra · kept · ") and item.endswith("  echo: hello zebra")
    assert editor.lua("return _G.acp_notices") == []


def test_the_picker_exports_renames_and_deletes(editor: Editor) -> None:
    a_kept_chat(editor)
    path = editor.tmp / "picked.md"
    # vim.ui.select picks the first entry, then the action asked for; vim.ui.input answers.
    editor.lua(
        """
        _G.answers = {}
        vim.ui.select = function(items, opts, choice)
          choice(opts.prompt == 'History' and items[1] or table.remove(_G.answers, 1))
        end
        vim.ui.input = function(opts, done) done(table.remove(_G.answers, 1)) end
        """
    )
    picked = "_G.answers = {...}; vim.cmd('AcpHistory')"
    editor.lua(picked, "export", str(path))
    editor.wait(f"vim.uv.fs_stat('{path}') ~= nil", what="the picker's export")
    assert path.read_text().startswith("# hello zebra\n")
    editor.lua(picked, "rename", "  Zoo ")
    editor.wait("require('acp').history()[1].title == 'Zoo'")
    editor.wait("require('acp').chats()[1].title == 'Zoo'", what="the open chat renamed")
    editor.lua(picked, "delete")
    editor.wait("#require('acp').history() == 0")
    assert editor.lua(HISTORY, {"query": "zebra"}) == []
    # The chat goes on, no longer naming the stored chat it was.
    editor.wait("require('acp').status().history == nil", what="the stored chat's number let go")
    assert editor.lua("return require('acp').status().state") == "ready"


def test_a_chat_has_one_name_open_and_stored(editor: Editor) -> None:
    """A name given with :AcpChats showed in the chat only: the history, its picker
    and the chat reopened later went on with the old one."""
    a_kept_chat(editor)
    # Each picker takes its first entry, then "rename"; vim.ui.input answers.
    renamed = """
        local picker, name = ...
        vim.ui.select = function(items, opts, choice)
          choice((opts.prompt == 'Chats' or opts.prompt == 'History') and items[1] or 'rename')
        end
        vim.ui.input = function(opts, done) done(name) end
        vim.cmd(picker)
    """
    named = "require('acp').chats()[1].title"
    editor.lua(renamed, "AcpChats", " Zoo ")
    assert editor.lua(f"return {named}") == "Zoo"
    editor.wait("require('acp').history()[1].title == 'Zoo'", what="the name stored")
    export = "return vim.api.nvim_buf_get_lines(require('acp').export(), 0, 1, false)[1]"
    assert editor.lua(export) == "# Zoo"
    editor.lua(renamed, "AcpHistory", "Yak")
    editor.wait("require('acp').history()[1].title == 'Yak'", what="the name stored")
    editor.wait(f"{named} == 'Yak'", what="the open chat renamed")
    assert "Yak" in editor.winbar()
    entry = editor.lua(HISTORY)[0]
    editor.quit()

    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="kept")
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        assert other.lua(f"return {named}") == "Yak"
        # An empty name: the chat goes by its title again, here and stored.
        other.lua(renamed, "AcpChats", "")
        assert other.lua(f"return {named}") == "hello zebra"
        other.wait("require('acp').history()[1].title == 'hello zebra'", what="the name gone")


def test_a_title_or_name_with_a_line_break_shows_on_one_line(editor: Editor) -> None:
    """The v2 demo titles its session with its first prompt's first characters, a
    line break with them: the winbar, :AcpChats, :AcpHistory, :AcpSessions and the
    export's heading showed it raw (a name typed with one did the same)."""
    editor.setup(protocol_version=2)
    editor.open_chat()
    send(editor, "fix the parser\nit fails on tabs", 1)
    one = "fix the parser it fails on tabs"
    assert editor.lua("return require('acp').status().title") == one
    assert kept(editor, "parser")[0]["title"] == one
    export = "return vim.api.nvim_buf_get_lines(require('acp').export(), 0, 1, false)[1]"
    assert editor.lua(export) == f"# {one}"
    editor.lua(
        """
        vim.ui.select = function(items, opts, choice)
          _G.offered = vim.tbl_map(opts.format_item or tostring, items)
        end
        """
    )
    for command in ("AcpChats", "AcpHistory", "AcpSessions"):
        editor.lua("_G.offered = nil")
        editor.nvim.command(command)
        editor.wait("_G.offered ~= nil", what=command)
        [item] = editor.lua("return _G.offered")
        assert one in item and "\n" not in item, command
    # A name given with a line break (pasted) is one line too, open and stored.
    editor.lua(
        """
        vim.ui.select = function(items, opts, choice) choice(opts.prompt == 'Chats' and items[1] or 'rename') end
        local name = ...
        vim.ui.input = function(opts, done) done(name) end
        vim.cmd('AcpChats')
        """,
        "the\nparser ",
    )
    assert editor.lua("return require('acp').chats()[1].title") == "the parser"
    editor.wait("require('acp').history()[1].title == 'the parser'", what="the name stored")


def test_a_name_with_a_no_break_space_or_line_separator_shows_the_same_everywhere(
    editor: Editor,
) -> None:
    """A name pasted with a no-break space and U+2028 (a line separator, drawn as
    `<2028>`) kept them in the winbar and :AcpChats, where the history's picker,
    made on the Python side, showed spaces: one chat, two names."""
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    editor.lua(
        """
        vim.ui.select = function(items, opts, choice) choice(opts.prompt == 'Chats' and items[1] or 'rename') end
        local name = ...
        vim.ui.input = function(opts, done) done(name) end
        vim.cmd('AcpChats')
        """,
        "the\u00a0parser\u2028fix\u3000",
    )
    editor.wait("(require('acp').history()[1] or {}).title == 'the parser fix'", what="the name stored")
    assert editor.lua("return require('acp').chats()[1].title") == "the parser fix"


def test_a_chat_whose_opening_was_refused_is_not_kept(editor: Editor) -> None:
    """A refused :AcpResume and a refused :AcpWorktree closed the chat they opened,
    yet left it in the history: `chat 3 · demo · ~/project · just now`, 0 turns.
    One the user goes on in, kept for what its input held, is kept."""
    editor.setup()
    editor.open_chat()
    send(editor, "hello zebra", 1)
    editor.nvim.command("AcpResume nosuch")
    editor.wait_event("AcpError")
    editor.nvim.command("AcpWorktree")  # the project is not in a git repository
    editor.wait_event("AcpError", count=2)
    editor.wait("#require('acp').chats() == 1", what="the refused chats closed")
    send(editor, "giraffe", 2)  # written after all the refused chats would have been
    kept(editor, "giraffe")
    assert [e["title"] for e in editor.lua(HISTORY)] == ["hello zebra"]

    editor.lua("vim.cmd('AcpResume nosuch'); require('acp').send('keep me')")
    editor.wait_event("AcpError", count=3)  # kept, failed, for what its input holds
    editor.wait("require('acp').status().state == 'error'")
    send(editor, "keep me", 3)  # it starts again, in a session of its own
    editor.nvim.command("AcpClose")
    send(editor, "okapi", 4)
    kept(editor, "okapi")
    assert [e["title"] for e in editor.lua(HISTORY)] == ["hello zebra", "keep me"]


def test_a_chat_never_prompted_is_not_kept(editor: Editor) -> None:
    """A chat opened and left (or closed) without a prompt stayed in :AcpHistory as
    "chat 1", 0 turns: empty chats piled up. Named, it is kept with its first turn."""
    editor.setup()
    editor.open_chat()  # chat 1: never prompted, closed
    editor.nvim.command("AcpClose")
    editor.wait("#require('acp').chats() == 0", what="chat 1 closed")
    editor.nvim.command("AcpChat")  # chat 2: never prompted, left open
    editor.wait_event("AcpSessionReady", count=2)
    editor.nvim.command("AcpChat!")  # chat 3: named, then prompted
    editor.wait_event("AcpSessionReady", count=3)
    editor.lua("require('acp.host').notify('rename', {chat = 3, name = 'Zoo'})")
    send(editor, "hello zebra", 1)
    kept(editor, "zebra")  # written after chats 1 and 2 would have been
    assert [(e["title"], e["turns"]) for e in editor.lua(HISTORY)] == [("Zoo", 1)]


def test_a_stored_chat_open_here_is_exported_with_the_turn_just_ended(editor: Editor) -> None:
    """Exported from the history (`{history = id}`) as its turn ended, a chat open
    here lacked that turn: the file was read, written up to half a second later."""
    entry = a_kept_chat(editor)
    editor.lua("require('acp').send('hello giraffe')")
    editor.wait_event("AcpTurnEnd", count=2)
    buf = editor.lua("return require('acp.chat.history').export(nil, {history = ...})", entry["id"])
    exported = "\n".join(editor.nvim.buffers[buf][:])
    assert "hello zebra" in exported and "hello giraffe" in exported


def test_a_search_right_after_acpclose_finds_the_turn_just_ended(editor: Editor) -> None:
    """`:AcpClose` then at once `require("acp").history({query = ...})` from one
    script: the search could read the file before the close handed the chat's last
    turn to the writer (tests/unit/test_host_close.py holds the loop back to show it)."""
    a_kept_chat(editor)
    editor.lua("require('acp').send('hello giraffe')")
    editor.wait_event("AcpTurnEnd", count=2)
    found = editor.lua("vim.cmd('AcpClose'); return require('acp').history({query = 'giraffe'})")
    assert [entry["turns"] for entry in found] == [2]


def test_an_export_writes_over_a_file_only_when_told(editor: Editor) -> None:
    """:AcpExport notes.md wrote over the user's notes.md without a word."""
    a_kept_chat(editor)
    notes = editor.tmp / "project" / "notes.md"
    notes.write_text("mine\n")
    editor.nvim.command("AcpExport notes.md")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        "acp: notes.md exists (add ! to write over it)"
    )
    assert notes.read_text() == "mine\n"
    editor.nvim.command("AcpExport! notes.md")
    editor.wait(f"vim.fn.readfile({str(notes)!r})[1] == '# hello zebra'", what="the export")
    # The picker asks.
    notes.write_text("mine\n")
    editor.lua(
        """
        _G.asked, _G.answers = {}, {...}
        vim.ui.select = function(items, opts, choice)
          table.insert(_G.asked, opts.prompt)
          choice(opts.prompt == 'History' and items[1] or table.remove(_G.answers, 1))
        end
        vim.ui.input = function(opts, done) done(table.remove(_G.answers, 1)) end
        vim.cmd('AcpHistory')
        """,
        "export", str(notes), "cancel",
    )
    assert editor.lua("return _G.asked")[-1] == f"{notes} exists"
    assert notes.read_text() == "mine\n"
    editor.lua("_G.answers = {...}; vim.cmd('AcpHistory')", "export", str(notes), "write over it")
    editor.wait(f"vim.fn.readfile({str(notes)!r})[1] == '# hello zebra'", what="the export")


def test_an_export_from_the_chat_takes_percent_for_the_file_beside_it(editor: Editor) -> None:
    """`:AcpExport %:p:h/chat.md` typed in the chat's input expanded `%` to the input's
    buffer, acp://input/1, and failed with ENOENT. There `%` (and `#`) are the file
    you work on, in the window beside the chat; where none is, it says so."""
    docs = editor.tmp / "project" / "docs"
    docs.mkdir()
    editor.nvim.command(f"edit {docs / 'guide.md'}")
    a_kept_chat(editor)
    assert editor.lua("return vim.api.nvim_buf_get_name(0)").startswith("acp://input/")
    editor.nvim.command("AcpExport %:p:h/chat.md")
    editor.wait(f"vim.fn.filereadable({str(docs / 'chat.md')!r}) == 1", what="the export")
    assert (docs / "chat.md").read_text().startswith("# hello zebra\n")
    # The chat alone in its tab page: no file for `%` to name.
    editor.lua(
        """for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
             if not vim.b[vim.api.nvim_win_get_buf(win)].acp_chat then
               vim.api.nvim_win_close(win, false)
             end
           end"""
    )
    editor.nvim.command("AcpExport %:r.md")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        "acp: %:r.md names no file beside the chat (acp://input/1.md): give a path"
    )


def test_an_export_to_a_directory_says_it_is_one(editor: Editor) -> None:
    """:AcpExport docs said "docs/ exists (add ! to write over it)", and with ! "cannot
    write docs/: ENOTDIR: not a directory: docs/..2106.1.acp~ -> docs/"; the picker
    asked whether to write over it."""
    a_kept_chat(editor)
    docs = editor.tmp / "project" / "docs"
    docs.mkdir()
    for command in ("AcpExport docs", "AcpExport! docs"):
        editor.nvim.command(command)
        assert editor.lua("return _G.acp_notices")[-1]["msg"] == "acp: docs/ is a directory"
    editor.lua(
        """
        _G.asked, _G.answers = {}, {...}
        vim.ui.select = function(items, opts, choice)
          table.insert(_G.asked, opts.prompt)
          choice(opts.prompt == 'History' and items[1] or table.remove(_G.answers, 1))
        end
        vim.ui.input = function(opts, done) done(table.remove(_G.answers, 1)) end
        vim.cmd('AcpHistory')
        """,
        "export", str(docs),
    )
    assert editor.lua("return _G.asked") == ["History", "hello zebra"]
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == "acp: docs/ is a directory"
    assert list(docs.iterdir()) == []


def test_an_export_into_a_directory_not_there_says_so_of_the_path_given(editor: Editor) -> None:
    """`require('acp').export('notes/chat.md')` said "cannot write .../notes/chat.md:
    Can't open file .../notes/.chat.md.7838.acp~ for writing: ...", naming a file
    the user never asked for."""
    a_kept_chat(editor)
    path = editor.tmp / "project" / "notes" / "chat.md"
    with pytest.raises(Exception, match="cannot write") as failed:
        editor.lua("return require('acp').export(...)", "notes/chat.md")
    assert "acp~" not in str(failed.value) and str(path) in str(failed.value)
    editor.nvim.command("AcpExport notes/chat.md")
    editor.wait("_G.acp_notices[1] ~= nil")
    [told] = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert told.startswith(f"acp: cannot write {path}: ") and "acp~" not in told
    assert not path.parent.exists()


def test_an_export_over_a_symlink_writes_its_target(editor: Editor) -> None:
    """`:AcpExport! notes.md`, notes.md a symlink to a file kept elsewhere, put a
    file in place of the link (the new file renamed over it), leaving its target as
    it was; `:write!` writes through a symlink."""
    a_kept_chat(editor)
    elsewhere = editor.tmp / "elsewhere.md"
    elsewhere.write_text("old\n")
    link = editor.tmp / "project" / "notes.md"
    link.symlink_to(elsewhere)
    editor.lua("return require('acp').export(...)", "notes.md", {"force": True})
    editor.nvim.command("AcpExport! notes.md")
    editor.wait("#_G.acp_notices >= 2")
    assert link.is_symlink() and elsewhere.read_text().startswith("# hello zebra\n")


def test_forget_and_rename(editor: Editor) -> None:
    entry = a_kept_chat(editor)
    editor.lua("require('acp.host').notify('history_rename', {id = ..., name = 'Zoo'})", entry["id"])
    editor.wait("require('acp').history()[1].title == 'Zoo'")
    editor.lua("require('acp').forget(...)", entry["id"])
    editor.wait("#require('acp').history() == 0")
    # The chat goes on, no longer kept, and says so.
    said = "acp: history: deleted; chat #1 goes on, no longer kept"
    editor.wait(f"vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices), {said!r})")
    send(editor, "hello again zebra", 2)
    assert editor.lua(HISTORY, {"query": "zebra"}) == []


def said(editor: Editor, words: str) -> bool:
    """Whether a notice held ``words``."""
    return any(words in n["msg"] for n in editor.lua("return _G.acp_notices"))


def test_a_chat_deleted_in_another_neovim_while_shown_here_says_it_goes_on_unkept(
    editor: Editor,
) -> None:
    """Its turns stopped being kept without a word, and `status().history` went on
    naming the deleted chat."""
    entry = a_kept_chat(editor)
    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="kept")
        other.lua("require('acp').forget(...)", entry["id"])
        other.wait("#require('acp').history() == 0")
    send(editor, "hello again okapi", 2)
    editor.wait("require('acp').status().history == nil", what="the stored chat's number let go")
    gone = f"history: stored chat {entry['id']} was deleted in another Neovim; chat #1 goes on"
    assert said(editor, gone), editor.lua("return _G.acp_notices")
    assert editor.lua(HISTORY, {}) == []


def test_a_stored_chat_given_a_deleted_chats_number_opens_as_itself(editor: Editor) -> None:
    """SQLite gives a deleted chat's number to the next chat stored: opening that one
    from the history went to the open chat the deleted one had been."""
    deleted = a_kept_chat(editor)
    editor.lua("require('acp').forget(...)", deleted["id"])
    editor.wait("#require('acp').history() == 0")
    editor.lua("require('acp').open({agent = 'plain'})")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "hello okapi", 2)
    [stored] = kept(editor, "okapi")
    assert stored["id"] == deleted["id"]  # the number again, as the test means
    editor.lua("require('acp').close()")
    editor.lua("require('acp').open({history = ...})", stored["id"])
    editor.wait("require('acp').status().state == 'ready'")
    assert editor.lua("return require('acp').status().chat") == 3
    assert "hello okapi" in editor.transcript_text()


def test_a_limit_of_0_lists_none_and_a_query_of_no_word_says_so(editor: Editor) -> None:
    """`history({limit = 0})` listed 50 chats, and a search of only an emoji (or
    punctuation) every chat, each with an empty snippet."""
    a_kept_chat(editor)
    assert editor.lua(HISTORY, {"limit": 0}) == []
    assert len(editor.lua(HISTORY, {"limit": 1})) == 1
    for call, said in {
        "{limit = -1}": "acp: history: opts.limit: expected 0 or more, got -1",
        "{query = '🦓'}": "acp: history: '🦓' holds no word to look for (letters or digits)",
        "{query = '?!'}": "acp: history: '?!' holds no word to look for (letters or digits)",
    }.items():
        raised = editor.lua(f"return select(2, pcall(require('acp').history, {call}))")
        assert raised == said, call
    editor.lua("_G.acp_notices = {}; pcall(vim.cmd, 'AcpHistory ...')")
    said = "acp: history: '...' holds no word to look for (letters or digits)"
    assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [said]


def test_the_chats_of_a_directory_are_found_however_it_is_written(editor: Editor) -> None:
    """`history({cwd = ...})` matched the stored directory as a string: with a
    trailing slash, `.`, or through a symlink to it, it listed nothing."""
    a_kept_chat(editor)
    link = editor.tmp / "link"
    link.symlink_to(editor.tmp / "project")
    for cwd in ["vim.fn.getcwd()", "vim.fn.getcwd() .. '/'", "'.'", f"'{link}'", f"'{link}/'"]:
        found = editor.lua(f"return require('acp').history({{cwd = {cwd}}})")
        assert [f["cwd"] for f in found] == [str(editor.tmp / "project")], cwd
    assert editor.lua(HISTORY, {"cwd": str(editor.tmp)}) == []  # not its parent's


def test_an_old_chat_is_forgotten_before_it_is_listed_never_under_its_reopening(
    editor: Editor,
) -> None:
    """With `history.max_age_days`, the picker listed a chat past that age; reopened,
    it was deleted as the reopening started the history's writer, which forgets old
    chats first: the chat went on unkept, and said another Neovim had deleted it."""
    old = a_kept_chat(editor)
    editor.lua("require('acp').close()")
    editor.lua("require('acp').open({agent = 'plain'})")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "then okapi", 2)
    [recent] = kept(editor, "okapi")
    editor.quit()
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    with sqlite3.connect(store) as db:
        db.execute("UPDATE chats SET updated_at = ? WHERE id = ?", (time.time() - 40 * 86400, old["id"]))
    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="kept", history={"max_age_days": 30})
        # Reopened (by its number, as a picker opened before would): refused.
        other.lua("require('acp').open({history = ...})", old["id"])
        other.wait("#_G.acp_notices > 0")
        said_first = other.lua("return _G.acp_notices")[0]["msg"]
        assert said_first == f"acp: history: no chat {old['id']}"
        assert [f["id"] for f in other.lua(HISTORY, {})] == [recent["id"]]
        # A chat of the age asked for is reopened and kept as ever.
        other.lua("require('acp').open({history = ...})", recent["id"])
        other.wait("require('acp').status().history ~= nil")
        send(other, "more giraffe", 1)
        assert [f["id"] for f in kept(other, "giraffe")] == [recent["id"]]
        assert not said(other, "deleted")


def test_history_off_keeps_nothing(editor: Editor) -> None:
    editor.setup(agents=agents(editor), default_agent="kept", history={"enabled": False})
    editor.open_chat()
    send(editor, "hello zebra", 1)
    assert editor.lua("return require('acp').status().history") is None
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    assert not Path(store).exists()


def test_an_agent_kept_out_of_the_history(editor: Editor) -> None:
    setup = agents(editor)
    setup["kept"]["history"] = False
    editor.setup(agents=setup, default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    editor.lua("require('acp').open({agent = 'plain'})")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "hello giraffe", 2)
    [entry] = kept(editor, "giraffe")
    assert entry["agent"] == "plain"
    assert editor.lua(HISTORY, {"query": "zebra"}) == []


def hand_over_and_find_neither(editor: Editor) -> None:
    """Hand the chat (which said "zebra") over to `plain`, say "giraffe" there, and
    find neither in the history once a later chat's turn was written."""
    editor.nvim.command("AcpHandoff plain")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, "hello giraffe", 2)
    editor.lua("require('acp').open({agent = 'embeds'})")
    editor.wait_event("AcpSessionReady", count=3)
    send(editor, "hello okapi", 3)
    kept(editor, "okapi")  # written after the hand-over's turn would have been
    assert editor.lua(HISTORY, {"query": "zebra"}) == []
    assert editor.lua(HISTORY, {"query": "giraffe"}) == []


def test_a_hand_over_of_a_chat_kept_out_of_the_history_is_kept_out_too(editor: Editor) -> None:
    """`agents.<name>.history = false` kept that agent's conversation out of the
    file, until it was handed over to an agent that is kept: the hand-over, whose
    first rows are that conversation, put it there."""
    setup = agents(editor)
    setup["kept"]["history"] = False
    editor.setup(agents=setup, default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    hand_over_and_find_neither(editor)


def test_a_hand_over_of_a_chat_deleted_from_the_history_is_not_kept(editor: Editor) -> None:
    """Deleted from the history while open, a chat goes on no longer kept; handed
    over, its conversation came back into the file as the hand-over's first rows."""
    entry = a_kept_chat(editor)
    editor.lua("require('acp').forget(...)", entry["id"])
    editor.wait("#require('acp').history() == 0")
    hand_over_and_find_neither(editor)


@pytest.mark.parametrize("version", [1, 2])
def test_a_reopened_chat_works_in_its_stored_directory(editor: Editor, version: int) -> None:
    """Reopened from another directory, a chat, its continuation (its session
    loaded over v1, resumed over v2), the prompts <Up> recalls and a hand-over from
    it are the stored chat's directory's."""
    project = editor.tmp / "project"
    workspace = {"ws": editor.fake_agent("workspace"), "other": editor.fake_agent("workspace")}
    editor.setup(agents=workspace, default_agent="ws", protocol_version=version)
    editor.open_chat()
    send(editor, "where", 1)
    [entry] = kept(editor, "where")
    entry_session = editor.lua("return require('acp').status().session_id")
    editor.quit()

    other = second_neovim(editor)
    elsewhere = editor.tmp / "elsewhere"
    elsewhere.mkdir()
    other.nvim.command(f"cd {elsewhere}")
    try:
        other.setup(agents=workspace, default_agent="ws", protocol_version=version)
        # history() filters by directory and agent.
        assert other.lua(HISTORY, {"cwd": str(elsewhere)}) == []
        assert other.lua(HISTORY, {"agent": "other"}) == []
        [found] = other.lua(HISTORY, {"cwd": str(project), "agent": "ws", "limit": 1})
        assert found["id"] == entry["id"]
        chat = other.lua("return require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        registry = "require('acp.chat.registry').chats[...]"
        assert other.lua(f"return {registry}.cwd", chat) == str(project)
        assert other.lua("return require('acp').status().cwd") == str(project)
        # <Up> in the input recalls the prompts sent in that directory.
        other.lua(f"require('acp.chat.prompt_history').step({registry}, -1)", chat)
        assert other.lua(f"return vim.api.nvim_buf_get_lines({registry}.input, 0, -1, false)", chat) == ["where"]

        # Continued: its session goes on in that directory (not a new one), and runs there.
        send(other, "where", 1)
        said = [line for line in other.transcript() if line.startswith("RESULT ")]
        assert json.loads(said[-1].removeprefix("RESULT ")) == {"cwd": str(project), "roots": None}
        assert other.lua("return require('acp').status().session_id") == entry_session
        assert "starts a new session" not in other.transcript_text()
        # Handed over: the other agent works there too.
        other.nvim.command("AcpHandoff other")
        other.wait_event("AcpSessionReady")
        handed = other.lua("return require('acp').status()")
        assert handed["agent"] == "other" and handed["cwd"] == str(project)
        assert other.lua(f"return {registry}.cwd", handed["chat"]) == str(project)
        send(other, "where", 2)
        said = [line for line in other.transcript() if line.startswith("RESULT ")]
        assert json.loads(said[-1].removeprefix("RESULT "))["cwd"] == str(project)
    finally:
        other.quit()


def test_a_reopened_chat_shows_what_its_review_held_per_turn(editor: Editor) -> None:
    """Each turn's end shows its files and hunks as the review held them when the
    chat was last open: accepted, rejected, still pending."""
    project = editor.tmp / "project"
    (project / "f.txt").write_text("1\n2\n3\n4\n5\n")
    workspace = {"ws": editor.fake_agent("workspace")}
    editor.setup(agents=workspace, default_agent="ws")
    chat = editor.open_chat()["chat"]
    send(editor, "write f.txt one\n2\n3\n4\nfive", 1)
    send(editor, "write g.txt new", 2)
    f, g = str(project / "f.txt"), str(project / "g.txt")
    review = f"require('acp.review.state').by_chat[{chat}].files"
    hunks_of = f"for _, file in ipairs({review}) do if file.path == ... then return file.hunks end end"
    editor.wait(f"#{review} == 2", what="both files in the review")
    first, last = editor.lua(hunks_of, f)
    editor.lua("require('acp').accept(...)", f, first["id"])
    editor.lua("require('acp').reject(...)", f, last["id"])
    statuses = f"(function(...) {hunks_of} end)({f!r})"
    editor.wait(f"{statuses}[2].status == 'rejected'", what="the decisions in the review")
    [new] = editor.lua(hunks_of, g)
    assert (new["status"], first["header"] != last["header"]) == ("pending", True)
    [entry] = kept(editor, "five")
    changed = [line for line in editor.transcript() if " changed:** " in line]
    assert changed == ["**1 file changed:** `f.txt`", "**1 file changed:** `g.txt`"]
    editor.quit()

    with second_neovim(editor) as other:
        other.setup(agents=workspace, default_agent="ws")
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        text = other.transcript_text()
        turn_one = (
            f"*Review:*\n- `f.txt`: `{first['header']}` accepted, `{last['header']}` rejected"
        )
        turn_two = f"*Review:*\n- `g.txt` (new): `{new['header']}` pending"
        assert turn_one in text and turn_two in text
        assert text.index(turn_one) < text.index("write g.txt new") < text.index(turn_two)
        # The turns' changed files as the live chat drew them, without the review's
        # keys (no review acts on them here).
        assert [line for line in other.transcript() if " changed:** " in line] == changed
        hints = "vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace('acp.changes.hint'), 0, -1, {})"
        buf = other.lua("return require('acp').status().transcript_buf")
        assert other.lua(f"return vim.api.nvim_buf_call({buf}, function() return #{hints} end)") == 0
        # The export says the same.
        markdown = other.lua("return require('acp.chat.history').export(nil, {history = ...})", entry["id"])
        exported = "\n".join(other.nvim.buffers[markdown][:])
        assert turn_one in exported and turn_two in exported


def test_a_rewound_chat_is_reopened_on_the_branch_it_showed(editor: Editor) -> None:
    """Every branch is kept (its words found), the one in view is what a reopened chat
    and the export show, and what a continued chat carries."""
    from tests.nvim.test_chats import STUB_UI
    from tests.nvim.test_permissions import wait_text
    from tests.nvim.test_rewind import session_changed, start, three_turns, turn

    start(editor, "rewind", 1)
    three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    turn(editor, "write b.txt new", 4)
    [entry] = kept(editor, "new")

    def reopened() -> tuple[str, str]:
        """The stored chat reopened in another Neovim: its transcript and export."""
        other = second_neovim(editor)
        try:
            other.setup(agents={"fake": editor.fake_agent("rewind")}, default_agent="fake")
            assert [f["id"] for f in other.lua(HISTORY, {"query": "three"})] == [entry["id"]]
            other.lua("require('acp').open({history = ...})", entry["id"])
            other.wait("require('acp').status().state == 'ready'")
            buf = other.lua("return require('acp.chat.history').export(nil, {history = ...})", entry["id"])
            return other.transcript_text(), "\n".join(other.nvim.buffers[buf][:])
        finally:
            other.quit()

    for text in reopened():
        assert "write a.txt one" in text and "write b.txt new" in text
        assert "write a.txt two" not in text and "write a.txt three" not in text

    # The branch left behind, picked again, is the one kept in view.
    editor.lua(STUB_UI, 1)
    editor.nvim.command("AcpBranches")
    wait_text(editor, "write a.txt three")
    turn(editor, "go on", 5)
    kept(editor, "on")
    for text in reopened():
        assert "write a.txt two" in text and "write a.txt three" in text and "go on" in text
        assert "write b.txt new" not in text


@pytest.mark.parametrize(
    ("scenario", "version"), [("rewind+resume", 1), ("rewind+resume", 2), ("rewind", 1)]
)
def test_a_reopened_chat_has_the_branches_it_had(editor: Editor, scenario: str, version: int) -> None:
    """Reopened in another Neovim, a rewound chat lists the branches it had, shows the
    one it showed, switches to another (its turns in order) before its agent starts,
    and goes on in that branch's session: resumed where the agent resumes, else a new
    session told that branch's conversation. A switch, a rewind and a prompt asked at
    once are done in that order."""
    from tests.nvim.test_chats import STUB_UI
    from tests.nvim.test_rewind import calls, session_changed, start, three_turns, turn

    start(editor, scenario, version)
    three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    turn(editor, "write b.txt new", 4)
    had = editor.lua("return require('acp').branches()")
    assert [(b["id"], b["current"], b["turns"]) for b in had] == [(2, True, 2), (1, False, 3)]
    [entry] = kept(editor, "new")

    other, wire = reopened_elsewhere(editor, entry, scenario, version)
    try:
        assert other.lua("return require('acp').branches()") == had
        text = other.transcript_text()
        assert text.index("write a.txt one") < text.index("write b.txt new")
        assert "write a.txt two" not in text and "Another branch leaves here" in text

        # The branch left behind, switched to before the agent starts: its turns in order.
        other.lua(STUB_UI, 1)
        other.nvim.command("AcpBranches")
        other.wait("require('acp').branches()[1].id == 1", what="branch 1 shown")
        assert [b["id"] for b in other.lua("return require('acp').branches()")] == [1, 2]
        text = other.transcript_text()
        assert "write b.txt new" not in text
        assert text.index("one") < text.index("write a.txt two") < text.index("write a.txt three")
        assert not wire.exists()  # no agent yet

        turn(other, "go on", 1)
        if "resume" in scenario:  # the branch's own session
            assert [c["sessionId"] for c in calls(wire, "session/resume")] == ["s1"]
            assert calls(wire, "session/prompt")[-1]["prompt"] == [{"type": "text", "text": "go on"}]
        else:  # a new session, told the branch's conversation (not the other one's)
            seed, said = calls(wire, "session/prompt")[-1]["prompt"]
            assert said == {"type": "text", "text": "go on"}
            assert all(f"write a.txt {word}" in seed["text"] for word in ("one", "two", "three"))
            assert "write b.txt new" not in seed["text"]
        # Back to the other branch, a rewind into its stored turns and a prompt, asked
        # at once: each waits for the one before (the switch resumes a session).
        asked = len(calls(wire))
        other.lua(STUB_UI, 1)
        other.lua("vim.cmd.AcpBranches(); require('acp').rewind(2); require('acp').send('after the rewind')")
        other.wait_event("AcpTurnEnd", count=2)
        if "resume" in scenario:
            assert [m for m, _ in calls(wire)[asked:]] == ["session/resume", "session/new", "session/prompt"]
        seed, said = calls(wire, "session/prompt")[-1]["prompt"]
        assert said == {"type": "text", "text": "after the rewind"}
        assert "write a.txt one" in seed["text"] and "write b.txt new" not in seed["text"]
        text = other.transcript_text()
        # This Neovim's: the first one's went out of view with the turn sent after it.
        assert text.count("Rewound to before turn 2") == 1
        assert text.index("Continued in a new session") < text.index("after the rewind")
        assert "go on" not in text and "write b.txt new" not in text
    finally:
        other.quit()


def test_an_earlier_prompt_of_a_reopened_chat_edited_and_sent(editor: Editor) -> None:
    """:AcpEdit reaches a reopened chat's stored turns: sent before its agent started,
    it goes on from before that turn in a new session given turn 1 only, the turns
    left stay a branch, and the next turn is numbered from the stored ones."""
    from tests.nvim.test_rewind import calls, start, three_turns

    start(editor, "rewind", 1)
    three_turns(editor)
    [entry] = kept(editor, "three")
    other, wire = reopened_elsewhere(editor, entry, "rewind")
    try:
        assert other.lua("return require('acp.chat.registry').get().status.turns") == [
            f"write a.txt {word}" for word in ("one", "two", "three")
        ]
        other.nvim.command("AcpEdit 2")
        input_buf = other.lua("return require('acp').status().input_buf")
        other.wait(f"vim.api.nvim_buf_get_lines({input_buf}, 0, -1, false)[1] == 'write a.txt two'")
        other.lua(f"vim.api.nvim_buf_set_lines({input_buf}, 0, -1, false, {{'write a.txt TWO'}})")
        other.lua(f"vim.api.nvim_set_current_buf({input_buf})")
        other.nvim.input("<CR>")
        other.wait_event("AcpTurnEnd")
        seed, said = calls(wire, "session/prompt")[-1]["prompt"]
        assert said == {"type": "text", "text": "write a.txt TWO"}
        assert "write a.txt one" in seed["text"] and "write a.txt two" not in seed["text"]
        text = other.transcript_text()
        assert "write a.txt TWO" in text and "write a.txt three" not in text
        assert other.lua("return require('acp.chat.registry').get().status.turns") == [
            "write a.txt one", "write a.txt TWO"
        ]
        branches = other.lua("return require('acp').branches()")
        assert [(b["id"], b["current"], b["turns"]) for b in branches] == [(2, True, 2), (1, False, 3)]
    finally:
        other.quit()


def edit_key(editor: Editor, prompt: str) -> int:
    """The edit key (<CR>) on the user's message reading ``prompt`` in the transcript:
    once the prompt is in the input, the turn the input sends it from."""
    transcript = editor.lua("return require('acp').status().transcript_buf")
    input_buf = editor.lua("return require('acp').status().input_buf")
    editor.lua(f"vim.api.nvim_buf_set_lines({input_buf}, 0, -1, false, {{}})")
    row = editor.transcript().index(prompt) + 1
    editor.lua(f"vim.api.nvim_set_current_buf({transcript}); vim.api.nvim_win_set_cursor(0, {{{row}, 0}})")
    editor.nvim.input("<CR>")
    editor.wait(f"vim.api.nvim_buf_get_lines({input_buf}, 0, -1, false)[1] == {prompt!r}", what=prompt)
    return editor.lua("return require('acp.chat.registry').get().editing")  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", [1, 2])
def test_the_edit_key_on_a_reopened_chats_prompts(editor: Editor, version: int) -> None:
    """The edit key on a user's message of a reopened chat does what :AcpEdit does: on
    a stored prompt of the branch shown or of one picked before the agent started
    (numbered by its place on its branch), and on one sent after the reopen."""
    from tests.nvim.test_chats import STUB_UI
    from tests.nvim.test_rewind import calls, session_changed, start, three_turns, turn

    start(editor, "rewind", version)
    three_turns(editor)
    editor.lua("require('acp').rewind(2)")
    session_changed(editor, 2)
    turn(editor, "write b.txt new", 4)  # turn 2 of the branch shown, the chat's 4th
    [entry] = kept(editor, "new")
    other, wire = reopened_elsewhere(editor, entry, "rewind", version)
    try:
        assert edit_key(other, "write b.txt new") == 2
        assert edit_key(other, "write a.txt one") == 1
        other.lua(STUB_UI, 1)
        other.nvim.command("AcpBranches")
        other.wait("require('acp').branches()[1].id == 1", what="branch 1 shown")
        assert edit_key(other, "write a.txt three") == 3
        assert not wire.exists()  # no agent yet

        turn(other, "go on", 1)
        assert edit_key(other, "go on") == 4
        input_buf = other.lua("return require('acp').status().input_buf")
        other.lua(f"vim.api.nvim_buf_set_lines({input_buf}, 0, -1, false, {{'go on again'}})")
        other.lua(f"vim.api.nvim_set_current_buf({input_buf})")
        other.nvim.input("<CR>")
        other.wait_event("AcpTurnEnd", count=2)
        assert calls(wire, "session/prompt")[-1]["prompt"][-1]["text"] == "go on again"
        assert "go on" not in other.transcript()
        shown, *others = other.lua("return require('acp').branches()")
        assert (shown["current"], shown["turns"], len(others)) == (True, 4, 2)
    finally:
        other.quit()


@pytest.mark.parametrize(("scenario", "version"), [("rewind", 1), ("rewind+resume", 2)])
def test_regenerate_in_a_reopened_chat_before_its_agent_starts(
    editor: Editor, scenario: str, version: int
) -> None:
    """:AcpRegenerate in a reopened chat whose agent has not started goes back in view
    to before the last stored turn and sends its prompt again: the agent starts for
    it, in a new session given the turns before it (the stored session knows the
    answer, so it is not resumed); the turn left behind stays a branch."""
    from tests.nvim.test_rewind import calls, start, three_turns

    start(editor, scenario, version)
    three_turns(editor)
    [entry] = kept(editor, "three")
    other, wire = reopened_elsewhere(editor, entry, scenario, version)
    try:
        other.nvim.command("AcpRegenerate")
        other.wait_event("AcpTurnEnd")
        assert not calls(wire, "session/resume") and not calls(wire, "session/load")
        seed, said = calls(wire, "session/prompt")[-1]["prompt"]
        assert said == {"type": "text", "text": "write a.txt three"}
        assert "write a.txt two" in seed["text"] and "write a.txt three" not in seed["text"]
        assert "Rewound to before turn 3" in other.transcript_text()
        assert other.transcript().count("write a.txt three") == 1
        branches = other.lua("return require('acp').branches()")
        assert [(b["id"], b["current"], b["turns"]) for b in branches] == [(2, True, 3), (1, False, 3)]
    finally:
        other.quit()


def test_regenerate_without_a_turn_says_so_reopened_or_not(editor: Editor) -> None:
    """A chat without a turn has nothing to regenerate: started, or reopened before its
    agent starts (one an earlier acp.nvim kept before its first prompt, with a note)."""
    said = (
        "vim.iter(_G.acp_notices):any(function(n)"
        " return n.msg == 'acp: no prompt to regenerate in this chat' end)"
    )
    editor.setup(agents={"fake": editor.fake_agent("kept")}, default_agent="fake")
    editor.open_chat()
    editor.wait("require('acp').status().state == 'ready'")
    editor.nvim.command("AcpRegenerate")
    editor.wait(said)
    path = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    store = Store(str(path))
    try:
        chat = store.new_chat("fake", str(editor.tmp / "project"))
        store.write(chat, [StoredBlock(0, "n0", 0, "info", "a note")])
    finally:
        store.close()
    editor.wait("#require('acp').history({}) == 1", what="the chat kept")
    [entry] = editor.lua(HISTORY, {})
    other, _ = reopened_elsewhere(editor, entry, "kept")
    try:
        other.nvim.command("AcpRegenerate")
        other.wait(said)
        assert other.lua("return require('acp').status().history") == entry["id"]
    finally:
        other.quit()


def test_a_long_export_fills_its_buffer_a_slice_a_turn_as_the_wait_for_it_would(
    editor: Editor,
) -> None:
    """:AcpExport of a long chat fills its buffer a slice per loop turn (read-only
    until it is full), and the buffer then holds what acp.export(), which waits,
    puts in one go."""
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send(...)", "\n".join(f"line {i}" for i in range(12_000)))
    editor.wait_event("AcpTurnEnd", timeout=LONG_TURN)  # echoed in 24,000 chunks
    whole = editor.lua("local buf = require('acp').export(); vim.cmd('tabclose'); return buf")
    expected = editor.nvim.buffers[whole][:]
    assert len(expected) > 24_000 and "line 11999" in expected
    editor.lua(
        """
        _G.fills = {}
        vim.api.nvim_create_autocmd("TabNewEntered", { once = true, callback = function()
          local buf = vim.api.nvim_get_current_buf()
          vim.api.nvim_buf_attach(buf, false, { on_lines = function(_, _, _, first, last, new)
            table.insert(_G.fills, { first, new })
          end })
        end })
        """
    )
    editor.nvim.command("AcpExport")
    # Read-only between its slices: modifiable again once full.
    editor.wait("_G.fills[1] and vim.bo.modifiable and not vim.bo.modified", what="the buffer full")
    assert editor.nvim.current.buffer[:] == expected
    fills = editor.lua("return _G.fills")
    # 5,000 lines a turn: the first replace the empty line, the others follow them.
    assert [tuple(fill) for fill in fills] == [
        (at, min(at + 5000, len(expected))) for at in range(0, len(expected), 5000)
    ]


def test_a_stored_chat_gone_since_opens_no_chat_and_keeps_none(editor: Editor) -> None:
    """Opening a stored chat forgotten since (in another Neovim, or an id kept from an
    earlier list) left a failed chat in the shown chat's windows, and kept it in the
    history as agent "?". It is refused as a session the agent does not know is: a
    message, the chat shown before back, nothing kept."""
    editor.setup()
    first = editor.open_chat()["chat"]
    editor.lua("_G.acp_notices = {}")
    editor.lua("require('acp').open({history = 999999})")
    editor.wait("#require('acp').chats() == 1", what="the refused chat closed")
    assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [
        "acp: history: no chat 999999"
    ]
    assert editor.lua("return require('acp').status().chat") == first
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == f"acp://input/{first}"
    editor.lua("require('acp').send('dolphins')")
    editor.wait("#require('acp').history({query = 'dolphins'}) == 1", what="the turn kept")
    assert [entry["agent"] for entry in editor.lua(HISTORY)] == ["demo"]


def test_a_stored_chat_continued_in_two_neovims_keeps_both_conversations(
    editor: Editor,
) -> None:
    """Two Neovims sharing one history both go on in one stored chat: each one's
    turns stay whole, neither written over the other's (the later one's are kept as
    a chat of their own, which says so)."""
    entry = a_kept_chat(editor)
    with second_neovim(editor) as other:
        other.setup(agents=agents(editor), default_agent="kept")
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        send(other, "tiger", 1)
        kept(other, "tiger")
        send(editor, "lion", 2)
        kept(editor, "lion")
        editor.wait(
            "require('acp').history({query = 'lion'})[1].turns == 2", what="the lion turn"
        )
        [with_tiger] = editor.lua(HISTORY, {"query": "tiger"})
        [with_lion] = editor.lua(HISTORY, {"query": "lion"})
        assert with_tiger["id"] != with_lion["id"]
        for found, word, not_there in ((with_tiger, "tiger", "lion"), (with_lion, "lion", "tiger")):
            markdown = editor.lua(
                "return require('acp.chat.history').export(nil, {history = ...})", found["id"]
            )
            text = "\n".join(editor.nvim.buffers[markdown][:])
            assert "## You\n\nhello zebra" in text, text
            assert f"## You\n\n{word}" in text and f"echo: {word}" in text, text
            assert not_there not in text, text
        # The chat whose turns went elsewhere says so.
        assert any("another Neovim" in n["msg"] for n in editor.lua("return _G.acp_notices")
                   + other.lua("return _G.acp_notices"))


def test_a_reopened_chat_whose_directory_is_gone_says_where_it_goes_on(editor: Editor) -> None:
    """The project a chat worked in was moved or removed since: reopened, the chat
    said nothing, and sending failed on the missing directory, again with every
    restart and hand-over: the conversation could not go on anywhere. It now goes
    on in Neovim's directory, which a line says before anything is sent."""
    work = editor.tmp / "project" / "moved-away"
    work.mkdir()
    editor.nvim.command(f"cd {work}")
    workspace = {"ws": editor.fake_agent("workspace")}
    editor.setup(agents=workspace, default_agent="ws")
    editor.open_chat()
    send(editor, "where", 1)
    [entry] = kept(editor, "where")
    editor.quit()
    work.rmdir()

    other = second_neovim(editor)
    project = editor.tmp / "project"
    try:
        other.setup(agents=workspace, default_agent="ws")
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        gone = f"*The directory this chat worked in (`{work}`) is gone: it goes on in `{project}`.*"
        assert gone in other.transcript()
        assert other.lua("return require('acp').status().cwd") == str(project)
        send(other, "where", 1)
        said = [line for line in other.transcript() if line.startswith("RESULT ")]
        assert json.loads(said[-1].removeprefix("RESULT "))["cwd"] == str(project)
        # Gone on there, it is kept there: reopened again, it works there at once
        # (not in the directory of whichever Neovim reopens it next).
        other.wait(
            f"#require('acp').history({{cwd = {str(project)!r}}}) == 1",
            what="the stored chat's new directory",
        )
    finally:
        other.quit()


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("how", ["handed over", "reopened"])
def test_a_conversation_carried_on_survives_a_refused_first_prompt(
    editor: Editor, how: str, version: int
) -> None:
    """The first prompt of a hand-over (or of a reopened chat whose agent knows
    nothing of it) carries the conversation; the agent refused it (a rate limit),
    and the next prompt went without it: the agent knew nothing of what the
    transcript showed."""
    first = "kept" if how == "handed over" else "plain"
    editor.setup(agents=agents(editor), default_agent=first, protocol_version=version)
    editor.open_chat()
    send(editor, "hello zebra", 1)
    kept(editor, "zebra")
    if how == "handed over":
        editor.nvim.command("AcpHandoff plain")
        editor.wait_event("AcpSessionReady", count=2)
    else:
        editor.nvim.command("AcpClose")
        editor.reopen_last()
    editor.lua("require('acp').send('fail')")
    editor.wait_event("AcpTurnEnd", count=2)
    assert "rate limited" in editor.transcript_text()
    send(editor, "go on", 3)
    blocks = json.loads(editor.transcript()[-3])
    assert "## You\n\nhello zebra" in blocks[0]["text"], blocks
    assert blocks[-1] == {"type": "text", "text": "go on"}
    assert "refused the conversation" not in editor.transcript_text()


def test_a_conversation_refused_twice_goes_no_more_and_the_chat_says_so(editor: Editor) -> None:
    """Given back at every refusal, a conversation the agent cannot take (too long
    for it) would have it refuse every prompt: at the second, the chat goes on
    without it, and says so."""
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    editor.nvim.command("AcpHandoff plain")
    editor.wait_event("AcpSessionReady", count=2)
    for turns in (2, 3):
        editor.lua("require('acp').send('fail')")
        editor.wait_event("AcpTurnEnd", count=turns)
    said = "*plain refused the conversation twice: it goes on without it.*"
    assert said in editor.transcript()
    send(editor, "go on", 4)
    assert json.loads(editor.transcript()[-3]) == [{"type": "text", "text": "go on"}]


def test_an_autocmd_on_the_turns_end_may_ask_for_the_history(editor: Editor) -> None:
    """AcpTurnEnd fires inside a batch the Python side is sending: a user's callback
    asking the history there waits for an answer Python gives meanwhile."""
    editor.lua(
        """vim.api.nvim_create_autocmd('User', {pattern = 'AcpTurnEnd', callback = function()
             local ok, found = pcall(require('acp').history)
             _G.asked = ok and #found or found
           end})"""
    )
    a_kept_chat(editor)
    editor.wait("_G.asked ~= nil", what="the callback's answer")
    assert editor.lua("return _G.asked") in (0, 1)


@pytest.mark.parametrize("version", [1, 2])
def test_a_reopened_chats_prompts_carry_their_attachments_again(
    editor: Editor, version: int
) -> None:
    """After a Neovim restart a stored prompt came back as its text alone, its
    Attached line part of it: :AcpRegenerate sent that line as words and no file,
    :AcpEdit put it in the input and the edit carried none of what was given with
    ``send(text, {context = ...})``, as the same chat does before the restart."""
    from tests.nvim.test_rewind import calls, start

    start(editor, "rewind", version)
    project = editor.tmp / "project"
    for name in ("notes.md", "b.txt", "c.md"):
        (project / name).write_text(f"{name} text\n")
    send_with = "require('acp').send(..., {context = {{type = 'file', path = select(2, ...)}}})"
    editor.lua(send_with, "look @b.txt", str(project / "notes.md"))
    editor.wait_event("AcpTurnEnd", count=1)
    editor.lua(send_with, "then this", str(project / "c.md"))
    editor.wait_event("AcpTurnEnd", count=2)
    [entry] = kept(editor, "then")
    other, wire = reopened_elsewhere(editor, entry, "rewind", version)

    def said(prompt: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        """A prompt's words and the files it carried, as the agent got them."""
        words = [block["text"] for block in prompt if block["type"] == "text"]
        uris = [block.get("resource", block).get("uri", "") for block in prompt]
        return words, sorted(os.path.basename(uri) for uri in uris if uri)

    try:
        assert other.lua("return require('acp.chat.registry').get().status.turns") == [
            "look @b.txt", "then this"
        ]
        other.nvim.command("AcpRegenerate")
        other.wait_event("AcpTurnEnd")
        # Sent as a seed of turn 1 (the stored session knows the answer), then the prompt.
        seed, *prompt = calls(wire, "session/prompt")[-1]["prompt"]
        assert "look @b.txt" in seed["text"] and said(prompt) == (["then this"], ["c.md"])
        # The edit of turn 1 carries notes.md (given apart), not b.txt (its mention, gone).
        other.nvim.command("AcpEdit 1")
        other.wait("require('acp.chat.registry').get().editing == 1")
        input_buf = other.lua("return require('acp').status().input_buf")
        assert other.lua(f"return vim.api.nvim_buf_get_lines({input_buf}, 0, -1, false)") == [
            "look @b.txt"
        ]
        other.lua(f"vim.api.nvim_set_current_buf({input_buf})")
        other.nvim.input("ccagain<Esc><CR>")
        other.wait_event("AcpTurnEnd", count=2)
        assert said(calls(wire, "session/prompt")[-1]["prompt"]) == (["again"], ["notes.md"])
    finally:
        other.quit()
