"""The one interface both protocol versions implement (``v1.SessionsV1``, ``v2.SessionsV2``).

Everything that differs between ACP versions sits behind :class:`Sessions`:
session lifecycle, how a turn ends, cancel, settings, login. The connection
holds one and never asks which version it speaks; negotiation picks it.

Requests raise the protocol's ``RequestError`` / ``ConnectionClosed`` /
``ProtocolError`` (a badly shaped answer) and :class:`NotOffered`; the
connection turns each into a message for the user.
"""

from __future__ import annotations

__all__ = [
    "MAX_LIST_PAGES",
    "NotOffered",
    "Page",
    "Services",
    "Sessions",
    "every_page",
    "session_info",
]

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.abc

from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat
from acp_nvim.mcp import McpOffer


class NotOffered(Exception):
    """The agent (or this protocol version) does not offer what was asked;
    ``str()`` names it, e.g. ``"deleting sessions"``."""


@dataclass(eq=False)
class Services:
    """What a protocol adapter needs to answer the agent, shared with the connection.

    ``chats`` by session id and ``reviews`` by chat id are live mappings (the
    connection and the app add and remove entries).
    """

    chats: dict[str, Chat]
    reviews: Mapping[int, SessionChanges]
    terminals: Terminals
    permissions: Permissions
    tasks: anyio.abc.TaskGroup
    cwd: str
    # The MCP servers offered with each session (None: none at all).
    mcp: McpOffer | None = None


class Sessions(Protocol):
    """One agent connection's sessions, in whatever version was agreed."""

    version: int
    agent_title: str | None

    @property
    def auth_methods(self) -> list[tuple[str, str]]:
        """(method id, name) of the login methods the client can run."""

    async def new_session(self, chat: Chat) -> str:
        """Create a session for ``chat`` (registered in ``chats``); returns its id."""

    async def prompt(self, chat: Chat, text: str) -> str:
        """Send one prompt; returns the stop reason once the agent ended the turn.

        The chat's turn is started by the caller; ending it is the caller's too
        (``Chat.finish_turn``), so both versions end a turn the same way.
        """

    async def cancel(self, chat: Chat) -> None:
        """Ask the agent to stop the turn; it ends with ``cancelled``."""

    async def list_sessions(self, cwd: str | None) -> list[dict[str, Any]]:
        """The agent's sessions (all pages), as ``session_id, cwd, title, updated_at``."""

    async def resume(self, chat: Chat, session_id: str, *, replay: bool) -> None:
        """Attach ``chat`` to an existing session; ``replay`` shows its history."""

    async def close(self, chat: Chat) -> None:
        """Tell the agent the session is closed (where it offers that; else nothing)."""

    async def delete(self, session_id: str) -> None: ...

    async def set_config(self, chat: Chat, config_id: str, value: str | bool) -> None: ...

    async def login(self, method_id: str) -> None: ...

    async def logout(self) -> None: ...


# session/list pages read at most: an agent that keeps sending cursors (or repeats
# one) would otherwise be paged forever.
MAX_LIST_PAGES = 100
# One page of session/list: the sessions as plain dicts, and the next cursor.
Page = tuple[list[dict[str, Any]], str | None]


async def every_page(fetch: Callable[[str | None], Awaitable[Page]]) -> list[dict[str, Any]]:
    """All sessions of a paginated ``session/list``: ``fetch(cursor)`` reads one page.

    Stops at an empty page, a repeated cursor or :data:`MAX_LIST_PAGES`.
    """
    sessions: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        page, cursor = await fetch(cursor)
        sessions += page
        if not cursor or not page or cursor in seen:
            break
        seen.add(cursor)
    return sessions


def session_info(info: Any) -> dict[str, Any]:
    """One ``session/list`` entry (v1 and v2 name these fields alike) as plain data."""
    return {
        "session_id": info.session_id,
        "cwd": info.cwd,
        "title": info.title,
        "updated_at": info.updated_at,
    }
