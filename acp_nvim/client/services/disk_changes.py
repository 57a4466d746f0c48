"""What the agent changes on disk during a turn, behind ACP's back, and what each
file held before.

Two ways such a change is found, both recorded in the session's
:class:`~acp_nvim.review.ReviewStore` as a ``disk`` change:

- files named by tool calls (diff content, locations) that changed on disk;
- other files under the session's cwd and its workspace roots that changed during
  the turn, found by comparing (size, mtime_ns) against a bounded scan taken at
  turn start.

The baseline of a file changed on disk is, in this order: its text recorded
earlier in the turn; nothing at all for a file the turn-start scan did not
find; a snapshot taken when a tool call first named it while pending (or when
the turn started: in a git work tree the files dirty then, elsewhere every
file, newest first, within a byte budget); its loaded, unmodified buffer; the
tool call's ``oldText`` (whole file, or a fragment found once in the new text)
or its v2 ``git_patch`` taken back (then the change is of kind ``patch``); its
git index entry when it was clean at turn start.
doc/decisions/0005-review-baselines.md explains why.

A change to a file whose buffer holds unsaved edits is merged into that buffer, as
an agent write through the editor is (decision 0015, amended). A file deleted while
a buffer shows it is recorded and the user told; the buffer keeps its text.
"""

from __future__ import annotations

__all__ = [
    "NOTHING",
    "Baseline",
    "DiskChanges",
    "Nothing",
    "Scan",
    "baseline_from_diff",
    "baseline_from_patch",
    "patches_of",
    "scan_tree",
    "stat_of",
    "under",
]

import os
import time
from collections import ChainMap
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from functools import partial
from stat import S_ISREG
from typing import Any, TypeGuard, cast

import anyio
import anyio.to_thread
import msgspec

from acp_nvim.client.editor import BufferState, Editor
from acp_nvim.client.services import files
from acp_nvim.client.services.files import FileError, Stat, stat_of
from acp_nvim.client.services.git import GitState, IndexedBytes
from acp_nvim.client.services.tree_watch import News, TreeWatch
from acp_nvim.client.session.model import ChangesPart, ContentPart, DiffPart, Location, ToolCall
from acp_nvim.client.session.workspace import shown_path
from acp_nvim.client.text import DecodedFile, decode_file, encode_file, eol_of
from acp_nvim.review import (
    FileKind,
    FilePatch,
    PatchError,
    ReviewStore,
    apply_patch,
    parse_unified,
    reverse_patch,
)

# Directories never scanned, by name: version control, dependencies, caches. (By
# path, the scan skips Neovim's own directories and the history's files too:
# DiskChanges' ``skip_paths``.)
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__",
     ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"}
)  # fmt: skip
SCAN_MAX_FILES = 20_000
# The scan's time cap counts its own thread's time: it guards against a huge tree's
# work. A machine busy with a build keeps the thread from a core while the wall clock
# runs on, and a scan cut short there gave up the tree's watch, so that every turn
# start and check scanned again and was cut short again (decision 0054, amended).
# Waiting counts past this many times the cap in wall time (a slow file system: its
# stat waits without working).
SCAN_MAX_SECONDS = 0.25
SCAN_MAX_WAIT = 4
# The scan lets go of the GIL for a moment after every piece of this many entries.
# Otherwise it lets go only for its system calls, each too short for a waiting thread
# to wake and take it: the worker loop waited up to 16 ms to answer while a turn
# start scanned 20k files (decision 0054).
SCAN_PIECE = 256
SCAN_PAUSE_S = 0.0001
# A tool call naming a bigger file gets no content snapshot.
SNAPSHOT_MAX_BYTES = 2 * 1024 * 1024
# Dirty files of a git work tree snapshotted at turn start, at most.
SNAPSHOT_MAX_DIRTY = 200
# Outside git, the text of the tree's files is kept at turn start, most recently
# changed first, up to this much in all; a file unchanged since the last turn is not
# read again (decision 0005).
SNAPSHOT_MAX_TOTAL = 8 * 1024 * 1024

class Scan(msgspec.Struct):
    """(size, mtime_ns) of regular files under a root; ``complete`` False when capped."""

    stats: dict[str, Stat] = msgspec.field(default_factory=dict)
    complete: bool = True


def scan_tree(
    *roots: str,
    max_files: int = SCAN_MAX_FILES,
    max_seconds: float | None = None,
    watch: TreeWatch | None = None,
    skip_paths: Collection[str] = (),
) -> Scan:
    """Stat the files under ``roots``, first to last, skipping :data:`SKIP_DIRS`, the
    directories and files ``skip_paths`` names below them, and symlinks; with ``watch``, watch
    every directory entered before listing it.

    Stops at a file past ``max_files`` or after ``max_seconds`` of its thread's time
    (default :data:`SCAN_MAX_SECONDS`, read at the call), or :data:`SCAN_MAX_WAIT`
    times as long in wall time (then
    ``complete`` is False: files not reached are only checked when a tool call
    names them); a tree of exactly ``max_files`` files is scanned complete. Pauses
    after every :data:`SCAN_PIECE` entries, so the thread it runs in never keeps the
    GIL from the worker loop for long.
    """
    budget = _Budget(SCAN_MAX_SECONDS if max_seconds is None else max_seconds)
    scan = Scan()
    stack = list(reversed(roots))
    seen = 0
    while stack:
        folder = stack.pop()
        if watch is not None:
            watch.add_dir(folder, root=folder in roots)
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIP_DIRS and entry.path not in skip_paths:
                            stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False) and entry.path not in skip_paths:
                        if len(scan.stats) == max_files:  # a file past the cap: not all seen
                            scan.complete = False
                            return scan
                        st = entry.stat(follow_symlinks=False)
                        scan.stats[entry.path] = (st.st_size, st.st_mtime_ns)
                except OSError:
                    continue
                seen += 1
                if seen % SCAN_PIECE == 0:
                    _let_others_run()
                if time.monotonic() > budget.deadline and budget.spent():
                    scan.complete = False
                    return scan
    return scan


class _Budget:
    """``seconds`` of the calling thread's time, within :data:`SCAN_MAX_WAIT` times as
    much wall time. Its thread's time is read (a system call, ~2.5 us) only once the
    wall clock passes ``deadline``; until then none of it can be spent."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._started = time.monotonic()
        self._cpu = time.thread_time()
        self.deadline = self._started + seconds

    def spent(self) -> bool:
        """Asked once the wall clock passed :attr:`deadline`: whether the budget is
        spent; if not (the thread waited for a core meanwhile), the next deadline is
        as far off as the thread's time left."""
        now = time.monotonic()
        left = self._seconds - (time.thread_time() - self._cpu)
        if left <= 0 or now - self._started > self._seconds * SCAN_MAX_WAIT:
            return True
        self.deadline = now + left
        return False


def _let_others_run() -> None:
    """Leave the GIL free long enough for a thread waiting for it to take it."""
    time.sleep(SCAN_PAUSE_S)


class _CallPaths(msgspec.Struct):
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


class Nothing:
    """No baseline from this source."""


# What a tool call says it did to a file: a v1 diff, a v2 git patch, or nothing.
Edit = DiffPart | FilePatch | None
NOTHING = Nothing()
Baseline = str | None | Nothing


def patches_of(part: ChangesPart) -> list[FilePatch]:
    """The file sections of a v2 ``git_patch`` (none when it is another format or
    does not parse)."""
    if not part.patch or part.patch_format != "git_patch":
        return []
    try:
        return parse_unified(part.patch)
    except PatchError:
        return []


def baseline_from_diff(current: str, old: str | None, new: str) -> Baseline:
    """The file before a tool call's diff, given the file after it.

    Agents send the whole file (some without its final newline) or only the
    replaced fragment; ``NOTHING`` when ``current`` matches neither.
    """
    eol = eol_of(current)
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


# The file as it was: its text, or the bytes of a file with no text (decision 0099).
Before = files.Document | bytes
Kept = dict[str, tuple[Stat, Before]]  # path -> (size, mtime_ns) and file then


class _TurnStart(msgspec.Struct):
    """What a turn compares against: the scan of ``dirs``, the dirty files of each
    git work tree they are in, the texts whose "before" nothing else will hold; and
    the watch that brings them up to date at the next turn start."""

    dirs: tuple[str, ...]
    scan: Scan
    gits: list[GitState]
    kept: Kept
    watch: TreeWatch | None = None
    # ``kept`` by kind, split once where it is read (a worker thread): each turn start
    # it serves overlays them (DiskChanges.begin_turn) instead of copying them.
    texts: dict[str, files.Document] = msgspec.field(default_factory=dict)
    binaries: dict[str, bytes] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        for path, (_, before) in self.kept.items():
            if isinstance(before, bytes):
                self.binaries[path] = before
            else:
                self.texts[path] = before

    def watching(self, dirs: tuple[str, ...]) -> TreeWatch | None:
        """The watch, when it covers ``dirs`` (the chat's directories are the same)."""
        return self.watch if self.dirs == dirs else None


def _turn_start(
    dirs: tuple[str, ...], last: _TurnStart | None, skip_paths: Collection[str]
) -> _TurnStart:
    """What the turn starting now compares against, read in a worker thread: the last
    turn start's brought up to date from its watch's news, or read anew (and a new
    watch set up) when the watch cannot vouch for them (decision 0060)."""
    if last is not None:
        known = _up_to_date(last, dirs, skip_paths)
        if known is not None:
            return known
        if last.watch is not None:
            last.watch.close()
    watch = TreeWatch.open(SKIP_DIRS)
    try:
        scan = scan_tree(*dirs, watch=watch, skip_paths=skip_paths)
        gits = _read_gits(dirs, watch)
    except BaseException:
        # Left to the collector, the inotify instance (the user has 128 in all)
        # would stay open until a collection happened to free it.
        if watch is not None:
            watch.close()
        raise
    if watch is not None and not (scan.complete and watch.whole):
        watch.close()
        watch = None
    kept = _keep_texts(dirs, scan, gits, last.kept if last is not None else {})
    return _TurnStart(dirs, scan, gits, kept, watch)


def _unchanged(last: _TurnStart | None, dirs: tuple[str, ...]) -> TypeGuard[_TurnStart]:
    """Whether ``last`` is the turn start now: its watch saw nothing change. Asked on
    the event loop (a read of the kernel's queue), it spares the send the hops to a
    worker thread and back (0.3-0.5 ms of a 3 ms turn start, measured). What the
    kernel queues after this belongs to the turn."""
    watch = last.watching(dirs) if last is not None else None
    news = watch.peek() if watch is not None else None
    return news is not None and not (news.paths or news.new_dirs or news.index_changed)


def _read_gits(dirs: Sequence[str], watch: TreeWatch | None) -> list[GitState]:
    """The state of each git work tree ``dirs`` are in, each index watched by ``watch``."""
    gits: dict[str, GitState] = {}
    for top in dirs:
        git = GitState.read(top, watch.add_index if watch is not None else None)
        if git is not None:
            gits.setdefault(git.root, git)
    return list(gits.values())


def _up_to_date(
    last: _TurnStart, dirs: tuple[str, ...], skip_paths: Collection[str]
) -> _TurnStart | None:
    """``last`` as it is now, from its watch's news: the files it names stat-ed again
    (a removed one is gone), new directories scanned, and the files changed counted
    dirty (a clean one among them only costs a snapshot of its text); git read again
    when an index changed. ``last`` itself when nothing changed; None when the watch
    cannot vouch for it."""
    watch = last.watching(dirs)
    if watch is None or (news := watch.news()) is None:
        return None
    changed = _named(news, watch, skip_paths)
    if changed is None:
        return None
    if not changed and not news.index_changed:
        return last
    stats = dict(last.scan.stats)
    for path in changed:
        stat = _file_stat(path)
        if stat is None:
            stats.pop(path, None)
        else:
            stats[path] = stat
    if len(stats) > SCAN_MAX_FILES or not watch.whole:
        return None
    gits = [
        GitState(
            git.root,
            git.dirty | {p for p in changed if p.startswith(git.root + os.sep)},
            git.index,
        )
        for git in last.gits
    ]
    if news.index_changed or any(len(git.dirty) > SNAPSHOT_MAX_DIRTY for git in gits):
        gits = _read_gits(dirs, None)  # the indexes are watched already
    scan = Scan(stats)
    return _TurnStart(dirs, scan, gits, _keep_texts(dirs, scan, gits, last.kept), watch)


def _named(news: News, watch: TreeWatch, skip_paths: Collection[str]) -> set[str] | None:
    """The files ``news`` names, and those of its new directories (but those the scan
    skips), scanned with ``watch`` (so watched from now on); None when such a scan
    was capped."""
    named = set(news.paths).difference(skip_paths)
    for folder in news.new_dirs:
        if folder in skip_paths:
            continue
        found = scan_tree(folder, watch=watch, skip_paths=skip_paths)
        if not found.complete:
            return None
        named.update(found.stats)
    return named


def _file_stat(path: str) -> Stat | None:
    """(size, mtime_ns) of ``path`` as the scan takes it: None unless a regular file
    (a symlink is not followed)."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns) if S_ISREG(st.st_mode) else None


def _keep_texts(dirs: Sequence[str], scan: Scan, gits: list[GitState], kept: Kept) -> Kept:
    """The text of the files whose "before" nothing else will hold: in a git work
    tree the dirty ones the scan found (git knows the clean ones' text), outside git
    every file, newest first, within :data:`SNAPSHOT_MAX_TOTAL`; of a file with no
    text, its bytes. ``kept``: the last turn's, taken again for files that did not
    change."""
    snapshots: Kept = {}

    def take(path: str) -> int:
        """Keep the text of ``path``; its size, 0 when it was not kept."""
        stat = scan.stats.get(path)
        before = kept.get(path)
        if stat is None:
            return 0
        if before is not None and before[0] == stat:
            doc: Before | Nothing = before[1]
        elif stat_of(path) == stat:
            doc = _read_unchanged(path, stat)
        else:
            return 0
        if isinstance(doc, Nothing) or (isinstance(doc, files.Document) and doc.text is None):
            return 0
        snapshots[path] = (stat, doc)
        return stat[0]

    for git in gits:
        for path in sorted(git.dirty)[:SNAPSHOT_MAX_DIRTY]:
            take(path)
    in_git = tuple(git.root.rstrip(os.sep) + os.sep for git in gits)
    # Every path under a directory starts with it: no walk of 20k paths with the GIL
    # held (milliseconds) to find none outside git.
    all_in_git = all((top.rstrip(os.sep) + os.sep).startswith(in_git) for top in dirs)
    outside = [] if all_in_git else [p for p in scan.stats if not p.startswith(in_git)]
    room = SNAPSHOT_MAX_TOTAL
    for path in sorted(outside, key=lambda p: scan.stats[p][1], reverse=True):
        if scan.stats[path][0] <= room:
            room -= take(path)
    return snapshots


def _read_unchanged(path: str, stat: Stat | None) -> Before | Nothing:
    """The file ``path`` (its bytes when it has no text) when it still has ``stat``
    after the read; NOTHING when it is too big to keep, unreadable, or being written
    meanwhile."""
    if stat is not None and stat[0] > SNAPSHOT_MAX_BYTES:
        return NOTHING
    try:
        doc: Before | None = files.read_disk(path)
    except FileError as err:
        doc = _read_binary(path) if err.reason == "binary" else None
    return doc if doc is not None and stat_of(path) == stat else NOTHING


def _read_binary(path: str) -> bytes | None:
    """The bytes of the file with no text at ``path``; None when unreadable or gone."""
    try:
        return files.read_bytes(path, SNAPSHOT_MAX_BYTES + 1)
    except FileError:
        return None


def _read_from(
    found: files.Document | DecodedFile | None,
) -> tuple[Baseline, DecodedFile | None]:
    """A baseline read from a file, with the file's encoding; NOTHING without one."""
    if found is None:
        return NOTHING, None
    decoded = found if isinstance(found, DecodedFile) else found.encoding
    return found.text, files.encoding_of(decoded)


async def _bytes_elsewhere(
    snapshots: Mapping[str, files.Document], gits: list[GitState], path: str
) -> IndexedBytes | None:
    """The bytes of ``path`` before the turn where no snapshot of its own kept them:
    its text then (``snapshots``), encoded as it was read; git's, were it clean, up
    to :data:`SNAPSHOT_MAX_BYTES` (a larger file's digest: decision 0099)."""
    snapshot = snapshots.get(path)
    if snapshot is not None and snapshot.text is not None:
        try:
            return IndexedBytes(encode_file(snapshot.text, snapshot.encoding), True)
        except ValueError:
            return None
    for state in gits:
        found = await anyio.to_thread.run_sync(state.clean_bytes, path, SNAPSHOT_MAX_BYTES)
        if found is not None:
            return found
    return None


async def _tell_unreviewed(editor: Editor, cwd: str, gits: list[GitState], path: str) -> None:
    """The agent deleted ``path``, a text nothing kept before (a clean tracked one
    over :data:`files.MAX_BYTES`, a dirty one over the snapshots' limits): no review
    can show or undo that, so the user is told, with git's way back where git holds
    it. Not restored from git's blob by a reject: a review holds a file's text to
    draw, merge and undo it, which such a file would cost whole (decision 0099)."""
    name = shown_path(path, cwd)
    tracked = await _bytes_elsewhere({}, gits, path) is not None
    editor.notify(
        f"the agent deleted {name}, too large a text for the review to keep: it is not"
        " reviewed, and no reject brings it back"
        + (f" (git restore {name} does)" if tracked else ""),
        "warn",
    )


def call_paths(
    content: Sequence[ContentPart], locations: Sequence[Location], cwd: str
) -> list[tuple[str, Edit]]:
    """The files a tool call's ``content`` and ``locations`` name (absolute, against
    ``cwd``), with what it says it did to each."""
    found: list[tuple[str, Edit]] = []
    for part in content:
        if isinstance(part, DiffPart):
            found.append((part.path, part))
        elif isinstance(part, ChangesPart):
            patches = {under(cwd, patch.path): patch for patch in patches_of(part)}
            for op in part.changes:
                found += [(p, patches.get(under(cwd, p))) for p in (op.path, op.old_path) if p]
    found += [(loc.path, None) for loc in locations]
    return [(under(cwd, p), d) for p, d in found]


def under(cwd: str, path: str) -> str:
    """``path`` (relative to ``cwd``, or absolute) normalized."""
    return os.path.normpath(os.path.join(cwd, path))


class DiskChanges:
    """The disk side of one session's review: the turn-start scan, the files tool
    calls name, and the baselines a change on disk is recorded against in ``store``.

    Holds no lock of its own: :class:`~acp_nvim.client.services.changes.SessionChanges`
    calls it with the session's lock held.
    """

    def __init__(
        self,
        editor: Editor,
        cwd: str,
        store: ReviewStore,
        roots: Sequence[str] = (),
        skip_paths: Collection[str] = (),
    ) -> None:
        self.editor = editor
        self.cwd = cwd
        self.roots = roots  # the chat's workspace roots (its live list), scanned after cwd
        # Directories never scanned below cwd and the roots: Neovim's own (decision
        # 0077). What changes in them is never the agent's work, whoever did it.
        self.skip_paths = skip_paths
        self.store = store
        # The turn-start scan; none yet proves no file absent (complete=False).
        self._start = Scan(complete=False)
        self._gits: list[GitState] = []  # dirty files at turn start, of each git work tree
        # Last (size, mtime) seen per file: what the turn saw over the turn start's scan.
        self._known: MutableMapping[str, Stat | None] = {}
        self.named: dict[str, None] = {}  # paths tool calls named this turn, in order
        # Texts before the turn: when a pending tool call named it, over the turn start's.
        self._snapshots: MutableMapping[str, files.Document] = {}
        self._bytes: MutableMapping[str, bytes] = {}  # the same, of files with no text
        # How each file was encoded when its text before a change was first known: a
        # decision writes it so where its text cannot tell (files.as_first_read).
        self.encodings: dict[str, DecodedFile] = {}
        self._last: _TurnStart | None = None  # the last turn start's reading, and its watch
        self._closed = False
        self._reading: anyio.Event | None = None  # set when a reading under way ends
        self._tried: set[str] = set()  # paths snapshotted (or found unfit) this turn
        # The paths of each tool call, with the content and locations lists they were
        # read from: recomputed only when those change, not on every status update.
        self._call_paths: dict[str, _CallPaths] = {}
        self._diffs: dict[str, tuple[str | None, str]] = {}  # latest tool call diff per path
        self._patches: dict[str, FilePatch] = {}  # latest v2 git_patch section per path
        self._checked: set[str] = set()  # tool calls whose completion was checked
        self._due: dict[str, None] = {}  # paths named by completions not yet checked
        # The text each change recorded this turn left on disk, until we write there.
        self._on_disk: dict[str, str] = {}
        self._told_deleted: set[str] = set()  # deleted files whose buffer we told of
        # Digests of files' bytes known from elsewhere, with the (size, mtime_ns) they
        # were taken at: a worktree's copies of the user's files (decision 0099).
        self.digests: Mapping[str, tuple[Stat, str]] = {}

    def __repr__(self) -> str:
        return f"<DiskChanges {self.cwd} {len(self.named)} named, {len(self._due)} due>"

    @property
    def dirs(self) -> list[str]:
        """The directories the turn's scan covers: the session's, then its roots."""
        return [self.cwd, *self.roots]

    async def begin_turn(self) -> None:
        """Take what the turn compares against. The scan, git and the snapshots run
        in a worker thread (a 20k-file tree takes a tenth of a second, unless a watch
        knows what changed since the last turn start): every other chat streams on
        meanwhile."""
        last = await self._read_start()
        self._start, self._gits = last.scan, last.gits
        # Not copies, which are paid in the send before the prompt leaves: 20k files'
        # stats took 0.4-1 ms, the GIL held; 200 dirty files' texts split by kind 0.08.
        # What this turn snapshots goes in the overlays' first maps.
        self._snapshots = ChainMap({}, last.texts)
        self._bytes = ChainMap({}, last.binaries)
        self._known = ChainMap({}, cast(dict[str, Stat | None], last.scan.stats))
        self.named.clear()
        self._tried.clear()
        self._call_paths.clear()
        self._diffs.clear()
        self._patches.clear()
        self._checked.clear()
        self._due.clear()
        self._on_disk.clear()
        self._told_deleted.clear()

    async def prepare(self) -> None:
        """Read what the first turn will compare against before it begins (while the
        user writes the prompt): its start then asks the watch what changed since.
        Needs no lock of the session's: a turn start waits for this reading."""
        if self._last is None and self._reading is None:
            await self._read_start()

    async def _read_start(self) -> _TurnStart:
        while self._reading is not None:  # the ready session's reading, under way
            await self._reading.wait()
        dirs = tuple(self.dirs)
        if _unchanged(self._last, dirs):
            return self._last
        self._reading = anyio.Event()
        try:
            last = self._last = await anyio.to_thread.run_sync(
                _turn_start, dirs, self._last, self.skip_paths
            )
        finally:
            self._reading.set()
            self._reading = None
        if self._closed:  # closed while the thread read
            self.close()
        return last

    def end_turn(self) -> None:
        """The turn's last check is done: until the next turn begins, no file counts
        as absent at its start."""
        self._start = Scan(complete=False)

    def close(self) -> None:
        """The session is gone: let go of the watch (idempotent)."""
        self._closed = True
        if self._last is not None and self._last.watch is not None:
            self._last.watch.close()

    def on_tool_call(self, call: ToolCall, in_turn: bool) -> bool:
        """Note the files a tool call names; True when it just completed ``in_turn``,
        so its files are due for a check (:meth:`take_due`)."""
        paths, fresh = self._paths(call)
        unfinished = call.status in ("pending", "in_progress")
        for path, edit in paths if fresh else ():
            self.named[path] = None
            if isinstance(edit, DiffPart):
                self._diffs[path] = (edit.old_text, edit.new_text)
            elif isinstance(edit, FilePatch):
                self._patches[path] = edit
            if unfinished and path not in self._tried:
                self._tried.add(path)
                self._snapshot(path)
        finished = call.status in ("completed", "failed") and in_turn
        if finished and call.id not in self._checked:
            self._checked.add(call.id)
            self._due.update((path, None) for path, _ in paths)
            return True
        return False

    def take_due(self) -> dict[str, None]:
        """The files completed tool calls named since the last take."""
        due, self._due = self._due, {}
        return due

    def seen(self, path: str) -> None:
        """``path`` holds what we wrote: no change of the agent's to find there."""
        self._known[path] = stat_of(path)
        self._on_disk.pop(path, None)

    async def changed(self, named: dict[str, None], skip: Collection[str] = ()) -> list[str]:
        """Record ``named`` and what changed since the turn began (what the watch saw,
        else what a scan finds), but for ``skip``; the files recorded."""
        candidates = dict(named)
        seen = await anyio.to_thread.run_sync(self._watched_since_start)
        if seen is not None:
            candidates.update(seen)
        else:
            now = await anyio.to_thread.run_sync(
                partial(scan_tree, *self.dirs, skip_paths=self.skip_paths)
            )
            candidates.update((p, None) for p, st in now.stats.items() if self._known.get(p) != st)
            if self._start.complete and now.complete:
                candidates.update(
                    (p, None)
                    for p, st in self._known.items()
                    if st is not None and p not in now.stats
                )
        return [path for path in candidates if path not in skip and await self.check_one(path)]

    def _watched_since_start(self) -> dict[str, None] | None:
        """The files the watch saw change since the turn began (and those in new
        directories, scanned); None when it cannot say."""
        watch = self._last.watching(tuple(self.dirs)) if self._last is not None else None
        if watch is None or (news := watch.peek()) is None:
            return None
        named = _named(news, watch, self.skip_paths)
        return None if named is None else dict.fromkeys(named)

    async def check_one(self, path: str) -> bool:
        """Record a change of ``path`` on disk since it was last seen; whether there was one."""
        stat, before = stat_of(path), self._known.get(path)
        if path in self._known and before == stat:
            return False
        try:
            current = (await anyio.to_thread.run_sync(files.read_disk, path)).text
        except FileError as err:
            self._known[path] = stat
            return err.reason == "binary" and await self._record_binary(path, stat)
        if current is None and await self._was_binary(path):
            self._known[path] = stat
            return await self._record_binary(path, None)
        buffer = await self.editor.read_buffer(path)
        baseline = await self._baseline(path, current, buffer)
        self._known[path] = stat
        if (isinstance(baseline, Nothing) or self._recorded_binary(path)) and (
            await self._was_binary(path)
        ):
            # Text now, bytes before the turn (or earlier in it): one change of the
            # whole file, whose reject puts the bytes back (decision 0099).
            return await self._record_binary(path, stat)
        if isinstance(baseline, Nothing) and current is None and path in self._start.stats:
            await _tell_unreviewed(self.editor, self.cwd, self._gits, path)
        if isinstance(baseline, Nothing) or baseline == current:
            return False
        kind: FileKind = "patch" if path in self._patches else "disk"
        if buffer is None or not buffer.modified or current is None:
            self.store.record(path, baseline, current, kind)  # ChangeService reloads its buffer
            if current is None and buffer is not None:
                self._tell_deleted(path, buffer)
        elif not await self._write_behind(buffer, path, baseline, current, kind, before):
            self.store.record(path, baseline, current, kind)
            self.editor.notify(
                f"{shown_path(path, self.cwd)} changed on disk; your buffer has unsaved "
                "edits and was not reloaded",
                "warn",
            )
        if current is not None:
            self._on_disk[path] = current
        return True

    def _recorded_binary(self, path: str) -> bool:
        """Whether this turn recorded ``path`` as a file with no text."""
        changeset = self.store.current
        return changeset is not None and changeset.binary(path) is not None

    async def _was_binary(self, path: str) -> bool:
        """Whether ``path`` had no text before (it was deleted, or has text now):
        recorded so this turn, its bytes kept, or so in git's index while clean."""
        if self._recorded_binary(path) or path in self._bytes:
            return True
        if path in self._snapshots or self._absent_at_start(path):
            return False
        indexed = await _bytes_elsewhere(self._snapshots, self._gits, path)
        return indexed is not None and "\0" in decode_file(indexed.data[:8192]).text

    async def _record_binary(self, path: str, stat: Stat | None) -> bool:
        """Record a change of ``path``, a file with no text (or none now: ``stat``
        None), as a whole: what it held before the turn, if kept (decision 0099)."""
        existed, before, was = await self._bytes_before(path)
        start = self._start.stats.get(path)
        before_size = len(before) if before is not None else (start[0] if start else None)
        if existed and before is not None and stat is not None and before_size == stat[0]:
            now = await anyio.to_thread.run_sync(_read_binary, path)
            if now == before:
                return False  # touched, not changed
        kind: FileKind = "patch" if path in self._patches else "disk"
        size = stat[0] if stat is not None else None
        left = await anyio.to_thread.run_sync(files.digest_of, path) if stat is not None else None
        if was is not None and left == was:
            return False  # the same: of bytes too large to keep, only the digest tells
        self.store.record_binary(
            path, before, before_size, size, existed=existed, kind=kind, left=left,
            before_digest=was,
        )  # fmt: skip
        return True

    async def _bytes_before(self, path: str) -> tuple[bool, bytes | None, str | None]:
        """Whether ``path`` was there before this turn's change of it, its bytes then
        (None: not kept) and, where too large to keep, their digest (git's clean
        files). A file the turn changed as text first (it turned binary since) was
        what rejecting that text change would leave: the text before the turn with
        the hunks accepted meanwhile and the user's edits in it, as it was encoded
        (decision 0099)."""
        changeset = self.store.current
        if changeset is not None and changeset.binary(path) is None and path in changeset:
            text = changeset.file(path).baseline
            if text is None:
                return False, None, None
            try:
                return True, encode_file(text, self.encodings.get(path)), None
            except ValueError:
                return True, None, None
        if self._absent_at_start(path):
            return False, None, None
        if (kept := self._bytes.get(path)) is not None:
            return True, kept, None
        found = await _bytes_elsewhere(self._snapshots, self._gits, path)
        if found is None:
            return True, None, self._digest_at_start(path)
        return True, found.data if found.whole else None, found.digest

    def _digest_at_start(self, path: str) -> str | None:
        """The SHA-256 of ``path``'s bytes at turn start, where :attr:`digests`
        knows them for the (size, mtime_ns) the turn start found it with."""
        known, start = self.digests.get(path), self._start.stats.get(path)
        return known[1] if known is not None and known[0] == start else None

    def _tell_deleted(self, path: str, buffer: BufferState) -> None:
        """The agent deleted ``path`` while a buffer shows it: the buffer keeps its text
        (the review marks it deleted; a reject writes it back), once a turn a file."""
        if path in self._told_deleted:
            return
        self._told_deleted.add(path)
        keeps = "your unsaved text" if buffer.modified else "its text"
        self.editor.notify(
            f"the agent deleted {shown_path(path, self.cwd)}; the buffer keeps {keeps} "
            "(:AcpHunk reject restores the file)",
            "warn",
        )

    async def _write_behind(
        self,
        buffer: BufferState,
        path: str,
        baseline: str | None,
        current: str,
        kind: FileKind,
        stat_before: Stat | None,
    ) -> bool:
        """The agent's change of a file on disk merged into its buffer's unsaved text,
        as an agent write through the editor is (decision 0015, amended): the buffer
        gets the agent's lines (minimal edits, not saved), the user's stay, and the
        review follows the buffer; ``stat_before``: the file's stat last seen. False,
        with nothing recorded, for a file whose text before the change is not known,
        or a buffer that would not take the change."""
        before = self._disk_before(path, baseline)
        if before is None:
            return False
        rollback = self.store.checkpoint(path)
        outcome = self.store.write_behind(path, before, current, editor_text=buffer.text, kind=kind)
        try:
            final = await files.save(
                self.editor, files.Document(path, buffer.text, buffer), outcome.text,
                to_disk=False, moved=True, before=stat_before,
            )  # fmt: skip
        except FileError:
            rollback()
            return False
        changeset = self.store.current
        assert changeset is not None  # write_behind recorded into it
        if final != outcome.text:  # the user typed meanwhile: theirs, as in files.save
            changeset.file(path).user_edit(final)
        clash = "; where it changed lines you edited, your text was kept (:AcpReview)"
        self.editor.notify(
            f"{shown_path(path, self.cwd)} changed on disk behind your unsaved edits; the "
            "agent's change is in your buffer too (unsaved)"
            + (clash if outcome.conflicts else ""),
            "warn",
        )
        return True

    def _disk_before(self, path: str, baseline: str | None) -> str | None:
        """What the file held on disk before the change just found: ``baseline``,
        unless the review has recorded the file this turn (its text may then be a
        buffer's); then what the last change we recorded left there. None when
        unknown (we wrote the file since) or there was no file."""
        changeset = self.store.current
        if changeset is not None and path in changeset:
            return self._on_disk.get(path)
        return baseline

    def _paths(self, call: ToolCall) -> tuple[list[tuple[str, Edit]], bool]:
        """The files ``call`` names, with what it says it did to each, and whether
        they are new since its last update."""
        known = self._call_paths.get(call.id)
        if known is not None and known.reads(call):
            return known.paths, False
        paths = call_paths(call.content, call.locations, self.cwd)
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
                scanned = (
                    not SKIP_DIRS.intersection(rel.split(os.sep)[:-1])
                    and path not in self.skip_paths
                    and not any(path.startswith(skipped + os.sep) for skipped in self.skip_paths)
                )
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
        doc = _read_unchanged(path, stat)
        if isinstance(doc, Nothing):
            return
        if isinstance(doc, bytes):
            self._bytes[path] = doc
        else:
            self._snapshots[path] = doc
        self._known.setdefault(path, stat)

    async def _baseline(
        self, path: str, current: str | None, buffer: BufferState | None
    ) -> Baseline:
        """What ``path`` held before the agent changed it (see the module docstring);
        ``buffer``: its buffer now, if loaded.

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
        diff, patch = self._diffs.get(path), self._patches.get(path)
        snapshot, git = self._snapshots.get(path), await self._git_file(path)
        # Each with the encoding of the file it was read from, if it was one.
        sources: list[tuple[Baseline, DecodedFile | None]] = [
            _read_from(snapshot),
            (buffer.text if buffer is not None and not buffer.modified else NOTHING, None),
            (baseline_from_diff(current, *diff) if diff and current is not None else NOTHING, None),
            (baseline_from_patch(current, patch) if patch is not None else NOTHING, None),
            _read_from(git),
        ]
        known = [source for source in sources if not isinstance(source[0], Nothing)]
        text, encoding = next(
            (source for source in known if source[0] != current),
            known[0] if known else (NOTHING, None),
        )
        if encoding is None and path not in self.encodings and isinstance(text, str):
            # Its text came from a buffer or the agent's diff: the file as read before
            # the change, else (a dirty file over the snapshot limits) as git keeps it.
            read = (found for _, found in known if found is not None)
            indexed = partial(self._git_file, path, GitState.indexed_file)
            encoding = next(read, None) or files.encoding_of(await indexed())
        if encoding is not None:
            self.encodings.setdefault(path, encoding)
        return text

    async def _git_file(
        self, path: str, read: Callable[[GitState, str], DecodedFile | None] = GitState.clean_file
    ) -> DecodedFile | None:
        for state in self._gits:
            found = await anyio.to_thread.run_sync(read, state, path)
            if found is not None:
                return found
        return None
