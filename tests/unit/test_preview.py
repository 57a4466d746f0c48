"""Edits shown before they are allowed, and baselines for a side-by-side diff: what
the Python side hands the editor (no Neovim)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.client.config import FileAccessOptions
from acp_nvim.client.services.access import FileAccess
from acp_nvim.client.services.changes import NOTHING, SessionChanges, proposed_from_diff
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import (
    ChangesPart,
    DiffPart,
    FileOp,
    PermissionOption,
    ToolCall,
    ToolCallPatch,
)
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.client.tasks import Tasks
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for

pytestmark = pytest.mark.anyio

OPTIONS = [("allow", "Allow", "allow_once"), ("reject", "Reject", "reject_once")]


@pytest.fixture
async def chat(tmp_path: Path) -> AsyncIterator[Chat]:
    """A ready chat whose review is a SessionChanges on ``tmp_path``."""
    editor = RecordingEditor()
    chat = Chat(1, "fake", editor)
    chat.ready("s1", 1, None)
    async with anyio.create_task_group() as tasks:
        chat.changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        await chat.changes.begin_turn()
        yield chat
        chat.changes.close()
        tasks.cancel_scope.cancel()


def review(chat: Chat) -> SessionChanges:
    assert isinstance(chat.changes, SessionChanges)
    return chat.changes


def editor_of(chat: Chat) -> RecordingEditor:
    assert isinstance(chat.editor, RecordingEditor)
    return chat.editor


def prompt_of(chat: Chat, call_id: str) -> dict[str, Any]:
    """The permission data of the last op drawing tool call ``call_id`` ({} for none)."""
    ops = [op for op in editor_of(chat).ops.get(chat.id, []) if op.get("id") == call_id]
    permission: dict[str, Any] = ops[-1].get("permission", {}) if ops else {}
    return permission


@pytest.mark.parametrize(
    ("current", "old", "new", "proposed"),
    [
        ("a\nb\n", "a\nb\n", "a\nB\n", "a\nB\n"),  # the whole file (codex, gemini)
        ("a\nb\n", "a\nb", "a\nB", "a\nB\n"),  # without its final newline (Claude)
        ("x\na\nb\ny\n", "a\nb", "A", "x\nA\ny\n"),  # a fragment found once (opencode)
        (None, None, "n\n", "n\n"),  # a new file
        (None, "", "n\n", "n\n"),  # opencode's new file
        ("a\na\n", "a", "b", NOTHING),  # a fragment found twice: no guess
        ("z\n", "a\n", "b\n", NOTHING),  # the file moved on
        ("there\n", None, "n\n", NOTHING),  # a "new" file that exists
    ],
)
def test_proposed_from_diff(
    current: str | None, old: str | None, new: str, proposed: object
) -> None:
    assert proposed_from_diff(current, old, new) == proposed


async def test_a_diff_is_previewed_against_the_buffer_with_its_unsaved_lines(
    chat: Chat, tmp_path: Path
) -> None:
    path = tmp_path / "a.py"
    path.write_text("one\ntwo\nthree\n")
    editor_of(chat).open_buffer(str(path), ["typed", "one", "two", "three"], modified=True)
    call = ToolCall("c1", content=[DiffPart(str(path), "two\n", "2\n2b\n")])
    [file] = await review(chat).preview(call)
    # Rows are the buffer's (its unsaved first line included), lines without terminators.
    assert (file.path, file.created, file.deleted) == (str(path), False, False)
    assert [(h.row, h.count, h.lines) for h in file.hunks] == [(2, 1, ["2", "2b"])]


async def test_a_git_patch_is_previewed_per_file(chat: Chat, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\nsame\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    patch = (
        f"diff --git {tmp_path}/a.txt {tmp_path}/a.txt\n--- {tmp_path}/a.txt\n"
        f"+++ {tmp_path}/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
        f"diff --git {tmp_path}/new.txt {tmp_path}/new.txt\nnew file mode 100644\n"
        f"--- /dev/null\n+++ {tmp_path}/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+there\n"
        f"diff --git {tmp_path}/gone.txt {tmp_path}/gone.txt\ndeleted file mode 100644\n"
        f"--- {tmp_path}/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
        # Does not fit the file: left out, not guessed.
        f"diff --git {tmp_path}/a.txt {tmp_path}/a.txt\n--- {tmp_path}/a.txt\n"
        f"+++ {tmp_path}/a.txt\n@@ -1 +1 @@\n-nope\n+x\n"
    )
    ops = [FileOp("modify", "a.txt"), FileOp("add", "new.txt"), FileOp("delete", "gone.txt")]
    call = ToolCall("c1", content=[ChangesPart(ops, patch, "git_patch")])
    previews = await review(chat).preview(call)
    assert [
        (Path(f.path).name, f.created, f.deleted, [(h.row, h.count, h.lines) for h in f.hunks])
        for f in previews
    ] == [
        ("a.txt", False, False, [(0, 1, ["new"])]),
        ("new.txt", True, False, [(0, 0, ["hello", "there"])]),
        ("gone.txt", False, True, [(0, 1, [])]),
    ]


async def test_the_prompt_carries_the_preview_until_it_is_answered(
    chat: Chat, tmp_path: Path
) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    perms = Permissions()
    patch = ToolCallPatch("c1", kind="edit", content=[DiffPart(str(path), "x = 1\n", "x = 2\n")])
    options = [PermissionOption(*o) for o in OPTIONS]
    result: dict[str, str | None] = {}

    async def ask() -> None:
        result["choice"] = await perms.ask(chat, patch, options)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask)
        await wait_for(lambda: "pending" in prompt_of(chat, "c1"))
        prompt = prompt_of(chat, "c1")
        assert prompt["pending"] is True
        assert prompt["preview"] == [
            {
                "path": str(path),
                "created": False,
                "deleted": False,
                "hunks": [{"row": 0, "count": 1, "lines": ["x = 2"]}],
            }
        ]
        perms.answer(prompt["id"], "reject")
    assert result["choice"] == "reject"
    assert "preview" not in prompt_of(chat, "c1")  # answering removes it
    assert path.read_text() == "x = 1\n"  # nothing was written


async def test_a_prompt_names_the_binary_files_a_v2_change_makes_changes_or_deletes(
    chat: Chat, tmp_path: Path
) -> None:
    """No file can show a change of bytes: the prompt names each such file with what
    the review would say of it, so nothing is allowed unseen; the files with text
    are still previewed in the files (``preview``)."""
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00" + bytes(11))
    (tmp_path / "old.bin").write_bytes(b"\x00old")
    (tmp_path / "a.txt").write_text("old\n")
    patch = (
        "diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n"
        "diff --git a/old.bin b/old.bin\ndeleted file mode 100644\n"
        "Binary files a/old.bin and /dev/null differ\n"
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
    )
    ops = [FileOp("modify", "logo.png"), FileOp("delete", "old.bin"),
           FileOp("add", "new.bin", file_type="binary"), FileOp("modify", "a.txt")]  # fmt: skip
    perms = Permissions()
    call = ToolCallPatch("c1", kind="edit", content=[ChangesPart(ops, patch, "git_patch")])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, chat, call, [PermissionOption(*o) for o in OPTIONS])
        await wait_for(lambda: "pending" in prompt_of(chat, "c1"))
        [op] = [op for op in editor_of(chat).ops[chat.id] if op.get("permission")][-1:]
        said = [line.replace(f"{tmp_path}/", "") for line in op["lines"]]  # the chat's cwd: not here
        asked = said.index("**Permission needed:** press a key, or `<CR>` for a menu")
        assert said[asked - 3 : asked] == [
            "Changes the whole of `logo.png` (binary, 16 bytes): not previewed",
            "Deletes `old.bin` (binary, 4 bytes)",
            "Makes `new.bin` (binary): not previewed",
        ]
        assert [Path(f["path"]).name for f in op["permission"]["preview"]] == ["a.txt"]
        perms.cancel(chat)


async def test_no_preview_is_read_when_diff_preview_is_off(chat: Chat, tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    perms = Permissions()
    perms.preview = False
    patch = ToolCallPatch("c1", kind="edit", content=[DiffPart(str(path), "x = 1\n", "x = 2\n")])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, chat, patch, [PermissionOption(*o) for o in OPTIONS])
        await wait_for(lambda: "pending" in prompt_of(chat, "c1"))
        assert "preview" not in prompt_of(chat, "c1")
        perms.cancel(chat)


async def test_a_binary_file_is_named_by_the_prompt_with_diff_preview_off(
    chat: Chat, tmp_path: Path
) -> None:
    """``diff_preview = false`` turns the files' previews off, not the prompt's line
    naming a file with no text: without it the user is asked to allow a change of a
    file nothing tells them of."""
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00" + bytes(11))
    (tmp_path / "a.txt").write_text("old\n")
    patch = (
        "diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n"
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
    )
    ops = [FileOp("modify", "logo.png"), FileOp("modify", "a.txt")]
    perms = Permissions()
    perms.preview = False
    call = ToolCallPatch("c1", kind="edit", content=[ChangesPart(ops, patch, "git_patch")])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, chat, call, [PermissionOption(*o) for o in OPTIONS])
        await wait_for(lambda: "pending" in prompt_of(chat, "c1"))
        [op] = [op for op in editor_of(chat).ops[chat.id] if op.get("permission")][-1:]
        said = [line.replace(f"{tmp_path}/", "") for line in op["lines"]]
        asked = said.index("**Permission needed:** press a key, or `<CR>` for a menu")
        assert said[asked - 1] == "Changes the whole of `logo.png` (binary, 16 bytes): not previewed"
        assert "preview" not in op["permission"]  # a.txt: not previewed
        perms.cancel(chat)


async def test_a_write_outside_the_directory_is_previewed_at_its_access_prompt(
    chat: Chat, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("a\nb\n")
    changes = review(chat)
    project = tmp_path / "project"
    project.mkdir()
    perms = Permissions()
    chat.workspace = Workspace(str(project))
    changes.access = FileAccess(chat, perms, FileAccessOptions())
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(changes.write, str(outside), "a\nB\n")
            await wait_for(lambda: "pending" in prompt_of(chat, "fs_access1"))
            prompt = prompt_of(chat, "fs_access1")
            [file] = prompt["preview"]
            assert (file["path"], file["hunks"]) == (
                str(outside),
                [{"row": 1, "count": 1, "lines": ["B"]}],
            )
            assert outside.read_text() == "a\nb\n"  # not before it is allowed
            perms.answer(prompt["id"], "allow")
        assert outside.read_text() == "a\nB\n"
    finally:
        outside.unlink()


async def test_baseline_of_a_turn_goes_to_the_editor(chat: Chat, tmp_path: Path) -> None:
    changes, editor = review(chat), editor_of(chat)
    path = tmp_path / "a.txt"
    path.write_text("1\n2\n")
    await changes.begin_turn()  # a.txt was there when the turn began
    await changes.write(str(path), "1\ntwo\n")
    changes.baseline(str(path))
    assert editor.baselines == [(1, {"path": str(path), "turn": 2, "lines": ["1", "2"]})]
    [hunk] = changes.summary()["files"][0]["hunks"]
    await changes.decide("accept", str(path), hunk["id"])
    changes.baseline(str(path), 2)  # what rejecting the open hunks would leave
    assert editor.baselines[-1][1]["lines"] == ["1", "two"]
    changes.baseline(str(tmp_path / "other.txt"))
    assert editor.notices[-1][0] == "warn" and "no agent changes" in editor.notices[-1][1]
