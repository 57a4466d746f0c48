"""Elicitation: the agent asks the user for a few values (a form) or to open a page.

The question goes to the editor as a render op of the chat (``elicit``); the Lua side
asks field by field and answers with :meth:`Elicitations.answer`. Until then the
agent's request waits. A request whose chat goes away, or that the user dismisses,
is answered ``cancel``; ``decline`` only when the user says no.
"""

from __future__ import annotations

__all__ = ["Answer", "Elicitation", "Elicitations", "Field"]

import itertools
from typing import Literal
from urllib.parse import urlsplit

import anyio
import msgspec

from acp_nvim.client.editor import ElicitField, ElicitOp
from acp_nvim.client.session.chat import Chat

Action = Literal["accept", "decline", "cancel"]
Value = str | int | float | bool | list[str]


class Field(msgspec.Struct):
    """One value a form asks for. ``type`` is string, number, integer, boolean or
    array (several of ``choices``); ``choices`` are ``(value, label)`` pairs."""

    name: str
    type: str
    title: str
    required: bool = False
    description: str | None = None
    default: Value | None = None
    choices: list[tuple[str, str]] | None = None
    minimum: float | None = None
    maximum: float | None = None


def _field(f: Field) -> ElicitField:
    return {
        "name": f.name,
        "type": f.type,
        "title": f.title,
        "required": f.required,
        "description": f.description,
        "default": f.default,
        "choices": f.choices,
        "minimum": f.minimum,
        "maximum": f.maximum,
    }


class Elicitation(msgspec.Struct):
    message: str
    mode: Literal["form", "url"]
    fields: list[Field] = msgspec.field(default_factory=list)
    url: str | None = None
    elicitation_id: str | None = None


class Answer(msgspec.Struct):
    action: Action
    content: dict[str, Value] | None = None


class _Pending(msgspec.Struct, eq=False):
    chat: Chat
    done: anyio.Event = msgspec.field(default_factory=anyio.Event)
    answer: Answer = msgspec.field(default_factory=lambda: Answer("cancel"))
    by_user: bool = False


class Elicitations:
    """Requests of one agent's chats waiting for the user."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._opened: dict[str, Chat] = {}  # accepted url elicitations, by elicitationId
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"<Elicitations {len(self._pending)} pending>"

    async def ask(self, chat: Chat, request: Elicitation) -> Answer:
        """Ask the user in ``chat``; returns once answered (``cancel`` if the chat goes)."""
        request_id = f"elicit-{next(self._ids)}"
        pending = self._pending[request_id] = _Pending(chat)
        op: ElicitOp = {
            "op": "elicit",
            "id": request_id,
            "message": request.message,
            "mode": request.mode,
            "fields": [_field(f) for f in request.fields],
            "url": request.url,
        }
        if request.url is not None:
            op["host"] = urlsplit(request.url).hostname or request.url
        chat.editor.render(chat.id, [op])
        try:
            await pending.done.wait()
        finally:
            del self._pending[request_id]
            if not pending.by_user:  # not asked any more where it still waits to be
                chat.editor.render(chat.id, [{"op": "elicit_gone", "id": request_id}])
        answer = pending.answer
        if answer.action == "accept" and request.elicitation_id is not None:
            self._opened[request.elicitation_id] = chat
        outcome = {"accept": "answered", "decline": "declined", "cancel": "dismissed"}
        chat.info(f"*{chat.agent} asked: {request.message} ({outcome[answer.action]})*")
        return answer

    def answer(self, request_id: str, action: Action, content: dict[str, Value] | None) -> bool:
        """The user's answer; False when the request no longer waits."""
        pending = self._pending.get(request_id)
        if pending is None or pending.done.is_set():
            return False
        pending.answer = Answer(action, content if action == "accept" else None)
        pending.by_user = True
        pending.done.set()
        return True

    def complete(self, elicitation_id: str) -> None:
        """The agent says the page of an accepted url elicitation is done with
        (an unknown or already completed id is ignored, as the protocol asks)."""
        chat = self._opened.pop(elicitation_id, None)
        if chat is not None:
            chat.info(f"*{chat.agent}: the page you opened is done with.*")

    def cancel(self, chat: Chat) -> None:
        """The chat's turn was cancelled or the chat goes: its requests are dismissed."""
        for pending in self._pending.values():
            if pending.chat is chat and not pending.done.is_set():
                pending.done.set()
        for key in [k for k, c in self._opened.items() if c is chat]:
            del self._opened[key]
