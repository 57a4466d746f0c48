"""The context of the mentions that name more than one file's text: ``@dir/``,
``@quickfix``, ``@diff`` and ``@https://...`` (services.context hands them here).
Each becomes one :class:`~acp_nvim.client.session.model.Attachment`; which wire
form it takes stays the adapter's choice (``context.prompt_form``)."""

from __future__ import annotations

__all__ = ["MAX_DIRECTORY_FILES", "directory", "quickfix", "url", "work_tree_diff"]

import difflib
import os
import re
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread

from acp_nvim.client.services.disk_changes import scan_tree
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.services.git import GitError, git
from acp_nvim.client.session.model import Attachment
from acp_nvim.client.text import decode_file

# Files of a directory sent at most (as links, or named in its listing).
MAX_DIRECTORY_FILES = 100
_URL = re.compile(r"https?://[^\s]+")


async def directory(path: str, label: str) -> tuple[Attachment, str | None]:
    """``@dir/``: its files (not those of .git, node_modules...), at most
    :data:`MAX_DIRECTORY_FILES`; the text lists them, ``links`` are their URIs."""
    if not os.path.isdir(path):
        raise ServiceError(f"{label}: no such directory")
    scan = await anyio.to_thread.run_sync(
        partial(scan_tree, path, max_files=MAX_DIRECTORY_FILES + 1)
    )
    files = sorted(scan.stats)
    warning = None
    if len(files) > MAX_DIRECTORY_FILES or not scan.complete:
        files = files[:MAX_DIRECTORY_FILES]
        warning = f"{label} holds more than {MAX_DIRECTORY_FILES} files: the first ones sent"
    listing = "\n".join(os.path.relpath(f, path) for f in files) or "(no files)"
    links = tuple(Path(f).as_uri() for f in files)
    folder = label.rstrip("/") + "/"
    return Attachment("directory", folder, Path(path).as_uri(), listing, links=links), warning


def quickfix(entries: Sequence[dict[str, Any]], cwd: str) -> Attachment:
    """``@quickfix``: the quickfix list as ``path:line:col: text`` lines."""
    lines = []
    for entry in entries:
        path = str(entry.get("path") or "")
        where = os.path.relpath(path, cwd) if path else "?"
        where = path if where.startswith("..") else where
        kind = f"{entry['type']}: " if entry.get("type") else ""
        at = f"{where}:{entry.get('lnum', 0)}:{entry.get('col', 0)}"
        lines.append(f"{at}: {kind}{entry.get('text', '')}")
    text = "\n".join(lines) or "(the quickfix list is empty)"
    return Attachment("quickfix", "quickfix list", Path(cwd).as_uri() + "#quickfix", text)


def url(address: str) -> Attachment:
    """``@https://...``: a link the agent fetches itself."""
    if not _URL.fullmatch(address):
        raise ServiceError(f"{address}: not a web address (http or https)")
    return Attachment("url", address, address)


async def work_tree_diff(cwd: str, unsaved: Sequence[dict[str, Any]]) -> Attachment:
    """``@diff``: the work tree's changes against HEAD, with the unsaved text of the
    buffers in ``unsaved`` (``{path, text}``) in place of their files'."""
    return await anyio.to_thread.run_sync(_diff, cwd, unsaved)


def _diff(cwd: str, unsaved: Sequence[dict[str, Any]]) -> Attachment:
    try:
        top = git(cwd, "rev-parse", "--show-toplevel")
    except GitError as err:
        raise ServiceError(f"@diff: {err}") from None
    root = os.path.normpath(os.fsdecode(top).strip())
    buffers = {
        os.path.relpath(str(b["path"]), root): str(b.get("text") or "")
        for b in unsaved
        if b.get("path") and os.path.commonpath([root, str(b["path"])]) == root
    }
    try:
        raw = git(root, "diff", "HEAD", "--no-color", "--no-ext-diff")
    except GitError:  # no commit yet: everything staged is new
        raw = _git_or_none(root, "diff", "--cached", "--no-color", "--no-ext-diff") or b""
    sections = [s for s in re.split(r"(?m)^(?=diff --git )", os.fsdecode(raw)) if s]
    kept = [s for s in sections if _section_path(s) not in buffers]
    for rel, text in sorted(buffers.items()):
        head = _git_or_none(root, "show", f"HEAD:{rel}")
        before = decode_file(head).text if head is not None else ""
        lines = difflib.unified_diff(
            before.splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"a/{rel}" if head is not None else "/dev/null",
            f"b/{rel}",
        )
        patch = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        if patch:
            kept.append(f"diff --git a/{rel} b/{rel} (unsaved buffer)\n{patch}")
    text = "".join(kept) or "(no changes against HEAD)"
    return Attachment("diff", "git diff", Path(root).as_uri(), text, "text/x-diff")


def _git_or_none(cwd: str, *args: str) -> bytes | None:
    """Git's output, or None when it fails (no such commit or file)."""
    try:
        return git(cwd, *args)
    except GitError:
        return None


def _section_path(section: str) -> str | None:
    first = section.split("\n", 1)[0]
    match = re.match(r"diff --git a/.* b/(.*)$", first)
    return match[1] if match else None
