"""Review of agent changes: per-turn changesets, hunks, merges and patches.

Pure Python, no Neovim and no I/O: callers pass texts in and write the texts
they get back. See ``ReviewStore`` for the session-level entry point.
"""

from __future__ import annotations

__all__ = [
    "BinaryChange",
    "BinaryStatus",
    "Changeset",
    "Conflict",
    "FileChange",
    "FileKind",
    "FilePatch",
    "Hunk",
    "HunkStatus",
    "LineEdit",
    "MergeResult",
    "PatchError",
    "PatchHunk",
    "RestoreOutcome",
    "ReviewError",
    "ReviewStore",
    "WriteOutcome",
    "apply_patch",
    "binary_about",
    "compute_hunks",
    "format_unified",
    "held_rows",
    "line_edits",
    "merge3",
    "parse_unified",
    "reverse_patch",
    "split_lines",
]

from ._binary import BinaryChange, BinaryStatus, binary_about
from ._changeset import Changeset, RestoreOutcome, ReviewStore, WriteOutcome
from ._diff import (
    Hunk,
    HunkStatus,
    LineEdit,
    compute_hunks,
    format_unified,
    line_edits,
    split_lines,
)
from ._filechange import FileChange, FileKind, ReviewError
from ._merge import Conflict, MergeResult, held_rows, merge3
from ._patch import FilePatch, PatchError, PatchHunk, apply_patch, parse_unified, reverse_patch
