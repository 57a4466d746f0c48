"""The Neovim implementation of the Editor port, with the render batcher.

Render ops, events and notices from the worker are queued in order and
flushed at most every ``interval`` seconds as ONE ``exec_lua`` call, so a
burst of 10k chunks becomes a few dozen Neovim calls and Lua applies each
batch atomically. Consecutive appends to one block are joined before sending.
"""

from __future__ import annotations

__all__ = ["NvimEditor"]

import time
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import pynvim

from acp_nvim.client.editor import BufferState, EditorError, RenderOp
from acp_nvim.review import LineEdit

_APPLY = "require('acp.host').apply(...)"
# Joined text of a pending append op is kept as a list of parts until the flush.
_PARTS = "_parts"


class NvimEditor:
    """Batches everything for Lua; :meth:`run` is the flushing task."""

    def __init__(self, nvim: pynvim.Nvim, interval: float = 0.016) -> None:
        self._nvim = nvim
        self._interval = interval
        self._pending: list[list[Any]] = []
        self._wake = anyio.Event()
        self._last_flush = 0.0

    def render(self, chat: int, ops: list[RenderOp]) -> None:
        for op in ops:
            self._render_one(chat, op)
        self._wake.set()

    def _render_one(self, chat: int, op: RenderOp) -> None:
        last = self._pending[-1] if self._pending else None
        if op["op"] == "append" and last is not None and last[0] == "render" and last[1] == chat:
            previous = last[2][-1]
            if previous["op"] == "append" and previous["id"] == op["id"]:
                previous[_PARTS].append(op["text"])
                return
        if op["op"] == "append":
            op = {"op": "append", "id": op["id"], _PARTS: [op["text"]]}
        if last is not None and last[0] == "render" and last[1] == chat:
            last[2].append(op)
        else:
            self._pending.append(["render", chat, [op]])

    def emit(self, event: str, data: dict[str, Any]) -> None:
        self._pending.append(["event", event, data])
        self._wake.set()

    def notify(self, message: str, level: str = "error") -> None:
        self._pending.append(["notify", message, level])
        self._wake.set()

    def review(self, chat: int, summary: dict[str, Any]) -> None:
        # Only the latest state matters: an older one still queued is dropped.
        self._pending = [i for i in self._pending if not (i[0] == "review" and i[1] == chat)]
        self._pending.append(["review", chat, summary])
        self._wake.set()

    async def read_buffer(self, path: str, *, load: bool = False) -> BufferState | None:
        raw = await self.call_lua("return require('acp.buffers').read(...)", path, load)
        if not raw:
            return None
        if raw["text"].count("\n") != raw["count"] - 1:
            # A NUL byte reads as "\n" inside a line: only the list of lines is exact.
            raw = await self.call_lua("return require('acp.buffers').read(...)", path, load, True)
            if not raw:
                return None
        state = (raw["eol"], bool(raw["final_newline"]), bool(raw["modified"]), int(raw["tick"]))
        if "lines" in raw:
            return BufferState(list(raw["lines"]), *state)
        return BufferState(None, *state, joined=raw["text"])

    async def edit_buffer(
        self, path: str, tick: int, edits: list[LineEdit], *, save: bool
    ) -> int | None:
        plain = [[e.start, e.end, e.lines] for e in edits]
        result = await self.call_lua(
            "return require('acp.buffers').edit(...)", path, tick, plain, save
        )
        return None if result is False or result is None else int(result)

    async def reload_buffers(self, paths: list[str]) -> list[str]:
        if not paths:
            return []
        return list(await self.call_lua("return require('acp.buffers').reload(...)", paths))

    async def open_terminal(
        self, key: str, cmd: str | list[str], cwd: str, env: dict[str, str]
    ) -> int:
        pid = await self.call_lua("return require('acp.terminal').create(...)", key, cmd, cwd, env)
        return int(pid)

    async def write_terminal(self, key: str, text: str, *, reset: bool = False) -> None:
        await self.call_lua("require('acp.terminal').write(...)", key, text, reset)

    async def stop_terminals(self, keys: list[str], *, wipe: bool = False) -> None:
        await self.call_lua("require('acp.terminal').stop(...)", keys, wipe)

    async def run(self) -> None:
        """Flush queued items, at most once per interval, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            delay = self._last_flush + self._interval - time.monotonic()
            if delay > 0:
                await anyio.sleep(delay)
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        for item in batch:
            if item[0] == "render":
                for op in item[2]:
                    if _PARTS in op:
                        op["text"] = "".join(op.pop(_PARTS))
        self._last_flush = time.monotonic()
        self._nvim.async_call(self._send, batch)

    def _send(self, batch: list[list[Any]]) -> None:
        self._nvim.exec_lua(_APPLY, batch, async_=True)

    async def call_lua(self, code: str, *args: Any) -> Any:
        """Run Lua ``code`` (``...`` are ``args``) on Neovim's main loop; await its result.

        Pending render ops are flushed first, so Lua sees the transcript as the
        core last described it. One call is atomic from Neovim's point of view:
        a read-modify-write of a buffer must be ONE such call.

        Raises:
            EditorError: the Lua code raised.
        """
        self.flush()
        done = anyio.Event()
        token = anyio.lowlevel.current_token()
        outcome: dict[str, Any] = {}

        def run() -> None:  # on the pynvim thread
            try:
                outcome["value"] = self._nvim.exec_lua(code, *args)
            except pynvim.NvimError as err:
                outcome["error"] = str(err)
            finally:
                anyio.from_thread.run_sync(done.set, token=token)

        self._nvim.async_call(run)
        await done.wait()
        if "error" in outcome:
            raise EditorError(outcome["error"])
        return outcome.get("value")
