"""glibc malloc set to give the host's memory back (decisions 0053, 0059).

Elsewhere than glibc (macOS, musl) nothing here does anything.
"""

from __future__ import annotations

__all__ = ["give_back", "set_up"]

import ctypes
from collections.abc import Callable
from typing import Any

# glibc's mallopt parameters (malloc.h).
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def _libc(name: str) -> Callable[..., Any] | None:
    try:
        function: Callable[..., Any] = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    return function


_trim = _libc("malloc_trim")


def set_up() -> None:
    """Two arenas, not one per thread (what the history writer's thread freed stayed
    with its own), and blocks past 1 MiB always mapped apart, unmapped when freed (a
    long message's text, joined for the history, otherwise raised the threshold and
    stayed in the heap). Python RSS after 100k chunks and 1,000 tool calls: 89-99 MB,
    then 74-79 (59-61 with the history off)."""
    mallopt = _libc("mallopt")
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, 2)
        mallopt(_M_MMAP_THRESHOLD, 1024 * 1024)


def give_back() -> None:
    """Return the free memory the arenas keep to the system (``malloc_trim``: ~0.3 ms
    after a 100k-chunk turn; ctypes lets the GIL go meanwhile). Freed memory stays
    in the arena of the thread that used it; after a turn of a chat whose agent was
    not the host's first, 15-20 MB of it, and as much after the history's write of
    that turn (decision 0059)."""
    if _trim is not None:
        _trim(0)
