"""The sessions one agent process holds for its chats, as far as the client knows."""

from __future__ import annotations

__all__ = ["HeldSessions"]

import contextlib
from collections.abc import Awaitable, Callable

import anyio

from acp_nvim.protocol import ConnectionClosed, ProtocolError, RequestError


class HeldSessions:
    """Sessions begun or resumed on one process and not closed (``opened``): a chat
    goes back to one without asking the agent (a branch picked again). Of those, the
    ones it resumed or loaded (``resumed``): an earlier process's turns in them name
    messages it knows (a fork at one of them holds). And the sessions of closed
    chats whose session/close the agent has not answered: resumed before it did,
    such a session would be closed under the chat that resumed it."""

    def __init__(self) -> None:
        self.opened: set[str] = set()
        self.resumed: set[str] = set()
        self._closing: dict[str, anyio.Event] = {}  # set once the agent answered

    def __repr__(self) -> str:
        return f"<HeldSessions {len(self.opened)} opened, {len(self._closing)} closing>"

    def closing(self, session_id: str) -> anyio.Event:
        """Session ``session_id`` is being closed: not gone back to unasked from now
        on; the event is set once the agent answered the close (:meth:`close`)."""
        self.opened.discard(session_id)
        closed = self._closing[session_id] = anyio.Event()
        return closed

    def still_closing(self, session_id: str) -> anyio.Event | None:
        """The close of session ``session_id`` under way, if any: a resume waits for it."""
        return self._closing.get(session_id)

    async def close(
        self, session_id: str, closed: anyio.Event, ask: Callable[[], Awaitable[None]]
    ) -> None:
        """Ask the agent to close session ``session_id`` (``ask``); ``closed`` is set
        once it answered, refused or exited (a refusal or nonsense changes nothing)."""
        try:
            with contextlib.suppress(ConnectionClosed, RequestError, ProtocolError):
                await ask()
        finally:
            if self._closing.get(session_id) is closed:
                del self._closing[session_id]
            closed.set()
