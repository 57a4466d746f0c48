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
    def __init__(self, max_lines: int = 5000) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=max_lines)

    def __len__(self) -> int:
        return len(self._lines)

    def add(self, source: str, direction: str, data: bytes | str) -> None:
        """Record one line; ``direction`` is ``>>`` (to agent), ``<<`` or ``!!`` (stderr)."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if len(text) > _MAX_LINE:
            text = f"{text[:_MAX_LINE]}… ({len(text)} chars)"
        stamp = time.strftime("%H:%M:%S")
        self._lines.append(f"{stamp} {source} {direction} {text}")

    def lines(self) -> list[str]:
        return list(self._lines)
