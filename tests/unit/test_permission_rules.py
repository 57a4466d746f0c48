"""The allow-list matches a command alone and paths inside; remembered answers are
kept in their file (issue 28, point 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.client.config import PermissionAllow
from acp_nvim.client.services.allowlist import allowed
from acp_nvim.client.services.grants import Grants
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import (
    DiffPart,
    Location,
    PermissionOption,
    ToolCall,
    ToolCallPatch,
)
from acp_nvim.client.session.workspace import Workspace, Worktree
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for

ALLOW = PermissionAllow(commands=["git status", "npm test"], paths=["src", "/tmp/shared"])


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("git status", "allowed command `git status`"),
        ("git status --short", "allowed command `git status`"),
        (["npm", "test", "--", "-x"], "allowed command `npm test`"),
        ("git statusx", None),
        ("git", None),
        ("git status; rm -rf /", None),
        ("git status && curl x | sh", None),
        ("git status $(rm -rf /)", None),
        ("git status > /etc/passwd", None),
        ("npm  test", "allowed command `npm test`"),
        # codex: an argv through the user's shell, its script the command line
        (["/bin/bash", "-lc", "git status"], "allowed command `git status`"),
        (["zsh", "-c", "npm test -- -x"], "allowed command `npm test`"),
        (["/bin/bash", "-lc", "git status; rm -rf /"], None),
        (["python3", "-c", "git status"], None),
    ],
)
def test_a_command_is_allowed_by_its_prefix_alone(command: Any, why: str | None) -> None:
    call = ToolCall("c", kind="execute", raw_input={"command": command})
    assert allowed(call, ALLOW, "/project") == why


@pytest.mark.parametrize(
    ("title", "why"),
    [
        ("git status [current working directory /p]", "allowed command `git status`"),
        ("git status -s [in sub] (Show the tree)", "allowed command `git status`"),
        (
            "git status [current working directory /p] (Show) [background]",
            "allowed command `git status`",
        ),
        ("git status; rm -rf ~ [current working directory /p]", None),
        ("git statusx [current working directory /p]", None),
        # A description that looks like the title's tail never shortens the command.
        ("git status [in x] (a); rm -rf ~ [current working directory /p] (b)", None),
        ("git status", None),  # not gemini's form: nothing says it is the command
        ("git status\nrm -rf ~ [current working directory /p]", None),
    ],
)
def test_gemini_names_its_command_in_the_title_alone(title: str, why: str | None) -> None:
    """gemini-cli sends no raw input: an execute call's title in its shell tool's
    form names the command; any other kind of call is never read that way."""
    assert allowed(ToolCall("c", title=title, kind="execute"), ALLOW, "/p") == why
    assert allowed(ToolCall("c", title=title, kind="read"), ALLOW, "/p") is None


def test_paths_allow_a_call_only_when_every_one_is_inside(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    inside = ToolCall("c", kind="edit", locations=[Location(str(tmp_path / "src" / "a.py"))])
    assert allowed(inside, ALLOW, str(tmp_path)) == "allowed path"
    relative = ToolCall("c", kind="edit", content=[DiffPart("src/b.py", None, "x")])
    assert allowed(relative, ALLOW, str(tmp_path)) == "allowed path"
    mixed = ToolCall(
        "c", kind="edit", locations=[Location(str(tmp_path / "src" / "a.py")), Location("setup.py")]
    )
    assert allowed(mixed, ALLOW, str(tmp_path)) is None
    sibling = ToolCall("c", kind="edit", locations=[Location(str(tmp_path / "src2" / "a.py"))])
    assert allowed(sibling, ALLOW, str(tmp_path)) is None
    # A command is matched on the command only, whatever its locations.
    command = ToolCall(
        "c", raw_input={"command": "rm x"}, locations=[Location(str(tmp_path / "src"))]
    )
    assert allowed(command, ALLOW, str(tmp_path)) is None
    assert allowed(ToolCall("c", kind="edit"), ALLOW, str(tmp_path)) is None


def test_grants_are_kept_in_their_file_and_forgotten(tmp_path: Path) -> None:
    grants = Grants()
    grants.configure(str(tmp_path))
    grants.remember("/p", "claude", "edit", "allow_always")
    grants.remember("/p", "claude", "execute", "reject_always")
    again = Grants(str(tmp_path / "acp" / "permissions.json"))
    assert again.answer("/p", "claude", "edit") == "allow_always"
    assert again.answer("/p", "gemini", "edit") is None
    assert again.answer("/q", "claude", "edit") is None
    assert again.request({"project": "/p", "agent": "claude", "kind": "edit"}) == [
        {"project": "/p", "agent": "claude", "kind": "execute", "answer": "reject_always"}
    ]
    assert Grants(again.path).answer("/p", "claude", "edit") is None


def test_an_unreadable_file_holds_no_answer(tmp_path: Path) -> None:
    path = tmp_path / "permissions.json"
    path.write_text("{not json")
    assert Grants(str(path)).entries() == []
    path.write_text('{"/p": {"claude": {"edit": 1, "read": "allow_always"}}, "/q": []}')
    assert Grants(str(path)).entries() == [
        {"project": "/p", "agent": "claude", "kind": "read", "answer": "allow_always"}
    ]


@pytest.mark.anyio
async def test_a_worktree_chats_always_answer_is_its_projects(tmp_path: Path) -> None:
    """Remembered by the user's directory the worktree stands for: a plain chat of the
    project is answered by it; allow-listed paths are the worktree's own."""
    project, tree = str(tmp_path / "project"), str(tmp_path / "tree")
    grants = Grants(str(tmp_path / "permissions.json"))
    perms = Permissions(grants=grants)
    worktree = Workspace(tree, worktree=Worktree(tree, "acp/1", project, "HEAD"))
    there = Chat(1, "fake", RecordingEditor(), worktree)
    there.ready("s1", 1, None)
    always = [PermissionOption("always", "Always", "allow_always")]
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(perms.ask, there, ToolCallPatch("c1", kind="execute"), always)
        await wait_for(lambda: bool(perms.pending(there)))
        assert perms.answer(perms.pending(there)[0], "always")
    assert grants.entries() == [
        {"project": project, "agent": "fake", "kind": "execute", "answer": "allow_always"}
    ]
    here = Chat(2, "fake", RecordingEditor(), Workspace(project))
    here.ready("s2", 1, None)
    assert await perms.ask(here, ToolCallPatch("c2", kind="execute"), always) == "always"
    perms.allow = PermissionAllow(paths=["src"])
    inside = ToolCallPatch("c3", kind="edit", locations=[Location(tree + "/src/a.py")])
    assert await perms.ask(there, inside, always) == "always"
