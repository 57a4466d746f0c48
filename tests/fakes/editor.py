"""An in-memory `Editor` that records everything: the fake the core tests use.

It records render ops, events, notices, reviews and baselines; models buffers
the way Neovim holds them (a changedtick, unsaved edits, a check against the file
on disk), saved with plain file writes; records terminals, whose output and exit
a test plays itself; and answers the MCP tools' questions from what a test set.
``make lint`` type-checks this file against the port (the assignment at its end).
"""

from __future__ import annotations

__all__ = ["RecordingEditor"]

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from acp_nvim.client.editor import BufferState, Editor, EditorError, Event, LspRequest, RenderOp

if TYPE_CHECKING:
    from acp_nvim.client.services.terminals import Terminals
    from acp_nvim.review import LineEdit


@dataclass
class _FakeBuffer:
    state: BufferState
    windows: int = 0
    undo: list[list[str]] = field(default_factory=list)
    # (size, mtime_ns) of the file when last read or written, as Neovim keeps it.
    seen: tuple[int, int] | None = None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


class RecordingEditor:
    """An Editor that records everything, for tests and scripted use."""

    def __init__(self) -> None:
        self.ops: dict[int, list[RenderOp]] = {}
        self.events: list[tuple[Event, dict[str, Any]]] = []
        self.notices: list[tuple[str, str]] = []
        self.reviews: dict[int, dict[str, Any]] = {}
        self.baselines: list[tuple[int, dict[str, Any]]] = []
        self.replies: dict[int, tuple[Any, str | None]] = {}  # by token
        self.buffers: dict[str, _FakeBuffer] = {}
        # Terminal buffers by key: {"cmd", "cwd", "env", "shown", "chat", "data", "stopped"}.
        self.terminals: dict[str, dict[str, Any]] = {}
        # Set by a test: no terminal is made until it is set (Neovim's command-line
        # window open); asked meanwhile, by key.
        self.terminals_after: anyio.Event | None = None
        self.terminals_refused: list[str] = []
        self._opened: anyio.Event | None = None  # set by the next open_terminal
        # What the MCP tools read: set by the tests.
        self.selected: dict[str, Any] | None = None
        self.diagnostic_list: list[dict[str, Any]] = []
        self.lsp_answers: dict[str, dict[str, Any]] = {}  # by request
        self.lsp_asked: list[tuple[str, str | None, tuple[int, int] | None, str]] = []
        self.shown: list[tuple[str, int | None]] = []
        self.watching = False
        self.held = 0  # holds not released (hold())

    def render(self, chat: int, ops: list[RenderOp]) -> None:
        self.ops.setdefault(chat, []).extend(ops)

    def emit(self, event: Event, data: dict[str, Any]) -> None:
        self.events.append((event, data))

    def notify(self, message: str, level: str = "error") -> None:
        self.notices.append((level, message))

    def review(self, chat: int, summary: dict[str, Any]) -> None:
        self.reviews[chat] = summary

    def baseline(self, chat: int, data: dict[str, Any]) -> None:
        self.baselines.append((chat, data))

    def reply(self, token: int, result: Any, error: str | None = None) -> None:
        self.replies[token] = (result, error)

    def hold(self) -> Callable[[], None]:
        """Count the holds not released (``held``); ops are recorded all the same."""
        self.held += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.held -= 1

        return release

    async def drawn(self) -> None:
        """Everything is drawn as soon as it is recorded."""

    async def room(self) -> None:
        """Everything is drawn as soon as it is recorded."""

    # -- buffers: an in-memory model of Neovim's, saved with plain file writes

    def open_buffer(self, path: str, lines: list[str] | None = None, **state: Any) -> BufferState:
        """Load ``path`` into a buffer (from disk unless ``lines`` are given)."""
        if lines is None:
            with open(path, newline="") as f:
                text = f.read()
            eol = "\r\n" if "\r\n" in text else "\n"
            lines = text.split(eol)
            state.setdefault("final_newline", lines[-1] == "" and len(lines) > 1)
            state.setdefault("eol", eol)
            if state["final_newline"]:
                lines.pop()
        # An empty file loads as Neovim's empty buffer: no line at all, shown as one.
        state.setdefault("empty", lines == [""])
        buffer = _FakeBuffer(BufferState(list(lines), **state), seen=_stat(path))
        self.buffers[path] = buffer
        return buffer.state

    def type_in(self, path: str, row: int, line: str) -> None:
        """The user replaces line ``row`` (0-based) without saving."""
        state = self.buffers[path].state
        state.lines[row] = line
        state.modified = True
        state.tick += 1

    async def read_buffer(
        self, path: str, *, load: bool = False, check: bool = False
    ) -> BufferState | None:
        if path not in self.buffers and load:
            if os.path.exists(path):
                self.open_buffer(path)
            else:
                self.open_buffer(path, [""])
        buffer = self.buffers.get(path)
        if buffer is None:
            return None
        moved = check and self._checktime(path)
        s = self.buffers[path].state
        return BufferState(
            list(s.lines), s.eol, s.final_newline, s.modified, s.tick,
            readonly=s.readonly, moved=moved, empty=s.empty,
        )  # fmt: skip

    def _checktime(self, path: str) -> bool:
        """Neovim's check of a buffer against its file (see ``lua/acp/editor/buffers.lua``)."""
        buffer = self.buffers[path]
        now = _stat(path)
        if now is None or now == buffer.seen:
            return False
        if not buffer.state.modified:
            self.open_buffer(path, tick=buffer.state.tick + 1, readonly=buffer.state.readonly)
            return False
        buffer.seen = now
        return True

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
        buffer = self.buffers.get(path)
        if buffer is not None and (disk_changed or (save and not buffer.state.modified)):
            self._checktime(path)
            buffer = self.buffers[path]
        if buffer is None or buffer.state.tick != tick:
            return None
        state = buffer.state
        if edits:
            buffer.undo.append(list(state.lines))
            for edit in edits:
                state.lines[edit.start : edit.end] = edit.lines
            # A buffer left with no lines shows one empty line, as Neovim's does.
            state.empty = not state.lines
            if state.empty:
                state.lines.append("")
            state.modified = True
            state.tick += 1
        if save and (state.modified or not os.path.exists(path)):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", newline="") as f:
                f.write(state.text)
            state.modified = False
            buffer.seen = _stat(path)
        return state.tick

    async def reload_buffers(self, paths: list[str]) -> None:
        for path in paths:
            buffer = self.buffers.get(path)
            if buffer is not None and not buffer.state.modified and os.path.exists(path):
                self.open_buffer(path, tick=buffer.state.tick + 1)

    async def delete_buffer(self, path: str, tick: int) -> bool:
        buffer = self.buffers.get(path)
        if buffer is None or buffer.state.tick != tick:
            return False
        del self.buffers[path]
        return True

    async def mark_saved(self, path: str, saved: bool) -> None:
        buffer = self.buffers.get(path)
        if buffer is not None:
            buffer.state.modified = not saved

    async def drop_buffers_under(self, directory: str) -> list[str]:
        under = [path for path in self.buffers if path.startswith(directory.rstrip("/") + "/")]
        kept = [path for path in under if self.buffers[path].state.modified]
        for path in set(under) - set(kept):
            del self.buffers[path]
        return kept

    # -- terminals: recorded; a test plays the command's output and exit itself

    async def open_terminal(
        self,
        key: str,
        cmd: str | list[str],
        cwd: str,
        env: dict[str, str],
        *,
        chat: int,
        show: bool = False,
    ) -> int | None:
        if isinstance(cmd, list) and not cmd[0]:
            raise EditorError("empty command")
        if self.terminals_after is not None and not self.terminals_after.is_set():
            self.terminals_refused.append(key)
            return None
        self.terminals[key] = {
            "cmd": cmd,
            "cwd": cwd,
            "env": env,
            "shown": show,
            "chat": chat,
            "data": "",
            "stopped": False,
        }
        if self._opened is not None:
            self._opened.set()
            self._opened = None
        return 10_000 + len(self.terminals)

    async def finish_commands(self, terminals: Terminals, output: bytes) -> None:
        """Until cancelled, each command the tools start prints ``output`` and exits
        0 as soon as its terminal is open, as a fast one would in Neovim."""
        done: set[str] = set()
        while True:
            for key in self.terminals.keys() - done:
                done.add(key)
                terminals.feed(key, output, 0)
            self._opened = self._opened or anyio.Event()
            await self._opened.wait()

    async def terminal_allowed(self) -> None:
        if self.terminals_after is not None:
            await self.terminals_after.wait()

    async def write_terminal(self, key: str, text: str, *, chat: int, reset: bool = False) -> None:
        term = self.terminals.setdefault(key, {"chat": chat, "data": "", "stopped": False})
        term["data"] = text if reset else term["data"] + text

    async def stop_terminals(self, keys: list[str]) -> None:
        for key in keys:
            self.terminals[key]["stopped"] = True

    # -- the MCP tools' questions: answered from what the test set

    async def list_buffers(self) -> list[dict[str, Any]]:
        return [
            {
                "path": path,
                "modified": b.state.modified,
                "filetype": os.path.splitext(path)[1].lstrip("."),
                "line_count": len(b.state.lines),
                "visible": b.windows > 0,
                "cursor": [1, 1] if b.windows else None,
            }
            for path, b in self.buffers.items()
        ]

    async def selection(self) -> dict[str, Any] | None:
        return self.selected

    async def diagnostics(self, path: str | None) -> list[dict[str, Any]]:
        return [d for d in self.diagnostic_list if path is None or d["path"] == path]

    async def lsp(
        self,
        request: LspRequest,
        path: str | None,
        position: tuple[int, int] | None,
        query: str,
        timeout: float,
    ) -> dict[str, Any]:
        self.lsp_asked.append((request, path, position, query))
        return self.lsp_answers.get(request, {"servers": [], "errors": []})

    async def show_file(self, path: str, line: int | None) -> int | None:
        self.shown.append((path, line))
        return line or 1

    async def watch_buffers(self) -> None:
        self.watching = True

    def transcript(self, chat: int) -> dict[str, list[str]]:
        """Replay the render ops into block id -> lines (what Lua would show)."""
        blocks: dict[str, list[str]] = {}
        prefixes: dict[str, str] = {}
        for op in self.ops.get(chat, []):
            if op["op"] == "block" and "start" in op:
                blocks[op["id"]][op["start"] : op["end"]] = op["lines"]
            elif op["op"] == "block":
                blocks[op["id"]] = list(op["lines"])
                prefixes[op["id"]] = op.get("prefix", "")
            elif op["op"] == "append":
                lines = blocks[op["id"]]
                first, *rest = op["text"].split("\n")
                lines[-1] += first
                lines.extend(prefixes[op["id"]] + line for line in rest)
        return blocks

    def last_status(self, chat: int) -> dict[str, Any]:
        status: dict[str, Any] = {}
        for op in self.ops.get(chat, []):
            if op["op"] == "status":
                status.update({k: v for k, v in op.items() if k != "op"})
            elif op["op"] == "turn":  # kept in step as lua/acp/chat/init.lua does
                status["turns"] = [*status.get("turns", [])[: op["number"] - 1], op["prompt"]]
                status["branches"] = [op["branch"], *status.get("branches", [])[1:]]
        return status


if TYPE_CHECKING:
    # mypy holds the fake to the port: a method missing here or a signature that
    # differs from Editor's fails `make lint`.
    _port: Editor = RecordingEditor()
