"""The agents behind the chats: one process and connection per agent, started once
however many chats ask at once and ended when no chat uses it; logins, and the
values of login variables each start of the agent gets."""

from __future__ import annotations

__all__ = ["AgentPool"]

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec

from acp_nvim.client.agent.process import AgentProcess, SpawnError, agent_process
from acp_nvim.client.app._context import AppContext
from acp_nvim.client.app._mcp import McpWiring
from acp_nvim.client.config import AgentConfig
from acp_nvim.client.errors import NO_AGENT, STARTING, AgentFailed
from acp_nvim.client.services.errors import ServiceError

if TYPE_CHECKING:
    # The protocol stack (generated types, fs/terminal/permission services) is
    # imported after the first agent is spawned, so its import overlaps the
    # agent's own start-up (doc/performance.md, start-up).
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.services.changes import SessionChanges
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import LoginMethod


class AgentPool:
    """``reviews``: each chat's review, by chat id (live), for the connections."""

    def __init__(
        self, ctx: AppContext, reviews: Mapping[int, SessionChanges], mcp: McpWiring
    ) -> None:
        self.ctx = ctx
        self.reviews = reviews
        self.mcp = mcp
        self.agents: dict[str, AgentConnection] = {}
        self.agent_of: dict[int, AgentConnection] = {}  # by chat id
        self._starting: dict[str, anyio.Event] = {}
        # The task that spawned each of those, until it connects (see abandon).
        self._spawned_by: dict[str, int] = {}
        # Each agent's latest process, by name: a start that timed out has no
        # connection left to ask what it printed.
        self._launched: dict[str, AgentProcess] = {}
        # Values of login variables, by agent: added to its environment when it starts.
        self._secrets: dict[str, dict[str, str]] = {}
        # The agents whose commands may still run, in start order: one that exited or
        # was restarted is no agent to start chats on, but its commands end after it,
        # and their chats show that they did (terminal_output).
        self._commanding: dict[AgentConnection, None] = {}
        # Neovim is closing: nothing may wait on the editor any more.
        self._shutting_down = False

    def __repr__(self) -> str:
        return f"<AgentPool {len(self.agents)} agents>"

    def agent_config(self, agent: str | None) -> tuple[str, AgentConfig]:
        """An agent's options, with the values of its login variables in its env."""
        name, agent_config = self.ctx.config.agent(agent)
        secrets = self._secrets.get(name)
        if secrets:
            env = {**agent_config.env, **secrets}
            agent_config = msgspec.structs.replace(agent_config, env=env)
        return name, agent_config

    async def spawn(
        self, name: str, agent_config: AgentConfig, cwd: str
    ) -> AgentProcess | AgentFailed | None:
        """Start ``name``'s process, unless it runs or is starting already (None).

        Otherwise the caller owns the start and must finish it with :meth:`connect`;
        a failure to spawn is handed over too, for the chat to show.
        """
        existing = self.agents.get(name)
        if name in self._starting or (existing is not None and existing.alive):
            return None
        self._starting[name] = anyio.Event()
        self._spawned_by[name] = anyio.get_current_task().id
        process = self._launched[name] = agent_process(name, agent_config, cwd, self.ctx.log)
        try:
            await process.start()
        except SpawnError as err:
            return AgentFailed(str(err))
        except BaseException:  # cancelled: no start left for the others to wait on
            self._end_start(name)
            raise
        return process

    def _end_start(self, name: str) -> None:
        del self._spawned_by[name]
        self._starting.pop(name).set()

    async def abandon(self) -> None:
        """The current task failed between its :meth:`spawn` and :meth:`connect`: the
        processes it spawned end, and the chats waiting for them start anew."""
        mine = anyio.get_current_task().id
        for name in [n for n, task in self._spawned_by.items() if task == mine]:
            self._end_start(name)
            await self._launched[name].aclose()

    async def connect(
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
            spawned = await self.spawn(name, agent_config, cwd)
        try:
            if isinstance(spawned, AgentFailed):
                raise spawned
            from acp_nvim.client.agent.connection import AgentConnection

            connection = AgentConnection(
                name,
                agent_config,
                cwd=cwd,
                log=self.ctx.log,
                reviews=self.reviews,
                protocol_version=self.ctx.config.protocol_version,
                process=spawned,
                mcp=lambda connection: self.mcp.offer(connection, agent_config),
            )
            try:
                self.configure(connection)
                await connection.start(self.ctx.tasks)
            except BaseException:  # failed, timed out or cancelled: no agent left behind
                await connection.aclose()
                raise
            self.agents[name] = connection
            self._prune()
            self._commanding[connection] = None
            self.ctx.tasks.start_soon(self._watch_exit, connection)
            return connection
        finally:
            self._end_start(name)

    def printed(self, name: str, connection: AgentConnection | None) -> list[str]:
        """What the agent printed beside the protocol in its latest start: through
        ``connection`` once there is one (a v1 fallback starts another process)."""
        process = connection.process if connection is not None else self._launched.get(name)
        return process.printed() if process is not None else []

    def configure(self, connection: AgentConnection) -> None:
        """The options an agent connection follows."""
        config = self.ctx.config
        permissions = connection.permissions
        permissions.policy = connection.config.permission_policy or config.permission_policy
        permissions.allow = config.permissions.allow
        permissions.grants = self.ctx.grants
        permissions.keys = config.keys.permission.by_kind()
        permissions.why_key = config.keys.permission.reject_why or None
        permissions.preview = config.diff_preview is not False
        connection.turns.grace = config.timeouts.cancel
        self.mcp.configure(connection)

    async def release(self, chat: Chat) -> None:
        """Detach ``chat`` from its agent; the agent ends when no other chat uses it."""
        connection = self.agent_of.pop(chat.id, None)
        if connection is None:
            return
        if chat.state != "closed":
            chat.on_info(connected=False)
        await connection.release(chat)
        if not connection.chats and connection not in self.agent_of.values():
            if self.agents.get(connection.name) is connection:
                del self.agents[connection.name]
            await connection.aclose()

    async def _watch_exit(self, connection: AgentConnection) -> None:
        """An agent that dies between turns: tell its chats (mid-turn, the prompt does)."""
        await connection.exited.wait()
        if self.agents.get(connection.name) is connection:
            del self.agents[connection.name]
        if self._shutting_down:
            return  # the editor kills the commands, and no chat is left to tell
        # No orphans: its commands die with it.
        await connection.terminals.end_all()
        told = {chat.id: chat for chat in connection.chats.values()}
        # And those between two sessions (a rewind's, a branch switch's): detached.
        told.update((c, self.ctx.chats[c]) for c, of in self.agent_of.items()
                    if of is connection and c in self.ctx.chats)  # fmt: skip
        for chat in told.values():
            chat.on_info(connected=False)
        for chat in list(connection.chats.values()):
            if chat.state == "ready":
                failure = connection.ending.failure()
                chat.fail(str(failure), failure.details)

    def unavailable(self, chat_id: int) -> str | None:
        """Why what asks the chat's agent cannot be done now, or None: it is still
        starting, or it has none (never started, failed or exited). The one place
        that says so (Lua's registry.unstarted says it in the same words)."""
        chat, connection = self.ctx.chats.get(chat_id), self.agent_of.get(chat_id)
        if chat is not None and chat.state == "starting":
            return STARTING
        if chat is None or connection is None or not connection.alive:
            return NO_AGENT
        return None

    def connection(self, chat_id: int) -> AgentConnection | None:
        """The chat's running agent; the user is told why when it has none."""
        why = self.unavailable(chat_id)
        if why is not None:
            self.ctx.editor.notify(why, "warn")
            return None
        return self.agent_of[chat_id]

    async def cancel_quietly(self, connection: AgentConnection, chat: Chat) -> None:
        try:
            await connection.cancel(chat)
        except AgentFailed:
            pass

    # -- what the user answers or asks of a chat's agent --------------------------------

    async def answer(self, chat_id: int, request_id: str, option_id: str) -> None:
        """The user answered a permission prompt of chat ``chat_id``; one no longer
        pending is told."""
        connection = self.agent_of.get(chat_id)
        if connection is None or not connection.permissions.answer(request_id, option_id):
            self.ctx.editor.notify("that permission request is no longer pending", "warn")

    def elicit(
        self, chat_id: int, request_id: str, action: str, content: dict[str, Any] | None
    ) -> None:
        """The user answered an agent's elicitation in chat ``chat_id`` (accept,
        decline or cancel; ``content``: an accepted form's values)."""
        connection = self.agent_of.get(chat_id)
        if action not in ("accept", "decline", "cancel"):
            raise ValueError(f"unknown elicitation action {action!r}")
        if connection is None or not connection.elicitations.answer(
            request_id, action, content  # type: ignore[arg-type]
        ):
            self.ctx.editor.notify("that request of the agent is no longer pending", "warn")

    def terminal_output(self, chunks: list[dict[str, Any]]) -> None:
        """Output and exit codes of terminal commands, batched by the editor.

        Each chunk is ``{key, data?: base64, exit?: int}``, in the order it happened.
        """
        for chunk in chunks:
            data = base64.b64decode(chunk.get("data") or "")
            exit_code = chunk.get("exit")
            for connection in self._commanding:
                if connection.terminals.feed(str(chunk["key"]), data, exit_code):
                    break
        self._prune()

    def _prune(self) -> None:
        """Forget the agents gone whose commands have all ended."""
        for connection in list(self._commanding):
            if not connection.alive and not connection.terminals.running:
                del self._commanding[connection]

    async def list_sessions(self, chat_id: int, quiet: bool = False) -> None:
        """The sessions of the chat's agent, as the event ``AcpSessionList`` (Lua picks).
        ``quiet`` (completion asks while the user types): a chat without a running
        agent, or a list that fails, is no notice, only no event."""
        chat = self.ctx.chats.get(chat_id)
        connection = self.agent_of.get(chat_id) if quiet else self.connection(chat_id)
        if connection is None or chat is None:
            return
        try:
            # The chat's directory: its sessions are the ones it can resume there.
            sessions = await connection.list_sessions(chat.workspace.cwd)
        except AgentFailed as err:
            if not quiet:
                self.ctx.editor.notify(str(err))
            return
        # What the history knows of them: the picker shows their turns, and their age.
        turns_of = self.ctx.history.reader.session_turns
        turns = await anyio.to_thread.run_sync(turns_of, connection.name)
        for session in sessions:
            session["turns"] = turns.get(session["session_id"])
            session["updated"] = _epoch(session.get("updated_at"))
        # Where the agent deletes sessions, the picker offers that beside resuming.
        can_delete = connection.sessions is not None and connection.sessions.can_delete
        data = {"chat": chat_id, "agent": connection.name, "sessions": sessions,
                "can_delete": can_delete}  # fmt: skip
        self.ctx.editor.emit("AcpSessionList", data)

    async def delete_session(self, chat_id: int, session_id: str) -> None:
        """Delete ``session_id`` of the chat's agent; not one a chat here is on (as
        the picker shows only): the agent would drop the conversation under it."""
        connection = self.connection(chat_id)
        if connection is None:
            return
        on_it = [
            c.id
            for c in self.ctx.chats.values()
            if c.session.session_id == session_id and self.agent_of.get(c.id) is connection
        ]
        if on_it and connection.sessions is not None and connection.sessions.can_delete:
            self.ctx.editor.notify(
                f"chat {on_it[0]} is on session {session_id}: close it first to delete the session"
            )
            return
        try:
            await connection.delete_session(session_id)
        except AgentFailed as err:
            self.ctx.editor.notify(str(err))
            return
        self.ctx.editor.notify(f"deleted session {session_id}", "info")
        # Lua's completion keeps the last list's ids: the deleted one leaves it now.
        data = {"chat": chat_id, "agent": connection.name, "session_id": session_id}
        self.ctx.editor.emit("AcpSessionDeleted", data)

    # -- logins --------------------------------------------------------------------------

    async def login(
        self,
        connection: AgentConnection,
        chat: Chat,
        method_id: str | None,
        values: dict[str, str] | None,
    ) -> LoginMethod | None:
        """Run one of ``connection``'s login methods (by id; the first when None);
        the method that succeeded, or None (the user was told why).

        ``values`` are a variable method's values; they go only into the agent's
        environment (never a log), from its next start on.
        """
        editor = self.ctx.editor
        methods = connection.auth_methods()
        method = next((m for m in methods if m.id == method_id or method_id is None), None)
        if method is None:
            offered = ", ".join(m.id for m in methods)
            message = f"no login {method_id!r} (offered: {offered})" if offered else "no login"
            editor.notify(f"agent {connection.name!r} offers {message}")
            return None
        try:
            if method.kind == "agent":
                await connection.login(method.id)
            elif method.kind == "terminal":
                argv = [*connection.config.cmd, *method.args]
                env = {**connection.config.env, **method.env}
                status = await connection.terminals.run(chat, argv, env, f"login: {method.name}")
                if status.exit_code != 0:
                    raise AgentFailed(f"the login in the terminal ended with {status}")
            else:
                missing = [v for v in method.vars if not (values or {}).get(v)]
                if missing:
                    raise AgentFailed(f"the login needs a value for {', '.join(missing)}")
                self._secrets[connection.name] = {v: (values or {})[v] for v in method.vars}
        except (AgentFailed, ServiceError) as err:
            editor.notify(f"login to {connection.name} failed: {err}")
            return None
        editor.notify(f"logged in to {connection.name}", "info")
        return method

    async def logout(self, chat_id: int) -> None:
        connection = self.connection(chat_id)
        if connection is not None:
            try:
                await connection.logout()
            except AgentFailed as err:
                self.ctx.editor.notify(str(err))
                return
            self.ctx.editor.notify(f"logged out of {connection.name}", "info")

    async def aclose(self) -> None:
        """End every agent (Neovim is closing)."""
        self._shutting_down = True
        for connection in list(self.agents.values()):
            await connection.aclose()
        self.agents.clear()


def _epoch(stamp: Any) -> float | None:
    """An ISO 8601 time (a session's ``updatedAt``) in seconds since the epoch."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
