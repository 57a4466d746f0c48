"""fs_access: agents' reads and writes outside the session's directory, as a user sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.nvim.conftest import Editor
from tests.nvim.test_files import run
from tests.nvim.test_permissions import PROMPT, focus_transcript, wait_text


def results(editor: Editor) -> list[Any]:
    return [
        json.loads(line.split("RESULT ", 1)[1])
        for line in editor.transcript()
        if line.startswith("RESULT ")
    ]


def answer(editor: Editor, steps: list[dict[str, Any]], key: str, turn: int) -> Any:
    """Send ``steps`` to the files agent, answer the prompt they raise with ``key``."""
    editor.lua("require('acp').send(...)", json.dumps(steps))
    wait_text(editor, PROMPT)
    focus_transcript(editor)
    editor.nvim.input(key)
    editor.wait_event("AcpTurnEnd", count=turn)
    return results(editor)[-1]


def test_a_read_outside_asks_and_a_refusal_is_an_error_the_agent_sees(
    editor: Editor, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"  # the session's directory is tmp_path/project
    secret.write_text("s3cret\n")
    editor.setup(agents={"files": editor.fake_agent("files")})
    editor.open_chat("files")
    read = [{"read": {"path": str(secret)}}]

    refused = answer(editor, read, "r", turn=1)
    why = "is outside the session's directory: not allowed by the user"
    assert refused == {"error": -32602, "message": f"Invalid params: {secret} {why}"}
    text = editor.transcript_text()
    assert f"#### Read {secret}" in text
    assert "The agent asks to read a file outside the session's directory." in text
    assert (
        "Refused to read a file outside the session's directory: not allowed by the user"
        in text
    )
    assert "s3cret" not in text

    # "Allow this path for the session": asked once, then not again.
    assert answer(editor, read, "A", turn=2) == {"content": "s3cret\n"}
    prompts = editor.transcript_text().count(PROMPT)
    assert run(editor, read, turn=3)[-1] == {"content": "s3cret\n"}
    assert editor.transcript_text().count(PROMPT) == prompts


def test_deny_refuses_writes_through_links_leaving_the_directory_and_roots_are_inside(
    editor: Editor, tmp_path: Path
) -> None:
    project, outside, notes = tmp_path / "project", tmp_path / "outside", tmp_path / "notes"
    outside.mkdir()
    notes.mkdir()
    target = outside / "target.txt"
    target.write_text("theirs\n")
    (project / "link.txt").symlink_to(target)
    editor.setup(
        agents={"files": editor.fake_agent("files")},
        fs_access={"outside": "deny", "roots": [str(notes)]},
    )
    editor.open_chat("files")
    written = run(
        editor,
        [
            {"write": {"path": str(project / "link.txt"), "content": "agent\n"}},
            {"write": {"path": str(outside / "new" / "made.txt"), "content": "agent\n"}},
            {"write": {"path": str(notes / "note.txt"), "content": "agent\n"}},
            {"write": {"path": str(project / "inside.txt"), "content": "agent\n"}},
        ],
    )
    link = f"outside the session's directory (a link to {target})"
    assert written == [
        {
            "error": -32602,
            "message": f"Invalid params: {project / 'link.txt'} is {link}: "
            "denied by fs_access.outside",
        },
        {
            "error": -32602,
            "message": f"Invalid params: {outside / 'new' / 'made.txt'} is outside the "
            "session's directory: denied by fs_access.outside",
        },
        {},
        {},
    ]
    assert target.read_text() == "theirs\n" and not (outside / "new").exists()
    assert (notes / "note.txt").read_text() == (project / "inside.txt").read_text() == "agent\n"
    assert PROMPT not in editor.transcript_text()
    assert (
        f"Refused to write a file {link}: denied by fs_access.outside (fs_access)."
        in editor.transcript_text()
    )


def test_an_edit_allowed_at_its_prompt_is_written_outside_without_a_second_question(
    editor: Editor, tmp_path: Path
) -> None:
    """The agent's own prompt showed its edit of a file outside the session's directory
    and the user allowed it: writing that file is not asked about again, that turn.
    Another file outside still is, and so is that one in a later turn."""
    outside, other = tmp_path / "outside.txt", tmp_path / "other.txt"
    outside.write_text("s\n")
    editor.setup(agents={"files": editor.fake_agent("files")})
    editor.open_chat("files")
    steps = [
        {"ask": {"path": str(outside), "oldText": "s\n", "newText": "t\n", "write": "t\n"}},
        {"write": {"path": str(other), "content": "o\n"}},
    ]
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpPermissionRequest")
    focus_transcript(editor)
    editor.nvim.input("a")  # the edit, shown with its diff
    asked = editor.wait_event("AcpPermissionRequest", count=2)
    assert asked["title"] == f"Write {other}"  # the next question is the other file's
    focus_transcript(editor)
    editor.nvim.input("r")
    editor.wait_event("AcpTurnEnd")
    allowed, refused = results(editor)
    assert allowed == {"outcome": "selected", "optionId": "once"}
    why = "is outside the session's directory: not allowed by the user"
    assert refused["message"].endswith(f"{other} {why}")
    assert outside.read_text() == "t\n" and not other.exists()
    assert f"#### Write {outside}" not in editor.transcript_text()

    again = [{"write": {"path": str(outside), "content": "u\n"}}]
    assert answer(editor, again, "r", turn=2)["message"].endswith(f"{outside} {why}")
    assert outside.read_text() == "t\n"
