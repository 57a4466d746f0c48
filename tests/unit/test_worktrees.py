"""Where chats work, without Neovim: a chat's workspace as it opens (app._workspaces),
the worktree of a worktree chat made and removed (services.worktrees), and its
review, whose accepted hunks come into the user's files (services.worktree_changes)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.client.app import App
from acp_nvim.client.services import files, worktree_changes, worktrees
from acp_nvim.client.services.worktree_changes import WorktreeChanges, mode_changes
from acp_nvim.client.services.worktrees import (
    WorktreeError,
    hold,
    holds_commits,
    left_unclosed,
    let_go,
    make_worktree,
    remove_worktree,
)
from acp_nvim.client.tasks import Tasks
from tests.fakes.editor import RecordingEditor

pytestmark = pytest.mark.anyio


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project: a.txt, doc.txt and src/b.txt committed, then a.txt changed,
    gone.txt deleted and new.txt added, none of it committed."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "you@example.com")
    git(root, "config", "user.name", "You")
    git(root, "config", "commit.gpgsign", "false")
    (root / "a.txt").write_text("a\n")
    (root / "src" / "b.txt").write_text("b\n")
    (root / "gone.txt").write_text("gone\n")
    (root / "doc.txt").write_text("1\n2\n3\n4\n5\n6\n7\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "start")
    (root / "a.txt").write_text("a, yours\n")
    (root / "gone.txt").unlink()
    (root / "new.txt").write_text("new\n")
    return root


def test_a_worktree_starts_from_the_users_disk_and_goes_with_its_branch(
    project: Path, tmp_path: Path
) -> None:
    status = git(project, "status", "--porcelain")
    worktree, cwd = make_worktree(str(project / "src"), "7", str(tmp_path / "home"))
    assert (worktree.branch, worktree.project) == ("acp/7", str(project))
    assert cwd == str(Path(worktree.path) / "src")  # where the chat was opened, in it
    top = Path(worktree.path)
    assert (top / "a.txt").read_text() == "a, yours\n"
    assert (top / "new.txt").read_text() == "new\n"
    assert not (top / "gone.txt").exists()
    assert git(project, "status", "--porcelain") == status  # yours untouched
    assert worktree.user_path(str(top / "src" / "b.txt")) == str(project / "src" / "b.txt")
    assert worktree.agent_path(str(project / "a.txt")) == str(top / "a.txt")
    assert worktree.user_path(str(project / "a.txt")) is None

    # A second one of the same name takes the next free branch.
    again, _ = make_worktree(str(project), "7", str(tmp_path / "home"))
    assert again.branch == "acp/7-2" and again.path != worktree.path

    assert not holds_commits(worktree)
    git(top, "commit", "-q", "-am", "the agent's")
    assert holds_commits(worktree)
    for made in (worktree, again):
        remove_worktree(made)
        assert not Path(made.path).exists()
    assert git(project, "branch", "--list", "acp/*") == ""


def test_a_branch_of_yours_inside_the_chats_name_gives_the_worktree_the_next_free_one(
    project: Path, tmp_path: Path
) -> None:
    """A branch of yours ``acp/3/x``: git makes no ``acp/3`` beside it (a ref cannot be
    a branch and a folder of branches), and the worktree chat failed with git's
    "cannot lock ref"."""
    git(project, "branch", "acp/3/x")
    worktree, _ = make_worktree(str(project), "3", str(tmp_path / "home"))
    assert worktree.branch == "acp/3-2"
    assert git(project, "branch", "--list", "--format=%(refname:short)", "acp/*").split() == [
        "acp/3-2",
        "acp/3/x",
    ]


def test_a_worktree_held_by_a_neovim_that_died_is_not_kept_by_a_process_given_its_pid(
    project: Path, tmp_path: Path
) -> None:
    """A Neovim whose chat worked in a worktree died without letting go of it; the
    system later gave its process id to another program. Closing the chat that works
    there now kept the worktree, "a chat of another Neovim works in it", for as long
    as that program ran."""
    worktree, _ = make_worktree(str(project), "1", str(tmp_path / "home"))
    holding = (
        "import sys; from acp_nvim.client.services.worktrees import hold;"
        "from acp_nvim.client.session.workspace import Worktree;"
        "hold(Worktree(*sys.argv[1:]))"
    )
    fields = (worktree.path, worktree.branch, worktree.project, worktree.base, worktree.mark)
    subprocess.run([sys.executable, "-c", holding, *fields], check=True)  # and dies
    admin = Path(git(project, "rev-parse", "--git-common-dir").strip())
    if not admin.is_absolute():
        admin = project / admin
    [left] = (admin / "worktrees").glob("*/acp-held-*")
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                          stdin=subprocess.PIPE) as stranger:  # fmt: skip
        try:
            # The number the dead Neovim left now names the stranger.
            left.rename(left.with_name(f"acp-held-{stranger.pid}"))
            hold(worktree)
            assert not let_go(worktree)
        finally:
            assert stranger.stdin is not None
            stranger.stdin.close()


def test_a_worktree_reopened_while_another_neovim_looks_for_left_ones_stays_held(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Neovim looked for worktrees left by killed Neovims just as this one reopened
    a chat in such a worktree: the look took away every held file, this Neovim's
    too, so the next Neovim said the worktree was left while its chat worked there,
    and closing that chat here no longer saw it held."""
    home = tmp_path / "home"
    worktree, _ = make_worktree(str(project), "1", str(home))
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()  # the killed Neovim: its file stays
    admin = Path(git(Path(worktree.path), "rev-parse", "--absolute-git-dir").strip())
    (admin / f"acp-held-{dead.pid}").write_text("")
    listed = worktrees.unattended

    def reopened_meanwhile(where: str) -> list[worktrees.Unattended]:
        found = listed(where)
        hold(worktree)  # the reopening, between the look's listing and its clean-up
        return found

    monkeypatch.setattr(worktrees, "unattended", reopened_meanwhile)
    assert [left.path for left in left_unclosed(str(home))] == [worktree.path]
    assert sorted(p.name for p in admin.glob("acp-held-*")) == [f"acp-held-{os.getpid()}"]
    monkeypatch.undo()
    assert left_unclosed(str(home)) == []  # held here: no other Neovim is told


def test_a_worktree_opened_from_a_directory_git_does_not_track_has_it(
    project: Path, tmp_path: Path
) -> None:
    """Opened in a directory git holds nothing of (empty, or only ignored files):
    the chat's directory in the worktree did not exist, and its agent was told
    to work in a directory that is not there."""
    (project / ".gitignore").write_text("build/\n")
    for name in ("build", "empty"):
        (project / name).mkdir()
    (project / "build" / "out.o").write_text("ignored\n")
    for name in ("build", "empty"):
        worktree, cwd = make_worktree(str(project / name), name, str(tmp_path / "home"))
        assert cwd == str(Path(worktree.path) / name) and os.path.isdir(cwd)
        assert not (Path(cwd) / "out.o").exists()  # ignored files stay out
        remove_worktree(worktree)


def test_a_folder_you_made_a_file_or_a_file_you_made_a_folder_is_so_in_the_worktree(
    project: Path, tmp_path: Path
) -> None:
    """You replaced the folder src/ with a file src, and the file doc.txt with a
    folder: no worktree chat could open ("copying your changes failed: Is a
    directory")."""
    (project / "src" / "b.txt").unlink()
    (project / "src").rmdir()
    (project / "src").write_text("now a file\n")
    (project / "doc.txt").unlink()
    (project / "doc.txt").mkdir()
    (project / "doc.txt" / "in.txt").write_text("now in a folder\n")
    worktree, _ = make_worktree(str(project), "1", str(tmp_path / "home"))
    top = Path(worktree.path)
    assert (top / "src").read_text() == "now a file\n"
    assert (top / "doc.txt" / "in.txt").read_text() == "now in a folder\n"
    assert git(top, "status", "--porcelain") == git(project, "status", "--porcelain")


def test_no_worktree_outside_git_nor_without_a_commit_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError, match="is not in a git repository"):
        make_worktree(str(plain), "1", str(tmp_path / "home"))
    git(plain, "init", "-q")
    with pytest.raises(WorktreeError, match=r"plain has no commit yet, and a worktree starts"):
        make_worktree(str(plain), "1", str(tmp_path / "home"))
    assert git(plain, "branch", "--list") == ""
    assert list((tmp_path / "home").iterdir()) == []


@pytest.fixture
async def review(project: Path, tmp_path: Path) -> AsyncIterator[WorktreeChanges]:
    """The review of a chat working in a worktree of ``project``, a turn begun."""
    worktree, cwd = make_worktree(str(project), "1", str(tmp_path / "home"))
    async with anyio.create_task_group() as tasks:
        review = WorktreeChanges(RecordingEditor(), 1, cwd, Tasks(tasks), worktree)
        await review.begin_turn()
        yield review
        review.close()
        tasks.cancel_scope.cancel()


async def agent_writes(review: WorktreeChanges, name: str, text: str) -> Path:
    path = Path(review.worktree.path) / name
    await review.write(str(path), text)
    return path


def statuses(review: WorktreeChanges) -> list[tuple[str, str | None, list[str]]]:
    """(path, source, hunk statuses) of each file the chat's review lists."""
    return [
        (f["path"], f.get("source"), [h["status"] for h in f["hunks"]])
        for f in review.summary()["files"]
    ]


async def test_accepting_one_hunk_brings_only_it_into_your_file_with_your_edits(
    review: WorktreeChanges, project: Path
) -> None:
    yours, copy = project / "doc.txt", Path(review.worktree.path) / "doc.txt"
    await agent_writes(review, "doc.txt", "one\n2\n3\n4\n5\n6\nseven\n")
    [(path, source, hunks)] = statuses(review)
    assert (path, source, hunks) == (str(yours), str(copy), ["pending", "pending"])
    assert yours.read_text() == "1\n2\n3\n4\n5\n6\n7\n"
    assert review.waiting() == 2

    yours.write_text("1\n2\n3\nfour, yours\n5\n6\n7\n")  # your own edit meanwhile
    [first, _] = review.summary()["files"][0]["hunks"]
    await review.decide("accept", str(yours), first["id"])
    assert yours.read_text() == "one\n2\n3\nfour, yours\n5\n6\n7\n"
    assert review.waiting() == 1
    await review.decide("reject", str(copy))  # the other is dropped from the worktree
    assert copy.read_text() == "one\n2\n3\n4\n5\n6\n7\n"
    assert yours.read_text() == "one\n2\n3\nfour, yours\n5\n6\n7\n"
    assert review.waiting() == 0
    assert statuses(review) == [(str(yours), str(copy), ["accepted", "rejected"])]


async def test_your_edit_of_the_same_lines_is_kept_and_the_agents_wait_as_a_conflict(
    review: WorktreeChanges, project: Path
) -> None:
    a = project / "a.txt"  # "a, yours\n" in both
    await agent_writes(review, "a.txt", "a, the agent's\n")
    a.write_text("a, yours again\n")
    review.editor.open_buffer(str(a))  # type: ignore[attr-defined]
    await review.decide("accept", str(a))
    assert a.read_text() == "a, yours again\n"
    assert review.waiting() == 0
    landed = [f for f in review.summary()["files"] if f.get("source") is None]
    [conflict] = landed[0]["hunks"]
    assert (landed[0]["path"], conflict["status"]) == (str(a), "conflict")
    assert conflict["proposed"] == ["a, the agent's"]
    assert "your text was kept" in review.editor.notices[-1][1]  # type: ignore[attr-defined]

    await review.decide("accept", str(a), conflict["id"])  # the agent's lines after all
    assert a.read_text() == "a, the agent's\n"


async def test_a_file_changed_while_a_hunk_is_brought_in_never_gets_your_unsaved_line(
    review: WorktreeChanges, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bringing a hunk in beside unsaved edits reads your file twice: to hold back
    what reaches into your unsaved lines, then to save what is left to it. Changed
    in between by something else, the save met a change held back against the
    older text, and the change won the clash: your unsaved "mine" went with it."""
    yours = project / "doc.txt"
    await agent_writes(review, "doc.txt", "1\n2\nthree\n4\n5\n6\n7\n")
    review.editor.open_buffer(  # type: ignore[attr-defined]
        str(yours), ["1", "mine", "3", "4", "5", "6", "7"], modified=True
    )
    read = files.read_disk
    raced: list[str] = []

    def racing(name: str) -> files.Document:
        doc = read(name)
        if name == str(yours) and not raced:  # your file changes right after its first read
            raced.append(name)
            yours.write_text("1\n2\nX, by something else\n4\n5\n6\n7\n")
        return doc

    monkeypatch.setattr(files, "read_disk", racing)
    await review.decide("accept", str(yours))
    assert raced
    assert yours.read_text() == "1\n2\nX, by something else\n4\n5\n6\n7\n"  # never "mine"
    buffer = review.editor.buffers[str(yours)].state  # type: ignore[attr-defined]
    assert buffer.lines == ["1", "mine", "3", "4", "5", "6", "7"] and buffer.modified
    landed = [f for f in review.summary()["files"] if f.get("source") is None]
    assert [h["status"] for h in landed[0]["hunks"]] == ["conflict"]


async def test_a_clash_brought_in_is_listed_under_the_turn_its_hunk_came_from(
    review: WorktreeChanges, project: Path
) -> None:
    """The review groups files by the chat's turns: a clash that accepting turn 2's
    hunk left in your file is turn 2's, listed with it, and decided as such."""
    await agent_writes(review, "b.txt", "b, turn 1\n")
    await review.end_turn()
    await review.begin_turn()
    a = project / "a.txt"
    await agent_writes(review, "a.txt", "a, the agent's\n")
    a.write_text("a, yours again\n")
    review.editor.open_buffer(str(a))  # type: ignore[attr-defined]
    await review.decide("accept", str(a))
    files = review.summary()["files"]
    listed = [(f["turn"], Path(f["path"]).name, f.get("source") is None) for f in files]
    assert listed == [(2, "a.txt", False), (2, "a.txt", True), (1, "b.txt", False)]
    [clash] = [f for f in review.summary()["files"] if f.get("source") is None]
    await review.decide("accept", str(a), clash["hunks"][0]["id"], clash["turn"])
    assert a.read_text() == "a, the agent's\n"


async def test_a_file_the_agent_made_or_deleted_comes_or_goes_when_accepted(
    review: WorktreeChanges, project: Path
) -> None:
    await agent_writes(review, "made.txt", "made\n")
    (Path(review.worktree.path) / "new.txt").unlink()
    await review.end_turn()
    await review.decide("accept")
    assert (project / "made.txt").read_text() == "made\n"
    assert not (project / "new.txt").exists()
    assert review.waiting() == 0


async def test_a_script_the_agent_made_executable_comes_in_executable(
    review: WorktreeChanges, project: Path
) -> None:
    """The agent wrote a script in its worktree and ran `chmod +x` on it; accepted,
    the script in your project could not be run (made 0644, or left so)."""
    script = await agent_writes(review, "run.sh", "#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    # So with a file of yours it changed and made executable; yours made executable
    # by you (a.txt) stays so where the agent changed only its text.
    changed = await agent_writes(review, "src/b.txt", "#!/bin/sh\necho b\n")
    changed.chmod(0o755)
    (project / "a.txt").chmod(0o755)
    await agent_writes(review, "a.txt", "a, the agent's\n")
    await review.end_turn()
    await review.decide("accept")
    assert (project / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
    for name in ("run.sh", "src/b.txt", "a.txt"):
        assert os.access(project / name, os.X_OK), name


async def test_a_file_the_agent_only_made_executable_comes_in_executable(
    review: WorktreeChanges, project: Path
) -> None:
    """The agent ran `chmod +x` on a file of yours in its worktree and changed no
    text: no hunk lists it, and accepting everything never brought the change in."""
    (Path(review.worktree.path) / "src" / "b.txt").chmod(0o755)
    await review.end_turn()
    assert review.waiting() == 0
    # Work all the same: closing the chat keeps the worktree for it.
    assert list(mode_changes(review.worktree)) == [str(project / "src" / "b.txt")]
    await review.decide("accept")
    assert mode_changes(review.worktree) == {}
    assert os.access(project / "src" / "b.txt", os.X_OK)
    assert not os.access(project / "doc.txt", os.X_OK)  # the others stay as they were


def git_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The arguments of each git call worktree_changes makes from now on."""
    ran: list[tuple[str, ...]] = []
    real = worktree_changes.git

    def counted(cwd: str, *args: str, **kwargs: Any) -> bytes:
        ran.append(args)
        return real(cwd, *args, **kwargs)

    monkeypatch.setattr("acp_nvim.client.services.worktree_changes.git", counted)
    return ran


async def test_modes_changed_alone_are_found_and_taken_with_one_git_diff(
    review: WorktreeChanges, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepting everything listed the files whose execute bit the agent changed
    alone, then worked each out again to take it, and each file cost a `git ls-tree`
    both times (as it did at every close looking for them): the `git diff` that
    finds them already says each file's mode in the worktree's first commit."""
    for name in ("src/b.txt", "doc.txt"):
        (Path(review.worktree.path) / name).chmod(0o755)
    (project / "a.txt").chmod(0o755)  # yours too: the agent's copy is not
    await review.end_turn()
    ran = git_calls(monkeypatch)
    found = mode_changes(review.worktree)
    assert sorted(found) == [str(project / "doc.txt"), str(project / "src" / "b.txt")]
    await review.decide("accept")
    assert [args[0] for args in ran] == ["diff", "diff"]  # one each, nothing per file
    assert all(os.access(path, os.X_OK) for path in found)
    assert os.access(project / "a.txt", os.X_OK)  # yours stays


async def test_a_file_whose_change_you_rejected_keeps_your_mode_at_a_later_accept_all(
    review: WorktreeChanges, project: Path
) -> None:
    """The agent changed src/b.txt and made it executable; you rejected that change.
    Accepting everything later (another file's hunk) still made your b.txt
    executable: the mode came in without the text it went with."""
    changed = await agent_writes(review, "src/b.txt", "#!/bin/sh\necho b\n")
    changed.chmod(0o755)
    await agent_writes(review, "doc.txt", "1\n2\nthree\n4\n5\n6\n7\n")
    await review.end_turn()
    await review.decide("reject", str(project / "src" / "b.txt"))
    assert mode_changes(review.worktree, review.rejected()) == {}  # no work left in it
    await review.decide("accept")
    assert (project / "doc.txt").read_text() == "1\n2\nthree\n4\n5\n6\n7\n"
    assert (project / "src" / "b.txt").read_text() == "b\n"
    assert not os.access(project / "src" / "b.txt", os.X_OK)


async def test_paths_through_symlinks_map_between_the_worktree_and_your_project(
    project: Path, tmp_path: Path
) -> None:
    """The project opened through a symlink to it, Neovim's state directory (the
    worktrees' home) another: the agent, whose process sees its directory's real
    path, wrote a file there; its change was not taken for the worktree's (accepted,
    it never came into your file), and your file named through the link had no copy
    in the worktree."""
    link, real_home, home = tmp_path / "link", tmp_path / "real-home", tmp_path / "home"
    link.symlink_to(project)
    real_home.mkdir()
    home.symlink_to(real_home)
    worktree, cwd = make_worktree(str(link / "src"), "1", str(home))
    real = Path(os.path.realpath(worktree.path))
    assert worktree.agent_path(str(link / "a.txt")) == str(real / "a.txt")
    assert worktree.user_path(str(home / real.name / "a.txt")) == str(project / "a.txt")
    async with anyio.create_task_group() as tasks:
        review = WorktreeChanges(RecordingEditor(), 1, cwd, Tasks(tasks), worktree)
        await review.begin_turn()
        await review.write(str(real / "a.txt"), "a, the agent's\n")
        await review.end_turn()
        assert review.waiting() == 1
        await review.decide("accept")
        assert (project / "a.txt").read_text() == "a, the agent's\n"
        review.close()
        tasks.cancel_scope.cancel()


async def test_a_chats_workspace_is_the_given_cwd_else_the_agents_else_neovims(
    tmp_path: Path,
) -> None:
    from acp_nvim.client.app._workspaces import WorkspaceRefused, Workspaces
    from acp_nvim.client.session.chat import Chat

    here, pinned, given, lib = (tmp_path / name for name in ("here", "pinned", "given", "lib"))
    for path in (here, pinned, given, lib):
        path.mkdir()
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        assert app.setup(
            {"roots": [str(lib)], "agents": {"pinned": {"cmd": ["x"], "cwd": str(pinned)}}}
        )
        workspaces: Workspaces = app.workspaces
        _, demo = app.ctx.config.agent("demo")
        _, agent = app.ctx.config.agent("pinned")
        assert (await workspaces.choose(1, demo, str(here))).dirs == [str(here), str(lib)]
        assert (await workspaces.choose(2, agent, str(here))).cwd == str(pinned)
        chosen = await workspaces.choose(3, agent, str(given), cwd_given=True, roots=["~"])
        assert chosen.dirs == [str(given), str(lib), os.path.expanduser("~")]
        # A fork or a handover works where the chat it continues does.
        parent = Chat(4, "demo", editor, chosen)
        shared = await workspaces.choose(5, demo, str(here), like=parent)
        assert (shared.cwd, shared.roots) == (chosen.cwd, chosen.roots)
        assert shared.roots is not chosen.roots  # its own list from now on
        for bad, why in (
            (["lib"], "root 'lib' is not an absolute path (nor ~/...)"),
            ([str(tmp_path / "gone")], f"root {str(tmp_path / 'gone')!r} is not a directory"),
        ):
            with pytest.raises(WorkspaceRefused) as refused:
                await workspaces.choose(6, demo, str(here), roots=bad)
            assert str(refused.value) == why
        tasks.cancel_scope.cancel()


async def test_a_close_after_its_question_looks_for_changed_modes_once(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a worktree chat with no hunk waiting first looks (with `git diff`)
    for execute bits its agent changed alone, to ask about them; none found, the
    close that follows need not look again: it removes the worktree."""
    from acp_nvim.client.session.chat import Chat

    ran = git_calls(monkeypatch)
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        assert app.setup({}, str(tmp_path / "state"))
        _, demo = app.ctx.config.agent("demo")
        workspace = await app.workspaces.choose(1, demo, str(project), worktree=True)
        assert workspace.worktree is not None
        chat = app.ctx.chats[1] = Chat(1, "demo", editor, workspace)
        assert await app.workspaces.work_of(1) == ""  # nothing to ask about
        del app.ctx.chats[1]
        await app.workspaces.release(chat, None, None, modes_looked=True)
        assert not os.path.exists(workspace.worktree.path)
        assert [args[0] for args in ran] == ["diff"]
        tasks.cancel_scope.cancel()


async def test_each_turns_change_of_a_binary_file_brings_in_the_bytes_it_left(
    review: WorktreeChanges, project: Path
) -> None:
    """A file with no text the agent made, changed in a later turn, then deleted:
    accepting each turn's change in turn brings in what that turn left (the first
    turn's bytes too while the second's still waits), and the deletion removes
    your file."""
    copy, yours = Path(review.worktree.path) / "pic.bin", project / "pic.bin"
    for data in (b"\x00one", b"\x00two", None):
        if data is None:
            copy.unlink()
        else:
            copy.write_bytes(data)
        await review.end_turn()
        await review.begin_turn()
    await review.decide("accept", str(copy), turn=1)
    assert yours.read_bytes() == b"\x00one"
    await review.decide("accept", str(copy), turn=2)
    assert yours.read_bytes() == b"\x00two"
    await review.decide("accept", str(copy), turn=3)
    assert not yours.exists()
    assert review.waiting() == 0
    assert isinstance(review.editor, RecordingEditor) and review.editor.notices == []


async def test_a_program_the_agent_built_in_its_worktree_comes_in_executable(
    review: WorktreeChanges, project: Path
) -> None:
    """The agent built a program (a file with no text, executable) in its worktree;
    accepted, its bytes came into your project but it could not be run there."""
    program = Path(review.worktree.path) / "app"
    program.write_bytes(b"\x7fELF\x00built")
    program.chmod(0o755)
    await review.end_turn()
    await review.decide("accept")
    assert (project / "app").read_bytes() == b"\x7fELF\x00built"
    assert os.access(project / "app", os.X_OK)


async def test_a_binary_files_earlier_change_accepted_after_its_later_one_keeps_the_later(
    review: WorktreeChanges, project: Path
) -> None:
    """Three turns wrote a file with no text; you accepted the last turn's change,
    then the first's: refused as a file "you changed since", the first left
    pending, where the newer bytes you accepted already hold it."""
    data = Path(review.worktree.path) / "data.bin"
    for n in (1, 2, 3):
        data.write_bytes(b"\x00turn %d" % n)
        await review.end_turn()
        if n < 3:
            await review.begin_turn()
    await review.decide("accept", str(data), None, 3)
    await review.decide("accept", str(data), None, 1)
    assert (project / "data.bin").read_bytes() == b"\x00turn 3"
    statuses = [f["binary"]["status"] for f in review.summary()["files"] if f.get("binary")]
    assert sorted(statuses) == ["accepted", "accepted", "pending"]
    notices = review.editor.notices  # type: ignore[attr-defined]
    assert not [message for _, message in notices if "not brought in" in message]


async def test_neovim_quitting_right_after_a_close_keeps_the_worktree_work_waits_in(
    project: Path, tmp_path: Path
) -> None:
    """:AcpClose, "keep the worktree" (a hunk waits in it), then Neovim quits at
    once: the close's first half had run (its review gone from the open ones), its
    second, which keeps the worktree, had not. Quitting found no review for it, so
    no work waiting, and removed the worktree and the agent's change with it."""
    from acp_nvim.client.session.chat import Chat

    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        assert app.setup({}, str(tmp_path / "state"))
        _, demo = app.ctx.config.agent("demo")
        workspace = await app.workspaces.choose(1, demo, str(project), worktree=True)
        assert workspace.worktree is not None
        chat = app.ctx.chats[1] = Chat(1, "demo", editor, workspace)
        await app.reviews.reopened(chat, [], False)
        review = app.reviews.by_chat[1]
        await review.begin_turn()
        await review.write(os.path.join(workspace.worktree.path, "a.txt"), "the agent's\n")
        await review.end_turn()
        assert review.waiting() == 1
        app.lifecycle.closing(1)  # as the host takes Lua's close, at once
        await app.shutdown()  # before the loop got to the rest of the close
        assert os.path.isdir(workspace.worktree.path)
        tasks.cancel_scope.cancel()
