"""Turns model items into transcript render ops (markdown lines).

Each item of the session is one block with a stable id; Lua keeps one extmark
per block, so a redraw touches only that block and streaming touches only the
last line. Nothing here knows a protocol version.
"""

from __future__ import annotations

__all__ = [
    "append_op",
    "message_op",
    "notice_op",
    "plan_op",
    "status_op",
    "tool_call_op",
]

from typing import Any

from acp_nvim.client.editor import RenderOp
from acp_nvim.client.model import DiffPart, Message, PlanEntry, TerminalPart, TextPart, ToolCall
from acp_nvim.review import format_unified

_HEADERS = {"user": "## You", "agent": "## Agent", "thought": "### Thinking"}
# Thoughts are a markdown quote: distinct even without our highlights, foldable.
_PREFIXES = {"user": "", "agent": "", "thought": "> "}
_PLAN_MARKS = {"completed": "[x]", "in_progress": "[~]"}


def message_op(message: Message) -> RenderOp:
    """The whole block of a message (on creation or replacement)."""
    prefix = _PREFIXES[message.role]
    body = [prefix + line for line in message.text.split("\n")]
    return {
        "op": "block",
        "id": message.id,
        "kind": message.role,
        "lines": [_HEADERS[message.role], *body],
        "prefix": prefix,
    }


def append_op(block_id: str, text: str) -> RenderOp:
    """Stream ``text`` onto the end of a block; Lua applies the block's prefix."""
    return {"op": "append", "id": block_id, "text": text}


def tool_call_op(call: ToolCall) -> RenderOp:
    """A tool call block: title, kind and status, content, locations."""
    lines = [f"#### {call.title or call.kind}", f"`{call.kind}` · {call.status}"]
    for part in call.content:
        lines.extend(_content_lines(part))
    for location in call.locations:
        suffix = f":{location.line}" if location.line else ""
        lines.append(f"→ {location.path}{suffix}")
    return {"op": "block", "id": call.id, "kind": "tool", "lines": lines, "status": call.status}


def _content_lines(part: TextPart | DiffPart | TerminalPart) -> list[str]:
    if isinstance(part, TextPart):
        return part.text.split("\n")
    if isinstance(part, DiffPart):
        diff = format_unified(part.path, part.old_text or "", part.new_text)
        return ["```diff", *diff.splitlines(), "```"]
    return [f"[terminal {part.terminal_id}]"]


def plan_op(plan_id: str, entries: list[PlanEntry]) -> RenderOp:
    lines = ["### Plan"]
    lines.extend(f"- {_PLAN_MARKS.get(e.status, '[ ]')} {e.content}" for e in entries)
    return {"op": "block", "id": plan_id, "kind": "plan", "lines": lines}


def notice_op(block_id: str, kind: str, lines: list[str]) -> RenderOp:
    """A line or two from the client itself: turn end, errors, information."""
    return {"op": "block", "id": block_id, "kind": kind, "lines": lines}


def status_op(**fields: Any) -> RenderOp:
    return {"op": "status", **fields}
