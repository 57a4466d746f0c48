"""One running agent: its process, the JSON-RPC connection, and its sessions.

Several chats may share one agent (``:AcpChat!`` opens a second session on the
same connection); the agent process ends when its last chat closes. Everything
version-specific about the wire goes through the adapter chosen at
``initialize``; the rest of the client sees only :class:`Chat`.
"""

from __future__ import annotations

__all__ = ["AgentConnection", "AgentFailed"]

import itertools
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import msgspec

from acp_nvim import __version__
from acp_nvim.client import adapter_v1, files, permissions
from acp_nvim.client.chat import Chat
from acp_nvim.client.config import AgentConfig
from acp_nvim.client.errors import AgentFailed
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.process import AgentProcess, SpawnError, agent_cwd, agent_process
from acp_nvim.client.terminals import Terminals
from acp_nvim.protocol import Connection, ConnectionClosed, RequestError
from acp_nvim.protocol import schema_v1 as v1

if TYPE_CHECKING:
    from acp_nvim.client import adapter_v2

SUPPORTED_VERSIONS = (1,)
T = TypeVar("T")


class AgentConnection:
    """Process + connection + negotiated protocol for one agent."""

    def __init__(
        self,
        name: str,
        config: AgentConfig,
        *,
        cwd: str,
        log: ProtocolLog,
        protocol_version: int = 1,
        process: AgentProcess | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.cwd = agent_cwd(config, cwd)
        self.log = log
        # Started already when the app spawned it before importing this module.
        self.process = process or self._new_process()
        self.offer_version = protocol_version
        # The v2 surface, once v2 is agreed; None on a v1 connection.
        self.v2: adapter_v2.SessionsV2 | None = None
        self.protocol_version: int | None = None
        self.agent_title: str | None = None
        self.chats: dict[str, Chat] = {}  # by session id
        # v1 terminal/* commands and the display-terminal sink (v2), in editor buffers.
        self.terminals = Terminals(self.chats, self.cwd)
        self.permissions = permissions.Permissions()
        self._connection: Connection | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self.exited = anyio.Event()

    def __repr__(self) -> str:
        return f"<AgentConnection {self.name} v{self.protocol_version} {len(self.chats)} sessions>"

    def _new_process(self) -> AgentProcess:
        return agent_process(self.name, self.config, self.cwd, self.log)

    @property
    def alive(self) -> bool:
        return self._connection is not None and not self.exited.is_set()

    # -- start ---------------------------------------------------------------

    async def start(self, tasks: anyio.abc.TaskGroup) -> None:
        """Spawn the agent and initialize the connection.

        Raises:
            AgentFailed: spawn failed, the agent exited, or it speaks another version.
        """
        self._tasks = tasks
        self.terminals.start(tasks)
        if self.offer_version == 2 and await self._start_v2(tasks):
            return
        connection = await self._open()
        connection.on_notifications("session/update", v1.SessionNotification, self._on_updates)
        permissions.register(connection, self)
        files.register(connection, self)
        self.terminals.register(connection)
        self._run(tasks, connection)
        await self._initialize(connection)

    async def _open(self) -> Connection:
        """Spawn the agent; the connection is served once handlers are registered."""
        if self.process.pid is None:
            try:
                await self.process.start()
            except SpawnError as err:
                raise AgentFailed(str(err)) from None
        return Connection(
            self.process.stdout,
            self.process.stdin,
            convert=v1.decode,
            enc_hook=v1.enc_hook,
            on_traffic=self._traffic,
            name=self.name,
        )

    def _run(self, tasks: anyio.abc.TaskGroup, connection: Connection) -> None:
        self._connection = connection
        tasks.start_soon(self.process.drain_stderr)
        tasks.start_soon(self._serve, connection, self.process, self.exited)

    async def _start_v2(self, tasks: anyio.abc.TaskGroup) -> bool:
        """Offer v2. False when the agent answered 1: it was stopped, to restart with v1.

        Restarting (rather than continuing on the same connection) lets the v1
        ``initialize`` advertise our file and terminal capabilities (doc/decisions/0004).
        """
        # Imported here: the v2 types cost start-up time to every v1 session.
        from acp_nvim.client import adapter_v2, negotiate

        connection = await self._open()
        self._run(tasks, connection)
        try:
            response = await negotiate.offer_v2(connection, self.name)
        except negotiate.Fallback:
            await self.aclose()
            self.process = self._new_process()
            self.exited = anyio.Event()
            self._connection = None
            return False
        except negotiate.VersionMismatch as err:
            await self.aclose()
            raise AgentFailed(str(err)) from None
        except ConnectionClosed:
            raise self.exit_failure("exited during initialize") from None
        except RequestError as err:
            raise AgentFailed(f"agent {self.name!r} refused initialize: {err}") from None
        except msgspec.MsgspecError as err:
            await self.aclose()
            message = f"agent {self.name!r} sent an invalid initialize answer: {err}"
            raise AgentFailed(message) from None
        self.protocol_version = 2
        self.agent_title = response.info.title or response.info.name
        self.v2 = adapter_v2.SessionsV2(
            connection,
            response,
            cwd=self.cwd,
            chats=self.chats,
            terminals=self.terminals,
            ask_permission=self.permissions.ask,
        )
        return True

    def _traffic(self, direction: str, lines: Sequence[bytes]) -> None:
        self.log.add(self.name, ">>" if direction == "out" else "<<", *lines)

    async def _serve(
        self, connection: Connection, process: AgentProcess, exited: anyio.Event
    ) -> None:
        # The process and event of *this* start: a v1 fallback replaces both.
        try:
            await connection.serve()
        finally:
            # EOF on stdout: the agent is gone or going; collect its exit code.
            with anyio.move_on_after(2):
                await process.wait()
            exited.set()

    async def _initialize(self, connection: Connection) -> None:
        params = v1.InitializeRequest(
            protocol_version=1,
            client_capabilities=v1.ClientCapabilities(
                fs=v1.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
            ),
            client_info=v1.Implementation(name="acp.nvim", title="acp.nvim", version=__version__),
        )
        request = connection.request("initialize", params, v1.InitializeResponse)
        response = await self._call(request, "initializing")
        if response.protocol_version not in SUPPORTED_VERSIONS:
            await self.aclose()
            raise AgentFailed(
                f"agent {self.name!r} speaks ACP version {response.protocol_version}; "
                f"acp.nvim speaks version 1"
            )
        self.protocol_version = response.protocol_version
        info = response.agent_info
        self.agent_title = (info.title or info.name) if info is not None else None

    def exit_failure(self, what: str) -> AgentFailed:
        code = self.process.returncode
        status = f" (exit code {code})" if code is not None else ""
        return AgentFailed(f"agent {self.name!r} {what}{status}", self.process.stderr_tail())

    # -- sessions -------------------------------------------------------------

    async def new_session(self, chat: Chat) -> None:
        """Create a session for ``chat`` and mark it ready.

        Raises:
            AgentFailed: the agent refused or died.
        """
        connection = self._require_connection()
        if self.v2 is not None:
            session_id = await self._call(self.v2.new_session(chat), "creating a session")
            chat.ready(session_id, 2, self.agent_title)
            return
        params = v1.NewSessionRequest(cwd=self.cwd, mcp_servers=[])
        request = connection.request("session/new", params, v1.NewSessionResponse)
        response = await self._call(request, "creating a session")
        self.chats[response.session_id] = chat
        assert self.protocol_version is not None
        chat.ready(response.session_id, self.protocol_version, self.agent_title)
        if response.modes is not None:
            chat.on_info(mode=response.modes.current_mode_id)

    async def prompt(self, chat: Chat, text: str) -> None:
        """Run one turn; it ends with the agent's stop reason or an error in the chat."""
        connection = self._require_connection()
        if self.v2 is not None:
            await self._prompt_v2(self.v2, chat, text)
            return
        chat.start_turn(text)
        params = v1.PromptRequest(
            session_id=chat.session.session_id, prompt=[v1.ContentBlockText(text=text)]
        )
        try:
            response = await connection.request("session/prompt", params, v1.PromptResponse)
        except ConnectionClosed:
            with anyio.move_on_after(2):
                await self.exited.wait()
            failure = self.exit_failure("exited during the turn")
            chat.fail(str(failure), failure.details)
        except RequestError as err:
            chat.fail(f"agent error {err}")
        else:
            if chat.changes is not None:
                await chat.changes.end_turn()  # the review is current when AcpTurnEnd fires
            chat.end_turn(response.stop_reason)
        # The turn is over: nobody waits for the answers any more.
        self.permissions.cancel(chat)

    async def cancel(self, chat: Chat) -> None:
        """Ask the agent to stop the turn; the turn ends when it answers ``cancelled``."""
        connection = self._require_connection()
        try:
            if self.v2 is not None:
                await self.v2.cancel(chat)
            else:
                params = v1.CancelNotification(session_id=chat.session.session_id)
                await connection.notify("session/cancel", params)
        except ConnectionClosed:
            pass
        self.permissions.cancel(chat)

    async def _prompt_v2(self, sessions: adapter_v2.SessionsV2, chat: Chat, text: str) -> None:
        """A v2 turn ends on the agent's idle update, or when the agent exits first."""

        async def turn() -> None:
            try:
                await sessions.prompt(chat, text)
            except RequestError as err:
                chat.fail(f"agent error {err}")
            except ConnectionClosed:
                return  # reported below, once the exit code is known
            tasks.cancel_scope.cancel()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(turn)
            await self.exited.wait()
            tasks.cancel_scope.cancel()
        if chat.state == "running":
            failure = self.exit_failure("exited during the turn")
            chat.fail(str(failure), failure.details)

    # -- v2 session surface ------------------------------------------------------

    def _sessions(self, what: str) -> adapter_v2.SessionsV2:
        self._require_connection()
        if self.v2 is None:
            raise AgentFailed(f"{what} needs ACP v2; agent {self.name!r} speaks version 1")
        return self.v2

    async def _call(self, call: Awaitable[T], doing: str) -> T:
        """Await a request; a refusal or an exit becomes AgentFailed naming ``doing``."""
        try:
            return await call
        except ConnectionClosed:
            raise self.exit_failure(f"exited while {doing}") from None
        except RequestError as err:
            raise AgentFailed(f"agent {self.name!r} failed {doing}: {err}") from None

    async def list_sessions(self, cwd: str | None = None) -> list[dict[str, Any]]:
        """The agent's sessions (for ``cwd`` when given), as it reports them."""
        sessions = self._sessions("listing sessions")
        return await self._call(sessions.list_sessions(cwd), "listing sessions")

    async def resume(self, chat: Chat, session_id: str, *, replay: bool = True) -> None:
        """Attach ``chat`` to an existing session; ``replay`` shows its history first."""
        sessions = self._sessions("resuming a session")
        await self._call(sessions.resume(chat, session_id, replay=replay), "resuming a session")
        chat.ready(session_id, 2, self.agent_title)

    async def delete_session(self, session_id: str) -> None:
        sessions = self._sessions("deleting a session")
        if not sessions.can_delete:
            raise AgentFailed(f"agent {self.name!r} does not offer deleting sessions")
        await self._call(sessions.delete(session_id), "deleting a session")

    async def set_config(self, chat: Chat, config_id: str, value: str | bool) -> None:
        sessions = self._sessions("changing a setting")
        await self._call(sessions.set_config(chat, config_id, value), "changing a setting")

    def auth_methods(self) -> list[tuple[str, str]]:
        """(method id, name) of the login methods the agent offers (v2)."""
        return self.v2.auth_methods if self.v2 is not None else []

    async def login(self, method_id: str | None) -> None:
        sessions = self._sessions("logging in")
        methods = [m for m, _ in sessions.auth_methods]
        if not methods:
            raise AgentFailed(f"agent {self.name!r} offers no login")
        await self._call(sessions.login(method_id or methods[0]), "logging in")

    async def logout(self) -> None:
        sessions = self._sessions("logging out")
        if not sessions.auth_methods:
            raise AgentFailed(f"agent {self.name!r} offers no login")
        await self._call(sessions.logout(), "logging out")

    async def release(self, chat: Chat) -> None:
        """Forget ``chat``'s session; over v2 the agent is told (``session/close``).

        Its terminals are stopped and their buffers deleted.
        """
        self.detach(chat)
        await self.terminals.end_session(chat)
        if self.v2 is not None and self.alive and chat.session.session_id:
            try:
                await self.v2.close(chat)
            except (ConnectionClosed, RequestError):
                pass  # closing anyway

    def detach(self, chat: Chat) -> None:
        self.chats.pop(chat.session.session_id, None)
        self.permissions.forget(chat)

    async def _on_updates(self, notifications: list[v1.SessionNotification]) -> None:
        # A run of updates as one read of the stream brought them, split by session.
        for session_id, group in itertools.groupby(notifications, lambda n: n.session_id):
            chat = self.chats.get(session_id)
            if chat is not None:
                adapter_v1.apply_updates(chat, [n.update for n in group])

    def _require_connection(self) -> Connection:
        if self._connection is None or self.exited.is_set():
            raise AgentFailed(f"agent {self.name!r} is not running")
        return self._connection

    async def aclose(self) -> None:
        """End the connection and the agent's whole process group."""
        with anyio.CancelScope(shield=True):
            if self._connection is not None:
                await self._connection.aclose()
            await self.process.aclose()
            self.exited.set()
