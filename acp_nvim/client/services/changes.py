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
bounded scan; completions arriving while a check runs are merged into the next
one, so a burst of them costs a few checks, not one each) and when the turn
ends (every file named during the turn). The
baseline of a file changed on disk is, in this order: its text recorded
earlier in the turn; nothing at all for a file the turn-start scan did not
find; a snapshot taken when a tool call first named it while pending (or when
the turn started: in a git work tree the files dirty then, elsewhere every
file, newest first, within a byte budget); its loaded,
unmodified buffer; the tool call's ``oldText`` (whole file, or a fragment
found once in the new text); its git index entry when it was clean at turn
start. An ``fs/write_text_file`` first records such a change to its file
(opencode writes the file itself too, racing its own request).
doc/decisions/0005-review-baselines.md explains why.

Before an edit is allowed, :meth:`SessionChanges.preview` tells what it would
do to each file (a permission prompt shows it in the file), and
:meth:`SessionChanges.baseline` hands the editor a file's text before a turn
for a side-by-side diff.

Not here: pixels (Lua draws the review from the plain-data summary pushed
with :meth:`Editor.review`) and the diff/merge logic (``acp_nvim.review``).
"""

from __future__ import annotations

__all__ = ["Scan", "SessionChanges", "proposed_from_diff", "scan_tree"]

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import anyio
import anyio.to_thread

from acp_nvim.client.editor import Editor, EditorError
from acp_nvim.client.services import files
from acp_nvim.client.services.access import FileAccess
from acp_nvim.client.services.files import Document, FileError
from acp_nvim.client.services.git import GitState
from acp_nvim.client.session.model import (
    ChangesPart,
    DiffPart,
    FilePreview,
    PreviewHunk,
    ToolCall,
)
from acp_nvim.client.tasks import Tasks
from acp_nvim.client.text import slice_lines, split_text
from acp_nvim.review import (
    Changeset,
    FileKind,
    FilePatch,
    PatchError,
    ReviewError,
    ReviewStore,
    apply_patch,
    line_edits,
    parse_unified,
    reverse_patch,
)

# Directories never scanned: version control, dependencies, caches.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__",
     ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"}
)  # fmt: skip
SCAN_MAX_FILES = 20_000
SCAN_MAX_SECONDS = 0.25
# A tool call naming a bigger file gets no content snapshot.
SNAPSHOT_MAX_BYTES = 2 * 1024 * 1024
# Dirty files of a git work tree snapshotted at turn start, at most.
SNAPSHOT_MAX_DIRTY = 200
# Outside git, the text of the tree's files is kept at turn start, most recently
# changed first, up to this much in all; a file unchanged since the last turn is not
# read again (decision 0005).
SNAPSHOT_MAX_TOTAL = 8 * 1024 * 1024

Stat = tuple[int, int]  # (size, mtime_ns)
Decision = Literal["accept", "reject"]


@dataclass
class Scan:
    """(size, mtime_ns) of regular files under a root; ``complete`` False when capped."""

    stats: dict[str, Stat] = field(default_factory=dict)
    complete: bool = True


def scan_tree(
    *roots: str, max_files: int = SCAN_MAX_FILES, max_seconds: float = SCAN_MAX_SECONDS
) -> Scan:
    """Stat the files under ``roots``, first to last, skipping :data:`SKIP_DIRS` and
    symlinks.

    Stops after ``max_files`` files or ``max_seconds`` in all (then ``complete`` is
    False: files not reached are only checked when a tool call names them).
    """
    deadline = time.monotonic() + max_seconds
    scan = Scan()
    stack = list(reversed(roots))
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIP_DIRS:
                            stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        scan.stats[entry.path] = (st.st_size, st.st_mtime_ns)
                except OSError:
                    continue
                if len(scan.stats) >= max_files or time.monotonic() > deadline:
                    scan.complete = False
                    return scan
    return scan


def _after_diff(diff: DiffPart, doc: Document) -> Baseline:
    return proposed_from_diff(doc.text, diff.old_text, diff.new_text)


def _after_patch(patch: FilePatch, doc: Document) -> Baseline:
    try:
        return apply_patch(doc.text, patch)
    except PatchError:
        return NOTHING


def _patches_of(part: ChangesPart) -> list[FilePatch]:
    """The file sections of a v2 ``git_patch`` (none when it is another format or
    does not parse)."""
    if not part.patch or part.patch_format != "git_patch":
        return []
    try:
        return parse_unified(part.patch)
    except PatchError:
        return []


def stat_of(path: str) -> Stat | None:
    """(size, mtime_ns) of ``path``; None when there is no such file, or no file
    can have that name (an agent's path with a NUL byte raises ValueError)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns)


@dataclass
class _CallPaths:
    """The paths read from a tool call's content and locations, as they were then.

    The model replaces those lists when they change, and only appends to content
    (v2 chunks): the same lists at the same length mean the same paths.
    """

    content: list[Any]
    length: int
    locations: list[Any]
    paths: list[tuple[str, Edit]]

    def reads(self, call: ToolCall) -> bool:
        return (
            call.content is self.content
            and len(call.content) == self.length
            and call.locations is self.locations
        )


class _Nothing:
    """No baseline from this source."""


# What a tool call says it did to a file: a v1 diff, a v2 git patch, or nothing.
Edit = DiffPart | FilePatch | None
# Kinds of change the agent made on disk itself (decided against the file, saved).
_ON_DISK: tuple[FileKind, ...] = ("disk", "patch")


NOTHING = _Nothing()
Baseline = str | None | _Nothing


def baseline_from_diff(current: str, old: str | None, new: str) -> Baseline:
    """The file before a tool call's diff, given the file after it.

    Agents send the whole file (some without its final newline) or only the
    replaced fragment; ``NOTHING`` when ``current`` matches neither.
    """
    eol = split_text(current)[1]
    whole = current in (new, new + eol)
    if old is None:
        return None if whole else NOTHING
    if current == new:
        return old
    if current == new + eol:
        return old + eol
    if new and current.count(new) == 1:
        return current.replace(new, old)
    return NOTHING


def baseline_from_patch(current: str | None, patch: FilePatch) -> Baseline:
    """The file before a v2 ``git_patch``, given the file after it: the patch taken
    back; ``NOTHING`` when ``current`` is not what it made."""
    if patch.symlink:
        return NOTHING
    try:
        return apply_patch(current, reverse_patch(patch))
    except PatchError:
        return NOTHING


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
    eol = split_text(current)[1]
    if current == old + eol:
        return new + eol
    if current.count(old) == 1:
        return current.replace(old, new)
    return NOTHING


Kept = dict[str, tuple[Stat, str]]  # path -> (size, mtime_ns) and text then


def _turn_start(dirs: Sequence[str], kept: Kept) -> tuple[Scan, list[GitState], Kept]:
    """What a turn compares against, read in a worker thread: the scan of ``dirs``,
    the dirty files of each git work tree they are in, and the text of the files
    whose "before" nothing else will hold: in a git work tree the dirty ones the scan
    found (git knows the clean ones' text), outside git every file, newest first,
    within :data:`SNAPSHOT_MAX_TOTAL`. ``kept``: the last turn's texts, taken again
    for files that did not change."""
    scan = scan_tree(*dirs)
    gits: dict[str, GitState] = {}
    for top in dirs:
        git = GitState.read(top)
        if git is not None:
            gits.setdefault(git.root, git)
    snapshots: Kept = {}

    def take(path: str) -> int:
        """Keep the text of ``path``; its size, 0 when it was not kept."""
        stat = scan.stats.get(path)
        before = kept.get(path)
        if stat is None:
            return 0
        if before is not None and before[0] == stat:
            text: Baseline = before[1]
        elif stat_of(path) == stat:
            text = _read_unchanged(path, stat)
        else:
            return 0
        if not isinstance(text, str):
            return 0
        snapshots[path] = (stat, text)
        return stat[0]

    for git in gits.values():
        for path in sorted(git.dirty)[:SNAPSHOT_MAX_DIRTY]:
            take(path)
    in_git = tuple(git.root.rstrip(os.sep) + os.sep for git in gits.values())
    outside = [path for path in scan.stats if not path.startswith(in_git)]
    room = SNAPSHOT_MAX_TOTAL
    for path in sorted(outside, key=lambda p: scan.stats[p][1], reverse=True):
        if scan.stats[path][0] <= room:
            room -= take(path)
    return scan, list(gits.values()), snapshots


def _read_unchanged(path: str, stat: Stat | None) -> Baseline:
    """The text of ``path`` when it still has ``stat`` after the read; NOTHING when
    it is too big to keep, unreadable, or being written meanwhile."""
    if stat is not None and stat[0] > SNAPSHOT_MAX_BYTES:
        return NOTHING
    try:
        text = files.read_disk(path).text
    except FileError:
        return NOTHING
    return text if stat_of(path) == stat else NOTHING


class SessionChanges:
    """Review state of one session, its fs/* answers and its turn hooks.

    ``tasks`` runs the disk checks a completed tool call asks for; every
    operation holds one lock, so checks, writes and decisions never interleave.
    ``access``, when set, decides which paths the agent may read and write.
    ``roots``: the chat's workspace roots (its live list), scanned after ``cwd``.
    """

    def __init__(
        self,
        editor: Editor,
        chat_id: int,
        cwd: str,
        tasks: Tasks,
        *,
        roots: Sequence[str] = (),
        auto_save: bool = True,
        missing_file_as_empty: bool = False,
    ) -> None:
        self.editor = editor
        self.chat_id = chat_id
        self.cwd = os.path.normpath(cwd)
        self.roots = roots
        self.store = ReviewStore()
        self.auto_save = auto_save
        self.missing_file_as_empty = missing_file_as_empty
        self.access: FileAccess | None = None
        self._tasks = tasks
        self._lock = anyio.Lock()
        # The turn-start scan; none yet proves no file absent (complete=False).
        self._start = Scan(complete=False)
        self._gits: list[GitState] = []  # dirty files at turn start, of each git work tree
        self._known: dict[str, Stat | None] = {}  # last (size, mtime) seen per file
        self._named: dict[str, None] = {}  # paths tool calls named this turn, in order
        self._snapshots: dict[str, str | None] = {}  # text when a pending tool call named it
        self._kept: Kept = {}  # the turn-start texts, with the stats they were read at
        self._tried: set[str] = set()  # paths snapshotted (or found unfit) this turn
        # The paths of each tool call, with the content and locations lists they were
        # read from: recomputed only when those change, not on every status update.
        self._call_paths: dict[str, _CallPaths] = {}
        self._diffs: dict[str, tuple[str | None, str]] = {}  # latest tool call diff per path
        self._patches: dict[str, FilePatch] = {}  # latest v2 git_patch section per path
        self._checked: set[str] = set()  # tool calls whose completion was checked
        self._due: dict[str, None] = {}  # paths named by completions not yet checked
        self._check_queued = False
        self._turn_open = False
        self._turns = 0  # turns begun

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
        async with self._lock:
            doc = await files.load(self.editor, path)
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

    async def write(self, path: str, content: str) -> None:
        """Answer ``fs/write_text_file``: merge into the buffer or file and record it.

        The user's unsaved text is never replaced nor saved: the agent's change
        is merged into it (base: what the agent last read through us, else the
        disk's text), and the disk gets only the agent's change.

        Raises:
            FileError: relative path, directory, binary file, read-only file or
                buffer, write failure.
            ServiceError: access denied (``fs_access``).
        """
        path = files.absolute(path)
        if self.access is not None:
            await self.access.check(
                path, write=True, preview=lambda: self._previews([(path, self._write_of(content))])
            )
        async with self._lock:
            if self._turn_open:
                # Some agents also write the file themselves (opencode, racing its own
                # request): record that first, against the usual baselines. Outside a
                # turn (an MCP tool, before the first prompt) a change on disk is the
                # user's: the write's merge takes care of it.
                await self._check_one(path)
            doc = await files.load(self.editor, path, check=True)
            files.check_writable(doc)
            existed = doc.text is not None
            if doc.buffer is None and not self.auto_save:
                # Left unsaved, as asked: the edit needs a buffer to live in.
                doc = await files.load(self.editor, path, load_buffer=True)
            disk = doc
            if doc.buffer is not None and doc.buffer.modified:
                disk = await anyio.to_thread.run_sync(files.read_disk, path)
            rollback = self.store.checkpoint(path)
            outcome = self.store.write(
                path,
                doc.conform(content),
                editor_text=doc.text if existed else None,
                unseen=disk.text or "",
            )
            try:
                final = await files.save(self.editor, doc, outcome.text, to_disk=self.auto_save)
            except FileError as err:
                rollback()  # nothing was written: nothing to review
                self.editor.notify(f"the agent's write failed: {err}")
                raise
            if final != outcome.text:
                self._latest(path).file(path).user_edit(final)
            self._known[path] = stat_of(path)
            if doc.buffer is not None and doc.buffer.moved:
                self.editor.notify(
                    f"{self._name(path)} changed on disk behind your unsaved edits; "
                    "the agent's change went to both, :write will ask before replacing the file",
                    "warn",
                )
            if outcome.conflicts:
                self.editor.notify(
                    f"{self._name(path)}: the agent changed lines you edited; "
                    "your text was kept (:AcpReview)",
                    "warn",
                )
            self._publish()

    # -- before and beside -------------------------------------------------------------

    async def preview(self, call: ToolCall) -> list[FilePreview]:
        """What the edits of ``call`` (v1 diffs, v2 git patches) would do to their files,
        against each file's text now; files the edit does not fit are left out."""
        edits: list[tuple[str, Callable[[Document], Baseline]]] = []
        for part in call.content:
            if isinstance(part, DiffPart):
                edits.append((self._abs(part.path), partial(_after_diff, part)))
            elif isinstance(part, ChangesPart):
                for patch in _patches_of(part):
                    if not (patch.binary or patch.rename or patch.copy):
                        edits.append((self._abs(patch.path), partial(_after_patch, patch)))
        return await self._previews(edits)

    def baseline(self, path: str, turn: int | None = None) -> None:
        """Hand the editor ``path``'s baseline in ``turn`` (default: the latest turn that
        changed it) for a side-by-side diff: what rejecting its open hunks would leave."""
        path = os.path.normpath(path)
        try:
            changeset = self.store.turn(turn) if turn is not None else self._latest(path)
            text = changeset.file(path).baseline
        except ReviewError as err:
            self.editor.notify(f"no agent changes to compare: {err}", "warn")
            return
        lines = split_text(text)[0] if text is not None else []
        self.editor.baseline(self.chat_id, {"path": path, "turn": changeset.turn, "lines": lines})

    def _write_of(self, content: str) -> Callable[[Document], Baseline]:
        """What an ``fs/write_text_file`` of ``content`` would make of a document: the
        agent's text merged with the edits it has not seen, as :meth:`write` does."""
        return lambda doc: self.store.merged(
            doc.path, doc.conform(content), editor_text=doc.text, unseen=doc.text
        )

    async def _previews(
        self, edits: list[tuple[str, Callable[[Document], Baseline]]]
    ) -> list[FilePreview]:
        """Each file's text now, and what the edit ``(path, make)`` would turn it into."""
        found = []
        for path, make in edits:
            try:
                doc = await files.load(self.editor, path)
            except (FileError, EditorError):
                continue  # nothing to show: a directory, a binary file, an editor error
            proposed = make(doc)
            if isinstance(proposed, _Nothing) or proposed == doc.text:
                continue
            if doc.buffer is not None:
                old = doc.buffer.lines
            else:
                old = split_text(doc.text)[0] if doc.text is not None else []
            new = split_text(proposed)[0] if proposed is not None else []
            hunks = [PreviewHunk(e.start, e.end - e.start, e.lines) for e in line_edits(old, new)]
            hunks.reverse()
            found.append(FilePreview(path, hunks, doc.text is None, proposed is None))
        return found

    def _abs(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.cwd, path))

    @property
    def dirs(self) -> list[str]:
        """The directories the turn's scan covers: the session's, then its roots."""
        return [self.cwd, *self.roots]

    # -- turn hooks ------------------------------------------------------------------

    async def begin_turn(self) -> None:
        """A turn starts: new changeset, and the scan later checks compare against.

        Changes made before the first turn (an agent's fs call or MCP tool right after
        the session started) already opened a changeset: they count as the first
        turn's, so the review's turns stay the chat's. The scan, git and the snapshots
        run in a worker thread (a 20k-file tree takes a quarter of a second): every
        other chat streams on meanwhile.
        """
        async with self._lock:
            start, gits, kept = await anyio.to_thread.run_sync(_turn_start, self.dirs, self._kept)
            self._turns += 1
            if len(self.store.turns()) < self._turns:
                self.store.begin_turn()
            self._start, self._gits, self._kept = start, gits, kept
            self._snapshots = {path: text for path, (_, text) in kept.items()}
            self._known = dict(start.stats)
            self._named.clear()
            self._tried.clear()
            self._call_paths.clear()
            self._diffs.clear()
            self._patches.clear()
            self._checked.clear()
            self._due.clear()
            self._turn_open = True
            self._publish()

    def on_tool_call(self, call: ToolCall) -> None:
        """Note the files a tool call names; check the disk once it completes."""
        paths, fresh = self._paths(call)
        unfinished = call.status in ("pending", "in_progress")
        for path, edit in paths if fresh else ():
            self._named[path] = None
            if isinstance(edit, DiffPart):
                self._diffs[path] = (edit.old_text, edit.new_text)
            elif isinstance(edit, FilePatch):
                self._patches[path] = edit
            if unfinished and path not in self._tried:
                self._tried.add(path)
                self._snapshot(path)
        # Outside a turn (an MCP call, or a refusal of one, before the first prompt or
        # between turns) what changed on disk is the user's: nothing to check.
        finished = call.status in ("completed", "failed") and self._turn_open
        if finished and call.id not in self._checked:
            self._checked.add(call.id)
            self._due.update((path, None) for path, _ in paths)
            if not self._check_queued:
                self._check_queued = True
                self._tasks.start_soon(self._check_due)

    def turn_ended(self) -> None:
        """The turn ended without :meth:`end_turn` awaited (e.g. a v2 state update)."""
        if self._turn_open:
            self._tasks.start_soon(self.end_turn)

    async def end_turn(self) -> None:
        """Final disk check of the turn (idempotent)."""
        if self._turn_open:
            self._turn_open = False
            await self.check()
            # Until the next turn begins, no file counts as absent at its start.
            self._start = Scan(complete=False)

    async def check(self) -> None:
        """Record files changed on disk since they were last seen."""
        async with self._lock:
            await self._check(self._named)

    async def _check_due(self) -> None:
        async with self._lock:
            self._check_queued = False
            due, self._due = self._due, {}
            await self._check(due)

    async def _check(self, named: dict[str, None]) -> None:
        """Check ``named`` and what the scan finds changed; call with the lock held."""
        now = await anyio.to_thread.run_sync(scan_tree, *self.dirs)
        candidates = dict(named)
        candidates.update((p, None) for p, st in now.stats.items() if self._known.get(p) != st)
        if self._start.complete and now.complete:
            candidates.update(
                (p, None) for p, st in self._known.items() if st is not None and p not in now.stats
            )
        changed = [path for path in candidates if await self._check_one(path)]
        if not changed:
            return
        for path in await self.editor.reload_buffers(changed):
            self.editor.notify(
                f"{self._name(path)} changed on disk; your buffer has unsaved edits "
                "and was not reloaded",
                "warn",
            )
        self._publish()

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
            for target_path, target_turn in self._targets(path, hunk, turn):
                try:
                    await self._decide_one(decision, target_path, hunk, target_turn)
                except (ReviewError, FileError) as err:
                    self.editor.notify(str(err), "warn")
            self._publish()

    async def sync(self, path: str) -> None:
        """The user changed the buffer of ``path`` (typing, undo, redo): fold its text
        into the review. A hunk the user undid is shown as reverted, one redone (its
        agent lines back) is pending again, and the file on disk follows both, so
        buffer, disk and review agree."""
        path = os.path.normpath(path)
        async with self._lock:
            try:
                change = self._latest(path).file(path)
            except ReviewError:
                return  # no agent change of this file in this chat
            buffer = await self.editor.read_buffer(path)
            if buffer is None or buffer.text == change.current:
                return
            before = change.current
            followed = change.user_edit(buffer.text)
            if followed is not None and (self.auto_save or change.kind in _ON_DISK):
                doc = Document(path, buffer.text, buffer)
                await files.follow(self.editor, doc, (before or "", followed))
                self._known[path] = stat_of(path)
            self._publish()

    async def restore(self, turn: int) -> list[str]:
        """Take the files back to how they were before ``turn``: every change of that
        turn and later is taken out, open ones rejected and accepted ones reverted,
        each file in one change: one undo step per buffer, one write per file. The
        user's edits made since the agent's last change of a file are kept, where
        they clash as conflicts (see :meth:`ReviewStore.restore`). Returns the files
        restored."""
        restored: list[str] = []
        async with self._lock:
            kinds: dict[str, set[FileKind]] = {}
            for changeset in reversed(self.store.turns()):
                if changeset.turn < turn:
                    break
                for change in changeset.files():
                    if change.applied:
                        kinds.setdefault(change.path, set()).add(change.kind)
            for path, kind in kinds.items():
                disk = not kind.isdisjoint(_ON_DISK)
                rollback = self.store.checkpoint(path)
                try:
                    doc = await self._document(path, disk)
                    outcome = self.store.restore(path, turn)
                    await self._put(doc, outcome.text, disk)
                except (ReviewError, FileError) as err:
                    rollback()
                    self.editor.notify(str(err), "warn")
                    continue
                for clash in outcome.clashes:
                    self.editor.notify(clash, "warn")
                if outcome.conflicts:
                    self.editor.notify(
                        f"{self._name(path)}: you changed lines the restore takes back; "
                        "your text was kept (:AcpReview)",
                        "warn",
                    )
                if outcome.text != doc.text or outcome.conflicts:
                    restored.append(path)
            self._publish()
        return sorted(self._name(path) for path in restored)

    def summary(self) -> dict[str, Any]:
        """Plain data for Lua: ``{turn, files}``, files of every turn, newest first."""
        current = self.store.current
        return {
            "turn": current.turn if current is not None else 0,
            "files": self.store.changes(all_turns=True),
        }

    # -- internals -------------------------------------------------------------------

    def _publish(self) -> None:
        self.editor.review(self.chat_id, self.summary())

    def _name(self, path: str) -> str:
        rel = os.path.relpath(path, self.cwd)
        return path if rel.startswith("..") else rel

    def _paths(self, call: ToolCall) -> tuple[list[tuple[str, Edit]], bool]:
        """The files ``call`` names, with what it says it did to each, and whether
        they are new since its last update."""
        known = self._call_paths.get(call.id)
        if known is not None and known.reads(call):
            return known.paths, False
        found: list[tuple[str, Edit]] = []
        for part in call.content:
            if isinstance(part, DiffPart):
                found.append((part.path, part))
            elif isinstance(part, ChangesPart):
                patches = {self._abs(patch.path): patch for patch in _patches_of(part)}
                for op in part.changes:
                    found += [(p, patches.get(self._abs(p))) for p in (op.path, op.old_path) if p]
        found += [(loc.path, None) for loc in call.locations]
        paths = [(self._abs(p), d) for p, d in found]
        self._call_paths[call.id] = _CallPaths(
            call.content, len(call.content), call.locations, paths
        )
        return paths, True

    def _absent_at_start(self, path: str) -> bool:
        """True when the turn-start scan proves ``path`` did not exist then."""
        if not self._start.complete:
            return False
        for top in self.dirs:
            rel = os.path.relpath(path, top)
            if not rel.startswith(".."):
                scanned = not SKIP_DIRS.intersection(rel.split(os.sep)[:-1])
                return scanned and path not in self._start.stats
        return False

    def _snapshot(self, path: str) -> None:
        if self._absent_at_start(path):
            # Whatever it holds by now (a fast agent writes before we read the
            # announcement) is the agent's: its "before" is no file at all.
            return
        stat = stat_of(path)
        if path in self._known and self._known[path] != stat:
            return  # already changed since the turn began: not a "before" text
        text = _read_unchanged(path, stat)
        if isinstance(text, _Nothing):
            return
        self._snapshots[path] = text
        self._known.setdefault(path, stat)

    def _latest(self, path: str) -> Changeset:
        for changeset in reversed(self.store.turns()):
            if path in changeset:
                return changeset
        raise ReviewError(f"{path}: no recorded changes")

    async def _check_one(self, path: str) -> bool:
        stat = stat_of(path)
        if path in self._known and self._known[path] == stat:
            return False
        try:
            current = (await anyio.to_thread.run_sync(files.read_disk, path)).text
        except FileError:
            self._known[path] = stat
            return False
        baseline = await self._baseline(path, current)
        self._known[path] = stat
        if isinstance(baseline, _Nothing) or baseline == current:
            return False
        self.store.record(path, baseline, current, "patch" if path in self._patches else "disk")
        return True

    async def _baseline(self, path: str, current: str | None) -> Baseline:
        """What ``path`` held before the agent changed it (see the module docstring).

        The first source that differs from ``current`` wins; sources that agree
        with it (a buffer Neovim already reloaded) do not hide a later one.
        """
        changeset = self.store.current
        if changeset is not None and path in changeset:
            return changeset.file(path).current
        if self._absent_at_start(path):
            # Not there when the turn began, and nothing recorded it since: whatever
            # a tool call's oldText or a buffer says (opencode sends "" for a new file).
            return None
        state = await self.editor.read_buffer(path)
        diff, patch = self._diffs.get(path), self._patches.get(path)
        sources: list[Baseline] = [
            self._snapshots.get(path, NOTHING),
            state.text if state is not None and not state.modified else NOTHING,
            baseline_from_diff(current, *diff) if diff and current is not None else NOTHING,
            baseline_from_patch(current, patch) if patch is not None else NOTHING,
            await self._git_text(path),
        ]
        known = [text for text in sources if not isinstance(text, _Nothing)]
        return next((text for text in known if text != current), known[0] if known else NOTHING)

    async def _git_text(self, path: str) -> Baseline:
        for git in self._gits:
            text = await anyio.to_thread.run_sync(git.clean_text, path)
            if text is not None:
                return text
        return NOTHING

    def _targets(
        self, path: str | None, hunk: int | None, turn: int | None
    ) -> list[tuple[str, int | None]]:
        if path is not None:
            path = os.path.normpath(path)
        if hunk is not None or turn is not None:
            return [(path, turn)] if path is not None else []
        return [
            (change.path, changeset.turn)
            for changeset in reversed(self.store.turns())
            for change in changeset.files()
            if change.open and (path is None or change.path == path)
        ]

    async def _decide_one(
        self, decision: Decision, path: str, hunk: int | None, turn: int | None
    ) -> None:
        change = (self.store.turn(turn) if turn is not None else self._latest(path)).file(path)
        disk = change.kind in _ON_DISK
        doc = await self._document(path, disk)
        rollback = self.store.checkpoint(path)
        if decision == "accept":
            text = self.store.accept(path, hunk, turn=turn)
        else:
            text = self.store.reject(path, hunk, turn=turn)
        try:
            await self._put(doc, text, disk)
        except FileError:
            rollback()  # the file is as it was: so is its review
            raise

    async def _document(self, path: str, disk: bool) -> Document:
        """``path`` as a decision meets it, the user's edits folded into the review;
        ``disk``: a change the agent made on disk, decided against the file when the
        buffer holds unsaved text (that text is not the disk's)."""
        doc = await files.load(self.editor, path)
        if disk and doc.buffer is not None and doc.buffer.modified:
            doc = await anyio.to_thread.run_sync(files.read_disk, path)
        latest = self._latest(path).file(path)
        if doc.text != latest.current:
            latest.user_edit(doc.text)
        return doc

    async def _put(self, doc: Document, text: str | None, disk: bool) -> None:
        """Make ``doc``'s file hold ``text`` a decision gave it (saved unless
        ``auto_save`` is off and the change was not the agent's on disk)."""
        if text == doc.text:
            return
        final = await files.save(self.editor, doc, text, to_disk=self.auto_save or disk)
        if final != text:
            self._latest(doc.path).file(doc.path).user_edit(final)
        self._known[doc.path] = stat_of(doc.path)
