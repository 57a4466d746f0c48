"""How a chat's turn ends when its agent does not end it: the agent exits, or it
ignores a cancel.

A cancelled turn the agent has not ended within ``grace`` seconds ends here and is
left to the agent: nothing more of it is shown until the agent ends it, and the
chat's next prompt in that session waits for that (the agent runs one turn of a
session at a time; a prompt to another session, after a rewind or a branch switch,
goes at once: the spec has a cancelled turn end with the agent's answer, which an
agent may never give). Cancelled while it waits, that prompt never
went: it is withdrawn at once (:meth:`Turns.withdraw`), with nothing to tell the
agent and nothing to wait for.
"""

from __future__ import annotations

__all__ = ["Abandoned", "Turns", "Withdrawn"]

from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import anyio

from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import ToolCallPatch
from acp_nvim.client.tasks import Tasks
from acp_nvim.protocol import ConnectionClosed

T = TypeVar("T")

LATE_END = (
    "*The agent went on with the cancelled turn and has ended it now; what it said and did"
    " after the cancel is not shown, though its session holds it.*"
)


class Abandoned(Exception):
    """The agent did not end a cancelled turn in time."""


class Withdrawn(Exception):
    """The turn was cancelled while its prompt waited behind a turn left to the
    agent: the prompt never went."""


class Turns:
    """The running turn of each chat of one agent connection, by chat id.

    ``grace``: seconds an agent gets to end a turn after a cancel (timeouts.cancel).
    :meth:`start` must run first: abandoned calls go on in its task group.
    """

    def __init__(self) -> None:
        self.grace = 5.0
        self._tasks: Tasks | None = None
        self._abandon: dict[int, anyio.Event] = {}  # set to end that turn here
        self._ended: dict[int, anyio.Event] = {}  # set when that turn has ended
        # Turns ended here that the agent still runs (it ignored the cancel), by
        # session: their chat, and an event set once the agent ends them. Nothing of
        # that session is shown meanwhile (``Chat.unshown``), whichever branch is.
        self._left: dict[str, tuple[Chat, anyio.Event]] = {}
        # Sessions whose turn left to the agent ended while their chat showed another
        # one: told when it shows theirs again (:meth:`shown`), with the files that
        # turn's tool calls named meanwhile.
        self._untold: dict[str, tuple[Chat, list[str]]] = {}
        # The prompt of a turn waiting for the agent to end the one left to it.
        self._waiting: dict[int, str] = {}
        # Set once the running turn's prompt is written to the agent, waits behind a
        # turn left to it, or never goes (the turn ended): a cancel written before it
        # would reach the agent ahead of the prompt, which it would then run.
        self._sent: dict[int, anyio.Event] = {}

    def __repr__(self) -> str:
        return f"<Turns {len(self._abandon)} running, {len(self._left)} left to the agent>"

    def start(self, tasks: Tasks) -> None:
        self._tasks = tasks

    def begin(self, chat: Chat) -> None:
        self._abandon[chat.id] = anyio.Event()
        self._ended[chat.id] = anyio.Event()
        self._sent[chat.id] = anyio.Event()

    def end(self, chat: Chat) -> None:
        del self._abandon[chat.id]
        self._ended.pop(chat.id).set()
        self._sent.pop(chat.id).set()

    def sent(self, chat: Chat) -> None:
        """``chat``'s prompt is written to the agent."""
        self._sent[chat.id].set()

    async def written(self, chat: Chat) -> bool:
        """Wait until a cancel of ``chat``'s turn can go to the agent: its prompt is
        written (during the turn start, the review's scan, it is not yet) or waits
        behind a turn left to the agent (withdrawn by the cancel's grace). False when
        that turn ended meanwhile, its prompt never sent: nothing is left to cancel
        (the next queued prompt's turn may run by then)."""
        sent = self._sent.get(chat.id)
        if sent is None:
            return True
        await sent.wait()
        return self._sent.get(chat.id) is sent

    async def over(self, chat: Chat) -> None:
        """Wait until ``chat``'s running turn (if any) has ended here."""
        ended = self._ended.get(chat.id)
        if ended is not None:
            await ended.wait()

    def behind(self, chat: Chat) -> anyio.Event | None:
        """Set once the agent ends the turn of ``chat``'s session that ended here, if
        it still runs one; None when not."""
        left = self._left.get(chat.session.session_id)
        return left[1] if left is not None and left[0] is chat else None

    async def wait_behind(self, chat: Chat, prompt: str, exited: anyio.Event) -> None:
        """Wait until the agent has ended the turn of ``chat`` left to it, if any;
        ``prompt`` (the running turn's, not sent yet) can be withdrawn meanwhile.

        Raises:
            Withdrawn: :meth:`withdraw` took the prompt back.
            ConnectionClosed: the agent exited.
        """
        left = self.behind(chat)
        if left is None:
            return
        self._waiting[chat.id] = prompt
        self._sent[chat.id].set()
        try:
            await self.until_exit(left.wait(), chat, exited)
        except Abandoned:
            raise Withdrawn from None
        finally:
            self._waiting.pop(chat.id, None)
        self._forget(chat.session.session_id, left, ended=True)  # before this prompt runs
        if self._abandon[chat.id].is_set():  # withdrawn as the agent ended the other
            raise Withdrawn

    def waiting(self, chat: Chat) -> bool:
        """Whether ``chat``'s turn waits for the agent to end the one left to it: its
        prompt has not gone, and the agent's running turn of the session is that one."""
        return chat.id in self._waiting

    def withdraw(self, chat: Chat) -> str | None:
        """End ``chat``'s turn at once if its prompt still waits behind a turn left
        to the agent (it never went: nothing to tell the agent, nothing to wait
        for); returns that prompt, else None."""
        prompt = self._waiting.pop(chat.id, None)
        if prompt is not None:
            self._abandon[chat.id].set()
        return prompt

    def cancelled(self, chat: Chat) -> None:
        """The agent was asked to stop ``chat``'s turn: the turn ends here (Abandoned)
        unless the agent has ended it within :attr:`grace` seconds."""
        abandon = self._abandon.get(chat.id)
        if abandon is not None and self._tasks is not None:
            self._tasks.start_soon(self._abandon_after_grace, abandon)

    async def _abandon_after_grace(self, abandon: anyio.Event) -> None:
        await anyio.sleep(self.grace)
        abandon.set()  # a no-op when the turn ended meanwhile: nobody waits on it

    async def until_exit(
        self, call: Awaitable[T], chat: Chat, exited: anyio.Event, *, leave: bool = False
    ) -> T:
        """``call``'s result, or ConnectionClosed as soon as the agent exits
        (``exited``; a v2 turn waits on notifications, which an exit never sends), or
        Abandoned once ``chat``'s turn is abandoned. With ``leave``, a call abandoned
        goes on in the connection's task group until the agent ends it, ``chat``
        muted."""
        abandon = self._abandon[chat.id]
        outcome: list[Any] = []  # the result, or the exception the call raised
        finished = anyio.Event()

        async def run() -> None:
            try:
                outcome.append((await call,))
            except Exception as err:  # re-raised below, outside the task group
                outcome.append(err)
            finally:
                finished.set()

        async with anyio.create_task_group() as waits:
            if leave and self._tasks is not None:
                self._tasks.start_soon(run)
            else:
                waits.start_soon(run)
            waits.start_soon(_cancel_when, finished, waits.cancel_scope)
            waits.start_soon(_cancel_when, abandon, waits.cancel_scope)
            await exited.wait()
            waits.cancel_scope.cancel()
        if not outcome:
            if abandon.is_set() and not exited.is_set():
                if leave:
                    self._leave(chat, finished, exited, outcome)
                raise Abandoned
            raise ConnectionClosed("the agent exited")
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return cast(T, outcome[0][0])

    def _leave(
        self, chat: Chat, ended: anyio.Event, exited: anyio.Event, outcome: list[Any]
    ) -> None:
        """The turn of ``chat`` ends here while the agent goes on with it: nothing of
        its session is shown until ``ended`` (the agent ended it: ``outcome`` holds
        its answer), whichever branch the chat shows meanwhile; then the chat says so
        on that session's branch. Shown again too once the agent ``exited`` (the
        request ends then too, ConnectionClosed, told as no end): a restarted one may
        resume the session, without that turn."""
        session_id = chat.session.session_id
        chat.unshown.add(session_id)
        self._left[session_id] = (chat, ended)

        async def forget() -> None:
            try:
                async with anyio.create_task_group() as waits:
                    for event in (ended, exited):
                        waits.start_soon(_cancel_when, event, waits.cancel_scope)
            finally:
                answered = bool(outcome) and not isinstance(outcome[0], ConnectionClosed)
                self._forget(session_id, ended, ended=answered)

        if self._tasks is not None:
            self._tasks.start_soon(forget)

    def left_call(self, session_id: str, patch: ToolCallPatch) -> None:
        """A tool call of ``session_id``'s turn left to the agent, not shown: the files
        it names are not the chat's open turn's (``TurnReview.left``)."""
        chat = self._left.get(session_id, (None, None))[0]
        if chat is not None and chat.changes is not None:
            chat.changes.left.named(patch)

    def _forget(self, session_id: str, left: anyio.Event, *, ended: bool) -> None:
        """``session_id``'s turn left to the agent (``left``) is over: shown again."""
        chat, event = self._left.get(session_id, (None, None))
        if chat is None or event is not left:
            return
        del self._left[session_id]
        chat.unshown.discard(session_id)
        written = chat.changes.left.ended() if chat.changes is not None else []
        if ended:
            self._untold[session_id] = (chat, written)
            self.shown(chat)

    def release(self, chat: Chat) -> None:
        """``chat`` leaves this agent (closed, or restarted apart from it): nothing is
        kept to mute or tell it of the turns left to the agent, which it never shows
        again here."""
        for session_id, (left, _) in list(self._left.items()):
            if left is chat:
                del self._left[session_id]
                chat.unshown.discard(session_id)
        self._untold = {key: told for key, told in self._untold.items() if told[0] is not chat}

    def shown(self, chat: Chat) -> None:
        """``chat`` shows its session (again): where the agent has ended a turn of it
        that was left to it since, the chat says that it did, and that what it did
        after the cancel is not shown (it is in the agent's session all the same)."""
        told, written = self._untold.get(chat.session.session_id, (None, []))
        if told is chat:
            del self._untold[chat.session.session_id]
            named = ", ".join(f"`{path}`" for path in written)
            listed = f"\n*Files it named meanwhile, not in the review: {named}.*"
            chat.info(LATE_END + (listed if written else ""))


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
