"""Baselines from git for files an agent's commands change behind our back.

A file that a shell command rewrites, with no buffer open and no tool call
naming it, has no "before" text anywhere but on disk, where it is already
gone. In a git work tree it is still known: a file that was clean at turn
start equals its index entry, so ``git show :path`` is its baseline. Files
that were dirty (or untracked) at turn start are few; the review service
snapshots their text instead. Outside git there is no such source and those
files are not recorded (doc/decisions/0005-review-baselines.md).
"""

from __future__ import annotations

__all__ = ["GitState", "git_output"]

import os
import shutil
import subprocess

from acp_nvim.client.text import decode_file

_TIMEOUT = 2.0


class GitState:
    """Which files under a git work tree were dirty when the turn started."""

    def __init__(self, root: str, dirty: set[str]) -> None:
        self.root = root
        self.dirty = dirty

    def __repr__(self) -> str:
        return f"<GitState {self.root} {len(self.dirty)} dirty>"

    @classmethod
    def read(cls, cwd: str) -> GitState | None:
        """The state of the work tree holding ``cwd``; None outside git (or no git)."""
        if shutil.which("git") is None:
            return None
        top = git_output(cwd, "rev-parse", "--show-toplevel")
        if top is None:
            return None
        root = os.path.normpath(os.fsdecode(top).strip())
        # One thread, at a low CPU priority: git's index preload took every core for
        # its lstats of a 20k-file tree, and Neovim and the event loop waited for one.
        status = git_output(
            root,
            "-c",
            "core.preloadIndex=false",
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            nice=True,
        )
        if status is None:
            return None
        dirty: set[str] = set()
        entries = iter(status.split(b"\0"))
        for entry in entries:
            if len(entry) < 4:
                continue
            dirty.add(os.path.join(root, os.fsdecode(entry[3:])))
            if entry[:1] in (b"R", b"C"):  # a rename/copy is followed by its source path
                source = next(entries, b"")
                dirty.add(os.path.join(root, os.fsdecode(source)))
        return cls(root, dirty)

    def clean_text(self, path: str) -> str | None:
        """The text ``path`` had at turn start if git knows it (clean and tracked)."""
        if path in self.dirty or os.path.commonpath([self.root, path]) != self.root:
            return None
        data = git_output(self.root, "show", f":{os.path.relpath(path, self.root)}")
        if data is None or b"\0" in data[:8192]:
            return None
        return decode_file(data).text


_NICE = shutil.which("nice")


def git_output(cwd: str, *args: str, nice: bool = False) -> bytes | None:
    """What ``git -C cwd args...`` prints; None when it fails (or there is no git)."""
    prefix = [_NICE, "-n", "10"] if nice and _NICE is not None else []
    try:
        done = subprocess.run(
            [*prefix, "git", "-C", cwd, *args],
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, ValueError, subprocess.TimeoutExpired):  # ValueError: a NUL in a path
        return None
    return done.stdout if done.returncode == 0 else None
