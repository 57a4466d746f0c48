"""One running agent: its process, the JSON-RPC connection, and its sessions.

Several chats may share one agent (``:AcpChat!`` opens a second session on the
same connection); the agent process ends when its last chat closes. Everything
version-specific goes through the :class:`~acp_nvim.client.agent.sessions.Sessions`
chosen by negotiation; this module never asks which version is spoken.
"""

from __future__ import annotations

__all__ = ["AgentConnection", "AgentFailed"]

import functools
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio

from acp_nvim.client import malloc
from acp_nvim.client.agent import v1
from acp_nvim.client.agent.ending import Ending
from acp_nvim.client.agent.held import HeldSessions
from acp_nvim.client.agent.negotiate import negotiate
from acp_nvim.client.agent.process import AgentProcess, SpawnError, agent_process
from acp_nvim.client.agent.sessions import (
    MessageForks,
    NotOffered,
    Services,
    Sessions,
    SessionTaken,
)
from acp_nvim.client.agent.turns import Abandoned, Turns, Withdrawn
from acp_nvim.client.config import AgentConfig, agent_cwd
from acp_nvim.client.errors import AgentFailed, Refused
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.mcp import McpOffer
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.elicitations import Elicitations
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat, replayed
from acp_nvim.client.session.model import Attachment, LoginMethod
from acp_nvim.client.tasks import Tasks, internal_error
from acp_nvim.protocol import Connection, ConnectionClosed, ProtocolError, RequestError
from acp_nvim.protocol.unknown import decode, enc_hook

T = TypeVar("T")
# Seconds a closing chat waits for the agent to acknowledge session/close (a resume
# of its session waits for the answer however long it takes).
_CLOSE_TIMEOUT = 2.0
# Seconds a turn start's drawing waits for its prompt's write at most (decision 0067):
# a review's scan of a changed tree or an agent not reading must not keep it back.
_DRAWN_AFTER = 0.005


async def _call_later(seconds: float, fn: Callable[[], object]) -> None:
    await anyio.sleep(seconds)
    fn()


class AgentConnection:
    """Process + connection + negotiated sessions for one agent.

    ``reviews`` is the app's review of each chat's changes, by chat id (live).
    ``serial`` tells connections apart (a restarted agent may name its sessions
    as the one before it did).
    """

    _serials = itertools.count(1)

    def __init__(
        self,
        name: str,
        config: AgentConfig,
        *,
        cwd: str,
        log: ProtocolLog,
        reviews: Mapping[int, SessionChanges],
        protocol_version: int = 1,
        process: AgentProcess | None = None,
        mcp: Callable[[AgentConnection], McpOffer] | None = None,
    ) -> None:
        self.name = name
        self.serial = next(self._serials)
        self.config = config
        # Where the process runs; each session works in its chat's own directory.
        self.cwd = agent_cwd(config, cwd)
        self.log = log
        self.reviews = reviews
        # Started already when the app spawned it before importing this module.
        self.process = process or self._new_process()
        self.offer_version = protocol_version
        self.sessions: Sessions | None = None
        self.chats: dict[str, Chat] = {}  # by session id
        # Chats whose prompt carrying their conversation the agent refused once.
        self._seed_refused: set[int] = set()
        self.held = HeldSessions()
        # Commands (v1 terminal/*) and display terminals (v2), in editor buffers.
        self.terminals = Terminals(self.chats)
        self.permissions = Permissions()
        self.elicitations = Elicitations()
        # The MCP servers offered with each session, made for this connection.
        self.mcp = mcp(self) if mcp is not None else None
        # How turns end that the agent does not end (turns.grace: timeouts.cancel).
        self.turns = Turns()
        self._connection: Connection | None = None
        self._tasks: Tasks | None = None
        self.ending = Ending(name, self.process)

    def __repr__(self) -> str:
        return f"<AgentConnection {self.name} v{self.protocol_version} {len(self.chats)} sessions>"

    def _new_process(self) -> AgentProcess:
        return agent_process(self.name, self.config, self.cwd, self.log)

    @property
    def exited(self) -> anyio.Event:
        """Set once this start's process is collected (or stopped)."""
        return self.ending.exited

    @property
    def alive(self) -> bool:
        return self._connection is not None and not self.exited.is_set()

    def raise_if_exited(self, err: AgentFailed) -> None:
        """A session could not go on (``err``): return while the agent lives, to fall
        back to a new session; raise ``err`` once it exited: no new session could
        start either, and the exit is the error to show."""
        if not self.alive:
            raise err

    @property
    def protocol_version(self) -> int | None:
        return self.sessions.version if self.sessions is not None else None

    @property
    def agent_title(self) -> str | None:
        return self.sessions.agent_title if self.sessions is not None else None

    # -- start ---------------------------------------------------------------

    async def start(self, tasks: Tasks) -> None:
        """Spawn the agent and initialize the connection in the version agreed.

        Raises:
            AgentFailed: spawn failed, the agent exited, refused, answered
                nonsense, or speaks another version.
        """
        self._tasks = tasks
        self.turns.start(tasks)
        self.terminals.start(tasks.reporting_to(self._show_error))
        services = Services(
            self.chats, self.reviews, self.terminals, self.permissions, tasks,
            self.elicitations, self.mcp, modes_first=self.config.set_mode, turns=self.turns,
        )  # fmt: skip

        def serve(connection: Connection) -> None:
            self._connection = connection
            tasks.start_soon(self.process.drain_stderr)
            tasks.start_soon(self.ending.watch, connection)  # a v1 fallback makes its own
            tasks.start_soon(self.ending.serve, connection)

        try:
            self.sessions = await self._call(
                negotiate(
                    self.name,
                    self.offer_version,
                    services,
                    connect=self._open,
                    serve=serve,
                    restart=self._restart,
                ),
                "initializing",
            )
        except v1.VersionMismatch as err:
            raise AgentFailed(str(err)) from None

    async def _open(self) -> Connection:
        """Spawn the agent (unless the app did); its connection, not served yet."""
        if self.process.pid is None:
            try:
                await self.process.start()
            except SpawnError as err:
                raise AgentFailed(str(err)) from None
        return Connection(
            self.process.stdout,
            self.process.stdin,
            convert=decode,
            enc_hook=enc_hook,
            on_traffic=self._traffic,
            on_not_json=self.process.keep_stdout_text,
            name=self.name,
        )

    async def _restart(self) -> None:
        """End the agent so that the next :meth:`_open` starts a fresh one."""
        await self.aclose()
        self.process = self._new_process()
        self.ending = Ending(self.name, self.process)
        self._connection = None

    def _traffic(self, direction: str, data: bytes, count: int) -> None:
        self.log.traffic(self.name, ">>" if direction == "out" else "<<", data, count)

    def _show_error(self, message: str) -> None:
        """A failure of what this agent's chats share (its terminals): shown in each."""
        for chat in list(self.chats.values()):
            chat.show_error(message)

    async def _call(self, call: Awaitable[T], doing: str) -> T:
        """Await a request; a refusal, nonsense or an exit becomes AgentFailed naming ``doing``."""
        try:
            return await call
        except ConnectionClosed:
            # Its output ended first: the exit code comes once the process is collected.
            raise await self.ending.collected_failure(f"while {doing}") from None
        except RequestError as err:
            raise Refused(f"agent {self.name!r} failed {doing}: {err}", code=err.code) from None
        except (NotOffered, SessionTaken) as err:
            raise Refused(f"agent {self.name!r}: {err}") from None
        except ProtocolError as err:
            message = f"agent {self.name!r} answered nonsense while {doing}: {err}"
            raise AgentFailed(message) from None

    def _sessions(self) -> Sessions:
        if self.sessions is None or self._connection is None or self.exited.is_set():
            raise AgentFailed(f"agent {self.name!r} is not running")
        return self.sessions

    # -- sessions -------------------------------------------------------------

    async def new_session(self, chat: Chat) -> None:
        """Create a session for ``chat`` and mark it ready.

        Raises:
            AgentFailed: the agent refused or died.
        """
        sessions = self._sessions()
        session_id = await self._call(sessions.new_session(chat), "creating a session")
        self._opened(chat, sessions, session_id, created=True)

    @property
    def can_fork(self) -> bool:
        """Whether the agent advertises ``session/fork``."""
        return self.sessions is not None and self.sessions.can_fork

    @property
    def takes_roots(self) -> bool:
        """Whether the agent advertises more workspace roots (``additionalDirectories``)."""
        return self.sessions is not None and self.sessions.takes_roots

    @property
    def message_forks(self) -> MessageForks | None:
        """Whether its forks can end at a message, and how (``Sessions.message_forks``)."""
        return self.sessions.message_forks if self.sessions is not None else None

    @property
    def can_steer(self) -> bool:
        """Whether it takes a message into a running turn (``Sessions.can_steer``)."""
        return self.sessions is not None and self.sessions.can_steer

    @property
    def replays(self) -> bool:
        """Whether its resume shows the session's history (``Sessions.replays``)."""
        return self.sessions is not None and self.sessions.replays

    async def fork(self, chat: Chat, session_id: str, at_message: str | None = None) -> None:
        """Create a session for ``chat`` continuing session ``session_id`` (up to the
        message ``at_message`` where given), and mark it ready.

        Raises:
            AgentFailed: the agent does not fork (so), refused or died.
        """
        sessions = self._sessions()
        fork = sessions.fork(chat, session_id, at_message)
        new_id = await self._call(fork, "forking a session")
        self._opened(chat, sessions, new_id, created=True)

    async def steer(self, chat: Chat, text: str, attachments: Sequence[Attachment] = ()) -> bool:
        """Put a message into ``chat``'s running turn; whether the agent took it.

        Raises:
            AgentFailed: the agent does not steer, refused or died.
        """
        sessions = self._sessions()
        return await self._call(sessions.steer(chat, text, attachments), "steering the turn")

    async def resume(
        self, chat: Chat, session_id: str, *, replay: bool = True,
        kept: Sequence[tuple[str, bool]] = (),
    ) -> None:  # fmt: skip
        """Attach ``chat`` to an existing session; ``replay`` shows its history first,
        where the user's messages ``kept`` as steered into a turn begin none of their
        own (``Branches.kept``). One a chat has just closed is resumed once the agent
        has answered that close."""
        closing = self.held.still_closing(session_id)
        if closing is not None:
            chat.info(f"*{self.name} is still closing this session: it goes on once that is done.*")
            await closing.wait()
        sessions = self._sessions()
        since, chat.branches.kept = len(chat.session.items), list(kept)
        await self._call(sessions.resume(chat, session_id, replay=replay), "resuming a session")
        self.held.resumed.add(session_id)
        self._opened(chat, sessions, session_id, resumed=True)
        if replay:  # its history as turns to go back to, and what it replays after
            since = chat.shown.unreplay(since)  # in place of one the agent died in
            replayed(chat, since, self.serial)
            chat.branches.replaying = (len(chat.session.items), self.serial)
            if not sessions.replays_late:  # answered, the replay is over
                chat.branches.unreplayed = None

    def _opened(
        self, chat: Chat, sessions: Sessions, session_id: str, *,
        resumed: bool = False, created: bool = False,
    ) -> None:
        """The agent answered with ``chat``'s session ``session_id``, ``created`` (new,
        forked) or ``resumed``: the chat is ready in it, the MCP servers offered serve it."""
        self.held.opened.add(session_id)
        if self.mcp is not None:
            self.mcp.bind(chat, session_id)
        version, title = sessions.version, sessions.agent_title
        chat.ready(session_id, version, title, resumed=resumed, created=created)

    def attach(self, chat: Chat, session_id: str) -> None:
        """Go on in ``session_id``, one of ``held.opened``: no request, the agent still
        holds it."""
        sessions = self._sessions()
        self.detach(chat)
        self.chats[session_id] = chat
        chat.session.take(session_id, created=False)
        chat.ready(session_id, sessions.version, sessions.agent_title)
        self.turns.shown(chat)

    async def prompt(
        self, chat: Chat, text: str, attachments: Sequence[Attachment] = ()
    ) -> None:
        """Run one turn. It ends with the agent's stop reason, or with the agent's
        error shown (the session stays usable), or here as ``cancelled`` when the
        agent ignores a cancel (see :mod:`~acp_nvim.client.agent.turns`), or with
        the chat failed when the agent exits."""
        sessions = self._sessions()
        self.turns.begin(chat)
        seed = chat.seed  # the conversation this prompt carries to a new session, if any
        # The turn start's drawing goes to Neovim once the prompt is on its way.
        drawn = chat.editor.hold()
        if self._tasks is not None:
            self._tasks.start_soon(_call_later, _DRAWN_AFTER, drawn)
        try:
            await chat.start_turn(text, sessions.sendable(attachments))
            chat.branches.path[-1].agent = self.serial
            if self.turns.behind(chat) is not None:
                # What the agent still sends of the turn left behind stays hidden, and
                # this prompt is not mixed into it: it goes once the agent ends that.
                chat.info("*The agent is still ending the cancelled turn: this prompt goes next.*")
                drawn()  # shown while it waits
                await self.turns.wait_behind(chat, text, self.exited)

            def sent() -> None:
                drawn()
                self.turns.sent(chat)

            stop_reason = await self.turns.until_exit(
                sessions.prompt(chat, text, attachments, on_sent=sent),
                chat,
                self.exited,
                leave=True,
            )
        except Withdrawn:
            chat.info("*Cancelled before it was sent: the prompt is back in the input.*")
            await chat.finish_turn("cancelled")
        except Abandoned:
            chat.info(
                f"*The agent did not stop within {self.turns.grace:g} s of the cancel: "
                "the turn ends here and what it still sends is not shown.*"
            )
            await self.terminals.abandon(chat)
            await chat.finish_turn("cancelled")
        except RequestError as err:
            if seed is not None:
                self._refused_with(chat, seed)
            await chat.finish_turn("error", f"agent error {err}")
        except ProtocolError as err:
            await chat.finish_turn("error", f"agent {self.name!r} answered nonsense: {err}")
        except ConnectionClosed:
            failure = await self.ending.collected_failure("during the turn")
            chat.fail(str(failure), failure.details)
        except Exception as err:  # a bug: the turn ends with it shown, the chat goes on
            await chat.finish_turn("error", internal_error("running the turn", err))
        else:
            self._seed_refused.discard(chat.id)
            malloc.give_back()  # the turn's freed memory, before AcpTurnEnd says it ended
            await self.terminals.show_now(chat)
            await chat.finish_turn(stop_reason, settle=sessions.turn_ends_its_work)
        finally:
            drawn()  # the prompt never went: a failed write, an exit, a cancel
            # The turn is over: nobody waits for the answers any more.
            self.permissions.cancel(chat)
            self.elicitations.cancel(chat)
            self.terminals.cancel(chat)
            self.turns.end(chat)
            chat.session.cancelling = False  # ended by a failure too (Session.turn_ended)

    def _refused_with(self, chat: Chat, seed: str) -> None:
        """The agent refused the prompt carrying the conversation (``seed``) to a new
        session: a rate limit, say, so the next prompt carries it again, else the
        agent would go on knowing nothing of it (one that took it in before it failed
        is told it twice: context spent, not the thread). Refused twice (too long for
        it, say), it goes without it, and the chat says so."""
        if chat.id in self._seed_refused:
            self._seed_refused.discard(chat.id)
            chat.info(f"*{chat.agent} refused the conversation twice: it goes on without it.*")
            return
        chat.seed = seed
        self._seed_refused.add(chat.id)

    async def cancel(self, chat: Chat) -> None:
        """Ask the agent to stop the turn once it has the prompt; it ends at the agent's
        ``cancelled``, or after ``turns.grace`` seconds (the spec lets a client stop waiting).
        Pending permission requests are answered ``cancelled`` at once; no command starts."""
        sessions = self._sessions()
        chat.session.cancelling = chat.state == "running"
        chat.on_info(turn_state="cancelling")
        self.terminals.cancel(chat)  # before the await: the window may close meanwhile
        if not await self.turns.written(chat):
            return
        try:
            await sessions.cancel(chat)
        except ConnectionClosed:
            pass
        self.permissions.cancel(chat)
        self.elicitations.cancel(chat)
        self.turns.cancelled(chat)

    async def list_sessions(self, cwd: str | None = None) -> list[dict[str, Any]]:
        """The agent's sessions (for ``cwd`` when given), as it reports them."""
        return await self._call(self._sessions().list_sessions(cwd), "listing sessions")

    async def delete_session(self, session_id: str) -> None:
        await self._call(self._sessions().delete(session_id), "deleting a session")

    async def set_config(self, chat: Chat, config_id: str, value: str | bool) -> None:
        sessions = self._sessions()
        await self._call(sessions.set_config(chat, config_id, value), "changing a setting")

    def auth_methods(self) -> list[LoginMethod]:
        """The login methods the agent offers."""
        return self.sessions.auth_methods if self.sessions is not None else []

    async def login(self, method_id: str) -> None:
        """Run a login method of kind ``agent`` (the agent's own flow)."""
        await self._call(self._sessions().login(method_id), "logging in")

    async def logout(self) -> None:
        await self._call(self._sessions().logout(), "logging out")

    async def release(self, chat: Chat) -> None:
        """Forget ``chat``'s session; the agent is told where it offers that. Its answer
        is waited for up to ``_CLOSE_TIMEOUT`` s here, by a :meth:`resume` of the
        session as long as it takes.

        Its commands are stopped (their buffers stay: Neovim deletes them with the chat).
        """
        session_id = chat.session.session_id
        # Before anything is awaited: from now on the session is not gone back to
        # unasked, and a resume of it waits for the close.
        closed = self.held.closing(session_id)
        try:
            if self.mcp is not None:
                # First: a tool call waiting on a prompt is told the chat went (closed, or
                # restarted), not refused.
                await self.mcp.forget(chat)
            self.detach(chat)
            self.turns.release(chat)
            await self.terminals.end_session(chat)
        finally:
            assert self._tasks is not None  # only a started agent's chats are released
            ask = functools.partial(self._ask_close, session_id)
            self._tasks.start_soon(self.held.close, session_id, closed, ask)
        with anyio.move_on_after(_CLOSE_TIMEOUT):
            await closed.wait()

    async def _ask_close(self, session_id: str) -> None:
        """Close ``session_id`` where the agent offers that, while it runs."""
        if self.sessions is not None and self.alive and session_id:
            await self.sessions.close(session_id)

    def detach(self, chat: Chat) -> None:
        self.chats.pop(chat.session.session_id, None)
        self.permissions.cancel(chat)
        self.elicitations.cancel(chat)

    async def aclose(self) -> None:
        """End the connection and the agent's whole process group."""
        with anyio.CancelScope(shield=True):
            if self._connection is not None:
                await self._connection.aclose()
            await self.process.aclose()
            self.ending.exited.set()
