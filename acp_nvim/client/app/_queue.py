"""Prompts typed while a chat was busy, sent in order when it is ready; what cannot
be sent goes back to the chat's input, never lost in a queue the user may not see."""

from __future__ import annotations

__all__ = ["PromptQueue", "worktree_gone"]

import itertools
from typing import TYPE_CHECKING

from acp_nvim.client.app._context import AppContext
from acp_nvim.client.app._pool import AgentPool
from acp_nvim.client.errors import AgentFailed

if TYPE_CHECKING:
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.editor import InputOp, RenderOp
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import Prompt


class PromptQueue:
    def __init__(self, ctx: AppContext, pool: AgentPool) -> None:
        self.ctx = ctx
        self.pool = pool
        # By chat id, there from the chat's open to its close.
        self.prompts: dict[int, list[Prompt]] = {}
        # The queue the chat last showed (AcpQueued gave its count), by chat: a prompt
        # sent at once draws nothing and fires no event.
        self.shown: dict[int, list[str]] = {}
        # Prompt.rank: queue order, kept by a prompt taken out of the queue to edit. The
        # ones put first rank below every other, in the order they were put (a Lua
        # number holds them exactly: under 2^53).
        self._ranks = itertools.count(1)
        self._first_ranks = itertools.count(-(2**40))

    def __repr__(self) -> str:
        return f"<PromptQueue {sum(map(len, self.prompts.values()))} prompts>"

    def open(self, chat_id: int) -> None:
        """Prompts may be queued from now on (sent before the chat is ready)."""
        self.prompts.setdefault(chat_id, [])

    def put(self, chat_id: int, prompt: Prompt, *, first: bool = False) -> None:
        """Queue ``prompt`` last, or ``first``: ahead of every prompt queued, after
        those put first before it (two messages sent now go in the order sent)."""
        queue = self.prompts[chat_id]
        if first:
            prompt.rank = next(self._first_ranks)
            queue.insert(sum(1 for p in queue if p.rank < 0), prompt)
        else:
            prompt.rank = next(self._ranks)
            queue.append(prompt)

    def forget(self, chat_id: int) -> list[Prompt]:
        """The chat is gone: its queue is dropped; returns what was in it."""
        self.shown.pop(chat_id, None)
        return self.prompts.pop(chat_id, [])

    async def drain(self, chat: Chat) -> None:
        """Run the queued prompts of a ready chat, in order; none where its worktree
        is gone (:func:`worktree_gone`): they go back to the input, as a prompt sent
        then would."""
        queue = self.prompts.get(chat.id)
        while queue and self._ready(chat):
            if gone := worktree_gone(chat):  # removed during the turn before
                self.ctx.editor.notify(f"cannot send the queued prompts: {gone}", "warn")
                self.give_back(chat)
                return
            prompt = queue.pop(0)
            self.show(chat)
            connection = self.pool.agent_of.get(chat.id)
            try:
                if connection is None:
                    raise AgentFailed(f"agent {chat.agent!r} is not running")
                await connection.prompt(chat, prompt.text, prompt.attachments)
            except AgentFailed as err:
                self.return_input(chat.id, prompt.text, prompt.rank)
                chat.fail(str(err), err.details)
        if chat.state == "error":
            self.give_back(chat)
        else:  # what waits (the chat is held: its session changes) shows as queued
            self.show(chat)

    def _ready(self, chat: Chat) -> bool:
        """Whether the chat takes its next prompt now: ready, not ``held`` (changing
        its session: a rewind), and not closed or replaced meanwhile."""
        return chat.state == "ready" and not chat.held and self.ctx.chats.get(chat.id) is chat

    def give_back(self, chat: Chat) -> None:
        """The chat failed, or the user cancelled its turn: what waited to be sent goes
        back to the input, not lost in a queue the user may not see; in queue order,
        around the queued prompts taken out to edit that are still there."""
        queue = self.prompts.get(chat.id)
        if queue:
            given: list[RenderOp] = [
                {"op": "input", "text": p.text, "queued": p.rank} for p in queue
            ]
            self.ctx.editor.render(chat.id, given)
            queue.clear()
            self.show(chat)

    async def cancel(
        self, chat: Chat, connection: AgentConnection, *, give_back: bool = False
    ) -> None:
        """Cancel ``chat``'s running turn. A prompt the agent never got (it waited for
        the agent to end a turn left to it) is withdrawn at once and comes back to
        the input; with ``give_back`` (the user's cancel, decision 0080) the queue
        follows it, before the agent is told."""
        unsent = connection.turns.withdraw(chat)
        if unsent is not None:
            self.return_input(chat.id, unsent)
        if give_back:
            self.give_back(chat)
        if unsent is None:
            await self.pool.cancel_quietly(connection, chat)

    def dequeue(self, chat_id: int, index: int, text: str, edit: bool = False) -> None:
        """Drop queued prompt ``index`` (0-based), the one reading ``text``; ``edit``
        puts its text back in the input."""
        prompt = self.take(chat_id, index, text)
        if prompt is not None and edit:
            self.return_input(chat_id, prompt.text, prompt.rank)

    def take(self, chat_id: int, index: int, text: str) -> Prompt | None:
        """Take queued prompt ``index`` (0-based), the one reading ``text``, out of the
        queue; None (and the user told) when it is no longer there.

        The user picked it from the queue as it was: when the prompts before it were
        sent meanwhile, it is found by its text, never another one dropped.
        """
        queue = self.prompts.get(chat_id, [])
        chat = self.ctx.chats.get(chat_id)
        if not (0 <= index < len(queue) and queue[index].text == text):
            index = next((i for i, p in enumerate(queue) if p.text == text), -1)
        if index < 0 or chat is None:
            self.ctx.editor.notify("that prompt is no longer queued", "warn")
            return None
        prompt = queue.pop(index)
        self.show(chat)
        return prompt

    def show(self, chat: Chat) -> None:
        from acp_nvim.client.session import view

        texts = [p.text for p in self.prompts.get(chat.id, [])]
        shown = self.shown.get(chat.id, [])
        if texts == shown:  # a batch less for Neovim at every turn start
            return
        self.shown[chat.id] = texts
        self.ctx.editor.render(chat.id, [view.status_op(queued=len(texts), queue=texts)])
        if len(shown) != len(texts):
            self.ctx.editor.emit("AcpQueued", {"chat": chat.id, "count": len(texts)})

    def return_input(self, chat_id: int, text: str, rank: int | None = None) -> None:
        """Put text that was not handed over back in the chat's input; ``rank``: the
        queued prompt's (see ``InputOp``)."""
        op: InputOp = {"op": "input", "text": text}
        if rank is not None:
            op["queued"] = rank
        self.ctx.editor.render(chat_id, [op])


def worktree_gone(chat: Chat) -> str:
    """Why ``chat`` cannot work any more: its worktree removed outside Neovim (its
    agent's session works there, and would fail on every file); "" while it is
    there, or for a chat in the user's directory."""
    from acp_nvim.client.services.worktrees import still_there

    worktree = chat.workspace.worktree
    if worktree is None or still_there(worktree):
        return ""
    return (
        f"the worktree of this chat ({worktree.path}, branch {worktree.branch}) is gone,"
        " removed outside Neovim: close the chat, then reopen it from the history to go"
        " on in your own directory"
    )
