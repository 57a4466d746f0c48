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
from acp_nvim.client.history._store import OTHER_BRANCH, SHOWN, ChatRow, StoredBlock
from acp_nvim.client.history._writer import Target
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import Attachment, Session


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
        self._review: dict[str, Any] | None = None  # the review's summary, read once a take
        # The blocks in view, in order, and those a rewind took out (by the key of the
        # turn they follow from), as Lua keeps them (``cut``/``uncut`` ops).
        self._shown: dict[str, None] = {}
        self._cut: dict[str, str] = {}  # block key → its turn's key

    def __repr__(self) -> str:
        where = self.target.id if self.target is not None else "not kept"
        return f"<ChatRecord chat {self.chat.id} → {where}, {len(self._seqs)} blocks>"

    def start_with(self, blocks: Sequence[StoredBlock], turns: int, *, written: bool) -> None:
        """The chat goes on from ``blocks`` (``written``: they are stored already)."""
        # Only the branch in view is shown and goes on (the others stay in the file).
        self.base = [b for b in blocks if b.branch == SHOWN]
        self.base_turns = turns
        self.base_written = written
        self._next = max((b.seq for b in blocks), default=-1) + 1
        if not written:
            self.base = [_renumbered(b, seq) for seq, b in enumerate(self.base)]
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
        if op["op"] == "cut":
            self._take_out([turn["block"] for turn in op["turns"]], [t["key"] for t in op["turns"]])
            return
        if op["op"] == "uncut":
            self._put_back(op["turns"])
            return
        if op["op"] != "block" and op["op"] != "append":
            return
        key = op["id"]
        if key not in self._seqs:
            self._seqs[key] = self._next
            self._next += 1
            self._turns[key] = self.base_turns + self.chat.turn
            self._shown[key] = None
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

    def _take_out(self, blocks: list[str], turns: list[str]) -> None:
        """A rewind took the blocks from ``blocks[0]`` to the end out of view: each
        turn's (begun by its block) is kept apart, written as another branch's."""
        shown = list(self._shown)
        if not blocks or blocks[0] not in self._shown:
            return
        starts = dict(zip(blocks, turns, strict=True))
        turn = turns[0]
        for key in shown[shown.index(blocks[0]) :]:
            turn = starts.get(key, turn)
            self._cut[key] = turn
            del self._shown[key]
            self._dirty[key] = None
        self._wake(False)

    def _put_back(self, turns: list[str]) -> None:
        """The branch of ``turns`` is in view again (at the end of the transcript)."""
        for turn in turns:
            for key in [k for k, t in self._cut.items() if t == turn]:
                del self._cut[key]
                self._shown[key] = None
                self._dirty[key] = None
        self._wake(False)

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
        self._review = None
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
        """The transcript in view: the base, then the chat's own blocks."""
        self._review = None
        own = (self._block(key) for key in self._shown)
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
            changes = self.chat.changes
            if key in self._turn_ends and changes is not None:
                if self._review is None:
                    self._review = changes.summary()
                data = {**(data or {}), "review": review_of(self._review, self._turn_ends[key])}
            block = notice_block(key, notice[0], notice[1], seq, turn, data)
        else:
            model = self.chat.session if key in self._shown else self._taken_out(key)
            found = None if model is None else stored(key, model, seq, turn, self._extra.get(key))
            if found is None:
                return None
            block = found
        block.branch = SHOWN if key in self._shown else OTHER_BRANCH
        return block

    def _taken_out(self, key: str) -> Session | None:
        """The items of the turn a rewind took block ``key`` out with, as a model."""
        turn_key = self._cut.get(key)
        for branch in self.chat.branches.all:
            for turn in branch.turns:
                hidden = turn.hidden
                if turn.message == turn_key and hidden is not None:
                    return Session(
                        messages=hidden.messages,
                        tool_calls=hidden.tool_calls,
                        plans=hidden.plans,
                        terminals=self.chat.session.terminals,
                    )
        return None


def _renumbered(block: StoredBlock, seq: int) -> StoredBlock:
    return StoredBlock(seq, block.key, block.turn, block.kind, block.text, block.data)
