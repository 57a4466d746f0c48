"""The client application: chats, the agents behind them, and the user's commands.

Runs entirely on the worker's event loop. The editor side calls the public
coroutines (via the thread bridge); results reach the user through the Editor
port only, so nothing here waits on the editor.
"""

from __future__ import annotations

__all__ = ["App"]

import base64
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from acp_nvim.client.agent.process import AgentProcess, SpawnError, agent_process
from acp_nvim.client.config import AgentConfig, Config, ConfigError, load_config
from acp_nvim.client.editor import Editor
from acp_nvim.client.errors import AgentFailed
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.tasks import Tasks, internal_error

if TYPE_CHECKING:
    # The chat (model, view, review) and the protocol stack (generated types,
    # fs/terminal/permission services) are imported after the first agent is
    # spawned, so their import overlaps the agent's own start-up
    # (doc/performance.md, start-up).
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.services.changes import SessionChanges
    from acp_nvim.client.session.chat import Chat

_SWITCH_WORDS = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


class App:
    """All chats of one editor. ``tasks`` is the worker's task group: every task the
    app starts in it is behind a barrier (:class:`Tasks`), so a failing one is shown
    in its chat and ends nothing else."""

    def __init__(self, editor: Editor, tasks: anyio.abc.TaskGroup) -> None:
        self.editor = editor
        self.tasks = Tasks(tasks)
        self.config = Config()
        self.log = ProtocolLog(self.config.log_lines)
        self.chats: dict[int, Chat] = {}
        # The review of each chat's agent changes, by chat id (the same object as
        # the chat's ``changes``, typed as the service it is).
        self.reviews: dict[int, SessionChanges] = {}
        self.agents: dict[str, AgentConnection] = {}
        self._agent_of: dict[int, AgentConnection] = {}
        self._starting: dict[str, anyio.Event] = {}
        # A rejected options table: chats refuse to start until setup() is fixed,
        # rather than silently running with defaults the user did not ask for.
        self.config_error: str | None = None
        # Neovim is closing: nothing may wait on the editor any more.
        self._shutting_down = False

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
        for connection in self.agents.values():
            connection.permissions.policy = self.config.permission_policy
        for review in self.reviews.values():
            review.auto_save = self.config.auto_save
        return True

    async def open(
        self, chat_id: int, agent: str | None, cwd: str, session_id: str | None = None
    ) -> None:
        """Start (or reuse) the agent and create a session for a new chat.

        With ``session_id`` the chat resumes that session (its history replayed).
        """
        if self.config_error is not None:
            self._new_chat(chat_id, agent or "?").fail(self.config_error)
            return
        try:
            name, agent_config = self.config.agent(agent)
        except ConfigError as err:
            self.editor.notify(str(err))
            self.editor.emit("AcpError", {"chat": chat_id, "message": str(err)})
            return
        # The agent's own start is the long pole: spawn it first, then import and
        # build the chat while it boots (doc/performance.md, start-up).
        spawned = await self._spawn(name, agent_config, cwd)
        chat = self._new_chat(chat_id, name)
        chat.set_state("starting", agent=name)
        try:
            connection = await self._agent(name, agent_config, cwd, spawned)
            self._agent_of[chat_id] = connection
            from acp_nvim.client.services.changes import SessionChanges

            chat.changes = self.reviews[chat_id] = SessionChanges(
                self.editor,
                chat_id,
                connection.cwd,
                self.tasks.reporting_to(chat.show_error),
                auto_save=self.config.auto_save,
                missing_file_as_empty=agent_config.missing_file_as_empty,
            )
            if session_id is None:
                await connection.new_session(chat)
            else:
                await connection.resume(chat, session_id)
        except AgentFailed as err:
            chat.fail(str(err), err.details)
        except Exception as err:  # a bug: the chat shows it has ended, not "starting"
            chat.fail(internal_error("opening the chat", err))

    def _new_chat(self, chat_id: int, agent: str) -> Chat:
        from acp_nvim.client.session.chat import Chat

        chat = self.chats[chat_id] = Chat(chat_id, agent, self.editor)
        return chat

    async def _spawn(
        self, name: str, agent_config: AgentConfig, cwd: str
    ) -> AgentProcess | AgentFailed | None:
        """Start ``name``'s process, unless it runs or is starting already (None).

        Otherwise the caller owns the start and must finish it with :meth:`_agent`;
        a failure to spawn is handed over too, for the chat to show.
        """
        existing = self.agents.get(name)
        if name in self._starting or (existing is not None and existing.alive):
            return None
        self._starting[name] = started = anyio.Event()
        process = agent_process(name, agent_config, cwd, self.log)
        try:
            await process.start()
        except SpawnError as err:
            return AgentFailed(str(err))
        except BaseException:  # cancelled: no start left for the others to wait on
            del self._starting[name]
            started.set()
            raise
        return process

    async def _agent(
        self,
        name: str,
        agent_config: AgentConfig,
        cwd: str,
        spawned: AgentProcess | AgentFailed | None,
    ) -> AgentConnection:
        """The live connection to ``name``, started once even if two chats ask at once."""
        while spawned is None:
            while name in self._starting:
                await self._starting[name].wait()
            existing = self.agents.get(name)
            if existing is not None and existing.alive:
                return existing
            spawned = await self._spawn(name, agent_config, cwd)
        done = self._starting[name]
        try:
            if isinstance(spawned, AgentFailed):
                raise spawned
            from acp_nvim.client.agent.connection import AgentConnection

            connection = AgentConnection(
                name,
                agent_config,
                cwd=cwd,
                log=self.log,
                reviews=self.reviews,
                protocol_version=self.config.protocol_version,
                process=spawned,
            )
            connection.permissions.policy = self.config.permission_policy
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
        if self._shutting_down:
            return  # the editor kills the commands, and no chat is left to tell
        # No orphans: its commands die with it.
        await connection.terminals.end_all()
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

    async def review(
        self,
        chat_id: int,
        decision: str,
        path: str | None = None,
        hunk: int | None = None,
        turn: int | None = None,
    ) -> None:
        """Accept or reject agent changes of chat ``chat_id`` (see SessionChanges.decide)."""
        review = self.reviews.get(chat_id)
        if review is None:
            self.editor.notify("no changes to review in this chat", "warn")
            return
        if decision not in ("accept", "reject"):
            raise ValueError(f"unknown review decision {decision!r}")
        await review.decide("accept" if decision == "accept" else "reject", path, hunk, turn)

    async def answer(self, chat_id: int, request_id: str, option_id: str) -> None:
        """The user answered a permission prompt of chat ``chat_id``."""
        connection = self._agent_of.get(chat_id)
        if connection is None or not connection.permissions.answer(request_id, option_id):
            self.editor.notify("that permission request is no longer pending", "warn")

    async def close(self, chat_id: int) -> None:
        """Forget a chat; its agent ends when no other chat uses it."""
        chat = self.chats.pop(chat_id, None)
        self.reviews.pop(chat_id, None)
        connection = self._agent_of.pop(chat_id, None)
        if chat is None or connection is None:
            return
        if chat.state == "running":
            await self.cancel_quietly(connection, chat)
        await connection.release(chat)
        chat.state = "closed"
        if not connection.chats and connection not in self._agent_of.values():
            self.agents.pop(connection.name, None)
            await connection.aclose()

    # -- session surface (sessions, settings, login) --------------------------------------

    async def list_sessions(self, chat_id: int) -> None:
        """The sessions of the chat's agent, as the event ``AcpSessionList`` (Lua picks)."""
        connection = self._connection(chat_id)
        if connection is None:
            return
        try:
            sessions = await connection.list_sessions(connection.cwd)
        except AgentFailed as err:
            self.editor.notify(str(err))
            return
        data = {"chat": chat_id, "agent": connection.name, "sessions": sessions}
        self.editor.emit("AcpSessionList", data)

    async def delete_session(self, chat_id: int, session_id: str) -> None:
        connection = self._connection(chat_id)
        if connection is not None:
            try:
                await connection.delete_session(session_id)
            except AgentFailed as err:
                self.editor.notify(str(err))
                return
            self.editor.notify(f"deleted session {session_id}", "info")

    async def set_config(self, chat_id: int, config_id: str, value: str | bool) -> None:
        """Change a session setting (mode, model, ...); the header shows the result."""
        connection = self._connection(chat_id)
        chat = self.chats.get(chat_id)
        if connection is not None and chat is not None:
            option = next((o for o in chat.session.config_options if o.id == config_id), None)
            if option is not None and option.type == "boolean" and isinstance(value, str):
                # Typed on the command line (`:AcpConfig thinking on`): a word, not a bool.
                if value.lower() not in _SWITCH_WORDS:
                    self.editor.notify(f"{config_id} is on or off, not {value!r}")
                    return
                value = _SWITCH_WORDS[value.lower()]
            try:
                await connection.set_config(chat, config_id, value)
            except AgentFailed as err:
                self.editor.notify(str(err))

    async def login(self, chat_id: int, method_id: str | None) -> None:
        connection = self._connection(chat_id)
        if connection is not None:
            try:
                await connection.login(method_id)
            except AgentFailed as err:
                self.editor.notify(str(err))
                return
            self.editor.notify(f"logged in to {connection.name}", "info")

    async def logout(self, chat_id: int) -> None:
        connection = self._connection(chat_id)
        if connection is not None:
            try:
                await connection.logout()
            except AgentFailed as err:
                self.editor.notify(str(err))
                return
            self.editor.notify(f"logged out of {connection.name}", "info")

    def _connection(self, chat_id: int) -> AgentConnection | None:
        connection = self._agent_of.get(chat_id)
        if connection is None:
            self.editor.notify("the chat has no running agent", "warn")
        return connection

    async def cancel_quietly(self, connection: AgentConnection, chat: Chat) -> None:
        try:
            await connection.cancel(chat)
        except AgentFailed:
            pass

    def terminal_output(self, chunks: list[dict[str, Any]]) -> None:
        """Output and exit codes of terminal commands, batched by the editor.

        Each chunk is ``{key, data?: base64, exit?: int}``, in the order it happened.
        """
        for chunk in chunks:
            data = base64.b64decode(chunk.get("data") or "")
            exit_code = chunk.get("exit")
            for connection in self.agents.values():
                if connection.terminals.feed(str(chunk["key"]), data, exit_code):
                    break

    async def shutdown(self) -> None:
        """End every agent (Neovim is closing)."""
        self._shutting_down = True
        with anyio.CancelScope(shield=True):
            for connection in list(self.agents.values()):
                await connection.aclose()
            self.agents.clear()
