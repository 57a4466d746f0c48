"""Where a chat's agent works: the session's directory, the workspace roots beside
it, and for a worktree chat the git worktree that directory lies in.

Each chat has its own (decision 0045): the session requests carry its ``cwd`` and
roots (``additionalDirectories``), and every service of the chat reads its
directories here, not the agent process's: the file access policy, the review's
scan, terminals, the editor MCP tools, ``@`` completion (in Lua, from the chat's
status). Plain data: the git work of a worktree is ``services.worktrees``.
"""

from __future__ import annotations

__all__ = ["KeptWorktree", "Workspace", "Worktree", "file_label", "shown_path", "uri_path"]

import os
import re
import urllib.parse

import msgspec

from acp_nvim.client.editor import StatusFields


def _under(path: str, top: str) -> str | None:
    """``path`` relative to directory ``top`` when it lies in it, else None."""
    rel = os.path.relpath(os.path.normpath(path), top)
    return None if rel == ".." or rel.startswith(".." + os.sep) else rel


def _under_real(path: str, top: str) -> str | None:
    """``path`` relative to directory ``top`` (its real path: git's, or resolved)
    when it lies in it, also through a symlinked directory (the project opened
    through a link to it; an agent naming its files as its process sees them)."""
    rel = _under(path, top)
    if rel is None and os.path.isabs(path):
        # Its folder resolved, not the file: a symlink of the project is its own file.
        folder, name = os.path.split(os.path.normpath(path))
        rel = _under(os.path.join(os.path.realpath(folder), name), top)
    return rel


def shown_path(path: str, cwd: str) -> str:
    """How a file is named to the user: relative to the session's directory ``cwd``
    where it lies in it, else in full."""
    return _under(path, cwd) or path


# A selection's lines in a file URI's fragment, as the client sends one (#L10-L20).
_LINES = re.compile(r"L(\d+)-L(\d+)")


def uri_path(uri: str) -> str | None:
    """The path a ``file://`` URI of this machine names, decoded; None for any other.

    Raises:
        ValueError: ``uri`` cannot be parsed (``file://[::1/``).
    """
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return urllib.parse.unquote(parsed.path)


def file_label(uri: str, cwd: str) -> str | None:
    """How a ``file://`` URI is named to the user (``a.py``, ``a.py:10-20``); None for
    any other URI, or none at all (an agent's ``file://[::1/``)."""
    try:
        path = uri_path(uri)
    except ValueError:
        return None
    if path is None:
        return None
    lines = _LINES.fullmatch(urllib.parse.urlparse(uri).fragment)
    label = shown_path(path, cwd)
    return f"{label}:{lines[1]}-{lines[2]}" if lines else label


class Worktree(msgspec.Struct, frozen=True):
    """A git worktree a chat's agent works in, apart from the user's work tree
    (decision 0046): ``path`` its top, on a new ``branch`` made from commit ``base``
    of the work tree whose top is ``project`` (both real paths: no symlink in them,
    as git and Neovim name files). ``mark``: what tells it from a later
    worktree made under its name once it is gone (``services.worktrees.still_there``;
    empty in one kept before marks were)."""

    path: str
    branch: str
    project: str
    base: str
    mark: str = ""

    def user_path(self, path: str) -> str | None:
        """The user's file that ``path`` of the worktree stands for; None outside it."""
        rel = _under_real(path, self.path)
        return None if rel is None else os.path.normpath(os.path.join(self.project, rel))

    def agent_path(self, path: str) -> str | None:
        """The worktree's copy of the user's file ``path``; None outside the project."""
        rel = _under_real(path, self.project)
        return None if rel is None else os.path.normpath(os.path.join(self.path, rel))


class KeptWorktree(msgspec.Struct, frozen=True):
    """A worktree chat's ``worktree`` and its directory ``cwd`` there, as the
    history keeps them: reopened while the worktree is kept, the chat goes on in it."""

    worktree: Worktree
    cwd: str


class Workspace(msgspec.Struct, eq=False):
    """``cwd``: the session's directory (absolute; the base of relative paths);
    ``roots``: more directories the agent works in (absolute), in the order given.
    ``worktree``: the worktree ``cwd`` lies in, for a worktree chat."""

    cwd: str
    roots: list[str] = msgspec.field(default_factory=list)
    worktree: Worktree | None = None
    # The chat said that its agent was not told of the roots (it says so once).
    untold_said: bool = False

    def __repr__(self) -> str:
        worktree = f" worktree {self.worktree.branch}" if self.worktree is not None else ""
        return f"<Workspace {self.cwd} +{len(self.roots)} roots{worktree}>"

    @property
    def dirs(self) -> list[str]:
        """The session's effective root set: its directory, then the roots."""
        return [self.cwd, *self.roots]

    @property
    def user_cwd(self) -> str:
        """The user's directory the chat works for: its own, or for a worktree chat
        the one of the user's work tree that its directory stands for."""
        if self.worktree is None:
            return self.cwd
        return self.worktree.user_path(self.cwd) or self.worktree.project

    def kept(self) -> KeptWorktree | None:
        """What the history keeps of the worktree; None for a chat working in the
        user's own directory."""
        return None if self.worktree is None else KeptWorktree(self.worktree, self.cwd)

    def status(self) -> StatusFields:
        """The chat status fields that show it (``status().cwd``, ``roots``, the
        winbar, ``chats()``)."""
        worktree = self.worktree
        return {
            "cwd": self.cwd,
            "roots": list(self.roots),
            "worktree": None
            if worktree is None
            else {"path": worktree.path, "branch": worktree.branch, "project": worktree.project},
        }
