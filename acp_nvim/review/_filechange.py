"""One file's changes within one turn, hunk by hunk.

A :class:`FileChange` keeps two line lists, the *baseline* (text before the
turn's first change, plus hunks accepted since) and the *current* text.
Pending hunks are exactly the differences between the two, kept with stable
ids: accepting a hunk copies it into the baseline, rejecting copies the
baseline back into current, and every other hunk's position is shifted, never
recomputed, so ids and positions stay meaningful. Only a new agent write or a
user edit recomputes hunks, and then hunks with unchanged content keep their
ids.

Edits the user makes between agent writes are folded into the baseline (they
are not the agent's), unless they fall inside an agent hunk. An edit that
takes a hunk's agent lines back out (an undo) marks it ``reverted``; one that
puts them back where a reverted or rejected hunk sits (a redo, an undo of a
reject) is the agent's again: the hunk is pending once more.

Nothing here does I/O: callers pass texts in and write the returned text out.
"""

from __future__ import annotations

__all__ = ["FileChange", "FileKind", "ReviewError", "Rows"]

import difflib
from collections.abc import Sequence
from typing import Literal

import msgspec

from ._diff import Hunk, Region, diff_regions, split_lines
from ._merge import Conflict, merge3_lines

# write: through the client's fs/write_text_file; disk: the agent wrote the
# file itself; patch: from a structured (v2) diff.
FileKind = Literal["write", "disk", "patch"]
# Where a hunk is: (base_start, base_count, new_start, new_count).
Rows = tuple[int, int, int, int]


class ReviewError(Exception):
    """A review request that cannot be honoured (unknown file/hunk, clash)."""


def _map_pos(regions: Sequence[Region], pos: int) -> int:
    """Where line ``pos`` of a diff's old side ended up on the new side."""
    delta = 0
    for i1, i2, j1, j2 in regions:
        if pos < i1:
            break
        if pos < i2:
            return j1
        delta = j2 - i2
    return pos + delta


def _map_range(regions: Sequence[Region], start: int, end: int) -> tuple[int, int]:
    """Map old lines ``[start, end)``; a change overlapping an edge widens the range."""
    new_start = _map_pos(regions, start)
    if start == end:
        return new_start, new_start
    delta = 0
    for i1, i2, _j1, j2 in regions:
        if i1 >= end:
            break
        if i2 >= end:
            return new_start, max(new_start, j2)
        delta = j2 - i2
    return new_start, max(new_start, end + delta)


def _copy(hunk: Hunk) -> Hunk:
    return msgspec.structs.replace(
        hunk,
        base_lines=list(hunk.base_lines),
        new_lines=list(hunk.new_lines),
        proposed=None if hunk.proposed is None else list(hunk.proposed),
    )


class FileChange:
    """One file's changes within one turn. Built and driven by :class:`Changeset`."""

    def __init__(self, path: str, turn: int, kind: FileKind, baseline: str | None) -> None:
        self.path = path
        self.turn = turn
        self.kind: FileKind = kind
        #: The text before the turn's first change (``None``: no file).
        self.original = baseline
        self._base_exists = baseline is not None
        self._base = split_lines(baseline)
        self._cur_exists = self._base_exists
        self._cur = list(self._base)
        # The text as the agent and the review's decisions left it: where the
        # current text differs, the user edited since.
        self._left = list(self._base)
        self._hunks: list[Hunk] = []
        self._next_id = 1

    def __repr__(self) -> str:
        open_ = sum(h.open for h in self._hunks)
        return f"<FileChange {self.path} turn {self.turn} {self.kind}, {open_} open hunks>"

    @property
    def baseline(self) -> str | None:
        """What rejecting every open hunk now restores (original + accepted hunks)."""
        return "".join(self._base) if self._base_exists else None

    @property
    def current(self) -> str | None:
        """The text the file should hold now (``None``: deleted)."""
        return "".join(self._cur) if self._cur_exists else None

    @property
    def left(self) -> str:
        """The text as the agent's writes and the review's decisions left it: the
        current text without the user's edits made since."""
        return "".join(self._left)

    @property
    def open(self) -> bool:
        """Whether any hunk still awaits a decision."""
        return any(h.open for h in self._hunks)

    @property
    def applied(self) -> bool:
        """Whether any of the agent's changes still stand (open or accepted hunks):
        what :meth:`take_back` would take out."""
        return any(h.status in ("pending", "conflict", "accepted") for h in self._hunks)

    def hunks(self) -> list[Hunk]:
        """Copies of all hunks (decided ones too), in file order."""
        return [_copy(h) for h in self._hunks]

    def hunk(self, hunk_id: int) -> Hunk:
        """A copy of hunk ``hunk_id``. Raises :class:`ReviewError` when unknown."""
        return _copy(self._find(hunk_id))

    def placed(self, now: str | None) -> tuple[str | None, dict[int, Rows]]:
        """This turn's change where the file is ``now``, a later turn having changed it
        since (the rows of :meth:`hunks` are those of the text this turn left).

        Returns the baseline there, what rejecting this turn's open hunks would leave
        in ``now`` (where the later turn changed the same lines, their text before
        this turn: such a reject waits for that turn's review), and each hunk's rows
        by id: the new ones in ``now`` (widened over a later change to them), a
        pending hunk's base ones in that baseline (the others keep theirs).
        """
        lines = split_lines(now)
        # From what this turn left: its open hunks rejected (kept on a clash), and now.
        base = merge3_lines(self._cur, self._base, lines)[0]
        to_now, to_base = diff_regions(self._cur, lines), diff_regions(self._base, base)
        rows: dict[int, Rows] = {}
        for hunk in self._hunks:
            new_start, new_end = _map_range(to_now, hunk.new_start, hunk.new_end)
            base_start, base_end = hunk.base_start, hunk.base_end
            if hunk.status == "pending":
                base_start, base_end = _map_range(to_base, base_start, base_end)
            rows[hunk.id] = (base_start, base_end - base_start, new_start, new_end - new_start)
        return ("".join(base) if base or self._base_exists else None), rows

    # -- recording -----------------------------------------------------------------

    def set_current(self, text: str | None) -> None:
        """The agent changed the file to ``text``; recompute pending hunks."""
        lines = split_lines(text)
        self._left = lines
        self._set(lines, text is not None, diff_regions(self._cur, lines))

    def user_edit(self, text: str | None) -> str | None:
        """The user changed the file to ``text``: fold that into the baseline.

        Edits outside agent hunks move into the baseline (so they are not
        shown as agent changes and survive a reject); edits inside an agent
        hunk become part of that hunk. A change that exactly takes a pending
        hunk's lines back to its baseline lines (an undo) marks it
        ``reverted``; one that exactly puts a reverted or rejected hunk's agent
        lines back where it sits (a redo) makes it pending again.

        Returns what the file holds with only those hunks taken back or
        brought back (the change its file on disk must follow), or None when
        the edit touched none.
        """
        lines = split_lines(text)
        if lines == self._cur and (text is not None) == self._cur_exists:
            return None
        before = self._cur
        moves = diff_regions(before, lines)
        reverted, redone = self._follow(moves, lines)
        # The user's own edits (redone hunks are the agent's), and the agent's
        # hunks alone (what undo and redo did).
        own: list[str] = []
        agents: list[str] = []
        at = 0
        followed = redone | {k for _, _, k in reverted}
        for k, (i1, i2, j1, j2) in enumerate(moves):
            own += lines[at:j1]
            agents += lines[at:j1]
            own += before[i1:i2] if k in redone else lines[j1:j2]
            agents += lines[j1:j2] if k in followed else before[i1:i2]
            at = j2
        own += lines[at:]
        agents += lines[at:]
        # base = current, ours = baseline (kept on a clash), theirs = user's text.
        new_base, _ = merge3_lines(before, self._base, own)
        base_moves = diff_regions(self._base, new_base)
        for hunk in self._hunks:
            if hunk.status != "pending":
                hunk.base_start = _map_pos(base_moves, hunk.base_start)
        self._base = new_base
        self._set(lines, text is not None, moves)
        for hunk, row, _ in reverted:
            hunk.new_start = row  # where its baseline lines are now
        if not followed:
            return None
        self._left = merge3_lines(before, agents, self._left)[0]
        return "".join(agents)

    def decided(self, text: str | None) -> None:
        """A decision in an earlier turn changed the file to ``text``: folded into
        the baseline like a user edit, but part of what the review left."""
        before = self._cur
        self.user_edit(text)
        self._left_follows(before)

    def add_conflicts(self, conflicts: Sequence[Conflict]) -> list[Hunk]:
        """Record merge clashes (positions in the current text) as conflict hunks.

        A clash over an older conflict replaces it and keeps its id.
        """
        added: list[Hunk] = []
        for conflict in conflicts:
            start, end = conflict.start, conflict.start + len(conflict.ours_lines)
            older = [
                h
                for h in self._hunks
                if h.status == "conflict"
                and ((h.new_start < end and start < h.new_end) or h.new_start == start)
            ]
            hunk = Hunk(
                older[0].id if older else self._new_id(),
                self._cur_to_base(start),
                list(conflict.base_lines),
                start,
                list(conflict.ours_lines),
                "conflict",
                list(conflict.theirs_lines),
            )
            self._hunks = [h for h in self._hunks if h not in older] + [hunk]
            added.append(_copy(hunk))
        self._sort()
        return added

    # -- decisions -----------------------------------------------------------------

    def accept(self, hunk_id: int | None = None, *, include_conflicts: bool = False) -> str | None:
        """Accept one hunk, or every pending hunk; returns the text the file must hold.

        Accepting a conflict hunk replaces the user's lines with the agent's
        proposal. ``accept()`` without an id leaves conflicts alone unless
        ``include_conflicts``: it never overwrites user edits by surprise.
        Raises :class:`ReviewError` for an unknown hunk or one already rejected.
        """
        before = list(self._cur)
        for hunk in self._targets(hunk_id, "accepted", include_conflicts):
            if hunk.status == "conflict":
                self._accept_conflict(hunk)
            else:
                self._accept_pending(hunk)
        self._left_follows(before)
        return self.current

    def reject(self, hunk_id: int | None = None) -> str | None:
        """Reject one hunk, or all open hunks; returns the text the file must hold.

        A rejected hunk's region gets its baseline lines back, other hunks are
        untouched. Rejecting everything restores :attr:`baseline` exactly,
        ``None`` meaning the file must be deleted. Rejecting a conflict keeps
        the user's text. Raises :class:`ReviewError` for an unknown hunk or one
        already accepted.
        """
        before = list(self._cur)
        for hunk in self._targets(hunk_id, "rejected", True):
            if hunk.status == "conflict":
                hunk.status = "rejected"
            else:
                self._reject_pending(hunk)
        self._left_follows(before)
        return self.current

    def take_back(self) -> str | None:
        """Take the turn's changes out of the file (a restore); returns the text it must hold.

        Open hunks are rejected; accepted ones get their text before the turn back
        and are marked ``reverted`` (their lines are out, not by a review decision).
        An accepted hunk whose lines the user has changed since (so they are in the
        baseline as the user's) stays accepted: the user's text is never overwritten.
        A file the turn created is gone again unless the user's lines remain in it.
        """
        self.reject()
        # Nothing is pending now: the baseline and the current text are the same lines.
        before = list(self._cur)
        accepted = [h for h in self._hunks if h.status == "accepted"]
        for hunk in sorted(accepted, key=lambda h: h.base_start, reverse=True):
            start, end = hunk.base_start, hunk.base_start + len(hunk.new_lines)
            if self._base[start:end] != hunk.new_lines:
                continue
            self._base[start:end] = hunk.base_lines
            by = len(hunk.base_lines) - len(hunk.new_lines)
            self._shift(hunk, base_from=end, base_by=by, new_from=end, new_by=by)
            hunk.status, hunk.new_start = "reverted", start
        if accepted and not any(h.status == "accepted" for h in self._hunks):
            self._base_exists = self.original is not None or bool(self._base)
        self._cur, self._cur_exists = list(self._base), self._base_exists
        self._left_follows(before)
        return self.current

    # -- internals -----------------------------------------------------------------

    def _set(self, lines: list[str], exists: bool, moves: Sequence[Region]) -> None:
        """The current text becomes ``lines`` (``moves``: the diff to them)."""
        for hunk in self._hunks:
            if hunk.status == "conflict":
                start, end = _map_range(moves, hunk.new_start, hunk.new_end)
                hunk.new_start, hunk.new_lines = start, lines[start:end]
            elif hunk.status != "pending":
                hunk.new_start = _map_pos(moves, hunk.new_start)
        self._cur = lines
        self._cur_exists = exists
        self._rediff()

    def _left_follows(self, before: list[str]) -> None:
        """The review changed the current text from ``before``: what it left changes alike."""
        if self._cur != before:
            self._left = merge3_lines(before, self._cur, self._left)[0]

    def _follow(
        self, moves: Sequence[Region], lines: list[str]
    ) -> tuple[list[tuple[Hunk, int, int]], set[int]]:
        """Hunks an edit (``moves`` from the current text to ``lines``) took back or
        brought back: (hunk, its new row, the move's index) now ``reverted``, and
        the indexes of moves that made a hunk pending again. One pass over both."""
        at: dict[int, list[Hunk]] = {}
        for hunk in self._hunks:
            if hunk.status in ("pending", "reverted", "rejected"):
                at.setdefault(hunk.new_start, []).append(hunk)
        reverted: list[tuple[Hunk, int, int]] = []
        redone: set[int] = set()
        for k, (i1, i2, j1, j2) in enumerate(moves):
            for hunk in at.get(i1, ()):
                if hunk.status == "pending":
                    if i2 == hunk.new_end and lines[j1:j2] == hunk.base_lines:
                        hunk.status = "reverted"
                        reverted.append((hunk, j1, k))
                        break
                elif (
                    i2 - i1 == len(hunk.base_lines)
                    and self._cur[i1:i2] == hunk.base_lines
                    and lines[j1:j2] == hunk.new_lines
                ):
                    hunk.status = "pending"  # _rediff gives the fresh hunk its id
                    redone.add(k)
                    break
        return reverted, redone

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _sort(self) -> None:
        self._hunks.sort(key=lambda h: (h.new_start, h.id))

    def _find(self, hunk_id: int) -> Hunk:
        for hunk in self._hunks:
            if hunk.id == hunk_id:
                return hunk
        raise ReviewError(f"{self.path}: no hunk {hunk_id} in turn {self.turn}")

    def _targets(self, hunk_id: int | None, decision: str, conflicts: bool) -> list[Hunk]:
        if hunk_id is None:
            wanted = {"pending", "conflict"} if conflicts else {"pending"}
            hunks = [h for h in self._hunks if h.status in wanted]
        else:
            hunk = self._find(hunk_id)
            if hunk.status == decision:
                return []  # deciding twice the same way is a no-op
            if not hunk.open:
                raise ReviewError(f"{self.path}: hunk {hunk_id} is already {hunk.status}")
            hunks = [hunk]
        # Bottom-up, so the shifts of one decision never touch the next target.
        return sorted(hunks, key=lambda h: h.new_start, reverse=True)

    def _rediff(self) -> None:
        """Recompute pending hunks; unchanged ones keep their ids."""
        old = [h for h in self._hunks if h.status == "pending"]
        fresh = [
            Hunk(0, i1, self._base[i1:i2], j1, self._cur[j1:j2])
            for i1, i2, j1, j2 in diff_regions(self._base, self._cur)
        ]
        if not fresh and self._base_exists != self._cur_exists:
            fresh = [Hunk(0, 0, [], 0, [])]  # an empty file created or deleted

        def key(h: Hunk) -> tuple[tuple[str, ...], tuple[str, ...]]:
            return tuple(h.base_lines), tuple(h.new_lines)

        matcher = difflib.SequenceMatcher(
            None, [key(h) for h in old], [key(h) for h in fresh], autojunk=False
        )
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                fresh[block.b + k].id = old[block.a + k].id
        for hunk in fresh:
            if not hunk.id:
                hunk.id = self._new_id()
        self._hunks = [*(h for h in self._hunks if h.status != "pending"), *fresh]
        self._sort()

    def _shift(
        self,
        skip: Hunk,
        *,
        base_from: int = -1,
        base_by: int = 0,
        new_from: int = -1,
        new_by: int = 0,
    ) -> None:
        for hunk in self._hunks:
            if hunk is skip:
                continue
            if base_by and base_from >= 0 and hunk.base_start >= base_from:
                hunk.base_start += base_by
            if new_by and new_from >= 0 and hunk.new_start >= new_from:
                hunk.new_start += new_by

    def _accept_pending(self, hunk: Hunk) -> None:
        end = hunk.base_end
        self._base[hunk.base_start : end] = hunk.new_lines
        self._shift(hunk, base_from=end, base_by=len(hunk.new_lines) - len(hunk.base_lines))
        hunk.status = "accepted"
        self._settle_existence(accepted=True)

    def _reject_pending(self, hunk: Hunk) -> None:
        end = hunk.new_end
        self._cur[hunk.new_start : end] = hunk.base_lines
        self._shift(hunk, new_from=end, new_by=len(hunk.base_lines) - len(hunk.new_lines))
        hunk.status = "rejected"
        self._settle_existence(accepted=False)

    def _settle_existence(self, *, accepted: bool) -> None:
        # A created or deleted file is one whole-file hunk: its decision
        # decides whether the file exists.
        if self._base_exists == self._cur_exists or any(h.status == "pending" for h in self._hunks):
            return
        if accepted:
            self._base_exists = self._cur_exists
        else:
            self._cur_exists = self._base_exists

    def _cur_to_base(self, pos: int) -> int:
        """Map a current-text line to the baseline (exact outside pending hunks)."""
        delta = 0
        for hunk in self._hunks:
            if hunk.status == "pending" and hunk.new_end <= pos:
                delta += len(hunk.base_lines) - len(hunk.new_lines)
        return pos + delta

    def _accept_conflict(self, hunk: Hunk) -> None:
        assert hunk.proposed is not None
        start, end, proposed = hunk.new_start, hunk.new_end, hunk.proposed
        user_lines = hunk.new_lines
        base_at = self._cur_to_base(start)
        clear = (
            not any(
                h.status == "pending" and h.new_start <= end and start <= h.new_end
                for h in self._hunks
            )
            and self._base[base_at : base_at + len(user_lines)] == user_lines
        )
        self._cur[start:end] = proposed
        self._shift(hunk, new_from=end, new_by=len(proposed) - len(user_lines))
        hunk.status = "accepted"
        hunk.base_start, hunk.base_lines, hunk.new_lines = base_at, list(user_lines), proposed
        if clear:
            # The region is identical in baseline and current: accept in both.
            self._base[base_at : base_at + len(user_lines)] = proposed
            self._shift(
                hunk, base_from=base_at + len(user_lines), base_by=len(proposed) - len(user_lines)
            )
        else:
            # Tangled with a pending agent hunk: the proposal joins it for review.
            self._rediff()
