"""Git for the services: baselines of files an agent's commands change behind our
back, and the one way git is run (:func:`git`, which keeps git's own message).

A file that a shell command rewrites, with no buffer open and no tool call
naming it, has no "before" text anywhere but on disk, where it is already
gone. In a git work tree it is still known: a file that was clean at turn
start equals its index entry, so ``git show :path`` is its baseline. Files
that were dirty (or untracked) at turn start are few; the review service
snapshots their text instead. Outside git there is no such source and those
files are not recorded (doc/decisions/0005-review-baselines.md).
"""

from __future__ import annotations

__all__ = ["GitError", "GitState", "IndexedBytes", "dirty_files", "git"]

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import NamedTuple

from acp_nvim.client.services.files import MAX_BYTES
from acp_nvim.client.text import DecodedFile, decode_file

_TIMEOUT = 2.0
_PIECE = 1 << 20  # how much of a blob is read at a time
_NICE = shutil.which("nice")


class IndexedBytes(NamedTuple):
    """A file's bytes as git holds them: ``data`` whole (``whole``), else its first
    bytes, one past the limit asked for, and ``digest`` the SHA-256 of them all."""

    data: bytes
    whole: bool
    digest: str | None = None


class GitError(Exception):
    """Git failed, or could not run; ``str()`` is git's own message."""


def git(cwd: str, *args: str, nice: bool = False, timeout: float = _TIMEOUT) -> bytes:
    """Git's output for ``git -C cwd args`` (``nice``: at a low CPU priority).

    Raises:
        GitError: git is not installed, took longer than ``timeout`` seconds, or
            failed (its message, e.g. ``fatal: not a git repository ...``).
    """
    prefix = [_NICE, "-n", "10"] if nice and _NICE is not None else []
    try:
        done = subprocess.run(
            [*prefix, "git", "-C", cwd, *args],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, ValueError) as err:  # ValueError: a NUL in a path
        raise GitError(f"cannot run git: {err}") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than {timeout:g} s") from None
    if done.returncode != 0:
        message = os.fsdecode(done.stderr).strip() or f"git {args[0]} failed"
        raise GitError(message)
    return done.stdout


def dirty_files(root: str, status: bytes) -> set[str]:
    """The files ``git status --porcelain=v1 -z`` of work tree ``root`` lists
    (modified, added, deleted, untracked; both sides of a rename), absolute."""
    dirty: set[str] = set()
    entries = iter(status.split(b"\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        dirty.add(os.path.join(root, os.fsdecode(entry[3:])))
        if entry[:1] in (b"R", b"C"):  # a rename/copy is followed by its source path
            source = next(entries, b"")
            dirty.add(os.path.join(root, os.fsdecode(source)))
    return dirty


class GitState:
    """Which files under a git work tree were dirty when the turn started (or may
    have been: a file counted dirty that is not only costs a snapshot of its text)."""

    def __init__(self, root: str, dirty: set[str], index: str) -> None:
        self.root = root
        self.dirty = dirty
        self.index = index  # git's index file for this work tree

    def __repr__(self) -> str:
        return f"<GitState {self.root} {len(self.dirty)} dirty>"

    @classmethod
    def read(cls, cwd: str, on_index: Callable[[str], object] | None = None) -> GitState | None:
        """The state of the work tree holding ``cwd``; None outside git (or no git).
        ``on_index`` is given git's index file before the status is read (so a
        watch on it misses no change after)."""
        if shutil.which("git") is None:
            return None
        try:
            top, index = os.fsdecode(
                git(cwd, "rev-parse", "--show-toplevel", "--git-path", "index")
            ).splitlines()
            root = os.path.normpath(top)
            index = os.path.normpath(os.path.join(cwd, index))
            if on_index is not None:
                on_index(index)
            # One thread, at a low CPU priority: git's index preload took every core
            # for its lstats of a 20k-file tree, and Neovim and the event loop waited.
            # No optional locks: the status does not rewrite the index (a watch on it
            # would take our own read for a change).
            status = git(
                root,
                "--no-optional-locks",
                "-c",
                "core.preloadIndex=false",
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                nice=True,
            )
        except (GitError, ValueError):  # ValueError: not the two lines asked for
            return None
        return cls(root, dirty_files(root, status), index)

    def clean_file(self, path: str) -> DecodedFile | None:
        """The file ``path`` was at turn start if git knows it (clean and tracked)."""
        return None if path in self.dirty else self.indexed_file(path)

    def clean_bytes(self, path: str, limit: int) -> IndexedBytes | None:
        """The bytes ``path`` held at turn start if git knows them (clean and tracked):
        a file with no text, which :meth:`clean_file` does not give. Over ``limit``
        bytes, only their first and their digest: read a piece at a time, such a
        file is never held whole (as a turn start keeps none over its limit)."""
        if path in self.dirty or os.path.commonpath([self.root, path]) != self.root:
            return None
        return _read_blob(self.root, f":{os.path.relpath(path, self.root)}", limit)

    def indexed_file(self, path: str) -> DecodedFile | None:
        """The file ``path`` as git's index holds it, if tracked (dirty or not) and a
        text a review can hold (at most ``files.MAX_BYTES``, as a file on disk is read).
        Read a piece at a time and given up at the first bytes showing it is not: a
        500 MB asset is never held whole to find it has no text."""
        if os.path.commonpath([self.root, path]) != self.root:
            return None
        spec = f":{os.path.relpath(path, self.root)}"
        found = _read_blob(self.root, spec, MAX_BYTES, text=True)
        return None if found is None else decode_file(found.data)


def _read_blob(root: str, spec: str, limit: int, *, text: bool = False) -> IndexedBytes | None:
    """The blob ``spec`` of the repository at ``root`` (None: git has none), at most
    ``limit`` bytes of it kept (see :class:`IndexedBytes`); ``text``: None as soon
    as it is shown no text of at most ``limit`` bytes, the rest left unread."""
    command = ["git", "-C", root, "cat-file", "blob", spec]
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except (OSError, ValueError):  # ValueError: a NUL in a path
        return None
    digest, head = hashlib.sha256(), bytearray()
    with process:
        assert process.stdout is not None
        while piece := process.stdout.read(_PIECE):
            digest.update(piece)
            if len(head) <= limit:
                head += piece[: limit + 1 - len(head)]
            if text and (len(head) > limit or _has_no_text(head)):
                process.kill()
                return None
    if process.returncode != 0:
        return None
    whole = len(head) <= limit
    return IndexedBytes(bytes(head), whole, None if whole else digest.hexdigest())


def _has_no_text(start: bytearray) -> bool:
    """Whether a file beginning with ``start`` has no text: a NUL byte in its first
    8 KiB (UTF-16's NUL bytes are not)."""
    return "\0" in decode_file(bytes(start[:8192])).text
