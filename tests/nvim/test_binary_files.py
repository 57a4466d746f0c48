"""Files with no text the agent makes, changes or deletes on disk: listed in the turn's
summary and the review as a whole-file change, and rejected as a whole (decision 0099)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.nvim.conftest import Editor
from tests.nvim.test_files import lines, run, start


def start_v2(editor: Editor, scenario: str) -> None:
    """A chat over ACP v2 with the ``scenario`` fake agent."""
    agent = {**editor.fake_agent(scenario), "env": {"FAKE_CALLS": str(editor.tmp / "calls.jsonl")}}
    editor.setup(agents={"fake": agent}, default_agent="fake", protocol_version=2)
    editor.open_chat()


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def shell_bytes(path: Path, data: bytes) -> dict[str, Any]:
    """The agent writes ``data`` with a command of its own: no tool call names it."""
    return {"bytes": {"path": str(path), "hex": data.hex()}}


def binaries(editor: Editor) -> dict[str, dict[str, Any]]:
    """The review's files with no text, by name: what it says of each, its hunks."""
    changes = editor.lua("return require('acp').changes()")
    return {
        Path(f["path"]).name: {"binary": f["binary"], "hunks": f["hunks"]}
        for f in changes
        if "binary" in f
    }


def status_of(name: str) -> str:
    """A Lua expression: the review's status of the file with no text ``name``."""
    find = f"function(f) return vim.fs.basename(f.path) == '{name}' end"
    return f"vim.iter(require('acp').changes()):find({find}).binary.status"


def review_lines(editor: Editor) -> list[str]:
    editor.nvim.command("AcpReview")
    return lines(editor, editor.lua("return vim.api.nvim_get_current_buf()"))


def test_binary_files_made_changed_and_deleted_are_listed_whole_and_rejected_back(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    logo, old, new = project / "logo.png", project / "old.bin", project / "new.bin"
    logo.write_bytes(PNG)
    old.write_bytes(b"\x00old")
    start(editor)
    run(
        editor,
        [shell_bytes(logo, PNG + b"\x00more"), {"rm": {"path": str(old)}},
         shell_bytes(new, b"\x00" * 2048)],
    )  # fmt: skip
    found = binaries(editor)
    assert {name: (f["binary"]["about"], f["hunks"]) for name, f in found.items()} == {
        "logo.png": ("binary, 21 bytes", []),
        "old.bin": ("binary, 4 bytes", []),
        "new.bin": ("binary, 2.0 KB", []),
    }
    [summary] = [line for line in editor.transcript() if "files changed" in line]
    head, names = summary.split(":** ")
    assert head == "**3 files changed"  # in the order the disk watch saw them
    assert sorted(names.strip("`").split("`, `")) == [
        "logo.png (binary, 21 bytes)", "new.bin (binary, 2.0 KB)", "old.bin (binary, 4 bytes)"
    ]  # fmt: skip
    text = review_lines(editor)
    assert text[0].startswith("acp review · 3 open hunks")
    for flag, name, about in [("M", "logo.png", "21 bytes"), ("D", "old.bin", "4 bytes"),
                              ("A", "new.bin", "2.0 KB")]:  # fmt: skip
        row = text.index(f"{flag} {name}  [disk]")
        assert text[row + 1] == f"  binary, {about}, whole file pending"

    # The whole file, from its line in the review: the change taken back on disk.
    editor.nvim.command("call search('^  binary, 21 bytes')")
    editor.nvim.input("r")
    editor.wait(f"{status_of('logo.png')} == 'rejected'", what="logo rejected")
    assert logo.read_bytes() == PNG
    editor.lua("require('acp').reject()")
    editor.wait(
        "vim.iter(require('acp').changes()):all(function(f) return not f.open end)",
        what="all rejected",
    )
    assert old.read_bytes() == b"\x00old" and not new.exists()
    assert review_lines(editor)[0].startswith("acp review · 0 open hunks")


def test_an_accepted_binary_file_stays_and_leaves_the_review(
    editor: Editor, tmp_path: Path
) -> None:
    logo = tmp_path / "project" / "logo.png"
    logo.write_bytes(PNG)
    start(editor)
    run(editor, [shell_bytes(logo, PNG + b"\x01")])
    editor.lua("require('acp').accept()")
    editor.wait(f"{status_of('logo.png')} == 'accepted'", what="accepted")
    assert logo.read_bytes() == PNG + b"\x01"
    assert review_lines(editor)[0].startswith("acp review · 0 open hunks")


def test_a_binary_file_over_the_budget_says_it_cannot_be_restored(
    editor: Editor, tmp_path: Path
) -> None:
    big = tmp_path / "project" / "big.bin"
    data = b"\x00" * (2 * 1024 * 1024 + 1)  # past the 2 MB a file's bytes are kept to
    big.write_bytes(data)
    start(editor)
    run(editor, [shell_bytes(big, b"\x00small")])
    [(name, found)] = binaries(editor).items()
    assert found["binary"]["restorable"] is False
    text = review_lines(editor)
    assert (
        "  binary, 6 bytes, whole file pending · its bytes before were not kept: "
        "a reject cannot restore it"
    ) in text
    editor.lua("require('acp').reject()")
    editor.wait(
        "vim.iter(_G.acp_notices or {}):any(function(n) return n.msg:find('cannot be restored') end)",
        what="told",
    )
    assert big.read_bytes() == b"\x00small"
    assert binaries(editor)[name]["binary"]["status"] == "pending"


def test_a_v2_patch_naming_a_binary_file_puts_it_in_the_review_and_a_reject_back(
    editor: Editor, tmp_path: Path
) -> None:
    logo = tmp_path / "project" / "logo.png"
    logo.write_bytes(PNG)
    start_v2(editor, "rewind")
    changed = PNG + bytes([2])
    editor.lua("require('acp').send(...)", f"bytes logo.png {changed.hex()}")
    editor.wait_event("AcpTurnEnd")
    assert binaries(editor)["logo.png"]["binary"]["about"] == "binary, 17 bytes"
    assert "M logo.png  [patch]" in review_lines(editor)
    editor.nvim.command("wincmd p")
    editor.lua("require('acp').reject()")
    editor.wait(f"{status_of('logo.png')} == 'rejected'", what="rejected")
    assert logo.read_bytes() == PNG


def test_clean_tracked_binary_files_come_back_from_git(editor: Editor, tmp_path: Path) -> None:
    """In a git work tree the turn start keeps no clean file: git's index holds the
    bytes of one changed, and of one deleted."""
    project = tmp_path / "project"
    logo = project / "logo.png"
    logo.write_bytes(PNG)
    gone = project / "gone.bin"
    gone.write_bytes(b"\x00gone")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                 "commit", "-qm", "x"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=project, check=True)
    start(editor)
    run(editor, [shell_bytes(logo, b"\x00overwritten"), {"rm": {"path": str(gone)}}])
    found = binaries(editor)
    assert [found[name]["binary"]["restorable"] for name in ("logo.png", "gone.bin")] == [True, True]
    editor.lua("require('acp').reject()")
    editor.wait(f"{status_of('logo.png')} == 'rejected'", what="rejected")
    editor.wait(f"{status_of('gone.bin')} == 'rejected'", what="rejected")
    assert logo.read_bytes() == PNG and gone.read_bytes() == b"\x00gone"
