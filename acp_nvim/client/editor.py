"""The Editor port: everything the protocol core asks of the editor.

The core calls these methods from its event loop. The Neovim implementation
(:mod:`acp_nvim.nvim.editor`) batches them into one ordered stream per flush,
so a ``render`` followed by an ``emit`` reaches the user in that order.
:class:`RecordingEditor` is the in-memory fake the core tests use.
"""

from __future__ import annotations

__all__ = ["Editor", "EditorError", "RecordingEditor", "RenderOp"]

from typing import Any, Protocol

# One instruction for the transcript, as plain data (it crosses msgpack to Lua):
#   {"op": "block", "id", "kind", "lines", "prefix"?}  create or replace a block
#   {"op": "append", "id", "text"}                     stream text onto a block
#   {"op": "status", ...fields}                        chat header / status()
RenderOp = dict[str, Any]


class EditorError(Exception):
    """The editor could not do what was asked (a Lua error, a vanished buffer)."""


class Editor(Protocol):
    """What the core needs from an editor. Methods must not block."""

    def render(self, chat: int, ops: list[RenderOp]) -> None:
        """Queue transcript changes for chat ``chat``."""

    def emit(self, event: str, data: dict[str, Any]) -> None:
        """Fire a public event (a ``User`` autocmd in Neovim)."""

    def notify(self, message: str, level: str = "error") -> None:
        """Tell the user one short line (``acp:`` prefixed by the editor)."""


class RecordingEditor:
    """An Editor that records everything, for tests and scripted use."""

    def __init__(self) -> None:
        self.ops: dict[int, list[RenderOp]] = {}
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.notices: list[tuple[str, str]] = []

    def render(self, chat: int, ops: list[RenderOp]) -> None:
        self.ops.setdefault(chat, []).extend(ops)

    def emit(self, event: str, data: dict[str, Any]) -> None:
        self.events.append((event, data))

    def notify(self, message: str, level: str = "error") -> None:
        self.notices.append((level, message))

    def transcript(self, chat: int) -> dict[str, list[str]]:
        """Replay the render ops into block id -> lines (what Lua would show)."""
        blocks: dict[str, list[str]] = {}
        prefixes: dict[str, str] = {}
        for op in self.ops.get(chat, []):
            if op["op"] == "block":
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
        return status
