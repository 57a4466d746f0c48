"""The turns of a chat's conversation, and the branches a rewind leaves behind.

A chat is a path of turns; a rewind to turn ``n`` goes on from turn ``n - 1`` and
keeps the turns it leaves as another branch, never deletes them. Branches share the
turns they have in common (the same :class:`Turn` objects), so they form a tree
whose leaves are the :class:`Branch` es the user can pick.

The session model holds the shown branch only: the items of a turn that is not
shown are kept on the turn (:func:`hide`, :func:`show`), so an agent's ids in a
session that goes on elsewhere (``m1`` again in a new session) never meet them.
Lua keeps their blocks the same way, by the turn's key (``cut``/``uncut`` ops).
"""

from __future__ import annotations

__all__ = ["Branch", "Branches", "Turn", "hide", "prompt_line", "show"]

import itertools
from typing import Any

import msgspec

from acp_nvim.client.editor import RenderOp
from acp_nvim.client.session.model import (
    Compaction,
    Message,
    PlanEntry,
    Prompt,
    Session,
    ToolCall,
)
from acp_nvim.client.session.view import message_block

# Characters of a prompt's first line the turn list shows (status field ``turns``).
_TURN_LINE = 80


class _Hidden(msgspec.Struct):
    """A turn's part of the session model while its branch is not shown."""

    items: list[tuple[str, str]]
    messages: dict[str, Message]
    tool_calls: dict[str, ToolCall]
    plans: dict[str, list[PlanEntry]]
    compactions: dict[str, Compaction]
    aliases: dict[str, str]


class Turn(msgspec.Struct, eq=False):
    """One turn: begun by the user's message keyed ``message`` (its block in the
    transcript), numbered ``review`` in the chat's review (every turn the chat ran,
    whichever branch), run in session ``session_id`` of the agent process ``agent``
    (a serial the connection stamps: a session id means something only there).

    ``start`` is where its items begin in ``Session.items`` while it is shown.
    ``report`` is the agent's usage report when it ended (``Session.usage``): a
    fork at its last message starts with that context; a stored turn's holds what its
    session's turns had used by then too (``Usage.summed``).
    ``first`` is the block it begins with, else its message's: the first note of a
    rewind or a branch switch drawn before it (they go with it), or a stored turn's
    first block. A turn of a stored chat (reopened, or handed over: ``review`` 0) has
    no items; ``drawing`` holds the ops that draw it while it was never drawn here (it
    is on a branch not shown), ``plans`` how many plans it showed (the session
    model's are numbered after them). A ``replayed`` turn is one the agent replayed as its
    session was resumed (:meth:`Branches.replayed`): in the model like a turn run
    here, but no review saw what it changed (``review`` 0).
    """

    message: str
    review: int
    session_id: str
    prompt: Prompt
    start: int = 0
    agent: int | None = None
    hidden: _Hidden | None = None
    first: str | None = None
    drawing: list[RenderOp] | None = None
    report: dict[str, Any] | None = None
    replayed: bool = False
    plans: int = 0

    @property
    def stored(self) -> bool:
        """Whether it ran before the chat was reopened or handed over (the model does
        not hold it)."""
        return self.review == 0 and not self.replayed

    @property
    def block(self) -> str:
        """The id of the block it begins with."""
        return self.first or message_block(self.message)


class Branch(msgspec.Struct, eq=False):
    """A path of turns from the first; ``id`` names it to the user."""

    id: int
    turns: list[Turn]

    @property
    def session_id(self) -> str | None:
        """The session its last turn ran in (where it goes on), None without turns."""
        return self.turns[-1].session_id if self.turns else None


def _place(turns: list[Turn]) -> str:
    """The place after ``turns`` (a path from the first turn): its last turn's key, ""
    before the first turn."""
    return turns[-1].message if turns else ""


def _common(a: list[Turn], b: list[Turn]) -> int:
    """How many turns two paths share from the first."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x is not y:
            break
        count += 1
    return count


class Branches:
    """The shown branch and the others, of one chat."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.shown = Branch(next(self._ids), [])
        self.others: list[Branch] = []
        # Where a mark says that another branch leaves: by the key of the turn it
        # follows ("" before the first turn), its block (None: a stored chat's, not
        # found). Marks of places no branch leaves any more go with the view change.
        self._marked: dict[str, str | None] = {}
        self._unmarked: list[str] = []
        # The blocks of the notes drawn since the view last changed (a rewind, a
        # switch: ``Chat._take_out``) while no turn was sent in it: the next turn
        # begins with them, else they go with the view. None once a turn was sent.
        self.between: list[str] | None = None
        # After a resume's answer, what the agent still replays (v2 agents may): the
        # item its user messages begin turns from, and the agent process; None once a
        # turn is sent or the view changes (decision 0088).
        self.replaying: tuple[int, int] | None = None
        # The user's messages of a session being replayed as the history kept them, in
        # order, each with whether it was steered into a turn: such a message replayed
        # begins no turn (0088).
        self.kept: list[tuple[str, bool]] = []
        # While a resume's replay may still run: the item it began at, until it is
        # answered, or (a v2 agent may replay after its answer, and nothing says when
        # it is done) until a turn is sent or the view changes. Set when the agent
        # died meanwhile: the restart replays the session again, in place of what it
        # had drawn (``ShownBranch.unreplay``).
        self.unreplayed: int | None = None

    def __repr__(self) -> str:
        return f"<Branches {len(self.path)} turns shown, {len(self.others)} others>"

    @property
    def path(self) -> list[Turn]:
        return self.shown.turns

    def unrecorded(self, turn: int) -> str | None:
        """The shown turns from ``turn`` on that ran before the chat was reopened,
        handed over, forked or resumed (``turns 2 to 3``): no review here recorded what
        they changed, so a restore cannot take it back. None when there are none."""
        last = sum(1 for each in self.path if not each.review)  # they come first
        if last < turn:
            return None
        return f"turn {turn}" if last == turn else f"turns {turn} to {last}"

    def prompt_lines(self) -> list[str]:
        """The shown turns' prompts, a first line each (status field ``turns``)."""
        return [prompt_line(t) for t in self.path]

    def fork_point(self, session: Session, number: int, *, inclusive: bool) -> str | None:
        """The agent's id of the message that a fork of turn ``number``'s session (in
        ``session``) names to keep turns 1 to ``number`` of the shown branch and no
        more: where the fork keeps the message named (``inclusive``), that turn's last
        agent message (:meth:`last_reply`); else the message after it, the next turn's
        prompt as the agent acknowledged it, where that turn ran in the same session
        of the same process.
        None where there is no such message."""
        if inclusive:
            return self.last_reply(session, number)
        path = self.path
        if number >= len(path):
            return None
        this, after = path[number - 1], path[number]
        if (after.session_id, after.agent) != (this.session_id, this.agent):
            return None
        return session.wire_id(after.message)

    def last_reply(self, session: Session, number: int) -> str | None:
        """The agent's id of the last agent message of turn ``number`` (1-based) of the
        shown branch, in ``session``: where a fork at a message keeps it. None when the
        turn has no agent message, or only ones the agent gave no id."""
        path, items = self.path, session.items
        end = path[number].start if number < len(path) else len(items)
        for kind, key in reversed(items[path[number - 1].start : end]):
            message = session.messages.get(key) if kind == "message" else None
            if message is not None and message.role == "agent":
                return session.wire_id(key)
        return None

    def restore(self, branches: list[Branch], shown: int, marks: dict[str, str]) -> None:
        """Go on from a stored chat's ``branches`` (sharing their common turns), the
        one of id ``shown`` in view, and its ``marks`` (blocks by place, as in
        :meth:`mark`); the places where others leave it are marked."""
        self.shown = next(b for b in branches if b.id == shown)
        self.others = [b for b in branches if b is not self.shown]
        self._ids = itertools.count(max(b.id for b in branches) + 1)
        self._marked = dict(marks)
        for other in self.others:
            self.mark(_common(self.path, other.turns))

    def replayed(
        self, session: Session, since: int, agent: int, until: int | None = None
    ) -> list[Turn]:
        """Make a turn of each user message from item ``since`` of ``session`` on (to
        ``until``, else the end): the history agent process ``agent`` replayed as it
        resumed the session (a rewind forks it at a replayed message, an edit finds
        its prompt). Returns those turns."""
        turns: list[Turn] = []
        for start in range(since, len(session.items) if until is None else until):
            kind, key = session.items[start]
            message = session.messages.get(key) if kind == "message" else None
            if message is not None and message.role == "user":
                if self._steered_in(message.words):
                    continue  # part of the turn before, as it was live
                prompt = Prompt(message.words)  # what the user typed, edited as typed
                turns.append(Turn(key, 0, session.session_id, prompt, start, agent, replayed=True))
                self.begin(turns[-1])
        return turns

    def unmake(self, since: int) -> list[Turn]:
        """Take the replayed turns from item ``since`` on out of the shown branch for
        good: a replay the agent died in, replayed again (no view change came since,
        so no other branch holds them). Returns them."""
        gone = [t for t in self.path if t.replayed and t.start >= since]
        self.shown.turns = self.path[: len(self.path) - len(gone)]
        return gone

    def _steered_in(self, words: str) -> bool:
        """Whether the replayed user message ``words`` was steered into a turn: the
        first of the history's messages left (``kept``) with those words is it, and
        those before it are passed (replayed with other words: a prompt's selection
        goes as text to an agent without embedded context). None with them: no."""
        found = next((i for i, (text, _) in enumerate(self.kept) if text == words), None)
        if found is None:
            return False
        steered = self.kept[found][1]
        del self.kept[: found + 1]
        return steered

    def begin(self, turn: Turn) -> None:
        if self.between:
            turn.first = self.between[0]
        self.between = None
        self.shown.turns.append(turn)

    def noted(self, block: str) -> None:
        """A note was drawn, block ``block``: the next turn's, after a view change."""
        if self.between is not None:
            self.between.append(block)

    def leave(self, number: int) -> list[Turn]:
        """Go on from before turn ``number`` (1-based) of the shown branch, which is
        kept among the others; returns the turns left behind (``number`` on).

        Raises:
            ValueError: no such turn.
        """
        if not 1 <= number <= len(self.path):
            raise ValueError(number)
        left = self.path[number - 1 :]
        kept = self.shown
        self.shown = Branch(next(self._ids), self.path[: number - 1])
        self._keep(kept)
        self.replaying = self.unreplayed = None
        return left

    def pick(self, branch_id: int) -> tuple[list[Turn], list[Turn]]:
        """Show branch ``branch_id``: returns the turns that go out of view and the
        ones that come into it (after the turns both branches share). The branch that
        was shown is kept unless another one holds all its turns.

        Raises:
            KeyError: no such branch, or it is the one shown.
        """
        branch = next((b for b in self.others if b.id == branch_id), None)
        if branch is None:
            raise KeyError(branch_id)
        common = _common(self.path, branch.turns)
        out, into = self.path[common:], branch.turns[common:]
        self.others.remove(branch)
        kept, self.shown = self.shown, branch
        self._keep(kept)
        self.replaying = self.unreplayed = None
        return out, into

    def _keep(self, branch: Branch) -> None:
        """Keep ``branch`` among the others, unless one of the branches holds all its
        turns (a rewind's branch that never got a turn of its own): then its mark goes
        unless another branch leaves there too."""
        if not any(_common(branch.turns, b.turns) == len(branch.turns) for b in self.all):
            self.others.append(branch)
        elif not self._parts(branch.turns):
            block = self._marked.pop(_place(branch.turns), None)
            if block is not None:
                self._unmarked.append(block)

    def _parts(self, turns: list[Turn]) -> bool:
        """Whether branches part after ``turns`` (a path from the first turn): two go
        on with different turns, or one ends there and another goes on."""
        count = len(turns)
        after = {
            id(b.turns[count]) if len(b.turns) > count else None
            for b in self.all
            if _common(b.turns, turns) == count
        }
        return len(after) > 1

    def dropped(self) -> list[str]:
        """The view changes: the blocks that go with it for good (the notes of its
        last change if no turn was sent after them, the marks of places no branch
        leaves any more). The notes of this change are gathered from now on."""
        gone = [*self._unmarked, *(self.between or ())]
        self._unmarked, self.between = [], []
        return gone

    @property
    def all(self) -> list[Branch]:
        """The shown branch, then the others."""
        return [self.shown, *self.others]

    def numbers(self) -> dict[int, int] | None:
        """Each turn of the shown branch by its review number: its number there (the
        transcript's). None while there is one branch (the numbers are the same)."""
        if not self.others:
            return None
        return {turn.review: number for number, turn in enumerate(self.path, 1)}

    def mark(self, shared: int, block: str | None = None) -> bool:
        """Whether the place after the first ``shared`` turns of the shown branch needs
        a mark that another branch leaves there (once per place, where branches part);
        if so, it is ``block``."""
        turns = self.path[:shared]
        key = _place(turns)
        if key in self._marked or not self._parts(turns):
            return False
        self._marked[key] = block
        return True

    def listed(self) -> list[dict[str, Any]]:
        """Every branch for the user (:meth:`entry`), the shown one first."""
        return [self.entry(branch) for branch in self.all]

    def entry(self, branch: Branch) -> dict[str, Any]:
        """``branch`` for the user: ``id``, ``current``, ``turns`` (count),
        ``leaves_at`` (the turn where it leaves the shown one), ``prompt`` (its first
        prompt from there; the shown one's: its last), ``last_prompt`` (its newest: two
        branches leaving at the same turn with the same prompt, a regenerated one,
        differ there), ``session_id``. The shown one's costs the same in a chat of
        any length (a turn start sends it)."""
        current = branch is self.shown
        common = len(branch.turns) if current else _common(self.path, branch.turns)
        first = branch.turns[-1 if current else common] if branch.turns else None
        return {
            "id": branch.id,
            "current": current,
            "turns": len(branch.turns),
            "leaves_at": None if current else common + 1,
            "prompt": first.prompt.text if first is not None else "",
            "last_prompt": branch.turns[-1].prompt.text if branch.turns else "",
            "session_id": branch.session_id,
        }


def prompt_line(turn: Turn) -> str:
    """``turn``'s prompt as the turn list shows it: its first line, cut."""
    return turn.prompt.text.split("\n", 1)[0][:_TURN_LINE]

def hide(session: Session, turns: list[Turn]) -> None:
    """Take ``turns`` (the end of the shown path, in order) out of the session model:
    each keeps its items until :func:`show` puts them back."""
    if not turns:
        return
    ends = [t.start for t in turns[1:]] + [len(session.items)]
    for turn, end in zip(turns, ends, strict=True):
        items = session.items[turn.start : end]
        messages = _take(items, "message", session.messages)
        turn.hidden = _Hidden(
            items,
            messages,
            _take(items, "tool", session.tool_calls),
            _take(items, "plan", session.plans),
            _take(items, "compaction", session.compactions),
            {a: k for a, k in session.aliases.items() if k in messages},
        )
        for alias in turn.hidden.aliases:
            del session.aliases[alias]
    del session.items[turns[0].start :]


def _take(items: list[tuple[str, str]], kind: str, found: dict[str, Any]) -> dict[str, Any]:
    """Pop the entries of ``found`` that ``items`` name as ``kind``."""
    return {k: found.pop(k) for i, k in items if i == kind and k in found}


def show(session: Session, turns: list[Turn]) -> tuple[list[RenderOp], list[str]]:
    """Put hidden ``turns`` back at the end of the session model, in order. Returns
    the ops that draw the stored turns never drawn here (they come first: a path
    begins with the stored turns), and the keys of the others, whose blocks Lua
    keeps (``uncut``)."""
    drawing: list[RenderOp] = []
    kept: list[str] = []
    for turn in turns:
        turn.start = len(session.items)  # (a stored turn has no items)
        if turn.drawing is not None:
            drawing += turn.drawing
            turn.drawing = None
        else:
            kept.append(turn.message)
        hidden = turn.hidden
        if hidden is None:
            continue
        session.items.extend(hidden.items)
        session.messages.update(hidden.messages)
        session.tool_calls.update(hidden.tool_calls)
        session.plans.update(hidden.plans)
        session.compactions.update(hidden.compactions)
        session.aliases.update(hidden.aliases)
        turn.hidden = None
    return drawing, kept
