"""The Neovim implementation of the Editor port, with the render batcher.

Render ops, events and notices from the worker are queued in order and
flushed at most every ``interval`` seconds as ONE ``exec_lua`` call, so a
burst of 10k chunks becomes a few dozen Neovim calls and Lua applies each
batch atomically. Consecutive appends to one block are joined before sending.
"""

from __future__ import annotations

__all__ = ["NvimEditor"]

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import pynvim

from acp_nvim.client.editor import BufferState, EditorError, Event, LspRequest, RenderOp
from acp_nvim.nvim.mirror import BufferMirrors, nul_bytes

if TYPE_CHECKING:
    # Annotations only: the review package is imported once a chat needs it.
    from acp_nvim.review import LineEdit

_APPLY = "require('acp.host').apply(...)"
_READ = "return require('acp.buffers').read(...)"
_CONTEXT = "return require('acp.editor_info').{}(...)"
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
        # Touched only on the pynvim thread (events and reads both run there).
        self.mirrors = BufferMirrors()
        # Language server requests waiting for Lua's answer, by id (worker thread).
        self._lsp: dict[int, tuple[anyio.Event, dict[str, Any]]] = {}
        self._lsp_ids = itertools.count(1)

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

    def emit(self, event: Event, data: dict[str, Any]) -> None:
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

    def baseline(self, chat: int, data: dict[str, Any]) -> None:
        self._pending.append(["baseline", chat, data])
        self._wake.set()

    async def read_buffer(
        self, path: str, *, load: bool = False, check: bool = False
    ) -> BufferState | None:
        return await self._on_nvim(self._read_buffer, path, load, check)  # type: ignore[no-any-return]

    def _read_buffer(self, path: str, load: bool, check: bool) -> BufferState | None:
        """On the pynvim thread: the buffer's state, its text from our copy when current.

        A buffer read for the first time is attached first and then read, so
        every change after the read reaches its copy (see :mod:`.mirror`).
        """
        mirrors = self.mirrors
        known = mirrors.known(path)
        want = "text" if known else "meta"
        moved = False
        for _ in range(4):
            raw = self._nvim.exec_lua(_READ, path, load, want, known, check)
            if not raw:
                return None
            # Only the first call checks the file: what it found holds for the retries.
            moved, check = moved or bool(raw.get("moved")), False
            buf, tick = int(raw["buf"]), int(raw["tick"])
            state = (raw["eol"], bool(raw["final_newline"]), bool(raw["modified"]), tick)
            readonly = bool(raw["readonly"])
            if not mirrors.is_attached(buf) and self._attach(buf):
                mirrors.mark_attached(buf)
                want, known = "text", None
                continue
            text: str | None
            if "lines" in raw:
                text = "\n".join(nul_bytes(line) for line in raw["lines"])
                mirrors.seed(path, buf, tick, text)
            elif "text" not in raw:
                text = mirrors.text(buf, tick)
            elif raw["text"].count("\n") == raw["count"] - 1:
                text = raw["text"]
                mirrors.seed(path, buf, tick, text)
            else:  # a NUL byte read as "\n" inside a line: only the list of lines is exact
                want = "lines"
                continue
            if text is not None:
                return BufferState(None, *state, joined=text, readonly=readonly, moved=moved)
            want, known = "text", None
        raise EditorError(f"{path}: the buffer kept changing while it was read")

    def _attach(self, buf: int) -> bool:
        """Have Neovim send ``buf``'s changes to this channel (no callbacks run in Neovim)."""
        return bool(self._nvim.request("nvim_buf_attach", buf, False, {}))

    def buffer_event(self, name: str, args: list[Any]) -> None:
        """An ``nvim_buf_*_event`` for a buffer we attached to (on the pynvim thread)."""
        buf = args[0].handle if isinstance(args[0], pynvim.api.Buffer) else int(args[0])
        if name == "nvim_buf_lines_event":
            self.mirrors.on_lines(buf, args[1], args[2], args[3], args[4])
        elif name == "nvim_buf_changedtick_event":
            self.mirrors.on_changedtick(buf, args[1])
        elif name == "nvim_buf_detach_event":
            self.mirrors.on_detach(buf)

    async def edit_buffer(
        self,
        path: str,
        tick: int,
        edits: list[LineEdit],
        *,
        save: bool,
        disk_changed: bool = False,
    ) -> int | None:
        plain = [[e.start, e.end, e.lines] for e in edits]
        result = await self.call_lua(
            "return require('acp.buffers').edit(...)", path, tick, plain, save, disk_changed
        )
        return None if result is False or result is None else int(result)

    async def reload_buffers(self, paths: list[str]) -> list[str]:
        if not paths:
            return []
        return list(await self.call_lua("return require('acp.buffers').reload(...)", paths))

    async def delete_buffer(self, path: str, tick: int) -> bool:
        return bool(await self.call_lua("return require('acp.buffers').delete(...)", path, tick))

    async def open_terminal(
        self, key: str, cmd: str | list[str], cwd: str, env: dict[str, str], *, show: bool = False
    ) -> int:
        create = "return require('acp.terminal').create(...)"
        return int(await self.call_lua(create, key, cmd, cwd, env, show))

    async def write_terminal(self, key: str, text: str, *, reset: bool = False) -> None:
        await self.call_lua("require('acp.terminal').write(...)", key, text, reset)

    async def stop_terminals(self, keys: list[str], *, wipe: bool = False) -> None:
        await self.call_lua("require('acp.terminal').stop(...)", keys, wipe)

    async def list_buffers(self) -> list[dict[str, Any]]:
        return list(await self.call_lua(_CONTEXT.format("buffers")))

    async def selection(self) -> dict[str, Any] | None:
        return await self.call_lua(_CONTEXT.format("selection")) or None

    async def diagnostics(self, path: str | None) -> list[dict[str, Any]]:
        return list(await self.call_lua(_CONTEXT.format("diagnostics"), path))

    async def lsp(
        self,
        request: LspRequest,
        path: str | None,
        position: tuple[int, int] | None,
        query: str,
        timeout: float,
    ) -> dict[str, Any]:
        # Lua sends the requests and returns at once; the answer comes back as a
        # notification (lsp_answer), so Neovim never blocks on a language server.
        key = next(self._lsp_ids)
        done, answer = self._lsp[key] = (anyio.Event(), {})
        try:
            pos = list(position) if position is not None else None
            servers = await self.call_lua(_CONTEXT.format("lsp"), key, request, path, pos, query)
            result: dict[str, Any] = {"servers": list(servers or []), "errors": []}
            if not servers:
                return result
            with anyio.move_on_after(timeout):
                await done.wait()
            if not done.is_set():
                await self.call_lua(_CONTEXT.format("lsp_cancel"), key)
                result["timed_out"] = True
            return {**result, **answer}
        finally:
            del self._lsp[key]

    def lsp_answer(self, answer: dict[str, Any]) -> None:
        """Lua's answer to :meth:`lsp` (on the worker thread); a late one is dropped."""
        waiting = self._lsp.get(int(answer.get("id", 0)))
        if waiting is not None:
            done, result = waiting
            result.update({k: answer.get(k) or [] for k in ("items", "hover", "errors")})
            done.set()

    async def show_file(self, path: str, line: int | None) -> None:
        await self.call_lua("require('acp.tools').show(...)", path, line, False)

    async def watch_buffers(self) -> None:
        await self.call_lua(_CONTEXT.format("watch"))

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
        return await self._on_nvim(self._nvim.exec_lua, code, *args)

    async def _on_nvim(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the pynvim thread (where it may make requests); await it."""
        self.flush()
        done = anyio.Event()
        token = anyio.lowlevel.current_token()
        outcome: dict[str, Any] = {}

        def run() -> None:  # on the pynvim thread
            try:
                outcome["value"] = fn(*args)
            except (pynvim.NvimError, EditorError) as err:
                outcome["error"] = str(err)
            finally:
                anyio.from_thread.run_sync(done.set, token=token)

        self._nvim.async_call(run)
        await done.wait()
        if "error" in outcome:
            raise EditorError(outcome["error"])
        return outcome.get("value")
