"""The chats whose agent is starting, and the restarts asked of them meanwhile."""

from __future__ import annotations

__all__ = ["Starts"]

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class Starts:
    """Per chat, the wait for its agent's start (a cancel scope), and the restart under
    way: from its ask until the chat's new start waits. A restart asked while another
    is under way is that one: asked twice, the chat starts once (two at once each
    began a session on the one agent, the first left behind). One asked while a start
    waits cancels it, and that start ends quietly."""

    def __init__(self) -> None:
        self._waiting: dict[int, anyio.CancelScope] = {}
        self._restarts: dict[int, anyio.Event] = {}  # set once the start it cancelled ended

    def __repr__(self) -> str:
        return f"<Starts {len(self._waiting)} waiting, {len(self._restarts)} restarting>"

    def __len__(self) -> int:
        return len(self._waiting)

    def waiting(self, chat_id: int) -> bool:
        return chat_id in self._waiting

    def cancel(self, chat_id: int) -> bool:
        """Cancel chat ``chat_id``'s start; False when none waits."""
        scope = self._waiting.get(chat_id)
        if scope is not None:
            scope.cancel()
        return scope is not None

    @asynccontextmanager
    async def restart(self, chat_id: int) -> AsyncIterator[bool]:
        """Restart chat ``chat_id`` within: False when a restart of it is under way
        already (nothing to do). A start that waited is cancelled and over on entry."""
        if chat_id in self._restarts:
            yield False
            return
        ended = self._restarts[chat_id] = anyio.Event()
        try:
            if self.cancel(chat_id):
                await ended.wait()
            yield True
        finally:
            if self._restarts.get(chat_id) is ended:
                del self._restarts[chat_id]

    def begin(self, chat_id: int, scope: anyio.CancelScope) -> None:
        """Chat ``chat_id``'s start waits within ``scope``: the restart that asked for
        it is done, and one asked from now on cancels it."""
        self._waiting[chat_id] = scope
        self._restarts.pop(chat_id, None)

    def end(self, chat_id: int, scope: anyio.CancelScope) -> bool:
        """The start of chat ``chat_id`` within ``scope`` is over: whether a restart
        cancelled it (that restart starts the chat again)."""
        if self._waiting.get(chat_id) is scope:
            del self._waiting[chat_id]
        restart = self._restarts.get(chat_id)
        if restart is not None:
            restart.set()
        return restart is not None
