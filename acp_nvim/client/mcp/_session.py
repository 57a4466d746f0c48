"""What the editor's MCP tools reach for one chat: its review, terminals, permissions.

One :class:`ToolSession` per session of a chat whose agent was offered the editor
server; the transports find it by the token (stdio shim) or id (MCP-over-ACP) the
agent got with that session.
Paths are the agent's: absolute, or relative to the chat's directory; reads and
writes inside its workspace roots are not asked (``services.access``).
"""

from __future__ import annotations

__all__ = ["ToolSession", "uri_path"]

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec

from acp_nvim.client.editor import Editor
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.services.files import file_name
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.workspace import uri_path


class ToolSession(msgspec.Struct, eq=False):
    """The services one chat's editor tools use, for one of its sessions.

    ``reviews`` is the app's live mapping of chat id to review; ``tools`` the
    tool names offered; ``lsp_timeout`` reads ``timeouts.lsp`` when asked;
    ``session_id`` the agent's session it was offered with, once the agent named it.
    """

    chat: Chat
    reviews: Mapping[int, SessionChanges]
    terminals: Terminals
    permissions: Permissions
    tools: list[str]
    lsp_timeout: Callable[[], float]
    # Absolute path -> the lock of the edit or write of it under way (see editing()).
    _editing: dict[str, anyio.Lock] = msgspec.field(default_factory=dict)
    session_id: str | None = None

    def __repr__(self) -> str:
        return f"<ToolSession chat {self.chat.id} {self.chat.agent}, {len(self.tools)} tools>"

    @property
    def muted(self) -> bool:
        """Whether its session's turn ended here while the agent goes on with it
        (``Chat.unshown``): that turn's tool calls are neither shown nor asked about,
        whichever session the chat is on."""
        return self.session_id is not None and self.session_id in self.chat.unshown

    @property
    def editor(self) -> Editor:
        return self.chat.editor

    @property
    def cwd(self) -> str:
        """The chat's directory: the base of relative paths."""
        return self.chat.workspace.cwd

    @property
    def dirs(self) -> list[str]:
        """The chat's directory, then its workspace roots."""
        return self.chat.workspace.dirs

    def review(self) -> SessionChanges:
        """The chat's review (reads, writes, the ``fs_access`` policy).

        Raises:
            ServiceError: the chat is closed.
        """
        review = self.reviews.get(self.chat.id)
        if review is None:
            raise ServiceError("the chat of this session is closed", "not_found")
        return review

    def path(self, path: str) -> str:
        """``path`` (or a ``file://`` URI) made absolute against the session's
        directory, normalized.

        Raises:
            ServiceError: no file can have it (a NUL byte, a URI of another host).
        """
        if path[:7].lower() == "file://":
            try:
                local = uri_path(path)
            except ValueError:
                local = None
            if local is None:
                raise ServiceError(f"not a file on this machine: {path!r}")
            path = local
        return os.path.normpath(os.path.join(self.cwd, os.path.expanduser(file_name(path))))

    @asynccontextmanager
    async def editing(self, path: str) -> AsyncIterator[None]:
        """Hold absolute ``path`` for one tool's read, change and write of it.

        An edit merges its text against what the agent last read (decision 0015):
        a second edit that read before the first one wrote would merge against the
        text without it and undo it, while both answer "Edited".
        """
        lock = self._editing.setdefault(path, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                del self._editing[path]

    def listable(self, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        """The ``items`` of a listing (buffers, diagnostics, symbols: each of a
        ``path``, or none) the agent may see, and how many are left out: those of a
        file it could not read without asking (``fs_access``), as a listing asks
        no one and one prompt per entry would bury the user.
        """
        access = self.review().access
        if access is None:
            return items, 0
        kept = [item for item in items if not item.get("path") or access.granted(item["path"])]
        return kept, len(items) - len(kept)

    async def may_read(self, path: str) -> None:
        """Apply ``fs_access`` to a look at ``path`` that does not read it through
        the review (diagnostics, language servers).

        Raises:
            ServiceError: ``denied``.
        """
        access = self.review().access
        if access is not None:
            await access.check(path, write=False)
