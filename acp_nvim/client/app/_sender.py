"""What the user sends a chat: a prompt (what it attaches resolved), the last one
again, one edited from before a turn (a rewind, then the send)."""

from __future__ import annotations

__all__ = ["Sender"]

import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acp_nvim.client.app._chats import ChatLifecycle
from acp_nvim.client.app._queue import worktree_gone
from acp_nvim.client.app._start_task import start_task

if TYPE_CHECKING:
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import Attachment, Prompt


class Sender:
    """Sends to the chats ``lifecycle`` opened: a prompt to a chat whose agent failed
    restarts it first (``ChatLifecycle.restart``)."""

    def __init__(self, lifecycle: ChatLifecycle) -> None:
        self.lifecycle = lifecycle
        self.ctx = lifecycle.ctx
        self.pool = lifecycle.pool
        self.queue = lifecycle.queue
        self.conversations = lifecycle.conversations
        # A failed chat started again for what is sent to it: a defect of ours on the
        # way ends that start as :AcpRestart's does (not a chat 'starting' for good).
        self._start_again = start_task(
            lifecycle.end_start, functools.partial(lifecycle.restart, asked=False)
        )

    def __repr__(self) -> str:
        return f"<Sender {sum(map(len, self.queue.prompts.values()))} prompts queued>"

    async def send(
        self,
        chat_id: int,
        text: str,
        context: Sequence[dict[str, Any]] = (),
        rewind: int | None = None,
        now: bool = False,
        starting: bool = False,
    ) -> None:
        """Send ``text`` with ``context`` (files, selections, diagnostics, images the
        user attached: services.context), or queue it while the chat is busy; a chat
        whose agent failed is restarted first. What cannot be sent goes back to the
        input. ``rewind``: an earlier prompt edited, sent from before turn ``rewind``
        (``Conversations.rewind``); ``now``: into the running turn, or ahead of the
        queue (``Conversations.send_now``); ``starting``: sent while the chat started,
        as the user saw it."""
        from acp_nvim.client.session.model import Prompt

        chat = self.ctx.chats.get(chat_id)
        attachments: list[Attachment] = []
        if context:
            from acp_nvim.client.services.context import resolve

            # What the user sees now is what goes, even if the prompt waits in the queue.
            cwd = chat.workspace.cwd if chat is not None else os.getcwd()
            attachments, warnings = await resolve(self.ctx.editor, context, cwd)
            for warning in warnings:
                self.ctx.editor.notify(warning, "warn")
        attachments = _carried(chat, rewind, attachments)
        await self._send(chat_id, Prompt(text, attachments), rewind, now, starting)

    async def regenerate(self, chat_id: int) -> None:
        """Send the last prompt again, unchanged (attachments too), as its edit is sent."""
        from acp_nvim.client.session.model import Prompt

        chat = self.ctx.chats.get(chat_id)
        path = chat.branches.path if chat is not None else []
        if not path:
            self.ctx.editor.notify("no prompt to regenerate in this chat", "info")
            return
        last = path[-1].prompt
        await self._send(chat_id, Prompt(last.text, list(last.attachments), again=True), len(path))

    async def rewind(self, chat_id: int, turn: int | None) -> None:
        """``Conversations.rewind``, in a chat whose agent failed once it started again
        (as a prompt sent to it starts it)."""
        await self._started(chat_id)
        await self.conversations.rewind(chat_id, turn)

    async def _started(self, chat_id: int) -> None:
        chat = self.ctx.chats.get(chat_id)
        if chat is not None and chat.state == "error":
            await self._start_again(chat_id)

    async def _send(
        self,
        chat_id: int,
        prompt: Prompt,
        rewind: int | None = None,
        now: bool = False,
        starting: bool = False,
    ) -> None:
        """Send ``prompt`` as :meth:`send` says."""
        chat = self.ctx.chats.get(chat_id)
        queue = self.queue.prompts.get(chat_id)  # there from open() to close()
        if queue is None or (chat is not None and chat.state == "closed"):
            self.ctx.editor.notify("cannot send: the chat is closed", "warn")
            self.queue.return_input(chat_id, prompt.text)
            return
        if chat is not None and (gone := worktree_gone(chat)):
            self.ctx.editor.notify(f"cannot send: {gone}", "warn")
            self.queue.return_input(chat_id, prompt.text)
            return
        if starting and chat is not None and chat.state == "error":
            # Sent to a start that failed before the prompt came: back to the input,
            # as what came before the failure went (ChatLifecycle._fail), not a restart unasked.
            self.queue.return_input(chat_id, prompt.text)
            return
        if rewind is not None:
            await self._started(chat_id)
        # A reopened chat whose agent has not started goes back in view, then sends below.
        in_view = rewind is not None and self.conversations.went_back(chat_id, rewind)
        if chat is not None and rewind is not None and not in_view:
            await self.conversations.rewind(chat_id, rewind, then=prompt)
            return
        if chat is not None and now and chat.state == "running":
            await self.conversations.send_now(chat_id, prompt)
            return
        self.queue.put(chat_id, prompt, first=now)
        if chat is None:
            return  # still being opened: sent once the chat is ready
        if chat.state == "ready" and chat.id in self.pool.agent_of:
            await self.queue.drain(chat)
        elif chat.state in ("error", "ready"):  # ready without an agent: a reopened chat
            self.queue.show(chat)
            await self._start_again(chat_id)
        else:  # starting or running: it goes when the chat is ready
            self.queue.show(chat)


def _carried(
    chat: Chat | None, rewind: int | None, attachments: list[Attachment]
) -> list[Attachment]:
    """The ``attachments`` of a prompt sent from before turn ``rewind`` (an edit of
    that turn's), after what that turn's prompt was given apart from its text: the
    edit carries those; its mentions come from its own text."""
    path = chat.branches.path if chat is not None and rewind is not None else []
    if not 1 <= (rewind or 0) <= len(path):
        return attachments
    edited = path[(rewind or 0) - 1].prompt
    return [a for a in edited.attachments if a.given and a not in attachments] + attachments
