"""The review of a worktree chat (decision 0046): the agent's changes stay in its
worktree and are listed by the user's own paths; accepting a hunk (or a file)
brings it into the user's file, buffer and disk in one undo step, merged with
what the user changed since (where both changed the same lines the user's stay
and the agent's wait in a conflict hunk); rejecting drops it from the worktree.

Two reviews make it. :class:`WorktreeChanges` reviews the worktree as any chat's
review does its directory (the agent's reads and writes, the turn's disk checks,
restores); :class:`Landed` reviews the user's files the accepted hunks were
brought into, where only conflicts wait. The editor gets both as the chat's one
review: the worktree's files under the user's paths, each with its ``source``
(the path in the worktree, which decisions on it name), then the user's files
with conflicts.
"""

from __future__ import annotations

__all__ = ["Landed", "WorktreeChanges", "mode_changes"]

import contextlib
import hashlib
import os
import stat
from collections.abc import Collection, Sequence
from typing import Any

import anyio.to_thread

from acp_nvim.client.editor import Editor
from acp_nvim.client.services import files
from acp_nvim.client.services.changes import Decision, SessionChanges, put_bytes
from acp_nvim.client.services.disk_changes import NOTHING, SNAPSHOT_MAX_BYTES, Nothing
from acp_nvim.client.services.git import GitError, git
from acp_nvim.client.services.worktrees import copied_digests
from acp_nvim.client.session.workspace import Worktree, shown_path
from acp_nvim.client.tasks import Tasks
from acp_nvim.review import BinaryChange, ReviewError, ReviewStore


def _paths(store: ReviewStore) -> set[str]:
    """The paths ``store`` has changes of, in any turn."""
    return {change.path for changeset in store.turns() for change in changeset.files()}


def _take_execute_bit(worktree: Worktree, path: str) -> None:
    """The user's file ``path`` takes the execute bit of its copy in ``worktree``
    where the agent changed it and the user did not (:func:`_execute_bit_to_take`):
    a script the agent made, or `chmod +x`, in its worktree stays one in the user's
    project."""
    with contextlib.suppress(OSError):
        mode = _execute_bit_to_take(worktree, path)
        if mode is not None:
            os.chmod(path, mode)


def _execute_bit_to_take(
    worktree: Worktree, path: str, base_mode: bytes | None = None
) -> int | None:
    """The mode the user's file ``path`` takes from its copy in ``worktree``, whose
    execute bit the agent changed (from the worktree's first commit, where a new file
    has none) and the user did not; None: nothing to take. ``base_mode``: the file's
    mode in that commit as git lists it (``b"100755"``), asked of git where not
    given (and only where the two files' execute bits differ)."""
    copy = worktree.agent_path(path)
    if copy is None:
        return None
    with contextlib.suppress(OSError, GitError):
        theirs = os.stat(copy).st_mode & stat.S_IXUSR
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & stat.S_IXUSR == theirs:
            return None
        if base_mode is None:
            args = ("--literal-pathspecs", "ls-tree", worktree.base, "--", path)
            base_mode = git(worktree.project, *args).split(b" ", 1)[0]
        base = stat.S_IXUSR if base_mode == b"100755" else 0
        if mode & stat.S_IXUSR == base:  # the agent's change alone
            return (mode | (mode & 0o444) >> 2) if theirs else (mode & ~0o111)
    return None


def mode_changes(worktree: Worktree, rejected: Collection[str] = ()) -> dict[str, int]:
    """The user's files whose execute bit the agent changed in ``worktree`` since its
    first commit (`chmod +x`) and the user's file has not taken yet, each with the
    mode it takes (:func:`_execute_bit_to_take`): a mode changed alone has no hunk in the
    review. One ``git diff``, whose old modes are the first commit's. Not those
    whose copies' paths are in ``rejected``: the user rejected the agent's change
    of them, and their mode stays the user's. None in a worktree whose directory
    is gone (the user removed it).

    Raises:
        GitError: git could not tell (it took longer than its limit, or failed):
            not knowing is not "none changed".
    """
    if not os.path.isdir(worktree.path):
        return {}
    found = {}
    listed = git(worktree.path, "diff", "--raw", "-z", "--no-renames", worktree.base)
    fields = listed.split(b"\0")
    for head, name in zip(fields[::2], fields[1::2], strict=False):
        old, new = head.split(b" ")[:2]
        old = old.lstrip(b":")
        if old == new or new not in (b"100644", b"100755"):
            continue
        copy = os.path.join(worktree.path, os.fsdecode(name))
        user = worktree.user_path(copy)
        if user is None or copy in rejected or not os.path.isfile(user):
            continue
        if (mode := _execute_bit_to_take(worktree, user, old)) is not None:
            found[user] = mode
    return found


def _take_mode_changes(worktree: Worktree, rejected: Collection[str]) -> None:
    """The user's files take the execute bits of :func:`mode_changes`: the review
    lists text, so no hunk brings such a change in. Where git cannot tell, none:
    the user's modes stay theirs."""
    with contextlib.suppress(GitError):
        for user, mode in mode_changes(worktree, rejected).items():
            with contextlib.suppress(OSError):
                os.chmod(user, mode)


def _rejected(store: ReviewStore) -> set[str]:
    """The paths whose latest change in ``store`` the user rejected whole: none of
    the agent's hunks stands, or its bytes were put back."""
    latest: dict[str, bool] = {}
    for changeset in store.turns():  # oldest first: a later turn's change wins
        for change in changeset.files():
            latest[change.path] = bool(change.hunks()) and not change.applied
        for binary in changeset.binaries():
            latest[binary.path] = binary.status == "rejected"
    return {path for path, rejected in latest.items() if rejected}


def _open_hunks(store: ReviewStore, path: str, hunk: int | None) -> bool:
    """Whether ``path`` has open hunks in ``store`` (hunk ``hunk`` among them)."""
    return any(
        h.open and (hunk is None or h.id == hunk)
        for changeset in store.turns()
        if path in changeset
        for h in changeset.file(path).hunks()
    )


class WorktreeChanges(SessionChanges):
    """The review of a chat working in ``worktree``: the worktree's, with what it
    brings into the user's files (:attr:`landed`)."""

    def __init__(
        self,
        editor: Editor,
        chat_id: int,
        cwd: str,
        tasks: Tasks,
        worktree: Worktree,
        *,
        roots: Sequence[str] = (),
        missing_file_as_empty: bool = False,
    ) -> None:
        # Saved in the worktree as the agent leaves them: nothing there is the user's.
        super().__init__(
            editor,
            chat_id,
            cwd,
            tasks,
            roots=roots,
            auto_save=True,
            missing_file_as_empty=missing_file_as_empty,
        )
        self.worktree = worktree
        self.landed = Landed(self)
        # What the user's files copied in held: an accept of a change of one over
        # 2 MiB checks your file against it (decision 0099).
        self.disk.digests = copied_digests(worktree)

    def __repr__(self) -> str:
        return f"<WorktreeChanges {self.worktree.branch} {self.store!r}, {self.waiting()} waiting>"

    async def _check(self, named: dict[str, None]) -> None:
        """:meth:`SessionChanges._check`, but for a worktree removed outside Neovim: the
        files it took with it are no deletions of the agent's (accepted, they deleted
        your files)."""
        if os.path.isdir(self.worktree.path):
            await super()._check(named)

    def waiting(self) -> int:
        """How many hunks wait in the worktree (neither brought in nor dropped)."""
        return self.store.open_hunks(lambda path: self.worktree.user_path(path) is not None)

    async def left_waiting(self, paths: Sequence[str]) -> None:
        """The chat reopened in its kept worktree: each of the user's files ``paths``
        whose hunks waited there when it closed waits again, as the difference from
        the user's file to the worktree's copy (what accepting brings in: the review's
        own baselines went with the chat)."""
        async with self._lock:
            for path in paths:
                mine = self.worktree.agent_path(path)
                if mine is None:
                    continue
                try:
                    yours = await files.load(self.editor, path)
                    theirs = await files.load(self.editor, mine)
                except files.FileError as err:
                    if err.reason == "binary":  # one of them has no text: a whole change
                        await self._left_bytes(path, mine)
                    continue  # else unreadable now: git shows it in the worktree
                if yours.text != theirs.text:
                    self.store.record(mine, yours.text, theirs.text, "write")
            self._publish()

    async def _left_bytes(self, path: str, mine: str) -> None:
        """Review again the user's file ``path`` whose copy ``mine`` (or itself) has
        no text, as one change from the user's bytes (kept, as a turn start keeps a
        file's, up to ``SNAPSHOT_MAX_BYTES``; of a larger file their digest, which
        an accept needs, decision 0099) to the worktree's."""
        left = await anyio.to_thread.run_sync(files.digest_of, mine)
        was = await anyio.to_thread.run_sync(files.digest_of, path)
        if was == left:
            return  # the same bytes (or neither is there)
        yours = await anyio.to_thread.run_sync(files.read_bytes, path, SNAPSHOT_MAX_BYTES + 1)
        stats = await anyio.to_thread.run_sync(lambda: [files.stat_of(p) for p in (path, mine)])
        before = yours if yours is not None and len(yours) <= SNAPSHOT_MAX_BYTES else None
        sizes = [stat[0] if stat is not None else None for stat in stats]
        self.store.record_binary(
            mine, before, sizes[0], sizes[1], existed=yours is not None, kind="write",
            left=left, before_digest=was if before is None else None,
        )  # fmt: skip

    def rejected(self) -> set[str]:
        """The worktree's files whose latest change the user rejected whole: their
        mode stays the user's (:func:`mode_changes`)."""
        return _rejected(self.store)

    def reviewed_path(self, path: str) -> str:
        """The user's file a worktree file stands for; others by their own path."""
        return self.worktree.user_path(path) or path

    def summary(self) -> dict[str, Any]:
        """The chat's review: the worktree's files by the user's paths (``source``:
        the worktree's), then the user's files where brought-in hunks clash."""
        own = super().summary()
        shown = []
        for entry in own["files"]:
            user = self.worktree.user_path(entry["path"])
            source = {} if user is None else {"path": user, "source": entry["path"]}
            shown.append({**entry, **source})
        # Listed under the turn whose hunks brought them in (the landed store has
        # turns of its own, which the chat does not count).
        origin = self.landed.origin
        landed = [
            {**e, "turn": origin.get(e["path"], e["turn"])}
            for e in self.landed.store.changes(all_turns=True)
            if e["open"]
        ]
        return {**own, "files": sorted(shown + landed, key=lambda e: -e["turn"])}  # newest first

    async def decide(
        self,
        decision: Decision,
        path: str | None = None,
        hunk: int | None = None,
        turn: int | None = None,
    ) -> None:
        """Accept (bring in) or reject (drop) hunks waiting in the worktree, named by
        their path there or the user's; a user's file where brought-in hunks clash
        is decided as any review's (accepting a conflict puts the agent's lines in)."""
        if path is None:
            await super().decide(decision, None, hunk, turn)
            if decision == "reject":  # the clashes: the user's lines stay
                await self.landed.decide(decision)
            elif turn is None:  # everything: modes changed alone have no hunk to accept
                rejected = self.rejected()
                await anyio.to_thread.run_sync(_take_mode_changes, self.worktree, rejected)
            return
        path = os.path.normpath(path)
        mine = self.worktree.agent_path(path)
        if self.worktree.user_path(path) is not None or mine is None or path in _paths(self.store):
            await super().decide(decision, path, hunk, turn)  # the worktree's, or outside both
            return
        landed = _open_hunks(self.landed.store, path, hunk)
        if landed:  # by the landed store's own turns: its latest change of the file
            await self.landed.decide(decision, path, hunk)
        if not landed or (hunk is None and mine in _paths(self.store)):
            await super().decide(decision, mine, hunk, turn)

    async def sync(self, path: str) -> None:
        await super().sync(path)
        await self.landed.sync(path)

    def baseline(self, path: str, turn: int | None = None) -> None:
        """A user's file where brought-in hunks clash: its text before them; else the
        worktree review's (a file there, or one the agent changed outside it)."""
        path = os.path.normpath(path)
        if path in _paths(self.landed.store):
            self.landed.baseline(path)
        else:
            super().baseline(path, turn)

    async def _decide_one(
        self, decision: Decision, path: str, hunk: int | None, turn: int | None
    ) -> None:
        """An accepted hunk of the worktree's copy of a user's file goes into that
        file: what accepting it added to the worktree review's baseline."""
        user = self.worktree.user_path(path)
        if decision == "reject" or user is None:
            await super()._decide_one(decision, path, hunk, turn)
            return
        if (binary := self.store.binary(path, turn)) is not None:
            await self._accept_bytes(user, binary)
            return
        change = (self.store.turn(turn) if turn is not None else self._latest(path)).file(path)
        before = change.baseline
        await super()._decide_one(decision, path, hunk, turn)
        if change.baseline != before:
            await self.landed.land(user, before, change.baseline, change.turn)

    async def _accept_bytes(self, user: str, change: BinaryChange) -> None:
        """Accept ``change`` of a file with no text, its bytes brought into the user's
        file ``user`` whole (bytes cannot be merged); refused, the change left open,
        where those bytes are not known or the user's file holds none of the bytes
        the worktree's did before the agent's changes (the user changed it since)."""
        status = change.status
        await super()._decide_one("accept", change.path, None, change.turn)
        if status == "accepted":
            return
        changes = [c for t in self.store.turns() if (c := t.binary(change.path)) is not None]
        try:
            data = await anyio.to_thread.run_sync(_landing_bytes, changes, change, user)
            if not isinstance(data, Nothing):
                await put_bytes(self.editor, self.landed.disk, user, data)
        except (ReviewError, files.FileError, OSError) as err:
            change.status = status  # not brought in: it waits in the worktree still
            raise ReviewError(f"not brought in: {err}") from None
        # A program the agent built or made executable runs in your project too.
        await anyio.to_thread.run_sync(_take_execute_bit, self.worktree, user)


def _landing_bytes(
    changes: list[BinaryChange], change: BinaryChange, user: str
) -> bytes | Nothing | None:
    """What accepting ``change`` (of a worktree file with no text; ``changes``: every
    turn's of that file) writes to the user's file ``user``: the bytes it left in the
    worktree (None: remove the file; NOTHING: nothing to write, the user's file holds
    them, or a later change accepted brought newer ones).

    Raises:
        ReviewError: those bytes are not known, or the user's file holds none of the
            bytes the worktree's held before its changes up to this one.
    """
    if any(c.turn > change.turn and c.status == "accepted" for c in changes):
        return NOTHING  # the newer bytes accepted hold the file already
    later = next((c for c in changes if c.turn > change.turn), None)
    if later is None:
        data = files.read_bytes(change.path, _WHOLE) if change.size is not None else None
        if _digest(data) != change.left:
            raise ReviewError(f"{change.path} changed in the worktree since the agent's change")
    elif later.existed and later.before is None:
        raise ReviewError(f"{change.path}: its bytes after turn {change.turn} were not kept")
    else:
        data = later.before
    yours = files.digest_of(user)  # None: no such file
    if yours == _digest(data):
        return NOTHING
    since = [c for c in changes if c.turn <= change.turn]  # the states it went through
    untouched: set[str | None] = {None for c in since if not c.existed}
    for c in since:
        if c.existed and (known := _before(c)) is not None:
            untouched.add(known)
    if yours not in untouched:
        raise ReviewError(
            f"{os.path.basename(user)} has no text and is not what the "
            "worktree's copy was before the agent's change (you changed it since, or "
            "its bytes then were not kept): copy it from the worktree yourself"
        )
    return data


_WHOLE = -1  # no limit (as ``read``'s): the file's bytes are brought in whole


def _digest(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _before(change: BinaryChange) -> str | None:
    """The digest of ``change``'s file's bytes before it (None: not known)."""
    return _digest(change.before) if change.before is not None else change.before_digest


class Landed(SessionChanges):
    """The user's files the accepted hunks of ``owner``'s worktree were brought into.

    What it publishes is the chat's whole review (``owner``'s summary); it keeps
    only what clashed open: the rest is accepted as it lands.
    """

    def __init__(self, owner: WorktreeChanges) -> None:
        # Brought in by the user's own accept: saved to disk like any accepted edit.
        super().__init__(
            owner.editor, owner.chat_id, owner.worktree.project, owner._checks.tasks, auto_save=True
        )
        self._owner = owner
        self.origin: dict[str, int] = {}  # path -> the chat's turn it was last brought from

    def __repr__(self) -> str:
        return f"<Landed {self.cwd} {self.store!r}>"

    def summary(self) -> dict[str, Any]:
        return self._owner.summary()

    async def land(self, path: str, base: str | None, theirs: str | None, turn: int) -> None:
        """Bring the agent's change of ``path`` from ``base`` to ``theirs`` (None: no
        file), made in the chat's ``turn``, into the user's file, merged with what the
        user changed since ``base``:
        one edit of the buffer (one undo step), saved; a clash keeps the user's lines
        with the agent's waiting in a conflict hunk, as does a change reaching into
        lines the buffer holds unsaved; a deletion of a file the user changed is not
        done (both said)."""
        async with self._lock:
            self.origin[path] = turn
            for _ in range(files.RETRIES):
                try:
                    doc = await files.load(self.editor, path, check=True)
                    files.check_writable(doc)
                except files.FileError as err:
                    self.editor.notify(f"not brought in: {err}", "warn")
                    return
                if theirs is None:
                    await self._delete(doc, base)
                    return
                if await self._land_once(doc, base, theirs):
                    return
            self.editor.notify(
                f"not brought in: {shown_path(path, self.cwd)} kept changing on disk", "warn"
            )

    async def _delete(self, doc: files.Document, base: str | None) -> None:
        """The agent deleted ``doc``'s file, which held ``base``: so does the user's."""
        if doc.text is None:
            return  # gone already
        if doc.text != base:
            self.editor.notify(
                f"{shown_path(doc.path, self.cwd)}: not deleted, you changed it since", "warn"
            )
            return
        self.store.record(doc.path, doc.text, None, "write")
        self.store.accept(doc.path)
        await files.save(self.editor, doc, None)
        self._publish()

    async def _land_once(self, doc: files.Document, base: str | None, theirs: str) -> bool:
        """The agent's change from ``base`` to ``theirs`` merged into ``doc`` and saved;
        False, nothing done, where the file changed on disk meanwhile (what reaches
        into unsaved lines was held back against its older text)."""
        path = doc.path
        rollback = self.store.checkpoint(path)
        self.store.note_read(path, base or "")  # the merge base: what the agent changed
        # Behind unsaved edits, what reaches into them waits too (decision 0015): the
        # save below would take the buffer's lines there to the file.
        _, saved = await self._behind(doc)
        outcome = self.store.write(path, doc.conform(theirs), editor_text=doc.text, saved=saved)
        self.store.accept(path)  # what merged cleanly is decided; a clash waits
        try:
            final = await files.save(self.editor, doc, outcome.text, behind=saved)
        except files.FileError as err:
            rollback()  # nothing was written: nothing brought in
            if err.reason == "moved":
                return False
            raise
        if final != outcome.text:
            self._latest(path).file(path).user_edit(final)
        if final is not None:
            await anyio.to_thread.run_sync(_take_execute_bit, self._owner.worktree, path)
        self.disk.seen(path)
        if outcome.conflicts:
            self.editor.notify(
                f"{shown_path(path, self.cwd)}: the agent changed lines you edited since; "
                "your text was kept (:AcpReview)",
                "warn",
            )
        self._publish()
        return True
