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

import msgspec

from acp_nvim.client.editor import RenderOp
from acp_nvim.client.history._blocks import (
    NOTICES,
    attachment_data,
    began_in_replay,
    block_id,
    notice_block,
    render_ops,
    review_of,
    stored,
    stored_prompt,
    turn_report,
)
from acp_nvim.client.history._branches import StoredBranch, branches_of, encode, in_view
from acp_nvim.client.history._store import ChatRow, StoredBlock
from acp_nvim.client.history._writer import Target
from acp_nvim.client.session.branches import Branch, Turn
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import Attachment, Prompt, Session
from acp_nvim.client.session.view import is_mark, message_block
from acp_nvim.client.text import title as title_of


class ChatRecord:
    """The history's side of one chat (its ``record``).

    ``target`` is where it is written (None: this chat is not kept). ``base``: the
    stored blocks the chat goes on from (a reopened chat's, every branch of it, or
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
        self.prompts: dict[int, int] = {}  # a base block's seq → the turn its prompt begins
        self.base_written = True  # a handed-over base is written with the first batch
        # When the chat began, and when its transcript or review last changed (a
        # reopened chat's: as stored, until it changes here).
        self.created_at = self.updated_at = time.time()
        # Its conversation began before it: a session resumed here, its history replayed.
        self._replayed = False
        self.name: str | None = None  # the user's for the chat
        # Named here since the last take: only then is the name written (another
        # Neovim showing the chat may have renamed it since).
        self._renamed = False
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
        # The turn (node, see _branches) each block belongs to: the last one in view
        # when it was first drawn, as Lua groups blocks for ``cut``/``uncut`` ops.
        self._nodes: dict[str, int] = {}  # block key → its turn's node
        self._turn_nodes: dict[str, int] = {}  # a turn's key (Turn.message) → its node
        # The notes of a view change no turn was sent in yet (``Branches.between``): not
        # written until the next turn takes them (its node), forgotten when dropped.
        self._between: dict[str, None] = {}
        self._gone: list[int] = []  # the seqs of blocks dropped since the last take
        self._prefix = ""  # the stored blocks' ids' (block_id)
        self._hidden: dict[int, Session] | None = None  # turns out of view, read once a take

    def __repr__(self) -> str:
        where = self.target.id if self.target is not None else "not kept"
        return f"<ChatRecord chat {self.chat.id} → {where}, {len(self._seqs)} blocks>"

    @property
    def began(self) -> float | None:
        """When its conversation began, if known: a resumed session's began before its
        replay here, and neither the replay nor the agent's list says when."""
        return None if self._replayed else self.created_at

    def start_with(
        self,
        blocks: Sequence[StoredBlock],
        branches: str | None,
        turns: int,
        prefix: str,
        *,
        written: bool,
    ) -> list[StoredBlock]:
        """The chat goes on from stored ``blocks`` and ``branches`` (``written``: they
        are stored already), drawn with block ids prefixed by ``prefix``: its turns
        and branches become the chat's. Returns the blocks it shows, in order."""
        kept, branch = branches_of(branches, blocks)
        self.base_turns = turns
        self.base_written = written
        self._prefix = prefix
        self.base = list(blocks)
        self._replayed = written and began_in_replay(blocks)  # reopened (see :meth:`replayed`)
        if not written:  # what is shown is handed over
            self.base = [_renumbered(b, seq) for seq, b in enumerate(in_view(branch, blocks))]
            self._facts = True
            self._wake(False)
        self._next = max((b.seq for b in self.base), default=-1) + 1
        self._first_prompt = next((b.text for b in self.base if b.kind == "user"), None)
        turns_of = self._stored_turns(kept, branch, prefix)
        if turns_of:
            paths = [[turns_of[node] for node in b.nodes if node in turns_of] for b in kept]
            stored = [Branch(b.id, path) for b, path in zip(kept, paths, strict=True)]
            # A mark follows the turn last in view when it was drawn: its place's.
            marks = {
                turns_of[b.node].message if b.node else "": block_id(prefix, b)
                for b in self.base
                if is_mark(b.key)
            }
            self.chat.branches.restore(stored, branch.id, marks)
            self.chat.shown.list_branches()
        return in_view(branch, self.base)

    def _stored_turns(
        self, kept: list[StoredBranch], shown: StoredBranch, prefix: str
    ) -> dict[int, Turn]:
        """A turn for each stored turn (by node), begun by its first block (a rewind's
        or a switch's notes may come before its prompt); one on no branch shown carries
        the ops that draw it, for when one is picked (its plans numbered after those of
        the turns before it). Numbers each stored turn's prompt in ``prompts``."""
        blocks: dict[int, list[StoredBlock]] = {}
        for block in self.base:
            if block.node:
                blocks.setdefault(block.node, []).append(block)
        # A turn's number is its place on the branches holding it (they share its past),
        # and so are the plans before it.
        numbers = {
            node: number
            for b in kept
            for number, node in enumerate((n for n in b.nodes if n in blocks), 1)
        }
        plans = {node: sum(block.kind == "plan" for block in own) for node, own in blocks.items()}
        plans_before: dict[int, int] = {}
        for b in kept:
            count = 0
            for node in (n for n in b.nodes if n in blocks):
                plans_before[node], count = count, count + plans[node]
        prompts = {n: next((b for b in own if b.kind == "user"), None) for n, own in blocks.items()}
        self.prompts = {
            prompt.seq: numbers[node]
            for node, prompt in prompts.items()
            if node in numbers and prompt is not None
        }
        last = {b.nodes[-1]: b.session_id for b in kept if b.nodes}
        turns = {}
        for node, own in blocks.items():
            said = prompts[node]
            prompt = stored_prompt(said) if said is not None else Prompt(own[0].text)
            turn = Turn(f"{prefix}{node}", 0, last.get(node) or "", prompt)
            turn.first = block_id(prefix, own[0])
            turn.report = turn_report(own)
            turn.plans = plans[node]
            if node not in shown.nodes:
                turn.drawing = render_ops(
                    own, prefix, self.chat.workspace, self.prompts, plans_before.get(node, 0)
                )
            self._turn_nodes[turn.message] = node
            turns[node] = turn
        return turns

    # -- told by the chat (on the worker's loop) ------------------------------------------

    def drawn(self, op: RenderOp) -> None:
        if op["op"] == "status":
            self._facts = True
            self._wake(False)
            return
        if op["op"] == "drop":
            self._drop(op["blocks"])
            return
        if op["op"] != "block" and op["op"] != "append":
            return
        self.updated_at = time.time()
        key = op["id"]
        if key not in self._seqs:
            self._seqs[key] = self._next
            self._next += 1
            self._turns[key] = self.base_turns + self.chat.turn
            self._nodes[key] = self._node_of_new(key, op)
            if key in (self.chat.branches.between or ()):
                self._between[key] = None
        kind = op["kind"] if op["op"] == "block" else None
        if op["op"] == "block" and kind in NOTICES and "start" not in op:
            data: dict[str, Any] | None = None
            if kind == "turn":
                session = self.chat.session
                usage = self.chat.usage.summed(session.usage)
                data = {"stop_reason": session.stop_reason, "usage": usage}
                if self.chat.usage.turn_tokens is not None:  # the agent's own: the export's
                    data["turn_tokens"] = self.chat.usage.turn_tokens
                if self.chat.usage.turn is not None:  # the status's, once reopened
                    data["turn"] = self.chat.usage.turn
                self._turn_ends[key] = self.chat.turn
            self._notices[key] = (kind, op["lines"], data)
        if key not in self._between:
            self._dirty[key] = None
        self._wake(kind == "turn")

    def _node_of_new(self, key: str, op: RenderOp) -> int:
        """The turn block ``key`` belongs to: its own, for the prompt that begins one
        (drawn before the chat's branches have it; the notes of a view change before
        it are its too), else the last one shown."""
        if op["op"] == "block" and "turn" in op:
            node = self.base_turns + self.chat.turn
            self._turn_nodes[key.removeprefix(message_block(""))] = node
            for note in self._between:
                self._nodes[note] = node
                self._dirty[note] = None
            self._between.clear()
            return node
        path = self.chat.branches.path
        return self._turn_nodes.get(path[-1].message, 0) if path else 0

    def _drop(self, keys: list[str]) -> None:
        """Blocks taken out of the transcript for good: the notes of a view change no
        turn was sent in (never written), a mark where no branch leaves any more
        (deleted where it was written, a stored chat's too)."""
        self.updated_at = time.time()
        for key in keys:
            seq = self._seqs.get(key)
            if seq is None:  # a stored block, drawn by its place
                seq = next((b.seq for b in self.base if block_id(self._prefix, b) == key), None)
                self.base = [b for b in self.base if b.seq != seq]
            if seq is not None and key not in self._between:
                self._gone.append(seq)
            for kept in (self._seqs, self._turns, self._nodes, self._notices, self._dirty,
                         self._between):  # fmt: skip
                kept.pop(key, None)
        self._wake(False)

    def prompted(self, message_id: str, text: str, attachments: Sequence[Attachment]) -> None:
        if self._first_prompt is None:
            self._first_prompt = text
        if attachments:
            self._extra["#message:" + message_id] = {"attachments": attachment_data(attachments)}

    def replayed(self, turns: Sequence[Turn]) -> None:
        """``turns`` (the chat's first, in order) are the history the agent replayed as
        it resumed the session, drawn before as blocks of no turn: from its prompt's
        block on, each is a turn (a node) of its own, counted before the chat's own. The
        chat is named by the first, where its conversation began."""
        begins = {message_block(turn.message): turn.message for turn in turns}
        if turns:
            self._replayed = True
            # Kept with its first prompt, for the chat reopened (``began_in_replay``).
            self._extra.setdefault(message_block(turns[0].message), {})["replayed"] = True
            if self._first_prompt is None:
                self._first_prompt = turns[0].prompt.text
        node = self.base_turns
        for key in sorted(self._seqs, key=self._seqs.__getitem__):
            if key in begins:
                node += 1
                self._turn_nodes[begins[key]] = node
            # Drawn before as no turn's, or (replayed after the resume's answer) as
            # the replayed turn's before: the chat's own turns come after.
            if node > self.base_turns and (self._nodes[key] or 0) <= self.base_turns:
                self._nodes[key] = self._turns[key] = node
                self._dirty[key] = None
        self.base_turns = node
        self._wake(False)

    def unreplayed(self, turns: Sequence[Turn]) -> None:
        """``turns`` (the chat's last, :meth:`replayed`) are gone with their blocks: a
        replay the agent died in, replayed again, numbers its turns from where they
        began."""
        for turn in turns:
            self._extra.pop(message_block(turn.message), None)
            if self._turn_nodes.pop(turn.message, None) is not None:
                self.base_turns -= 1
        # What stays of their turns (the agent's death, the new replay drawn or made
        # turns before this) is of no turn again, for the new replay's turns to take
        # (:meth:`replayed`): kept with a gone turn's node, the reopened chat hid it.
        for key, node in self._nodes.items():
            if (node or 0) > self.base_turns:
                self._nodes[key] = self._turns[key] = self.base_turns
                self._dirty[key] = None
        self._wake(False)

    def named(self, name: str | None) -> None:
        """The user named the chat (None: it goes by its title): the chat shows it,
        and it is written with the chat's facts."""
        self.name = name
        self._renamed = True
        self.chat.on_info(name=name)

    def reviewed(self) -> None:
        """The user decided on the agent's changes: each turn's end keeps the review's
        state of that turn's files."""
        for key in self._turn_ends:
            self._dirty[key] = None
        self.updated_at = time.time()
        self._wake(False)

    # -- read by the history ----------------------------------------------------------------

    @property
    def changed(self) -> bool:
        """Whether there is something to write: never before the chat holds a turn (one
        sent, replayed or carried over), so a chat opened and never prompted is not kept;
        what it drew (a notice, a name given) is written with its first turn. Nor is a
        conversation carried over (a hand-over, a fork) before its agent has a session
        for it: one whose agent never started kept a second copy under an agent that
        never answered (the status of the session's start writes it)."""
        if not self.base_written and not self.chat.session.session_id:
            return False
        begun = bool(self.base) or self.base_turns + self.chat.turn > 0
        return begun and (bool(self._dirty) or self._facts or bool(self._gone))

    def take(self) -> tuple[list[StoredBlock], list[int], dict[str, Any]]:
        """The blocks changed since the last take, the seqs of those dropped, and the
        chat's facts."""
        blocks = [] if self.base_written else list(self.base)
        self.base_written = True
        self._review = self._hidden = None
        blocks += [b for key in self._dirty if (b := self._block(key)) is not None]
        self._dirty.clear()
        gone, self._gone = self._gone, []
        self._facts = False
        facts = self.facts()
        if self._renamed:
            facts["name"], self._renamed = self.name, False
        return blocks, gone, facts

    @property
    def title(self) -> str | None:
        """What the chat is called: the user's name for it, else its title."""
        return self.name or self.facts()["title"]

    def facts(self) -> dict[str, Any]:
        session = self.chat.session
        first = title_of((self._first_prompt or "").strip().split("\n", 1)[0])
        # Its directory once it went on here: a reopened chat whose own was gone
        # works in Neovim's, and is reopened there next (reopening alone changes none).
        moved = {"cwd": self.cwd} if self._seqs else {}
        return {
            **moved,
            "title": session.title or first or None,
            "session_id": session.session_id or None,
            "protocol_version": self.chat.protocol_version,
            "turns": self.base_turns + self.chat.turn,
            "branches": self._branches(),
            "worktree": _json(self.chat.workspace.kept()),
            # Its row is made at its first write, after it began.
            "created_at": self.created_at,
        }

    def _branches(self) -> str | None:
        """The chat's branches as kept (None before its first turn)."""
        branches = self.chat.branches
        if not branches.path and not branches.others:
            return None
        kept = [StoredBranch(b.id, self._nodes_of(b.turns), b.session_id) for b in branches.all]
        return encode(kept, branches.shown.id)

    def _shown(self) -> StoredBranch:
        """The branch in view, as kept."""
        branches = self.chat.branches
        return StoredBranch(branches.shown.id, self._nodes_of(branches.path))

    def _nodes_of(self, turns: list[Turn]) -> list[int]:
        """The nodes of ``turns`` (each met as its prompt was drawn, or stored)."""
        return [node for t in turns if (node := self._turn_nodes.get(t.message)) is not None]

    def blocks(self) -> list[StoredBlock]:
        """The transcript in view, in order: what is shown of the base and of the
        chat's own blocks."""
        self._review = self._hidden = None
        shown = self._shown()
        place = set(shown.nodes) | {0}
        own = (self._block(key) for key, node in self._nodes.items() if node in place)
        return in_view(shown, [*self.base, *(b for b in own if b is not None)])

    def row(self) -> ChatRow:
        """The chat's facts as a stored chat's (for Markdown)."""
        target = self.target
        facts = self.facts()
        return ChatRow(
            target.id if target is not None and target.id is not None else 0,
            self.chat.agent,
            self.cwd,
            self.created_at,
            self.updated_at,
            facts["turns"],
            facts["title"],
            self.name,
            session_id=facts["session_id"],
            protocol_version=facts["protocol_version"],
            worktree=facts["worktree"],
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
            found = stored(key, self._model_of(self._nodes[key]), seq, turn, self._extra.get(key))
            if found is None:
                return None
            block = found
        block.node = self._nodes[key]
        return block

    def _model_of(self, node: int) -> Session:
        """The model holding the items of turn ``node``: the chat's while it is in
        view, else the items a rewind or a branch switch took out with it."""
        if self._hidden is None:  # read once a take
            self._hidden = {
                self._turn_nodes[turn.message]: Session(
                    messages=turn.hidden.messages,
                    tool_calls=turn.hidden.tool_calls,
                    plans=turn.hidden.plans,
                    compactions=turn.hidden.compactions,
                    terminals=self.chat.session.terminals,
                )
                for branch in self.chat.branches.all
                for turn in branch.turns
                if turn.hidden is not None and turn.message in self._turn_nodes
            }
        return self._hidden.get(node, self.chat.session)


def _json(value: Any) -> str | None:
    return None if value is None else msgspec.json.encode(value).decode()


def _renumbered(block: StoredBlock, seq: int) -> StoredBlock:
    return StoredBlock(
        seq, block.key, block.turn, block.kind, block.text, block.data, node=block.node
    )
