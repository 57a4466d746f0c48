"""Files with no text the agent makes, changes or deletes on disk: listed in the turn's
summary and the review as a whole-file change, and rejected as a whole (decision 0099)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.disk import read_only, small_disk
from tests.nvim.conftest import Editor
from tests.nvim.test_files import lines, run, start
from tests.nvim.test_permissions import wait_text
from tests.nvim.test_rewind import session_changed, turn
from tests.nvim.test_rewind import start as rewind_start


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


def test_a_clean_tracked_binary_file_over_2_mib_is_known_by_its_digest(
    editor: Editor, tmp_path: Path
) -> None:
    """Git's index gave a clean tracked file's bytes whole, however large, and the
    review held them: a 2 GB asset the agent changed was held in memory. Over the
    2 MiB a file's bytes are kept to, as elsewhere, only their digest is: the change
    says a reject cannot restore it, and a file written again with the same bytes
    is still no change."""
    project = tmp_path / "project"
    data = b"\x00" * (2 * 1024 * 1024 + 1)  # past the 2 MiB a file's bytes are kept to
    big, same = project / "big.bin", project / "same.bin"
    big.write_bytes(data)
    same.write_bytes(data + b"same")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                 "commit", "-qm", "x"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=project, check=True)
    start(editor)
    run(editor, [shell_bytes(big, b"\x00small"), {"rewrite": {"path": str(same)}}])
    found = binaries(editor)
    assert list(found) == ["big.bin"]
    assert found["big.bin"]["binary"]["restorable"] is False
    editor.lua("require('acp').reject()")
    editor.wait(
        "vim.iter(_G.acp_notices or {}):any(function(n) return n.msg:find('cannot be restored') end)",
        what="told",
    )
    assert big.read_bytes() == b"\x00small"


def test_restore_takes_binary_files_back_and_says_which_it_could_not(
    editor: Editor, tmp_path: Path
) -> None:
    """:AcpRestore past a turn that changed only files with no text puts each back
    as a reject would (an accepted one too), and names the one whose bytes before
    were not kept instead of saying it went back."""
    project = tmp_path / "project"
    logo, old, new, big = (project / name for name in ("logo.png", "old.bin", "new.bin", "big.bin"))
    logo.write_bytes(PNG)
    old.write_bytes(b"\x00old")
    big.write_bytes(b"\x00" * (2 * 1024 * 1024 + 1))  # past the 2 MB a file's bytes are kept to
    start(editor)
    run(
        editor,
        [shell_bytes(logo, PNG + b"\x01"), {"rm": {"path": str(old)}},
         shell_bytes(new, b"\x00new"), shell_bytes(big, b"\x00small")],
    )  # fmt: skip
    editor.lua("require('acp').accept(...)", str(logo))
    editor.wait(f"{status_of('logo.png')} == 'accepted'", what="accepted")
    # The turn changed files: :AcpRestore and :AcpTurnDiff offer it.
    assert editor.lua("return require('acp.review').turns_to_restore()") == ["1"]
    assert editor.lua("return require('acp.review').turns_changed()") == ["1"]

    editor.nvim.command("AcpRestore 1")
    wait_text(
        editor,
        "Restored the files to before turn 1: `logo.png`, `new.bin`, `old.bin`; "
        "not `big.bin` (see the warnings).",
    )
    assert logo.read_bytes() == PNG and old.read_bytes() == b"\x00old" and not new.exists()
    assert big.read_bytes() == b"\x00small"
    assert any("big.bin: its bytes from before turn 1 were not kept" in n["msg"]
               for n in editor.lua("return _G.acp_notices"))  # fmt: skip
    assert {name: found["binary"]["status"] for name, found in binaries(editor).items()} == {
        "logo.png": "rejected", "old.bin": "rejected", "new.bin": "rejected", "big.bin": "pending"
    }  # fmt: skip


@pytest.mark.parametrize("version", [1, 2])
def test_rewind_takes_binary_files_back_over_both_turns(editor: Editor, version: int) -> None:
    """:AcpRewind to before the first of two turns that wrote files with no text:
    the one they changed holds its first bytes again, the one they made is gone."""
    project = editor.tmp / "project"
    logo, new = project / "logo.png", project / "new.bin"
    logo.write_bytes(PNG)
    rewind_start(editor, "rewind", version)
    writes = [("logo.png", PNG + b"\x01"), ("new.bin", b"\x00new"), ("logo.png", PNG + b"\x02")]
    for number, (name, data) in enumerate(writes, 1):
        turn(editor, f"bytes {name} {data.hex()}", number)
    editor.lua("require('acp').rewind(1)")
    session_changed(editor, 2)
    wait_text(editor, "Rewound to before turn 1, the conversation and the files (`logo.png`, `new.bin`).")
    assert logo.read_bytes() == PNG and not new.exists()


def test_a_reject_leaves_a_binary_file_written_since_the_agents_change(
    editor: Editor, tmp_path: Path
) -> None:
    """The user (or another tool) wrote the file after the agent: a reject (and a
    restore) would lose that, so it is refused, said, and the change stays open."""
    logo = tmp_path / "project" / "logo.png"
    logo.write_bytes(PNG)
    start(editor)
    run(editor, [shell_bytes(logo, PNG + b"\x01")])
    logo.write_bytes(PNG + b"\x00mine")
    editor.lua("require('acp').reject()")
    editor.wait(
        "vim.iter(_G.acp_notices or {}):any(function(n)"
        " return n.msg:find(\"changed since turn 1's change (by you or another tool)\", 1, true) end)",
        what="told",
    )
    assert logo.read_bytes() == PNG + b"\x00mine"
    assert binaries(editor)["logo.png"]["binary"]["status"] == "pending"
    editor.lua("require('acp').restore(1)")
    wait_text(editor, "Restored the files to before turn 1: no file needed it; not `logo.png`")
    assert logo.read_bytes() == PNG + b"\x00mine"


def test_rejecting_everything_takes_a_file_two_turns_wrote_back_to_its_first_bytes(
    editor: Editor, tmp_path: Path
) -> None:
    """The later turn's change goes first, then the earlier one's: the file holds
    what it did before both (the earlier one was refused once the later was
    rejected, leaving the first turn's bytes)."""
    logo = tmp_path / "project" / "logo.png"
    logo.write_bytes(PNG)
    start(editor)
    run(editor, [shell_bytes(logo, PNG + b"\x01")])
    run(editor, [shell_bytes(logo, PNG + b"\x02")], turn=2)
    editor.lua("require('acp').reject()")
    editor.wait(
        "vim.iter(require('acp').changes()):all(function(f) return f.binary.status == 'rejected' end)",
        what="both rejected",
    )
    assert logo.read_bytes() == PNG
    assert not any("logo.png" in n["msg"] for n in editor.lua("return _G.acp_notices or {}"))


def test_accepting_a_rejected_binary_file_is_refused_as_a_rejected_hunks_is(
    editor: Editor, tmp_path: Path
) -> None:
    """The reject wrote the bytes from before back: an accept now would mark the
    agent's change accepted while the file holds none of it. A text hunk already
    rejected refuses an accept; so does a file with no text, and says so."""
    logo = tmp_path / "project" / "logo.png"
    logo.write_bytes(PNG)
    start(editor)
    run(editor, [shell_bytes(logo, PNG + b"\x01")])
    editor.nvim.command("AcpReview")
    editor.nvim.command("call search('^  binary, 17 bytes')")
    editor.nvim.input("r")
    editor.wait(f"{status_of('logo.png')} == 'rejected'", what="rejected")
    editor.nvim.input("a")
    told = "logo.png: its change in turn 1 is already rejected"
    editor.wait(
        f"{status_of('logo.png')} ~= 'rejected' or vim.iter(_G.acp_notices or {{}}):any("
        f"function(n) return n.msg:find({told!r}, 1, true) end)",
        what="accept answered",
    )
    assert binaries(editor)["logo.png"]["binary"]["status"] == "rejected"
    assert logo.read_bytes() == PNG


def test_a_text_file_the_turn_edited_then_made_binary_is_one_whole_change_rejected_exactly(
    editor: Editor, tmp_path: Path
) -> None:
    """The agent edits a text file (a hunk in the review), then writes bytes over it
    in the same turn: the review shows one change, the whole file as binary (no stale
    hunk of a text that is gone), and a reject puts back the bytes from before the
    turn, line ends and all."""
    notes = tmp_path / "project" / "notes.txt"
    notes.write_bytes(b"one\r\ntwo\r\n")
    start(editor)
    run(editor, [{"write": {"path": str(notes), "content": "one\r\n2\r\n"}},
                 shell_bytes(notes, b"\x00packed")])  # fmt: skip
    assert [(Path(f["path"]).name, f["hunks"], f.get("binary", {}).get("about"))
            for f in editor.lua("return require('acp').changes()")] == [
        ("notes.txt", [], "binary, 7 bytes")
    ]  # fmt: skip
    editor.lua("require('acp').reject()")
    editor.wait(f"{status_of('notes.txt')} == 'rejected'", what="rejected")
    assert notes.read_bytes() == b"one\r\ntwo\r\n"


def test_a_binary_file_the_agent_writes_text_over_is_reviewed_whole_and_rejected_back(
    editor: Editor, tmp_path: Path
) -> None:
    """A file with no text before the turn and text after it: no text from before to
    diff against, so it is one change of the whole file, whose reject puts its bytes
    back (it was left out of the review altogether)."""
    data = tmp_path / "project" / "data.bin"
    data.write_bytes(b"\x00old")
    start(editor)
    run(editor, [{"shell": {"path": str(data), "content": "text now\n"}}])
    assert binaries(editor)["data.bin"]["binary"]["about"] == "binary, 9 bytes"
    assert "  binary, 9 bytes, whole file pending" in review_lines(editor)
    editor.lua("require('acp').reject()")
    editor.wait(f"{status_of('data.bin')} == 'rejected'", what="rejected")
    assert data.read_bytes() == b"\x00old"


def test_a_worktree_chats_binary_files_land_in_yours_when_accepted_unless_you_changed_them(
    editor: Editor,
) -> None:
    """A worktree chat's accepted change of a file with no text brings its bytes into
    your file, as an accepted hunk brings its lines (a file it made too). One you
    changed since cannot be merged: the accept is refused and said, the change
    waits in the worktree, your file left as it is."""
    from tests.nvim.test_workspaces import git, repository, send

    project = repository(editor)
    (project / "logo.png").write_bytes(PNG)
    (project / "mine.bin").write_bytes(b"\x00mine")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "binaries")
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [chat] = editor.lua("return require('acp').chats()")
    writes = [("logo.png", PNG + b"\x01"), ("new.bin", b"\x00new"), ("mine.bin", b"\x00agent")]
    for name, data in writes:
        send(editor, chat["id"], f"bytes {name} {data.hex()}")
    (project / "mine.bin").write_bytes(b"\x00yours")
    editor.lua("require('acp').accept()")
    told = "not brought in: mine.bin has no text"
    editor.wait(
        f"vim.iter(_G.acp_notices or {{}}):any(function(n) return n.msg:find({told!r}, 1, true) end)",
        what="told",
    )
    every = "require('acp').changes({all = true})"
    editor.wait(
        f"vim.iter({every}):filter(function(f) return f.binary.status == 'accepted' end):totable()"
        "[2] ~= nil",
        what="two accepted",
    )
    assert (project / "logo.png").read_bytes() == PNG + b"\x01"
    assert (project / "new.bin").read_bytes() == b"\x00new"
    assert (project / "mine.bin").read_bytes() == b"\x00yours"
    assert {Path(f["path"]).name: f["binary"]["status"] for f in editor.lua(f"return {every}")} == {
        "logo.png": "accepted", "new.bin": "accepted", "mine.bin": "pending"
    }  # fmt: skip


def test_a_hunk_accepted_before_the_file_turned_binary_stays_after_its_reject(
    editor: Editor, tmp_path: Path
) -> None:
    """The agent edits a text file, you accept that hunk while the turn goes on, then
    the agent writes bytes over the file: rejecting the whole change puts back the
    text as you left it (your accepted line in), as rejecting the text's open hunks
    would have, not the text from before the turn."""
    notes = tmp_path / "project" / "notes.txt"
    notes.write_bytes(b"one\ntwo\n")
    start(editor)
    steps = [{"write": {"path": str(notes), "content": "one\n2\n"}},
             {"ask": {"path": str(notes.with_name("other.txt")), "oldText": "", "newText": ""}},
             shell_bytes(notes, b"\x00packed")]  # fmt: skip
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpPermissionRequest")  # the turn waits here
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'", what="accepted")
    editor.lua("vim.ui.select = function(items, opts, on_choice) on_choice(items[1], 1) end")
    editor.nvim.command("AcpPermission")
    editor.wait_event("AcpTurnEnd")
    assert binaries(editor)["notes.txt"]["binary"]["about"] == "binary, 7 bytes"
    editor.lua("require('acp').reject()")
    editor.wait(f"{status_of('notes.txt')} == 'rejected'", what="rejected")
    assert notes.read_bytes() == b"one\n2\n"


@pytest.mark.parametrize("decision", ["accept", "reject"])
def test_an_earlier_turns_text_hunk_of_a_file_a_later_turn_made_binary(
    editor: Editor, tmp_path: Path, decision: str
) -> None:
    """Turn 1 edits a text file, turn 2 writes bytes over it. Turn 1's hunk is text
    the file no longer holds: rejecting it alone would write that text over turn 2's
    bytes unseen, so it is refused until turn 2's change is rejected (as for two
    turns' bytes); accepting it writes nothing, the bytes stay. Rejecting turn 2's
    then turn 1's takes the file back to its first text."""
    notes = tmp_path / "project" / "notes.txt"
    notes.write_bytes(b"one\ntwo\n")
    start(editor)
    run(editor, [{"write": {"path": str(notes), "content": "one\n2\n"}}])
    run(editor, [shell_bytes(notes, b"\x00packed")], turn=2)
    state = "require('acp.review.state')"
    every = "require('acp').changes({all = true})"
    earlier = f"vim.iter({every}):find(function(f) return f.turn == 1 end)"
    editor.lua(f"local d, p = ...; {state}.decide({state}.chat_id(), d, p, 1, 1)", decision, str(notes))
    if decision == "reject":
        told = "turn 2 changed it again"
        editor.wait(
            f"vim.iter(_G.acp_notices or {{}}):any(function(n) return n.msg:find({told!r}, 1, true) end)",
            what="refused",
        )
        assert editor.lua(f"return {earlier}.hunks[1].status") == "pending"
    else:
        editor.wait(f"{earlier}.hunks[1].status == 'accepted'", what="accepted")
    assert notes.read_bytes() == b"\x00packed"
    editor.lua("require('acp').reject()")  # newest first: the bytes, then the text
    editor.wait(f"{status_of('notes.txt')} == 'rejected'", what="rejected")
    editor.wait(f"not vim.iter({every}):any(function(f) return f.open end)", what="all decided")
    assert notes.read_bytes() == (b"one\ntwo\n" if decision == "reject" else b"one\n2\n")


def test_a_reopened_worktree_chat_puts_a_binary_change_back_in_its_review(
    editor: Editor,
) -> None:
    """A worktree chat kept and reopened reviews again what waited in its worktree:
    a file with no text as a text file, whole, and its accept brings the bytes in."""
    from tests.nvim.test_workspaces import STUB_SELECT, close_chat, git, repository, review, send

    project = repository(editor)
    (project / "logo.png").write_bytes(PNG)
    git(project, "add", "logo.png")
    git(project, "commit", "-q", "-m", "logo")
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    for name, data in [("logo.png", PNG + b"\x01"), ("new.bin", b"\x00new")]:
        send(editor, listed["id"], f"bytes {name} {data.hex()}")
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, listed["id"])

    chat = editor.reopen_last()
    assert editor.lua("return require('acp').chats()[1].waiting") == 2
    waited = {Path(f["path"]).name: f["binary"] for f in review(editor, chat)}
    assert {name: (b["status"], b["about"]) for name, b in waited.items()} == {
        "logo.png": ("pending", "binary, 17 bytes"), "new.bin": ("pending", "binary, 4 bytes")
    }  # fmt: skip
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').chats()[1].waiting == 0", what="brought in")
    assert (project / "logo.png").read_bytes() == PNG + b"\x01"
    assert (project / "new.bin").read_bytes() == b"\x00new"


def test_undo_in_its_buffer_brings_a_rejected_binary_change_back_and_redo_rejects_it(
    editor: Editor, tmp_path: Path
) -> None:
    """As |u| after a text hunk's reject puts the agent's lines back and offers the
    hunk again: in the buffer of a file with no text, an undo of the reject's reload
    puts the agent's bytes back on disk, exactly, and the change waits again; a redo
    puts the bytes from before back and rejects it again. The buffer stays saved."""
    logo = tmp_path / "project" / "logo.png"
    logo.write_bytes(PNG)
    buf = start(editor, logo)
    agents = PNG + b"\x00more"
    run(editor, [shell_bytes(logo, agents)])
    editor.lua("require('acp').reject()")
    editor.wait(f"{status_of('logo.png')} == 'rejected'", what="rejected")
    assert logo.read_bytes() == PNG
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)
    editor.as_typed("undo")
    editor.wait(f"{status_of('logo.png')} == 'pending'", what="pending again")
    assert logo.read_bytes() == agents
    assert editor.lua("return vim.bo[...].modified", buf) is False
    editor.as_typed("redo")
    editor.wait(f"{status_of('logo.png')} == 'rejected'", what="rejected again")
    assert logo.read_bytes() == PNG
    assert editor.lua("return vim.bo[...].modified", buf) is False


@pytest.mark.parametrize("how", ["restore", "rewind"])
def test_undo_in_its_buffer_takes_back_a_restore_of_a_binary_file_two_turns_wrote(
    editor: Editor, how: str
) -> None:
    """As |u| after :AcpRestore or :AcpRewind of a text file puts the agent's lines
    back and offers them again: in the buffer of a file with no text, an undo of the
    restore's reload puts the bytes the agent left back on disk, exactly, and every
    change it took back waits again (the accepted one too, as an accepted hunk the
    restore reverted); a redo takes them back again. The buffer stays saved."""
    logo = editor.tmp / "project" / "logo.png"
    logo.write_bytes(PNG)
    editor.nvim.command(f"edit {logo}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    rewind_start(editor, "rewind", 1)
    last = PNG + b"\x00two"
    for number, data in enumerate([PNG + b"\x00one", last], 1):
        turn(editor, f"bytes logo.png {data.hex()}", number)
    state = "require('acp.review.state')"
    editor.lua(f"{state}.decide({state}.chat_id(), 'accept', ..., nil, 1)", str(logo))
    every = "require('acp').changes({all = true})"
    statuses = f"vim.iter({every}):map(function(f) return f.binary.status end):join(',')"
    editor.wait(f"{statuses} == 'pending,accepted'", what="turn 1 accepted")
    if how == "restore":
        editor.nvim.command("AcpRestore 1")
        wait_text(editor, "Restored the files to before turn 1: `logo.png`.")
    else:
        editor.lua("require('acp').rewind(1)")
        session_changed(editor, 2)
    editor.wait(f"{statuses} == 'rejected,rejected'", what="taken back")
    assert logo.read_bytes() == PNG
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)
    editor.as_typed("undo")
    editor.wait(f"{statuses} == 'pending,pending'", what="waiting again")
    assert logo.read_bytes() == last
    assert editor.lua("return vim.bo[...].modified", buf) is False
    editor.as_typed("redo")
    editor.wait(f"{statuses} == 'rejected,rejected'", what="taken back again")
    assert logo.read_bytes() == PNG
    assert editor.lua("return vim.bo[...].modified", buf) is False


def test_a_reopened_worktree_chat_brings_in_a_binary_change_of_a_file_over_2_mib(
    editor: Editor,
) -> None:
    """Reopened, the chat reviews again the change of your file over 2 MiB, whose
    bytes are not kept (a reject cannot put them back), yet accepting it is what it
    was: your file still holds what it did when the chat reopened (its digest was
    kept), so the worktree's bytes come in; and refused, said, once you change it."""
    from tests.nvim.test_workspaces import STUB_SELECT, close_chat, git, repository, send

    project = repository(editor)
    big, other = project / "big.bin", project / "other.bin"
    data = b"\x00" * (2 * 1024 * 1024 + 1)  # past the 2 MiB a file's bytes are kept to
    big.write_bytes(data)
    other.write_bytes(data)
    git(project, "add", "big.bin", "other.bin")
    git(project, "commit", "-q", "-m", "big")
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    for name in ("big.bin", "other.bin"):
        send(editor, listed["id"], f"bytes {name} 00{name.encode().hex()}")
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, listed["id"])

    accept_brings_in_big_but_not_other_you_changed(editor, editor.reopen_last(), big, other)


def accept_brings_in_big_but_not_other_you_changed(
    editor: Editor, chat: int, big: Path, other: Path
) -> None:
    """Chat ``chat`` wrote big.bin and other.bin, both over 2 MiB (their bytes before
    not kept): you change other.bin, and the accept brings in big.bin, not other.bin,
    and says why."""
    from tests.nvim.test_workspaces import review

    waited = {Path(f["path"]).name: f["binary"] for f in review(editor, chat)}
    assert [waited[name]["restorable"] for name in ("big.bin", "other.bin")] == [False, False]
    other.write_bytes(b"\x00yours")
    editor.lua("require('acp').accept()")
    told = "not brought in: other.bin has no text"
    editor.wait(
        f"vim.iter(_G.acp_notices or {{}}):any(function(n) return n.msg:find({told!r}, 1, true) end)",
        what="told",
    )
    editor.wait("require('acp').chats()[1].waiting == 1", what="one brought in")
    assert big.read_bytes() == b"\x00big.bin"
    assert other.read_bytes() == b"\x00yours"


@pytest.mark.parametrize("how", ["reject", "restore"])
def test_undo_in_its_buffer_brings_back_a_binary_file_the_agent_made_and_a_reject_removed(
    editor: Editor, tmp_path: Path, how: str
) -> None:
    """A reject (or restore) removes the file the agent made; its buffer, which
    showed it, is emptied as a reload of no file would leave it, saved: one undo
    step, so |u| there shows the agent's bytes again, puts them back on disk,
    exactly, and the change waits again; a redo removes the file again."""
    made = tmp_path / "project" / "made.bin"
    start(editor)
    agents = b"\x00made\nby the agent"
    run(editor, [shell_bytes(made, agents)])
    editor.nvim.command(f"edit {made}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    shown = lines(editor, buf)
    editor.lua("require('acp').reject()" if how == "reject" else "require('acp').restore(1)")
    editor.wait(f"{status_of('made.bin')} == 'rejected'", what="rejected")
    assert not made.exists()
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 0, -1, false)[1] == ''", what="emptied")
    assert editor.lua("return vim.bo[...].modified", buf) is False
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)
    editor.as_typed("undo")
    editor.wait(f"{status_of('made.bin')} == 'pending'", what="pending again")
    assert made.read_bytes() == agents
    assert lines(editor, buf) == shown
    assert editor.lua("return vim.bo[...].modified", buf) is False
    editor.as_typed("redo")
    editor.wait(f"{status_of('made.bin')} == 'rejected'", what="rejected again")
    assert not made.exists()
    assert editor.lua("return vim.bo[...].modified", buf) is False


def test_a_reject_removes_a_binary_file_whose_buffer_cannot_be_emptied_and_says_so(
    editor: Editor, tmp_path: Path
) -> None:
    """A buffer set 'nomodifiable' keeps the bytes it showed: the file goes all the
    same, the change is rejected, and a warning says why the buffer stayed."""
    made = tmp_path / "project" / "made.bin"
    start(editor)
    run(editor, [shell_bytes(made, b"\x00made")])
    editor.nvim.command(f"edit {made} | setlocal nomodifiable")
    editor.lua("require('acp').reject()")
    editor.wait(f"{status_of('made.bin')} == 'rejected'", what="rejected")
    editor.wait(
        "vim.iter(_G.acp_notices or {}):any(function(n)"
        " return n.msg:find('removed; its buffer was left as it was', 1, true) end)",
        what="told",
    )
    assert not made.exists()
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["\x00made"]


def test_a_reject_restore_or_undo_in_a_read_only_directory_says_why_and_loses_nothing(
    editor: Editor, tmp_path: Path
) -> None:
    """Writing a file with no text back can fail where a text's write would (a
    read-only directory, a full disk): the reject, the restore and the undo of a
    reject crashed on it, the review and the disk left to disagree. Each now says
    why, the file and its change stay as they were, and all goes once it can."""
    with small_disk(tmp_path / "project" / "locked") as locked:
        logo = locked / "logo.png"
        logo.write_bytes(PNG)
        buf = start(editor, logo)
        agents = PNG + b"\x00more"
        run(editor, [shell_bytes(logo, agents)])
        read_only(locked)
        why = f"cannot write {logo}: Read-only file system"
        told = f"vim.iter(_G.acp_notices or {{}}):any(function(n) return n.msg:find({why!r}, 1, true) end)"
        for decide in ("require('acp').reject()", "require('acp').restore(1)"):
            editor.lua(decide)
            editor.wait(told, what="told why")
            editor.lua("_G.acp_notices = {}")
            assert binaries(editor)["logo.png"]["binary"]["status"] == "pending"
            assert logo.read_bytes() == agents
        read_only(locked, False)
        editor.lua("require('acp').reject()")
        editor.wait(f"{status_of('logo.png')} == 'rejected'", what="rejected")
        assert logo.read_bytes() == PNG
        read_only(locked)
        editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)
        editor.as_typed("undo")
        editor.wait(told, what="the undo told why")
        assert binaries(editor)["logo.png"]["binary"]["status"] == "rejected"
        assert logo.read_bytes() == PNG
        read_only(locked, False)


def test_a_worktree_chat_brings_in_a_binary_change_of_a_file_over_2_mib_you_had_changed(
    editor: Editor,
) -> None:
    """Your file over 2 MiB, changed and not committed when the worktree chat began,
    is copied into its worktree; the agent rewrites the copy. Its bytes before are
    not kept (over 2 MiB), and the accept was refused as if you had changed the
    file since: you could not take the agent's change. Its digest was kept when it
    was copied, so the accept brings the bytes in while your file is what it was,
    and is refused, said, once you change it."""
    from tests.nvim.test_workspaces import git, repository, send

    project = repository(editor)
    big, other = project / "big.bin", project / "other.bin"
    big.write_bytes(b"\x00committed")
    git(project, "add", "big.bin")
    git(project, "commit", "-q", "-m", "big")
    data = b"\x00" * (2 * 1024 * 1024 + 1)  # past the 2 MiB a file's bytes are kept to
    big.write_bytes(data)  # changed, not committed
    other.write_bytes(data + b"new")  # not in git at all
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    for name in ("big.bin", "other.bin"):
        send(editor, listed["id"], f"bytes {name} 00{name.encode().hex()}")
    accept_brings_in_big_but_not_other_you_changed(editor, listed["id"], big, other)


@pytest.mark.parametrize("how", ["reject", "restore"])
def test_undo_in_its_buffer_deletes_again_a_binary_file_the_agent_deleted_and_a_reject_put_back(
    editor: Editor, tmp_path: Path, how: str
) -> None:
    """The agent deletes a file with no text that a buffer shows; the buffer keeps
    its text. A reject (or restore) writes the bytes back and its reload changed
    nothing, so |u| there did nothing: no undo, unlike every other reject. The
    reject empties the buffer first, as a reload of the deleted file would, then
    reloads it with the bytes: |u| shows it empty, deletes the file again and the
    change waits again; a redo writes the bytes back and rejects it again."""
    old = tmp_path / "project" / "old.bin"
    data = b"\x00old\nbytes of yours"
    old.write_bytes(data)
    buf = start(editor, old)
    shown = lines(editor, buf)
    run(editor, [{"rm": {"path": str(old)}}])
    editor.lua("require('acp').reject()" if how == "reject" else "require('acp').restore(1)")
    editor.wait(f"{status_of('old.bin')} == 'rejected'", what="rejected")
    assert old.read_bytes() == data
    assert lines(editor, buf) == shown
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)
    editor.as_typed("undo")
    editor.wait(f"{status_of('old.bin')} == 'pending'", what="pending again")
    assert not old.exists()
    assert lines(editor, buf) == [""]
    assert editor.lua("return vim.bo[...].modified", buf) is False
    editor.as_typed("redo")
    editor.wait(f"{status_of('old.bin')} == 'rejected'", what="rejected again")
    assert old.read_bytes() == data
    assert lines(editor, buf) == shown
    assert editor.lua("return vim.bo[...].modified", buf) is False
    # Past the emptying, to the text the buffer kept through the deletion: what
    # the buffer shows, the disk holds.
    editor.as_typed("undo")
    editor.wait(f"{status_of('old.bin')} == 'pending'", what="pending again")
    editor.as_typed("undo")
    editor.wait(f"{status_of('old.bin')} == 'rejected'", what="its text shown again")
    assert old.read_bytes() == data
    assert lines(editor, buf) == shown
