"""Checkpoints: :AcpRestore takes the files back to before a turn, whatever turns
came after, and keeps what the user typed since."""

from __future__ import annotations

import json
from pathlib import Path

from tests.nvim.conftest import Editor


def disk_turn(editor: Editor, turn: int, writes: dict[Path, str]) -> None:
    steps = [{"disk": {"path": str(path), "content": text}} for path, text in writes.items()]
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpTurnEnd", count=turn)


def test_restore_turn_one_after_three_turns(editor: Editor) -> None:
    project = editor.tmp / "project"
    a, b = project / "a.txt", project / "b.txt"
    a.write_text("a0\n")
    b.write_text("b0\nkeep\n")
    editor.setup(agents={"fake": editor.fake_agent("files")}, default_agent="fake")
    editor.open_chat()
    disk_turn(editor, 1, {a: "a1\n", b: "b1\nkeep\n"})
    disk_turn(editor, 2, {a: "a2\n"})
    disk_turn(editor, 3, {a: "a3\n", b: "b3\nkeep\n"})
    # b is open in a buffer where the user adds a line after the agent's turns.
    editor.nvim.command("wincmd p")
    editor.nvim.command(f"edit {b}")
    editor.nvim.current.buffer.append("mine, typed after turn 3")
    editor.nvim.command("write")
    editor.nvim.command("AcpRestore 1")
    editor.wait(f"vim.fn.readfile({str(a)!r})[1] == 'a0'", what="a.txt restored on disk")
    editor.wait("vim.api.nvim_buf_get_lines(0, 0, 1, false)[1] == 'b0'", what="b restored in its buffer")
    assert editor.nvim.current.buffer[:] == ["b0", "keep", "mine, typed after turn 3"]
    assert b.read_text() == "b0\nkeep\nmine, typed after turn 3\n"
    editor.nvim.command("undo")  # undo takes the restore back, a turn at a time
    assert editor.nvim.current.buffer[0] == "b1"
    assert "Restored the files to before turn 1: `a.txt`, `b.txt`." in editor.transcript_text()
