"""Going back and steering: what the user does to a chat's conversation as a whole.

- :meth:`Conversations.rewind` takes the files back to before a turn (the review's
  restore) and the conversation too: a fork of the session at the last agent message
  before that turn where the agent offers forks at a message, else a new session
  whose first prompt carries the conversation so far (``session.seed``). The turns
  left behind stay as a branch (``session.branches``).
- :meth:`Conversations.pick` shows another branch and goes on in its session: the
  agent still holds it, or resumes it, else a seeded session takes its place.
- :meth:`Conversations.edit` and :meth:`Conversations.regenerate`: an earlier prompt
  back in the input (sent, it is a rewind and a send), the last one again.
- :meth:`Conversations.send_now` puts a message into the running turn where the agent
  steers (``_session/steering``), else cancels the turn and sends it first;
  :meth:`Conversations.say` is the same for a rejection's reason, without the cancel.

It works on the app's chats, agents and queues, handed over at construction; the
files are not touched when a branch is picked (decision 0041).
"""

from __future__ import annotations

__all__ = ["Conversations"]

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Literal

from acp_nvim.client.agent.connection import AgentConnection
from acp_nvim.client.editor import Editor
from acp_nvim.client.errors import AgentFailed
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.session import view
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import ConfigOption, Prompt
from acp_nvim.client.session.seed import conversation, seed


class Conversations:
    """Rewinds, branches, edits and steering for the chats of one app.

    ``chats``, ``connections`` (by chat id), ``reviews`` and ``queues`` are the app's
    live mappings; ``drain`` sends a ready chat's queued prompts, ``cancel`` cancels
    its turn, ``show_queue`` redraws its queue, ``keep_settings`` gives a new session
    the settings the chat had (its config options before).
    """

    def __init__(
        self,
        editor: Editor,
        chats: Mapping[int, Chat],
        connections: Mapping[int, AgentConnection],
        reviews: Mapping[int, SessionChanges],
        queues: Mapping[int, list[Prompt]],
        *,
        drain: Callable[[Chat], Awaitable[None]],
        cancel: Callable[[AgentConnection, Chat], Awaitable[None]],
        show_queue: Callable[[Chat], None],
        keep_settings: Callable[[AgentConnection, Chat, list[ConfigOption]], Awaitable[None]],
    ) -> None:
        self.editor = editor
        self.chats = chats
        self.connections = connections
        self.reviews = reviews
        self.queues = queues
        self._drain = drain
        self._cancel = cancel
        self._show_queue = show_queue
        self._keep_settings = keep_settings

    def __repr__(self) -> str:
        return f"<Conversations of {len(self.chats)} chats>"

    def _live(self, chat_id: int) -> tuple[Chat, AgentConnection] | None:
        """The chat and its agent, or None with the reason told."""
        chat, connection = self.chats.get(chat_id), self.connections.get(chat_id)
        if chat is None or connection is None or not connection.alive:
            self.editor.notify("the chat has no running agent", "warn")
            return None
        return chat, connection

    @asynccontextmanager
    async def _holding(self, chat: Chat, connection: AgentConnection) -> AsyncIterator[bool]:
        """Hold the chat's queue, cancelling a running turn first; yields whether the
        chat is ready for its session to change. Queued prompts go on afterwards."""
        chat.held = True
        try:
            if chat.state == "running":
                await self._cancel(connection, chat)
                await connection.turn_over(chat)
            yield chat.state == "ready"
        finally:
            chat.held = False
        await self._drain(chat)

    # -- rewind and branches -----------------------------------------------------------

    async def rewind(self, chat_id: int, turn: int | None, then: Prompt | None = None) -> None:
        """Take the files and the conversation back to before ``turn`` of the shown
        branch (default: its last); ``then`` is sent first afterwards (an edited
        prompt). A turn out of range is told, and ``then`` goes back to the input."""
        live = self._live(chat_id)
        path = live[0].branches.path if live is not None else []
        turn = len(path) if turn is None else turn
        if live is None or not 1 <= turn <= len(path):
            if live is not None:
                span = f"turns 1 to {len(path)}" if path else "no turn was sent yet"
                self.editor.notify(f"no turn {turn} to rewind to ({span})", "warn")
            if then is not None:
                self.editor.render(chat_id, [{"op": "input", "text": then.text}])
            return
        chat, connection = live
        async with self._holding(chat, connection) as ready:
            if ready:
                await self._rewind(chat, connection, turn)
            else:
                self.editor.notify("cannot rewind: the chat has no running session", "warn")
            if then is not None and ready:
                self.queues[chat.id].insert(0, then)
            elif then is not None:
                self.editor.render(chat_id, [{"op": "input", "text": then.text}])

    async def _rewind(self, chat: Chat, connection: AgentConnection, turn: int) -> None:
        path = chat.branches.path
        source = path[turn - 2].session_id if turn >= 2 else None
        point = chat.last_reply(turn - 1) if turn >= 2 and connection.can_fork_at_message else None
        review = self.reviews.get(chat.id)
        restored = await review.restore(path[turn - 1].review) if review is not None else []
        chat.leave(turn)
        files = ", ".join(f"`{name}`" for name in restored) or "no file needed it"
        chat.info(f"*Rewound to before turn {turn}, the conversation and the files ({files}).*")
        connection.detach(chat)
        try:
            if source is not None and point is not None:
                try:
                    await connection.fork(chat, source, point)
                    return
                except AgentFailed as err:
                    chat.info(f"*The fork at turn {turn - 1} failed ({err}).*")
            await self._seeded(chat, connection)
        except AgentFailed as err:
            chat.fail(str(err), err.details)

    async def _seeded(self, chat: Chat, connection: AgentConnection) -> None:
        """Go on in a new session whose first prompt carries the shown conversation,
        with the chat's settings."""
        carried = seed(conversation(chat.session))
        settings = chat.session.config_options
        await connection.new_session(chat)
        chat.seed = carried
        await self._keep_settings(connection, chat, settings)

    async def pick(self, chat_id: int, branch_id: int) -> None:
        """Show branch ``branch_id`` and go on in its session (see the module doc)."""
        live = self._live(chat_id)
        if live is None:
            return
        chat, connection = live
        async with self._holding(chat, connection) as ready:
            if not ready:
                self.editor.notify("cannot switch branches: the chat has no session", "warn")
                return
            try:
                branch = chat.pick(branch_id)
            except KeyError:
                self.editor.notify(f"no other branch {branch_id}", "warn")
                return
            chat.seed = None
            session_id = branch.session_id or ""
            chat.info(f"*Switched to branch {branch.id} ({len(branch.turns)} turns).*")
            try:
                if session_id in connection.opened:
                    connection.attach(chat, session_id)
                    return
                connection.detach(chat)
                try:
                    await connection.resume(chat, session_id, replay=False)
                except AgentFailed:
                    await self._seeded(chat, connection)
            except AgentFailed as err:
                chat.fail(str(err), err.details)

    # -- editing and regenerating ------------------------------------------------------

    def edit(self, chat_id: int, turn: int | None) -> None:
        """Put the prompt of ``turn`` (default: the last) in the chat's input; the
        input sends it as a rewind to that turn (Lua keeps the number)."""
        chat = self.chats.get(chat_id)
        path = chat.branches.path if chat is not None else []
        if not path:
            self.editor.notify("no prompt was sent in this chat", "info")
            return
        turn = len(path) if turn is None else turn
        if not 1 <= turn <= len(path):
            self.editor.notify(f"no turn {turn} (turns 1 to {len(path)})", "warn")
            return
        self.editor.render(chat_id, [view.edit_op(turn, path[turn - 1].prompt.text)])

    async def regenerate(self, chat_id: int) -> None:
        """Send the last prompt again from before its answer (a rewind to it)."""
        chat = self.chats.get(chat_id)
        path = chat.branches.path if chat is not None else []
        if not path:
            self.editor.notify("no prompt to regenerate in this chat", "info")
            return
        last = path[-1].prompt
        await self.rewind(chat_id, len(path), Prompt(last.text, list(last.attachments)))

    # -- steering ----------------------------------------------------------------------

    async def send_now(self, chat_id: int, prompt: Prompt) -> None:
        """Into the running turn where the agent steers; else the turn is cancelled
        and ``prompt`` goes first once the cancel is answered."""
        steered = await self._steer(chat_id, prompt)
        if steered == "injected":
            return
        chat, connection = self.chats[chat_id], self.connections.get(chat_id)
        self.queues[chat_id].insert(0, prompt)
        self._show_queue(chat)
        if steered is None and connection is not None and chat.state == "running":
            await self._cancel(connection, chat)
        await self._drain(chat)

    async def say(self, chat_id: int, text: str) -> None:
        """Tell the agent ``text`` at once: into the running turn where it steers,
        else as the next prompt (the turn is not cancelled for it)."""
        chat = self.chats.get(chat_id)
        if chat is None or await self._steer(chat_id, Prompt(text)) == "injected":
            return
        self.queues[chat_id].insert(0, Prompt(text))
        self._show_queue(chat)
        await self._drain(chat)

    async def _steer(self, chat_id: int, prompt: Prompt) -> Literal["injected", "prompt"] | None:
        """Put ``prompt`` into the chat's running turn: ``injected``, or ``prompt``
        when the agent had no turn running any more (send it as a prompt); None
        without a running turn or steering."""
        chat, connection = self.chats.get(chat_id), self.connections.get(chat_id)
        if chat is None or connection is None or chat.state != "running":
            return None
        if not connection.can_steer:
            return None
        try:
            injected = await connection.steer(chat, prompt.text, prompt.attachments)
        except AgentFailed as err:
            chat.show_error(str(err))
            return None
        if injected:
            chat.on_steered(prompt.text)
        return "injected" if injected else "prompt"
