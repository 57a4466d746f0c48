"""The client application: chats, the agents behind them, and the user's commands.

Runs entirely on the worker's event loop. The editor side calls the public
coroutines (via the thread bridge); results reach the user through the Editor
port only, so nothing here waits on the editor.

:class:`App` is the face the host calls; each command is answered by the part
it concerns, one module each (decision 0034):

- ``_chats``: a chat's life (open, fork, restart, send, regenerate, cancel, login,
  close)
- ``_conversation``: going back and steering (rewind, branches, edit, send now, a
  rejection's reason)
- ``_pool``: the agents (processes, connections, logins and their secrets)
- ``_queue``: prompts waiting for a busy chat
- ``_starts``: chats whose agent is starting, and the restarts asked meanwhile
- ``_start_task``: a start (an opening too) that fails by a defect of ours ends, said in its chat
- ``_settings``: a session's mode, model and options
- ``_reviews``: each chat's review of the agent's changes
- ``_workspaces``: where each chat's agent works (directory, roots, worktree)
- ``_mcp``: the editor MCP server's offer and socket
"""

from __future__ import annotations

__all__ = ["App"]

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from acp_nvim.client.app._chats import ChatLifecycle
from acp_nvim.client.app._context import AppContext
from acp_nvim.client.app._conversation import Conversations
from acp_nvim.client.app._mcp import McpWiring
from acp_nvim.client.app._pool import AgentPool
from acp_nvim.client.app._queue import PromptQueue
from acp_nvim.client.app._reviews import Reviews
from acp_nvim.client.app._sender import Sender
from acp_nvim.client.app._settings import Settings
from acp_nvim.client.app._start_task import opening_task, start_task
from acp_nvim.client.app._workspaces import Workspaces
from acp_nvim.client.config import Config, ConfigError, load_config
from acp_nvim.client.editor import Editor
from acp_nvim.client.history import History, StoreError
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.services.grants import Grants
from acp_nvim.client.tasks import Tasks

if TYPE_CHECKING:
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.mcp import EditorSocket
    from acp_nvim.client.session.chat import Chat


class App:
    """All chats of one editor. ``tasks`` is the worker's task group: every task the
    app starts in it is behind a barrier (:class:`Tasks`), so a failing one is shown
    in its chat and ends nothing else."""

    def __init__(self, editor: Editor, tasks: anyio.abc.TaskGroup) -> None:
        config, barrier = Config(), Tasks(tasks)
        history = History(editor, barrier)
        self.ctx = AppContext(editor, barrier, config, ProtocolLog(config.log_lines), history)
        self.reviews = Reviews(self.ctx)
        self.mcp = McpWiring(self.ctx, self.reviews.by_chat)
        self.pool = AgentPool(self.ctx, self.reviews.by_chat, self.mcp)
        self.queue = PromptQueue(self.ctx, self.pool)
        self.settings = Settings(self.ctx, self.pool)
        self.conversations = Conversations(
            self.ctx, self.pool, self.queue, self.reviews, self.settings
        )
        self.workspaces = Workspaces(self.ctx, self.reviews.by_chat, self.pool.agent_of)
        self.lifecycle = ChatLifecycle(
            self.ctx,
            self.pool,
            self.queue,
            self.reviews,
            self.settings,
            self.conversations,
            self.workspaces,
        )
        self.sender = Sender(self.lifecycle)
        # What the host calls, each answered by the part it concerns.
        self.open = opening_task(self.lifecycle.end_start, self.lifecycle.open)
        self.restart = start_task(self.lifecycle.end_start, self.lifecycle.restart)
        self.send = self.sender.send
        self.regenerate = self.sender.regenerate
        self.cancel = self.lifecycle.cancel
        self.login = start_task(self.lifecycle.end_start, self.lifecycle.login)
        self.close = self.lifecycle.close
        self.closing = self.lifecycle.closing
        self.dequeue = self.queue.dequeue
        self.answer = self.conversations.answer
        self.elicit = self.pool.elicit
        self.terminal_output = self.pool.terminal_output
        self.list_sessions = self.pool.list_sessions
        self.delete_session = self.pool.delete_session
        self.logout = self.pool.logout
        self.set_config = self.settings.set_config
        self.set_category = self.settings.set_category
        self.choices = self.settings.choices
        self.review = self.conversations.review
        self.baseline = self.reviews.baseline
        self.buffer_changed = self.reviews.buffer_changed
        self.restore = self.reviews.restore
        self.restorable = self.reviews.restorable
        self.rewind = self.sender.rewind
        self.pick_branch = self.conversations.pick
        self.edit = self.conversations.edit
        self.send_queued = self.conversations.send_queued
        self.root = self.workspaces.root
        self.mcp_status = self.mcp.status

    def __repr__(self) -> str:
        return f"<App {len(self.chats)} chats, {len(self.agents)} agents>"

    @property
    def chats(self) -> dict[int, Chat]:
        return self.ctx.chats

    @property
    def agents(self) -> dict[str, AgentConnection]:
        return self.pool.agents

    @property
    def history(self) -> History:
        return self.ctx.history

    @property
    def grants(self) -> Grants:
        return self.ctx.grants

    @property
    def log(self) -> ProtocolLog:
        return self.ctx.log

    @property
    def mcp_socket(self) -> EditorSocket | None:
        return self.mcp.socket

    def setup(self, raw: Any, state_dir: str | None = None, nvim_dirs: Sequence[str] = ()) -> bool:
        """Validate and take the user's options. Wrong ones are not raised: chats
        refuse to start, showing every one (setup() in Lua reported them already).
        ``state_dir``: Neovim's stdpath("state"), where the history and the
        worktrees are kept; ``nvim_dirs``: Neovim's own directories, which the
        reviews never scan."""
        try:
            self.ctx.config = load_config(raw)
        except ConfigError as err:
            self.ctx.config_error = err.summary()
            return False
        self.ctx.config_error = None
        started = bool(state_dir) and self.ctx.state_dir is None  # the host's first setup
        self.ctx.state_dir = state_dir or self.ctx.state_dir
        if started:  # worktrees a killed Neovim left: told though no worktree chat opens
            self.ctx.tasks.start_soon(self.workspaces.tell_left_unclosed)
        if nvim_dirs:
            self.ctx.nvim_dirs = frozenset(os.path.realpath(d) for d in nvim_dirs if d)
        self.ctx.log = ProtocolLog(self.ctx.config.log_lines)
        self.ctx.history.configure(self.ctx.config.history, state_dir)
        self.ctx.grants.configure(state_dir)
        for connection in self.pool.agents.values():
            self.pool.configure(connection)
        self.reviews.configure()
        return True

    async def export(self, token: int, chat_id: int | None, history_id: int | None) -> None:
        """Answer Lua's call ``token`` (acp.host.call) with the chat as Markdown
        (History.markdown: made off the loop), nil for no such chat, or an error."""
        try:
            text = await self.ctx.history.markdown(chat_id, history_id)
        except StoreError as err:
            self.ctx.editor.reply(token, None, f"history: {err}")
        else:
            self.ctx.editor.reply(token, text)

    async def buffers_changed(self) -> None:
        """File buffers came or went: MCP clients that follow the list are told."""
        await self.mcp.buffers_changed(self.pool.agents.values())

    async def shutdown(self) -> None:
        """End every agent (Neovim is closing), and let go of what watches the
        chats' files, once the closes under way are done (5 s at most: the agent's
        grace to end is 2)."""
        with anyio.CancelScope(shield=True):
            await self.lifecycle.closes_done(5)
            self.reviews.close_all()
            await self.ctx.history.close()
            await self.pool.aclose()
            await self.workspaces.aclose()
            await self.mcp.aclose()
