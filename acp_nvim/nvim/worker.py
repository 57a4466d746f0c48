"""The worker thread: one anyio event loop that owns all agent I/O and state.

pynvim's loop keeps the main thread; this thread runs ``anyio.run``. The main
thread reaches the loop only through :meth:`Worker.submit` (or :meth:`Worker.post`),
which hands a coroutine to the loop's task group and returns without waiting for it
to run, so a Neovim request is never blocked on agent I/O. A plain thread is used,
not a BlockingPortal: a live portal hangs interpreter exit when Neovim closes the
channel.
"""

from __future__ import annotations

__all__ = ["Worker"]

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

log = logging.getLogger("acp_nvim")

Main = Callable[[anyio.abc.TaskGroup], Awaitable[None]]


class Worker:
    """Runs ``main(task_group)`` on a daemon thread and accepts work for that group."""

    def __init__(self, main: Main) -> None:
        self._main = main
        self._ready = threading.Event()
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._stopped: anyio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="acp-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        try:
            anyio.run(self._serve)
        except Exception:
            log.exception("worker loop crashed")
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._loop = asyncio.get_running_loop()  # anyio.run's backend: asyncio
        self._stopped = anyio.Event()
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            await self._main(tasks)
            self._ready.set()
            await self._stopped.wait()
            tasks.cancel_scope.cancel()

    def submit(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start ``fn(*args)`` on the loop; errors are logged, never raised here.
        Returns once the loop took it: a flood of calls waits for the loop."""
        if self._tasks is None or self._token is None:
            raise RuntimeError("worker is not running")
        anyio.from_thread.run_sync(self._tasks.start_soon, _guarded(fn, *args), token=self._token)

    def post(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """:meth:`submit` without waiting for the loop to take it, for a call whose
        latency the user feels (a send): the wait is a thread switch there and back,
        in which the two threads trade the GIL. Not for what may come in a flood.
        anyio has no public call of this kind: asyncio's own."""
        if self._tasks is None or self._loop is None:
            raise RuntimeError("worker is not running")
        self._loop.call_soon_threadsafe(self._tasks.start_soon, _guarded(fn, *args))

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a quick synchronous function on the loop thread and return its result."""
        assert self._token is not None
        return anyio.from_thread.run_sync(fn, *args, token=self._token)

    def wait(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Any:
        """Run ``fn(*args)`` on the loop and return its result: for a request whose
        answer is made off the loop (the loop goes on meanwhile)."""
        assert self._token is not None
        return anyio.from_thread.run(fn, *args, token=self._token)

    def stop(self, before: Callable[[], Awaitable[None]] | None = None, timeout: float = 5) -> None:
        """Run ``before`` (cleanup) on the loop, then end the loop and join the thread."""
        if self._token is None or not self._thread.is_alive():
            return
        stopped = self._stopped
        assert stopped is not None

        async def finish() -> None:
            try:
                if before is not None:
                    await before()
            finally:
                stopped.set()

        try:
            anyio.from_thread.run(finish, token=self._token)
        except Exception:
            log.exception("worker cleanup failed")
        self._thread.join(timeout)


def _guarded(
    fn: Callable[..., Awaitable[Any]], *args: Any
) -> Callable[[], Coroutine[Any, Any, None]]:
    """``fn(*args)`` as a task whose error is logged, not raised into the task group."""

    async def guarded() -> None:
        try:
            await fn(*args)
        except Exception:
            log.exception("task %s failed", getattr(fn, "__name__", fn))

    return guarded
