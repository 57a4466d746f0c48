"""A turn start after the first reads only what changed since the last (decision
0060): the inotify watch, and the review's baselines built on its news."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.client.services import disk_changes, tree_watch
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.tree_watch import News, TreeWatch
from acp_nvim.client.tasks import Tasks
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import inotify_instances
from tests.unit.memory_agent import MemoryAgent, app_with
from tests.unit.test_files import commit_all, git, hunks

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
async def changes(tmp_path: Path) -> AsyncIterator[SessionChanges]:
    """The review of ``tmp_path``, no turn begun; its watch let go of at the end."""
    async with anyio.create_task_group() as tasks:
        review = SessionChanges(RecordingEditor(), 1, str(tmp_path), Tasks(tasks))
        yield review
        review.close()
        tasks.cancel_scope.cancel()


def watched_or_not(root: Path) -> TreeWatch:
    watch = TreeWatch.open(disk_changes.SKIP_DIRS)
    assert watch is not None
    assert disk_changes.scan_tree(str(root), watch=watch).complete
    return watch


def watched(root: Path) -> TreeWatch:
    watch = watched_or_not(root)
    assert watch.whole
    return watch


def test_the_watch_names_what_changed_since_it_was_last_asked(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "node_modules").mkdir()
    kept, edited, gone = tmp_path / "kept.txt", tmp_path / "sub" / "edited.txt", tmp_path / "gone"
    for path in (kept, edited, gone):
        path.write_text("before\n")
    watch = watched(tmp_path)
    assert watch.news() == News()  # nothing yet
    edited.write_text("after\n")
    gone.unlink()
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "made.txt").write_text("x\n")  # before anything watched new/
    (tmp_path / "node_modules" / "dep.js").write_text("x\n")  # never watched
    news = watch.news()
    assert news is not None
    assert news.paths == {str(edited), str(gone)}
    assert news.new_dirs == [str(tmp_path / "new")]
    assert not news.index_changed
    # The turn start scans a new directory with the watch: what is made in it later
    # is news too.
    assert disk_changes.scan_tree(str(tmp_path / "new"), watch=watch).stats.keys() == {
        str(tmp_path / "new" / "made.txt")
    }
    (tmp_path / "new" / "later.txt").write_text("y\n")
    shutil.rmtree(tmp_path / "sub")
    news = watch.news()
    assert news is not None
    # A directory is removed empty: what was in it is named from its own watch.
    assert news.paths == {str(tmp_path / "new" / "later.txt"), str(edited)}
    assert watch.news() == News()  # asked again: nothing new
    watch.close()
    watch.close()
    assert watch.news() is None  # closed: it vouches for nothing


def test_a_root_through_a_symlink_is_watched(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    watch = watched(tmp_path / "link")
    (tmp_path / "real" / "a.txt").write_text("x\n")
    news = watch.news()
    assert news is not None and news.paths == {str(tmp_path / "link" / "a.txt")}
    watch.close()


def test_a_moved_directory_or_a_lost_watch_makes_the_watch_give_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    watch = watched(tmp_path)
    (tmp_path / "a").rename(tmp_path / "b")  # its watch would name b's files a/...
    assert watch.news() is None
    watch.close()
    watch = watched(tmp_path)
    monkeypatch.setattr(watch._libc, "add_watch", lambda *args: -1)  # out of watches
    (tmp_path / "c").mkdir()
    assert disk_changes.scan_tree(str(tmp_path / "c"), watch=watch).complete
    assert not watch.whole
    assert watch.news() is None
    watch.close()
    monkeypatch.setattr(tree_watch, "MAX_DIRS", 2)  # four directories now: no room
    (tmp_path / "b" / "d").mkdir()
    assert not watched_or_not(tmp_path).whole


def test_all_watches_together_keep_to_a_share_of_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other programs (an LSP's file watcher) need the user's inotify watches too: all
    chats' watches together take at most a quarter of them, and give them back when
    they close, or when their directory goes."""
    watches = tree_watch._Share("/nonexistent", 12)  # a quarter of 12: 3
    monkeypatch.setattr(tree_watch, "_watches", watches)
    (tmp_path / "a").mkdir()
    first = watched(tmp_path)  # the tree and a/
    assert watches.left == 1
    (tmp_path / "a").rmdir()
    assert first.news() is not None  # a/'s watch went with it
    assert watches.left == 2
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    second = watched_or_not(tmp_path)
    assert not second.whole  # the tree and b/ took what was left: none for c/
    assert watches.left == 0
    first.close()
    del second  # closed, or dropped: their watches come back
    assert watches.left == 3


def test_all_chats_together_keep_to_a_share_of_the_users_instances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each chat's watch is an inotify instance, of the user's 128 for every program
    (fs.inotify.max_user_instances): all chats together hold at most a quarter. A
    chat past them has none (its turn starts scan), and a closed chat's goes to the
    next one."""
    instances = tree_watch._Share("/nonexistent", 8)  # a quarter of 8: 2
    monkeypatch.setattr(tree_watch, "_instances", instances)
    first, second = (TreeWatch.open(disk_changes.SKIP_DIRS) for _ in range(2))
    assert first is not None and second is not None
    assert TreeWatch.open(disk_changes.SKIP_DIRS) is None
    first.close()
    third = TreeWatch.open(disk_changes.SKIP_DIRS)
    assert third is not None
    for watch in (second, third):
        watch.close()
    assert instances.left == 2


def count_scans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The roots of every scan from now on."""
    scans: list[tuple[str, ...]] = []
    scan_tree = disk_changes.scan_tree

    def counted(*roots: str, **options: Any) -> disk_changes.Scan:
        scans.append(roots)
        return scan_tree(*roots, **options)

    monkeypatch.setattr(disk_changes, "scan_tree", counted)
    return scans


@needs_git
async def test_a_later_turn_start_takes_what_changed_between_turns_from_the_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """Between two turns the user edits a clean file, makes a directory with a file in
    it and deletes another; then a shell command of the agent's rewrites or makes each.
    The second turn start scans only the new directory, the turn's end nothing, and
    every baseline is what the file held when that turn began: the user's text, not
    the committed one."""
    edited, deleted = tmp_path / "edited.txt", tmp_path / "deleted.txt"
    edited.write_text("committed\n")
    deleted.write_text("committed\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "other.txt").write_text("committed\n")
    commit_all(tmp_path)
    scans = count_scans(monkeypatch)
    await changes.begin_turn()
    await changes.end_turn()
    assert scans == [(str(tmp_path),)]  # the first start's; the end asks the watch
    scans.clear()
    edited.write_text("the user's\n")  # between turns: the user's own edits
    (tmp_path / "new").mkdir()
    made = tmp_path / "new" / "made.txt"
    made.write_text("the user's\n")
    deleted.unlink()
    await changes.begin_turn()
    assert scans == [(str(tmp_path / "new"),)]  # no scan of the whole tree
    for path in (edited, made, deleted):  # the agent's shell command
        path.write_text("by the agent\n")
    await changes.end_turn()
    assert scans == [(str(tmp_path / "new"),)]
    assert sorted(hunks(changes)) == [
        ("deleted.txt", "pending", ["+by the agent"]),
        ("edited.txt", "pending", ["-the user's", "+by the agent"]),
        ("made.txt", "pending", ["-the user's", "+by the agent"]),
    ]


def turn_start_readings_in_threads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The turn-start readings done in a worker thread from now on, as they come."""
    readings: list[Any] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        if func is disk_changes._turn_start:
            readings.append(args)
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return readings


async def test_a_turn_start_with_nothing_changed_takes_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """Nothing changed since the last turn start: the next one is that reading, asked
    of the watch on the event loop, with no hop to a worker thread and back. A file
    changed between turns still has the reading done in the thread, and the file's
    baseline is what it held when the turn began."""
    path = tmp_path / "a.txt"
    path.write_text("one\n")
    readings = turn_start_readings_in_threads(monkeypatch)
    for _ in range(3):
        await changes.begin_turn()
        await changes.end_turn()
    assert len(readings) == 1
    path.write_text("two\n")  # the user's, between turns
    await changes.begin_turn()
    assert len(readings) == 2
    path.write_text("by the agent\n")
    await changes.end_turn()
    assert hunks(changes) == [("a.txt", "pending", ["-two", "+by the agent"])]


class BusyMachine:
    """The ``time`` module as a thread kept from a core by a build sees it: each look
    at the wall clock finds it a tenth of a second later; its own time runs as ever."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        self.now += 0.1
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


async def test_a_busy_machine_keeps_the_watch_of_a_tree_scanned_slowly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """A build keeps the cores busy: the first reading's scan takes longer than its
    cap in wall time, though its own work is a few files. It is still complete and
    watched, so the turn starts after it take no thread, and the agent's change to
    the file the scan reached last is reviewed. Cut short by the wall clock, the scan
    gave up the watch, and every turn start scanned again, cut short again."""
    names = [f"f{i}.txt" for i in range(5)]
    for name in names:
        (tmp_path / name).write_text("one\n")
    monkeypatch.setattr(disk_changes, "SCAN_MAX_SECONDS", 0.25)
    monkeypatch.setattr(disk_changes, "time", BusyMachine())
    readings = turn_start_readings_in_threads(monkeypatch)
    for _ in range(3):
        await changes.begin_turn()
        await changes.end_turn()
    assert len(readings) == 1
    await changes.begin_turn()
    for name in names:  # the agent's shell command
        (tmp_path / name).write_text("by the agent\n")
    await changes.end_turn()
    assert sorted(hunks(changes)) == [(name, "pending", ["-one", "+by the agent"]) for name in names]


@needs_git
async def test_an_index_changed_between_turns_has_git_read_again(
    tmp_path: Path, changes: SessionChanges
) -> None:
    """The user moves the index back a commit between turns (``git reset``): the file
    did not change, but git's text for it did. The turn start reads git again, so
    the file counts as dirty and its own text, not the index's, is its baseline."""
    path = tmp_path / "a.txt"
    path.write_text("one\n")
    commit_all(tmp_path)
    path.write_text("two\n")
    git(tmp_path, "commit", "-qam", "two")
    await changes.begin_turn()
    await changes.end_turn()
    git(tmp_path, "reset", "-q", "HEAD~1")  # the index says "one", the file "two"
    await changes.begin_turn()
    path.write_text("by the agent\n")  # behind our back
    await changes.end_turn()
    assert hunks(changes) == [("a.txt", "pending", ["-two", "+by the agent"])]


async def test_a_new_turn_start_scans_again_when_the_watch_gave_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """Outside git too: a directory moved between turns has the next turn start scan
    the whole tree again, and a file moved with it is still reviewable."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("before\n")
    scans = count_scans(monkeypatch)
    await changes.begin_turn()
    (tmp_path / "a").rename(tmp_path / "b")
    scans.clear()
    await changes.begin_turn()
    assert scans == [(str(tmp_path),)]
    (tmp_path / "b" / "f.txt").write_text("by the agent\n")
    await changes.end_turn()
    assert hunks(changes) == [("f.txt", "pending", ["-before", "+by the agent"])]


async def test_closing_the_review_lets_go_of_its_watch(
    tmp_path: Path, changes: SessionChanges
) -> None:
    await changes.begin_turn()
    before = inotify_instances()
    changes.close()
    assert inotify_instances() == before - 1


async def test_a_failed_reading_keeps_no_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """A turn start whose reading fails (here git's) leaves no inotify instance open
    behind it: the user has 128 for every program, and the collector frees one only
    when it comes by."""

    def broken(*args: Any) -> None:
        raise OSError("git went away")

    monkeypatch.setattr(disk_changes, "_read_gits", broken)
    before = inotify_instances()
    with pytest.raises(OSError, match="git went away"):  # its traceback holds the reading
        await changes.begin_turn()
    assert inotify_instances() == before


async def test_closing_neovim_lets_go_of_every_chats_watch(tmp_path: Path) -> None:
    """The host shutting down (Neovim closing) closes every chat's watch, not only
    the chats closed before it."""
    before = inotify_instances()
    async with app_with(MemoryAgent(), str(tmp_path)) as (app, _editor):
        await app.open(2, None, str(tmp_path))
        for chat in (1, 2):
            await app.send(chat, "hello")  # its turn start watches the tree
        assert inotify_instances() == before + 2
    assert inotify_instances() == before  # the app, its chats and reviews still held


@needs_git
async def test_a_turns_checks_find_new_and_removed_directories_without_a_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """In a turn the agent's shell makes a directory with a file and removes another
    directory: the turn's end finds both from the watch, scanning only the new one."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "old.txt").write_text("committed\n")
    commit_all(tmp_path)
    scans = count_scans(monkeypatch)
    await changes.begin_turn()
    scans.clear()
    shutil.rmtree(tmp_path / "pkg")
    (tmp_path / "new" / "deeper").mkdir(parents=True)
    (tmp_path / "new" / "deeper" / "made.txt").write_text("by the agent\n")
    await changes.end_turn()
    assert scans == [(str(tmp_path / "new"),)]
    assert sorted(hunks(changes)) == [
        ("made.txt", "pending", ["+by the agent"]),
        ("old.txt", "pending", ["-committed"]),
    ]


async def test_a_ready_session_reads_the_tree_before_its_first_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """Once the session is ready the review reads the tree, while the user writes the
    first prompt: that turn's start only asks the watch, and a file the user saves
    meanwhile is the user's, not the agent's."""
    path = tmp_path / "a.txt"
    path.write_text("before\n")
    scans = count_scans(monkeypatch)
    counted, scanned = disk_changes.scan_tree, threading.Event()
    monkeypatch.setattr(
        disk_changes, "scan_tree", lambda *a, **k: (scanned.set(), counted(*a, **k))[1]
    )
    changes.prepare_soon()
    assert await anyio.to_thread.run_sync(scanned.wait, 10)
    path.write_text("saved by the user\n")
    await changes.begin_turn()
    assert scans == [(str(tmp_path),)]  # the ready session's, none at the turn start
    path.write_text("by the agent\n")
    await changes.end_turn()
    assert hunks(changes) == [("a.txt", "pending", ["-saved by the user", "+by the agent"])]


def test_a_full_kernel_queue_makes_the_watch_give_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past fs.inotify.max_queued_events the kernel drops events and queues one
    overflow: whatever else was read, the watch vouches for nothing from then on."""
    watch = watched(tmp_path)
    (tmp_path / "a.txt").write_text("x\n")
    drain = watch._drain
    monkeypatch.setattr(watch, "_drain", lambda: [*drain(), (-1, tree_watch._OVERFLOW, "")])
    assert watch.news() is None
    monkeypatch.setattr(watch, "_drain", drain)
    assert watch.news() is None
    assert watch.peek() is None
    watch.close()


async def test_without_inotify_every_turn_start_and_check_scans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """Not Linux (or no inotify left): the review scans as it always did, and finds
    what the agent changed."""
    monkeypatch.setattr(TreeWatch, "open", classmethod(lambda cls, skip: None))
    path = tmp_path / "a.txt"
    path.write_text("before\n")
    scans = count_scans(monkeypatch)
    for turn in (1, 2):
        await changes.begin_turn()
        path.write_text(f"turn {turn}\n")
        await changes.end_turn()
    assert scans == [(str(tmp_path),)] * 4  # each turn's start and end
    assert sorted(hunks(changes)) == [
        ("a.txt", "pending", ["-before", "+turn 1"]),
        ("a.txt", "pending", ["-turn 1", "+turn 2"]),
    ]


async def test_the_agents_reads_do_not_wait_for_the_ready_sessions_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: SessionChanges
) -> None:
    """The reading when the session is ready holds no lock the agent's fs/* calls
    need; the first turn start waits for it and takes it up."""
    path = tmp_path / "a.txt"
    path.write_text("before\n")
    scans = count_scans(monkeypatch)
    counted, started, release = disk_changes.scan_tree, threading.Event(), threading.Event()

    def blocked(*roots: str, **options: Any) -> disk_changes.Scan:
        started.set()
        if not release.wait(30):
            raise TimeoutError("the read waited for the reading")
        return counted(*roots, **options)

    monkeypatch.setattr(disk_changes, "scan_tree", blocked)
    changes.prepare_soon()
    assert await anyio.to_thread.run_sync(started.wait, 10)
    with anyio.fail_after(10):
        assert await changes.read(str(path)) == "before\n"  # while the scan is blocked
    release.set()
    await changes.begin_turn()
    assert scans == [(str(tmp_path),)]  # the ready session's reading, taken up
