"""Python copies of the file buffers an agent reads, kept current by Neovim.

Reading a loaded 100k-line buffer out of Neovim costs ~70 ms inside its main
loop (getbufline + join) and as much again to move 4.4 MB over msgpack, every
time. Instead, the first read of a buffer attaches to it (``nvim_buf_attach``
from our channel, no callbacks in Neovim) and seeds a copy; Neovim then sends
each change as an ``nvim_buf_lines_event`` and the copy is patched here. A read
asks Lua only for the buffer's changedtick and options: when the tick equals
the copy's, the copy is the text (decision 0009).

The tick is the only proof: the copy is used only when it was seeded or
patched up to exactly the buffer's current changedtick. An event we cannot
place (no seed yet, no tick) unseeds the copy, and the next read seeds it
again, so a lost or odd event costs speed, never correctness.

Everything here runs on the pynvim thread: events arrive there, and reads run
there between their requests, so the copies need no lock.
"""

from __future__ import annotations

__all__ = ["BufferMirrors", "nul_bytes"]

import msgspec


class _Copy(msgspec.Struct):
    """One buffer's text at ``tick``: ``lines``, ``joined`` (by ``\\n``), or both."""

    tick: int
    lines: list[str] | None = None
    joined: str | None = None

    def text(self) -> str:
        if self.joined is None:
            assert self.lines is not None
            self.joined = "\n".join(self.lines)
        return self.joined

    def patch(self, first: int, last: int, data: list[str]) -> None:
        if self.lines is None:
            assert self.joined is not None
            self.lines = self.joined.split("\n")
        self.lines[first : len(self.lines) if last == -1 else last] = [nul_bytes(s) for s in data]
        self.joined = None


def nul_bytes(line: str) -> str:
    """A line as the file holds it: Neovim's API shows a NUL byte as ``\n``."""
    return line.replace("\n", "\0") if "\n" in line else line


class BufferMirrors:
    """The attached buffers and, for those seeded, their text at a changedtick."""

    def __init__(self) -> None:
        self._attached: set[int] = set()
        self._copies: dict[int, _Copy] = {}
        # Last buffer seen holding a path: lets a read skip the lookup round trip.
        self._by_path: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<BufferMirrors {len(self._attached)} attached, {len(self._copies)} seeded>"

    def is_attached(self, buf: int) -> bool:
        return buf in self._attached

    def mark_attached(self, buf: int) -> None:
        """Neovim now sends ``buf``'s changes to us."""
        self._attached.add(buf)

    def known(self, path: str) -> tuple[int, int] | None:
        """(buffer, changedtick) of the seeded copy last read for ``path``."""
        buf = self._by_path.get(path)
        copy = self._copies.get(buf) if buf is not None else None
        return (buf, copy.tick) if buf is not None and copy is not None else None

    def seed(self, path: str, buf: int, tick: int, joined: str) -> None:
        """``buf`` (attached) holds ``joined`` at ``tick``; later events patch it."""
        if buf in self._attached:
            self._copies[buf] = _Copy(tick, joined=joined)
            self._by_path[path] = buf

    def text(self, buf: int, tick: int) -> str | None:
        """``buf``'s lines joined by ``\\n`` if the copy is at ``tick``, else None."""
        copy = self._copies.get(buf)
        return copy.text() if copy is not None and copy.tick == tick else None

    # -- Neovim's buffer-update events (api-buffer-updates) ---------------------------

    def on_lines(self, buf: int, tick: int | None, first: int, last: int, data: list[str]) -> None:
        copy = self._copies.get(buf)
        if copy is None:
            return
        if tick is None:  # no tick to prove the result by ('inccommand' previews)
            del self._copies[buf]
            return
        if tick > copy.tick:  # older changes are already in the seed
            copy.patch(first, last, data)
            copy.tick = tick

    def on_changedtick(self, buf: int, tick: int) -> None:
        copy = self._copies.get(buf)
        if copy is not None and tick > copy.tick:
            copy.tick = tick

    def on_detach(self, buf: int) -> None:
        """Neovim stopped sending: the buffer was unloaded or reloaded."""
        self._attached.discard(buf)
        self._copies.pop(buf, None)
