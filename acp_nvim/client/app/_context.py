"""What every part of the app reads: the editor, the worker's tasks, the options."""

from __future__ import annotations

__all__ = ["AppContext"]

from typing import TYPE_CHECKING

import msgspec

from acp_nvim.client.config import Config
from acp_nvim.client.editor import Editor
from acp_nvim.client.history import History
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.services.grants import Grants
from acp_nvim.client.tasks import Tasks

if TYPE_CHECKING:
    from acp_nvim.client.session.chat import Chat


class AppContext(msgspec.Struct, eq=False):
    """Shared by the app's parts. ``config`` and ``log`` are replaced by ``App.setup``,
    so parts read them here each time rather than keeping their own."""

    editor: Editor
    tasks: Tasks
    config: Config
    log: ProtocolLog
    # The chat history (client.history).
    history: History
    # The open chats by id; the chat lifecycle adds and removes them.
    chats: dict[int, Chat] = msgspec.field(default_factory=dict)
    # A rejected options table: chats refuse to start until setup() is fixed,
    # rather than silently running with defaults the user did not ask for.
    config_error: str | None = None
    # Permission answers given "always", kept across restarts (services.grants).
    grants: Grants = msgspec.field(default_factory=Grants)
    # Neovim's stdpath("state") (from setup): the history's and the worktrees' home.
    state_dir: str | None = None
    # Neovim's own directories (from setup: stdpath cache, data, state, log), as real
    # paths: a review never counts what changes in them (decision 0077).
    nvim_dirs: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"<AppContext {len(self.chats)} chats>"
