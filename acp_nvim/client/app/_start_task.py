"""What ends a chat's start that fails by a defect of ours."""

from __future__ import annotations

__all__ = ["start_task"]

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp_nvim.client.tasks import internal_error

if TYPE_CHECKING:
    from acp_nvim.client.app._chats import ChatLifecycle

Start = Callable[..., Awaitable[None]]


def start_task(lifecycle: ChatLifecycle, start: Start) -> Start:
    """``start`` (opening, restarting or logging in chat ``chat_id``) as the task the
    host runs: a defect of ours met on the way ends the start as a failure does, said
    in the chat (one made for it if it was not yet: ``open``'s agent and directory
    follow its id) and with no agent left running for it, not only in the log."""

    @functools.wraps(start)
    async def task(chat_id: int, *args: Any, **kwargs: Any) -> None:
        try:
            await start(chat_id, *args, **kwargs)
        except Exception as err:
            why = internal_error("starting the chat", err) + "; :AcpRestart tries again"
            await lifecycle.pool.abandon()
            chat = lifecycle.ctx.chats.get(chat_id)
            if chat is None:
                agent, cwd = args[0], args[1]
                lifecycle._refuse(chat_id, agent or "?", cwd, why)
            elif chat.state != "closed":
                lifecycle._fail(chat, why)
                await lifecycle.pool.release(chat)  # not kept for a login: nothing says it helps

    return task
