"""The chat history (|acp-chat-history|): a chat kept, found from another Neovim by a
word of a reply, reopened, continued (session/load, else a seeded session),
exported, handed over to another agent; a damaged or locked file costs the history,
never the chat; two Neovims writing at once keep both chats."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.nvim.conftest import ROOT, Editor, child_editor

HISTORY = "return require('acp').history(...)"


def second_neovim(editor: Editor) -> Editor:
    """Another Neovim with the same state directory (the history file) and project."""
    other = child_editor(
        editor.tmp,
        (ROOT / "tests" / "nvim" / "init.lua").read_text(),
        {"ACP_TEST_ROOT": str(ROOT)},
    )
    other.nvim.command(f"cd {editor.tmp / 'project'}")
    return other


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

        chat = other.lua("return require('acp').open({history = ...})", found["id"])
        other.wait("require('acp').status().state == 'ready'")
        text = other.transcript_text()
        assert "hello zebra" in text and "echo: hello zebra" in text
        assert f"#### Edit {target}" in text and "-two" in text and "+2" in text
        assert "— end_turn —" in text
        # The turn's end says what became of its changes in the review.
        assert f"*Review: `{target}` (1 accepted)*" in text
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
                     f"*Review: `{target}` (1 accepted)*"):  # fmt: skip
            assert part in markdown, part
        # :AcpExport without a path: the current chat in a buffer.
        other.nvim.command("AcpExport")
        assert "## You" in other.nvim.current.buffer[:]
    finally:
        other.quit()


@pytest.mark.parametrize("version", [1, 2])
def test_a_chat_without_load_goes_on_in_a_seeded_session(editor: Editor, version: int) -> None:
    editor.setup(agents=agents(editor), default_agent="plain", protocol_version=version)
    assert editor.open_chat()["protocol_version"] == version
    send(editor, "hello zebra", 1)
    [entry] = kept(editor, "zebra")
    editor.quit()

    other = second_neovim(editor)
    try:
        other.setup(agents=agents(editor), default_agent="plain", protocol_version=version)
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'")
        send(other, "and now", 1)
        text = other.transcript_text()
        assert "the next prompt carries the conversation so far" in text
        blocks = json.loads(other.transcript()[-3])
        assert len(blocks) == 2 and blocks[1] == {"type": "text", "text": "and now"}
        assert "## You\n\nhello zebra" in blocks[0]["text"]
        assert "<conversation>" in blocks[0]["text"]
        # Only the first prompt carries it.
        send(other, "then", 2)
        assert json.loads(other.transcript()[-3]) == [{"type": "text", "text": "then"}]
    finally:
        other.quit()


def test_a_chat_handed_over_to_another_agent(editor: Editor) -> None:
    editor.setup(agents=agents(editor), default_agent="kept")
    first = editor.open_chat()
    send(editor, "hello zebra", 1)
    editor.nvim.command("AcpHandoff embeds")
    editor.wait_event("AcpSessionReady", count=2)
    status = editor.lua("return require('acp').status()")
    assert status["agent"] == "embeds" and status["chat"] != first["chat"]
    text = editor.transcript_text()
    assert "echo: hello zebra" in text
    assert f"Handed over from chat {first['chat']} (kept)" in text
    send(editor, "go on", 2)
    blocks = json.loads(editor.transcript()[-3])
    assert blocks[0]["type"] == "text" and "conversation" in blocks[0]["text"]
    assert blocks[1]["type"] == "resource"
    assert blocks[1]["resource"]["mimeType"] == "text/markdown"
    assert blocks[2] == {"type": "text", "text": "go on"}
    # The first chat stays, and both are kept.
    assert [c["agent"] for c in editor.lua("return require('acp').chats()")] == ["kept", "embeds"]
    found = kept(editor, "zebra", 2)
    assert {f["agent"] for f in found} == {"kept", "embeds"}


def test_a_damaged_store_costs_the_history_not_the_chat(editor: Editor) -> None:
    store = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.sqlite3"
    store.parent.mkdir(parents=True)
    store.write_bytes(b"this is not a database " * 100)
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello", 1)
    assert "echo: hello" in editor.transcript_text()
    editor.wait("#_G.acp_notices > 0")
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert len(notices) == 1 and "history off" in notices[0] and "damaged" in notices[0]
    send(editor, "again", 2)
    assert "echo: again" in editor.transcript_text()
    assert store.read_bytes().startswith(b"this is not a database")


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


def test_two_neovims_writing_at_once_keep_both_chats(editor: Editor) -> None:
    other = second_neovim(editor)
    try:
        for nvim in (editor, other):
            nvim.setup(agents=agents(editor), default_agent="kept")
            nvim.open_chat()
        for turn in range(1, 6):
            editor.lua("require('acp').send(...)", f"first{turn} elephant")
            other.lua("require('acp').send(...)", f"second{turn} elephant")
            editor.wait_event("AcpTurnEnd", count=turn)
            other.wait_event("AcpTurnEnd", count=turn)
        found = kept(editor, "elephant", 2)
        assert sorted(f["turns"] for f in found) == [5, 5]
        for word in ("first5", "second5", "first1", "second1"):
            assert len(editor.lua(HISTORY, {"query": word})) == 1, word
    finally:
        other.quit()


def test_the_picker_opens_a_stored_chat(editor: Editor) -> None:
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    kept(editor, "zebra")
    send(editor, "giraffe", 2)
    kept(editor, "giraffe")
    # vim.ui.select picks the first entry, then "open".
    editor.lua(
        """
        _G.shown = {}
        vim.ui.select = function(items, opts, choice)
          table.insert(_G.shown, vim.tbl_map(opts.format_item or tostring, items))
          choice(items[1])
        end
        """
    )
    editor.nvim.command("AcpHistory zebra")
    editor.wait("require('acp').status().history ~= nil and #require('acp').chats() == 2")
    shown = editor.lua("return _G.shown")
    assert len(shown[0]) == 1 and shown[0][0].startswith("hello zebra · kept · ")
    assert "echo: hello zebra" in shown[0][0]
    assert shown[1] == ["open", "export", "rename", "delete"]
    editor.wait("require('acp').status().state == 'ready'")
    assert "echo: giraffe" in editor.transcript_text()


def test_forget_and_rename(editor: Editor) -> None:
    editor.setup(agents=agents(editor), default_agent="kept")
    editor.open_chat()
    send(editor, "hello zebra", 1)
    [entry] = kept(editor, "zebra")
    editor.lua("require('acp.host').notify('history_rename', {id = ..., name = 'Zoo'})", entry["id"])
    editor.wait("require('acp').history()[1].title == 'Zoo'")
    editor.lua("require('acp').forget(...)", entry["id"])
    editor.wait("#require('acp').history() == 0")
    # The chat goes on, no longer kept.
    send(editor, "hello again zebra", 2)
    assert editor.lua(HISTORY, {"query": "zebra"}) == []


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
