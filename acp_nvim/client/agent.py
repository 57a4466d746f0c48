"""One running agent: its process, the JSON-RPC connection, and its sessions.

Several chats may share one agent (``:AcpChat!`` opens a second session on the
same connection); the agent process ends when its last chat closes. Everything
version-specific about the wire goes through the adapter chosen at
``initialize``; the rest of the client sees only :class:`Chat`.
"""

from __future__ import annotations

__all__ = ["AgentConnection", "AgentFailed"]

import os
from typing import Any

import anyio
import anyio.abc

from acp_nvim import __version__
from acp_nvim.client import adapter_v1
from acp_nvim.client.chat import Chat
from acp_nvim.client.config import AgentConfig
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.process import AgentProcess, SpawnError
from acp_nvim.protocol import Connection, ConnectionClosed, RequestError
from acp_nvim.protocol import schema_v1 as v1

SUPPORTED_VERSIONS = (1,)


class AgentFailed(Exception):
    """The agent could not be started or initialized; ``details`` has its stderr tail."""

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or []


class AgentConnection:
    """Process + connection + negotiated protocol for one agent."""

    def __init__(
        self, name: str, config: AgentConfig, *, cwd: str, log: ProtocolLog
    ) -> None:
        self.name = name
        self.cwd = os.path.abspath(config.cwd or cwd)
        self.log = log
        self.process = AgentProcess(
            name,
            config.cmd,
            env=config.env,
            cwd=self.cwd,
            on_stderr=lambda line: log.add(name, "!!", line),
        )
        self.protocol_version: int | None = None
        self.agent_title: str | None = None
        self.chats: dict[str, Chat] = {}  # by session id
        self._connection: Connection | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self.exited = anyio.Event()

    def __repr__(self) -> str:
        return f"<AgentConnection {self.name} v{self.protocol_version} {len(self.chats)} sessions>"

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
        try:
            await self.process.start()
        except SpawnError as err:
            raise AgentFailed(str(err)) from None
        connection = Connection(
            self.process.stdout,
            self.process.stdin,
            convert=v1.decode,
            enc_hook=v1.enc_hook,
            on_traffic=self._traffic,
            name=self.name,
        )
        connection.on_notification("session/update", v1.SessionNotification, self._on_update)
        self._connection = connection
        tasks.start_soon(self.process.drain_stderr)
        tasks.start_soon(self._serve, connection)
        await self._initialize(connection)

    def _traffic(self, direction: str, line: bytes) -> None:
        self.log.add(self.name, ">>" if direction == "out" else "<<", line)

    async def _serve(self, connection: Connection) -> None:
        try:
            await connection.serve()
        finally:
            # EOF on stdout: the agent is gone or going; collect its exit code.
            with anyio.move_on_after(2):
                await self.process.wait()
            self.exited.set()

    async def _initialize(self, connection: Connection) -> None:
        params = v1.InitializeRequest(
            protocol_version=1,
            client_capabilities=v1.ClientCapabilities(
                fs=v1.FileSystemCapabilities(read_text_file=False, write_text_file=False),
                terminal=False,
            ),
            client_info=v1.Implementation(name="acp.nvim", title="acp.nvim", version=__version__),
        )
        try:
            response = await connection.request("initialize", params, v1.InitializeResponse)
        except ConnectionClosed:
            raise self.exit_failure("exited during initialize") from None
        except RequestError as err:
            raise AgentFailed(f"agent {self.name!r} refused initialize: {err}") from None
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
        params = v1.NewSessionRequest(cwd=self.cwd, mcp_servers=[])
        try:
            response = await connection.request("session/new", params, v1.NewSessionResponse)
        except ConnectionClosed:
            raise self.exit_failure("exited while creating a session") from None
        except RequestError as err:
            raise AgentFailed(f"agent {self.name!r} could not create a session: {err}") from None
        self.chats[response.session_id] = chat
        assert self.protocol_version is not None
        chat.ready(response.session_id, self.protocol_version, self.agent_title)
        if response.modes is not None:
            chat.on_info(mode=response.modes.current_mode_id)

    async def prompt(self, chat: Chat, text: str) -> None:
        """Run one turn; it ends with the agent's stop reason or an error in the chat."""
        connection = self._require_connection()
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
            chat.end_turn(response.stop_reason)

    async def cancel(self, chat: Chat) -> None:
        """Ask the agent to stop the turn; the turn ends when it answers ``cancelled``."""
        connection = self._require_connection()
        try:
            params = v1.CancelNotification(session_id=chat.session.session_id)
            await connection.notify("session/cancel", params)
        except ConnectionClosed:
            pass

    def detach(self, chat: Chat) -> None:
        self.chats.pop(chat.session.session_id, None)

    async def _on_update(self, params: Any) -> None:
        chat = self.chats.get(params.session_id)
        if chat is not None:
            adapter_v1.apply_update(chat, params.update)

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
