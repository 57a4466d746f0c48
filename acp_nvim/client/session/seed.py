"""The first prompt of a seeded session: the conversation so far, then the prompt.

A session that does not know a conversation is told it with its first prompt: a
chat rewound where the agent cannot fork at a message, a branch picked again after
the agent lost its session, a reopened chat whose agent cannot load its session, a
chat restarted whose agent cannot resume its session, a chat handed over to another
agent. The conversation, as Markdown, goes as an embedded resource where the agent
takes embedded context, else as text, before what the user typed. ``Chat.seed``
holds it until ``sessions.prompt_blocks`` takes it.

Pure: :func:`conversation` reads the user's prompts and the agent's replies out of
the session model, :func:`markdown` writes them (the history writes its stored
transcript itself: ``history.markdown``); ``sessions.seed_blocks`` (client/agent)
makes the content blocks of the version spoken. Thoughts, tool calls and plans are
left out of :func:`conversation`: what was said is what the user can check; the
agent reads the files again.

Example::

    chat.seed = markdown(conversation(chat.session))
    # the next Sessions.prompt(chat, ...) sends it ahead of the text, once
"""

from __future__ import annotations

__all__ = ["SEED_URI", "Exchange", "conversation", "markdown"]

from collections.abc import Sequence

import msgspec

from acp_nvim.client.session.model import Session
from acp_nvim.client.session.prose import nested

# The seed's embedded resource: no file, a conversation this client kept.
SEED_URI = "acp://conversation.md"


class Exchange(msgspec.Struct, frozen=True):
    """One turn as it was said: the user's prompt and the agent's reply ("" where
    either was not said, e.g. a reply the agent gave before any prompt)."""

    prompt: str
    reply: str


def conversation(session: Session, end: int | None = None) -> list[Exchange]:
    """The exchanges among ``session.items[:end]`` (all of them when ``end`` is None),
    in order: each user message begins one, the agent's messages after it are its
    reply (joined by a blank line). Replayed history counts like the chat's own turns.
    """
    exchanges: list[tuple[str, list[str]]] = []
    for kind, key in session.items[:end]:
        message = session.messages.get(key) if kind == "message" else None
        if message is None or message.role == "thought":
            continue
        if message.role == "user":
            exchanges.append((message.text, []))
        elif exchanges:
            exchanges[-1][1].append(message.text)
        else:
            exchanges.append(("", [message.text]))
    return [Exchange(prompt, "\n\n".join(replies)) for prompt, replies in exchanges]


def markdown(exchanges: Sequence[Exchange]) -> str | None:
    """``exchanges`` as the Markdown a seed carries; None when nothing was said (a
    rewind to before the first turn begins afresh)."""
    parts = []
    for exchange in exchanges:
        # Their headings below ours: a prompt's "## x" would read as who speaks.
        for header, said in (("## You", exchange.prompt), ("## Agent", exchange.reply)):
            if said.strip():
                parts += [header, "\n".join(nested(said.strip().split("\n"), 2))]
    return "\n\n".join(parts) + "\n" if parts else None
