"""Per-turn changesets: what the agent changed, file by file (a :class:`FileChange`
holds one file's hunks), and the session's store of them, one per turn.

Nothing here does I/O: callers pass texts in and write the returned text out.
"""

from __future__ import annotations

__all__ = ["Changeset", "RestoreOutcome", "ReviewStore", "WriteOutcome"]

import copy
import os
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from ._binary import BinaryChange
from ._diff import Hunk, strip_eol
from ._filechange import FileChange, FileKind, ReviewError, Rows
from ._merge import MergeResult, hold_back, merge3, unmerged


class WriteOutcome(msgspec.Struct, frozen=True):
    """What an agent write turned into.

    ``text`` is what the buffer/file must now hold (the agent's text merged
    with the user's edits); ``conflicts`` are the hunks where the user's text
    was kept and the agent's lines await a decision.
    """

    text: str
    conflicts: list[Hunk]


class RestoreOutcome(msgspec.Struct, frozen=True):
    """What a restore (:meth:`ReviewStore.restore`) turned a file into.

    ``text`` is what the file must now hold (``None``: deleted); ``conflicts``
    the hunks where the user's later edits were kept and the restored lines
    await a decision; ``clashes`` the turns that could not be taken back (why).
    """

    text: str | None
    conflicts: list[Hunk]
    clashes: list[str]


class Changeset:
    """Every file the agent changed in one turn."""

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self._files: dict[str, FileChange] = {}
        self._binaries: dict[str, BinaryChange] = {}  # files with no text: a whole each

    def __repr__(self) -> str:
        open_ = sum(f.open for f in self._files.values())
        return f"<Changeset turn {self.turn}: {len(self._files)} files, {open_} open>"

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and _norm(path) in self._files

    def files(self) -> list[FileChange]:
        """Changed files in the order they were first recorded."""
        return list(self._files.values())

    def binaries(self) -> list[BinaryChange]:
        """Changed files with no text, in the order they were first recorded."""
        return list(self._binaries.values())

    def binary(self, path: str) -> BinaryChange | None:
        """The change to ``path`` when it was recorded as a file with no text."""
        return self._binaries.get(_norm(path))

    def record_binary(
        self, path: str, before: bytes | None, before_size: int | None, size: int | None,
        *, existed: bool, kind: FileKind, left: str | None = None,
        before_digest: str | None = None,
    ) -> BinaryChange:  # fmt: skip
        """Record that ``path``, a file with no text, is now ``size`` bytes (None:
        deleted) of digest ``left``. Its first record fixes what it was before the
        turn (``existed``, its ``before`` bytes if kept, their size, or their digest
        where read but not kept); a later one
        only what it is now. A file this turn first changed as text (it turned
        binary since) is one change from what it was before the turn: its text
        change goes, its hunks stale against bytes."""
        key = _norm(path)
        change = self._binaries.get(key)
        self._files.pop(key, None)
        if change is None:
            change = self._binaries[key] = BinaryChange(
                key, self.turn, kind, existed, before, before_size, size, left,
                before_digest=before_digest,
            )  # fmt: skip
        else:
            change.changed(size, left)
        return change

    def file(self, path: str) -> FileChange:
        """The change to ``path``. Raises :class:`ReviewError` when none was recorded."""
        try:
            return self._files[_norm(path)]
        except KeyError:
            raise ReviewError(f"{path}: no changes in turn {self.turn}") from None

    def record(
        self, path: str, baseline: str | None, current: str | None, kind: FileKind
    ) -> FileChange:
        """Record that ``path`` went from ``baseline`` to ``current``.

        The first record of a path fixes its baseline. A later record whose
        ``baseline`` differs from the last recorded current text means someone
        else (the user) changed the file in between: that edit is folded into
        the baseline first (see :meth:`FileChange.user_edit`). ``None`` means
        the file does not exist. The first ``kind`` sticks.
        """
        key = _norm(path)
        change = self._files.get(key)
        if change is None:
            change = self._files[key] = FileChange(key, self.turn, kind, baseline)
        elif baseline != change.current:
            change.user_edit(baseline)
        change.set_current(current)
        return change

    def write(
        self,
        path: str,
        agent_text: str,
        *,
        editor_text: str | None,
        agent_read: str | None,
        kind: FileKind = "write",
        saved: str | None = None,
    ) -> WriteOutcome:
        """An agent write of ``agent_text``, merged with edits the agent has not seen.

        ``editor_text`` is what the buffer (or disk) holds now, ``agent_read``
        the text the agent last read or wrote (``None``: unknown, every place
        the two texts differ is a conflict). Changes on both sides merge, lines
        both inserted at one place too (the user's first); where the user
        changed the same lines since the agent's read, the user's lines stay and
        a conflict hunk holds the agent's. ``saved``: the file's text behind a buffer with unsaved
        edits, which the change is written to too; where the change reaches into
        lines the buffer holds unsaved, the same (see :func:`hold_back`).
        """
        merged = _landing(agent_text, editor_text, agent_read, saved)
        change = self.record(path, editor_text, merged.text, kind)
        return WriteOutcome(merged.text, change.add_conflicts(merged.conflicts))

    def hunks(self, path: str) -> list[Hunk]:
        """All hunks of ``path`` with their status, in file order."""
        return self.file(path).hunks()

    def accept(
        self, path: str, hunk_id: int | None = None, *, include_conflicts: bool = False
    ) -> str | None:
        """See :meth:`FileChange.accept`."""
        return self.file(path).accept(hunk_id, include_conflicts=include_conflicts)

    def reject(self, path: str, hunk_id: int | None = None) -> str | None:
        """See :meth:`FileChange.reject`."""
        return self.file(path).reject(hunk_id)

    def take_back(self, path: str) -> str | None:
        """See :meth:`FileChange.take_back`."""
        return self.file(path).take_back()


class ReviewStore:
    """The changesets of one session, one per turn, plus what the agent has seen."""

    def __init__(self) -> None:
        self._turns: list[Changeset] = []
        # path -> the text the agent last read or wrote: the merge base of its next write.
        self._agent_view: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<ReviewStore {len(self._turns)} turns>"

    def begin_turn(self) -> Changeset:
        """Start the next turn's changeset (turns count from 1)."""
        changeset = Changeset(len(self._turns) + 1)
        self._turns.append(changeset)
        return changeset

    @property
    def current(self) -> Changeset | None:
        """The latest turn's changeset."""
        return self._turns[-1] if self._turns else None

    def turns(self) -> list[Changeset]:
        """All changesets, oldest first."""
        return list(self._turns)

    def open_hunks(self, of_path: Callable[[str], bool] | None = None) -> int:
        """How many hunks of every turn await a decision (pending or conflict): of
        every file, or of those whose path ``of_path`` keeps."""
        hunks = sum(
            h.open
            for changeset in self._turns
            for change in changeset.files()
            if of_path is None or of_path(change.path)
            for h in change.hunks()
        )
        return hunks + sum(
            binary.open
            for changeset in self._turns
            for binary in changeset.binaries()
            if of_path is None or of_path(binary.path)
        )

    def turn(self, number: int) -> Changeset:
        """Changeset of turn ``number``. Raises :class:`ReviewError` when unknown."""
        if not 1 <= number <= len(self._turns):
            raise ReviewError(f"no turn {number}")
        return self._turns[number - 1]

    def note_read(self, path: str, text: str) -> None:
        """The agent read ``path`` (fs/read_text_file) and saw ``text``."""
        self._agent_view[_norm(path)] = text

    def checkpoint(self, path: str) -> Callable[[], None]:
        """A way back to what is recorded of ``path`` now, in every turn: calling
        the result forgets what was recorded of it since (a write, a decision, a
        restore whose text could not be written to the file)."""
        key = _norm(path)
        kept = [(changeset, copy.deepcopy(changeset._files.get(key))) for changeset in self._turns]
        view = self._agent_view.get(key)

        def rollback() -> None:
            for changeset, change in kept:
                if change is None:
                    changeset._files.pop(key, None)
                else:
                    changeset._files[key] = change
            for changeset in self._turns[len(kept) :]:  # begun since, by what recorded it
                changeset._files.pop(key, None)
            if view is None:
                self._agent_view.pop(key, None)
            else:
                self._agent_view[key] = view

        return rollback

    def write(
        self,
        path: str,
        agent_text: str,
        *,
        editor_text: str | None,
        unseen: str | None = None,
        kind: FileKind = "write",
        saved: str | None = None,
    ) -> WriteOutcome:
        """Merge an agent write into the current turn (see :meth:`Changeset.write`).

        The merge base is the text the agent last read or wrote through us; for a
        file it has not, ``unseen`` (the disk's text, which it read on its own; None:
        no file on disk, what the agent read is unknown).
        """
        key = _norm(path)
        outcome = self._now().write(
            key,
            agent_text,
            editor_text=editor_text,
            agent_read=self._agent_view.get(key, unseen),
            kind=kind,
            saved=saved,
        )
        self._agent_view[key] = agent_text
        return outcome

    def write_behind(
        self, path: str, disk_before: str, disk_now: str, *, editor_text: str, kind: FileKind
    ) -> WriteOutcome:
        """The agent changed ``path`` on disk by itself, from ``disk_before`` to
        ``disk_now``, while its buffer held unsaved text, ``editor_text``: that change
        merged into the buffer's text as :meth:`write` merges a write (the user's
        lines stay on a clash, the agent's wait in a conflict hunk). The review then
        follows the buffer's text."""
        merged = merge3(disk_before, editor_text, disk_now, union=True)
        change = self.record(path, editor_text, merged.text, kind)
        self._agent_view[change.path] = disk_now
        return WriteOutcome(merged.text, change.add_conflicts(merged.conflicts))

    def merged(
        self,
        path: str,
        agent_text: str,
        *,
        editor_text: str | None,
        unseen: str | None = None,
        saved: str | None = None,
    ) -> MergeResult:
        """What :meth:`write` would give ``path`` now (``.text``), and where it would
        keep the user's lines with the agent's waiting (``.conflicts``): recording
        nothing (a preview)."""
        agent_read = self._agent_view.get(_norm(path), unseen)
        return _landing(agent_text, editor_text, agent_read, saved)

    def agent_read(self, path: str) -> str | None:
        """The text the agent last read or wrote of ``path`` through us (None: none)."""
        return self._agent_view.get(_norm(path))

    def record(
        self, path: str, baseline: str | None, current: str | None, kind: FileKind
    ) -> FileChange:
        """Record a change the agent made itself (see :meth:`Changeset.record`)."""
        change = self._now().record(path, baseline, current, kind)
        if current is None:
            self._agent_view.pop(change.path, None)
        else:
            self._agent_view[change.path] = current
        return change

    def hunks(self, path: str, turn: int | None = None) -> list[Hunk]:
        """Hunks of ``path`` in ``turn`` (default: the latest turn that changed it)."""
        return self._changeset_for(path, turn).hunks(path)

    def accept(
        self,
        path: str,
        hunk_id: int | None = None,
        *,
        turn: int | None = None,
        include_conflicts: bool = False,
    ) -> str | None:
        """Accept in ``turn`` (default: latest that changed ``path``); returns the file's text.

        See :meth:`FileChange.accept`; an earlier turn is handled as in :meth:`reject`.
        """
        return self._decide(
            path, turn, lambda c: c.accept(path, hunk_id, include_conflicts=include_conflicts)
        )

    def reject(
        self, path: str, hunk_id: int | None = None, *, turn: int | None = None
    ) -> str | None:
        """Reject in ``turn`` (default: latest that changed ``path``); returns the file's text.

        When a later turn changed the file too, the revert is merged onto the
        latest text and shows up in that later turn as a user edit. Raises
        :class:`ReviewError` when the revert clashes with the later changes
        (nothing is changed then).
        """
        return self._decide(path, turn, lambda c: c.reject(path, hunk_id))

    def restore(self, path: str, turn: int, editors: str = "you") -> RestoreOutcome:
        """Take ``path`` back to its text before ``turn``, as one change: every change
        of that turn and later is taken out (:meth:`FileChange.take_back`: open hunks
        rejected, accepted ones reverted), newest turn first.

        The user's edits made since the agent's last change of the file (where it
        differs from :attr:`FileChange.left`) are never overwritten: taken out
        first, they are merged back onto the restored text, and where the restore
        would replace them the user's lines stay, the restored ones waiting in a
        conflict hunk. A file the turns created that holds such edits is left as it
        is (``clashes`` says so): removing it would take them too. A turn whose
        changes clash with later turns' is left as it is, and an accepted change the
        user edited afterwards stays: ``clashes`` names both, and who made such
        edits as ``editors`` says (the subject of a sentence: "you").
        """
        latest = self._changeset_for(path, None).file(path)
        now, left = latest.current, latest.left
        theirs = now is not None and now != left
        first = next((cs.file(path) for cs in self._turns[turn - 1 :] if path in cs), None)
        if first is None:
            return RestoreOutcome(now, [], [])
        if theirs and first.original is None:
            return RestoreOutcome(now, [], [f"{path}: not removed, {editors} edited it since"])
        if theirs:
            latest.user_edit(left)
        clashes = []
        for changeset in reversed(self._turns):
            if changeset.turn < turn:
                break
            if path not in changeset or not changeset.file(path).applied:
                continue
            try:
                self._decide(path, changeset.turn, lambda c: c.take_back(path))
            except ReviewError as err:
                clashes.append(str(err))
                continue
            if any(h.status == "accepted" for h in changeset.hunks(path)):
                clashes.append(
                    f"{path}: {editors} edited a change of turn {changeset.turn} after it "
                    "was accepted; that text stays"
                )
        restored = latest.current
        if not theirs or restored is None:
            return RestoreOutcome(restored, [], clashes)
        assert now is not None
        merged = merge3(left, now, restored)
        latest.user_edit(merged.text)
        return RestoreOutcome(merged.text, latest.add_conflicts(merged.conflicts), clashes)

    def changes(self, turn: int | None = None, *, all_turns: bool = False) -> list[dict[str, Any]]:
        """Plain-data summary for Lua (msgpack-safe), one dict per changed file.

        ``turn`` defaults to the latest; ``all_turns`` lists every turn, newest
        first. Each dict: ``path, kind, turn, created, deleted, open`` and
        ``hunks: [{id, status, base_start, base_count, new_start, new_count,
        header, preview, proposed}]``. Positions are 0-based lines, new ones in the
        file now and base ones in what rejecting the turn's open hunks would leave
        (:meth:`baseline`): an earlier turn's file with open hunks has them where a
        later turn's changes moved them (:meth:`FileChange.placed`). ``header`` and
        ``preview`` are the turn's own change: ``-``/``+`` diff lines without
        terminators; ``proposed`` (conflict hunks) the agent's lines. A file with no
        text comes after a turn's others, with no hunks and ``binary: {status, size,
        before_size, restorable}`` (:meth:`BinaryChange.summary`).
        """
        if all_turns:
            changesets = self._turns[::-1]
        else:
            changesets = [self.turn(turn)] if turn is not None else self._turns[-1:]
        latest: dict[str, FileChange] = {}
        for changeset in reversed(self._turns):
            for change in changeset.files():
                latest.setdefault(change.path, change)
        return [
            summary
            for changeset in changesets
            for summary in [
                *(_file_summary(change, latest[change.path]) for change in changeset.files()),
                *(binary.summary() for binary in changeset.binaries()),
            ]
        ]

    def binary(self, path: str, turn: int | None = None) -> BinaryChange | None:
        """The change of ``path`` as a file with no text in ``turn`` (default: the
        latest turn that recorded it so)."""
        changesets = [self.turn(turn)] if turn is not None else reversed(self._turns)
        return next((c.binary(path) for c in changesets if c.binary(path) is not None), None)

    def record_binary(
        self, path: str, before: bytes | None, before_size: int | None, size: int | None,
        *, existed: bool, kind: FileKind, left: str | None = None,
        before_digest: str | None = None,
    ) -> BinaryChange:  # fmt: skip
        """Record a change of a file with no text (see :meth:`Changeset.record_binary`)."""
        self._agent_view.pop(_norm(path), None)
        return self._now().record_binary(
            path, before, before_size, size, existed=existed, kind=kind, left=left,
            before_digest=before_digest,
        )  # fmt: skip

    def baseline(self, path: str, turn: int | None = None) -> str | None:
        """What rejecting the open hunks of ``turn`` (default: the latest that changed
        ``path``) would leave in the file now: the turn's baseline, with the changes
        of later turns to the file (see :meth:`FileChange.placed`)."""
        change = self._changeset_for(path, turn).file(path)
        latest = self._changeset_for(path, None).file(path)
        return change.baseline if change is latest else change.placed(latest.current)[0]

    # -- internals -----------------------------------------------------------------

    def _now(self) -> Changeset:
        return self._turns[-1] if self._turns else self.begin_turn()

    def _changeset_for(self, path: str, turn: int | None) -> Changeset:
        if turn is not None:
            return self.turn(turn)
        for changeset in reversed(self._turns):
            if path in changeset:
                return changeset
        raise ReviewError(f"{path}: no recorded changes")

    def _decide(
        self, path: str, turn: int | None, decide: Callable[[_Decides], str | None]
    ) -> str | None:
        changeset = self._changeset_for(path, turn)
        latest = self._changeset_for(path, None)
        if latest is changeset:
            return decide(changeset)
        # An earlier turn: try the decision on a copy, merge its effect onto
        # the latest text, and only then commit it.
        change = changeset.file(path)
        trial = copy.deepcopy(change)
        before, after = change.current, decide(_Single(trial))
        now = latest.file(path).current
        if before == now:
            final = after
        elif before == after:
            final = now
        else:
            merged = merge3(before or "", now or "", after or "")
            if merged.conflicts:
                raise ReviewError(
                    f"{path}: turn {latest.turn} changed the same lines; review that turn first"
                )
            final = merged.text
        decide(changeset)
        if final != now:
            latest.file(path).decided(final)
        return final


class _Decides(Protocol):
    def accept(
        self, path: str, hunk_id: int | None = None, *, include_conflicts: bool = False
    ) -> str | None: ...

    def reject(self, path: str, hunk_id: int | None = None) -> str | None: ...

    def take_back(self, path: str) -> str | None: ...


class _Single:
    """A one-file stand-in for a Changeset, for trial decisions."""

    def __init__(self, change: FileChange) -> None:
        self._change = change

    def accept(
        self, path: str, hunk_id: int | None = None, *, include_conflicts: bool = False
    ) -> str | None:
        return self._change.accept(hunk_id, include_conflicts=include_conflicts)

    def reject(self, path: str, hunk_id: int | None = None) -> str | None:
        return self._change.reject(hunk_id)

    def take_back(self, path: str) -> str | None:
        return self._change.take_back()


def _norm(path: str) -> str:
    return os.path.normpath(path)


def _landing(
    agent_text: str, editor_text: str | None, agent_read: str | None, saved: str | None
) -> MergeResult:
    """What an agent write leaves in the buffer or file (:meth:`Changeset.write`)."""
    merged = _merge_write(agent_text, editor_text, agent_read)
    if saved is not None and editor_text is not None:
        merged = hold_back(editor_text, merged, saved)
    return merged


def _merge_write(agent_text: str, editor_text: str | None, agent_read: str | None) -> MergeResult:
    """An agent write merged with the edits it has not seen: the agent's text where
    there is no file; where what the agent saw of it is unknown, every line its text
    and the file's differ waits as a conflict (the differences may be the user's)."""
    if editor_text is None:
        return MergeResult(agent_text, [])
    if agent_read is None:
        return unmerged(editor_text, agent_text)
    # Lines both inserted at one place are both kept: the user's typing is never
    # traded for the agent's, and the agent's lines are a hunk like any other.
    return merge3(agent_read, editor_text, agent_text, union=True)


def _preview(hunk: Hunk) -> list[str]:
    if hunk.status == "conflict" and hunk.proposed is not None:
        old, new = hunk.new_lines, hunk.proposed
    else:
        old, new = hunk.base_lines, hunk.new_lines
    return ["-" + strip_eol(line) for line in old] + ["+" + strip_eol(line) for line in new]


def _file_summary(change: FileChange, latest: FileChange) -> dict[str, Any]:
    """``change`` as :meth:`ReviewStore.changes` lists it, ``latest`` being the latest
    turn's change to its file: open hunks of an earlier turn are placed in its text."""
    placed = change.open and change is not latest
    rows = change.placed(latest.current)[1] if placed else {}
    return {
        "path": change.path,
        "kind": change.kind,
        "turn": change.turn,
        "created": change.original is None and change.current is not None,
        "deleted": change.original is not None and change.current is None,
        "open": change.open,
        "hunks": [_hunk_summary(h, rows.get(h.id)) for h in change.hunks()],
    }


def _hunk_summary(h: Hunk, rows: Rows | None) -> dict[str, Any]:
    base_start, base_count, new_start, new_count = rows or (
        h.base_start,
        len(h.base_lines),
        h.new_start,
        len(h.new_lines),
    )
    return {
        "id": h.id,
        "status": h.status,
        "base_start": base_start,
        "base_count": base_count,
        "new_start": new_start,
        "new_count": new_count,
        "header": h.header,
        "preview": _preview(h),
        "proposed": None if h.proposed is None else [strip_eol(line) for line in h.proposed],
    }
