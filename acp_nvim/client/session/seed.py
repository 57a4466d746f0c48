"""The first prompt of a seeded session: the conversation so far, then the prompt.

A session that does not know a conversation (a reopened chat whose agent cannot
load its session, a chat handed over to another agent) is told it with its first
prompt: the conversation as Markdown, as an embedded resource where the agent
takes embedded context, else as text, before what the user typed.
"""

from __future__ import annotations

__all__ = ["SEED_URI", "seed_blocks"]

from types import ModuleType
from typing import Any

SEED_URI = "acp://conversation.md"
_INTRO = (
    "This conversation began earlier, with another agent or in a session you no "
    "longer have. It is below, as Markdown; the user's next message follows it."
)


def seed_blocks(conversation: str, schema: ModuleType, *, embed: bool) -> list[Any]:
    """Content blocks (of ``schema``, the version's generated types) carrying
    ``conversation`` (Markdown), to put before the prompt's own blocks."""
    if embed:
        resource = schema.TextResourceContents(
            uri=SEED_URI, text=conversation, mime_type="text/markdown"
        )
        return [
            schema.ContentBlockText(text=_INTRO),
            schema.ContentBlockResource(resource=resource),
        ]
    text = f"{_INTRO}\n\n<conversation>\n{conversation}\n</conversation>"
    return [schema.ContentBlockText(text=text)]
