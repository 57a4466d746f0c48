"""The Neovim implementation of the Editor port.

What the worker queues for Lua (render ops, events, notices, the review state)
goes through a :class:`~acp_nvim.nvim.batcher.Batcher`, whose methods the editor
hands out as its own; the rest are calls into Lua, each after what was queued
before it, and buffer reads served from our copies (:mod:`.mirror`).
"""

from __future__ import annotations

__all__ = ["NvimEditor"]

import itertools
from typing import TYPE_CHECKING, Any

import anyio
import pynvim

from acp_nvim.client.editor import BufferState, EditorError, LspRequest, WriteError
from acp_nvim.nvim.batcher import BATCH_BUDGET, Batcher
from acp_nvim.nvim.mirror import BufferMirrors, nul_bytes

if TYPE_CHECKING:
    # Annotations only: the review package is imported once a chat needs it.
    from acp_nvim.review import LineEdit

_READ = "return require('acp.editor.buffers').read(...)"
_BUFFERS = "return require('acp.editor.buffers').{}(...)"
_CONTEXT = "return require('acp.editor.info').{}(...)"
# Python's None reaches Lua as vim.NIL, which `x or default` takes for a value: the
# arguments of call_lua that are None are passed as nil, an optional one left out.
_NIL_ARGS = (
    "local n, args = select('#', ...), { ... } "
    "for i = 1, n do if args[i] == vim.NIL then args[i] = nil end end "
    "return (function(...)\n",
    "\nend)(unpack(args, 1, n))",
)


class NvimEditor:
    """The Editor port on Neovim: queues through its :class:`Batcher`, calls into Lua."""

    def __init__(self, nvim: pynvim.Nvim, budget: int = BATCH_BUDGET) -> None:
        self._nvim = nvim
        batcher = self._batcher = Batcher(nvim, budget)
        # The queueing half of the port is the batcher's own bound methods, not methods
        # here that call them: no call more on the stream's path (render, room).
        self.render = batcher.render
        self.emit = batcher.emit
        self.notify = batcher.notify
        self.review = batcher.review
        self.baseline = batcher.baseline
        self.reply = batcher.reply
        self.hold = batcher.hold
        self.drawn = batcher.drawn
        self.room = batcher.room
        # Touched only on the pynvim thread (events and reads both run there).
        self.mirrors = BufferMirrors()
        # Language server requests waiting for Lua's answer, by id (worker thread).
        self._lsp: dict[int, tuple[anyio.Event, dict[str, Any]]] = {}
        self._lsp_ids = itertools.count(1)
        # Set when the command-line window closes, for who waits to make a terminal.
        self._cmdwin_closed: anyio.Event | None = None

    async def read_buffer(
        self, path: str, *, load: bool = False, check: bool = False
    ) -> BufferState | None:
        return await self._batcher.after_queued(self._read_buffer, path, load, check)  # type: ignore[no-any-return]

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
            if "error" in raw:  # the buffer could not be loaded
                raise EditorError(f"cannot load {path}: {raw['error']}")
            # Only the first call checks the file: what it found holds for the retries.
            moved, check = moved or bool(raw.get("moved")), False
            buf, tick = int(raw["buf"]), int(raw["tick"])
            state = (raw["eol"], bool(raw["final_newline"]), bool(raw["modified"]), tick)
            readonly, bom, empty = (bool(raw.get(key)) for key in ("readonly", "bomb", "empty"))
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
                return BufferState(
                    None, *state, joined=text, readonly=readonly, moved=moved, bom=bom, empty=empty
                )
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
        disk_before: tuple[int, int] | None = None,
    ) -> int | None:
        plain = [[e.start, e.end, e.lines] for e in edits]
        # Seconds and nanoseconds apart: Lua's numbers hold 53 bits, mtime_ns 61.
        before = None
        if disk_before is not None:
            size, mtime_ns = disk_before
            before = [size, *divmod(mtime_ns, 1_000_000_000)]
        result = await self.call_lua(
            _BUFFERS.format("edit"), path, tick, plain, save, disk_changed, before,
        )  # fmt: skip
        if isinstance(result, dict):
            raise WriteError(str(result.get("error")))
        return None if result is False or result is None else int(result)

    async def reload_buffers(self, paths: list[str]) -> None:
        if paths:
            await self.call_lua("require('acp.editor.buffers').reload(...)", paths)

    async def delete_buffer(self, path: str, tick: int) -> bool:
        return bool(await self.call_lua(_BUFFERS.format("delete"), path, tick))

    async def mark_saved(self, path: str, saved: bool) -> None:
        await self.call_lua(_BUFFERS.format("mark_saved"), path, saved)

    async def drop_buffers_under(self, directory: str) -> list[str]:
        return list(await self.call_lua(_BUFFERS.format("drop_under"), directory) or [])

    async def open_terminal(
        self, key: str, cmd: str | list[str], cwd: str, env: dict[str, str], *, chat: int,
        show: bool = False,
    ) -> int | None:  # fmt: skip
        create = "return require('acp.editor.terminal').create(...)"
        pid = await self.call_lua(create, key, cmd, cwd, env, show, chat)
        return None if pid is None else int(pid)

    async def terminal_allowed(self) -> None:
        # Made before asking: the window may close before Lua's answer is read.
        closed = self._cmdwin_closed = self._cmdwin_closed or anyio.Event()
        if not await self.call_lua("return require('acp.editor.terminal').allowed()"):
            await closed.wait()

    def cmdwin_closed(self) -> None:
        """Lua's word that the command-line window closed (worker thread)."""
        if self._cmdwin_closed is not None:
            self._cmdwin_closed.set()
            self._cmdwin_closed = None

    async def write_terminal(self, key: str, text: str, *, chat: int, reset: bool = False) -> None:
        await self.call_lua("require('acp.editor.terminal').write(...)", key, text, reset, chat)

    async def stop_terminals(self, keys: list[str]) -> None:
        await self.call_lua("require('acp.editor.terminal').stop(...)", keys, False)

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

    async def show_file(self, path: str, line: int | None) -> int | None:
        return _line_shown(
            await self.call_lua("return require('acp.editor.windows').follow(...)", path, line)
        )

    async def watch_buffers(self) -> None:
        await self.call_lua(_CONTEXT.format("watch"))

    async def call_lua(self, code: str, *args: Any) -> Any:
        """Run Lua ``code`` (``...`` are ``args``) on Neovim's main loop; await its result.

        Pending render ops are flushed first, so Lua sees the transcript as the
        core last described it (unless the command-line window holds them back:
        acp.host.apply). One call is atomic from Neovim's point of view:
        a read-modify-write of a buffer must be ONE such call. An argument that is
        None is nil in Lua (not vim.NIL).

        Raises:
            EditorError: the Lua code raised.
        """
        if any(arg is None for arg in args):
            head, tail = _NIL_ARGS
            code = head + code + tail
        return await self._batcher.after_queued(self._nvim.exec_lua, code, *args)


def _line_shown(answer: dict[str, Any]) -> int | None:
    """Lua's windows.follow answer: the line shown, None when shown later.

    Raises:
        EditorError: it cannot be shown, saying why.
    """
    if answer.get("failed"):
        raise EditorError(str(answer["failed"]))
    return int(answer["line"]) if "line" in answer else None
