"""What the history keeps of one live chat: its blocks' order, which changed.

The chat tells its :class:`ChatRecord` of every op it draws (``Chat.record``); the
record only notes the block as changed (a few dict operations on the stream's
path), and reads the model when the history takes a batch, at most every
``FLUSH_SECONDS`` and at each turn's end.
"""

from __future__ import annotations

__all__ = ["ChatRecord"]

import time
from collections.abc import Callable, Sequence
from typing import Any

from acp_nvim.client.editor import RenderOp
from acp_nvim.client.history._blocks import (
    NOTICES,
    attachment_data,
    notice_block,
    review_of,
    stored,
)
from acp_nvim.client.history._store import ChatRow, StoredBlock
from acp_nvim.client.history._writer import Target
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import Attachment


class ChatRecord:
    """The history's side of one chat (its ``record``).

    ``target`` is where it is written (None: this chat is not kept). ``base``: the
    blocks shown before the chat's own (a reopened chat's stored transcript, or
    the conversation handed over to it), with the turns they hold.
    """

    def __init__(
        self, chat: Chat, cwd: str, target: Target | None, wake: Callable[[bool], None]
    ) -> None:
        self.chat = chat
        self.cwd = cwd
        self.target = target
        self.base: list[StoredBlock] = []
        self.base_turns = 0
        self.base_written = True  # a handed-over base is written with the first batch
        self.created_at = time.time()
        self._wake = wake
        self._seqs: dict[str, int] = {}
        self._turns: dict[str, int] = {}
        self._next = 0
        self._dirty: dict[str, None] = {}  # keys, in the order they changed first
        self._notices: dict[str, tuple[str, list[str], dict[str, Any] | None]] = {}
        self._extra: dict[str, dict[str, Any]] = {}
        self._facts = False
        self._first_prompt: str | None = None
        self._turn_ends: dict[str, int] = {}  # turn notices: the chat's own turn number

    def __repr__(self) -> str:
        where = self.target.id if self.target is not None else "not kept"
        return f"<ChatRecord chat {self.chat.id} → {where}, {len(self._seqs)} blocks>"

    def start_with(self, blocks: Sequence[StoredBlock], turns: int, *, written: bool) -> None:
        """The chat goes on from ``blocks`` (``written``: they are stored already)."""
        self.base = list(blocks)
        self.base_turns = turns
        self.base_written = written
        self._next = max((b.seq for b in blocks), default=-1) + 1
        if not written:
            self.base = [_renumbered(b, seq) for seq, b in enumerate(blocks)]
            self._facts = True
            self._wake(False)
        for block in blocks:
            if block.kind == "user" and self._first_prompt is None:
                self._first_prompt = block.text

    # -- told by the chat (on the worker's loop) ------------------------------------------

    def drawn(self, op: RenderOp) -> None:
        if op["op"] == "status":
            self._facts = True
            self._wake(False)
            return
        if op["op"] != "block" and op["op"] != "append":
            return
        key = op["id"]
        if key not in self._seqs:
            self._seqs[key] = self._next
            self._next += 1
            self._turns[key] = self.base_turns + self.chat.turn
        kind = op["kind"] if op["op"] == "block" else None
        if op["op"] == "block" and kind in NOTICES and "start" not in op:
            data = None
            if kind == "turn":
                session = self.chat.session
                data = {"stop_reason": session.stop_reason, "usage": session.usage}
                self._turn_ends[key] = self.chat.turn
            self._notices[key] = (kind, op["lines"], data)
        self._dirty[key] = None
        self._wake(kind == "turn")

    def prompted(self, message_id: str, text: str, attachments: Sequence[Attachment]) -> None:
        if self._first_prompt is None:
            self._first_prompt = text
        if attachments:
            self._extra["#message:" + message_id] = {"attachments": attachment_data(attachments)}

    def reviewed(self) -> None:
        """The user decided on the agent's changes: each turn's end keeps the review's
        state of that turn's files."""
        for key in self._turn_ends:
            self._dirty[key] = None
        self._wake(False)

    # -- read by the history ----------------------------------------------------------------

    @property
    def changed(self) -> bool:
        return bool(self._dirty) or self._facts

    def take(self) -> tuple[list[StoredBlock], dict[str, Any]]:
        """The blocks changed since the last take, and the chat's facts."""
        blocks = [] if self.base_written else list(self.base)
        self.base_written = True
        blocks += [b for key in self._dirty if (b := self._block(key)) is not None]
        self._dirty.clear()
        self._facts = False
        return blocks, self.facts()

    def facts(self) -> dict[str, Any]:
        session = self.chat.session
        first = (self._first_prompt or "").strip().split("\n", 1)[0][:80]
        return {
            "title": session.title or first or None,
            "session_id": session.session_id or None,
            "protocol_version": self.chat.protocol_version,
            "turns": self.base_turns + self.chat.turn,
        }

    def blocks(self) -> list[StoredBlock]:
        """The whole transcript as it is now: the base, then the chat's own blocks."""
        own = (self._block(key) for key in self._seqs)
        return [*self.base, *(b for b in own if b is not None)]

    def row(self) -> ChatRow:
        """The chat's facts as a stored chat's (for Markdown)."""
        target = self.target
        facts = self.facts()
        return ChatRow(
            target.id if target is not None and target.id is not None else 0,
            self.chat.agent,
            self.cwd,
            self.created_at,
            time.time(),
            facts["turns"],
            facts["title"],
            session_id=facts["session_id"],
            protocol_version=facts["protocol_version"],
        )

    def _block(self, key: str) -> StoredBlock | None:
        seq, turn = self._seqs[key], self._turns[key]
        notice = self._notices.get(key)
        if notice is not None:
            data = notice[2]
            if key in self._turn_ends and self.chat.changes is not None:
                data = {**(data or {}), "review": review_of(self.chat.changes.summary(),
                                                            self._turn_ends[key])}  # fmt: skip
            return notice_block(key, notice[0], notice[1], seq, turn, data)
        return stored(key, self.chat.session, seq, turn, self._extra.get(key))


def _renumbered(block: StoredBlock, seq: int) -> StoredBlock:
    return StoredBlock(seq, block.key, block.turn, block.kind, block.text, block.data)
