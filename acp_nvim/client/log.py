"""A bounded, in-memory protocol log: both directions plus the agent's stderr.

Appends come from the worker thread, reads (``:AcpLog``) from the pynvim
thread; ``deque.append`` and ``list(deque)`` are atomic, so no lock is needed.
Long lines are cut so one 50 MB message cannot hold the memory.
"""

from __future__ import annotations

__all__ = ["ProtocolLog"]

import collections
import time

_MAX_LINE = 4000


class ProtocolLog:
    def __init__(self, max_lines: int) -> None:
        # Raw entries (wall time, source, direction, data cut to _MAX_LINE, full
        # length): a 10k-chunk stream logs 10k lines, formatted only when read.
        self._entries: collections.deque[tuple[float, str, str, bytes | str, int]] = (
            collections.deque(maxlen=max_lines)
        )

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, source: str, direction: str, *lines: bytes | str) -> None:
        """Record lines; ``direction`` is ``>>`` (to agent), ``<<`` or ``!!`` (stderr)."""
        now = time.time()
        self._entries.extend((now, source, direction, d[:_MAX_LINE], len(d)) for d in lines)

    def lines(self) -> list[str]:
        """The log as text, oldest first."""
        return [_format(*entry) for entry in list(self._entries)]


def _format(when: float, source: str, direction: str, data: bytes | str, size: int) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if size > len(data):
        unit = "bytes" if isinstance(data, bytes) else "chars"
        text = f"{text}… ({size} {unit})"
    return f"{time.strftime('%H:%M:%S', time.localtime(when))} {source} {direction} {text}"
