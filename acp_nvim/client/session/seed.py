"""A seeded session: a new session whose first prompt carries an earlier conversation.

An agent can be given a conversation it never had in two ways only: fork a session
that holds it (where the agent offers that), or tell it. This module is the telling,
shared by every way a chat goes on in a session that lacks its history: a rewind
where the agent cannot fork at a message, a branch picked again after the agent
lost its session, a stored chat reopened, a chat handed to another agent.

It is pure: :func:`conversation` reads the user's prompts and the agent's replies
out of the session model, :func:`seed` turns them into the :class:`Seed` that the
protocol adapters put ahead of the first prompt's text (``sessions.prompt_blocks``:
an embedded resource where the agent takes ``embeddedContext``, else a text block).
Thoughts, tool calls and plans are left out: what was said is what the user can
check, and a tool call's output is the agent's to read again from the files.

Example::

    chat.seed = seed(conversation(chat.session, end=turn_start))
    # the next Sessions.prompt(chat, ...) sends it ahead of the text, once
"""

from __future__ import annotations

__all__ = ["SEED_URI", "Exchange", "Seed", "conversation", "seed"]

from collections.abc import Sequence
from dataclasses import dataclass

from acp_nvim.client.session.model import Session

# The resource's name: no file, a conversation this client kept.
SEED_URI = "acp-nvim://conversation"
_INTRO = (
    "This session continues an earlier conversation between the user and you (an AI"
    " agent). Here it is as it was said: the user's prompts and your replies, oldest"
    " first. The files may have changed since. The user's new request follows."
)


@dataclass(frozen=True)
class Exchange:
    """One turn as it was said: the user's prompt and the agent's reply ("" where
    either was not said, e.g. a reply the agent gave before any prompt)."""

    prompt: str
    reply: str


@dataclass(frozen=True)
class Seed:
    """The conversation as the first prompt of a new session carries it: ``text`` is
    markdown, sent as the resource ``uri`` (``mime_type``) or as plain text."""

    text: str
    uri: str = SEED_URI
    mime_type: str = "text/markdown"


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


def seed(exchanges: Sequence[Exchange]) -> Seed | None:
    """The seed for a new session going on after ``exchanges``; None when there is
    nothing to carry (a rewind to before the first turn begins afresh)."""
    said = [e for e in exchanges if e.prompt.strip() or e.reply.strip()]
    if not said:
        return None
    parts = [_INTRO]
    for exchange in said:
        if exchange.prompt.strip():
            parts += ["## User", exchange.prompt.strip()]
        if exchange.reply.strip():
            parts += ["## You (the agent)", exchange.reply.strip()]
    return Seed("\n\n".join(parts) + "\n")
