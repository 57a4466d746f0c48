"""Which paths under a chat's directories changed since the last look: Linux's
inotify, read only when asked.

A turn start compares against the (size, mtime) of every file under the chat's
directories (decision 0005). Stat-ing 20k files anew at every turn start took
~100 ms of a core while the user waited for the prompt to leave; the kernel can
say instead what changed since the last turn start (decision 0060). A
:class:`TreeWatch` holds one inotify instance with a watch on every directory the
full scan entered; nothing reads it between turns (the kernel queues the events),
and :meth:`TreeWatch.news` drains the queue at the next turn start.

It vouches for what it saw, or says it cannot (``None``): the kernel's queue
overflowed, a watched directory was moved or a root went away, a watch could not
be added. The turn start then scans as before.
"""

from __future__ import annotations

__all__ = ["News", "TreeWatch"]

import ctypes
import os
import struct
import sys
import threading
import weakref
from collections.abc import Collection

import msgspec

# <sys/inotify.h>
_MODIFY, _ATTRIB, _CLOSE_WRITE = 0x2, 0x4, 0x8
_MOVED_FROM, _MOVED_TO, _CREATE, _DELETE = 0x40, 0x80, 0x100, 0x200
_DELETE_SELF, _MOVE_SELF, _UNMOUNT, _OVERFLOW, _IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
_ONLYDIR, _DONT_FOLLOW, _EXCL_UNLINK, _ISDIR = 0x1000000, 0x2000000, 0x4000000, 0x40000000
_TREE_MASK = (
    _MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE
    | _DELETE_SELF | _MOVE_SELF | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK
)  # fmt: skip
# A git index is replaced by a rename of its lock file, or written in place.
_INDEX_MASK = _MOVED_TO | _CLOSE_WRITE | _CREATE | _DELETE | _ONLYDIR
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
# Watches and instances are the user's, shared by every program: an LSP's file
# watcher that finds none left stops working. Past MAX_DIRS directories a chat's tree
# is scanned instead; all chats together hold at most a quarter of the user's watches
# and of the user's instances (one a chat: 128 in all by default).
MAX_DIRS = 4096


class _Share:
    """A quarter of one of the user's inotify limits, for all chats together; the
    limit is read at the first take."""

    def __init__(self, limit: str, default: int) -> None:
        self._limit = limit
        self._default = default
        self._lock = threading.Lock()
        self.left: int | None = None

    def __repr__(self) -> str:
        return f"<_Share {self.left} left of {self._limit}>"

    def take(self) -> bool:
        """One from the share; False when it is spent."""
        with self._lock:
            if self.left is None:
                try:
                    with open(self._limit) as limit:
                        self.left = int(limit.read()) // 4
                except (OSError, ValueError):
                    self.left = self._default // 4
            if self.left <= 0:
                return False
            self.left -= 1
            return True

    def give_back(self, count: int = 1) -> None:
        with self._lock:
            if self.left is not None:
                self.left += count


_watches = _Share("/proc/sys/fs/inotify/max_user_watches", 8192)
_instances = _Share("/proc/sys/fs/inotify/max_user_instances", 128)


def _let_go(fd: int, held: list[int]) -> None:
    """Close an inotify instance and give it and its watches back to the shares."""
    os.close(fd)
    _instances.give_back()
    _watches.give_back(held[0])
    held[0] = 0


class News(msgspec.Struct):
    """What changed under the watched directories since the last :meth:`TreeWatch.news`."""

    paths: set[str] = msgspec.field(default_factory=set)  # files created, changed or deleted
    new_dirs: list[str] = msgspec.field(default_factory=list)  # to scan (and now watched)
    index_changed: bool = False  # a watched git index was rewritten


class _Inotify:
    """The few libc calls inotify needs."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None)
        self.init1 = libc.inotify_init1
        self.add_watch = libc.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]


_inotify: _Inotify | None = None


def _libc() -> _Inotify | None:
    global _inotify
    if _inotify is None and sys.platform.startswith("linux"):
        try:
            _inotify = _Inotify()
        except (OSError, AttributeError):  # no such calls in this libc
            return None
    return _inotify


class TreeWatch:
    """inotify watches on the directories of one chat's scan, and on git indexes.

    Used from one thread at a time (the turn start's), but :meth:`close` may come
    from any: a lock keeps the descriptor from closing under a read.
    """

    def __init__(self, fd: int, libc: _Inotify, skip: Collection[str]) -> None:
        self._fd = fd
        self._libc = libc
        self._skip = skip
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory
        self._indexes: dict[int, set[str]] = {}  # watch descriptor -> index file names
        self._roots: set[int] = set()
        self._lost = False  # a watch could not be added: the watch vouches for nothing
        self._since = News()  # what changed since the last news()
        self._lock = threading.Lock()
        self._held = [0]  # watches taken from the share (given back at the close)
        self._closer = weakref.finalize(self, _let_go, fd, self._held)

    def __repr__(self) -> str:
        return f"<TreeWatch {len(self._dirs)} dirs, {len(self._indexes)} indexes>"

    @classmethod
    def open(cls, skip: Collection[str]) -> TreeWatch | None:
        """A new, empty watch; None where inotify is not there (not Linux, or out of
        instances or of the chats' share of them). ``skip``: names of directories
        never watched."""
        libc = _libc()
        if libc is None or not _instances.take():
            return None
        fd = libc.init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            _instances.give_back()
            return None
        return cls(fd, libc, skip)

    def add_dir(self, path: str, root: bool = False) -> None:
        """Watch ``path`` itself (not what is under it): a scan calls this for every
        directory it enters, before it lists it. A root may be a symlink (a home
        directory linked elsewhere); below it the scan follows none."""
        if len(self._dirs) >= MAX_DIRS:
            self._lost = True
            return
        wd = self._add(path, _TREE_MASK & ~_DONT_FOLLOW if root else _TREE_MASK)
        if wd >= 0:
            self._dirs[wd] = path
            if root:
                self._roots.add(wd)

    def add_index(self, index: str) -> None:
        """Watch git's index file ``index`` (its directory, for the index's name)."""
        folder, name = os.path.split(index)
        wd = self._add(folder, _INDEX_MASK)
        if wd >= 0:
            self._indexes.setdefault(wd, set()).add(name)

    def _add(self, path: str, mask: int) -> int:
        with self._lock:
            wd = -1
            if self._closer.alive and _watches.take():
                wd = self._libc.add_watch(self._fd, os.fsencode(path), mask)
                if wd < 0 or wd in self._dirs or wd in self._indexes:
                    _watches.give_back()  # not added, or the same directory again
                else:
                    self._held[0] += 1
        if wd < 0:
            self._lost = True  # out of watches (fs.inotify.max_user_watches), or gone
        return wd

    @property
    def whole(self) -> bool:
        """Every directory asked for is watched."""
        return not self._lost

    def news(self) -> News | None:
        """What changed since the last call (or since the watches were added); None
        when the watch cannot vouch for it. The caller scans the new directories with
        this watch, which watches them before listing them: nothing made in them is
        missed."""
        if not self._take_events():
            return None
        news, self._since = self._since, News()
        return news

    def peek(self) -> News | None:
        """What :meth:`news` would say now, without starting over: a check during a
        turn asks what changed since the turn began."""
        if not self._take_events():
            return None
        since = self._since
        return News(set(since.paths), list(since.new_dirs), since.index_changed)

    def _take_events(self) -> bool:
        """Add the kernel's queued events to what changed since the last
        :meth:`news`; False (from now on) when they leave the watch unable to vouch."""
        since = self._since
        # A directory is removed empty: its files' removals came from its own watch.
        for wd, mask, name in self._drain():
            if self._lost or mask & (_OVERFLOW | _UNMOUNT):
                self._lost = True
                break
            if mask & _IGNORED:  # the directory is gone, its watch with it
                if self._dirs.pop(wd, None) is not None:
                    self._held[0] -= 1
                    _watches.give_back()
                continue
            if wd in self._indexes:
                since.index_changed |= name in self._indexes[wd]
                continue
            folder = self._dirs.get(wd)
            if folder is None:
                continue
            if mask & _MOVE_SELF or (mask & _DELETE_SELF and wd in self._roots):
                self._lost = True  # a directory moved (its watches would name it wrongly)
                break
            if not name or mask & _DELETE_SELF:
                continue
            path = os.path.join(folder, name)
            if not mask & _ISDIR:
                since.paths.add(path)
            elif name in self._skip:
                continue
            elif mask & (_CREATE | _MOVED_TO):
                since.new_dirs.append(path)
            elif mask & _MOVED_FROM:
                self._lost = True
                break
        return not self._lost

    def _drain(self) -> list[tuple[int, int, str]]:
        """Every event the kernel queued: (watch descriptor, mask, name)."""
        events: list[tuple[int, int, str]] = []
        with self._lock:
            if not self._closer.alive:
                self._lost = True
                return events
            while True:
                try:
                    data = os.read(self._fd, 65536)
                except BlockingIOError:
                    break
                offset = 0
                while offset < len(data):
                    wd, mask, _, size = _EVENT.unpack_from(data, offset)
                    offset += _EVENT.size
                    name = data[offset : offset + size].rstrip(b"\0")
                    offset += size
                    events.append((wd, mask, os.fsdecode(name)))
        return events

    def close(self) -> None:
        """Let go of the watches (idempotent)."""
        with self._lock:
            self._closer()
