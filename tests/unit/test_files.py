"""fs/* answers and the per-session review, with the in-memory Editor (no Neovim)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.client.agent.v1 import request_error
from acp_nvim.client.config import Config, load_config
from acp_nvim.client.services import files
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.disk_changes import baseline_from_diff, scan_tree
from acp_nvim.client.services.files import FileError
from acp_nvim.client.services.tree_watch import TreeWatch
from acp_nvim.client.session.model import ChangesPart, DiffPart, FileOp, Location, ToolCall
from acp_nvim.client.tasks import Tasks
from acp_nvim.protocol import RequestError
from tests.disk import fill, small_disk
from tests.fakes.editor import RecordingEditor

pytestmark = pytest.mark.anyio


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[tuple[SessionChanges, RecordingEditor]]:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        await changes.begin_turn()
        yield changes, editor
        changes.close()
        tasks.cancel_scope.cancel()


def hunks(changes: SessionChanges) -> list[tuple[str, str, list[str]]]:
    return [
        (os.path.basename(f["path"]), h["status"], h["preview"])
        for f in changes.summary()["files"]
        for h in f["hunks"]
    ]


# -- fs/read_text_file -------------------------------------------------------------


async def test_read_gives_the_buffers_unsaved_text_with_line_and_limit(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, editor = session
    path = tmp_path / "a.py"
    path.write_text("saved\n")
    editor.open_buffer(str(path), ["one", "two", "three"], modified=True)
    assert await changes.read(str(path)) == "one\ntwo\nthree\n"
    assert await changes.read(str(path), line=2) == "two\nthree\n"
    assert await changes.read(str(path), line=2, limit=1) == "two\n"


async def test_read_from_disk_keeps_crlf_and_decodes_latin1(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, _ = session
    (tmp_path / "dos.txt").write_bytes(b"a\r\nb\r\n")
    (tmp_path / "old.txt").write_bytes(b"caf\xe9\n")
    assert await changes.read(str(tmp_path / "dos.txt"), line=2) == "b\r\n"
    assert await changes.read(str(tmp_path / "old.txt")) == "café\n"


@pytest.mark.parametrize(
    ("name", "line", "code", "message"),
    [
        ("rel/a.txt", None, RequestError.INVALID_PARAMS, "path must be absolute"),
        ("missing.txt", None, RequestError.RESOURCE_NOT_FOUND, "no such file"),
        ("dir", None, RequestError.INVALID_PARAMS, "is a directory"),
        ("bin", None, RequestError.INVALID_PARAMS, "is a binary file"),
        (
            "short.txt",
            5,
            RequestError.INVALID_PARAMS,
            "line 5 is past the end of the file (2 lines)",
        ),
    ],
)
async def test_read_errors(
    session: tuple[SessionChanges, RecordingEditor],
    tmp_path: Path,
    name: str,
    line: int | None,
    code: int,
    message: str,
) -> None:
    changes, _ = session
    (tmp_path / "dir").mkdir()
    (tmp_path / "bin").write_bytes(b"\x89PNG\0\0")
    (tmp_path / "short.txt").write_text("1\n2\n")
    path = name if name.startswith("rel") else str(tmp_path / name)
    with pytest.raises(FileError) as info:
        await changes.read(path, line=line)
    err = request_error(info.value)
    assert err.code == code
    assert message in err.message


async def test_missing_file_as_empty(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(
            RecordingEditor(), 1, str(tmp_path), Tasks(tasks), missing_file_as_empty=True
        )
        assert await changes.read(str(tmp_path / "new.py")) == ""
        changes.close()
        tasks.cancel_scope.cancel()


# -- fs/write_text_file ------------------------------------------------------------


async def test_write_edits_only_changed_lines_and_keeps_unseen_user_edits(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, editor = session
    path = str(tmp_path / "a.py")
    (tmp_path / "a.py").write_text("a\nb\nc\nd\n")
    await changes.begin_turn()  # a.py exists when the turn starts
    editor.open_buffer(path)
    seen = await changes.read(path)
    editor.type_in(path, 3, "D by user")  # after the agent's read
    await changes.write(path, seen.replace("b\n", "B\n"))
    buffer = editor.buffers[path]
    assert buffer.state.lines == ["a", "B", "c", "D by user"]
    assert len(buffer.undo) == 1  # one edit call: one undo step
    # auto_save writes the agent's change, never the user's unsaved line.
    assert (tmp_path / "a.py").read_text() == "a\nB\nc\nd\n"
    assert buffer.state.modified
    assert hunks(changes) == [("a.py", "pending", ["-b", "+B"])]


async def test_conflicting_user_edit_survives_as_a_conflict(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, editor = session
    path = str(tmp_path / "a.py")
    (tmp_path / "a.py").write_text("a\nb\nc\n")
    await changes.begin_turn()
    editor.open_buffer(path)
    await changes.read(path)
    editor.type_in(path, 1, "mine")
    await changes.write(path, "a\nagent\nc\n")
    assert editor.buffers[path].state.lines == ["a", "mine", "c"]
    assert hunks(changes) == [("a.py", "conflict", ["-mine", "+agent"])]
    assert editor.notices[-1][0] == "warn"


# The agent read the buffer with the user's unsaved line "mine" in it, then wrote.
@pytest.mark.parametrize(
    ("written", "buffer", "disk", "review"),
    [
        # Next to "mine": the agent's line reaches the buffer and the disk, "mine" only the buffer.
        ("a\nB\nmine\nc\nd\n", "a B mine c d", "a B c d", [("pending", ["-b", "+B"])]),
        # "mine" itself, rewritten: the disk would get the agent's version of an unsaved line.
        (
            "a\nb\nmine, reworded\nc\nd\n",
            "a b mine c d",
            "a b c d",
            [("conflict", ["-mine", "+mine, reworded"])],
        ),
        # Lines around "mine", rewritten keeping it: it would go to the disk with them.
        (
            "a\nB\nmine!\nC\nd\n",
            "a b mine c d",
            "a b c d",
            [("conflict", ["-b", "-mine", "-c", "+B", "+mine!", "+C"])],
        ),
        # Lines around "mine", deleted with it: rejecting that put "mine" on disk.
        ("a\nd\n", "a b mine c d", "a b c d", [("conflict", ["-b", "-mine", "-c"])]),
    ],
    ids=["adjacent", "same-line", "around", "deleted-around"],
)
async def test_a_write_reaching_into_unsaved_lines_waits_as_a_conflict_off_the_disk(
    session: tuple[SessionChanges, RecordingEditor],
    tmp_path: Path,
    written: str,
    buffer: str,
    disk: str,
    review: list[tuple[str, list[str]]],
) -> None:
    """Decision 0015: a write behind unsaved edits puts only the agent's change on
    disk. Where it reached into the user's unsaved lines, applying it to the disk
    took the buffer's whole clashing region there, the user's line with it."""
    changes, editor = session
    path = tmp_path / "a.txt"
    path.write_text("a\nb\nc\nd\n")
    await changes.begin_turn()
    editor.open_buffer(str(path), ["a", "b", "mine", "c", "d"], modified=True)
    assert await changes.read(str(path)) == "a\nb\nmine\nc\nd\n"
    await changes.write(str(path), written)
    assert editor.buffers[str(path)].state.lines == buffer.split()
    assert editor.buffers[str(path)].state.modified
    assert path.read_text().split() == disk.split()
    assert [(status, preview) for _, status, preview in hunks(changes)] == review
    # A reject writes the hunk's lines back: never "mine" (the deletion's did).
    await changes.decide("reject")
    assert path.read_text() == "a\nb\nc\nd\n"
    assert editor.buffers[str(path)].state.lines == ["a", "b", "mine", "c", "d"]


async def test_a_file_changed_between_the_writes_two_reads_never_gets_your_unsaved_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write behind unsaved edits reads the file twice: to hold back what reaches
    into the user's unsaved lines, then to apply what is left to it. Something else
    (opencode's own write of the file, a formatter) changing the file in between
    met a change held back against the older text: the change won the clash, and
    took the buffer's region there, the user's unsaved "mine" in it, to the disk."""
    path = tmp_path / "a.txt"
    path.write_text("a\nb\nc\nd\n")
    editor = RecordingEditor()
    editor.open_buffer(str(path), ["a", "mine", "c", "d"], modified=True)
    read = files.read_disk
    raced: list[str] = []

    def racing(name: str) -> files.Document:
        doc = read(name)
        if not raced:  # the first read of the write: the file changes right after it
            raced.append(name)
            path.write_text("a\nb\nX, by something else\nd\n")
        return doc

    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        assert await changes.read(str(path)) == "a\nmine\nc\nd\n"
        monkeypatch.setattr(files, "read_disk", racing)
        conflicts = await changes.write(str(path), "a\nmine\nC, the agent's\nd\n")
        assert raced
        assert path.read_text() == "a\nb\nX, by something else\nd\n"  # never "mine"
        assert editor.buffers[str(path)].state.lines == ["a", "mine", "c", "d"]
        assert [h.status for h in conflicts] == ["conflict"]
        assert hunks(changes) == [
            ("a.txt", "conflict", ["-mine", "-c", "+mine", "+C, the agent's"])
        ]
        changes.close()
        tasks.cancel_scope.cancel()


async def test_read_and_write_before_any_turn_keep_the_agents_read_base(tmp_path: Path) -> None:
    """An agent (an MCP tool, an fs call) reads and writes before the first turn: the
    user's edit made in between is merged, not lost, and the file is not "created"."""
    path = str(tmp_path / "a.py")
    (tmp_path / "a.py").write_text("a\nb\nc\n")
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        seen = await changes.read(path)
        (tmp_path / "a.py").write_text("A by user\nb\nc\n")  # no buffer: on disk
        await changes.write(path, seen.replace("c\n", "C\n"))
        assert (tmp_path / "a.py").read_text() == "A by user\nb\nC\n"
        [file] = changes.summary()["files"]
        assert (file["kind"], file["created"], file["turn"]) == ("write", False, 1)
        assert hunks(changes) == [("a.py", "pending", ["-c", "+C"])]
        await changes.begin_turn()  # the first turn: the change above is part of it
        assert changes.summary()["turn"] == 1
        changes.close()
        tasks.cancel_scope.cancel()


async def test_write_without_buffer_keeps_crlf_and_final_newline(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, editor = session
    path = tmp_path / "dos.txt"
    path.write_bytes(b"a\r\nb\r\n")
    await changes.write(str(path), "a\nB")  # LF and no final newline, like many agents
    assert path.read_bytes() == b"a\r\nB\r\n"
    assert editor.buffers == {}  # written without a buffer (so without a window)


async def test_write_creates_file_and_parents(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, _ = session
    path = tmp_path / "new" / "dir" / "x.txt"
    await changes.write(str(path), "hello\n")
    assert path.read_text() == "hello\n"
    [file] = changes.summary()["files"]
    assert file["created"] is True and file["kind"] == "write"


async def test_auto_save_off_leaves_the_buffer_unsaved(tmp_path: Path) -> None:
    editor = RecordingEditor()
    path = tmp_path / "a.txt"
    path.write_text("old\n")
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks), auto_save=False)
        await changes.begin_turn()
        await changes.write(str(path), "new\n")
        changes.close()
        tasks.cancel_scope.cancel()
    assert path.read_text() == "old\n"
    assert editor.buffers[str(path)].state.lines == ["new"]
    assert editor.buffers[str(path)].state.modified


async def test_write_refuses_a_directory(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, _ = session
    with pytest.raises(FileError, match="is a directory"):
        await changes.write(str(tmp_path), "x")


# -- review --------------------------------------------------------------------------


async def test_reject_one_hunk_restores_buffer_and_disk(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, editor = session
    path = str(tmp_path / "a.py")
    (tmp_path / "a.py").write_text("1\n2\n3\n4\n5\n6\n7\n8\n")
    await changes.begin_turn()
    editor.open_buffer(path)
    await changes.write(path, "one\n2\n3\n4\n5\n6\n7\neight\n")
    first, _second = changes.summary()["files"][0]["hunks"]
    await changes.decide("reject", path, first["id"])
    assert editor.buffers[path].state.lines[0] == "1"
    assert (tmp_path / "a.py").read_text() == "1\n2\n3\n4\n5\n6\n7\neight\n"
    assert [h["status"] for h in changes.summary()["files"][0]["hunks"]] == ["rejected", "pending"]
    await changes.decide("accept")
    assert [h["status"] for h in changes.summary()["files"][0]["hunks"]] == ["rejected", "accepted"]
    assert editor.reviews[1] == changes.summary()


async def test_reject_all_deletes_a_created_file(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, _ = session
    (tmp_path / "keep.txt").write_text("k\n")
    await changes.begin_turn()
    await changes.write(str(tmp_path / "new.txt"), "n\n")
    await changes.write(str(tmp_path / "keep.txt"), "K\n")
    await changes.decide("reject")
    assert not (tmp_path / "new.txt").exists()
    assert (tmp_path / "keep.txt").read_text() == "k\n"


async def test_a_file_created_before_its_announcement_is_handled_is_reviewable(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    """A fast agent writes a new file before the client handles the pending call
    naming it: absent at turn start, so its baseline is no file, not its own text."""
    changes, _editor = session
    path = tmp_path / "new.py"
    path.write_text("made = True\n")
    changes.on_tool_call(ToolCall("t1", status="pending", locations=[Location(str(path))]))
    await changes.end_turn()
    [file] = changes.summary()["files"]
    assert (file["created"], hunks(changes)) == (True, [("new.py", "pending", ["+made = True"])])
    await changes.decide("reject", str(path))
    assert not path.exists()


async def test_direct_disk_edit_named_by_a_tool_call_is_recorded_and_rejectable(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, _editor = session
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    await changes.begin_turn()  # a.py exists when the turn starts
    call = ToolCall("t1", status="pending", locations=[Location(str(path))])
    changes.on_tool_call(call)  # pending: the file's text is snapshotted
    path.write_text("x = 2\n")  # the agent edits the disk itself
    call.status = "completed"
    changes.on_tool_call(call)
    await changes.end_turn()
    assert hunks(changes) == [("a.py", "pending", ["-x = 1", "+x = 2"])]
    await changes.decide("reject", str(path))
    assert path.read_text() == "x = 1\n"


async def test_turn_scan_finds_unnamed_disk_changes_and_reloads_clean_buffers(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, editor = session
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "b.txt"
    path.write_text("old\n")
    await changes.begin_turn()  # the scan sees b.txt
    editor.open_buffer(str(path))
    os.utime(path, ns=(0, 0))
    path.write_text("new\n")  # e.g. a shell command; no tool call names it
    (tmp_path / "made.txt").write_text("made\n")
    await changes.end_turn()
    assert sorted(hunks(changes)) == [
        ("b.txt", "pending", ["-old", "+new"]),
        ("made.txt", "pending", ["+made"]),
    ]
    assert editor.buffers[str(path)].state.lines == ["new"]  # reloaded


def written_behind(
    changes: SessionChanges,
    editor: RecordingEditor,
    path: Path,
    unsaved: list[str],
    on_disk: str,
    call: str = "t",
) -> None:
    """The agent writes ``on_disk`` to ``path`` by itself while its buffer holds
    ``unsaved`` (typed since it was read); the tool call naming the file completes."""
    editor.open_buffer(str(path), unsaved, modified=True)
    path.write_text(on_disk)
    changes.on_tool_call(ToolCall(call, status="completed", locations=[Location(str(path))]))


async def test_a_change_on_disk_is_merged_into_a_buffers_unsaved_text(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    """Decision 0015, amended: the agent's own write of a file whose buffer holds
    unsaved text lands in the buffer too (not saved), beside the user's lines, and
    the review follows the buffer: rejecting takes the agent's line out of both."""
    changes, editor = session
    path = tmp_path / "c.txt"
    path.write_text("a\nb\nc\n")
    await changes.begin_turn()
    written_behind(changes, editor, path, ["mine", "b", "c"], "a\nb\nc\nagent\n")
    await changes.end_turn()
    buffer = editor.buffers[str(path)].state
    assert buffer.lines == ["mine", "b", "c", "agent"] and buffer.modified
    assert path.read_text() == "a\nb\nc\nagent\n"  # the user's line is theirs to save
    assert hunks(changes) == [("c.txt", "pending", ["+agent"])]
    assert "the agent's change is in your buffer too" in editor.notices[-1][1]
    # The user types on (the buffer tells the review), then rejects.
    editor.open_buffer(str(path), ["mine", "b", "c", "agent", "more"], modified=True)
    await changes.sync(str(path))
    await changes.decide("reject")
    assert editor.buffers[str(path)].state.lines == ["mine", "b", "c", "more"]
    assert path.read_text() == "a\nb\nc\n"
    assert hunks(changes) == [("c.txt", "rejected", ["+agent"])]


async def test_a_second_change_on_disk_merges_against_the_first_not_the_buffer(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    """The review follows the buffer once a change is merged into it: the next change
    on disk is taken against what the first left on disk, so the user's unsaved
    lines (typed before and between) are never taken for the agent's removals."""
    changes, editor = session
    path = tmp_path / "c.txt"
    path.write_text("a\nb\n")
    await changes.begin_turn()
    written_behind(changes, editor, path, ["mine", "b"], "a\nb\nA\n")
    await changes.check()
    written_behind(changes, editor, path, ["mine", "more of mine", "b", "A"], "a\nb\nA\nB\n", "t2")
    await changes.end_turn()
    assert editor.buffers[str(path)].state.lines == ["mine", "more of mine", "b", "A", "B"]
    await changes.decide("reject")
    assert editor.buffers[str(path)].state.lines == ["mine", "more of mine", "b"]
    assert path.read_text() == "a\nb\n"


async def test_a_restore_takes_a_change_merged_behind_unsaved_text_out_of_both(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    """:AcpRestore (and a rewind) of a turn whose change on disk was merged into a
    buffer's unsaved text: the buffer keeps the user's lines, the file its own."""
    changes, editor = session
    path = tmp_path / "c.txt"
    path.write_text("a\nb\n")
    await changes.begin_turn()
    written_behind(changes, editor, path, ["mine", "b"], "a\nb\nagent\n")
    await changes.end_turn()
    assert editor.buffers[str(path)].state.lines == ["mine", "b", "agent"]
    assert await changes.restore(1) == (["c.txt"], [])
    assert editor.buffers[str(path)].state.lines == ["mine", "b"]
    assert path.read_text() == "a\nb\n"


async def test_a_change_on_disk_clashing_with_unsaved_text_leaves_it_a_conflict(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, editor = session
    path = tmp_path / "c.txt"
    path.write_text("v1\n")
    await changes.begin_turn()
    diff = DiffPart(str(path), "v1", "v2")  # whole file minus its final newline
    changes.on_tool_call(ToolCall("t", status="completed", content=[diff]))
    editor.open_buffer(str(path), ["mine"], modified=True)
    path.write_text("v2\n")
    await changes.end_turn()
    assert hunks(changes) == [("c.txt", "conflict", ["-mine", "+v2"])]  # base from oldText
    assert editor.buffers[str(path)].state.lines == ["mine"]
    assert "your text was kept" in editor.notices[-1][1]


async def test_an_undo_followed_on_a_file_that_missed_a_change_never_saves_unsaved_text(
    tmp_path: Path,
) -> None:
    """Decisions 0015 and 0027: following an undo or redo publishes only it. Here the
    change starts from a text the file never got (the review's "three", the file's
    "one"): it clashes with the file, and the clash would take the buffer's lines,
    the user's unsaved top line with them. Nothing is written; the user is told."""
    editor = RecordingEditor()
    path = tmp_path / "a.txt"
    path.write_text("one\nkeep me\n")
    editor.open_buffer(str(path), ["USER TOP LINE", "one", "keep me"], modified=True)
    doc = await files.load(editor, str(path))
    await files.follow(editor, doc, ("USER TOP LINE\nthree\nkeep me\n", doc.text))
    assert path.read_text() == "one\nkeep me\n"
    assert editor.buffers[str(path)].state.modified
    clash = f"{path}: your undo or redo clashes with the file: not written"
    assert editor.notices == [("warn", clash)]


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "scanned"])
async def test_neovims_own_directories_in_the_project_are_never_the_agents_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watched: bool
) -> None:
    """Decision 0077: a project may hold Neovim's own directories (the project is
    $HOME, or XDG_STATE_HOME points into it). What Neovim and acp.nvim write there
    during a turn (the prompt history, the chat history, swap files) is not the
    agent's work: in the review, a rewind or a "reject all" would take it back. Found
    both by the watch's news (a directory made during the turn among them) and by a
    scan where there is no watch."""
    if not watched:
        monkeypatch.setattr(TreeWatch, "open", classmethod(lambda cls, skip: None))
    state, cache = tmp_path / ".local" / "state" / "nvim", tmp_path / ".cache" / "nvim"
    (state / "acp").mkdir(parents=True)
    (state / "acp" / "history.json").write_text("[]\n")
    cache.parent.mkdir()
    notes = tmp_path / "notes.txt"
    notes.write_text("old\n")
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        own = {str(state), str(cache)}
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks), skip_paths=own)
        await changes.begin_turn()
        (state / "acp" / "history.json").write_text('["hello"]\n')
        cache.mkdir()  # made during the turn
        (cache / "luac").write_text("cached\n")
        notes.write_text("new\n")  # the agent's, through a shell command
        await changes.end_turn()
        changes.close()
        tasks.cancel_scope.cancel()
    assert hunks(changes) == [("notes.txt", "pending", ["-old", "+new"])]


async def test_a_file_in_neovims_own_directories_a_tool_call_names_keeps_its_old_text(
    tmp_path: Path,
) -> None:
    """The scan skips Neovim's directories, so it cannot prove a file there new: an
    agent's edit of one that a tool call names is reviewed against its old text, and
    a reject puts that back rather than deleting the file."""
    state = tmp_path / ".local" / "state" / "nvim"
    state.mkdir(parents=True)
    path = state / "settings.json"
    path.write_text("{}\n")
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks), skip_paths={str(state)})
        await changes.begin_turn()
        call = ToolCall("t1", status="pending", locations=[Location(str(path))])
        changes.on_tool_call(call)
        path.write_text('{"a": 1}\n')
        call.status = "completed"
        changes.on_tool_call(call)
        await changes.end_turn()
        assert hunks(changes) == [("settings.json", "pending", ["-{}", '+{"a": 1}'])]
        await changes.decide("reject", str(path))
        changes.close()
        tasks.cancel_scope.cancel()
    assert path.read_text() == "{}\n"


def test_baseline_from_diff_handles_whole_files_and_fragments() -> None:
    assert baseline_from_diff("a\nB\n", "a\nb\n", "a\nB\n") == "a\nb\n"
    assert baseline_from_diff("a\nB\n", "a\nb", "a\nB") == "a\nb\n"
    assert baseline_from_diff("a\nB\nc\n", "b", "B") == "a\nb\nc\n"
    assert baseline_from_diff("new\n", None, "new") is None
    assert not isinstance(baseline_from_diff("zzz\n", "b", "B"), str)


def test_scan_skips_vendored_dirs_and_stops_at_the_caps(tmp_path: Path) -> None:
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "x.js").write_text("")
    for i in range(5):
        (tmp_path / f"f{i}").write_text("")
    full = scan_tree(str(tmp_path))
    assert full.complete and len(full.stats) == 5
    capped = scan_tree(str(tmp_path), max_files=3)
    assert not capped.complete and len(capped.stats) == 3
    # Exactly as many files as the cap: all of them seen, so deletions are found too.
    exact = scan_tree(str(tmp_path), max_files=5)
    assert exact.complete and len(exact.stats) == 5
    # Out of time: what it saw so far, not complete.
    late = scan_tree(str(tmp_path), max_seconds=0)
    assert not late.complete and len(late.stats) < 5


def test_the_scan_lets_other_threads_run_after_every_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26.6: the scan held the GIL but for its system calls, too short for the
    worker loop to take it, so the loop answered late while a turn start scanned. It
    now pauses after every piece of entries, and still finds every file."""
    from acp_nvim.client.services import disk_changes as module

    for d in range(3):
        (tmp_path / f"d{d}").mkdir()
        for i in range(5):
            (tmp_path / f"d{d}" / f"f{i}").write_text(str(i))
    pauses: list[None] = []
    monkeypatch.setattr(module, "SCAN_PIECE", 4)
    monkeypatch.setattr(module, "_let_others_run", lambda: pauses.append(None))
    scan = scan_tree(str(tmp_path))
    assert len(pauses) == 4  # 18 entries (3 folders, 15 files): after every 4th
    assert scan.complete and len(scan.stats) == 15
    assert scan.stats[str(tmp_path / "d2" / "f4")] == module.stat_of(str(tmp_path / "d2" / "f4"))


async def test_summary_shape(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, _ = session
    await changes.write(str(tmp_path / "n.txt"), "a\n")
    summary = changes.summary()
    assert summary["turn"] == 1
    [file] = summary["files"]
    assert set(file) == {"path", "kind", "turn", "created", "deleted", "open", "hunks"}
    assert set(file["hunks"][0]) == {
        "id", "status", "base_start", "base_count", "new_start", "new_count",
        "header", "preview", "proposed",
    }  # fmt: skip


def test_gemini_reads_missing_files_as_empty_by_default() -> None:
    agents = Config().all_agents()
    assert agents["gemini"].missing_file_as_empty is True
    assert agents["claude"].missing_file_as_empty is False
    assert (
        load_config({"agents": {"x": {"cmd": ["x"], "missing_file_as_empty": True}}})
        .agents["x"]
        .missing_file_as_empty
    )


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def commit_all(repo: Path) -> None:
    """Make ``repo`` a git work tree with everything in it committed."""
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_in_git_a_file_rewritten_behind_our_back_is_reviewable(tmp_path: Path) -> None:
    clean, dirty = tmp_path / "clean.txt", tmp_path / "dirty.txt"
    clean.write_text("committed\n")
    dirty.write_text("committed\n")
    commit_all(tmp_path)
    dirty.write_text("my own edit\n")  # dirty before the turn: git does not know this text
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        await changes.begin_turn()
        # A shell command rewrites both: no buffer, no tool call names them.
        clean.write_text("by the agent\n")
        dirty.write_text("by the agent\n")
        await changes.end_turn()
        assert sorted(hunks(changes)) == [
            ("clean.txt", "pending", ["-committed", "+by the agent"]),
            ("dirty.txt", "pending", ["-my own edit", "+by the agent"]),
        ]
        await changes.decide("reject", None, None, None)
        changes.close()
        tasks.cancel_scope.cancel()
    assert clean.read_text() == "committed\n"
    assert dirty.read_text() == "my own edit\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_root_outside_git_keeps_its_texts_beside_a_git_work_tree(tmp_path: Path) -> None:
    """The turn start skips its walk for files outside git when every directory is in
    a git work tree; a workspace root outside git still has its texts kept, and a
    file of it rewritten behind our back is reviewable, as one in the work tree."""
    repo, plain = tmp_path / "repo", tmp_path / "plain"
    repo.mkdir()
    plain.mkdir()
    tracked, loose = repo / "tracked.txt", plain / "loose.txt"
    tracked.write_text("committed\n")
    loose.write_text("mine\n")
    commit_all(repo)
    for roots in ([], [str(plain)]):
        editor = RecordingEditor()
        async with anyio.create_task_group() as tasks:
            changes = SessionChanges(editor, 1, str(repo), Tasks(tasks), roots=roots)
            await changes.begin_turn()
            tracked.write_text("by the agent\n")
            loose.write_text("by the agent\n")
            await changes.end_turn()
            found = sorted(hunks(changes))
            changes.close()
            tasks.cancel_scope.cancel()
        tracked.write_text("committed\n")
        loose.write_text("mine\n")
        expected = [("tracked.txt", "pending", ["-committed", "+by the agent"])]
        if roots:
            expected.insert(0, ("loose.txt", "pending", ["-mine", "+by the agent"]))
        assert found == expected


async def test_a_turn_start_reads_the_tree_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan (and git, and the snapshots) run in a worker thread: while it is
    blocked, the event loop goes on; if it ran on the loop, this test could never
    release it."""
    from acp_nvim.client.services import disk_changes as module

    (tmp_path / "a.txt").write_text("before\n")
    started, release = threading.Event(), threading.Event()

    def blocked_scan(root: str, **options: Any) -> Any:
        started.set()
        if not release.wait(30):
            raise TimeoutError("the event loop never ran while the scan was blocked")
        return scan_tree(root, **options)

    monkeypatch.setattr(module, "scan_tree", blocked_scan)
    editor = RecordingEditor()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
            tasks.start_soon(changes.begin_turn)
            await anyio.to_thread.run_sync(started.wait)
            release.set()  # from the event loop, while the turn start is under way
    # The turn began with the scan's view: a file that was not there is the agent's.
    (tmp_path / "b.txt").write_text("new\n")
    await changes.end_turn()
    assert hunks(changes) == [("b.txt", "pending", ["+new"])]


async def test_a_refused_call_before_any_turn_does_not_make_files_new(tmp_path: Path) -> None:
    """Issue 27.3: a tool call the client refused (an MCP read of /etc/passwd denied by
    fs_access) completes before any turn began. Its disk check compared the tree with
    a turn-start scan never taken: every file looked new, and the next edit of one was
    listed as created (rejecting it deleted the user's file)."""
    path = tmp_path / "keep.txt"
    path.write_text("one\ntwo\n")
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        changes.on_tool_call(ToolCall("fs_access1", "Read /etc/passwd", "read", "failed"))
        await changes.check()
        await changes.write(str(path), "one\nTWO\n")
        [file] = changes.summary()["files"]
        assert file["created"] is False
        assert hunks(changes) == [("keep.txt", "pending", ["-two", "+TWO"])]
        await changes.decide("reject", None, None, None)
        # Between turns likewise: a file the user made after a turn is not the agent's.
        await changes.begin_turn()
        await changes.end_turn()
        (tmp_path / "mine.txt").write_text("the user's\n")
        changes.on_tool_call(ToolCall("fs_access2", "Read /etc/passwd", "read", "failed"))
        await changes.check()
        assert [os.path.basename(f["path"]) for f in changes.summary()["files"]] == ["keep.txt"]
        changes.close()
        tasks.cancel_scope.cancel()
    assert path.read_text() == "one\ntwo\n"


# -- every write all or nothing (issue 27.6) ---------------------------------------


def leftovers(directory: Path) -> list[str]:
    """Temporary files a write left behind."""
    return [name for name in os.listdir(directory) if name.endswith(".acp~")]


async def test_a_full_disk_leaves_the_file_and_the_review_as_they_were(tmp_path: Path) -> None:
    """An agent write that hit ENOSPC left the file as the first 4 kB of the new text
    (a new file empty): now the agent is told why, and the user, and nothing changed."""
    with small_disk(tmp_path / "full") as full:
        keep, new = full / "keep.txt", full / "new.txt"
        keep.write_text("the user's text\n")
        fill(full)
        editor = RecordingEditor()
        async with anyio.create_task_group() as tasks:
            changes = SessionChanges(editor, 1, str(full), Tasks(tasks))
            await changes.begin_turn()
            big = "x" * 100 + "\n"
            for path in (keep, new):
                with pytest.raises(FileError, match="No space left on device"):
                    await changes.write(str(path), big * 1000)
            assert keep.read_text() == "the user's text\n" and not new.exists()
            assert changes.summary()["files"] == []
            assert [m for level, m in editor.notices if level == "error"] == [
                f"the agent's write failed: cannot write {path}: No space left on device"
                for path in (keep, new)
            ]
            # A write that fits still goes through.
            await changes.write(str(keep), "short\n")
            changes.close()
            tasks.cancel_scope.cancel()
        assert keep.read_text() == "short\n"
        assert not new.exists() and leftovers(full) == []


async def test_a_reject_the_disk_cannot_take_leaves_file_and_hunk(tmp_path: Path) -> None:
    """A decision whose text does not fit is undone in the review too: the hunk stays
    pending, the file holds the agent's text, and the user is told."""
    with small_disk(tmp_path / "full") as full:
        path = full / "a.txt"
        path.write_text("x" * 40_000 + "\n")
        editor = RecordingEditor()
        async with anyio.create_task_group() as tasks:
            changes = SessionChanges(editor, 1, str(full), Tasks(tasks))
            await changes.begin_turn()
            await changes.write(str(path), "short\n")
            fill(full)  # the disk fills up meanwhile
            await changes.decide("reject", None, None, None)
            assert [h[1] for h in hunks(changes)] == ["pending"]
            assert "No space left on device" in editor.notices[-1][1]
            changes.close()
            tasks.cancel_scope.cancel()
        assert path.read_text() == "short\n" and leftovers(full) == []


async def test_a_failed_sync_keeps_the_old_file(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same without root: the one write function fails where a full disk would."""
    changes, _ = session
    path = tmp_path / "a.txt"
    path.write_text("old\n")

    def no_room(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_room)
    with pytest.raises(FileError, match="No space left on device"):
        await changes.write(str(path), "new\n")
    assert path.read_text() == "old\n" and leftovers(tmp_path) == []


async def test_a_write_keeps_mode_owner_links_and_hard_links(
    session: tuple[SessionChanges, RecordingEditor], tmp_path: Path
) -> None:
    changes, _ = session
    private, target = tmp_path / "private.txt", tmp_path / "target.txt"
    private.write_text("a\n")
    private.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(private, 1234, 4321)
    target.write_text("b\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    linked, twin = tmp_path / "linked.txt", tmp_path / "twin.txt"
    linked.write_text("c\n")
    os.link(linked, twin)
    await changes.write(str(private), "A\n")
    await changes.write(str(link), "B\n")
    await changes.write(str(linked), "C\n")
    st = os.stat(private)
    assert (private.read_text(), st.st_mode & 0o7777) == ("A\n", 0o640)
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 4321)
    assert link.is_symlink() and target.read_text() == "B\n"
    assert twin.read_text() == "C\n"  # a hard link is written in place: both names see it
    assert leftovers(tmp_path) == []


async def test_outside_git_a_file_rewritten_behind_our_back_is_reviewable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27.7: outside git, a file a shell command rewrote (no buffer, no tool call
    naming it) had no baseline and was not in the review. The turn start now keeps the
    tree's texts, newest first within a budget, read again only when changed."""
    from acp_nvim.client.services import disk_changes as module

    old, new, big = tmp_path / "old.txt", tmp_path / "new.txt", tmp_path / "big.txt"
    old.write_text("old one\n")
    os.utime(old, ns=(1, 1))  # the least recently changed: left out of the budget
    new.write_text("new one\n")
    big.write_text("x" * 100 + "\n")
    monkeypatch.setattr(module, "SNAPSHOT_MAX_TOTAL", 10)
    reads: list[str] = []
    read_disk = module.files.read_disk
    monkeypatch.setattr(module.files, "read_disk", lambda p: reads.append(p) or read_disk(p))
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        await changes.begin_turn()
        assert sorted(map(os.path.basename, reads)) == ["new.txt"]  # big.txt does not fit
        for path in (old, new, big):  # a shell command rewrites them all
            path.write_text("by the agent\n")
        await changes.end_turn()
        assert hunks(changes) == [("new.txt", "pending", ["-new one", "+by the agent"])]
        await changes.decide("reject", None, None, None)
        reads.clear()
        await changes.begin_turn()  # new.txt changed (the reject): read again, alone
        assert [os.path.basename(p) for p in reads] == ["new.txt"]
        reads.clear()
        await changes.begin_turn()
        assert reads == []  # nothing changed since: nothing read
        changes.close()
        tasks.cancel_scope.cancel()
    assert new.read_text() == "new one\n"


async def test_a_v2_git_patch_is_the_baseline_of_what_the_agent_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27.9: v2's git_patch was shown but never used as a review baseline. A file
    the agent changed on disk and reported with a patch, with nothing else to tell its
    text before (no snapshot, buffer or git), is reviewed against the patch taken back,
    as kind "patch", and rejected like any change on disk."""
    from acp_nvim.client.services import disk_changes as module

    monkeypatch.setattr(module, "SNAPSHOT_MAX_TOTAL", 0)  # no turn-start texts
    path, created = tmp_path / "config.json", tmp_path / "NEWS.md"
    path.write_text('{\n  "debug": false\n}\n')
    patch = (
        f"diff --git {path} {path}\n--- {path}\n+++ {path}\n"
        '@@ -1,3 +1,3 @@\n {\n-  "debug": false\n+  "debug": true\n }\n'
        f"diff --git {created} {created}\nnew file mode 100644\n--- /dev/null\n+++ {created}\n"
        "@@ -0,0 +1 @@\n+Debug mode is on.\n"
    )
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        await changes.begin_turn()
        path.write_text('{\n  "debug": true\n}\n')  # the agent's own write
        created.write_text("Debug mode is on.\n")
        ops = [FileOp("modify", str(path)), FileOp("add", str(created))]
        part = ChangesPart(ops, patch, "git_patch")
        changes.on_tool_call(ToolCall("edit-1", "Turn on debug", "edit", "completed", [part]))
        await changes.end_turn()
        files = {os.path.basename(f["path"]): f for f in changes.summary()["files"]}
        assert {name: (f["kind"], f["created"]) for name, f in files.items()} == {
            "config.json": ("patch", False),
            "NEWS.md": ("patch", True),
        }
        assert hunks(changes) == [
            ("config.json", "pending", ['-  "debug": false', '+  "debug": true']),
            ("NEWS.md", "pending", ["+Debug mode is on."]),
        ]
        await changes.decide("reject", None, None, None)
        changes.close()
        tasks.cancel_scope.cancel()
    assert path.read_text() == '{\n  "debug": false\n}\n' and not created.exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("from_what", ["diff", "buffer"])
async def test_a_rejected_change_leaves_a_latin1_file_whose_before_nothing_read_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_what: str
) -> None:
    """A dirty tracked latin-1 file over the snapshot limits: its text before the
    agent's change on disk came from the tool call's diff or an unchanged buffer,
    which tell no encoding, and the reject wrote it as UTF-8 ("é" in two bytes)."""
    from acp_nvim.client.services import disk_changes as module

    monkeypatch.setattr(module, "SNAPSHOT_MAX_BYTES", 1)  # every file over the limit
    path = tmp_path / "notes.txt"
    path.write_bytes(b"caf\xe9\ncommitted\n")
    commit_all(tmp_path)
    mine = b"caf\xe9\nmine\n"
    path.write_bytes(mine)  # dirty: git does not know this text
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        await changes.begin_turn()
        if from_what == "buffer":  # loaded, not reloaded yet
            editor.open_buffer(str(path), ["caf\u00e9", "mine"])
        call = ToolCall("t1", status="pending", locations=[Location(str(path))])
        changes.on_tool_call(call)
        path.write_bytes(b"x\ny\n")  # the agent's own write: plain ASCII
        if from_what == "diff":
            call.content = [DiffPart(str(path), "caf\u00e9\nmine\n", "x\ny\n")]
        call.status = "completed"
        changes.on_tool_call(call)
        await changes.end_turn()
        assert hunks(changes) == [("notes.txt", "pending", ["-caf\u00e9", "-mine", "+x", "+y"])]
        editor.buffers.pop(str(path), None)  # closed before the reject
        await changes.decide("reject", str(path))
        changes.close()
        tasks.cancel_scope.cancel()
    assert path.read_bytes() == mine


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_large_clean_tracked_binary_file_the_agent_made_text_is_never_read_whole(
    tmp_path: Path,
) -> None:
    """A 500 MB asset committed in the repository, which the agent's command turned
    into text: looking for its text before, git's index entry was read whole into
    memory (twice over, and decoded), then found to be no text. It is read until its
    first bytes show it has none, as the binary review's reads are bounded."""
    import tracemalloc

    asset = tmp_path / "asset.bin"
    size = 40 * 1024 * 1024  # stands for the 500 MB one
    asset.write_bytes(b"\x00" * size)
    commit_all(tmp_path)
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        await changes.begin_turn()
        asset.write_text("replaced by text\n")  # the agent's own command
        tracemalloc.start()
        try:
            await changes.end_turn()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        [listed] = changes.summary()["files"]
        changes.close()
        tasks.cancel_scope.cancel()
    assert listed["binary"]["restorable"] is False  # over 2 MiB: its bytes not kept
    assert peak < size // 2  # never held whole


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_deleted_text_too_large_for_the_review_is_said_not_reviewed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean tracked text over the 16 MiB a review holds, which the agent deleted:
    nothing kept its text (git's index entry is not read whole, decision 0099), so
    the deletion was in no review, and nothing said so. It is not reviewed still,
    but the user is told, with what git can do."""
    from acp_nvim.client.services import git as git_module

    monkeypatch.setattr(files, "MAX_BYTES", 1024)  # stands for 16 MiB
    monkeypatch.setattr(git_module, "MAX_BYTES", 1024)
    big = tmp_path / "big.log"
    big.write_text("a line of the log\n" * 200)  # 3.5 KiB
    commit_all(tmp_path)
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        try:
            await changes.begin_turn()
            big.unlink()  # the agent's own command
            await changes.end_turn()
            assert changes.summary()["files"] == []
        finally:
            changes.close()
            tasks.cancel_scope.cancel()
    assert editor.notices == [
        (
            "warn",
            "the agent deleted big.log, too large a text for the review to keep: it is not"
            " reviewed, and no reject brings it back (git restore big.log does)",
        )
    ]
