"""The allow-list matches a command alone and paths inside; remembered answers are
kept in their file (issue 28, point 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_nvim.client.config import PermissionAllow
from acp_nvim.client.services.allowlist import allowed
from acp_nvim.client.services.grants import Grants
from acp_nvim.client.session.model import DiffPart, Location, ToolCall

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
    ],
)
def test_a_command_is_allowed_by_its_prefix_alone(command: Any, why: str | None) -> None:
    call = ToolCall("c", kind="execute", raw_input={"command": command})
    assert allowed(call, ALLOW, "/project") == why


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
