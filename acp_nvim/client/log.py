"""A bounded, in-memory protocol log: both directions plus the agent's stderr.

Appends come from the worker thread, reads (``:AcpLog``) from the pynvim
thread; ``deque.append`` and ``list(deque)`` are atomic, so no lock is needed.
Long lines are cut so one 50 MB message cannot hold the memory. Secrets are
left out: users paste the log into bug reports, so the values of environment
variables and HTTP headers in messages (``mcpServers`` with the editor MCP
server's token, ``terminal/create``, login methods) are replaced; the wire keeps
them.
"""

from __future__ import annotations

__all__ = ["ProtocolLog"]

import collections
import json
import time
from typing import Any

from acp_nvim.protocol.framing import lines_of

_MAX_LINE = 4000
# Past this size a line with secrets is not read as JSON to hide them (in the log only).
_REDACTED_MAX = 1 << 20
# Keys whose values are lists of {name, value} (ACP's env variables and HTTP headers):
# what the values say stays out of the log.
_SECRET_KEYS = ("env", "headers")
_SECRET_MARKS = tuple(f'"{key}"'.encode() for key in _SECRET_KEYS)
HIDDEN = "<redacted>"


class ProtocolLog:
    def __init__(self, max_lines: int) -> None:
        self._max_lines = max_lines
        # One entry per add (a stream's read holds hundreds of lines): wall time,
        # source, direction, the lines as they came (cut to _MAX_LINE) or a read's
        # block of them, their full sizes when one was cut, and how many there are.
        # Formatted, and secrets taken out, only when read: a stream logs 10k lines
        # a second, a user reads the log now and then.
        self._entries: collections.deque[_Entry] = collections.deque()
        self._count = 0  # lines in _entries

    def __len__(self) -> int:
        return min(self._count, self._max_lines)

    def add(self, source: str, direction: str, *lines: bytes | str) -> None:
        """Record lines; ``direction`` is ``>>`` (to agent), ``<<`` or ``!!`` (stderr)."""
        if not lines:
            return
        sizes = None
        if max(map(len, lines)) > _MAX_LINE:
            traffic = direction != "!!"
            kept = [_kept(line, traffic) for line in lines]
            lines = tuple(line for line, _ in kept)
            sizes = tuple(size for _, size in kept)
        self._append((time.time(), source, direction, lines, sizes, len(lines)))

    def traffic(self, source: str, direction: str, data: bytes, count: int) -> None:
        """Record a read's block of ``count`` lines (`LineReader.receive_block`), or a
        line sent. A block is split, cut and hidden when read, not here (a stream's
        reads come by the thousand): kept whole while it is no bigger than its lines
        cut would be, so that the log's memory stays bounded as `add` bounds it."""
        if count == 1 and b"\n" not in data:  # a big line is cut, not split
            self.add(source, direction, data)
        elif len(data) > _MAX_LINE * count:
            self.add(source, direction, *lines_of(data))
        elif count:
            self._append((time.time(), source, direction, data, None, count))

    def _append(self, entry: _Entry) -> None:
        self._entries.append(entry)
        self._count += entry[5]
        while self._count - self._entries[0][5] >= self._max_lines:
            self._count -= self._entries.popleft()[5]

    def lines(self) -> list[str]:
        """The log as text, oldest first."""
        shown: list[str] = []
        for when, source, direction, lines, sizes, _ in list(self._entries):
            head = f"{time.strftime('%H:%M:%S', time.localtime(when))} {source} {direction} "
            if isinstance(lines, bytes):  # a read's block: what `add` would have kept
                kept = [_kept(line, True) for line in lines_of(lines)]
                lines, sizes = tuple(line for line, _ in kept), tuple(size for _, size in kept)
            for i, line in enumerate(lines):
                if isinstance(line, bytes) and direction != "!!":
                    line = redacted(line)
                shown.append(head + _text(line, sizes[i] if sizes else len(line)))
        return shown[-self._max_lines :]


_Entry = tuple[float, str, str, tuple[bytes | str, ...] | bytes, tuple[int, ...] | None, int]


def _kept(data: bytes | str, traffic: bool) -> tuple[bytes | str, int]:
    """What the log keeps of a line, and the size of what it cut that from: the first
    `_MAX_LINE` characters, secrets hidden in ``traffic``. A secret's value follows its
    key, so only a line whose kept part names one is read as JSON (scanning all of a
    10 MB line for the keys held the loop 12-19 ms, issue 29.7); one that big too is
    not shown."""
    head = data[:_MAX_LINE]
    if not (traffic and isinstance(data, bytes) and any(m in head for m in _SECRET_MARKS)):
        return head, len(data)
    if len(data) > _REDACTED_MAX:
        return b"(a line naming env or headers, too long to hide them in)", len(data)
    shown = redacted(data)
    return shown[:_MAX_LINE], len(shown)


def _text(data: bytes | str, size: int) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if size > len(data):
        unit = "bytes" if isinstance(data, bytes) else "chars"
        text = f"{text}… ({size} {unit})"
    return text


def redacted(line: bytes) -> bytes:
    """A JSON-RPC ``line`` with the values of its env variables and headers replaced
    (see the module docstring); ``line`` itself when it has none, or is no JSON."""
    if not any(mark in line for mark in _SECRET_MARKS):
        return line
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not _hide(message):
        return line
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def _hide(message: Any) -> bool:
    """Replace, in place, the values under :data:`_SECRET_KEYS` anywhere in
    ``message``; whether there were any. Walked without recursion (a line may nest
    deeper than Python's stack)."""
    hidden = False
    stack = [message]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, value in item.items():
                if key in _SECRET_KEYS and isinstance(value, list):
                    for entry in value:
                        if isinstance(entry, dict) and "value" in entry:
                            entry["value"] = HIDDEN
                            hidden = True
                elif key in _SECRET_KEYS and isinstance(value, dict):
                    for name in value:
                        value[name] = HIDDEN
                        hidden = True
                else:
                    stack.append(value)
    return hidden
