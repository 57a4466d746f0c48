"""What ends a chat's start that fails by a defect of ours."""

from __future__ import annotations

__all__ = ["start_task"]

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp_nvim.client.tasks import internal_error

if TYPE_CHECKING:
    from acp_nvim.client.session.chat import Chat

Start = Callable[..., Awaitable[None]]
# ChatLifecycle.end_start (passed, not imported: _chats makes its own start tasks).
End = Callable[[int, str, str | None, str | None], Awaitable[None]]


def start_task(end: End, start: Start) -> Start:
    """``start`` (opening, restarting, logging in or going on with a restarted agent:
    its first argument is the chat or its id) as the task the host runs: a defect of
    ours met on the way ends the start as a failure does, said in the chat (one made
    for it if it was not yet: an opening's agent and directory) and with no agent
    left running for it, not only in the log."""

    @functools.wraps(start)
    async def task(chat: Chat | int, *args: Any, **kwargs: Any) -> None:
        try:
            await start(chat, *args, **kwargs)
        except Exception as err:
            why = internal_error("starting the chat", err) + "; :AcpRestart tries again"
            agent, cwd = _opening(start, chat, *args, **kwargs)
            await end(chat if isinstance(chat, int) else chat.id, why, agent, cwd)

    return task


def _opening(start: Start, *args: Any, **kwargs: Any) -> tuple[str | None, str | None]:
    """The agent and directory this call of ``start`` asked a chat to open on, each
    None where it asked none (not an opening)."""
    try:
        asked = inspect.signature(start).bind(*args, **kwargs).arguments
    except TypeError:  # not called as it takes: it asked nothing
        return None, None
    return asked.get("agent"), asked.get("cwd")
