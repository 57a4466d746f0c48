"""One session's review service: every agent change of a turn, against a baseline.

Three ways a change arrives, all ending in the session's
:class:`~acp_nvim.review.ReviewStore`:

- ``fs/write_text_file``: merged into the buffer (or file) as a minimal edit,
  with the text the agent last read as the merge base, so user edits it has
  not seen survive and a clash becomes a conflict hunk;
- files named by tool calls (diff content, locations) that changed on disk;
- other files under the session's cwd and its workspace roots that changed during
  the turn, found by comparing (size, mtime_ns) against a bounded scan taken at
  turn start.

Disk checks run when a tool call completes (the files it names, plus the
bounded scan) and when the turn ends (every file named during the turn), as
:mod:`~acp_nvim.client.services.turn_checks` schedules them;
:mod:`~acp_nvim.client.services.disk_changes` finds those changes and what
each file held before. An ``fs/write_text_file`` first records such a change
to its file (opencode writes the file itself too, racing its own request).

Before an edit is allowed, :meth:`SessionChanges.preview` tells what it would
do to each file, as the write would land it (a permission prompt shows it in the
file, with the parts that will wait as conflicts where the user's lines stay), and
:meth:`SessionChanges.baseline` hands the editor a file's text before a turn
for a side-by-side diff.

Not here: pixels (Lua draws the review from the plain-data summary pushed
with :meth:`Editor.review`) and the diff/merge logic (``acp_nvim.review``).
"""

from __future__ import annotations

__all__ = ["SessionChanges", "proposed_from_diff", "put_bytes"]

import os
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any, Literal, NamedTuple

import anyio
import anyio.to_thread

from acp_nvim.client.editor import BufferState, Editor, EditorError
from acp_nvim.client.services import files
from acp_nvim.client.services.access import FileAccess
from acp_nvim.client.services.byte_undo import ByteUndo, emptied
from acp_nvim.client.services.disk_changes import (
    NOTHING,
    Baseline,
    DiskChanges,
    Nothing,
    patches_of,
    under,
)
from acp_nvim.client.services.files import Document, FileError
from acp_nvim.client.services.left_behind import LeftBehind
from acp_nvim.client.services.turn_checks import TurnChecks
from acp_nvim.client.session.model import (
    ChangesPart,
    DiffPart,
    FilePreview,
    PreviewHunk,
    ToolCall,
)
from acp_nvim.client.session.workspace import shown_path
from acp_nvim.client.tasks import Tasks
from acp_nvim.client.text import eol_of, slice_lines, split_text
from acp_nvim.review import (
    BinaryChange,
    Changeset,
    FileChange,
    FileKind,
    FilePatch,
    Hunk,
    MergeResult,
    PatchError,
    ReviewError,
    ReviewStore,
    WriteOutcome,
    apply_patch,
    binary_about,
    held_rows,
    line_edits,
    merge3,
)

Decision = Literal["accept", "reject"]
# Kinds of change the agent made on disk itself (decided against the file, saved).
_ON_DISK: tuple[FileKind, ...] = ("disk", "patch")


class Restored(NamedTuple):
    """What a restore did: the files taken back, those it could not take back
    (told why), as the user's names for them."""

    files: list[str]
    refused: list[str]


# What an edit makes of a file's text (None: no file): its text after (None: the file
# deleted), or NOTHING where the edit does not fit the text.
Edit = Callable[[str | None], Baseline]


def _after_diff(diff: DiffPart, text: str | None) -> Baseline:
    return proposed_from_diff(text, diff.old_text, diff.new_text)


def _after_patch(patch: FilePatch, text: str | None) -> Baseline:
    try:
        return apply_patch(text, patch)
    except PatchError:
        return NOTHING


async def _behind(doc: Document) -> Document:
    """The file behind ``doc``: read from disk where ``doc``'s buffer holds unsaved
    edits, else ``doc`` itself."""
    if doc.buffer is not None and doc.buffer.modified:
        return await anyio.to_thread.run_sync(files.read_disk, doc.path)
    return doc


def _file_preview(doc: Document, landing: MergeResult | None) -> FilePreview:
    """What ``landing`` (None: a deletion) does to ``doc``'s text now, as rows of it:
    the lines it changes, and those it keeps with the agent's waiting (``held``)."""
    if doc.buffer is not None:
        old = doc.buffer.lines
    else:
        old = split_text(doc.text)[0] if doc.text is not None else []
    new = split_text(landing.text)[0] if landing is not None else []
    hunks = [PreviewHunk(e.start, e.end - e.start, e.lines) for e in line_edits(old, new)]
    if landing is not None and doc.text is not None:
        held = held_rows(doc.text, landing)
        hunks += [PreviewHunk(row, count, lines, held=True) for row, count, lines in held]
    hunks.sort(key=lambda hunk: hunk.row)
    return FilePreview(doc.path, hunks, doc.text is None, landing is None)


async def _previews(
    editor: Editor, store: ReviewStore, edits: list[tuple[str, Edit]], *, auto_save: bool
) -> list[FilePreview]:
    """What each edit ``(path, edit)`` would do to its file's text now (read through
    ``editor``), landed as the session's write (``store``, ``auto_save``) would land
    it; files it does not fit, or leaves as they are, are left out."""
    found = []
    for path, edit in edits:
        try:
            doc = await files.load(editor, path)
            disk = await _behind(doc)
        except (FileError, EditorError):
            continue  # nothing to show: a directory, a binary file, an editor error
        landing = _landing(store, doc, disk, edit, auto_save)
        if isinstance(landing, Nothing):
            continue
        text = landing.text if landing is not None else None
        if text == doc.text and (landing is None or landing.clean):
            continue  # it would change nothing
        found.append(_file_preview(doc, landing))
    return found


def _edits_of(
    call: ToolCall, at: Callable[[str], str]
) -> tuple[list[tuple[str, Edit]], dict[str, tuple[bool, bool]]]:
    """The edits of ``call`` (v1 diffs, v2 git patches) by full path (``at``), and
    the files with no text its v2 changes name: whether each is made, deleted."""
    edits: list[tuple[str, Edit]] = []
    whole: dict[str, tuple[bool, bool]] = {}
    for part in call.content:
        if isinstance(part, DiffPart):
            edits.append((at(part.path), partial(_after_diff, part)))
        elif isinstance(part, ChangesPart):
            for patch in patches_of(part):
                if patch.binary:
                    whole[at(patch.path)] = (patch.new_file, patch.deleted)
                elif not (patch.rename or patch.copy):
                    edits.append((at(patch.path), partial(_after_patch, patch)))
            for op in part.changes:
                if op.file_type == "binary":
                    whole.setdefault(at(op.path), (op.operation == "add", op.operation == "delete"))
    return edits, whole


def _whole_preview(path: str, made: bool, deleted: bool) -> FilePreview:
    """A file with no text a change ``made`` or ``deleted`` (else changed) as a whole:
    what the review would say of it now (its size, when it is there)."""
    stat = files.stat_of(path)
    about = binary_about(stat[0] if stat is not None else None)
    return FilePreview(path, [], made and stat is None, deleted, binary=about)


def _landing(
    store: ReviewStore, doc: Document, disk: Document, edit: Edit, auto_save: bool
) -> MergeResult | Nothing | None:
    """What ``edit`` would leave in ``doc``'s file were the agent to write it now (a
    prompt's preview: the write, once allowed, comes after it). The agent's text is
    the edit made to what it last read of the file through us, else to the disk's (it
    read that on its own), else, fitting neither, to ``doc``'s; it lands as
    :meth:`SessionChanges.write` lands it: merged with the user's edits, its clashes
    with their unsaved lines held back (``.conflicts``). None: the file deleted;
    NOTHING: the edit fits no text."""
    read = store.agent_read(doc.path)
    view = read if read is not None else disk.text
    text = edit(view)
    if isinstance(text, Nothing) and view != doc.text:
        text = edit(doc.text)
    if text is None or isinstance(text, Nothing):
        return text
    return store.merged(
        doc.path,
        doc.conform(text),
        editor_text=doc.text,
        unseen=disk.text,
        saved=_saved(doc, disk, auto_save),
    )


def _saved(doc: Document, disk: Document, auto_save: bool) -> str | None:
    """The file's text behind ``doc``'s unsaved edits (``disk``: :func:`_behind`),
    which an agent's write goes to as well, its clashes with them held back; None: no
    unsaved edits, no file behind them (the write stays in the buffer: see
    :func:`files.save`), or the write stays in the buffer (``auto_save`` off)."""
    return disk.text if disk is not doc and auto_save else None


def _written(shown: str, doc: Document, disk: Document, outcome: WriteOutcome) -> list[str]:
    """What the user is told of an agent's write to ``shown`` (``doc``, its file behind
    it ``disk``: :func:`_behind`) that landed as ``outcome``."""
    if disk is not doc and disk.text is None:
        # Gone from disk (renamed, deleted) or never made behind the buffer's unsaved
        # edits: no file is made of them (decision 0015), the change stays in the buffer.
        waits = "; where it differs from your text it waits in :AcpReview"
        return [
            f"{shown} has no file on disk: the agent's change is only in your unsaved "
            f"buffer{waits if outcome.conflicts else ''}; :write makes the file"
        ]
    notices = []
    if doc.buffer is not None and doc.buffer.moved:
        notices.append(
            f"{shown} changed on disk behind your unsaved edits; the agent's change went "
            "to both, :write will ask before replacing the file"
        )
    if outcome.conflicts:
        notices.append(
            f"{shown}: the agent changed lines you edited; your text was kept (:AcpReview)"
        )
    return notices


def proposed_from_diff(current: str | None, old: str | None, new: str) -> Baseline:
    """The file after a tool call's diff, given the file before it (the other way
    round from :func:`baseline_from_diff`); ``NOTHING`` when ``current`` fits neither
    the whole ``old`` text (with or without its final newline) nor a fragment of it
    found once."""
    if not old:
        # A new file (opencode sends "" for one): only when there is none yet.
        return new if not current else NOTHING
    if current is None:
        return NOTHING
    if current == old:
        return new
    eol = eol_of(current)
    if current == old + eol:
        return new + eol
    if current.count(old) == 1:
        return current.replace(old, new)
    return NOTHING


async def _decided(editor: Editor, path: str, current: str | None, disk: bool) -> Document:
    """``path`` as a decision meets it, the review's text of it being ``current``.

    ``disk``: a change the agent made on disk, decided against the file where the
    review follows the file, not the buffer's unsaved text (a change that could not
    be merged into it: see DiskChanges). A file the agent deleted is decided against
    the disk, whatever a buffer still shows: an unmodified one stands for the deleted
    file (a reject writes the file through it, an accept takes it away), one the
    user typed in is theirs and kept (decision 0015, amended).
    """
    doc = await files.load(editor, path)
    buffer = doc.buffer
    if buffer is not None and (current is None or (disk and buffer.modified)):
        on_disk = await anyio.to_thread.run_sync(files.read_disk, path)
        if on_disk.text == current:
            return on_disk if buffer.modified else Document(path, None, buffer)
    return doc


def editors(others: Sequence[int]) -> str:
    """Who may have changed a file since a chat's agent last did, as a restore's
    notices name them: every chat's review counts any such change as the user's,
    also one of ``others``, the chats whose agents changed the file too."""
    return " or ".join(["you", *(f"chat #{chat}'s agent" for chat in others)])


class SessionChanges:
    """Review state of one session, its fs/* answers and its turn hooks.

    ``tasks`` runs the disk checks a completed tool call asks for; every
    operation holds one lock, so checks, writes and decisions never interleave.
    ``access``, when set, decides which paths the agent may read and write.
    ``roots``: the chat's workspace roots (its live list), scanned after ``cwd``;
    ``skip_paths``: directories and files below them never scanned (DiskChanges).
    """

    def __init__(
        self,
        editor: Editor,
        chat_id: int,
        cwd: str,
        tasks: Tasks,
        *,
        roots: Sequence[str] = (),
        skip_paths: Collection[str] = (),
        auto_save: bool = True,
        missing_file_as_empty: bool = False,
    ) -> None:
        self.editor = editor
        self.chat_id = chat_id
        self.cwd = os.path.normpath(cwd)
        self.store = ReviewStore()
        self.auto_save = auto_save
        self.missing_file_as_empty = missing_file_as_empty
        self.access: FileAccess | None = None
        # Free: no turn of the loop (a turn start's prompt waits for it; see Connection's).
        self._lock = anyio.Lock(fast_acquire=True)
        self.disk = DiskChanges(editor, self.cwd, self.store, roots, skip_paths)
        self.byte_undo = ByteUndo(editor, self.disk)
        self._numbers: dict[int, int] | None = None  # see number()
        self.left = LeftBehind(self.cwd)  # files a turn left to the agent names
        self._checks = TurnChecks(self.disk, tasks, self._lock)
        self.changed_elsewhere: Callable[[str], list[int]] = lambda path: []  # set by Reviews

    def __repr__(self) -> str:
        return f"<SessionChanges {self.cwd} {self.store!r}>"

    # -- fs/* ------------------------------------------------------------------------

    async def read(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        """Answer ``fs/read_text_file``: buffer text (unsaved edits too), else the disk's.

        Raises:
            FileError: relative path, missing file (unless the agent's
                ``missing_file_as_empty``), directory, binary, line past the end.
            ServiceError: access denied (``fs_access``).
        """
        path = files.absolute(path)
        if self.access is not None:
            await self.access.check(path, write=False)  # the user may take a while: no lock
        try:
            async with self._lock:
                doc = await files.load(self.editor, path)
        except FileError as err:  # too large to read whole: a part is read line by line
            return await anyio.to_thread.run_sync(files.read_part, path, line, limit, err)
        if doc.text is None:
            if self.missing_file_as_empty:
                return ""
            raise FileError("missing", f"{path}: no such file")
        try:
            content = slice_lines(doc.text, line, limit)
        except ValueError as err:
            raise FileError("range", f"{path}: {err}") from None
        self.store.note_read(path, doc.text)
        return content

    async def write(self, path: str, content: str) -> list[Hunk]:
        """Answer ``fs/write_text_file``: merge into the buffer or file and record it.

        The user's unsaved text is never replaced nor saved: the agent's change
        is merged into it (base: what the agent last read through us, else the
        disk's text), and the disk gets only the agent's change. Returns the
        conflicts: where the user's lines were kept and the agent's await review.

        Raises:
            FileError: relative path, directory, binary file, read-only file or
                buffer, write failure.
            ServiceError: access denied (``fs_access``).
        """
        path = files.absolute(path)
        if self.access is not None:
            edits: list[tuple[str, Edit]] = [(path, lambda _: content)]
            preview = partial(_previews, self.editor, self.store, edits, auto_save=self.auto_save)
            await self.access.check(path, write=True, preview=preview)
        async with self._lock:
            for _ in range(files.RETRIES):
                outcome = await self._write_once(path, content)
                if outcome is not None:
                    return outcome.conflicts
        err = FileError("io", f"{path} kept changing on disk while the agent wrote it")
        self.editor.notify(f"the agent's write failed: {err}")
        raise err

    async def _write_once(self, path: str, content: str) -> WriteOutcome | None:
        """:meth:`write`, the lock held; None, with nothing written nor recorded,
        where the file changed on disk between the two reads of a write behind
        unsaved edits (something else wrote it; opencode, racing its own request):
        what was held back against the first would not fit the second."""
        if self._checks.open:
            # Some agents also write the file themselves (opencode, racing its own
            # request): record that first, against the usual baselines. Outside a
            # turn (an MCP tool, before the first prompt) a change on disk is the
            # user's: the write's merge takes care of it.
            await self.disk.check_one(path)
        doc = await files.load(self.editor, path, check=True)
        files.check_writable(doc)
        if (encoding := files.encoding_of(doc.encoding)) is not None:
            self.disk.encodings.setdefault(path, encoding)
        existed = doc.text is not None
        if doc.buffer is None and not self.auto_save:
            # Left unsaved, as asked: the edit needs a buffer to live in.
            try:
                doc = await files.load_to_edit(self.editor, path)
            except FileError as err:
                self.editor.notify(f"the agent's write failed: {err}")
                raise
        disk, saved = await self._behind(doc)
        rollback = self.store.checkpoint(path)
        outcome = self.store.write(
            path,
            doc.conform(content),
            editor_text=doc.text if existed else None,
            unseen=disk.text,
            saved=saved,
        )
        try:
            final = await files.save(
                self.editor, doc, outcome.text, to_disk=self.auto_save, behind=saved
            )
        except FileError as err:
            rollback()  # nothing was written: nothing to review
            if err.reason == "moved":
                return None
            self.editor.notify(f"the agent's write failed: {err}")
            raise
        if final != outcome.text:
            self._latest(path).file(path).user_edit(final)
        self.disk.seen(path)
        for notice in _written(shown_path(path, self.cwd), doc, disk, outcome):
            self.editor.notify(notice, "warn")
        self._publish([path])
        return outcome

    # -- before and beside -------------------------------------------------------------

    async def preview(self, call: ToolCall, *, texts: bool = True) -> list[FilePreview]:
        """What the edits of ``call`` (v1 diffs, v2 git patches) would do to their files,
        against each file's text now; files the edit does not fit are left out. Files
        with no text a v2 change names come last, whole (``FilePreview.binary``); not
        ``texts``: only those, which a prompt names with previews off (decision 0099)."""
        edits, whole = _edits_of(call, self._abs)
        edits = edits if texts else []
        found = await _previews(self.editor, self.store, edits, auto_save=self.auto_save)
        for path, (made, deleted) in whole.items():
            found.append(await anyio.to_thread.run_sync(_whole_preview, path, made, deleted))
        return found

    def baseline(self, path: str, turn: int | None = None) -> None:
        """Hand the editor ``path``'s baseline in ``turn`` (default: the latest turn that
        changed it) for a side-by-side diff: what rejecting its open hunks would leave
        in the file now (an earlier turn's: with the later turns' changes)."""
        path = os.path.normpath(path)
        try:
            changeset = self.store.turn(turn) if turn is not None else self._latest(path)
            text = self.store.baseline(path, changeset.turn)
        except ReviewError as err:
            self.editor.notify(f"no agent changes to compare: {err}", "warn")
            return
        lines = split_text(text)[0] if text is not None else []
        self.editor.baseline(self.chat_id, {"path": path, "turn": changeset.turn, "lines": lines})

    async def _behind(self, doc: Document) -> tuple[Document, str | None]:
        """The file behind ``doc`` (:func:`_behind`), and the text a write to ``doc``
        holds back its clashes against (:func:`_saved`)."""
        disk = await _behind(doc)
        return disk, _saved(doc, disk, self.auto_save)

    def _abs(self, path: str) -> str:
        return under(self.cwd, path)

    # -- turn hooks: when the disk is checked (TurnChecks) -----------------------------

    async def begin_turn(self, numbered: tuple[int, int] | None = None) -> None:
        """A turn starts: new changeset, and the scan later checks compare against;
        ``numbered``: its review number and its number on the chat's branch shown,
        which :meth:`number` gave the others' (None: one branch, the same numbers).

        Changes made before the first turn (an agent's fs call or MCP tool right after
        the session started) already opened a changeset: they count as the first
        turn's, so the review's turns stay the chat's. The scan runs off the event
        loop (:meth:`DiskChanges.begin_turn`).
        """
        async with self._lock:
            if numbered is None:
                self._numbers = None
            elif self._numbers is not None:  # one entry: not a long chat's all again
                self._numbers[numbered[0]] = numbered[1]
            await self._checks.begin_turn()
            self.left.turn_begins()
            if len(self.store.turns()) < self._checks.begun:
                self.store.begin_turn()
            self._publish()

    def close(self) -> None:
        """The chat is gone: let go of what watches its files, and of the chat (its
        file access and its error line hold it): a review kept while hunks wait
        (decision 0081) would keep the whole chat; a failure is notified instead."""
        self.disk.close()
        self.access = None
        self._checks.tasks = self._checks.tasks.reporting_to(self.editor.notify)

    def prepare_soon(self) -> None:
        """:meth:`TurnChecks.prepare_soon`: the first turn's scan read ahead."""
        self._checks.prepare_soon()

    def on_tool_call(self, call: ToolCall) -> None:
        """:meth:`TurnChecks.on_tool_call`: the disk checked once ``call`` completes."""
        self._checks.on_tool_call(call, self._check)

    def turn_ended(self) -> None:
        """The turn ended without :meth:`end_turn` awaited (e.g. a v2 state update)."""
        self._checks.turn_ended(self._check)

    def turn_files(self) -> list[str]:
        """The files the latest turn changed, relative to the session's directory
        where inside it; one with no text says so, with its size."""
        return [_listed(item, self.cwd) for item in self.store.changes()]

    async def end_turn(self) -> None:
        """Final disk check of the turn (idempotent)."""
        await self._checks.end_turn(self._check)

    async def check(self) -> None:
        """Record files changed on disk since they were last seen."""
        await self._checks.check(self._check)

    async def _check(self, named: dict[str, None]) -> None:
        """Check ``named`` and what the scan finds changed; call with the lock held."""
        # Not what the open turn's own calls name too: that turn's change is reviewed.
        changed = await self.disk.changed(named, skip=self.left.paths.keys() - self.disk.named)
        if not changed:
            return
        await self.editor.reload_buffers(changed)  # those with unsaved edits: see DiskChanges
        self._publish(changed)

    # -- review ----------------------------------------------------------------------

    async def decide(
        self,
        decision: Decision,
        path: str | None = None,
        hunk: int | None = None,
        turn: int | None = None,
    ) -> None:
        """Accept or reject one hunk, one file (every turn), or everything.

        Rejecting restores the hunk's baseline in the buffer and on disk.
        Problems (unknown hunk, a clash with a later turn) are told to the user.
        """
        async with self._lock:
            for target_path, target_turn in _targets(self.store, path, hunk, turn):
                try:
                    await self._decide_one(decision, target_path, hunk, target_turn)
                except (ReviewError, FileError) as err:
                    self.editor.notify(str(err), "warn")
            self._publish()

    async def sync(self, path: str) -> None:
        """The user changed the buffer of ``path`` (typing, undo, redo): fold its text
        into the review. A hunk the user undid is shown as reverted, one redone (its
        agent lines back) is pending again, and the file on disk follows both, so
        buffer, disk and review agree; so for a file with no text (:class:`ByteUndo`)."""
        path = os.path.normpath(path)
        async with self._lock:
            if await self.byte_undo.follow(path):
                return self._publish()
            try:
                change = self._latest(path).file(path)
            except ReviewError:
                return  # no agent change of this file in this chat
            buffer = await self.editor.read_buffer(path)
            if buffer is None or buffer.text == change.current:
                return
            if change.current is None and files.stat_of(path) is None:
                return  # typed in the buffer of a file the agent deleted: no file's text
            before = change.current
            followed = change.user_edit(buffer.text)
            if followed is not None and (self.auto_save or change.kind in _ON_DISK):
                doc = Document(path, buffer.text, buffer)
                await files.follow(self.editor, doc, (before or "", followed))
                self.disk.seen(path)
            self._publish()

    async def restore(self, turn: int) -> Restored:
        """Take the files back to how they were before ``turn``: every change of that
        turn and later is taken out, open ones rejected and accepted ones reverted,
        each file in one change: one undo step per buffer, one write per file. The
        user's edits made since the agent's last change of a file are kept, where
        they clash as conflicts (see :meth:`ReviewStore.restore`); files with no text
        go back whole. Returns the files restored and those refused (told why)."""
        restored: list[str] = []
        refused: list[str] = []
        async with self._lock:
            for path, kind in _applied_kinds(self.store, turn).items():
                disk = not kind.isdisjoint(_ON_DISK)
                rollback = self.store.checkpoint(path)
                who = editors(self.changed_elsewhere(path))
                try:
                    doc = await self._document(path, disk)
                    outcome = self.store.restore(path, turn, who)
                    await self._put(doc, outcome.text, disk)
                except (ReviewError, FileError) as err:
                    rollback()
                    self.editor.notify(str(err), "warn")
                    refused.append(path)
                    continue
                for clash in outcome.clashes:
                    self.editor.notify(clash, "warn")
                if outcome.conflicts:
                    said = f"{who} changed lines the restore takes back; that text was kept"
                    self.editor.notify(f"{shown_path(path, self.cwd)}: {said} (:AcpReview)", "warn")
                if outcome.text != doc.text or outcome.conflicts:
                    restored.append(path)
            await _restore_binaries(self.byte_undo, self.store, turn, restored, refused)
            self._publish()
        return Restored(_shown(restored, self.cwd), _shown(refused, self.cwd))

    def turns_changed(self) -> set[int]:
        """The (review) numbers of the turns that changed files (with text or not)."""
        return {changeset.turn for changeset in self.store.turns() if _reviewed(changeset)}

    def number(self, shown: dict[int, int] | None) -> None:
        """The turns of the chat's branch shown, by review number: their numbers there
        (None: one branch; each turn start adds its own). Lua is told when a turn
        that changed files is renumbered."""
        before, self._numbers = self._numbers or {}, shown
        if any(before.get(t) != (shown or {}).get(t) for t in self.turns_changed()):
            self._publish()

    def summary(self) -> dict[str, Any]:
        """Plain data for Lua: ``{turn, files, shown}``, files of every turn, newest first;
        ``shown``: :meth:`number`'s as a list by review number (None: not shown there)."""
        current = self.store.current
        turn, shown = (current.turn if current is not None else 0), self._numbers
        numbered = None if shown is None else [shown.get(t) for t in range(1, turn + 1)]
        return {"turn": turn, "files": self.store.changes(all_turns=True), "shown": numbered}

    # -- internals -------------------------------------------------------------------

    def _publish(self, recorded: Sequence[str] = ()) -> None:
        """Push the review to Lua; ``recorded``: the files whose changes it just took."""
        self.editor.review(self.chat_id, self.summary())
        if recorded:
            files = [self.reviewed_path(path) for path in recorded]
            self.editor.emit("AcpChangesRecorded", {"chat": self.chat_id, "files": files})

    def reviewed_path(self, path: str) -> str:
        """The name the review (:meth:`summary`) lists the file ``path`` under."""
        return path

    def _latest(self, path: str) -> Changeset:
        for changeset in reversed(self.store.turns()):
            if path in changeset:
                return changeset
        raise ReviewError(f"{path}: no recorded changes")

    async def _decide_one(
        self, decision: Decision, path: str, hunk: int | None, turn: int | None
    ) -> None:
        if (binary := self.store.binary(path, turn)) is not None:
            return await _decide_binary(self.byte_undo, self.store, decision, binary)
        change = (self.store.turn(turn) if turn is not None else self._latest(path)).file(path)
        if _under_bytes(self.store, decision, path, hunk, change.turn):
            return
        disk = change.kind in _ON_DISK
        doc = await self._document(path, disk)
        theirs = _typed_in(self._latest(path).file(path))
        rollback = self.store.checkpoint(path)
        decide = self.store.accept if decision == "accept" else self.store.reject
        text = decide(path, hunk, turn=turn)
        try:
            await self._put(doc, text, disk, theirs)
        except FileError:
            rollback()  # the file is as it was: so is its review
            raise

    async def _document(self, path: str, disk: bool) -> Document:
        """``path`` as a decision meets it (:func:`_decided`), the user's edits folded
        into the review."""
        latest = self._latest(path).file(path)
        doc = await _decided(self.editor, path, latest.current, disk)
        if doc.text != latest.current:
            latest.user_edit(doc.text)
        return doc

    async def _put(self, doc: Document, text: str | None, disk: bool, theirs: bool = False) -> None:
        """Make ``doc``'s file hold ``text`` a decision gave it (saved unless
        ``auto_save`` is off and the change was neither the agent's on disk nor of a
        deleted file). ``theirs``: the file holds the user's edits (:func:`_typed_in`)."""
        deleted = doc.text is None  # a buffer standing for the file goes with it
        if text == doc.text and (not deleted or doc.buffer is None):
            return
        unsaved = await _unsaved(self.editor, doc) if disk else None
        stat = await anyio.to_thread.run_sync(files.stat_of, doc.path) if unsaved else None
        doc = files.as_first_read(doc, self.disk.encodings.get(doc.path))
        if text is None and theirs and doc.buffer is not None:
            return await _remove_keeping_buffer(self.editor, self.disk, self.cwd, doc.path)
        final = await files.save(self.editor, doc, text, to_disk=self.auto_save or disk or deleted)
        if final != text:
            self._latest(doc.path).file(doc.path).user_edit(final)
        self.disk.seen(doc.path)
        if unsaved is not None and doc.text is not None and text is not None:
            shown = shown_path(doc.path, self.cwd)
            await _follow_unsaved(self.editor, shown, doc.path, unsaved, (doc.text, text), stat)


async def _decide_binary(
    undo: ByteUndo, store: ReviewStore, decision: Decision, change: BinaryChange
) -> None:
    """Accept or reject the change of a file with no text as a whole: a reject
    removes a file the turn made, and writes back the bytes of one it changed or
    deleted (when kept: decision 0099), which an undo in its buffer takes back
    (``undo``). A later turn's change of the file is rejected first: a reject here
    would undo it unseen."""
    if decision == "reject":
        if (later := _bytes_since(store, change.path, change.turn)) is not None:
            raise ReviewError(_changed_again(change.path, later))
        if change.status == "rejected":
            return  # it holds its bytes from before already
        await _refuse_if_written(change)
    status = change.status
    before = change.decide(decision)
    if decision == "accept":
        return
    try:
        putting = partial(put_bytes, undo.editor, undo.disk, change.path, before)
        await undo.reject([change], before, putting)
    except FileError:
        change.status = status  # the file is as it was: so is its review
        raise


def _bytes_since(store: ReviewStore, path: str, turn: int) -> BinaryChange | None:
    """The newest change of ``path`` as a file with no text after ``turn`` that is
    not rejected: the file holds its bytes, or an accepted one's (decision 0099)."""
    return next(
        (
            found
            for changeset in reversed(store.turns())
            if changeset.turn > turn
            and (found := changeset.binary(path)) is not None
            and found.status != "rejected"
        ),
        None,
    )


def _under_bytes(
    store: ReviewStore, decision: Decision, path: str, hunk: int | None, turn: int
) -> bool:
    """Decide hunk ``hunk`` (None: all) of ``path``'s text in ``turn`` where a later
    turn wrote bytes over it (decision 0099); False where none did. An accept leaves
    the bytes, a reject would write the text over them unseen: refused.

    Raises:
        ReviewError: a reject, until the later change is rejected.
    """
    if (later := _bytes_since(store, path, turn)) is None:
        return False
    if decision == "reject":
        raise ReviewError(_changed_again(path, later))
    store.accept(path, hunk, turn=turn)
    return True


def _changed_again(path: str, later: BinaryChange) -> str:
    return f"{path}: turn {later.turn} changed it again; reject that change first"


def _applied_kinds(store: ReviewStore, turn: int) -> dict[str, set[FileKind]]:
    """The files with text whose changes from ``turn`` on are in them, each with
    how those changes were made."""
    kinds: dict[str, set[FileKind]] = {}
    for changeset in reversed(store.turns()):
        if changeset.turn < turn:
            break
        for change in changeset.files():
            if change.applied:
                kinds.setdefault(change.path, set()).add(change.kind)
    return kinds


async def _restore_binaries(
    undo: ByteUndo, store: ReviewStore, turn: int, restored: list[str], refused: list[str]
) -> None:
    """Take the files with no text back to before ``turn``, adding each to
    ``restored`` or, told why, to ``refused``; an undo in a file's buffer takes
    its restore back (``undo``), as a text file's undo does."""
    since: dict[str, list[BinaryChange]] = {}  # by file, oldest turn first
    for changeset in store.turns():
        if changeset.turn >= turn:
            for change in changeset.binaries():
                since.setdefault(change.path, []).append(change)
    for path, changes in since.items():
        try:
            if await _restore_binary(undo, changes):
                restored.append(path)
        except (ReviewError, FileError) as err:
            undo.editor.notify(str(err), "warn")
            refused.append(path)


async def _restore_binary(undo: ByteUndo, changes: list[BinaryChange]) -> bool:
    """Put the file of ``changes`` (one file's, oldest turn first) back as it was
    before the first, each rejected as a whole (decision 0099); whether it was
    written. Refused, the file left as it is, when its bytes then were not kept or
    someone else wrote it since the agent's last change."""
    taken = [change for change in changes if change.status != "rejected"]
    if not taken:
        return False  # rejected already: the file holds what it did before them
    await _refuse_if_written(taken[-1])
    statuses = [change.status for change in changes]
    before = changes[0].decide("reject")
    for change in changes:
        change.status = "rejected"
    try:
        putting = partial(put_bytes, undo.editor, undo.disk, changes[0].path, before)
        await undo.reject(taken, before, putting)
    except FileError:
        for change, status in zip(changes, statuses, strict=True):
            change.status = status
        raise
    return True


async def _refuse_if_written(change: BinaryChange) -> None:
    """Raise :class:`ReviewError` when ``change``'s file no longer holds the bytes
    the agent left: the user or another tool wrote it since, and putting the old
    bytes back would lose that (as a text's reject keeps the user's edits)."""
    if await anyio.to_thread.run_sync(files.digest_of, change.path) != change.left:
        raise ReviewError(
            f"{change.path}: changed since turn {change.turn}'s change (by you or "
            "another tool); left as it is"
        )


async def put_bytes(editor: Editor, disk: DiskChanges, path: str, data: bytes | None) -> None:
    """Make ``path`` hold ``data`` (None: remove it), its buffers reloaded (emptied,
    for a file removed: :func:`~acp_nvim.client.services.byte_undo.emptied`)."""
    if data is None:
        await anyio.to_thread.run_sync(files.remove_disk, path)
    else:
        await anyio.to_thread.run_sync(files.write_bytes, path, data)
    disk.seen(path)
    if data is not None:
        await editor.reload_buffers([path])
    elif (refused := await emptied(editor, path)) is not None:
        editor.notify(f"{path}: removed; its buffer was left as it was ({refused})", "warn")


def _shown(paths: list[str], cwd: str) -> list[str]:
    """``paths`` as the user's names for them, sorted."""
    return sorted(shown_path(path, cwd) for path in paths)


def _listed(item: dict[str, Any], cwd: str) -> str:
    """A file of :meth:`ReviewStore.changes` as a turn's summary names it."""
    about = f" ({item['binary']['about']})" if "binary" in item else ""
    return shown_path(item["path"], cwd) + about


def _targets(
    store: ReviewStore, path: str | None, hunk: int | None, turn: int | None
) -> list[tuple[str, int | None]]:
    """What a decision on ``path`` (None: every file), ``hunk`` and ``turn`` acts on,
    each ``(path, turn)``: where neither a hunk nor a turn is named, every file with
    open hunks, newest turn first (a later turn's bytes go before an earlier text)."""
    if path is not None:
        path = os.path.normpath(path)
    if hunk is not None or turn is not None:
        return [(path, turn)] if path is not None else []
    return [
        (change.path, changeset.turn)
        for changeset in reversed(store.turns())
        for change in _reviewed(changeset)
        if change.open and (path is None or change.path == path)
    ]


def _reviewed(changeset: Changeset) -> list[FileChange | BinaryChange]:
    """Every file ``changeset`` changed: those with text, then those without."""
    return [*changeset.files(), *changeset.binaries()]


def _typed_in(change: FileChange) -> bool:
    """Whether the user's edits are in ``change``'s file: its text is not what the
    agent and the review left."""
    return change.current is not None and change.current != change.left


async def _remove_keeping_buffer(editor: Editor, disk: DiskChanges, cwd: str, path: str) -> None:
    """A rejected file the agent created goes from the disk, but not its buffer
    holding the user's edits: deleting it would lose them, undo history and all."""
    await anyio.to_thread.run_sync(files.remove_disk, path)
    disk.seen(path)
    await editor.mark_saved(path, False)  # edits saved before: :q would drop them unasked
    said = "removed; its buffer keeps your edits (:write makes the file again)"
    editor.notify(f"{shown_path(path, cwd)}: {said}", "warn")


async def _unsaved(editor: Editor, doc: Document) -> BufferState | None:
    """The buffer with unsaved edits behind a decision made against ``doc``'s file on
    disk (:func:`_decided`), if there is one."""
    if doc.buffer is not None:
        return None
    buffer = await editor.read_buffer(doc.path)
    return buffer if buffer is not None and buffer.modified else None


async def _follow_unsaved(
    editor: Editor,
    shown: str,
    path: str,
    buffer: BufferState,
    change: tuple[str, str],
    stat: files.Stat | None,
) -> None:
    """A decision's ``change`` (before, after) written to ``path`` (``shown`` so) on
    disk reaches its buffer's unsaved text too, unsaved, the user's lines kept where
    they clash (``stat``: the file's before the write, so :write does not ask about
    it). Else the buffer still showed what the decision took back (a rewind's
    restore, a reject), and the user's next :write put it back on disk (decision
    0015)."""
    before, after = change
    merged = merge3(before, buffer.text, after)
    if merged.text != buffer.text:
        try:
            await files.save(
                editor, Document(path, buffer.text, buffer), merged.text,
                to_disk=False, moved=True, before=stat,
            )  # fmt: skip
        except FileError as err:
            editor.notify(f"{err}; its buffer was left as it was", "warn")
            return
    if merged.conflicts:
        editor.notify(
            f"{shown}: your unsaved lines clash with the change written to the file; "
            "the buffer keeps yours there",
            "warn",
        )
