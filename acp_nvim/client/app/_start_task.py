"""What ends a chat's start that fails by a defect of ours."""

from __future__ import annotations

__all__ = ["opening_task", "start_task"]

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp_nvim.client.tasks import internal_error

if TYPE_CHECKING:
    from acp_nvim.client.session.chat import Chat

Start = Callable[..., Awaitable[None]]
# ChatLifecycle.end_start (passed, not imported: _chats makes its own start tasks).
End = Callable[[int, str, str | None, str | None], Awaitable[None]]


def start_task(end: End, start: Start) -> Start:
    """``start`` (restarting, logging in or going on with a restarted agent: its first
    argument is the chat or its id) as the task the host runs: a defect of ours met on
    the way ends the start as a failure does, said in the chat and with no agent left
    running for it, not only in the log."""

    @functools.wraps(start)
    async def task(chat: Chat | int, *args: Any, **kwargs: Any) -> None:
        chat_id = chat if isinstance(chat, int) else chat.id
        await _ended(end, functools.partial(start, chat, *args, **kwargs), chat_id)

    return task


def opening_task(end: End, open_chat: Start) -> Start:
    """``open_chat`` (``ChatLifecycle.open``: the chat's id, its agent and directory
    first) as :func:`start_task` makes a start: a chat not made yet when the defect
    came is made to say so, on that agent in that directory."""

    @functools.wraps(open_chat)
    async def task(chat_id: int, agent: str | None, cwd: str, *args: Any, **kwargs: Any) -> None:
        opening = functools.partial(open_chat, chat_id, agent, cwd, *args, **kwargs)
        await _ended(end, opening, chat_id, agent, cwd)

    return task


async def _ended(
    end: End, start: Start, chat_id: int, agent: str | None = None, cwd: str | None = None
) -> None:
    """Run ``start``; a defect of ours in it (a call it does not take too) ends chat
    ``chat_id``'s start: ``end`` makes the chat on ``agent`` in ``cwd`` where an
    opening had not yet."""
    try:
        await start()
    except Exception as err:
        why = internal_error("starting the chat", err) + "; :AcpRestart tries again"
        await end(chat_id, why, agent, cwd)
