"""ACP v1 ``session/update`` → model patches.

v1 has no message ids (consecutive chunks of one role form a message), one
plan per turn, and ``tool_call`` / ``tool_call_update`` that real agents mix
freely (the same ``tool_call`` twice, an update before its create): both are
applied as one upsert.
"""

from __future__ import annotations

__all__ = ["apply_update", "apply_updates", "content_text"]

from collections.abc import Sequence
from typing import Any

from acp_nvim.client.chat import Chat, Chunk
from acp_nvim.client.model import (
    ContentPart,
    DiffPart,
    Location,
    PlanEntry,
    Role,
    TerminalPart,
    TextPart,
    ToolCallPatch,
)
from acp_nvim.protocol import schema_v1 as v1
from acp_nvim.protocol.unknown import Unknown

# The streamed kinds: consecutive chunks of one message are applied as one.
_CHUNK_ROLES: dict[type, Role] = {
    v1.SessionUpdateAgentMessageChunk: "agent",
    v1.SessionUpdateAgentThoughtChunk: "thought",
    # Replayed history (session/load) or an agent echo of the prompt.
    v1.SessionUpdateUserMessageChunk: "user",
}


def apply_update(chat: Chat, update: Any) -> None:
    """Apply one ``SessionNotification.update`` to the chat."""
    apply_updates(chat, [update])


def apply_updates(chat: Chat, updates: Sequence[Any]) -> None:
    """Apply consecutive updates of one session, in order (see :meth:`Chat.on_updates`)."""
    chat.on_updates(updates, _chunk, lambda update: _apply_other(chat, update))


def _chunk(update: Any) -> Chunk | None:
    role = _CHUNK_ROLES.get(type(update))
    return None if role is None else (role, update.message_id, content_text(update.content))


def _apply_other(chat: Chat, update: Any) -> None:
    match update:
        case v1.SessionUpdateToolCall() | v1.SessionUpdateToolCallUpdate():
            chat.on_tool_call(tool_call_patch(update))
        case v1.SessionUpdatePlan(entries=entries):
            chat.on_plan(None, [PlanEntry(e.content, e.status, e.priority) for e in entries])
        case v1.SessionUpdateAvailableCommandsUpdate(available_commands=commands):
            listed = [{"name": c.name, "description": c.description} for c in commands]
            chat.on_info(commands=listed)
        case v1.SessionUpdateCurrentModeUpdate(current_mode_id=mode):
            chat.on_info(mode=mode)
        case v1.SessionUpdateSessionInfoUpdate(title=title):
            chat.on_info(title=title)
        case v1.SessionUpdateUsageUpdate(used=used, size=size):
            chat.on_info(usage={"used": used, "size": size})
        case v1.SessionUpdateConfigOptionUpdate():
            chat.on_info(config_changed=True)
        case Unknown(raw=raw):
            # Newer agents may send updates this version doesn't know: never a crash.
            chat.on_info(unknown_update=str(raw.get("sessionUpdate", "?")))
        case _:
            pass


def tool_call_patch(update: Any) -> ToolCallPatch:
    """A ``tool_call`` sets what it carries; an update only its non-null fields.

    Also used for the ``toolCall`` of a permission request.
    """
    patch = ToolCallPatch(update.tool_call_id)
    if update.title is not None:
        patch.title = update.title
    if update.kind is not None:
        patch.kind = update.kind
    if update.status is not None:
        patch.status = update.status
    if update.content is not None:
        patch.content = [_content_part(item) for item in update.content]
    if update.locations is not None:
        patch.locations = [Location(loc.path, loc.line) for loc in update.locations]
    if update.raw_input is not None:
        patch.raw_input = update.raw_input
    return patch


def _content_part(item: Any) -> ContentPart:
    match item:
        case v1.ToolCallContentDiff(path=path, old_text=old_text, new_text=new_text):
            return DiffPart(path, old_text, new_text)
        case v1.ToolCallContentTerminal(terminal_id=terminal_id):
            return TerminalPart(terminal_id)
        case v1.ToolCallContentContent(content=content):
            return TextPart(content_text(content))
        case _:
            return TextPart(content_text(item))


def content_text(block: Any) -> str:
    """Markdown for one content block; non-text content is described, not dropped."""
    match block:
        case v1.ContentBlockText(text=text):
            return str(text)
        case v1.ContentBlockResourceLink(uri=uri, name=name):
            return f"[{name or uri}]({uri})"
        case v1.ContentBlockResource(resource=resource):
            return f"[resource {getattr(resource, 'uri', '?')}]"
        case v1.ContentBlockImage():
            return "[image]"
        case v1.ContentBlockAudio():
            return "[audio]"
        case Unknown(raw=raw):
            return f"[{raw.get('type', 'unknown')} content]"
        case _:
            return f"[{type(block).__name__}]"
