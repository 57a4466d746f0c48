"""fs/read_text_file and fs/write_text_file against real Neovim buffers."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.disk import fill, small_disk
from tests.nvim.conftest import Editor, nvim_binary
from tests.nvim.screen import Screen


def run(editor: Editor, steps: list[dict[str, Any]], turn: int = 1) -> list[Any]:
    """Send a script to the `files` fake agent; returns its RESULT lines, decoded."""
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpTurnEnd", count=turn)
    return [
        json.loads(line.split("RESULT ", 1)[1])
        for line in editor.transcript()
        if line.startswith("RESULT ")
    ]


def start(editor: Editor, open_path: Path | None = None, version: int = 1) -> int | None:
    """Optionally :edit a file in the main window, then open a chat on the fake agent
    (over ACP ``version``)."""
    buf = None
    if open_path is not None:
        editor.nvim.command(f"edit {open_path}")
        buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.setup(agents={"files": editor.fake_agent("files")}, protocol_version=version)
    editor.open_chat("files")
    return buf


def lines(editor: Editor, buf: int) -> list[str]:
    return list(editor.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf))


def loaded_and_closed(editor: Editor, tmp_path: Path, data: bytes) -> tuple[Path, Path, int]:
    """Two files of the project holding ``data``, the first :edited in a buffer (the
    second in none), and a chat on the `files` fake agent: the files and the buffer."""
    project = tmp_path / "project"
    loaded, closed = project / "loaded.txt", project / "closed.txt"
    loaded.write_bytes(data)
    closed.write_bytes(data)
    buf = start(editor, loaded)
    assert buf is not None
    return loaded, closed, buf


def test_agent_reads_unsaved_buffer_text_with_line_and_limit(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.py"
    path.write_text("on disk\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, -1, false, {'one', 'two', 'three'})", buf)
    results = run(
        editor,
        [
            {"read": {"path": str(path)}},
            {"read": {"path": str(path), "line": 2, "limit": 1}},
            {"read": {"path": str(path), "line": 3}},
        ],
    )
    assert results == [
        {"content": "one\ntwo\nthree\n"},
        {"content": "two\n"},
        {"content": "three\n"},
    ]


def test_read_errors_are_clear(editor: Editor, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "dir").mkdir()
    (project / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (project / "two.txt").write_text("1\n2\n")
    start(editor)
    results = run(
        editor,
        [
            {"read": {"path": "relative.txt"}},
            {"read": {"path": str(project / "nope.txt")}},
            {"read": {"path": str(project / "dir")}},
            {"read": {"path": str(project / "img.png")}},
            {"read": {"path": str(project / "two.txt"), "line": 3}},
        ],
    )
    assert [(r["error"], r["message"]) for r in results] == [
        (-32602, "Invalid params: path must be absolute: 'relative.txt'"),
        (-32002, f"Resource not found: {project / 'nope.txt'}: no such file"),
        (-32602, f"Invalid params: {project / 'dir'} is a directory"),
        (-32602, f"Invalid params: {project / 'img.png'} is a binary file"),
        (
            -32602,
            f"Invalid params: {project / 'two.txt'}: line 3 is past the end of the file (2 lines)",
        ),
    ]


def test_write_is_a_minimal_edit_one_undo_step_and_keeps_cursor_and_user_edits(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("".join(f"line{i}\n" for i in range(1, 9)))
    buf = start(editor, path)
    win = editor.lua("return vim.fn.bufwinid(...)", buf)
    # The agent reads, then the user edits line 8 and parks the cursor on line 6.
    original = run(editor, [{"read": {"path": str(path)}}])[0]["content"]
    editor.lua("vim.api.nvim_buf_set_lines(..., 7, 8, false, {'user edit'})", buf)
    editor.lua("vim.api.nvim_win_set_cursor(..., {6, 2})", win)
    agent = "# header\n" + original.replace("line2\n", "LINE2\n")
    run(editor, [{"write": {"path": str(path), "content": agent}}], turn=2)

    expected = ["# header", "line1", "LINE2", *[f"line{i}" for i in range(3, 8)], "user edit"]
    assert lines(editor, buf) == expected
    assert editor.lua("return vim.api.nvim_win_get_cursor(...)", win) == [7, 2]  # still on line6
    # auto_save: the disk gets the agent's change, the user's unsaved line stays theirs.
    assert path.read_text() == "\n".join([*expected[:-1], "line8"]) + "\n"
    assert editor.lua("return vim.bo[...].modified", buf) is True
    editor.lua("vim.api.nvim_buf_call(..., function() vim.cmd('silent undo') end)", buf)
    assert lines(editor, buf) == [*[f"line{i}" for i in range(1, 8)], "user edit"]


def test_crlf_file_keeps_its_line_endings_in_a_buffer_and_without_one(
    editor: Editor, tmp_path: Path
) -> None:
    loaded, closed, buf = loaded_and_closed(editor, tmp_path, b"a\r\nb\r\n")
    assert editor.lua("return vim.bo[...].fileformat", buf) == "dos"
    results = run(
        editor,
        [
            {"read": {"path": str(loaded)}},
            {"write": {"path": str(loaded), "content": "a\nB\n"}},
            {"write": {"path": str(closed), "content": "a\nB"}},
        ],
    )
    assert results[0] == {"content": "a\r\nb\r\n"}
    assert loaded.read_bytes() == b"a\r\nB\r\n"
    assert closed.read_bytes() == b"a\r\nB\r\n"


def test_a_utf16_file_reads_and_writes_back_as_utf16(editor: Editor, tmp_path: Path) -> None:
    # As Windows tools write it: a byte order mark, CRLF. Neovim reads it ('ucs-bom').
    path = tmp_path / "project" / "notes.txt"
    path.write_bytes("\ufeffcafé\r\nx\r\n".encode("utf-16-le"))
    start(editor)
    results = run(
        editor,
        [
            {"read": {"path": str(path)}},
            {"write": {"path": str(path), "content": "café\nx → y\n"}},
        ],
    )
    assert results == [{"content": "café\r\nx\r\n"}, {}]
    assert path.read_bytes() == "\ufeffcafé\r\nx → y\r\n".encode("utf-16-le")


def test_a_byte_order_mark_the_agent_kept_is_not_written_twice(
    editor: Editor, tmp_path: Path
) -> None:
    loaded, closed, _ = loaded_and_closed(editor, tmp_path, b"\xef\xbb\xbfa\nb\n")
    # As an agent that read the files itself sends them (opencode's read keeps it).
    results = run(
        editor,
        [
            {"write": {"path": str(loaded), "content": "\ufeffa\nB\n"}},
            {"write": {"path": str(closed), "content": "\ufeffa\nB\n"}},
        ],
    )
    assert results == [{}, {}]
    assert loaded.read_bytes() == b"\xef\xbb\xbfa\nB\n"
    assert closed.read_bytes() == b"\xef\xbb\xbfa\nB\n"


def test_a_file_of_mixed_line_endings_keeps_them_in_a_buffer_and_without_one(
    editor: Editor, tmp_path: Path
) -> None:
    loaded, closed, buf = loaded_and_closed(editor, tmp_path, b"a\r\nb\nc\r\n")
    assert editor.lua("return vim.bo[...].fileformat", buf) == "unix"
    # The agent gives line b a CRLF too: its text, every line CRLF, is what it meant.
    results = run(
        editor,
        [
            {"write": {"path": str(loaded), "content": "a\r\nB\r\nc\r\n"}},
            {"write": {"path": str(closed), "content": "a\r\nB\r\nc\r\n"}},
        ],
    )
    assert results == [{}, {}]
    assert loaded.read_bytes() == b"a\r\nB\r\nc\r\n"
    assert closed.read_bytes() == b"a\r\nB\r\nc\r\n"
    assert lines(editor, buf) == ["a\r", "B\r", "c\r"]


def test_a_lf_file_stays_lf_when_the_agent_writes_crlf(editor: Editor, tmp_path: Path) -> None:
    """A "\r" before a "\n" is a line's own only in a file that has some (mixed
    endings): in a file of LF lines alone, an agent's CRLF text (copied from a CRLF
    file, or how it writes) gave every line a "\r" on disk and "^M" in the buffer."""
    project = tmp_path / "project"
    loaded, closed = project / "loaded.txt", project / "closed.txt"
    loaded.write_bytes(b"a\nb\n")
    closed.write_bytes(b"a\nb\n")
    buf = start(editor, loaded)
    results = run(
        editor,
        [
            {"write": {"path": str(loaded), "content": "a\r\nB\r\n"}},
            {"write": {"path": str(closed), "content": "a\r\nB\r\n"}},
        ],
    )
    assert results == [{}, {}]
    assert loaded.read_bytes() == b"a\nB\n"
    assert closed.read_bytes() == b"a\nB\n"
    assert lines(editor, buf) == ["a", "B"]


def test_a_latin1_file_is_never_written_with_what_latin1_cannot_hold(
    editor: Editor, tmp_path: Path
) -> None:
    # Neovim reads both as latin1: one is, the other is UTF-8 but for a stray byte.
    project = tmp_path / "project"
    loaded, closed = project / "loaded.txt", project / "closed.txt"
    loaded.write_bytes(b"caf\xe9\nx\n")
    closed.write_bytes(b"caf\xc3\xa9 \xff\nx\n")
    buf = start(editor, loaded)
    assert editor.lua("return vim.bo[...].fileencoding", buf) == "latin1"
    results = run(
        editor,
        [
            {"write": {"path": str(loaded), "content": "café\nx → y\n"}},
            {"write": {"path": str(closed), "content": "cafÃ© ÿ\nx → y\n"}},
            {"write": {"path": str(loaded), "content": "Café\nx\n"}},
        ],
    )
    why = "its encoding {} cannot hold '→' (line 2)"
    assert results == [
        {"error": -32603, "message": f"Internal error: cannot write {loaded}: {why.format('latin1')}"},
        {"error": -32603, "message": f"Internal error: cannot write {closed}: {why.format('latin-1')}"},
        {},
    ]
    # Neither file got "?" for the arrow, nor was re-encoded; the buffer is as on disk.
    assert closed.read_bytes() == b"caf\xc3\xa9 \xff\nx\n"
    assert loaded.read_bytes() == b"Caf\xe9\nx\n"
    assert lines(editor, buf) == ["Café", "x"]
    assert editor.lua("return vim.bo[...].modified", buf) is False


@pytest.mark.parametrize(
    "data",
    [b"caf\xe9\nx\n", b"caf\xc3\xa9 \xff\nx\n", b"\xef\xbb\xbfcaf\xc3\xa9\r\nx\r\n"],
    ids=["latin1", "utf8-with-a-stray-byte", "utf8-bom-crlf"],
)
def test_a_rejected_edit_leaves_a_non_utf8_file_byte_for_byte_as_it_was(
    editor: Editor, tmp_path: Path, data: bytes
) -> None:
    loaded, closed, _ = loaded_and_closed(editor, tmp_path, data)
    # The agent's text leaves out the line that made the file non-UTF-8.
    edits = [{"write": {"path": str(path), "content": "x\ny\n"}} for path in (loaded, closed)]
    assert run(editor, edits) == [{}, {}]
    assert loaded.read_bytes() != data and closed.read_bytes() != data
    editor.lua("require('acp').reject()")
    for n in (1, 2):
        editor.wait(f"require('acp').changes()[{n}].hunks[1].status == 'rejected'")
    assert (loaded.read_bytes(), closed.read_bytes()) == (data, data)


@pytest.mark.parametrize("git", [False, True], ids=["snapshot", "git"])
def test_a_rejected_change_made_on_disk_leaves_a_latin1_file_as_it_was(
    editor: Editor, tmp_path: Path, git: bool
) -> None:
    """A change the agent made on disk itself (no fs/* write: the review's disk
    watch) that left the file plain ASCII was rejected as UTF-8: "é" in two bytes."""
    data = b"caf\xe9\nx\n"
    project = tmp_path / "project"
    path = project / "closed.txt"
    path.write_bytes(data)
    if git:
        for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                     "commit", "-qm", "x"]):  # fmt: skip
            subprocess.run(["git", *args], cwd=project, check=True)
    start(editor)
    run(editor, [{"shell": {"path": str(path), "content": "x\ny\n"}}])
    editor.wait("#require('acp').changes() == 1")
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert path.read_bytes() == data


@pytest.mark.parametrize("name", ["link", "braces"])
def test_a_buffer_opened_through_a_symlink_or_named_with_braces_is_the_files(
    editor: Editor, tmp_path: Path, name: str
) -> None:
    project = tmp_path / "project"
    path = project / ("real.txt" if name == "link" else "page.{a,b}.txt")
    path.write_text("one\ntwo\n")
    opened = path
    if name == "link":
        opened = project / "link.txt"
        opened.symlink_to(path)
    editor.nvim.command(f"edit {editor.lua('return vim.fn.fnameescape(...)', str(opened))}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'unsaved'})", buf)
    start(editor)
    results = run(
        editor,
        [
            {"read": {"path": str(path)}},
            {"write": {"path": str(path), "content": "unsaved\ntwo\nthree\n"}},
        ],
    )
    # The agent reads your unsaved line; its change reaches buffer and file, your line
    # stays yours: the buffer does not go stale behind a file it never saw change.
    assert results == [{"content": "unsaved\ntwo\n"}, {}]
    assert lines(editor, buf) == ["unsaved", "two", "three"]
    assert path.read_text() == "one\ntwo\nthree\n"
    assert modified(editor, buf)


def test_a_buffer_the_agent_empties_leaves_an_empty_file(editor: Editor, tmp_path: Path) -> None:
    project = tmp_path / "project"
    full, empty = project / "full.txt", project / "empty.txt"
    full.write_text("one\n")
    empty.write_bytes(b"")
    start(editor, full)
    editor.nvim.command(f"edit {empty}")
    assert run(
        editor,
        [
            {"write": {"path": str(full), "content": ""}},
            {"write": {"path": str(empty), "content": "new\n"}},
        ],
    ) == [{}, {}]
    assert full.read_bytes() == b""  # not "\n"
    # Rejecting the agent's text in the empty file leaves it empty too.
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    editor.wait("require('acp').changes()[2].hunks[1].status == 'rejected'")
    assert empty.read_bytes() == b""
    assert full.read_bytes() == b"one\n"


# (file before, agent's text, file after): a buffer :writes its last line ended
# ('eol'/'fixeol', as the file's final newline stays the file's).
_EMPTY_LINE_WRITES = [
    (b"one\n", "\n", b"\n"),  # one empty line: not the empty file
    (b"", "\n", b"\n"),
    (b"\n", "", b""),
    (b"one\n", "", b""),
    (b"", "two", b"two\n"),
]


def test_a_buffer_the_agent_leaves_one_empty_line_writes_it(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    paths = [project / f"{n}.txt" for n in range(len(_EMPTY_LINE_WRITES))]
    for path, (before, _, _) in zip(paths, _EMPTY_LINE_WRITES, strict=True):
        path.write_bytes(before)
    start(editor, paths[0])
    for path in paths[1:]:
        editor.nvim.command(f"edit {path}")
    writes = [
        {"write": {"path": str(path), "content": content}}
        for path, (_, content, _) in zip(paths, _EMPTY_LINE_WRITES, strict=True)
    ]
    reads = [{"read": {"path": str(path)}} for path in paths]
    results = run(editor, writes + reads)
    assert [path.read_bytes() for path in paths] == [after for _, _, after in _EMPTY_LINE_WRITES]
    # The agent reads back what the file holds.
    assert results[len(paths) :] == [
        {"content": after.decode()} for _, _, after in _EMPTY_LINE_WRITES
    ]


def test_file_without_buffer_is_written_without_a_window_and_new_dirs_are_made(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    existing = project / "plain.txt"
    existing.write_text("old\n")
    start(editor)
    windows = editor.lua("return #vim.api.nvim_list_wins()")
    new = project / "deep" / "er" / "new.txt"
    run(
        editor,
        [
            {"write": {"path": str(existing), "content": "new\n"}},
            {"write": {"path": str(new), "content": "created\n"}},
        ],
    )
    assert existing.read_text() == "new\n"
    assert new.read_text() == "created\n"
    assert editor.lua("return #vim.api.nvim_list_wins()") == windows
    assert editor.lua("return vim.fn.bufnr(...)", str(existing)) == -1
    assert editor.lua("return vim.fn.bufnr(...)", str(new)) == -1


def test_a_new_file_left_unsaved_in_a_new_directory_can_be_written(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "new" / "deep" / "n.txt"
    editor.setup(agents={"files": editor.fake_agent("files")}, auto_save=False)
    editor.open_chat("files")
    assert run(editor, [{"write": {"path": str(path), "content": "hello\n"}}]) == [{}]
    assert not path.exists()
    buf = editor.lua("return vim.fn.bufnr(...)", str(path))
    editor.nvim.command(f"buffer {buf} | write")  # no E212: its directory is there
    assert path.read_text() == "hello\n"


def test_an_autocommand_failing_as_the_file_loads_does_not_refuse_an_unsaved_edit(
    editor: Editor, tmp_path: Path
) -> None:
    """An autocommand of the user's failing as a file loads (a plugin's BufReadPost or
    FileType): bufload() raised its error, the buffer loaded; taken for a refusal
    like a swap file's E325, the buffer was deleted and every edit left unsaved to a
    file of that kind refused, where :edit shows the file and the error."""
    path = tmp_path / "project" / "notes.txt"
    path.write_text("one\ntwo\n")
    editor.lua(
        "vim.api.nvim_create_autocmd('BufReadPost', {pattern = '*.txt',"
        " callback = function() error('broken plugin') end})"
    )
    editor.setup(agents={"files": editor.fake_agent("files")}, auto_save=False)
    editor.open_chat("files")
    assert run(editor, [{"write": {"path": str(path), "content": "one\nTWO\n"}}]) == [{}]
    buf = editor.lua("return vim.fn.bufnr(...)", str(path))
    assert lines(editor, buf) == ["one", "TWO"]
    assert path.read_text() == "one\ntwo\n"


def test_reads_follow_every_kind_of_buffer_change(editor: Editor, tmp_path: Path) -> None:
    # After the first read the host keeps a copy patched by Neovim's buffer events;
    # each read must still equal the buffer, whatever changed it.
    path = tmp_path / "project" / "a.py"
    path.write_text("".join(f"line {i}\n" for i in range(1, 21)))
    buf = start(editor, path)
    changes = [
        "call nvim_buf_set_lines(0, 3, 5, v:false, ['three', 'and', 'more'])",
        "call nvim_buf_set_lines(0, 0, 0, v:false, ['top'])",
        "$-1,$delete",
        "undo",
        "%s/line/LINE/",
        "call setline(2, 'NUL here: a\\nb')",  # a NUL byte (the API shows it as \n)
        "normal! GoA typed line",
        "set fileformat=dos",
        "edit!",  # reload from disk: Neovim detaches, the next read attaches again
        "bwipeout! | execute 'badd' fnameescape(expand('" + str(path) + "')) | buffer a.py",
        "normal! ggdG",
    ]
    run(editor, [{"read": {"path": str(path)}}])
    window = editor.lua("return vim.fn.bufwinid(...)", buf)
    for turn, change in enumerate(changes, start=2):
        editor.lua("vim.api.nvim_set_current_win(...)", window)
        editor.nvim.command(change)
        buf = editor.lua("return vim.fn.bufnr(...)", str(path))
        fileformat = editor.lua("return vim.bo[...].fileformat", buf)
        eol = "\r\n" if fileformat == "dos" else "\n"
        expected = eol.join(line.replace("\n", "\0") for line in lines(editor, buf)) + eol
        result = run(editor, [{"read": {"path": str(path)}}], turn=turn)[-1]
        assert result == {"content": expected if expected != eol else ""}, change


def modified(editor: Editor, buf: int) -> bool:
    return bool(editor.lua("return vim.bo[...].modified", buf))


def hunks(editor: Editor) -> list[tuple[str, list[str]]]:
    return [
        (h["status"], h["preview"])
        for f in editor.lua("return require('acp').changes()")
        for h in f["hunks"]
    ]


def test_write_never_read_merges_into_unsaved_text_and_saves_only_the_agents_change(
    editor: Editor, tmp_path: Path
) -> None:
    # The agent read the file on its own (from disk), never through the editor.
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n4\n5\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 4, 5, false, {'five, unsaved'})", buf)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n4\n5\n"}}])
    assert lines(editor, buf) == ["one", "2", "3", "4", "five, unsaved"]
    assert path.read_text() == "one\n2\n3\n4\n5\n"  # auto_save: the agent's change only
    assert modified(editor, buf)
    assert hunks(editor) == [("pending", ["-1", "+one"])]


def test_write_clashing_with_unsaved_text_keeps_it_as_a_conflict_and_off_the_disk(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n4\n5\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'mine'})", buf)
    run(editor, [{"write": {"path": str(path), "content": "agent\n2\n3\n4\nfive\n"}}])
    assert lines(editor, buf) == ["mine", "2", "3", "4", "five"]
    assert hunks(editor) == [("conflict", ["-mine", "+agent"]), ("pending", ["-5", "+five"])]
    assert any("your text was kept" in n["msg"] for n in editor.lua("return _G.acp_notices"))
    assert path.read_text() == "1\n2\n3\n4\nfive\n"  # never "mine", unsaved
    assert modified(editor, buf)
    # Accepting the agent's lines takes them to the disk too; the buffer stays unsaved.
    conflict = editor.lua("return require('acp').changes()")[0]["hunks"][0]["id"]
    editor.lua("require('acp').accept(...)", str(path), conflict)
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")
    assert lines(editor, buf)[0] == "agent"
    assert path.read_text() == "agent\n2\n3\n4\nfive\n"
    # The file changed behind the buffer only by what the buffer holds: :write asks nothing.
    assert not user_write(editor, buf)
    assert path.read_text() == "agent\n2\n3\n4\nfive\n" and not modified(editor, buf)


def test_lines_you_and_the_agent_add_at_one_place_are_both_kept(
    editor: Editor, tmp_path: Path
) -> None:
    """Both appended a line: the merge called it a conflict, and accepting the
    agent's line took it in place of yours. Now both stay, and the agent's line is
    a hunk like any other: rejecting it takes out only that line."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n")
    buf = start(editor, path)
    run(editor, [{"read": {"path": str(path)}}])
    editor.lua("vim.api.nvim_buf_set_lines(..., -1, -1, false, {'mine'})", buf)
    run(editor, [{"write": {"path": str(path), "content": "1\n2\nagent\n"}}], turn=2)
    assert lines(editor, buf) == ["1", "2", "mine", "agent"]
    assert hunks(editor) == [("pending", ["+agent"])]
    assert path.read_text() == "1\n2\nagent\n"  # never "mine", unsaved
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert lines(editor, buf) == ["1", "2", "mine"]
    assert path.read_text() == "1\n2\n"
    assert modified(editor, buf)


@pytest.mark.parametrize(
    ("written", "buffer", "disk", "review"),
    [
        # The agent's line next to yours: in the buffer and on disk; yours only in the buffer.
        (
            "a\nB\nmine\nc\nd\n",
            ["a", "B", "mine", "c", "d"],
            "a\nB\nc\nd\n",
            [("pending", ["-b", "+B"])],
        ),
        # Your line, reworded by the agent.
        (
            "a\nb\nmine, reworded\nc\nd\n",
            ["a", "b", "mine", "c", "d"],
            "a\nb\nc\nd\n",
            [("conflict", ["-mine", "+mine, reworded"])],
        ),
        # The lines around yours, deleted with it.
        (
            "a\nd\n",
            ["a", "b", "mine", "c", "d"],
            "a\nb\nc\nd\n",
            [("conflict", ["-b", "-mine", "-c"])],
        ),
    ],
    ids=["adjacent", "same-line", "deleted-around"],
)
def test_an_agent_write_reaching_into_your_unsaved_line_never_puts_it_on_disk(
    editor: Editor,
    tmp_path: Path,
    written: str,
    buffer: list[str],
    disk: str,
    review: list[Any],
) -> None:
    """Decision 0015: the file behind unsaved edits gets only the agent's change. The
    agent read your unsaved "mine" (through the editor) and rewrote lines over it:
    the disk got its rewording of "mine", or, for a deletion, "mine" itself once the
    deletion was rejected. Now that part of the change waits in the review as a
    conflict, and your text stays in the buffer, unsaved."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\nc\nd\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 2, false, {'mine'})", buf)
    steps = [{"read": {"path": str(path)}}, {"write": {"path": str(path), "content": written}}]
    assert run(editor, steps)[0] == {"content": "a\nb\nmine\nc\nd\n"}
    assert path.read_text() == disk  # never "mine", unsaved
    assert lines(editor, buf) == buffer and modified(editor, buf)
    assert hunks(editor) == review
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert any("your text was kept" in n for n in notices) == (review[0][0] == "conflict")
    # Rejecting gives back the file and your text as they were: the agent's deletion,
    # taken into the buffer, was rejected by writing "mine" to the disk with the rest.
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert path.read_text() == "a\nb\nc\nd\n"
    assert lines(editor, buf) == ["a", "b", "mine", "c", "d"] and modified(editor, buf)


def notices(editor: Editor) -> list[str]:
    return [n["msg"] for n in editor.lua("return _G.acp_notices")]


def test_a_write_never_read_to_a_file_gone_behind_unsaved_edits_waits_for_you(
    editor: Editor, tmp_path: Path
) -> None:
    """The file was renamed away in a shell; its buffer holds unsaved edits; the
    agent, which read the file on its own before, writes it whole. The missing file
    made the merge's base empty, so the buffer got its text and the agent's (the
    whole file twice) and the file came back with the agent's text. What the agent
    read is unknown: each line where its text and yours differ waits as a conflict,
    your text stays, and no file is made behind your unsaved edits."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, {'three, unsaved'})", buf)
    path.rename(path.with_name("b.txt"))
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n"}}])
    assert lines(editor, buf) == ["1", "2", "three, unsaved"] and modified(editor, buf)
    assert hunks(editor) == [
        ("conflict", ["-1", "+one"]),
        ("conflict", ["-three, unsaved", "+3"]),
    ]
    assert not path.exists() and path.with_name("b.txt").read_text() == "1\n2\n3\n"
    assert any("a.txt has no file on disk" in n for n in notices(editor)), notices(editor)
    # Accepting the agent's line puts it in the buffer; the file is yours to write.
    conflict = editor.lua("return require('acp').changes()")[0]["hunks"][0]["id"]
    editor.lua("require('acp').accept(...)", str(path), conflict)
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")
    assert lines(editor, buf) == ["one", "2", "three, unsaved"] and modified(editor, buf)
    assert not path.exists()
    assert not user_write(editor, buf)
    assert path.read_text() == "one\n2\nthree, unsaved\n"


def test_a_write_to_a_file_deleted_behind_unsaved_edits_stays_in_the_buffer(
    editor: Editor, tmp_path: Path
) -> None:
    """The file was deleted on disk; the agent read its buffer (your unsaved line
    too) and added a line. The change went to the missing file's empty text: the
    file came back holding only the agent's line. No file is made from an unsaved
    buffer (decision 0015): the change is in the buffer, a hunk like any other, and
    you are told that :write makes the file."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., -1, -1, false, {'mine'})", buf)
    path.unlink()
    steps = [
        {"read": {"path": str(path)}},
        {"write": {"path": str(path), "content": "1\n2\nmine\nagent\n"}},
    ]
    assert run(editor, steps)[0] == {"content": "1\n2\nmine\n"}
    assert lines(editor, buf) == ["1", "2", "mine", "agent"] and modified(editor, buf)
    assert hunks(editor) == [("pending", ["+agent"])]
    assert not path.exists()
    assert any("a.txt has no file on disk" in n for n in notices(editor)), notices(editor)
    # Rejecting takes the line out of the buffer, and still makes no file.
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert lines(editor, buf) == ["1", "2", "mine"] and modified(editor, buf)
    assert not path.exists()


def user_write(editor: Editor, buf: int) -> bool:
    """:write typed in the buffer's window; whether Neovim asked "changed since
    reading it" (answered no: nothing written)."""
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)
    editor.nvim.input(":write<CR>")
    # Answered once Neovim waits for a key: after the write, or at its question.
    if editor.lua("return vim.api.nvim_get_mode().mode") != "r?":
        return False
    editor.nvim.input("n")
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "n"
    return True


def test_after_an_agent_write_beside_unsaved_text_write_asks_nothing(
    editor: Editor, tmp_path: Path
) -> None:
    """Neovim asked "changed since reading it" at the user's next :write: only the
    agent's change, which the buffer holds too, had changed the file."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, {'three, unsaved'})", buf)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n"}}])
    assert path.read_text() == "one\n2\n3\n" and modified(editor, buf)
    assert not user_write(editor, buf)
    assert path.read_text() == "one\n2\nthree, unsaved\n"
    # Something else changes the file after the agent's write: Neovim asks again.
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'ONE, unsaved'})", buf)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n4\n"}}], turn=2)
    path.write_text(path.read_text() + "5 from a shell\n")
    assert user_write(editor, buf)
    assert path.read_text().endswith("5 from a shell\n") and modified(editor, buf)


def test_a_write_command_of_another_plugin_keeps_neovims_question(
    editor: Editor, tmp_path: Path
) -> None:
    """Making Neovim take the file as read takes a :write that writes nothing: with
    another BufWriteCmd for the file (gnupg's, say), that would write."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    buf = start(editor, path)
    editor.nvim.command("autocmd BufWriteCmd *.txt let g:written_by_plugin = 1")
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, {'three, unsaved'})", buf)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n"}}])
    assert editor.lua("return vim.g.written_by_plugin") is None
    assert path.read_text() == "one\n2\n3\n" and modified(editor, buf)


def test_write_to_a_stale_buffer_reloads_it_first_and_keeps_the_newer_disk_text(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\nc\n")
    buf = start(editor, path)
    run(editor, [{"read": {"path": str(path)}}])
    path.write_text("a\nb\nc\nd from git\n")  # `git checkout .` in a shell, say
    run(editor, [{"write": {"path": str(path), "content": "A\nb\nc\n"}}], turn=2)
    assert path.read_text() == "A\nb\nc\nd from git\n"
    assert lines(editor, buf) == ["A", "b", "c", "d from git"]
    assert not modified(editor, buf)


def test_write_to_a_stale_buffer_with_unsaved_edits_leaves_the_newer_disk_text(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\nc\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 1, 2, false, {'b, unsaved'})", buf)
    path.write_text("a\nb\nc\nd from git\n")
    run(editor, [{"write": {"path": str(path), "content": "A\nb\nc\nd from git\n"}}])
    assert path.read_text() == "A\nb\nc\nd from git\n"
    assert lines(editor, buf)[:2] == ["A", "b, unsaved"] and modified(editor, buf)
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert any("changed on disk behind your unsaved edits" in n for n in notices), notices


@contextmanager
def open_elsewhere(editor: Editor, path: Path) -> Iterator[None]:
    """``path`` open in another Neovim, its swap file where this one looks for one."""
    editor.nvim.command("set swapfile updatecount=200")  # the fixture's -n turned them off
    swaps = editor.lua("return vim.fn.stdpath('state') .. '/swap//'")
    os.makedirs(swaps, exist_ok=True)
    other = subprocess.Popen(
        [nvim_binary(), "--headless", "--clean", "--cmd", f"set directory={swaps}", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Its header written, not only the file made: Neovim reads the pid there.
        editor.wait(
            f"vim.tbl_contains(vim.tbl_map(function(f) return vim.fn.swapinfo(f).pid end,"
            f" vim.fn.glob({swaps!r} .. '*.swp', false, true)), {other.pid})",
            what="its swap file",
        )
        yield
    finally:
        other.kill()
        other.wait()


def test_a_file_open_in_another_neovim_opens_as_edit_does_where_the_user_jumps(
    editor: Editor, tmp_path: Path
) -> None:
    """<CR> on a location, or the review's jump to a file, is the user's own :edit:
    Neovim's swap file question is theirs (headless, with no UI to ask, its E325),
    not the refusal an agent's load gets."""
    path = tmp_path / "project" / "s.txt"
    path.write_text("one\ntwo\n")
    with open_elsewhere(editor, path):
        start(editor)
        ok, err = editor.lua(
            "return { pcall(require('acp.editor.windows').show, ..., 2, true) }", str(path)
        )
        assert "a swap file exists for it" not in str(err)
        assert (ok, "E325" in str(err)) == (False, True)
        assert editor.lua("return vim.fn.getbufline(..., 1, '$')", str(path)) == ["one", "two"]


def test_a_file_open_in_another_neovim_is_not_loaded_for_an_unsaved_edit(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "s.txt"
    path.write_text("one\ntwo\n")
    with open_elsewhere(editor, path):
        editor.setup(agents={"files": editor.fake_agent("files")}, auto_save=False)
        editor.open_chat("files")
        [result] = run(editor, [{"write": {"path": str(path), "content": "one\nTWO\n"}}])
        why = f"cannot load {path}: a swap file exists for it: it is open in another Neovim, or one crashed editing it"
        # Not loaded past Neovim's E325 (the user would never be offered to recover the
        # swap file's text): the agent and the user are told, and nothing changed.
        assert result == {"error": -32603, "message": f"Internal error: {why}"}
        assert editor.lua("return vim.fn.bufexists(...)", str(path)) == 0
        swaps = editor.lua("return vim.fn.glob(vim.fn.stdpath('state') .. '/swap/*', false, true)")
        assert not [s for s in swaps if not s.endswith(".swp")]  # none of ours (.swo)
        assert editor.lua("return _G.acp_notices")[-1]["msg"] == f"acp: the agent's write failed: {why}"
        assert path.read_text() == "one\ntwo\n"


def test_read_only_buffer_or_file_is_refused_with_a_clear_error(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    locked, closed, plain = project / "locked.txt", project / "closed.txt", project / "plain.txt"
    for path in (locked, closed, plain):
        path.write_text("keep\n")
    locked.chmod(0o444)
    closed.chmod(0o444)
    buf = start(editor, plain)
    editor.lua("vim.bo[...].readonly = true", buf)
    editor.lua("vim.fn.bufload(vim.fn.bufadd(...))", str(locked))  # Neovim sets 'readonly'
    results = run(
        editor,
        [{"write": {"path": str(path), "content": "agent\n"}} for path in (plain, locked, closed)],
    )
    in_editor = "is read-only in the editor ('readonly' or 'nomodifiable')"
    assert [(r["error"], r["message"]) for r in results] == [
        (-32602, f"Invalid params: {plain} {in_editor}"),
        (-32602, f"Invalid params: {locked} {in_editor}"),
        (-32602, f"Invalid params: {closed} is read-only (no write permission)"),
    ]
    assert {p.read_text() for p in (locked, closed, plain)} == {"keep\n"}
    assert lines(editor, buf) == ["keep"]


@pytest.mark.parametrize(("events", "post"), [("post", 1), ("none", 0)])
def test_an_agent_save_fires_bufwritepost_but_never_a_format_on_save(
    editor: Editor, tmp_path: Path, events: str, post: int
) -> None:
    path = tmp_path / "project" / "f.py"
    path.write_text("x = 1\n")
    buf = start(editor, path)
    editor.setup(agents={"files": editor.fake_agent("files")}, save_events=events)
    # A format-on-save hook (it would change the text under review) and a linter.
    editor.lua(
        "_G.saves = {pre = 0, post = 0}"
        " vim.api.nvim_create_autocmd('BufWritePre', {pattern = '*.py', callback = function()"
        "   _G.saves.pre = _G.saves.pre + 1"
        "   vim.api.nvim_buf_set_lines(0, 0, 0, false, {'# formatted'}) end})"
        " vim.api.nvim_create_autocmd('BufWritePost', {pattern = '*.py', callback = function()"
        "   _G.saves.post = _G.saves.post + 1 end})"
    )
    run(editor, [{"write": {"path": str(path), "content": "x = 2\n"}}])
    assert editor.lua("return _G.saves") == {"pre": 0, "post": post}
    assert lines(editor, buf) == ["x = 2"]
    assert path.read_text() == "x = 2\n"


def test_agent_saves_and_a_restore_leave_no_buffer_behind(editor: Editor, tmp_path: Path) -> None:
    # Each save goes through a hidden file beside the file (decision 0037): `:ls!`
    # used to list one buffer per save, named after it.
    path = tmp_path / "project" / "demo.txt"
    path.write_text("one\n")
    start(editor, path)
    every_buffer = "return vim.tbl_map(vim.api.nvim_buf_get_name, vim.api.nvim_list_bufs())"
    before = editor.lua(every_buffer)
    run(editor, [{"write": {"path": str(path), "content": "one\ntwo\n"}}])
    run(editor, [{"write": {"path": str(path), "content": "one\ntwo\nthree\n"}}], turn=2)
    editor.nvim.command("AcpRestore 1")
    editor.wait(f"vim.fn.readfile({str(path)!r})[2] == nil", what="the file restored")
    assert editor.lua(every_buffer) == before


def test_undo_of_an_agent_edit_takes_its_hunk_out_of_the_review(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "u.txt"
    path.write_text("one\ntwo\n")
    buf = start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "one\nTWO\n"}}])
    editor.wait("#require('acp').changes()[1].hunks == 1")
    assert editor.lua("return require('acp').changes()[1].hunks[1].status") == "pending"
    win = editor.lua("return vim.fn.bufwinid(...)", buf)
    editor.lua("vim.api.nvim_set_current_win(...)", win)
    editor.as_typed("undo")
    assert lines(editor, buf) == ["one", "two"]
    editor.wait(
        "#vim.tbl_filter(function(h) return h.status == 'pending' end,"
        " (require('acp').changes()[1] or {hunks = {}}).hunks) == 0",
        what="the review follows the undo",
    )


def test_a_full_disk_leaves_file_buffer_and_review_as_they_were(
    editor: Editor, tmp_path: Path
) -> None:
    """Issue 27.6: an agent write that hit ENOSPC left the file as the first 4 kB of the
    new text, plus a Lua traceback to the agent when a buffer held it. Now the agent
    gets one clear error, so does the user, and file, buffer and review are untouched."""
    with small_disk(tmp_path / "project" / "full") as full:
        loaded, closed = full / "loaded.txt", full / "closed.txt"
        linked = full / "linked.txt"  # hard-linked: written in place, after a backup
        for path in (loaded, closed, linked):
            path.write_text("the user's text\n")
        os.link(linked, full / "twin.txt")
        fill(full)
        buf = start(editor, loaded)
        assert buf is not None
        editor.lua("vim.fn.bufload(vim.fn.bufadd(...))", str(linked))
        big = "x" * 100 + "\n"
        targets = (loaded, closed, linked)
        results = run(
            editor,
            [{"write": {"path": str(path), "content": big * 1000}} for path in targets]
            + [{"write": {"path": str(closed), "content": "fits\n"}}],
        )
        for result, path in zip(results, targets, strict=False):
            assert "traceback" not in result["message"]
            assert f"cannot write {path}: " in result["message"]
        assert results[1]["message"].endswith("No space left on device")
        assert results[0]["message"].endswith("Write error (file system full?)")
        assert results[3] == {}
        assert closed.read_text() == "fits\n"
        assert loaded.read_text() == linked.read_text() == "the user's text\n"
        assert lines(editor, buf) == ["the user's text"]
        assert editor.lua("return vim.bo[...].modified", buf) is False
        changes = editor.lua("return require('acp').changes()")
        assert [c["path"] for c in changes] == [str(closed)], changes  # the write that fitted
        notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
        assert sum("the agent's write failed" in n for n in notices) == 3
        assert not [name for name in os.listdir(full) if name.endswith(".acp~")]


def test_an_export_on_a_full_disk_leaves_the_old_one_whole(editor: Editor, tmp_path: Path) -> None:
    """Issue 27.6, the files the plugin writes itself: an export over an older one on a
    full disk is an error that says why, and the older export stays whole."""
    with small_disk(tmp_path / "full") as full:
        old = full / "chat.md"
        old.write_text("the old export\n")
        editor.setup()
        editor.open_chat()
        editor.lua("require('acp').send(...)", "hello " + "x" * 8000)  # more than a block
        editor.wait_event("AcpTurnEnd")
        fill(full, room=0)
        with pytest.raises(Exception, match=f"cannot write {old}: .*space"):
            editor.lua("require('acp').export(..., {force = true})", str(old))
        assert old.read_text() == "the old export\n"
        # :AcpExport, which does not wait for the Markdown, tells the same.
        editor.nvim.command(f"AcpExport! {old}")
        said = "vim.iter(_G.acp_notices):any(function(n) return n.msg:find('cannot write') end)"
        editor.wait(said, what="the export's error")
        [notice] = [n for n in editor.lua("return _G.acp_notices") if "cannot write" in n["msg"]]
        assert re.fullmatch(f"acp: cannot write {old}: .*space.*", notice["msg"]), notice
        assert old.read_text() == "the old export\n"
        assert [name for name in os.listdir(full) if name != ".filler"] == ["chat.md"]


def test_an_export_into_a_missing_directory_says_so(editor: Editor, tmp_path: Path) -> None:
    """The error names the file asked for, never the temporary it is written to first."""
    editor.setup()
    editor.open_chat()
    path = tmp_path / "missing" / "chat.md"
    editor.nvim.command(f"AcpExport {path}")
    said = "vim.iter(_G.acp_notices):any(function(n) return n.msg:find('cannot write') end)"
    editor.wait(said, what="the export's error")
    [notice] = [n for n in editor.lua("return _G.acp_notices") if "cannot write" in n["msg"]]
    assert notice["msg"] == f"acp: cannot write {path}: ENOENT: no such file or directory"


def test_the_prompt_history_on_a_full_disk_stays_whole(editor: Editor) -> None:
    """Issue 27.6: the prompt history (stdpath("state")) is written all or nothing too."""
    with small_disk(editor.tmp / "xdg-state" / "nvim" / "acp") as state:
        history = state / "history.json"
        older = json.dumps({"older": ["x" * 4000]})  # one block, nearly full
        history.write_text(older)
        # The chat history's file off this disk: its WAL, removed as SQLite closes it
        # after a failed write, would give the prompt history room again.
        editor.setup(history={"path": str(editor.tmp / "history.sqlite3")})
        editor.open_chat()
        fill(state, room=0)
        editor.lua("require('acp').send('hello')")  # stored in a later turn of the loop
        editor.wait_event("AcpTurnEnd")
        editor.lua("require('acp.chat.prompt_history').flush()")  # its write is done
        assert history.read_text() == older
        assert not [name for name in os.listdir(state) if name.endswith(".acp~")]


def test_a_markdown_files_own_fences_in_an_edits_diff_leave_the_transcript_prose(
    editor: Editor, tmp_path: Path
) -> None:
    """The diff of a Markdown file drawn inside a plain ```diff fence: the file's own
    fence, a context row " ```", ended the transcript's code block there, and every
    later row (the rest of the diff, the turn's end) was read the wrong way round."""
    readme = tmp_path / "project" / "README.md"
    readme.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text("# Use\n\n```sh\nmake\n```\n\nDone.\n")
    start(editor)
    run(editor, [{"disk": {"path": str(readme), "content": readme.read_text() + "More.\n"}}])
    lines = editor.transcript()
    status = editor.lua("return require('acp').status()")

    def syntax(row: int) -> list[str]:
        return list(
            editor.lua(
                "local buf, lnum = ...; return vim.api.nvim_buf_call(buf, function() return"
                " vim.tbl_map(function(id) return vim.fn.synIDattr(id, 'name') end,"
                " vim.fn.synstack(lnum, 1)) end)",
                status["transcript_buf"],
                row + 1,
            )
        )

    # The file's closing fence is a row of the diff, and the diff ends after it.
    inside = lines.index(" ```")
    assert "acpchatCodeBlock" in syntax(inside)
    assert "acpchatCodeBlock" in syntax(lines.index("+More."))
    assert lines[-1].startswith("*— ") and "acpchatCodeBlock" not in syntax(len(lines) - 1)
    # The diff is coloured as one: its added row is an addition.
    win = editor.lua("return vim.fn.win_findbuf(...)[1]", status["transcript_buf"])
    assert Screen.of(editor).at(win, lines.index("+More.")) == ["AcpDiffAdd"]
