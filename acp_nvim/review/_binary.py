"""A file with no text (a NUL byte in it) that the agent made, changed or deleted in
one turn: reviewed as a whole, never as hunks.

Its bytes from before the turn are kept when the turn start kept them (decision
0099): a reject then puts them back; without them it cannot.

Nothing here does I/O: callers write or remove the file as a decision says.
"""

from __future__ import annotations

__all__ = ["BinaryChange", "BinaryStatus", "binary_about"]

from typing import Any, Literal

import msgspec

from ._filechange import FileKind, ReviewError

BinaryStatus = Literal["pending", "accepted", "rejected"]


class BinaryChange(msgspec.Struct):
    """``path`` in turn ``turn``: ``existed`` before it (``before``: its bytes then,
    None when not kept; ``before_size``: its size, None when unknown), ``size`` now
    (None: deleted); ``left``: the SHA-256 of the bytes the agent left (None: it
    deleted the file, or they could not be read), to tell a later write by the
    user or another tool, which a reject must not undo unseen; ``before_digest``:
    the SHA-256 of its bytes before where they were read but too large to keep
    (None: not read, or kept), which tells the file still holds them."""

    path: str
    turn: int
    kind: FileKind
    existed: bool
    before: bytes | None
    before_size: int | None
    size: int | None
    left: str | None = None
    status: BinaryStatus = "pending"
    before_digest: str | None = None

    @property
    def open(self) -> bool:
        return self.status == "pending"

    @property
    def restorable(self) -> bool:
        """Whether a reject can put the file back as it was: remove a file the turn
        made, write back the bytes of one it changed or deleted."""
        return not self.existed or self.before is not None

    def changed(self, size: int | None, left: str | None) -> None:
        """The agent changed the file again (``size`` now; None: deleted; ``left``:
        its digest): it waits for a decision again."""
        self.size, self.left, self.status = size, left, "pending"

    def decide(self, decision: Literal["accept", "reject"]) -> bytes | None:
        """Accept, or reject: the bytes the file must hold again (None: remove it).

        Raises:
            ReviewError: an accept of a change already rejected (as a text hunk's:
                its bytes are gone from the file), a reject of a file whose bytes
                before were not kept.
        """
        if decision == "accept" and self.status == "rejected":
            raise ReviewError(f"{self.path}: its change in turn {self.turn} is already rejected")
        if decision == "accept":
            self.status = "accepted"
            return None
        if not self.restorable:
            raise ReviewError(
                f"{self.path}: its bytes from before turn {self.turn} were not kept "
                "(larger than the snapshot budget): it cannot be restored"
            )
        self.status = "rejected"
        return self.before

    @property
    def about(self) -> str:
        """What the review says of it: ``binary, 2.1 KB`` (its size now, else before)."""
        return binary_about(self.size if self.size is not None else self.before_size)

    def summary(self) -> dict[str, Any]:
        """Plain data for Lua, shaped as a text file's (no hunks) plus ``binary``."""
        return {
            "path": self.path,
            "kind": self.kind,
            "turn": self.turn,
            "created": not self.existed and self.size is not None,
            "deleted": self.existed and self.size is None,
            "open": self.open,
            "hunks": [],
            "binary": {
                "status": self.status,
                "size": self.size,
                "before_size": self.before_size,
                "restorable": self.restorable,
                "about": self.about,
            },
        }


def binary_about(size: int | None) -> str:
    """What the review says of a file with no text of ``size`` bytes (None: unknown):
    ``binary, 2.1 KB``."""
    return "binary" if size is None else f"binary, {_sized(size)}"


def _sized(count: int) -> str:
    """``count`` bytes as people read a size: 512 bytes, 2.1 KB, 3.4 MB."""
    if count < 1024:
        return f"{count} byte{'s' if count != 1 else ''}"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KB"
    return f"{count / 1024 / 1024:.1f} MB"
