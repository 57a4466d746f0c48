"""Checkpoints: :AcpRestore takes the files back to before a turn, whatever turns
came after, in one undo step per buffer, and keeps what the user typed since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.nvim.conftest import Editor
from tests.nvim.test_files import lines


def turn(editor: Editor, number: int, steps: list[dict[str, Any]]) -> None:
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpTurnEnd", count=number)


def disk(path: Path, text: str) -> dict[str, Any]:
    """The agent writes the file itself."""
    return {"disk": {"path": str(path), "content": text}}


def write(path: Path, text: str) -> dict[str, Any]:
    """The agent writes through the editor (fs/write_text_file)."""
    return {"write": {"path": str(path), "content": text}}


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
    assert any("your text was kept" in n["msg"] for n in editor.lua("return _G.acp_notices"))
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
