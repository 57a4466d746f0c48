"""The client application: chats, the agents behind them, and the user's commands.

Runs entirely on the worker's event loop. The editor side calls the public
coroutines (via the thread bridge); results reach the user through the Editor
port only, so nothing here waits on the editor.
"""

from __future__ import annotations

__all__ = ["App"]

from typing import Any

import anyio
import anyio.abc

from acp_nvim.client.agent import AgentConnection, AgentFailed
from acp_nvim.client.chat import Chat
from acp_nvim.client.config import Config, ConfigError, load_config
from acp_nvim.client.editor import Editor
from acp_nvim.client.log import ProtocolLog


class App:
    """All chats of one editor. ``tasks`` is the worker's task group."""

    def __init__(self, editor: Editor, tasks: anyio.abc.TaskGroup) -> None:
        self.editor = editor
        self.tasks = tasks
        self.config = Config()
        self.log = ProtocolLog(self.config.log_lines)
        self.chats: dict[int, Chat] = {}
        self.agents: dict[str, AgentConnection] = {}
        self._agent_of: dict[int, AgentConnection] = {}
        self._starting: dict[str, anyio.Event] = {}
        # A rejected options table: chats refuse to start until setup() is fixed,
        # rather than silently running with defaults the user did not ask for.
        self.config_error: str | None = None

    def __repr__(self) -> str:
        return f"<App {len(self.chats)} chats, {len(self.agents)} agents>"

    def setup(self, raw: Any) -> bool:
        """Validate and take the user's options; a wrong one is reported, not raised."""
        try:
            self.config = load_config(raw)
        except ConfigError as err:
            self.config_error = f"invalid option {err}"
            self.editor.notify(self.config_error)
            return False
        self.config_error = None
        self.log = ProtocolLog(self.config.log_lines)
        return True

    async def open(self, chat_id: int, agent: str | None, cwd: str) -> None:
        """Start (or reuse) the agent and create a session for a new chat."""
        if self.config_error is not None:
            chat = self.chats[chat_id] = Chat(chat_id, agent or "?", self.editor)
            chat.fail(self.config_error)
            return
        try:
            name, agent_config = self.config.agent(agent)
        except ConfigError as err:
            self.editor.notify(str(err))
            self.editor.emit("AcpError", {"chat": chat_id, "message": str(err)})
            return
        chat = Chat(chat_id, name, self.editor)
        self.chats[chat_id] = chat
        chat.set_state("starting", agent=name)
        try:
            connection = await self._agent(name, agent_config, cwd)
            self._agent_of[chat_id] = connection
            await connection.new_session(chat)
        except AgentFailed as err:
            chat.fail(str(err), err.details)

    async def _agent(self, name: str, agent_config: Any, cwd: str) -> AgentConnection:
        """The live connection to ``name``, started once even if two chats ask at once."""
        while name in self._starting:
            await self._starting[name].wait()
        existing = self.agents.get(name)
        if existing is not None and existing.alive:
            return existing
        self._starting[name] = done = anyio.Event()
        try:
            connection = AgentConnection(name, agent_config, cwd=cwd, log=self.log)
            try:
                await connection.start(self.tasks)
            except AgentFailed:
                await connection.aclose()
                raise
            self.agents[name] = connection
            self.tasks.start_soon(self._watch_exit, connection)
            return connection
        finally:
            del self._starting[name]
            done.set()

    async def _watch_exit(self, connection: AgentConnection) -> None:
        """An agent that dies between turns: tell its chats (mid-turn, the prompt does)."""
        await connection.exited.wait()
        if self.agents.get(connection.name) is connection:
            del self.agents[connection.name]
        for chat in list(connection.chats.values()):
            if chat.state == "ready":
                failure = connection.exit_failure("exited")
                chat.fail(str(failure), failure.details)

    async def send(self, chat_id: int, text: str) -> None:
        chat = self.chats.get(chat_id)
        connection = self._agent_of.get(chat_id)
        if chat is None or connection is None or chat.state not in ("ready",):
            state = chat.state if chat else "closed"
            self.editor.notify(f"cannot send: the chat is {state}", "warn")
            return
        try:
            await connection.prompt(chat, text)
        except AgentFailed as err:
            chat.fail(str(err), err.details)

    async def cancel(self, chat_id: int) -> None:
        chat = self.chats.get(chat_id)
        connection = self._agent_of.get(chat_id)
        if chat is not None and connection is not None and chat.state == "running":
            try:
                await connection.cancel(chat)
            except AgentFailed:
                pass

    async def close(self, chat_id: int) -> None:
        """Forget a chat; its agent ends when no other chat uses it."""
        chat = self.chats.pop(chat_id, None)
        connection = self._agent_of.pop(chat_id, None)
        if chat is None or connection is None:
            return
        if chat.state == "running":
            await self.cancel_quietly(connection, chat)
        connection.detach(chat)
        chat.state = "closed"
        if not connection.chats and connection not in self._agent_of.values():
            self.agents.pop(connection.name, None)
            await connection.aclose()

    async def cancel_quietly(self, connection: AgentConnection, chat: Chat) -> None:
        try:
            await connection.cancel(chat)
        except AgentFailed:
            pass

    async def shutdown(self) -> None:
        """End every agent (Neovim is closing)."""
        with anyio.CancelScope(shield=True):
            for connection in list(self.agents.values()):
                await connection.aclose()
            self.agents.clear()
