"""A chat's life: opened on its agent (or a fork of another chat's session),
restarted, cancelled, closed (what the user sends it: _sender)."""

from __future__ import annotations

__all__ = ["ChatLifecycle"]

import functools
import gc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from acp_nvim.client import malloc
from acp_nvim.client.agent.process import AgentProcess
from acp_nvim.client.app._context import AppContext
from acp_nvim.client.app._conversation import Conversations
from acp_nvim.client.app._pool import AgentPool
from acp_nvim.client.app._queue import PromptQueue
from acp_nvim.client.app._reviews import Reviews
from acp_nvim.client.app._settings import Settings, chosen, defaults
from acp_nvim.client.app._start_task import start_task
from acp_nvim.client.app._workspaces import WorkspaceRefused, Workspaces
from acp_nvim.client.config import AgentConfig, ConfigError
from acp_nvim.client.errors import AgentFailed, Refused
from acp_nvim.client.history import StoreError, show_kept_session, steered_into
from acp_nvim.client.session.workspace import Workspace

if TYPE_CHECKING:
    # The chat (model, view, review) and the protocol stack are imported after the
    # first agent is spawned, so their import overlaps the agent's own start-up
    # (doc/performance.md, start-up).
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.history import History, StoredBlock
    from acp_nvim.client.history._store import ChatRow
    from acp_nvim.client.services.changes import SessionChanges
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import LoginMethod


class ChatLifecycle:
    def __init__(
        self,
        ctx: AppContext,
        pool: AgentPool,
        queue: PromptQueue,
        reviews: Reviews,
        settings: Settings,
        conversations: Conversations,
        workspaces: Workspaces,
    ) -> None:
        self.ctx = ctx
        self.pool = pool
        self.queue = queue
        self.reviews = reviews
        self.settings = settings
        self.conversations = conversations
        self.workspaces = workspaces
        self._starts = conversations.starts  # chats waiting for their agent, restarts under way
        # Chats whose opening was refused (decision 0083) and that have not gone on
        # since: the user never had them, so closed, they are not kept in the history.
        self._refused: set[int] = set()
        # Chats refused by wrong options: opened as they were asked once the options
        # are right and the user sends or restarts (the agent was never resolved).
        self._unopened: dict[int, functools.partial[Any]] = {}
        # Chats Neovim closed whose agent and worktree are not let go yet (close()).
        self._closing: dict[int, tuple[Chat | None, SessionChanges | None]] = {}
        # Closes under way, each set once its agent and worktree are let go: the
        # shutdown waits for them (closes_done).
        self._closes: dict[int, anyio.Event] = {}

    def __repr__(self) -> str:
        return f"<ChatLifecycle {len(self.ctx.chats)} chats, {len(self._starts)} opening>"

    async def open(
        self,
        chat_id: int,
        agent: str | None,
        cwd: str,
        session_id: str | None = None,
        fork: int | None = None,
        history: int | None = None,
        handoff: int | None = None,
        *,
        cwd_given: bool = False,
        roots: Sequence[str] = (),
        worktree: bool = False,
        within: int | None = None,
    ) -> None:
        """Start (or reuse) the agent and create a session for a new chat, in its own
        workspace (``Workspaces.choose``: ``cwd``, ``cwd_given``, ``roots``, ``worktree``).

        With ``session_id`` the chat resumes that session (its history replayed);
        with ``fork`` it continues a fork of chat ``fork``'s session, on its agent;
        ``history`` shows that stored chat (its agent starts with the next prompt);
        with ``handoff`` it continues chat ``handoff``'s conversation (client.history).
        A fork and a handover work where the chat they continue does, and so does a
        session resumed from a worktree chat ``within`` (from its list): in its worktree.
        """
        self.queue.open(chat_id)  # prompts sent before the chat is ready
        if history is not None:
            await self._reopen(chat_id, history, cwd)
            return
        parent = self.ctx.chats.get(fork) if fork is not None else None
        if self.ctx.config_error is not None:
            self._unopened[chat_id] = functools.partial(
                self.open, chat_id, agent, cwd, session_id, fork, history, handoff,
                cwd_given=cwd_given, roots=roots, worktree=worktree, within=within,
            )  # fmt: skip
        refusal = self.ctx.config_error or _fork_refusal(self.pool, fork)
        if refusal is not None:
            self._refuse(chat_id, agent or "?", cwd, refusal)
            return
        try:
            name, agent_config = self.pool.agent_config(agent)
        except ConfigError as err:  # an agent not configured: the chat says so
            self._refuse(chat_id, agent or "?", cwd, str(err))
            return
        source = self.ctx.chats.get(handoff) if handoff is not None else None
        beside = self.ctx.chats.get(within) if within is not None else None
        in_worktree = beside if beside is not None and beside.workspace.worktree else None
        try:
            workspace = await self.workspaces.choose(
                chat_id,
                agent_config,
                cwd,
                cwd_given=cwd_given,
                roots=roots,
                worktree=worktree,
                like=parent or source,
                within=in_worktree,
            )
        except WorkspaceRefused as err:  # a directory or worktree asked for that cannot be
            self._refuse(chat_id, name, cwd, str(err))
            self._withdraw(chat_id, str(err))
            return
        # The agent's own start is the long pole: spawn it first, then import and
        # build the chat while it boots (doc/performance.md, start-up).
        spawned = await self.pool.spawn(name, agent_config, workspace.user_cwd)
        chat = self._new_chat(chat_id, name, workspace, carries=source or parent)
        if self.queue.prompts[chat_id]:  # sent before the chat was made: shown waiting
            self.queue.show(chat)
        if source is not None:
            await self.ctx.history.hand_over(chat, source)
        elif parent is not None:
            await self.ctx.history.fork(chat, parent)
        await self._start(chat, agent_config, spawned, session_id, fork_of=parent)

    async def end_start(
        self, chat_id: int, why: str, agent: str | None = None, cwd: str | None = None
    ) -> None:
        """Chat ``chat_id``'s start broke off in this task (``why``): the agents it
        spawned end; the chat fails as a start does, and lets go of its agent (not
        kept for a login: nothing says that helps). An opening's chat not made yet is
        made to say so, on ``agent`` in ``cwd``; any other start of a chat not there
        (closed meanwhile) ends with nothing to say."""
        await self.pool.abandon()
        chat = self.ctx.chats.get(chat_id)
        if chat is None and cwd is not None:
            self._refuse(chat_id, agent or "?", cwd, why)
        elif chat is not None and chat.state != "closed":
            self._fail(chat, why)
            await self.pool.release(chat)

    def _refuse(self, chat_id: int, agent: str, cwd: str, why: str) -> None:
        """Open chat ``chat_id`` failed with ``why``: what was sent to it goes back."""
        self._fail(self._new_chat(chat_id, agent, Workspace(cwd)), why)

    def _withdraw(self, chat_id: int, why: str) -> None:
        """What failed chat ``chat_id`` was opened for cannot be (``why``): nothing
        of it lives, so Lua closes it unless its input holds text (RefusedOp)."""
        self._refused.add(chat_id)
        self.ctx.editor.render(chat_id, [{"op": "refused", "error": why}])

    def _fail(self, chat: Chat, why: str) -> None:
        """``chat`` cannot start: it shows ``why``; what was sent to it goes back to its input."""
        chat.fail(why)
        self.queue.give_back(chat)

    async def _reopen(self, chat_id: int, history_id: int, here: str) -> None:
        """Show stored chat ``history_id`` (opened in Neovim's directory ``here``); it
        goes on when the user sends (see Sender.send)."""
        found, why = await _stored(self.ctx.history, history_id)
        if found is None:  # gone (forgotten since) or unreadable: nothing of it lives
            self._refuse(chat_id, "?", here, why)
            self._withdraw(chat_id, why)
            return
        row, blocks = found
        agent_config = self.ctx.config.all_agents().get(row.agent)
        roots = self.ctx.config.agent_roots(agent_config) if agent_config is not None else []
        stored = self.ctx.history.worktree_of(row)
        workspace, gone = self.workspaces.reopened(chat_id, row.cwd, roots, stored, here)
        chat = self._new_chat(chat_id, row.agent, workspace)
        waiting = self.ctx.history.waiting(blocks) if workspace.worktree is not None else []
        if waiting:  # the hunks it left in its kept worktree are decided as before
            missing_as_empty = agent_config is not None and agent_config.missing_file_as_empty
            await self.reviews.reopened(chat, waiting, missing_as_empty)
        await self.ctx.history.reopen(chat, row, blocks, gone)
        if self.queue.prompts.get(chat_id):  # sent while it was read and drawn
            await self.restart(chat_id)

    async def restart(self, chat_id: int, *, asked: bool = True) -> None:
        """Start the chat's agent again and go on in the same transcript: the agent's
        session is resumed where it offers that, else a new one begins. Not
        ``asked`` (a prompt sent to the failed chat), an agent that runs for other
        chats too is not restarted: the chat starts again on it."""
        chat = self.ctx.chats.get(chat_id)
        if chat is None:
            self.ctx.editor.notify("no such chat to restart", "warn")
            return
        if not asked and self._starts.waiting(chat.id):
            return  # starting already
        # Asked while it starts (a start that hangs): that start ends quietly first.
        async with self._starts.restart(chat.id) as mine:
            # Not when one is under way (asked twice), nor once the chat closed meanwhile.
            if mine and self.ctx.chats.get(chat_id) is chat:
                await self._restart(chat, asked)

    async def _restart(self, chat: Chat, asked: bool) -> None:
        chat_id = chat.id
        if self.ctx.config_error is not None:
            self._fail(chat, self.ctx.config_error)
            return
        if chat_id in self._unopened:
            self.ctx.history.detach(chat_id, keep=False)  # the open makes its record anew
            await self._unopened.pop(chat_id)()
            return
        try:
            name, agent_config = self.pool.agent_config(chat.agent)
        except ConfigError as err:
            self._fail(chat, str(err))
            return
        old = self.pool.agent_of.get(chat_id)
        # The other chats of its process go along: restarted with it, not failed.
        along = [c for c in old.chats.values() if c is not chat] if old is not None else []
        if not asked and along and old is not None and old.alive:
            chat.set_state("starting", agent=name)  # what is asked meanwhile waits for it
            await self.pool.release(chat)
            await self._start(chat, agent_config, None, chat.session.session_id or None, again=True)
            return
        busy = next((c for c in [chat, *along] if c.state == "running"), None)
        if busy is not None:
            which = "" if busy is chat else f" (chat #{busy.id}, same agent process)"
            self.ctx.editor.notify(f"cannot restart during a turn{which}: cancel it first", "warn")
            return
        for each in [chat, *along]:  # released below: what is asked meanwhile waits for it
            each.set_state("starting", agent=name)
        if old is not None:
            for each in [chat, *along]:
                await self.pool.release(each)
            await old.aclose()  # asked to restart it: even a live agent goes
        spawned = await self.pool.spawn(name, agent_config, chat.workspace.user_cwd)
        for other in along:
            other.info(f"*{name} restarted from chat #{chat_id}: this chat goes on with it.*")
            session_id = other.session.session_id or None
            go_on = start_task(self.end_start, functools.partial(self._start, again=True))
            self.ctx.tasks.start_soon(go_on, other, agent_config, None, session_id)
        await self._start(chat, agent_config, spawned, chat.session.session_id or None, again=True)

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
        self._refused.discard(chat.id)  # it goes on: kept as any other chat
        name = chat.agent
        chat.set_state("starting", agent=name)
        timeout = self.ctx.config.timeouts.start
        connection: AgentConnection | None = None
        refused: str | None = None
        with anyio.CancelScope() as scope:
            self._starts.begin(chat.id, scope)
            try:
                with anyio.fail_after(timeout):
                    connection = await self.pool.connect(
                        name, agent_config, chat.workspace.user_cwd, spawned
                    )
                    self.pool.agent_of[chat.id] = connection
                    chat.on_info(
                        login_methods=[_plain(m) for m in connection.auth_methods()],
                        can_fork=connection.can_fork,
                        connected=True,
                    )
                    self.reviews.attach(chat, connection, agent_config)
                    if fork_of is not None:
                        # The fork keeps the parent's settings (from the agent's answer),
                        # not the configured defaults.
                        await connection.fork(chat, fork_of.session.session_id)
                        # The turns it continues go on in this session until it has
                        # its own: going back to them needs no request (decision 0041).
                        if chat.branches.path:
                            chat.branches.path[-1].session_id = chat.session.session_id
                            chat.branches.path[-1].agent = connection.serial
                    else:
                        # A restart goes on with the settings the user had, not the
                        # configured defaults (which would undo a mode switched to).
                        kept = chosen(chat) if again else []
                        resumed, lost = await _session(
                            connection, chat, session_id, again=again, history=self.ctx.history
                        )
                        if not resumed:
                            unseen = session_id in chat.unseen_history
                            self.ctx.history.seed(chat, lost, unseen=unseen)
                        wanted = kept if again and resumed else defaults(agent_config)
                        await self.settings.apply(connection, chat, wanted)
            except TimeoutError:
                chat.fail(
                    f"agent {name!r} did not answer within {timeout:g} s (timeouts.start); "
                    ":AcpRestart tries again",
                    self.pool.printed(name, connection),
                )
            except AgentFailed as err:
                if err.code == AgentFailed.AUTH_REQUIRED and connection is not None:
                    err = AgentFailed(f"{err}: log in with :AcpLogin, then send again", err.details)
                elif isinstance(err, Refused) and (fork_of or (session_id and not again)):
                    refused = str(err)  # no such session, or fork: nothing of this chat lives
                chat.fail(str(err), err.details)
            finally:
                restarted = self._starts.end(chat.id, scope)
        if restarted:
            return  # the restart that ended it starts the chat again
        if scope.cancelled_caught and chat.state != "closed":
            chat.fail("the start was cancelled; :AcpRestart tries again")
        if chat.state == "ready":
            self.reviews.prepare(chat.id)
            await self.queue.drain(chat)
        elif chat.state == "error":  # "running": a prompt sent as the session became ready
            self.queue.give_back(chat)
            if refused is not None:
                self._withdraw(chat.id, refused)
            if connection is not None and not connection.auth_methods():
                await self.pool.release(chat)  # kept while a login may still come

    def _new_chat(
        self, chat_id: int, agent: str, workspace: Workspace, carries: Chat | None = None
    ) -> Chat:
        """A new chat, kept in the history unless its agent's chats are not, or the
        chat whose conversation it ``carries`` on (a hand-over, a fork) was not."""
        from acp_nvim.client.session.chat import Chat

        chat = self.ctx.chats[chat_id] = Chat(chat_id, agent, self.ctx.editor, workspace)
        chat.on_info(**workspace.status())
        agent_config = self.ctx.config.all_agents().get(agent)
        keep = agent_config is None or agent_config.history
        keep = keep and (carries is None or self.ctx.history.kept(carries.id))
        # Kept as the user's directory: a worktree goes with its chat.
        self.ctx.history.attach(chat, workspace.user_cwd, keep=keep)
        return chat

    async def cancel(self, chat_id: int) -> None:
        """Cancel the running turn, or stop waiting for a starting agent (or for the
        session a rewind or a branch switch goes on in). The prompts
        queued behind a cancelled turn come back to the input (decision 0080)."""
        chat, connection = self.ctx.chats.get(chat_id), self.pool.agent_of.get(chat_id)
        if self._starts.cancel(chat_id):
            return
        if chat is not None and connection is not None and chat.state == "running":
            return await self.queue.cancel(chat, connection, give_back=True)
        self.ctx.editor.notify("nothing to cancel: no turn is running", "info")

    async def login(
        self, chat_id: int, method_id: str | None, values: dict[str, str] | None = None
    ) -> None:
        """Run one of the agent's login methods (by id; the first when None), then go
        on: the agent restarts to see a terminal login's or a variable's result, and
        a chat that waited for the login gets its session.

        ``values`` are a variable method's values; they go only into the agent's
        environment (never a log).
        """
        connection = self.pool.connection(chat_id)
        chat = self.ctx.chats.get(chat_id)
        if connection is None or chat is None:
            return
        method = await self.pool.login(connection, chat, method_id, values)
        if method is None:
            return
        if method.kind != "agent":
            await self.restart(chat_id)  # its new credentials or environment
        elif chat.state == "error":
            await self._start(chat, connection.config, None, chat.session.session_id or None)

    def closing(self, chat_id: int) -> None:
        """Close chat ``chat_id`` as far as a call on the loop goes: gone from the
        open chats, its last changes handed to the history's writer. Neovim's close
        does this before its next message is read, so a history search it asks next
        (answered at once, off the loop) reads them (decision 0043); :meth:`close`
        does the rest."""
        if chat_id in self._closing:
            return
        self._starts.cancel(chat_id)
        chat = self.ctx.chats.pop(chat_id, None)
        review = self.reviews.closed(chat_id)
        self._closing[chat_id] = (chat, review)
        self.workspaces.closing(chat_id, review)  # Neovim may quit before close() runs
        self.queue.forget(chat_id)
        self._unopened.pop(chat_id, None)
        self.ctx.history.detach(chat_id, keep=chat_id not in self._refused)
        self._refused.discard(chat_id)

    async def close(
        self, chat_id: int, keep_worktree: bool | None = None, modes_looked: bool = False
    ) -> None:
        """Forget a chat (:meth:`closing`, where not done yet); its agent ends when no
        other chat uses it, its worktree when no other chat works in it
        (``keep_worktree``: the user's word on that; ``modes_looked``: its execute
        bits were looked at as Lua asked, none found; see ``Workspaces.release``)."""
        self.closing(chat_id)
        chat, review = self._closing.pop(chat_id)
        if chat is None:
            return
        done = self._closes[chat_id] = anyio.Event()
        try:
            connection = self.pool.agent_of.get(chat_id)
            if connection is not None and chat.state == "running":
                await self.queue.cancel(chat, connection)
            chat.state = "closed"
            await self.pool.release(chat)
            await self.workspaces.release(chat, review, keep_worktree, modes_looked=modes_looked)
        finally:
            del self._closes[chat_id]
            done.set()
        # A chat is held in reference cycles (its record, its changes, callbacks). With
        # the host's start-up objects frozen (gc.freeze), a closed 100k-chunk chat's
        # 18 MB were still held after a second one (measured; not without the freeze):
        # a collection now frees it while nothing streams. Walks the open chats' objects.
        del chat, review
        gc.collect()
        malloc.give_back()

    async def closes_done(self, timeout: float) -> None:
        """Wait (``timeout`` at most) for the closes under way: Neovim quit right
        after one, and its agent may take seconds to end (its grace, before a
        SIGKILL). Meanwhile the shutdown found the chat's worktree with no review
        left to it, so holding no work, and removed it, hunks the user kept too."""
        with anyio.move_on_after(timeout):
            for done in list(self._closes.values()):
                await done.wait()


async def _stored(
    history: History, history_id: int
) -> tuple[tuple[ChatRow, list[StoredBlock]] | None, str]:
    """Stored chat ``history_id``, and why none is there to show: no such chat, or its
    file cannot be read (said as the store says it)."""
    try:
        return await history.load(history_id), f"history: no chat {history_id}"
    except StoreError as err:
        return None, f"history: {err}"


async def _session(
    connection: AgentConnection, chat: Chat, session_id: str | None, *, again: bool,
    history: History,
) -> tuple[bool, str | None]:  # fmt: skip
    """Begin or resume ``chat``'s session: whether an existing one goes on, and why
    not (the agent's error) when one was to go on and could not. Resumed with its
    history replayed, the messages the user steered into its turns (as the history
    kept them) begin no turn of their own; by an agent that shows no history, what
    the history kept of the session is shown (decision 0088)."""
    if session_id is None:
        await connection.new_session(chat)
        return False, None
    if not again:
        if not connection.replays and await show_kept_session(history, chat, session_id):
            await connection.resume(chat, session_id, replay=False)
            chat.info("*The agent resumes this session without showing its history: shown"
                      " above is what this Neovim kept of it, not what ran in it elsewhere"
                      " since.*")  # fmt: skip
        else:
            await _replay(connection, chat, session_id, history)
        return True, None
    try:
        if chat.branches.unreplayed is not None:
            # A replay the agent died in is replayed again, in place of what it drew.
            await _replay(connection, chat, session_id, history)
        else:
            # The transcript already shows the history: resume without a replay.
            await connection.resume(chat, session_id, replay=False)
    except AgentFailed as err:
        connection.raise_if_exited(err)
        await connection.new_session(chat)
        return False, str(err)
    return True, None


async def _replay(
    connection: AgentConnection, chat: Chat, session_id: str, history: History
) -> None:
    """Resume ``chat``'s session with its history replayed. ``Branches.unreplayed``
    marks where the replay began while it may still run: an agent that dies in it
    (or hangs) leaves the mark, and the restart replays it again, in place of what
    it drew once the agent answers. A refusal keeps that shown (decision 0088)."""
    from acp_nvim.client.session.chat import replayed_late

    kept = await steered_into(history, chat.agent, session_id)
    since = len(chat.session.items)
    if chat.branches.unreplayed is None:
        chat.branches.unreplayed = since
    else:  # the replay the agent died in stays until this one is answered
        # What it replayed after its answer is all it will: what comes now is the new
        # replay's, turns once answered (made now, they were numbered after the dead
        # one's, then unmade and numbered again).
        replayed_late(chat, done=True)
        chat.session.forget(session_id)
    try:
        await connection.resume(chat, session_id, kept=kept)
    except AgentFailed as err:
        connection.raise_if_exited(err)  # an answer (a refusal): no replay goes on
        # What the refused one drew goes; what one before it drew stays, for the new
        # session to carry.
        chat.branches.unreplayed = since
        chat.shown.unreplay(len(chat.session.items))
        chat.branches.unreplayed = None
        raise


def _fork_refusal(pool: AgentPool, chat_id: int | None) -> str | None:
    """Why chat ``chat_id``'s session cannot be forked, or None (also for no chat to
    fork). Lua forks only a ready chat whose agent offers it; this holds when that
    changed meanwhile (a new agent started here would not know the session)."""
    why = pool.unavailable(chat_id) if chat_id is not None else None
    return f"cannot fork: {why}" if why is not None else None


def _plain(method: LoginMethod) -> dict[str, Any]:
    """A login method for Lua's picker (which asks for the variables' values)."""
    return {"id": method.id, "name": method.name, "kind": method.kind, "vars": method.vars}
