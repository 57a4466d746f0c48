"""The git worktrees of worktree chats (decision 0046): made on a new branch from the
user's HEAD with their uncommitted changes copied in, so the agent starts from what
the user has on disk; removed with their branch when the chat closes.

Nothing here changes the user's work tree: it is only read (its status and the
files that differ from HEAD). A worktree's mark, and which Neovims' chats work in
it, go in git's own directory for that worktree, which git removes with it. A
failed attempt leaves no worktree or branch behind. Every function but
``still_there`` and ``hold`` runs git, copies files or reads a directory's: call
them in a worker thread.
"""

from __future__ import annotations

__all__ = [
    "Unattended",
    "WorktreeError",
    "copied_digests",
    "hold",
    "holds_commits",
    "left_unclosed",
    "let_go",
    "make_worktree",
    "remove_worktree",
    "still_there",
    "unattended",
    "worktrees_home",
]

import contextlib
import json
import os
import shlex
import shutil
import uuid
from typing import NamedTuple

from acp_nvim.client.services import files
from acp_nvim.client.services.git import GitError, dirty_files, git
from acp_nvim.client.session.workspace import Worktree

# Seconds git may take to check out a big tree, or to remove one.
_SLOW = 120.0


def worktrees_home(state_dir: str) -> str:
    """Where worktree chats' worktrees are made, in Neovim's stdpath("state")."""
    return os.path.join(state_dir, "acp", "worktrees")


class WorktreeError(Exception):
    """A worktree could not be made or removed; ``str()`` says why (git's own
    message where git refused)."""


def make_worktree(cwd: str, name: str, home: str) -> tuple[Worktree, str]:
    """A new worktree of the git work tree holding ``cwd``, for chat ``name``: on
    branch ``acp/<name>`` (``acp/<name>-2``... while that is taken) from HEAD, in a
    directory under ``home``, with the files that differ from HEAD (tracked or not,
    ignored ones left out) copied in as they are on disk. Returns it, and the
    directory in it that stands for ``cwd``.

    Raises:
        WorktreeError: ``cwd`` is in no git work tree, or git refused (its message).
    """
    if shutil.which("git") is None:
        raise WorktreeError("cannot make a worktree: git is not installed (not on PATH)")
    try:
        found = os.fsdecode(git(cwd, "rev-parse", "--show-toplevel", "--show-prefix"))
    except GitError:
        raise WorktreeError(f"cannot make a worktree: {cwd} is not in a git repository") from None
    top, prefix, *_ = [*found.splitlines(), ""]
    project = os.path.normpath(top)  # git's: its real path
    # Its real path too (stdpath("state") may be a link): the agent's process, git and
    # Neovim name its files so.
    home = os.path.realpath(home)
    try:
        os.makedirs(home, exist_ok=True)
    except OSError as err:
        raise WorktreeError(f"cannot make a worktree: {err}") from None
    branch, path = _free_name(project, name, os.path.join(home, os.path.basename(project)))
    try:
        git(project, "worktree", "add", "--quiet", "-b", branch, path, "HEAD", timeout=_SLOW)
    except GitError as err:
        _clean_up(project, branch, path)
        why = str(err)
        if not _has_commit(project):  # git says "not a valid object name: 'HEAD'"
            why = f"{project} has no commit yet, and a worktree starts from one (git commit first)"
        raise WorktreeError(f"cannot make a worktree: {why}") from None
    where = os.path.normpath(os.path.join(path, prefix))
    try:
        _copy_changes(project, path)
        # Made when git holds nothing of it (empty, or only ignored files): the agent
        # works there.
        os.makedirs(where, exist_ok=True)
        base = os.fsdecode(git(path, "rev-parse", "HEAD")).strip()
        mark = _marked(path)
    except (OSError, GitError) as err:
        _clean_up(project, branch, path)
        raise WorktreeError(f"cannot make a worktree: copying your changes failed: {err}") from None
    return Worktree(path, branch, project, base, mark), where


def still_there(worktree: Worktree) -> bool:
    """Whether ``worktree`` is still there: its directory, and not another worktree
    made since under its name (chat numbers, which name worktrees, start again in
    each Neovim). Reads one small file: callable on the loop."""
    if not os.path.isdir(worktree.path):
        return False
    if not worktree.mark:  # kept before worktrees were marked
        return True
    admin = _admin_dir(worktree.path)
    try:
        with open(os.path.join(admin or "", _MARK), encoding="utf-8") as file:
            return file.read().strip() == worktree.mark
    except OSError:
        return False


def hold(worktree: Worktree) -> None:
    """This Neovim's chats work in ``worktree``: a file named by its process says so,
    for another Neovim's chat reopened there (:func:`let_go`). Writes one small
    file: callable on the loop."""
    admin = _admin_dir(worktree.path)
    if admin is None:
        return
    held = os.path.join(admin, f"{_HELD}{os.getpid()}")
    with contextlib.suppress(OSError), open(held, "w", encoding="ascii") as file:
        file.write(_started(os.getpid()))


def let_go(worktree: Worktree) -> bool:
    """This Neovim's chats no longer work in ``worktree``; whether a chat of another
    Neovim still running does (its file is there: a Neovim that died left one
    that counts no more, and goes: :func:`left_unclosed` would tell of it)."""
    admin = _admin_dir(worktree.path)
    if admin is None:
        return False
    with contextlib.suppress(OSError):
        os.remove(os.path.join(admin, f"{_HELD}{os.getpid()}"))
    # A Neovim gone: its chat's reopening and close here decided for it.
    return _drop_ended(admin)


def _drop_ended(admin: str) -> bool:
    """Remove from the worktree's git directory ``admin`` the files of Neovims that
    ended; whether one of a Neovim still running is there."""
    try:
        names = os.listdir(admin)
    except OSError:
        return False
    alive = False
    for held in [os.path.join(admin, name) for name in names if name.startswith(_HELD)]:
        if _holds(held):
            alive = True
        else:
            with contextlib.suppress(OSError):
                os.remove(held)
    return alive


class Unattended(NamedTuple):
    """A worktree under the worktrees' home that no running Neovim's chat works in:
    its directory, its branch ("" once the agent left it on none), the work tree it
    was made from, and whether a Neovim that ended left it and no one was told yet
    (:func:`left_unclosed`; else kept by its chat's close, or told of)."""

    path: str
    branch: str
    project: str
    left: bool

    @property
    def removal(self) -> str:
        """The shell commands that remove it, and its branch where it is on one."""
        git = f"git -C {shlex.quote(self.project)}"
        remove = f"{git} worktree remove --force {shlex.quote(self.path)}"
        return remove + (f"; {git} branch -D {shlex.quote(self.branch)}" if self.branch else "")


def unattended(home: str) -> list[Unattended]:
    """The worktrees of worktree chats under ``home`` (of any project) that no running
    Neovim's chat works in. Reads a few small files of each (no git): cheap enough
    for every start."""
    home = os.path.realpath(home)  # as make_worktree made them
    try:
        names = sorted(os.listdir(home))
    except OSError:
        return []
    found = []
    for name in names:
        path = os.path.join(home, name)
        admin = _admin_dir(path)
        if admin is None or not os.path.exists(os.path.join(admin, _MARK)):
            continue  # not a worktree of a chat (any more)
        try:
            held = [os.path.join(admin, n) for n in os.listdir(admin) if n.startswith(_HELD)]
        except OSError:
            continue
        if not any(_holds(file) for file in held):
            found.append(Unattended(path, _branch_of(admin), _project_of(admin), bool(held)))
    return found


def left_unclosed(home: str) -> list[Unattended]:
    """The worktrees under ``home`` whose chats' Neovims all ended without closing them
    (killed outright: a chat closed takes its Neovim's file away, :func:`let_go`).
    Each is found once: the dead Neovims' files go (not one a chat reopened there
    meanwhile wrote). What they hold is unknown here (the review went with the
    Neovim): the user decides."""
    found = [worktree for worktree in unattended(home) if worktree.left]
    for worktree in found:
        if (admin := _admin_dir(worktree.path)) is not None:
            _drop_ended(admin)
    return found


def _branch_of(admin: str) -> str:
    """The branch checked out in the worktree whose git directory is ``admin``."""
    try:
        with open(os.path.join(admin, "HEAD"), encoding="utf-8") as file:
            head = file.read().strip()
    except OSError:
        return ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else ""


def _project_of(admin: str) -> str:
    """The work tree whose repository holds the worktree's git directory ``admin``
    (``<project>/.git/worktrees/<name>``): where git commands on it run."""
    common = os.path.normpath(os.path.join(admin, "..", ".."))
    named = os.path.join(admin, "commondir")
    with contextlib.suppress(OSError), open(named, encoding="utf-8") as file:
        common = os.path.normpath(os.path.join(admin, file.read().strip()))
    return os.path.dirname(common) if os.path.basename(common) == ".git" else common


def _holds(held: str) -> bool:
    """Whether the Neovim that left ``held`` (``acp-held-<pid>``, holding when that
    process started) still runs: a process of that id that started then. The id
    alone is not enough: once the Neovim died, the system may give it to another
    program."""
    pid = os.path.basename(held).removeprefix(_HELD)
    if not pid.isdigit():
        return False
    try:
        with open(held, encoding="utf-8") as file:
            started = file.read().strip()
    except OSError:
        return False
    if started:
        return _started(int(pid)) == started
    # Left before files said when (or where /proc is not): the id is all there is.
    try:
        os.kill(int(pid), 0)  # no signal: only whether it runs
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _started(pid: int) -> str:
    """When process ``pid`` started (clock ticks after boot, /proc's field 22), with
    the boot's id; empty where there is no /proc or no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            ticks = file.read().rsplit(b")", 1)[1].split()[19].decode()
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            boot = file.read().strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""
    return f"{boot} {ticks}"


def remove_worktree(worktree: Worktree) -> None:
    """Remove the worktree's directory and its branch (what of them is left: the user
    may have removed either).

    Raises:
        WorktreeError: git refused (its message).
    """
    project = worktree.project
    try:
        try:
            git(project, "worktree", "remove", "--force", worktree.path, timeout=_SLOW)
        except GitError:
            if os.path.lexists(worktree.path):
                raise
            # The user removed it (`git worktree remove`): git knows it no more.
        if _has_branch(project, worktree.branch):
            git(project, "branch", "-D", worktree.branch)
    except GitError as err:
        raise WorktreeError(f"worktree {worktree.path} not removed: {err}") from None


def holds_commits(worktree: Worktree) -> bool:
    """Whether the agent committed on the worktree's branch (work the review does not
    list); True when git cannot tell. A branch the user deleted holds none."""
    if os.path.isdir(worktree.path):
        where, tip = worktree.path, "HEAD"
    elif _has_branch(worktree.project, worktree.branch):  # its directory removed
        where, tip = worktree.project, f"refs/heads/{worktree.branch}"
    else:
        return False
    try:
        count = git(where, "rev-list", "--count", f"{worktree.base}..{tip}")
    except GitError:
        return True
    return int(count or b"0") > 0


# The files in a worktree's own directory under the project's .git (git's, which
# goes with the worktree): its mark, what was copied into it, and one per Neovim (by
# its process id) whose chats work in it.
_MARK = "acp-chat"
_COPIED = "acp-copied"
_HELD = "acp-held-"


def _admin_dir(path: str) -> str | None:
    """Git's directory of the worktree at ``path`` (its ``.git`` file names it)."""
    try:
        with open(os.path.join(path, ".git"), encoding="utf-8") as file:
            line = file.readline().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.join(path, line.removeprefix("gitdir:").strip())


def _marked(path: str) -> str:
    """A new mark, written into git's directory of the worktree at ``path``."""
    admin = _admin_dir(path)
    if admin is None:
        raise OSError(f"git made no {path}/.git file")
    mark = uuid.uuid4().hex
    with open(os.path.join(admin, _MARK), "w", encoding="utf-8") as file:
        file.write(mark + "\n")
    return mark


def _has_branch(project: str, branch: str) -> bool:
    try:
        git(project, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except GitError:
        return False
    return True


def _has_commit(project: str) -> bool:
    """Whether ``project``'s HEAD is a commit (not a repository made with no commit)."""
    try:
        git(project, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except GitError:
        return False
    return True


def _branch_taken(project: str, branch: str) -> bool:
    """Whether git can make no branch ``branch``: one of that name is there, or
    branches inside it (``acp/1/x`` beside ``acp/1``: a ref cannot be a branch and
    a folder of branches)."""
    if _has_branch(project, branch):
        return True
    try:
        return bool(git(project, "for-each-ref", "--count=1", f"refs/heads/{branch}/"))
    except GitError:
        return False


def _free_name(project: str, name: str, stem: str) -> tuple[str, str]:
    """A branch ``acp/<name>`` and a directory ``<stem>-<name>`` neither of which
    exists yet (nor branches inside it), suffixed ``-2``, ``-3``... while one is
    taken. Beside a branch ``acp`` of the user's, git can make no ``acp/...``:
    ``acp-<name>`` then."""
    prefix = "acp-" if _has_branch(project, "acp") else "acp/"
    for n in range(1, 1000):
        suffix = "" if n == 1 else f"-{n}"
        branch, path = f"{prefix}{name}{suffix}", f"{stem}-{name}{suffix}"
        if not _branch_taken(project, branch) and not os.path.lexists(path):
            return branch, path
    raise WorktreeError(f"cannot make a worktree: every branch {prefix}{name}-N is taken")


def copied_digests(worktree: Worktree) -> dict[str, tuple[files.Stat, str]]:
    """The files of ``worktree`` copied from the user's when it was made, with their
    (size, mtime_ns) and SHA-256 then: what the user's file held, where a turn start
    keeps no bytes (over 2 MiB, decision 0099). Empty when not written."""
    admin = _admin_dir(worktree.path)
    try:
        with open(os.path.join(admin or "", _COPIED), encoding="utf-8") as file:
            kept = json.load(file)
    except (OSError, ValueError):
        return {}
    return {
        os.path.join(worktree.path, rel): ((size, mtime), digest)
        for rel, (size, mtime, digest) in kept.items()
    }


def _copy_changes(project: str, path: str) -> None:
    """Make the worktree's files that differ from HEAD what they are in ``project``:
    changed and new files copied, deleted ones deleted; what each copy holds is
    written down (:func:`copied_digests`)."""
    status = git(project, "status", "--porcelain=v1", "-z", "--untracked-files=all", timeout=_SLOW)
    copied: dict[str, tuple[int, int, str]] = {}
    for source in sorted(dirty_files(project, status)):
        target = os.path.join(path, os.path.relpath(source, project))
        if _is_folder(source):
            if not _is_folder(target) and os.path.lexists(target):
                os.remove(target)  # a file you made a folder: its files are listed too
            continue  # else a submodule, whose changes stay its own
        if _is_folder(target):
            shutil.rmtree(target)  # a folder you made a file, or a submodule you deleted
        if os.path.lexists(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.lexists(target):
                os.remove(target)
            shutil.copy2(source, target, follow_symlinks=False)
            stat, digest = files.stat_of(target), files.digest_of(target)
            if stat is not None and digest is not None:  # a regular file
                copied[os.path.relpath(target, path)] = (*stat, digest)
        elif os.path.lexists(target):
            os.remove(target)
    admin = _admin_dir(path)
    if admin is None:
        raise OSError(f"git made no {path}/.git file")
    with open(os.path.join(admin, _COPIED), "w", encoding="utf-8") as file:
        json.dump(copied, file)


def _is_folder(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _clean_up(project: str, branch: str, path: str) -> None:
    """Take away what a failed attempt left: the worktree and its branch."""
    for args in (("worktree", "remove", "--force", path), ("branch", "-D", branch)):
        try:
            git(project, *args)
        except GitError:
            pass  # never made
    shutil.rmtree(path, ignore_errors=True)
    try:
        git(project, "worktree", "prune")
    except GitError:
        pass
