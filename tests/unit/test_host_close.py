"""Lua's close and a history search right after it, as the host takes them on the
pynvim thread (acp_nvim/nvim/host.py), without Neovim."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio

from acp_nvim.client.app._workspaces import Workspaces
from acp_nvim.client.config import HistoryOptions
from acp_nvim.client.history import History
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.tasks import Tasks
from acp_nvim.nvim.host import Host
from tests.fakes.editor import RecordingEditor


class LaterLoop:
    """The worker as the pynvim thread sees it while its loop is busy: a call runs
    before it returns; a task submitted runs when the loop gets to it (:meth:`run`)."""

    def __init__(self) -> None:
        self.submitted: list[tuple[Callable[..., Awaitable[Any]], tuple[Any, ...]]] = []

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def submit(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self.submitted.append((fn, args))

    async def run(self) -> None:
        for fn, args in self.submitted:
            await fn(*args)


class Replies:
    """Neovim as the host answers it: the replies to Lua's requests."""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.replied = threading.Event()

    def exec_lua(self, code: str, reply: dict[str, Any], async_: bool = False) -> None:
        self.replies.append(reply)
        self.replied.set()

    def async_call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)


def test_a_search_right_after_a_close_finds_the_chats_last_turn(tmp_path: Path) -> None:
    """`:AcpClose` then at once `require("acp").history({query = ...})` from one
    script: the search, answered at once, read the file before the
    worker's loop had run the close that hands the chat's last changes to the
    writer (reads wait only for what was handed over when asked), so the turn just
    ended was not found. The close now hands them over before the host reads
    Neovim's next message; only letting its agent and worktree go waits for the loop."""

    async def run() -> list[dict[str, Any]]:
        async with anyio.create_task_group() as group:
            history = History(RecordingEditor(), Tasks(group))
            history.configure(HistoryOptions(path=str(tmp_path / "h.sqlite3")), None)
            chat = Chat(1, "demo", RecordingEditor())
            history.attach(chat, "/p", keep=True)
            await chat.start_turn("said just before the close", [])
            chat.end_turn("end_turn")

            async def close(chat_id: int, keep: bool | None = None, looked: bool = False) -> None:
                history.detach(chat_id)

            app = SimpleNamespace(closing=history.detach, close=close, history=history)
            replies, loop = Replies(), LaterLoop()
            host = Host(replies)
            host.app, host.worker, host._started = app, loop, True  # type: ignore[assignment]
            host.on_notification("acp", ["close", {"chat": 1}])
            ask = {"token": 1, "method": "history", "params": {"query": "close"}}
            host.on_notification("acp", ["ask", ask])
            await loop.run()
            await anyio.to_thread.run_sync(replies.replied.wait, 10)
            await history.close()
            group.cancel_scope.cancel()
        return replies.replies

    [reply] = anyio.run(run)
    assert reply["error"] is None
    assert [hit["snippet"] for hit in reply["result"]] == ["said just before the close"]


def test_closing_a_worktree_chat_looks_for_execute_bits_off_the_pynvim_thread() -> None:
    """Before closing a worktree chat, Lua asks which execute bits its agent changed
    alone: git looks, for up to its 2 s limit in a large project. Answered on the
    pynvim thread, which also sends what every chat draws, that thread waited for
    it: chats stopped drawing, and other answers waited. The worker's loop answers
    it now (a reply item, as :AcpExport's), the pynvim thread going on meanwhile."""

    class BusyLoop(LaterLoop):
        def wait(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
            raise AssertionError("the pynvim thread waited for the worker's loop")

    editor = RecordingEditor()
    chats: dict[int, Chat] = {}
    ctx = SimpleNamespace(chats=chats, editor=editor)
    app = SimpleNamespace(workspaces=Workspaces(ctx, {}, {}))  # type: ignore[arg-type]
    replies, loop = Replies(), BusyLoop()
    host = Host(replies)
    host.app, host.worker, host._started = app, loop, True  # type: ignore[assignment]
    ask = {"token": 7, "method": "worktree_work", "params": {"chat": 1}}
    host.on_notification("acp", ["ask", ask])
    assert replies.replies == [] and editor.replies == {}  # not answered yet: git looks
    anyio.run(loop.run)
    assert editor.replies == {7: ("", None)}  # no such chat: nothing waits in it
