"""Checkpoints: :AcpRestore takes the files back to before a turn, whatever turns
came after, in one undo step per buffer, and keeps what the user typed since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.test_files import lines
from tests.nvim.test_permissions import wait_text
from tests.nvim.test_rewind import start, three_turns
from tests.nvim.test_turn_diff import shown


def turn(editor: Editor, number: int, steps: list[dict[str, Any]]) -> None:
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpTurnEnd", count=number)


def disk(path: Path, text: str) -> dict[str, Any]:
    """The agent writes the file itself."""
    return {"disk": {"path": str(path), "content": text}}


def write(path: Path, text: str) -> dict[str, Any]:
    """The agent writes through the editor (fs/write_text_file)."""
    return {"write": {"path": str(path), "content": text}}


def statuses(editor: Editor) -> dict[tuple[str, int], list[str]]:
    """Hunk statuses per (file name, turn), from every turn of the review."""
    return {
        (Path(f["path"]).name, f["turn"]): [h["status"] for h in f["hunks"]]
        for f in editor.lua("return require('acp').changes({all = true})")
    }


def accept(editor: Editor, path: Path, index: int) -> None:
    """Accept hunk ``index`` (0-based) of ``path`` in its latest turn, and wait for it."""
    find = f"vim.iter(require('acp').changes()):find(function(f) return f.path == {str(path)!r} end)"
    editor.lua(f"require('acp').accept({str(path)!r}, {find}.hunks[{index + 1}].id)")
    editor.wait(f"{find}.hunks[{index + 1}].status == 'accepted'", what=f"{path.name} accepted")


def test_restore_turn_one_after_three_turns(editor: Editor) -> None:
    project = editor.tmp / "project"
    a, b, c = project / "a.txt", project / "b.txt", project / "c.txt"
    a.write_text("a0\n")
    b.write_text("b0\nmid\nkeep\n")
    c.write_text("c0\nc\n")
    editor.setup(agents={"fake": editor.fake_agent("files")}, default_agent="fake")
    # b and c are loaded; a is not.
    bufs = {
        name: editor.lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b", str(path))
        for name, path in (("b", b), ("c", c))
    }
    editor.open_chat()
    turn(editor, 1, [disk(a, "a1\n"), write(b, "b1\nmid\nkept\n"), write(c, "c1\nc\n")])
    turn(editor, 2, [disk(a, "a2\n"), write(c, "c2\nc\nc2\n")])
    turn(editor, 3, [disk(a, "a3\n"), write(b, "b3\nmid\nkept\n"), write(c, "c3\nc\nc2\n")])
    # After the turns, the user edits b's agent line, adds one of their own, saves.
    editor.lua(
        "local buf = ...; vim.api.nvim_buf_set_lines(buf, 0, 1, false, {'b3 mine'})"
        " vim.api.nvim_buf_set_lines(buf, -1, -1, false, {'typed after turn 3'})"
        " vim.api.nvim_buf_call(buf, function() vim.cmd('silent write') end)",
        bufs["b"],
    )
    before = {name: lines(editor, buf) for name, buf in bufs.items()}
    seq = {
        name: editor.lua("return vim.fn.undotree(...).seq_cur", buf) for name, buf in bufs.items()
    }
    editor.lua(
        "_G.writes = {} vim.api.nvim_create_autocmd('BufWritePost', {callback = function(ev)"
        " _G.writes[ev.file] = (_G.writes[ev.file] or 0) + 1 end})"
    )

    assert editor.lua("return vim.fn.getcompletion('AcpRestore ', 'cmdline')") == ["3", "2", "1"]
    editor.nvim.command("AcpRestore 1")
    editor.wait(
        "require('acp').changes()[1] and #vim.tbl_filter(function(f) return f.open end,"
        " require('acp').changes({all = true})) == 1",
        what="the restore is in the review",
    )
    assert a.read_text() == "a0\n"
    assert lines(editor, bufs["c"]) == ["c0", "c"]
    assert c.read_text() == "c0\nc\n"
    # b: the user's lines are kept; the one the restore would replace waits as a conflict.
    assert lines(editor, bufs["b"]) == ["b3 mine", "mid", "keep", "typed after turn 3"]
    assert b.read_text() == "b3 mine\nmid\nkeep\ntyped after turn 3\n"
    [file] = [f for f in editor.lua("return require('acp').changes({all = true})") if f["open"]]
    [conflict] = [h for h in file["hunks"] if h["status"] != "rejected"]
    assert (file["path"], conflict["status"], conflict["proposed"]) == (str(b), "conflict", ["b0"])
    said = "b.txt: you changed lines the restore takes back; that text was kept"
    assert any(said in n["msg"] for n in editor.lua("return _G.acp_notices"))
    # Each buffer written once (a.txt has none: written directly).
    assert editor.lua("return _G.writes") == {str(b): 1, str(c): 1}
    # One undo step per buffer: one `u` gives back the text before the restore.
    for name, buf in bufs.items():
        assert editor.lua("return vim.fn.undotree(...).seq_cur", buf) == seq[name] + 1
        editor.lua("vim.api.nvim_buf_call(..., function() vim.cmd('silent undo') end)", buf)
        assert lines(editor, buf) == before[name]
    assert (
        "Restored the files to before turn 1: `a.txt`, `b.txt`, `c.txt`."
        in editor.transcript_text()
    )


def test_restore_takes_back_changes_the_user_had_accepted(editor: Editor) -> None:
    project = editor.tmp / "project"
    a, b = project / "a.txt", project / "b.txt"
    a.write_text("a0\n1\n2\n3\n")
    b.write_text("b0\n1\n2\n3\n4\n5\n")
    editor.setup(agents={"fake": editor.fake_agent("files")}, default_agent="fake")
    # b is loaded; a is not (the agent edits it on disk).
    buf = editor.lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b", str(b))
    editor.open_chat()
    turn(editor, 1, [disk(a, "a1\n1\n2\n3\n"), write(b, "b1\n1\n2\n3\n4\n5\n")])
    new = project / "new.txt"
    turn(
        editor,
        2,
        [
            disk(a, "a1\n1\n2\nA2\n"),
            write(b, "b1\n1\nB2\n3\n4\nB2\n"),
            write(new, "created\n"),
        ],
    )
    # The user accepts a's change of turn 2, the first of b's two, and the new file.
    accept(editor, a, 0)
    accept(editor, b, 0)
    accept(editor, new, 0)
    turn(editor, 3, [disk(a, "a3\n1\n2\nA2\n"), write(b, "b3\n1\nB2\n3\n4\nB2\n")])
    seq = editor.lua("return vim.fn.undotree(...).seq_cur", buf)
    editor.lua(
        "_G.writes = {} vim.api.nvim_create_autocmd('BufWritePost', {callback = function(ev)"
        " _G.writes[ev.file] = (_G.writes[ev.file] or 0) + 1 end})"
    )

    editor.nvim.command("AcpRestore 1")
    wait_text(editor, "Restored the files to before turn 1: `a.txt`, `b.txt`, `new.txt`.")
    # Turn 1's baseline, the accepted changes gone too, in buffer and on disk.
    assert not new.exists()
    assert a.read_text() == "a0\n1\n2\n3\n"
    assert b.read_text() == "b0\n1\n2\n3\n4\n5\n"
    assert lines(editor, buf) == ["b0", "1", "2", "3", "4", "5"]
    # The review agrees: nothing open, nothing shown as accepted; the accepted hunks
    # the restore took back are `reverted`, the open ones `rejected`.
    assert statuses(editor) == {
        ("a.txt", 3): ["rejected"],
        ("b.txt", 3): ["rejected"],
        ("a.txt", 2): ["reverted"],
        ("b.txt", 2): ["reverted", "rejected"],
        ("new.txt", 2): ["reverted"],
        ("a.txt", 1): ["rejected"],
        ("b.txt", 1): ["rejected"],
    }
    # One write, one undo step: `u` gives back turn 3's text.
    assert editor.lua("return _G.writes") == {str(b): 1}
    assert editor.lua("return vim.fn.undotree(...).seq_cur", buf) == seq + 1
    editor.lua("vim.api.nvim_buf_call(..., function() vim.cmd('silent undo') end)", buf)
    assert lines(editor, buf) == ["b3", "1", "B2", "3", "4", "B2"]


def test_restore_without_a_turn_takes_back_the_last_one(editor: Editor) -> None:
    project = editor.tmp / "project"
    b = project / "b.txt"
    b.write_text("b0\n1\n2\n3\n")
    editor.setup(agents={"fake": editor.fake_agent("files")}, default_agent="fake")
    buf = editor.lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b", str(b))
    editor.open_chat()
    turn(editor, 1, [write(b, "b1\n1\n2\n3\n")])
    new = project / "new.txt"
    turn(editor, 2, [write(b, "b1\nB2\n2\nB2\n"), write(new, "created\n")])
    accept(editor, b, 1)
    # A file the agent created, which the user has edited since.
    new.write_text("created\nmine\n")

    editor.lua("require('acp').restore()")
    wait_text(editor, "Restored the files to before turn 2: `b.txt`.")
    assert b.read_text() == "b1\n1\n2\n3\n"
    assert lines(editor, buf) == ["b1", "1", "2", "3"]
    # Not removed: it holds the user's edits (a notice says so); its change stays open.
    assert new.read_text() == "created\nmine\n"
    assert any(
        "new.txt: not removed, you edited it since" in n["msg"]
        for n in editor.lua("return _G.acp_notices")
    )
    # Turn 1's change is still there, still open.
    assert statuses(editor) == {
        ("b.txt", 2): ["rejected", "reverted"],
        ("new.txt", 2): ["pending"],
        ("b.txt", 1): ["pending"],
    }


def test_a_restore_over_another_chats_agents_lines_does_not_call_them_yours(
    editor: Editor,
) -> None:
    """Each chat's review counts any change since its own agent's as the user's:
    chat #1's restore said "you changed lines" of lines chat #2's agent wrote. It
    names that chat where one changed the file too."""
    project = editor.tmp / "project"
    a = project / "a.txt"
    a.write_text("a0\n")
    editor.setup(agents={"fake": editor.fake_agent("files")}, default_agent="fake")
    editor.open_chat()
    turn(editor, 1, [write(a, "chat 1\n")])
    editor.nvim.command("AcpChat!")
    editor.wait_event("AcpSessionReady", count=2)
    turn(editor, 2, [write(a, "chat 2\n")])  # the second AcpTurnEnd: chat #2's first turn
    editor.lua("require('acp.host').notify('restore', {chat = 1, turn = 1})")
    said = "a.txt: you or chat #2's agent changed lines the restore takes back"
    editor.wait(
        f"vim.iter(_G.acp_notices):find(function(n) return n.msg:find({said!r}, 1, true) end) ~= nil",
        what=said,
    )
    assert a.read_text() == "chat 2\n"  # kept; chat #1's restore waits as a conflict


@pytest.mark.parametrize("version", [1, 2])
def test_a_turn_an_agent_wrote_on_disk_is_shown_and_restored(editor: Editor, version: int) -> None:
    """A v2 agent has no editor to write through: what it writes itself (here, one
    line of a.txt a turn) opens with :AcpTurnDiff and goes back with :AcpRestore."""
    start(editor, "rewind", version)
    a = three_turns(editor)
    editor.nvim.command("AcpTurnDiff 2")
    assert shown(editor) == [[str(a), "turn 2 · a.txt · +1 -1"]]
    editor.nvim.command("tabclose")
    editor.nvim.command("AcpRestore 2")
    wait_text(editor, "Restored the files to before turn 2: `a.txt`.")
    assert a.read_text() == "one\n"
    assert lines(editor, editor.lua("return vim.fn.bufnr(...)", str(a))) == ["one"]
    assert [f["open"] for f in editor.lua("return require('acp').changes({all = true})")] == [
        False,  # turns 3 and 2 taken back
        False,
        True,
    ]
