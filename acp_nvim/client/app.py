"""The client application: chats, the agents behind them, and the user's commands.

Runs entirely on the worker's event loop. The editor side calls the public
coroutines (via the thread bridge); results reach the user through the Editor
port only, so nothing here waits on the editor.
"""

from __future__ import annotations

__all__ = ["App"]

import base64
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import msgspec

from acp_nvim.client.agent.process import AgentProcess, SpawnError, agent_process
from acp_nvim.client.config import AgentConfig, Config, ConfigError, load_config
from acp_nvim.client.editor import Editor
from acp_nvim.client.errors import AgentFailed
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.tasks import Tasks

if TYPE_CHECKING:
    # The chat (model, view, review) and the protocol stack (generated types,
    # fs/terminal/permission services) are imported after the first agent is
    # spawned, so their import overlaps the agent's own start-up
    # (doc/performance.md, start-up).
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.services.changes import SessionChanges
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import Attachment, ConfigOption, LoginMethod
    from acp_nvim.mcp import EditorSocket, McpOffer


@dataclass
class _Prompt:
    """A prompt waiting to be sent: its text and what the user attached."""

    text: str
    attachments: list[Attachment]


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
        self._opening: dict[int, anyio.CancelScope] = {}  # chats waiting for their agent
        self._cwds: dict[int, str] = {}  # where each chat was opened
        # Prompts typed while the chat was busy, sent in order when it is ready.
        self._queues: dict[int, list[_Prompt]] = {}
        # Values of login variables, by agent: added to its environment when it starts.
        self._secrets: dict[str, dict[str, str]] = {}
        # A rejected options table: chats refuse to start until setup() is fixed,
        # rather than silently running with defaults the user did not ask for.
        self.config_error: str | None = None
        # Neovim is closing: nothing may wait on the editor any more.
        self._shutting_down = False
        # The editor MCP server's socket, started when a session first offers it.
        self.mcp_socket: EditorSocket | None = None
        self._mcp_starting = anyio.Lock()

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
            self._configure(connection)
        for review in self.reviews.values():
            review.auto_save = self.config.auto_save
            if review.access is not None:
                review.access.options = self.config.fs_access
        return True

    async def open(
        self,
        chat_id: int,
        agent: str | None,
        cwd: str,
        session_id: str | None = None,
        fork: int | None = None,
    ) -> None:
        """Start (or reuse) the agent and create a session for a new chat.

        With ``session_id`` the chat resumes that session (its history replayed);
        with ``fork`` it continues a fork of chat ``fork``'s session, on its agent.
        """
        self._queues.setdefault(chat_id, [])  # prompts sent before the chat is ready
        parent = self.chats.get(fork) if fork is not None else None
        refusal = self.config_error or (None if fork is None else self._fork_refusal(fork))
        if refusal is not None:
            chat = self._new_chat(chat_id, agent or "?", cwd)
            chat.fail(refusal)
            self._give_back_queue(chat)
            return
        try:
            name, agent_config = self._agent_config(agent)
        except ConfigError as err:
            self.editor.notify(str(err))
            self.editor.emit("AcpError", {"chat": chat_id, "message": str(err)})
            for prompt in self._queues.pop(chat_id, []):
                self._return_input(chat_id, prompt.text)
            return
        # The agent's own start is the long pole: spawn it first, then import and
        # build the chat while it boots (doc/performance.md, start-up).
        spawned = await self._spawn(name, agent_config, cwd)
        chat = self._new_chat(chat_id, name, cwd)
        await self._start(chat, agent_config, spawned, session_id, fork_of=parent)

    def _fork_refusal(self, chat_id: int) -> str | None:
        """Why chat ``chat_id``'s session cannot be forked, or None. Lua forks only a
        ready chat whose agent offers it; this holds when that changed meanwhile (a
        new agent started here would not know the session)."""
        connection = self._agent_of.get(chat_id)
        if chat_id not in self.chats or connection is None or not connection.alive:
            return "cannot fork: the chat's agent is not running"
        return None

    async def restart(self, chat_id: int) -> None:
        """Start the chat's agent again and go on in the same transcript: the agent's
        session is resumed where it offers that, else a new one begins."""
        chat = self.chats.get(chat_id)
        if chat is None:
            self.editor.notify("no such chat to restart", "warn")
            return
        if chat.id in self._opening:
            return  # starting already
        if self.config_error is not None:
            chat.fail(self.config_error)
            return
        try:
            name, agent_config = self._agent_config(chat.agent)
        except ConfigError as err:
            chat.fail(str(err))
            return
        old = self._agent_of.get(chat_id)
        # The other chats of its process go along: restarted with it, not failed.
        along = [c for c in old.chats.values() if c is not chat] if old is not None else []
        busy = next((c for c in [chat, *along] if c.state == "running"), None)
        if busy is not None:
            which = "" if busy is chat else f" (chat #{busy.id}, same agent process)"
            self.editor.notify(f"cannot restart during a turn{which}: cancel it first", "warn")
            return
        if old is not None:
            for each in [chat, *along]:
                await self._release(each)
            await old.aclose()  # asked to restart it: even a live agent goes
        spawned = await self._spawn(name, agent_config, self._cwds[chat_id])
        for other in along:
            other.info(f"*{name} restarted from chat #{chat_id}: this chat goes on with it.*")
            session_id = other.session.session_id or None
            self.tasks.start_soon(
                functools.partial(self._start, again=True), other, agent_config, None, session_id
            )
        await self._start(chat, agent_config, spawned, chat.session.session_id or None, again=True)

    def _agent_config(self, agent: str | None) -> tuple[str, AgentConfig]:
        """An agent's options, with the values of its login variables in its env."""
        name, agent_config = self.config.agent(agent)
        secrets = self._secrets.get(name)
        if secrets:
            env = {**agent_config.env, **secrets}
            agent_config = msgspec.structs.replace(agent_config, env=env)
        return name, agent_config

    async def _start(
        self,
        chat: Chat,
        agent_config: AgentConfig,
        spawned: AgentProcess | AgentFailed | None,
        session_id: str | None,
        *,
        again: bool = False,
        fork_of: Chat | None = None,
    ) -> None:
        """Connect ``chat`` to its agent within ``timeouts.start``; ``cancel()`` and
        ``close()`` end the wait. ``again``: the chat goes on after a restart;
        ``fork_of``: its session is a fork of that chat's."""
        name = chat.agent
        chat.set_state("starting", agent=name)
        timeout = self.config.timeouts.start
        connection: AgentConnection | None = None
        with anyio.CancelScope() as scope:
            self._opening[chat.id] = scope
            try:
                with anyio.fail_after(timeout):
                    connection = await self._agent(name, agent_config, self._cwds[chat.id], spawned)
                    self._agent_of[chat.id] = connection
                    chat.on_info(
                        login_methods=[_plain(m) for m in connection.auth_methods()],
                        can_fork=connection.can_fork,
                    )
                    self._attach_review(chat, connection, agent_config)
                    if fork_of is not None:
                        # The fork keeps the parent's settings (from the agent's answer),
                        # not the configured defaults.
                        await connection.fork(chat, fork_of)
                    else:
                        # A restart goes on with the settings the user had, not the
                        # configured defaults (which would undo a mode switched to).
                        kept = _chosen(chat) if again else []
                        resumed = await self._session(connection, chat, session_id, again=again)
                        wanted = kept if again and resumed else _defaults(agent_config)
                        await self._apply_settings(connection, chat, wanted)
            except TimeoutError:
                chat.fail(
                    f"agent {name!r} did not answer within {timeout:g} s (timeouts.start); "
                    ":AcpRestart tries again"
                )
            except AgentFailed as err:
                if err.code == AgentFailed.AUTH_REQUIRED and connection is not None:
                    err = AgentFailed(f"{err}: log in with :AcpLogin, then send again", err.details)
                chat.fail(str(err), err.details)
            finally:
                del self._opening[chat.id]
        if scope.cancelled_caught and chat.state != "closed":
            chat.fail("the start was cancelled; :AcpRestart tries again")
        if chat.state == "ready":
            await self._drain(chat)
        elif chat.state != "closed":
            self._give_back_queue(chat)
            if connection is not None and not connection.auth_methods():
                await self._release(chat)  # kept while a login may still come

    async def _session(
        self, connection: AgentConnection, chat: Chat, session_id: str | None, *, again: bool
    ) -> bool:
        """Begin or resume ``chat``'s session; whether an existing one goes on."""
        if session_id is None:
            await connection.new_session(chat)
            return False
        if not again:
            await connection.resume(chat, session_id)
            return True
        # The transcript already shows the history: resume without a replay.
        try:
            await connection.resume(chat, session_id, replay=False)
        except AgentFailed as err:
            chat.info(f"*A new session begins ({err}).*")
            await connection.new_session(chat)
            return False
        return True

    async def _apply_settings(
        self, connection: AgentConnection, chat: Chat, wanted: list[_Wanted]
    ) -> None:
        """Settings to have before the first prompt (the agent's configured mode,
        model and options, or the user's after a restart). One the agent does not
        offer is reported, not dropped silently."""
        for what, key, value in wanted:
            option = _setting(chat, key)
            choices = [v for v, _ in option.choices] if option is not None else []
            if option is None or (option.type == "select" and value not in choices):
                offered = f" (offered: {', '.join(choices)})" if choices else ""
                message = f"{chat.agent} does not offer {what}{offered}"
                chat.info(f"*{message}*")
                self.editor.notify(message, "warn")
            elif option.current != value:
                try:
                    await connection.set_config(chat, option.id, value)
                except AgentFailed as err:
                    chat.info(f"*{what}: {err}*")

    def _attach_review(
        self, chat: Chat, connection: AgentConnection, agent_config: AgentConfig
    ) -> None:
        from acp_nvim.client.services.access import FileAccess
        from acp_nvim.client.services.changes import SessionChanges

        review = self.reviews.get(chat.id)
        if review is None or review.cwd != connection.cwd:
            review = self.reviews[chat.id] = SessionChanges(
                self.editor,
                chat.id,
                connection.cwd,
                self.tasks.reporting_to(chat.show_error),
                auto_save=self.config.auto_save,
                missing_file_as_empty=agent_config.missing_file_as_empty,
            )
        # Asks through this connection's prompts (a restart brings new ones).
        review.access = FileAccess(
            chat, connection.permissions, connection.cwd, self.config.fs_access
        )
        chat.changes = review

    async def _release(self, chat: Chat) -> None:
        """Detach ``chat`` from its agent; the agent ends when no other chat uses it."""
        connection = self._agent_of.pop(chat.id, None)
        if connection is None:
            return
        await connection.release(chat)
        if not connection.chats and connection not in self._agent_of.values():
            if self.agents.get(connection.name) is connection:
                del self.agents[connection.name]
            await connection.aclose()

    def _new_chat(self, chat_id: int, agent: str, cwd: str) -> Chat:
        from acp_nvim.client.session.chat import Chat

        chat = self.chats[chat_id] = Chat(chat_id, agent, self.editor)
        self._cwds[chat_id] = cwd
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
                mcp=lambda connection: self._mcp_offer(connection, agent_config),
            )
            self._configure(connection)
            try:
                await connection.start(self.tasks)
            except BaseException:  # failed, timed out or cancelled: no agent left behind
                await connection.aclose()
                raise
            self.agents[name] = connection
            self.tasks.start_soon(self._watch_exit, connection)
            return connection
        finally:
            del self._starting[name]
            done.set()

    def _configure(self, connection: AgentConnection) -> None:
        """The options an agent connection follows."""
        connection.permissions.policy = self.config.permission_policy
        connection.permissions.preview = self.config.diff_preview is not False
        connection.cancel_grace = self.config.timeouts.cancel
        if connection.mcp is not None:
            agent_config = self.config.all_agents().get(connection.name, connection.config)
            connection.mcp.tools = self.config.editor_mcp_tools(agent_config)
            connection.mcp.servers = self.config.agent_mcp_servers(agent_config)

    def _mcp_offer(self, connection: AgentConnection, agent_config: AgentConfig) -> McpOffer:
        """The MCP servers ``connection``'s sessions get (the options say which)."""
        from acp_nvim.mcp import McpOffer

        return McpOffer(
            connection.name,
            self.reviews,
            connection.terminals,
            connection.permissions,
            connection.cwd,
            self._mcp_socket,
            lambda: self.config.timeouts.lsp,
            tools=self.config.editor_mcp_tools(agent_config),
            servers=self.config.agent_mcp_servers(agent_config),
        )

    async def _mcp_socket(self) -> EditorSocket:
        """The editor MCP server's socket, started on first use."""
        async with self._mcp_starting:
            if self.mcp_socket is None:
                from acp_nvim.mcp import EditorSocket

                socket = EditorSocket(self.editor, self.tasks, lambda: self.log)
                await socket.start()
                self.mcp_socket = socket
            return self.mcp_socket

    async def buffers_changed(self) -> None:
        """File buffers came or went: MCP clients that follow the list are told."""
        if self.mcp_socket is not None:
            await self.mcp_socket.resources_changed()
        for connection in self.agents.values():
            for listener in connection.mcp.listeners if connection.mcp is not None else []:
                await listener()

    def mcp_status(self) -> dict[str, Any]:
        """The editor MCP server for ``:checkhealth``: its socket and connections."""
        socket = self.mcp_socket
        if socket is None:
            return {"socket": None, "connections": 0}
        return {"socket": socket.path, "connections": socket.connections}

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

    async def send(
        self,
        chat_id: int,
        text: str,
        context: Sequence[dict[str, Any]] = (),
        restore: bool = False,
    ) -> None:
        """Send ``text`` with ``context`` (files, selections, diagnostics, images the
        user attached: services.context), or queue it while the chat is busy; a chat
        whose agent failed is restarted first. What cannot be sent goes back to the
        input. ``restore``: an edited prompt sent again, after the files are taken
        back to before the last turn (one step, :AcpEdit)."""
        chat = self.chats.get(chat_id)
        queue = self._queues.get(chat_id)  # there from open() to close()
        if queue is None or (chat is not None and chat.state == "closed"):
            self.editor.notify("cannot send: the chat is closed", "warn")
            self._return_input(chat_id, text)
            return
        if restore:
            await self.restore(chat_id)
        attachments: list[Attachment] = []
        if context:
            from acp_nvim.client.services.context import resolve

            # What the user sees now is what goes, even if the prompt waits in the queue.
            attachments, warnings = await resolve(self.editor, context, self._cwds[chat_id])
            for warning in warnings:
                self.editor.notify(warning, "warn")
        queue.append(_Prompt(text, attachments))
        if chat is None:
            return  # still being opened: sent once the chat is ready
        if chat.state == "ready":
            await self._drain(chat)
        elif chat.state == "error":
            self._show_queue(chat)
            await self.restart(chat_id)
        else:  # starting or running: it goes when the chat is ready
            self._show_queue(chat)

    async def _drain(self, chat: Chat) -> None:
        """Run the queued prompts of a ready chat, in order."""
        queue = self._queues.get(chat.id)
        while queue and chat.state == "ready" and self.chats.get(chat.id) is chat:
            prompt = queue.pop(0)
            self._show_queue(chat)
            connection = self._agent_of.get(chat.id)
            try:
                if connection is None:
                    raise AgentFailed(f"agent {chat.agent!r} is not running")
                await connection.prompt(chat, prompt.text, prompt.attachments)
            except AgentFailed as err:
                self._return_input(chat.id, prompt.text)
                chat.fail(str(err), err.details)
        if chat.state == "error":
            self._give_back_queue(chat)

    def _give_back_queue(self, chat: Chat) -> None:
        """The chat failed: what waited to be sent goes back to the input, not lost
        in a queue the user may not see."""
        queue = self._queues.get(chat.id)
        if queue:
            self._return_input(chat.id, "\n\n".join(p.text for p in queue))
            queue.clear()
            self._show_queue(chat)

    def dequeue(self, chat_id: int, index: int, text: str, edit: bool = False) -> None:
        """Drop queued prompt ``index`` (0-based), the one reading ``text``; ``edit``
        puts its text back in the input.

        The user picked it from the queue as it was: when the prompts before it were
        sent meanwhile, it is found by its text, never another one dropped.
        """
        queue = self._queues.get(chat_id, [])
        chat = self.chats.get(chat_id)
        if not (0 <= index < len(queue) and queue[index].text == text):
            index = next((i for i, p in enumerate(queue) if p.text == text), -1)
        if index < 0 or chat is None:
            self.editor.notify("that prompt is no longer queued", "warn")
            return
        prompt = queue.pop(index)
        self._show_queue(chat)
        if edit:
            self._return_input(chat_id, prompt.text)

    def _show_queue(self, chat: Chat) -> None:
        from acp_nvim.client.session import view

        queued = self._queues.get(chat.id, [])
        texts = [p.text for p in queued]
        self.editor.render(chat.id, [view.status_op(queued=len(texts), queue=texts)])

    def _return_input(self, chat_id: int, text: str) -> None:
        """Put text that was not handed over back in the chat's input."""
        self.editor.render(chat_id, [{"op": "input", "text": text}])

    async def cancel(self, chat_id: int) -> None:
        """Cancel the running turn, or stop waiting for a starting agent."""
        chat = self.chats.get(chat_id)
        opening = self._opening.get(chat_id)
        if opening is not None:
            opening.cancel()
            return
        connection = self._agent_of.get(chat_id)
        if chat is not None and connection is not None and chat.state == "running":
            await self.cancel_quietly(connection, chat)

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

    def baseline(self, chat_id: int, path: str, turn: int | None = None) -> None:
        """Hand the editor ``path``'s text before ``turn`` (see SessionChanges.baseline)."""
        review = self.reviews.get(chat_id)
        if review is None:
            self.editor.notify("no changes to review in this chat", "warn")
            return
        review.baseline(path, turn)

    async def buffer_changed(self, path: str) -> None:
        """The user changed a buffer holding agent hunks (typing, undo, redo)."""
        for review in list(self.reviews.values()):
            await review.sync(path)

    async def restore(self, chat_id: int, turn: int | None = None) -> None:
        """Take the project's files back to how they were before ``turn`` of the chat
        (default: its last turn); the transcript marks it (the agent is not rewound:
        it learns of the restore from the files)."""
        chat = self.chats.get(chat_id)
        review = self.reviews.get(chat_id)
        if chat is None or review is None or chat.turn == 0:
            self.editor.notify("no turn to restore", "warn")
            return
        if chat.state == "running":
            self.editor.notify("cannot restore during a turn: cancel it first", "warn")
            return
        turn = chat.turn if turn is None else turn
        if not 1 <= turn <= chat.turn:
            self.editor.notify(f"no turn {turn} (turns 1 to {chat.turn})", "warn")
            return
        restored = await review.restore(turn)
        listed = ", ".join(f"`{name}`" for name in restored) or "no file needed it"
        chat.info(f"*Restored the files to before turn {turn}: {listed}.*")

    async def answer(self, chat_id: int, request_id: str, option_id: str) -> None:
        """The user answered a permission prompt of chat ``chat_id``."""
        connection = self._agent_of.get(chat_id)
        if connection is None or not connection.permissions.answer(request_id, option_id):
            self.editor.notify("that permission request is no longer pending", "warn")

    def elicit(
        self, chat_id: int, request_id: str, action: str, content: dict[str, Any] | None
    ) -> None:
        """The user answered an agent's elicitation in chat ``chat_id`` (accept,
        decline or cancel; ``content``: an accepted form's values)."""
        connection = self._agent_of.get(chat_id)
        if action not in ("accept", "decline", "cancel"):
            raise ValueError(f"unknown elicitation action {action!r}")
        if connection is None or not connection.elicitations.answer(
            request_id, action, content  # type: ignore[arg-type]
        ):
            self.editor.notify("that request of the agent is no longer pending", "warn")

    async def close(self, chat_id: int) -> None:
        """Forget a chat; its agent ends when no other chat uses it."""
        opening = self._opening.get(chat_id)
        if opening is not None:
            opening.cancel()
        chat = self.chats.pop(chat_id, None)
        self.reviews.pop(chat_id, None)
        self._queues.pop(chat_id, None)
        self._cwds.pop(chat_id, None)
        if chat is None:
            return
        connection = self._agent_of.get(chat_id)
        if connection is not None and chat.state == "running":
            await self.cancel_quietly(connection, chat)
        chat.state = "closed"
        await self._release(chat)

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

    async def login(
        self, chat_id: int, method_id: str | None, values: dict[str, str] | None = None
    ) -> None:
        """Run one of the agent's login methods (by id; the first when None), then go
        on: the agent restarts to see a terminal login's or a variable's result, and
        a chat that waited for the login gets its session.

        ``values`` are a variable method's values; they go only into the agent's
        environment (never a log).
        """
        connection = self._connection(chat_id)
        chat = self.chats.get(chat_id)
        if connection is None or chat is None:
            return
        methods = connection.auth_methods()
        method = next((m for m in methods if m.id == method_id or method_id is None), None)
        if method is None:
            offered = ", ".join(m.id for m in methods)
            message = f"no login {method_id!r} (offered: {offered})" if offered else "no login"
            self.editor.notify(f"agent {connection.name!r} offers {message}")
            return
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
            self.editor.notify(f"login to {connection.name} failed: {err}")
            return
        self.editor.notify(f"logged in to {connection.name}", "info")
        if method.kind != "agent":
            await self.restart(chat_id)  # its new credentials or environment
        elif chat.state == "error":
            await self._start(chat, connection.config, None, chat.session.session_id or None)

    async def logout(self, chat_id: int) -> None:
        connection = self._connection(chat_id)
        if connection is not None:
            try:
                await connection.logout()
            except AgentFailed as err:
                self.editor.notify(str(err))
                return
            self.editor.notify(f"logged out of {connection.name}", "info")

    async def set_category(self, chat_id: int, category: str, value: str) -> None:
        """Switch the chat's mode or model (the setting of that ``category``); ``value``
        is a choice's id or name."""
        chat = self.chats.get(chat_id)
        option = _setting(chat, category) if chat is not None else None
        if chat is None or option is None:
            self.editor.notify(f"the agent offers no {category} to choose", "warn")
            return
        by_name = {name: value_id for value_id, name in option.choices}
        value = by_name.get(value, value)
        if option.choices and value not in dict(option.choices):
            names = ", ".join(v for v, _ in option.choices)
            self.editor.notify(f"no {category} {value!r} (offered: {names})", "warn")
            return
        await self.set_config(chat_id, option.id, value)

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
            if self.mcp_socket is not None:
                await self.mcp_socket.aclose()


def _plain(method: LoginMethod) -> dict[str, Any]:
    """A login method for Lua's picker (which asks for the variables' values)."""
    return {"id": method.id, "name": method.name, "kind": method.kind, "vars": method.vars}


_Wanted = tuple[str, str, str | bool]  # how it is named in a notice, setting id or category, value


def _defaults(agent_config: AgentConfig) -> list[_Wanted]:
    """The agent's configured mode, model and settings."""
    wanted: list[_Wanted] = [
        (f"{category} {value!r}", category, value)
        for category, value in (("mode", agent_config.mode), ("model", agent_config.model))
        if value is not None
    ]
    return wanted + [(f"setting {k}={v!r}", k, v) for k, v in agent_config.config_options.items()]


def _chosen(chat: Chat) -> list[_Wanted]:
    """The chat's settings as they are now: what a restarted agent's session gets back."""
    return [
        (f"setting {o.id}={o.current!r}", o.id, o.current)
        for o in chat.session.config_options
        if isinstance(o.current, (str, bool)) and o.type in ("select", "boolean")
    ]


def _setting(chat: Chat, key: str) -> ConfigOption | None:
    """The chat's setting with id ``key``, else the one of category ``key``."""
    options = chat.session.config_options
    return next((o for o in options if o.id == key), None) or next(
        (o for o in options if o.category == key), None
    )
