"""Going back and steering: what the user does to a chat's conversation as a whole.

- :meth:`Conversations.rewind` takes the files back to before a turn (the review's
  restore) and the conversation too: a fork of the session at the last agent message
  before that turn where the agent offers forks at a message, else a new session
  whose first prompt carries the conversation so far (``session.seed``). The turns
  left behind stay as a branch (``session.branches``).
- :meth:`Conversations.pick` shows another branch and goes on in its session: the
  agent still holds it, or resumes it, else a seeded session takes its place (in a
  chat without a running agent, from the next prompt, which starts it).
- :meth:`Conversations.edit`: an earlier prompt back in the input (sent, it is a
  rewind and a send; ``Sender.regenerate`` sends the last one so, unchanged).
- :meth:`Conversations.send_now` puts a message into the running turn where the agent
  steers (``_session/steering``), else cancels the turn and sends it first;
  :meth:`Conversations.say` is the same for a rejection's reason, without the cancel.

The files are not touched when a branch is picked (decision 0041).
"""

from __future__ import annotations

__all__ = ["Conversations"]

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Literal

import anyio

from acp_nvim.client.app._context import AppContext
from acp_nvim.client.app._pool import AgentPool
from acp_nvim.client.app._queue import PromptQueue
from acp_nvim.client.app._reviews import Reviews, restored_files
from acp_nvim.client.app._settings import Settings, chosen
from acp_nvim.client.app._starts import Starts
from acp_nvim.client.errors import AgentFailed

if TYPE_CHECKING:
    # Imported with the chat, after the first agent is spawned (doc/performance.md).
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.session.branches import Branch, Turn
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import Prompt


class Conversations:
    """Rewinds, branches, edits and steering for the chats of one app."""

    def __init__(
        self,
        ctx: AppContext,
        pool: AgentPool,
        queue: PromptQueue,
        reviews: Reviews,
        settings: Settings,
    ) -> None:
        self.ctx = ctx
        self.pool = pool
        self.queue = queue
        self.reviews = reviews
        self.settings = settings
        # Chats waiting for their agent: starting, or its session changing (a fork,
        # a new or resumed session); :AcpCancel and :AcpRestart end the wait.
        self.starts = Starts()
        # A lock per chat whose conversation is changing (see :meth:`_holding`).
        self._changing: dict[int, anyio.Lock] = {}

    def __repr__(self) -> str:
        return f"<Conversations of {len(self.ctx.chats)} chats>"

    def _live(self, chat_id: int) -> tuple[Chat, AgentConnection] | None:
        """The chat and its agent, or None with the reason told."""
        connection = self.pool.connection(chat_id)
        return (self.ctx.chats[chat_id], connection) if connection is not None else None

    @asynccontextmanager
    async def _holding(
        self, chat: Chat, connection: AgentConnection
    ) -> AsyncIterator[tuple[bool, bool]]:
        """Hold the chat's queue while its conversation changes, cancelling a running
        turn first; yields whether the chat is ready for its session to change, and
        whether a turn was cancelled for it. The changes asked of a chat run one at a
        time, in the order asked (a rewind asked while a branch switch resumes its
        session waits for it); queued prompts go on after the last."""
        chat.held += 1
        try:
            async with self._changing.setdefault(chat.id, anyio.Lock()):
                cancelled = chat.state == "running"
                if cancelled:
                    await self.queue.cancel(chat, connection)
                    await connection.turns.over(chat)
                yield chat.state == "ready", cancelled
        finally:
            chat.held -= 1
            if not chat.held:
                del self._changing[chat.id]
        if not chat.held:
            await self.queue.drain(chat)

    # -- rewind and branches -----------------------------------------------------------

    async def rewind(self, chat_id: int, turn: int | None, then: Prompt | None = None) -> None:
        """Take the files and the conversation back to before ``turn`` of the shown
        branch (default: its last); ``then`` is sent first afterwards (an edited
        prompt). A turn out of range is told, and ``then`` goes back to the input.
        A reopened chat whose agent has not started goes back in view (:meth:`went_back`)."""
        shown = self.ctx.chats.get(chat_id)
        at = self._turn(shown, turn) if shown is not None else turn
        if at is not None and then is None and self.went_back(chat_id, at):
            return
        live = self._live(chat_id) if shown is None or at is not None else None
        if live is None:
            self._give_back(chat_id, then)
            return
        chat, connection = live
        async with self._holding(chat, connection) as (ready, _):
            if not ready:
                self.ctx.editor.notify("cannot rewind: the chat has no running session", "warn")
            # Of the branch shown now: a switch asked before may have changed it.
            at = self._turn(chat, turn) if ready else None
            if at is not None:
                await self._rewind(chat, connection, at)
            if then is not None and at is not None:
                self.queue.put(chat.id, then, first=True)
            else:
                self._give_back(chat_id, then)

    def _give_back(self, chat_id: int, then: Prompt | None) -> None:
        """A rewind was refused: the edited prompt to send after it goes back to the
        input (one sent again was never taken from it)."""
        if then is not None and not then.again:
            self.queue.return_input(chat_id, then.text)

    def _turn(self, chat: Chat, turn: int | None) -> int | None:
        """Turn ``turn`` (default: the last) of the branch shown; None, told, when the
        branch has no such turn."""
        path = chat.branches.path
        at = len(path) if turn is None else turn
        if 1 <= at <= len(path):
            return at
        if path:
            span = f"turns 1 to {len(path)}"
        elif chat.branches.others:  # turns were sent: a rewind left them on a branch
            span = "the branch shown has none: :AcpBranches shows another"
        else:
            span = "no turn was sent yet"
        self.ctx.editor.notify(f"no turn {at} to rewind to ({span})", "warn")
        return None

    async def _rewind(self, chat: Chat, connection: AgentConnection, turn: int) -> None:
        path = chat.branches.path
        unseen = path[0].session_id in chat.unseen_history  # what the branch began on
        # Forked only where the process holds turn ``turn`` - 1's session as it ran:
        # a restarted agent may give its own sessions the same ids (decision 0078).
        source = path[turn - 2] if turn >= 2 and _held(connection, path[turn - 2]) else None
        forks = connection.message_forks if source is not None else None
        point = None
        if forks is not None:  # the message a fork names to keep turn ``turn`` - 1 whole
            inclusive = forks == "inclusive"
            point = chat.branches.fork_point(chat.session, turn - 1, inclusive=inclusive)
        review = self.reviews.by_chat.get(chat.id)
        restored = await review.restore(path[turn - 1].review) if review is not None else None
        unrecorded = chat.branches.unrecorded(turn)
        chat.shown.leave(turn)
        files = restored_files(restored)
        if unrecorded:
            files = f"of the turns run here ({files}); what {unrecorded} changed stays as it is"
        else:
            files = f"({files})"
        chat.info(f"*Rewound to before turn {turn}, the conversation and the files {files}.*")
        connection.detach(chat)
        # The session left holds the turns left behind: should no session come to go
        # on in (the agent dies, a restart ends the wait), the next start seeds one.
        chat.session.session_id = ""
        try:
            async with self._answered(chat, "rewind"):
                if source is not None and point is not None:
                    try:
                        await connection.fork(chat, source.session_id, point)
                        chat.usage.forked(source.report)
                        chat.seed = None  # the fork holds the conversation
                        return
                    except AgentFailed as err:
                        connection.raise_if_exited(err)
                        chat.info(f"*The fork at turn {turn - 1} failed ({err}).*")
                await self._seeded(chat, connection, unseen=unseen)
        except AgentFailed as err:
            chat.fail(str(err), err.details)

    @asynccontextmanager
    async def _answered(self, chat: Chat, change: str) -> AsyncIterator[None]:
        """The session a conversation change waits for (a fork, a new or resumed
        session) comes as a start's does: within ``timeouts.start``, and :AcpCancel
        or :AcpRestart ends the wait. Raises AgentFailed when it did not come, but
        for a restart: that one goes on (it starts the chat again). The winbar says
        the chat waits for the ``change`` (``status().waiting``): a prompt only queues."""
        timeout = self.ctx.config.timeouts.start
        with anyio.CancelScope() as scope:
            self.starts.begin(chat.id, scope)
            chat.on_info(waiting=change)
            try:
                with anyio.fail_after(timeout):
                    yield
            except TimeoutError:
                raise AgentFailed(
                    f"agent {chat.agent!r} did not answer within {timeout:g} s (timeouts.start)"
                    " with the session going on from here; :AcpRestart tries again"
                ) from None
            finally:
                chat.on_info(waiting=None)
                restarted = self.starts.end(chat.id, scope)
        if scope.cancelled_caught and restarted:
            chat.info("*:AcpRestart ended the wait for the session going on from here:"
                      " the agent starts again.*")  # fmt: skip
        elif scope.cancelled_caught:
            raise AgentFailed("the wait for the session going on from here was cancelled;"
                              " :AcpRestart tries again")  # fmt: skip

    async def _seeded(
        self, chat: Chat, connection: AgentConnection, *, unseen: bool = False
    ) -> None:
        """Go on in a new session whose first prompt carries the shown conversation,
        with the chat's settings; ``unseen``: in place of one resumed without its
        history shown, which the note says the new one does not know."""
        from acp_nvim.client.session.chat import UNSEEN_HISTORY

        carried = self.ctx.history.carried(chat)
        kept = chosen(chat)
        await connection.new_session(chat)
        chat.seed = carried
        if carried is not None:
            given = f"shown here with the next prompt; {UNSEEN_HISTORY}" if unseen else (
                "so far with the next prompt"
            )
            chat.info(f"*Continued in a new session; the agent is given the conversation {given}.*")
        elif unseen:
            chat.info(f"*Continued in a new session: {UNSEEN_HISTORY}.*")
        await self.settings.apply(connection, chat, kept)

    async def pick(self, chat_id: int, branch_id: int) -> None:
        """Show branch ``branch_id`` and go on in its session (see the module doc)."""
        waiting = self._agentless(chat_id)
        if waiting is not None:
            self._show_for_next_prompt(waiting, branch_id)
            return
        live = self._live(chat_id)
        if live is None:
            return
        chat, connection = live
        if not self._known(chat, branch_id):
            return  # before a running turn is cancelled for it
        async with self._holding(chat, connection) as (ready, cancelled):
            if chat.state == "error":  # the change asked before failed it
                self._show_for_next_prompt(chat, branch_id)
                return
            if not ready:
                self.ctx.editor.notify("cannot switch branches: the chat has no session", "warn")
                return
            branch = self._show(chat, branch_id, cancelled)
            if branch is None:
                return
            chat.seed = None
            session_id = branch.session_id or ""
            try:
                if _held(connection, branch.turns[-1]):
                    connection.attach(chat, session_id)
                    return
                connection.detach(chat)
                async with self._answered(chat, "branch"):
                    try:
                        await connection.resume(chat, session_id, replay=False)
                    except AgentFailed as err:
                        connection.raise_if_exited(err)
                        unseen = branch.turns[0].session_id in chat.unseen_history
                        await self._seeded(chat, connection, unseen=unseen)
            except AgentFailed as err:
                chat.fail(str(err), err.details)

    def _show_for_next_prompt(self, chat: Chat, branch_id: int) -> None:
        """Show branch ``branch_id`` in a chat without a running agent: its next
        prompt, which starts the agent, goes on in the branch's session."""
        shown = self._show(chat, branch_id)
        if shown is not None:
            chat.session.session_id = shown.session_id or ""
            chat.seed = None

    def _unstarted(self, chat_id: int) -> Chat | None:
        """The chat when it is a reopened one whose agent has not started: a rewind or
        a branch switch changes its view and the session its next prompt goes on in
        (resumed, else seeded, as the first prompt of a reopened chat; decision 0057)."""
        chat = self.ctx.chats.get(chat_id)
        ready = chat is not None and chat.state == "ready"
        return chat if ready and chat_id not in self.pool.agent_of else None

    def _agentless(self, chat_id: int) -> Chat | None:
        """The chat when its next prompt starts its agent: a reopened one whose agent
        has not started, or one whose agent failed (a send restarts it). A branch
        switch needs no agent, nor touches the files: it changes the view and the
        session that prompt goes on in, as in a reopened chat (:meth:`_unstarted`).
        A rewind takes the files back with the agent: a failed chat's starts it first
        (``Sender.rewind``)."""
        chat = self.ctx.chats.get(chat_id)
        return chat if chat is not None and chat.state == "error" else self._unstarted(chat_id)

    def went_back(self, chat_id: int, turn: int) -> bool:
        """Rewind a reopened chat whose agent has not started to before ``turn``, in
        view: the turns from there stay as a branch; its next prompt goes to a new
        session given the conversation before them. Its files are not touched (they
        stay as they are, even a kept worktree chat's). False for any other chat or
        turn."""
        chat = self._unstarted(chat_id)
        if chat is None or not 1 <= turn <= len(chat.branches.path):
            return False
        chat.shown.leave(turn)
        chat.session.session_id = ""
        chat.info(f"*Rewound to before turn {turn}, the conversation; the files stay as they are.*")
        return True

    def _known(self, chat: Chat, branch_id: int) -> bool:
        """Whether ``chat`` has a branch ``branch_id`` besides the one shown (told when not)."""
        if any(branch.id == branch_id for branch in chat.branches.others):
            return True
        self.ctx.editor.notify(f"no other branch {branch_id}", "warn")
        return False

    def _show(self, chat: Chat, branch_id: int, cancelled: bool = False) -> Branch | None:
        """Show branch ``branch_id`` in ``chat``; None (told) when there is no such one.
        ``cancelled``: the turn running on the branch left was cancelled for it."""
        left = chat.branches.shown.id
        if not self._known(chat, branch_id):
            return None
        branch = chat.shown.pick(branch_id)
        what = f"; the turn running on branch {left} was cancelled" if cancelled else ""
        chat.info(f"*Switched to branch {branch.id} ({len(branch.turns)} turns){what}.*")
        return branch

    # -- editing -----------------------------------------------------------------------

    def edit(self, chat_id: int, turn: int | None) -> None:
        """Put the prompt of ``turn`` (default: the last) in the chat's input; the
        input sends it as a rewind to that turn (Lua keeps the number)."""
        from acp_nvim.client.session import view

        chat = self.ctx.chats.get(chat_id)
        path = chat.branches.path if chat is not None else []
        if not path:
            self.ctx.editor.notify("no prompt was sent in this chat", "info")
            return
        turn = len(path) if turn is None else turn
        if not 1 <= turn <= len(path):
            self.ctx.editor.notify(f"no turn {turn} (turns 1 to {len(path)})", "warn")
            return
        self.ctx.editor.render(chat_id, [view.edit_op(turn, path[turn - 1].prompt.text)])

    # -- steering ----------------------------------------------------------------------

    async def send_now(self, chat_id: int, prompt: Prompt) -> None:
        """Into the running turn where the agent steers; else the turn is cancelled
        and ``prompt`` goes first once the cancel is answered. Where the steering
        request failed, ``prompt`` goes first once the turn ends: the user asked to
        add a message, not to stop the agent (decision 0042)."""
        steered = await self._steer(chat_id, prompt)
        chat, connection = self.ctx.chats.get(chat_id), self.pool.agent_of.get(chat_id)
        if steered in ("injected", "unanswered") or chat is None:
            return
        if steered != "failed":  # queued by _steer then
            self.queue.put(chat_id, prompt, first=True)
            self.queue.show(chat)
        # A turn being cancelled already (the user's <C-c>) is not cancelled again: the
        # prompt goes once that cancel is answered.
        cancel = steered is None and chat.state == "running"
        if cancel and connection is not None and not chat.session.cancelling:
            await self.queue.cancel(chat, connection)
        await self.queue.drain(chat)

    async def send_queued(self, chat_id: int, index: int, text: str) -> None:
        """:AcpQueue's "send now": queued prompt ``index`` (reading ``text``, see
        ``PromptQueue.take``) goes now, as :meth:`send_now`."""
        prompt = self.queue.take(chat_id, index, text)
        if prompt is not None:
            await self.send_now(chat_id, prompt)

    async def say(self, chat_id: int, text: str) -> None:
        """Tell the agent ``text`` at once: into the running turn where it steers,
        else as the next prompt (the turn is not cancelled for it)."""
        from acp_nvim.client.session.model import Prompt

        chat = self.ctx.chats.get(chat_id)
        if chat is None:
            return
        steered = await self._steer(chat_id, Prompt(text))
        if steered in ("injected", "unanswered"):
            return
        if steered != "failed":  # queued by _steer then
            self.queue.put(chat_id, Prompt(text), first=True)
            self.queue.show(chat)
        await self.queue.drain(chat)

    async def _steer(
        self, chat_id: int, prompt: Prompt
    ) -> Literal["injected", "prompt", "failed", "unanswered"] | None:
        """Put ``prompt`` into the chat's running turn: ``injected``, or ``prompt``
        when the agent had no turn running any more (send it as a prompt), ``failed``
        when the agent failed the request (queued to go first, and the chat says so),
        ``unanswered`` when the turn ended without an answer (the message is back in
        the input); None without a running turn or steering."""
        chat, connection = self.ctx.chats.get(chat_id), self.pool.agent_of.get(chat_id)
        if chat is None or connection is None or chat.state != "running":
            return None
        if not connection.can_steer or connection.turns.waiting(chat) or chat.session.cancelling:
            # Waiting: the turn the agent runs is one left behind, not shown; cancelling:
            # the user stopped it.
            return None
        try:
            injected = await _steered_before_turn_end(connection, chat, prompt)
        except AgentFailed as err:
            if self.ctx.chats.get(chat_id) is not chat:
                return "failed"  # closed meanwhile: nothing waits in it
            # Queued before it says so: the two may reach Neovim in separate batches.
            self.queue.put(chat_id, prompt, first=True)
            self.queue.show(chat)
            chat.show_error(f"{err}; the message waits in the queue and goes when the turn ends")
            return "failed"
        if injected is None:  # it may have reached the agent: the user decides
            chat.info("*The agent did not answer the message sent into the turn before the "
                      "turn ended: it is back in the input.*")  # fmt: skip
            self.queue.return_input(chat_id, prompt.text)
            return "unanswered"
        if injected:
            chat.on_steered(prompt.text)
        return "injected" if injected else "prompt"

    # -- reasons -----------------------------------------------------------------------

    async def answer(
        self, chat_id: int, request_id: str, option_id: str, reason: str | None = None
    ) -> None:
        """The user answered a permission prompt (``AgentPool.answer``); ``reason``:
        why they rejected it, told to the agent first (:meth:`say`). The agent waits
        for the answer meanwhile: steered in, the reason shows where it went in, above
        all the agent says once answered (said after the answer, it showed when
        ``injected`` came back, below what a fast agent had said by then)."""
        chat, connection = self.ctx.chats.get(chat_id), self.pool.agent_of.get(chat_id)
        permissions = connection.permissions if connection is not None else None
        if reason and chat and permissions and request_id in permissions.pending(chat):
            subject = permissions.subject(request_id)
            await self.say(chat_id, f"I rejected {subject or 'that'}: {reason}")
        await self.pool.answer(chat_id, request_id, option_id)

    async def review(
        self,
        chat_id: int,
        decision: str,
        path: str | None = None,
        hunk: int | None = None,
        turn: int | None = None,
        reason: str | None = None,
    ) -> None:
        """Accept or reject agent changes (``Reviews.review``); ``reason``: why they
        were rejected, told to the agent at once (:meth:`say`)."""
        await self.reviews.review(chat_id, decision, path, hunk, turn)
        review = self.reviews.by_chat.get(chat_id)
        if reason and decision == "reject" and review is not None:
            what = f"`{os.path.relpath(path, review.cwd)}`" if path else "the files"
            await self.say(chat_id, f"I rejected your change to {what}: {reason}")


async def _steered_before_turn_end(
    connection: AgentConnection, chat: Chat, prompt: Prompt
) -> bool | None:
    """Whether the agent took ``prompt`` into ``chat``'s running turn (raises as
    ``AgentConnection.steer``); None when the turn ended and the agent has not
    answered within ``turns.grace`` seconds since: an agent that never answers
    would otherwise hold the message, shown nowhere, for ever."""
    answer: list[bool | AgentFailed] = []
    async with anyio.create_task_group() as group:

        async def steer() -> None:
            try:
                answer.append(await connection.steer(chat, prompt.text, prompt.attachments))
            except AgentFailed as err:  # raised below, outside the task group
                answer.append(err)
            group.cancel_scope.cancel()

        group.start_soon(steer)
        await connection.turns.over(chat)
        await anyio.sleep(connection.turns.grace)  # an answer on its way still counts
        group.cancel_scope.cancel()
    match answer:
        case [AgentFailed() as err]:
            raise err
        case [bool(injected)]:
            return injected
    return None


def _held(connection: AgentConnection, turn: Turn) -> bool:
    """Whether ``connection``'s agent process holds ``turn``'s session still: it ran
    the turn there, or resumed that session (not a restarted one naming a session
    of its own alike)."""
    ran = turn.agent == connection.serial or turn.session_id in connection.held.resumed
    return ran and turn.session_id in connection.held.opened
