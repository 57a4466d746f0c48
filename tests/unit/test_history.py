"""The history store, its writer and a chat's record, without Neovim."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec
import pytest

from acp_nvim.client import malloc
from acp_nvim.client.config import HistoryOptions
from acp_nvim.client.history import (
    History,
    Store,
    StoredBlock,
    StoreError,
    _blocks,
    _history,
    _store,
)
from acp_nvim.client.history._blocks import markdown, render_ops
from acp_nvim.client.history._reader import Reader
from acp_nvim.client.history._store import _cut
from acp_nvim.client.history._writer import Target, Writer
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import Attachment, DiffPart, ToolCallPatch
from acp_nvim.client.session.workspace import KeptWorktree, Workspace, Worktree
from acp_nvim.client.tasks import Tasks
from tests.fakes.editor import RecordingEditor
from tests.fakes.stores import schema_3
from tests.unit.conftest import wait_for


def store_at(tmp_path: Path) -> Store:
    return Store(str(tmp_path / "h.sqlite3"))


def chat_with(store: Store, *texts: str, agent: str = "demo") -> int:
    chat_id = store.new_chat(agent, "/p")
    blocks = [StoredBlock(i, f"k{i}", 1, "user" if i % 2 == 0 else "agent", t)
              for i, t in enumerate(texts)]  # fmt: skip
    assert store.write(chat_id, blocks, {"turns": 1}) == "written"
    return chat_id


def test_search_finds_words_of_prompts_and_replies_newest_first(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    old = chat_with(store, "fix the parser", "the Zebra module parses")
    new = chat_with(store, "zebra again", "done")
    other = chat_with(store, "nothing here", "really")
    assert [h.chat.id for h in store.search("zebra")] == [new, old]
    assert [h.chat.id for h in store.search("zebra pars*")] == [old]
    assert store.search("zebra", limit=1)[0].snippet == "zebra again"
    assert store.search("module")[0].snippet == "the Zebra module parses"
    assert [h.chat.id for h in store.search(None)] == [other, new, old]
    # What the user types is words, never FTS5 syntax.
    assert store.search('"zebra" OR NEAR(') == store.search("zebra or near")
    # No word (an emoji, punctuation) is said so, not answered with every chat.
    for wordless in ("***", "🦓", "?!"):
        with pytest.raises(ValueError, match="holds no word"):
            store.search(wordless)
    assert store.search("  ") == store.search(None)


def test_search_finds_a_chat_by_words_of_different_blocks(tmp_path: Path) -> None:
    """Every word of the query had to be in one block: a word of the prompt and one
    of the reply (or of another turn) found nothing, though the chat holds both."""
    store = store_at(tmp_path)
    both = chat_with(store, "fix the parser", "done, the Zebra module works")
    chat_with(store, "zebra only", "nothing else")
    assert [h.chat.id for h in store.search("parser zebra")] == [both]
    assert [h.chat.id for h in store.search("pars* zeb*")] == [both]
    assert [h.chat.id for h in store.search("parser zebra", limit=1)] == [both]
    assert store.search("parser zebra")[0].snippet == "fix the parser"
    assert store.search("parser giraffe") == []


@pytest.mark.parametrize("skipped", [_store._SKIPPED, 1])
def test_search_across_blocks_is_newest_first_and_limited_over_many_chats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skipped: int
) -> None:
    """Chats holding the words only in different turns are newer than the one
    holding them in one block: they come first, and ``limit`` keeps the newest
    (``skipped`` 1: a word's hits read again below each chat, as a word far
    commoner than the other's are)."""
    monkeypatch.setattr(_store, "_SKIPPED", skipped)
    store = store_at(tmp_path)
    one_block = chat_with(store, "zebra and giraffe", "ok")
    mixed = []
    for n in range(30):
        mixed.append(chat_with(store, f"zebra {n}", "ok", f"a giraffe {n}"))
        chat_with(store, f"zebra alone {n}", "zebra again")
        chat_with(store, f"giraffe alone {n}", "ok")
    newest = mixed[::-1]
    assert [h.chat.id for h in store.search("zebra giraffe", limit=3)] == newest[:3]
    assert [h.chat.id for h in store.search("giraffe zebra", limit=3)] == newest[:3]
    everything = [h.chat.id for h in store.search("zebra giraffe", limit=100)]
    assert everything == [*newest, one_block]
    assert store.search("zebra giraffe", limit=1)[0].snippet == "zebra 29"


def test_search_finds_words_of_scripts_written_without_spaces(tmp_path: Path) -> None:
    """Chinese and Japanese (Thai, ...) put no space between words: the index holds
    a whole run as one word, and `:AcpHistory テキスト` found nothing."""
    store = store_at(tmp_path)
    japanese = chat_with(store, "日本語のテキストを直してください", "はい、parser を直しました")
    chinese = chat_with(store, "请修复解析器的错误", "已修复")
    assert [h.chat.id for h in store.search("テキスト")] == [japanese]
    assert [h.chat.id for h in store.search("解析器")] == [chinese]
    assert [h.chat.id for h in store.search("修复")] == [chinese]  # in both its blocks
    assert [h.chat.id for h in store.search("PARSER 直し")] == [japanese]
    assert store.search("parser 解析器") == []  # every word, as ever
    assert store.search("テキスト")[0].snippet == "日本語のテキストを直してください"
    assert store.search("直しました")[0].snippet == "はい、parser を直しました"


def test_search_is_newest_first_by_last_change_even_for_older_chats(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    ids = [chat_with(store, f"word{i % 3} common", "reply", agent=f"a{i % 2}") for i in range(12)]
    newest_first = ids[::-1]
    assert [h.chat.id for h in store.search("common", limit=5)] == newest_first[:5]
    assert [h.chat.id for h in store.search("word1")] == [i for i in newest_first if i % 3 == 2]
    # An old chat continued now comes first, though its words were found last.
    store.write(ids[0], [StoredBlock(2, "k2", 2, "user", "more")], updated_at=2e9)
    store.write(ids[1], [], updated_at=1.9e9)  # changed after the newest, before ids[0]
    assert [h.chat.id for h in store.search("common", limit=3)] == [ids[0], ids[1], ids[11]]
    assert [h.chat.id for h in store.search("common word0", limit=2)] == [ids[0], ids[9]]
    assert [h.chat.id for h in store.search("common", agent="a1", limit=2)] == [ids[1], ids[11]]
    assert [h.chat.id for h in store.search("common", cwd="/elsewhere")] == []


def test_a_snippet_is_the_words_around_the_first_found() -> None:
    text = "one two three four five six seven Eight nine ten eleven twelve thirteen fourteen"
    assert _cut(text, ["eight"], around=2) == "… six seven Eight nine ten …"
    assert _cut(text, ["thirt*"], around=1) == "… twelve thirteen fourteen"
    assert _cut(text, ["absent"], around=1) == "one two …"


def test_a_snippets_long_words_are_cut() -> None:
    """A prompt of a 300-character word (a path, a pasted line of base64) made the
    picker's line for its chat hundreds of columns wide: the whole block where it
    held no space."""
    long = "x" * 300
    assert _cut(f"héllo café {long} zebra", ["cafe"], around=2) == f"héllo café {'x' * 39}… zebra"
    assert _cut(long + "yz", ["xx*"], around=1) == "x" * 39 + "…"


@pytest.mark.parametrize("slice_chars", [1, 7, 65536])
def test_a_snippet_of_a_huge_block_is_cut_around_a_word_found_by_its_fold(
    slice_chars: int, monkeypatch: Any
) -> None:
    """A pasted log of a megabyte whose word is written `Café` (a search for `cafe`):
    the block was folded word by word to find it, 0.19 s a MB on the thread that
    answers searches. It is folded a slice at a time, and looked at word by word only
    in a slice holding the word: the snippet is the same, whatever the slices."""
    monkeypatch.setattr(_store, "_FOLDED_AT_ONCE", slice_chars)
    log = "\n".join(f"line {i} of the build" for i in range(50_000 if slice_chars > 1 else 50))
    assert _cut(f"{log}\tCafé\u00a0au lait", ["cafe"], around=2) == "… the build Café au lait"
    assert _cut(f"Straße {log}", ["strasse*"], around=1) == "Straße line …"
    assert _cut(log, ["absent"], around=1) == "line 0 …"


def test_a_changed_block_is_searched_by_its_new_text(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    chat_id = chat_with(store, "hello", "first answer")
    store.write(chat_id, [StoredBlock(1, "k1", 1, "agent", "second answer")])
    assert store.search("first") == [] and len(store.search("second")) == 1
    assert [b.text for b in store.blocks(chat_id)] == ["hello", "second answer"]


def test_forget_deletes_a_chat_and_its_words(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    gone, kept = chat_with(store, "zebra"), chat_with(store, "zebra")
    assert store.forget(gone) and not store.forget(gone)
    assert [h.chat.id for h in store.search("zebra")] == [kept]
    assert store.blocks(gone) == []
    # A chat forgotten while it is written to stays forgotten.
    assert store.write(gone, [StoredBlock(5, "k5", 2, "agent", "zebra")]) == "forgotten"
    assert store.blocks(gone) == [] and store.chat(gone) is None


def test_forget_older(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    old, new = chat_with(store, "a"), chat_with(store, "b")
    store.write(old, [], updated_at=1.0)
    assert store.forget_older(1) == [None]
    assert [h.chat.id for h in store.search()] == [new]


def test_chats_expired_name_the_worktrees_they_kept(tmp_path: Path) -> None:
    """Nothing reopens a deleted chat's worktree, and it may hold work: it stays, and
    the notice names it (one removed meanwhile is not named)."""
    store = store_at(tmp_path)
    kept, gone = tmp_path / "wt-1", tmp_path / "wt-2"
    kept.mkdir()
    for path in (kept, gone):
        worktree = Worktree(str(path), f"acp/{path.name}", "/p", "0" * 40)
        column = msgspec.json.encode(KeptWorktree(worktree, str(path))).decode()
        store.write(chat_with(store, "old"), [], {"worktree": column}, updated_at=1.0)

    async def run() -> None:
        editor = RecordingEditor()
        async with anyio.create_task_group() as group:
            history = History(editor, Tasks(group))
            options = HistoryOptions(path=str(tmp_path / "h.sqlite3"), max_age_days=1)
            history.configure(options, None)
            history.attach(Chat(1, "demo", editor), "/p", keep=True)
            await history.close()
            group.cancel_scope.cancel()
        said = "history: the worktrees deleted chats kept stay:"
        assert [m for _, m in editor.notices if m.startswith(said)] == [
            f"{said} {kept} (branch acp/wt-1); `git worktree remove` them once you do not need them"
        ]

    anyio.run(run)
    assert store_at(tmp_path).search() == [] and kept.is_dir()


@pytest.mark.parametrize(
    ("prepare", "words"),
    [
        (lambda p: p.write_bytes(b"not a database at all " * 100), "damaged"),
        (lambda p: sqlite3.connect(p).execute("PRAGMA user_version = 99"), "newer acp.nvim"),
    ],
)
def test_an_unusable_file_is_refused_and_left_alone(
    tmp_path: Path, prepare: Any, words: str
) -> None:
    path = tmp_path / "h.sqlite3"
    prepare(path)
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        Store(str(path))
    assert caught.value.unavailable and words in str(caught.value)
    assert path.read_bytes() == before


def test_migrations_run_once_and_mark_the_version(tmp_path: Path) -> None:
    store_at(tmp_path).close()
    again = store_at(tmp_path)
    assert again._run("PRAGMA user_version") == [(_store.VERSION,)]
    assert again._run("PRAGMA journal_mode") == [("wal",)]


def test_a_full_disk_is_said_as_such_and_the_write_goes_once_there_is_room(
    tmp_path: Path,
) -> None:
    """A write the disk had no room for was told as `cannot rollback - no transaction
    is active` (SQLite had rolled it back itself), which says nothing of why."""
    store = store_at(tmp_path)
    chat_id = store.new_chat("demo", "/p")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 1}")  # room for a page only
    big = [StoredBlock(0, "k0", 1, "user", "x" * 5000 + " zebra")]
    with pytest.raises(StoreError, match="database or disk is full") as failed:
        store.write(chat_id, big)
    assert not failed.value.unavailable  # retried: room may come
    store._db.execute("PRAGMA max_page_count = 1000000")
    assert store.write(chat_id, big) == "written"
    assert [h.chat.id for h in store.search("zebra")] == [chat_id]


_write = Store.write


def _impatient(self: Store, *args: Any, **kwargs: Any) -> str:
    """Store.write giving up on a locked file after 50 ms, not the busy timeout."""
    self._db.execute("PRAGMA busy_timeout = 50")
    return _write(self, *args, **kwargs)


def test_the_writer_retries_a_locked_file_and_loses_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "h.sqlite3")
    store = Store(path)
    target = Target("demo", "/p")
    target.id = store.new_chat("demo", "/p")
    told: list[tuple[str, str]] = []
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another Neovim writing, longer than the busy timeout
    done, warned = threading.Event(), threading.Event()

    def tell(message: str, level: str) -> None:
        told.append((level, message))
        warned.set()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Store, "write", _impatient)
        writer = Writer(path, tell)
        writer.put(target, [StoredBlock(0, "k0", 1, "user", "kept zebra")], {"turns": 1}, 5.0)
        assert warned.wait(10)
        assert told == [("warn", f"history: cannot write, retrying: {path} is locked by "
                                 "another program (database is locked)")]  # fmt: skip
        # A read meanwhile waits for the failed attempt only, not for the retries.
        assert writer.written(10)
        holder.execute("ROLLBACK")
        writer.put(target, [StoredBlock(1, "k1", 1, "agent", "more")], {}, 6.0, done)
        assert done.wait(10)
        writer.close()
    holder.close()
    assert told[-1] == ("info", "history: written again")
    assert [b.text for b in store.blocks(target.id)] == ["kept zebra", "more"]
    assert store.chat(target.id).turns == 1  # type: ignore[union-attr]


def test_a_delete_and_renames_made_while_the_file_is_locked_are_kept_in_order(
    tmp_path: Path,
) -> None:
    """The user deleted one stored chat and renamed another twice while another
    program held the file: the write that failed was retried, the delete and the
    renames gathered with it were dropped (the chat came back, under its old name)."""
    path = str(tmp_path / "h.sqlite3")
    store = Store(path)
    renamed, deleted = chat_with(store, "hello"), chat_with(store, "bye")
    target = Target("demo", "/p")
    target.id = store.new_chat("demo", "/p")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another Neovim writing, longer than the busy timeout
    warned, done = threading.Event(), threading.Event()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Store, "write", _impatient)
        writer = Writer(path, lambda message, level: warned.set())
        writer.put(target, [StoredBlock(0, "k0", 1, "user", "kept")], {"turns": 1}, 5.0)
        assert warned.wait(10)  # its write failed: retried
        writer.call(lambda store: store.rename(renamed, "first"))
        writer.call(lambda store: store.forget(deleted))
        writer.call(lambda store: store.rename(renamed, "second"))
        assert writer.written(10)  # tried with the write, which failed again
        holder.execute("ROLLBACK")
        writer.put(target, [], {}, 6.0, done)
        assert done.wait(10)
        writer.close()
    holder.close()
    assert store.chat(deleted) is None
    assert store.chat(renamed).name == "second"  # type: ignore[union-attr]
    assert [b.text for b in store.blocks(target.id)] == ["kept"]


def test_a_read_does_not_wait_for_a_writer_that_cannot_write(tmp_path: Path) -> None:
    """A file the writer cannot use (damaged): what it was handed is never written,
    and a read goes on at once (it reads the file as it is, or says why not)."""
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"not a database " * 1000)
    told: list[str] = []
    writer = Writer(str(path), lambda message, level: told.append(message))
    writer.put(Target("demo", "/p"), [StoredBlock(0, "k0", 1, "user", "lost")], {}, 1.0)
    assert writer.written(10)
    assert writer.failed is not None and told[0].startswith("history off:")
    writer.close()


def test_a_chat_another_neovim_went_on_in_is_not_written_over(tmp_path: Path) -> None:
    """Two Neovims that reopened one stored chat: the second to go on in it keeps
    its turn in a chat of its own (the first's turn stays whole); its facts alone
    are never written over the first's."""
    path = str(tmp_path / "h.sqlite3")
    shared = chat_with(Store(path), "hello zebra", "echo: hello zebra")
    told: list[tuple[str, str]] = []
    first, second = Writer(path, lambda m, lv: told.append((lv, m))), Writer(path, print)
    targets = [Target("demo", "/p"), Target("demo", "/p")]
    for target in targets:  # each reopened it
        target.id, target.top = shared, 1
    done = threading.Event()
    second.put(targets[1], [StoredBlock(2, "k2", 2, "user", "tiger")], {"turns": 2}, 5.0, done)
    assert done.wait(10)
    done.clear()
    first.put(targets[0], [], {"turns": 1, "title": "stale"}, 6.0, done)  # a status: facts
    assert done.wait(10)
    done.clear()
    first.put(targets[0], [StoredBlock(2, "k2", 2, "user", "lion")], {"turns": 2}, 7.0, done)
    assert done.wait(10)
    first.close()
    second.close()
    store = Store(path)
    assert [b.text for b in store.blocks(shared)] == ["hello zebra", "echo: hello zebra", "tiger"]
    assert store.chat(shared).turns == 2 and store.chat(shared).title is None  # type: ignore[union-attr]
    own = targets[0].id
    assert own is not None and own != shared
    assert [b.text for b in store.blocks(own)] == ["hello zebra", "echo: hello zebra", "lion"]
    assert store.chat(own).parent == shared  # type: ignore[union-attr]
    assert [h.chat.id for h in store.search("lion")] == [own]
    assert told == [("info", f"history: stored chat {shared} went on in another Neovim: "
                             f"this chat is kept as stored chat {own}")]  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="CPU priority per thread: Linux")
def test_the_writer_yields_the_cpu_to_the_hosts_other_threads(tmp_path: Path) -> None:
    """The writer's thread runs at a lower priority than the host's others: the
    worker reading the agent's stream goes first."""
    target = Target("demo", "/p")
    done = threading.Event()
    writer = Writer(str(tmp_path / "h.sqlite3"), lambda message, level: None)
    writer.put(target, [StoredBlock(0, "k0", 1, "user", "hi")], {}, 5.0, done)
    assert done.wait(10)
    thread_id = writer._thread.native_id
    assert thread_id is not None
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert os.getpriority(os.PRIO_PROCESS, thread_id) == min(own + 10, 19)
    writer.close()


def test_the_writer_gives_back_the_memory_its_write_freed(tmp_path: Path) -> None:
    """The history is written after the turn's end gave memory back (decision 0072):
    the writer gives back what its own write freed, once the turn is on disk."""
    path = str(tmp_path / "h.sqlite3")
    target = Target("demo", "/p")
    on_disk: list[list[str]] = []
    given = threading.Event()

    def give_back() -> None:
        assert target.id is not None
        on_disk.append([b.text for b in Store(path).blocks(target.id)])
        given.set()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(malloc, "give_back", give_back)
        writer = Writer(path, lambda message, level: None)
        writer.put(target, [StoredBlock(0, "k0", 1, "agent", "a long answer")], {}, 5.0)
        assert given.wait(10)
        writer.close()
    assert on_disk[0] == ["a long answer"]


class DrawingEditor(RecordingEditor):
    """Done drawing what is queued when the test says so (``finished``); ``asked`` once
    waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()
        self.finished = anyio.Event()

    async def drawn(self) -> None:
        self.asked.set()
        await self.finished.wait()


async def _a_turn_kept(tmp_path: Path, editor: RecordingEditor, history: History) -> anyio.Event:
    """A kept chat's turn with a long answer; set once the answer is handed to the writer."""
    history.configure(HistoryOptions(path=str(tmp_path / "h.sqlite3")), None)
    chat = Chat(1, "demo", editor)
    history.attach(chat, "/p", keep=True)
    writer = history._writer
    assert writer is not None
    handed, put = anyio.Event(), writer.put

    def spy(target: Target, blocks: list[StoredBlock], *rest: Any, **named: Any) -> None:
        if any(block.text == "a long answer" for block in blocks):
            handed.set()
        put(target, blocks, *rest, **named)

    writer.put = spy  # type: ignore[method-assign]
    await chat.start_turn("hello", [])
    chat.on_message(_patch("agent", "a long answer"))
    chat.end_turn("end_turn")
    return handed


def test_a_turn_is_written_once_neovim_has_drawn_it(tmp_path: Path) -> None:
    """A long message's write (its search index) would take a core from Neovim as it
    draws the message: the history waits for the drawing (decision 0072)."""

    async def run() -> None:
        editor = DrawingEditor()
        async with anyio.create_task_group() as group:
            history = History(editor, Tasks(group))
            handed = await _a_turn_kept(tmp_path, editor, history)
            with anyio.fail_after(10):
                await editor.asked.wait()
            for _ in range(20):
                await anyio.lowlevel.checkpoint()
            assert not handed.is_set()
            editor.finished.set()
            with anyio.fail_after(10):
                await handed.wait()
            await history.close()
            group.cancel_scope.cancel()
        store = store_at(tmp_path)
        [hit] = store.search("long")
        assert [b.text for b in store.blocks(hit.chat.id)][:2] == ["hello", "a long answer"]

    anyio.run(run)


def test_a_write_waits_for_the_drawing_only_so_long(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(_history, "DRAWN_SECONDS", 0.05)

    async def run() -> None:
        editor = DrawingEditor()  # never done drawing
        async with anyio.create_task_group() as group:
            history = History(editor, Tasks(group))
            handed = await _a_turn_kept(tmp_path, editor, history)
            with anyio.fail_after(10):
                await handed.wait()
            await history.close()
            group.cancel_scope.cancel()

    anyio.run(run)


def _keeping(
    tmp_path: Path, editor: RecordingEditor, group: anyio.abc.TaskGroup
) -> tuple[History, Chat]:
    """A history with its file in ``tmp_path``, and chat 1 kept in it."""
    history = History(editor, Tasks(group))
    history.configure(HistoryOptions(path=str(tmp_path / "h.sqlite3")), None)
    chat = Chat(1, "demo", editor)
    history.attach(chat, "/p", keep=True)
    return history, chat


async def _read_stored(history: History, how: str, history_id: int) -> str:
    """Stored chat ``history_id`` as ``how`` reads it, as text: a reopen, an export,
    a search (on a thread, as the pynvim thread answers it), the session picker."""
    match how:
        case "reopen":
            found = await history.load(history_id)
            return "" if found is None else "\n".join(block.text for block in found[1])
        case "export":
            return await history.markdown(None, history_id) or ""
        case "search":
            hits = await anyio.to_thread.run_sync(history.reader.search, "close")
            return json.dumps(hits)
        case _:
            turns = await anyio.to_thread.run_sync(history.reader.session_turns, "demo")
            return json.dumps(turns)


@pytest.mark.parametrize("how", ["reopen", "export", "search", "sessions"])
def test_a_chat_closed_just_now_is_read_with_its_last_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A chat exported from the history right after its close had its header only:
    the read went to the file while the close's last changes still waited for the
    writer's thread (its row was there, from its first turn's write). A reopen, a
    search and the session picker read it the same way. Every read waits for what
    the writer was handed before it: here the writer is held until the read asked."""
    asked = threading.Event()
    real_written = getattr(Writer, "written", None)  # the read's wait for the writer
    real_write = Writer._write

    def written(writer: Writer, timeout: float) -> bool:
        asked.set()
        return real_written(writer, timeout) if real_written is not None else True

    def held_write(writer: Writer, store: Any, pending: Any) -> None:
        if pending:
            asked.wait(5)
        real_write(writer, store, pending)

    async def run() -> str:
        async with anyio.create_task_group() as group:
            history, chat = _keeping(tmp_path, RecordingEditor(), group)
            chat.session.session_id = "s1"
            await chat.start_turn("a first turn", [])
            chat.end_turn("end_turn")
            _stored_text(history, "first")  # the chat's row and first turn are written
            monkeypatch.setattr(Writer, "written", written, raising=False)
            monkeypatch.setattr(Writer, "_write", held_write)
            await chat.start_turn("kept at the close", [])
            chat.end_turn("end_turn")
            history.detach(chat.id)
            text = await _read_stored(history, how, 1)
            asked.set()  # a read that asked nothing: let the writer go on
            await history.close()
            group.cancel_scope.cancel()
        return text

    text = anyio.run(run)
    if how == "sessions":
        assert json.loads(text) == {"s1": 2}
    else:
        assert "kept at the close" in text


def test_a_chat_is_recorded_and_drawn_again_as_it_was(tmp_path: Path) -> None:
    async def run() -> None:
        editor = RecordingEditor()
        async with anyio.create_task_group() as group:
            history, chat = _keeping(tmp_path, editor, group)
            image = Attachment("image", "shot.png", "file:///shot.png", data="QUJD" * 100,
                               mime_type="image/png")  # fmt: skip
            await chat.start_turn("look at this", [image])
            chat.on_message(_patch("agent", "it shows a zebra"))
            chat.on_tool_call(ToolCallPatch("t1", title="Edit a.py", kind="edit",
                                            content=[DiffPart("/p/a.py", "one\n", "two\n")]))  # fmt: skip
            chat.end_turn("end_turn")
            await history.close()
            group.cancel_scope.cancel()
        store = store_at(tmp_path)
        [hit] = store.search("zebra")
        assert hit.chat.turns == 1 and hit.chat.title == "look at this"
        assert hit.chat.created_at <= hit.chat.updated_at  # begun, then changed
        blocks = store.blocks(hit.chat.id)
        assert [b.kind for b in blocks] == ["user", "agent", "tool", "turn"]
        assert "QUJD" not in (blocks[0].data or "") and '"size":300' in (blocks[0].data or "")
        # Drawn again: the same blocks and lines, ids by their place, prefixed.
        drawn = {op["id"]: op for op in editor.ops[1] if op["op"] == "block" and "start" not in op}
        again = render_ops(blocks, "#h:", chat.workspace)
        assert [op["id"] for op in again] == ["#h:0", "#h:1", "#h:2", "#h:3"]
        assert [op["lines"] for op in again] == [drawn[b.key]["lines"] for b in blocks]
        text = markdown(hit.chat, blocks)
        assert "## You\n\nlook at this" in text and "```diff" in text and "-one" in text
        assert (
            "## You\n\nlook at this\n\n- attached: shot.png (file:///shot.png, 300 bytes)\n" in text
        )
        assert "*Attached" not in text
        assert "*Turn ended: end_turn*" in text

    anyio.run(run)


def test_an_exported_turn_end_says_the_agents_own_count_of_the_turn(tmp_path: Path) -> None:
    """The turn's end line showed the agent's own count of what its model read and
    wrote (``35.0k in · 900 out``); the history kept only the usage report, so the
    stored chat's export, rebuilt from it, left the count out."""

    async def run() -> None:
        editor = RecordingEditor()
        async with anyio.create_task_group() as group:
            history, chat = _keeping(tmp_path, editor, group)
            await chat.start_turn("count it")
            chat.on_usage(1234, 200_000, None)
            chat.on_turn_tokens({"input": 35_000, "output": 900, "total": 35_900})
            chat.end_turn("end_turn")
            await history.close()
            group.cancel_scope.cancel()
        store = store_at(tmp_path)
        [hit] = store.search("count")
        text = markdown(hit.chat, store.blocks(hit.chat.id))
        assert "*Turn ended: end_turn · context 1234/200000 tokens · 35.0k in · 900 out*" in text

    anyio.run(run)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        # kept before the agent's own count was (thirty-seventh session and before)
        ({"stop_reason": "end_turn", "usage": {"used": 1234, "size": 200_000}},
         "*Turn ended: end_turn · context 1234/200000 tokens*"),
        ({"stop_reason": "cancelled", "usage": {}}, "*Turn ended: cancelled*"),
        # damaged: what does not read is left out, the rest is said
        ({"stop_reason": "end_turn", "usage": [], "turn_tokens": "35k"},
         "*Turn ended: end_turn*"),
        ({"stop_reason": "end_turn", "usage": {"size": "big", "cost": 5},
          "turn_tokens": {"input": True, "output": 900}}, "*Turn ended: end_turn*"),
        ({"stop_reason": "end_turn", "usage": {"used": 5, "size": 10, "cost": {"amount": "x"}},
          "turn_tokens": [35_000, 900]}, "*Turn ended: end_turn · context 5/10 tokens*"),
    ],
)  # fmt: skip
def test_an_old_or_damaged_turn_end_exports_what_it_kept(data: dict[str, Any], line: str) -> None:
    """A stored turn's end exports (and seeds a new session with) what it kept: the
    agent's own count only where it was kept with it, as its line in the transcript
    shows it. A kept figure that does not read (a damaged row) ended the export, and
    with it the seed a reopened chat's next prompt carries, in an AttributeError."""
    blocks = [
        StoredBlock(0, "k0", 1, "user", "hello"),
        StoredBlock(1, "k1", 1, "agent", "hi"),
        StoredBlock(2, "#turn1", 1, "turn", "*— end_turn —*", json.dumps(data)),
    ]
    text = markdown(_store.ChatRow(1, "demo", "/p", 0.0, 0.0), blocks)
    assert text.endswith(f"## Agent\n\nhi\n\n## acp.nvim\n\n{line}\n")


def test_an_exported_diff_of_a_markdown_file_stays_in_its_fenced_block() -> None:
    """An agent's edit of a README with code blocks: the diff's context line
    `` ```sh`` (a space, then the file's fence) closed the export's fence, and the
    rest of the export was drawn as Markdown, or as code."""
    readme_old = "# Tool\n\n```sh\nmake\n```\n\nOld words.\n"
    readme_new = readme_old.replace("Old words.", "New words.")
    data = {"kind": "edit", "status": "completed",
            "content": [{"type": "diff", "path": "/p/README.md", "old": readme_old,
                         "new": readme_new}]}  # fmt: skip
    blocks = [
        StoredBlock(0, "k0", 1, "user", "fix the readme"),
        StoredBlock(1, "t1", 1, "tool", "Edit README.md", json.dumps(data)),
        StoredBlock(2, "k2", 1, "agent", "done"),
    ]
    lines = markdown(_store.ChatRow(1, "demo", "/p", 0.0, 0.0), blocks).split("\n")
    opened = lines.index(next(line for line in lines if line.endswith("diff")))
    fence = lines[opened].removesuffix("diff")
    closing = re.compile(rf" {{0,3}}{fence}`*[ \t]*")  # CommonMark's closing fence
    closed = next(i for i in range(opened + 1, len(lines)) if closing.fullmatch(lines[i]))
    assert lines[closed - 1] == "+New words.", lines[opened:closed]
    assert lines[closed + 1 :] == ["", "## Agent", "", "done", ""]


@pytest.mark.parametrize("title", ["# Goal look at this ##", "##", "C# notes #"])
def test_an_exported_title_ending_in_hashes_keeps_them(title: str) -> None:
    """The v1 demo's title "# Goal look at this ##" was exported as the heading
    `# # Goal look at this ##`, whose last `##` Markdown reads as the heading's
    closing sequence: the title lost it when rendered. A tool call's title too."""
    data = {"kind": "read", "status": "completed", "content": []}
    blocks = [StoredBlock(0, "t1", 1, "tool", title, json.dumps(data))]
    lines = markdown(_store.ChatRow(1, "demo", "/p", 0.0, 0.0, title=title), blocks).split("\n")
    headings = [line for line in lines if line.startswith(("# ", "### Tool: "))]
    # Each heading's words as CommonMark renders them: its closing sequence (#s
    # after a space, at the end) dropped, then an escaped # read as one.
    shown = [
        re.sub(r"(^|[ \t])#+[ \t]*$", "", line.split(" ", 1)[1].removeprefix("Tool: "))
        .strip()
        .replace("\\#", "#")
        for line in headings
    ]
    assert shown == [title, title]


@pytest.mark.parametrize(
    ("title", "heading"),
    [
        ("*x*", "\\*x\\*"),
        ("# foo", "# foo"),
        ("Run `make` in read_file", "Run \\`make\\` in read_file"),
        (
            "see [docs](u) <b> &amp; ~~old~~ _x_",
            "see \\[docs](u) \\<b> \\&amp; \\~\\~old\\~\\~ \\_x\\_",
        ),
        ("C:\\*.txt", "C:\\\\\\*.txt"),
    ],
)
def test_an_exported_title_renders_as_the_transcript_shows_it(title: str, heading: str) -> None:
    """A tool call titled `*x*` was exported as `### Tool: *x*`, rendered as an
    emphasized x: the reader of the export saw other words than the transcript's
    (which shows the title as the agent wrote it). What Markdown would read as
    markup is escaped; a ``_`` inside a word is none and stays (decision 0105)."""
    data = {"kind": "read", "status": "completed", "content": []}
    blocks = [StoredBlock(0, "t1", 1, "tool", title, json.dumps(data))]
    lines = markdown(_store.ChatRow(1, "demo", "/p", 0.0, 0.0), blocks).split("\n")
    [line] = [line for line in lines if line.startswith("### Tool: ")]
    assert line == f"### Tool: {heading}"
    # Rendered, each escape gives the character after it: the title as written.
    assert re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", heading) == title


@pytest.mark.parametrize("version", [1, 2])
def test_an_exported_tool_call_names_its_files_as_the_transcript_does(version: int) -> None:
    """Its diff's file is named from the chat's directory, as the transcript names
    it; its locations came out in full (`- at /p/src/a.py:3`) beside it."""
    change: dict[str, Any] = (
        {"type": "diff", "path": "/p/src/a.py", "old": "x\n", "new": "y\n"}
        if version == 1
        else {"type": "changes", "changes": [["modify", "/p/src/a.py", None, "text"]]}
    )
    data = {"kind": "edit", "status": "completed", "content": [change],
            "locations": [["/p/src/a.py", 3], ["/elsewhere/b.py", None]]}  # fmt: skip
    blocks = [StoredBlock(0, "t1", 1, "tool", "Edit a.py", json.dumps(data))]
    text = markdown(_store.ChatRow(1, "demo", "/p", 0.0, 0.0), blocks)
    assert "src/a.py" in text and "/p/src/a.py" not in text
    assert "- at src/a.py:3\n- at /elsewhere/b.py\n" in text

def test_an_exported_command_shows_its_command_line_with_its_output() -> None:
    """The export showed a command's last output lines but not the command that
    printed them, nor how it ended; it shows them as the transcript does."""
    terminal = {"type": "terminal", "id": "term-1", "key": "t1", "label": "make test",
                "lines": ["2 failed"], "exit": [2, None]}  # fmt: skip
    data = {"kind": "execute", "status": "failed", "content": [terminal]}
    blocks = [StoredBlock(0, "c1", 1, "tool", "Run tests", json.dumps(data))]
    text = markdown(_store.ChatRow(1, "demo", "/p", 0.0, 0.0), blocks)
    assert "`execute` · failed\n\n[terminal t1 · exit 2] make test\n```text\n2 failed\n```" in text


@pytest.mark.parametrize("rewound", [False, True])
def test_a_compaction_is_kept_and_drawn_again_as_it_was(tmp_path: Path, rewound: bool) -> None:
    """A reopened chat, a hand-over and a fork (drawn from the record) showed the
    turn without its compaction block: the record did not keep it. ``rewound``: its
    turn went out of view before it was written."""

    async def run() -> None:
        editor = RecordingEditor()
        async with anyio.create_task_group() as group:
            history, chat = _keeping(tmp_path, editor, group)
            await chat.start_turn("compact please", [])
            chat.on_compaction("c1", status="in_progress")
            chat.on_compaction("c1", append="Kept: the plan.", status="completed")
            chat.on_message(_patch("agent", "compacted zebra"))
            chat.end_turn("end_turn")
            if rewound:
                chat.shown.leave(1)
            await history.close()
            group.cancel_scope.cancel()
        store = store_at(tmp_path)
        [hit] = store.search("zebra")
        blocks = store.blocks(hit.chat.id)
        assert [b.kind for b in blocks][:4] == ["user", "compaction", "agent", "turn"]
        drawn = {op["id"]: op for op in editor.ops[1] if op["op"] == "block"}
        [again] = [op for op in render_ops(blocks, "#h:", chat.workspace) if op["id"] == "#h:1"]
        assert again["kind"] == "compaction"  # type: ignore[typeddict-item]
        assert again["lines"] == drawn[blocks[1].key]["lines"]  # type: ignore[typeddict-item]
        assert again["lines"] == ["#### Context compacted", "Kept: the plan."]  # type: ignore[typeddict-item]
        assert "#### Context compacted\nKept: the plan." in markdown(hit.chat, blocks)

    anyio.run(run)


def test_a_mark_no_branch_leaves_at_any_more_is_deleted_where_it_was_written(
    tmp_path: Path,
) -> None:
    """A rewind's branch left before a turn was sent in it goes: so does its mark, from
    the store too once it was written, with the rewind's note, never written."""

    async def run() -> None:
        editor = RecordingEditor()
        async with anyio.create_task_group() as group:
            history, chat = _keeping(tmp_path, editor, group)
            for text in ("one zebra", "two"):
                await chat.start_turn(text, [])
                chat.end_turn("end_turn")
            chat.shown.leave(2)
            chat.info("*Rewound to before turn 2.*")
            assert "Another branch leaves here" in _stored(history)
            chat.shown.pick(1)
            exported = history._records[chat.id].blocks()
            assert not any("Another branch" in b.text for b in exported)
            stored = _stored(history)
            assert "Another branch" not in stored and "Rewound" not in stored
            await history.close()
            group.cancel_scope.cancel()

    anyio.run(run)


def _stored(history: History) -> str:
    """Chat 1's stored transcript's text, once what it changed is written."""
    return _stored_text(history, "zebra")


def _stored_text(history: History, word: str) -> str:
    """The stored transcript's text of the chat holding ``word``, once what the chats
    changed is written."""
    history._flush()
    written = threading.Event()
    writer = history._writer
    assert writer is not None
    writer.call(lambda store: written.set())  # after the writes queued before it
    assert written.wait(10)
    store = Store(writer.path)
    try:
        [hit] = store.search(word)
        return "\n".join(b.text for b in store.blocks(hit.chat.id))
    finally:
        store.close()


def test_blocks_gone_are_deleted_with_their_words(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    history_id = chat_with(store, "one zebra", "two")
    assert store.write(history_id, [], gone=[0]) == "written"
    assert [b.key for b in store.blocks(history_id)] == ["k1"]
    assert store.search("zebra") == []


def test_a_chat_is_exported_off_the_loop_which_goes_on_meanwhile(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A long chat's Markdown takes a while (its diffs): it is made in a thread while
    the loop, every chat's, goes on; a live chat and a stored one alike."""
    made_on: list[threading.Thread] = []
    go_on = threading.Event()

    def slow_markdown(*args: Any, **kwargs: Any) -> str:
        made_on.append(threading.current_thread())
        assert go_on.wait(10), "the loop did not go on while the Markdown was made"
        return markdown(*args, **kwargs)

    monkeypatch.setattr(_blocks, "markdown", slow_markdown)

    async def run() -> None:
        editor = RecordingEditor()
        async with anyio.create_task_group() as group:
            history, chat = _keeping(tmp_path, editor, group)
            await chat.start_turn("export me", [])
            chat.on_message(_patch("agent", "a zebra"))
            chat.end_turn("end_turn")
            await history.close()
            [hit] = store_at(tmp_path).search("zebra")
            loop = threading.current_thread()
            for chat_id, history_id in ((1, None), (None, hit.chat.id)):
                go_on.clear()

                async def meanwhile(made: int) -> None:
                    # The loop runs this while the Markdown is being made, or never.
                    await wait_for(lambda: len(made_on) > made)
                    go_on.set()

                group.start_soon(meanwhile, len(made_on))
                text = await history.markdown(chat_id, history_id)
                assert text is not None and "## You\n\nexport me" in text and "a zebra" in text
                assert made_on[-1] is not loop
            assert await history.markdown(2) is None and await history.markdown(None, 99) is None
            group.cancel_scope.cancel()

    anyio.run(run)


def test_a_long_reopened_chats_plans_keep_their_numbers(tmp_path: Path) -> None:
    """A stored chat is drawn fifty blocks at a time, and each slice numbered its
    plans from the first: a long chat's third plan, past the fiftieth block, came
    back as "Plan" (the export, numbering them all in order, said "Plan 3")."""
    store = store_at(tmp_path)
    chat_id = store.new_chat("demo", "/p")
    plan = json.dumps({"entries": [["Fix it", "pending", "medium"]]})
    blocks = [StoredBlock(0, "k0", 1, "user", "plan it")]
    blocks += [StoredBlock(i, f"#plan:p{i}", 1, "plan", "Fix it", plan) for i in (1, 2)]
    blocks += [StoredBlock(i, f"k{i}", 1, "agent", f"step {i}") for i in range(3, 60)]
    blocks.append(StoredBlock(60, "#plan:p60", 1, "plan", "Fix it", plan))
    assert store.write(chat_id, blocks, {"turns": 1}) == "written"

    async def run() -> None:
        async with anyio.create_task_group() as group:
            history = History(RecordingEditor(), Tasks(group))
            history.configure(HistoryOptions(path=str(tmp_path / "h.sqlite3")), None)
            found = await history.load(chat_id)
            assert found is not None
            chat = Chat(1, "demo", history.editor)
            history.attach(chat, "/p", keep=True)
            await history.reopen(chat, *found)
            ops = history.editor.ops[1]  # type: ignore[attr-defined]
            heads = [op["lines"][0] for op in ops if op.get("lines")]
            titles = [head for head in heads if re.fullmatch(r"### Plan( \d+)?", head)]
            assert titles == ["### Plan", "### Plan 2", "### Plan 3"]
            await history.close()
            group.cancel_scope.cancel()

    anyio.run(run)


def test_a_reopened_chat_keeps_its_dates_until_it_changes(tmp_path: Path) -> None:
    """A chat reopened in another Neovim was exported (and seeded) as started when it
    was reopened, and every export's "Last change" was the export's own time; the
    reopen alone made it the newest chat of the history."""
    store = store_at(tmp_path)
    history_id = chat_with(store, "hello zebra", "echo: hello zebra")
    store._run("UPDATE chats SET created_at = 1e9, updated_at = 1e9 + 60")
    started, changed = (time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) for t in (1e9, 1e9 + 60))

    async def reopened(then: Callable[[History, Chat], Awaitable[None]]) -> None:
        async with anyio.create_task_group() as group:
            history = History(RecordingEditor(), Tasks(group))
            history.configure(HistoryOptions(path=str(tmp_path / "h.sqlite3")), None)
            found = await history.load(history_id)
            assert found is not None
            chat = Chat(1, "demo", history.editor)
            history.attach(chat, "/p", keep=True)
            await history.reopen(chat, *found)
            await then(history, chat)
            await history.close()
            group.cancel_scope.cancel()

    async def export(history: History, chat: Chat) -> None:
        header = f"- Started: {started}\n- Last change: {changed}\n"
        assert header in (await history.markdown(chat.id) or "")
        assert header in (history.carried(chat) or "")  # the seed of a new session

    anyio.run(reopened, export)
    row = store_at(tmp_path).chat(history_id)
    assert row is not None and (row.created_at, row.updated_at) == (1e9, 1e9 + 60)

    async def new_turn(history: History, chat: Chat) -> None:
        await chat.start_turn("more", [])
        chat.end_turn("end_turn")
        exported = await history.markdown(chat.id) or ""
        assert f"- Started: {started}\n" in exported and f"- Last change: {changed}" not in exported

    before = time.time()
    anyio.run(reopened, new_turn)
    row = store_at(tmp_path).chat(history_id)
    assert row is not None and row.created_at == 1e9 and row.updated_at >= before


def _patch(role: str, text: str) -> Any:
    from acp_nvim.client.session.model import MessagePatch

    return MessagePatch(None, role, text)  # type: ignore[arg-type]


def test_a_binary_file_in_a_turns_kept_review_is_drawn_as_the_review_says_it() -> None:
    """A file with no text has no hunks: reopened, its turn's review says what it is
    and what became of it as a whole, as the live review does, not a bare path."""
    from acp_nvim.client.history._blocks import review_of
    from acp_nvim.review import BinaryChange

    made = BinaryChange("/p/new.bin", 1, "disk", False, None, None, 2048)
    changed = BinaryChange("/p/logo.png", 1, "disk", True, b"\x00old", 4, 17, status="rejected")
    summary = {"files": [made.summary(), changed.summary()]}
    data = {"stop_reason": "end_turn", "review": review_of(summary, 1)}
    turn = StoredBlock(0, "t1", 1, "turn", "*— end_turn —*", json.dumps(data))
    [op] = render_ops([turn], "#h:", Workspace("/p"))
    assert op["lines"][2:] == [  # type: ignore[typeddict-item]
        "*Review:*",
        "- `new.bin` (new): binary, 2.0 KB, whole file pending",
        "- `logo.png`: binary, 17 bytes, whole file rejected",
    ]


def test_a_turns_review_kept_as_counts_is_still_drawn() -> None:
    """Rows kept before each hunk was listed hold counts by status."""
    data = '{"stop_reason": "end_turn", "review": [{"path": "/p/a.py", "hunks": {"accepted": 2}}]}'
    turn = StoredBlock(0, "t1", 1, "turn", "*— end_turn —*", data)
    [op] = render_ops([turn], "#h:", Workspace("/p"))
    assert op["lines"] == ["*— end_turn —*", "", "*Review:*", "- `a.py`: 2 accepted"]  # type: ignore[typeddict-item]
    # A worktree chat's review holds the user's files: named from the user's directory.
    worktree = Worktree("/wt/p-1", "acp/1", "/p", "0" * 40)
    [op] = render_ops([turn], "#h:", Workspace("/wt/p-1", worktree=worktree))
    assert op["lines"][-1] == "- `a.py`: 2 accepted"  # type: ignore[typeddict-item]


def test_a_chat_kept_before_branches_were_reopens_as_it_showed(tmp_path: Path) -> None:
    """A store of schema 1 is migrated; its rows (no turn of their own, ``branch`` 1
    for those a rewind left) reopen as before: what was in view, as one branch whose
    turns are its prompts (a message steered into a turn begins none)."""
    path = tmp_path / "h.sqlite3"
    old = sqlite3.connect(path, isolation_level=None)
    for statement in _store._statements(_store._MIGRATIONS[0]):
        old.execute(statement)
    old.execute("PRAGMA user_version = 1")
    old.execute("INSERT INTO chats(id, agent, cwd, created_at, updated_at, turns) "
                "VALUES (1, 'demo', '/p', 0, 0, 3)")  # fmt: skip
    rows = [  # key, branch, turn, kind, text
        ("#message:m1", 0, 1, "user", "first prompt"),
        ("#message:m2", 0, 1, "agent", "first reply"),
        ("#message:m3", 1, 2, "user", "left behind"),
        ("#message:m4", 1, 2, "agent", "left reply"),
        ("#info5", 0, 2, "info", "*Rewound to before turn 2.*"),
        ("#message:m6", 0, 3, "user", "second prompt"),
        ("#message:m7", 0, 3, "user", "steered in"),
        ("#message:m8", 0, 3, "agent", "second reply"),
    ]
    for seq, row in enumerate(rows):
        old.execute("INSERT INTO blocks(id, key, branch, turn, kind, text) VALUES (?, ?, ?, ?, ?, ?)",
                    ((1 << _store.SEQ_BITS) | seq, *row))  # fmt: skip
    old.close()
    shown = ["first prompt", "first reply", "*Rewound to before turn 2.*", "second prompt",
             "steered in", "second reply"]  # fmt: skip

    async def run() -> None:
        editor = RecordingEditor()
        async with anyio.create_task_group() as group:
            history = History(editor, Tasks(group))
            history.configure(HistoryOptions(path=str(path)), None)
            found = await history.load(1)
            assert found is not None
            row, blocks = found
            chat = Chat(1, "demo", editor)
            history.attach(chat, "/p", keep=False)
            await history.reopen(chat, row, blocks)
            drawn = [op for op in editor.ops[1] if op["op"] == "block"]
            assert [op["lines"][-1].split("  ")[-1].strip() for op in drawn] == shown  # type: ignore[typeddict-item]
            assert [(b["id"], b["turns"]) for b in chat.branches.listed()] == [(1, 2)]
            exported = history.reader.export(1)
            assert exported is not None and "left behind" not in exported
            assert [line for line in exported.split("\n") if line in shown] == shown
            await history.close()
            group.cancel_scope.cancel()

    anyio.run(run)
    assert Store(str(path))._run("PRAGMA user_version") == [(_store.VERSION,)]


@pytest.mark.parametrize(
    "kept",
    [
        '{"shown": 9, "branches": [[1, [[1, 2]], "s"]]}',
        '{"branches": [[1]]}',
        "[",
        '{"shown": 1, "branches": [[1, [[1, 99999999999]], null]]}',
    ],
)
def test_branches_kept_unreadable_reopen_as_the_blocks_show(kept: str) -> None:
    """A ``chats.branches`` that cannot be read (or names too many turns) costs the
    branches, not the chat: it reopens with one branch, its blocks in order."""
    from acp_nvim.client.history._branches import branches_of, in_view

    blocks = [
        StoredBlock(0, "u1", 1, "user", "one", node=1),
        StoredBlock(1, "u2", 2, "user", "two", node=2),
    ]
    [branch], shown = branches_of(kept, blocks)
    assert shown is branch
    assert (branch.id, shown.id, branch.nodes) == (1, 1, [1, 2])
    assert in_view(branch, blocks) == blocks


@pytest.mark.parametrize("kind", ["user", "agent"])
def test_a_fence_a_message_leaves_open_ends_with_it_in_the_export(kind: str) -> None:
    """A prompt pasting the start of a code block (or a reply cut short in one) left
    its fence open in the export: every later prompt and reply rendered as code."""
    blocks = [
        StoredBlock(0, "k0", 1, kind, "look:\n```py\nx = 1"),
        StoredBlock(1, "k1", 1, "user" if kind == "agent" else "agent", "next"),
    ]
    text = markdown(_store.ChatRow(1, "demo", "/p", 0.0, 0.0), blocks)
    after = "You" if kind == "agent" else "Agent"
    assert text.endswith(f"\n\nlook:\n```py\nx = 1\n```\n\n## {after}\n\nnext\n")


def test_a_store_opened_read_only_reads_and_refuses_writes(tmp_path: Path) -> None:
    """A history file another Neovim writes, opened for reading only: it finds what
    that one wrote since, even after a write of its own was refused (a rename from
    the picker), and a write fails as the file's being read-only."""
    store = store_at(tmp_path)
    first = chat_with(store, "hello zebra", "echo")
    reader = Store(store.path, read_only=True)
    assert [h.chat.id for h in reader.search("zebra")] == [first]
    second = chat_with(store, "zebra again", "echo")
    assert [h.chat.id for h in reader.search("zebra")] == [second, first]
    with pytest.raises(StoreError) as refused:
        reader.forget(first)
    assert refused.value.read_only and "is read-only" in str(refused.value)
    # A refused rename (the picker's, on this file) left the reads in the
    # transaction sqlite3 had begun for it: they saw the file as it was then.
    with pytest.raises(StoreError, match="is read-only"):
        reader.rename(first, "named")
    assert [h.chat.id for h in reader.search("zebra")] == [second, first]
    third = chat_with(store, "zebra once more", "echo")
    assert [h.chat.id for h in reader.search("zebra")] == [third, second, first]
    older = tmp_path / "older.sqlite3"
    sqlite3.connect(older).execute("PRAGMA user_version = 2").connection.close()
    with pytest.raises(StoreError, match="read-only and of an older acp"):
        Store(str(older), read_only=True)


def test_a_hand_over_kept_before_its_note_was_named_still_tells_whose_turns(
    tmp_path: Path,
) -> None:
    """A hand-over kept before the note after its turns was a block of its own name
    (``#continued``) kept it as ``#info``: reopened and handed on (or continued in
    a new session), the next agent was told the turns without the line saying
    which agent answered from there on. Other notes stay out."""
    store = store_at(tmp_path)
    chat_id = store.new_chat("plain", "/p")
    intro = "*From kept's chat “hello zebra”: kept answers from here.*"
    handed = "*Handed over from kept's chat “hello zebra” to plain: plain answers from here.*"
    forked = "*Forked from plain's chat “hello zebra”: from here on, this chat goes its own way.*"
    restarted = "*plain starts a new session: the next prompt carries the conversation so far.*"
    rows = [  # key, turn, kind, text
        ("#intro", 0, "info", intro),
        ("#message:m1", 1, "user", "hello zebra"),
        ("#message:m2", 1, "agent", "echo: hello zebra"),
        ("#info3", 1, "info", handed),
        ("#info4", 1, "info", forked),
        ("#info5", 1, "info", restarted),
        ("#message:m6", 2, "user", "go on"),
        ("#message:m7", 2, "agent", "echo: go on"),
    ]
    blocks = [
        StoredBlock(seq, key, turn, kind, text) for seq, (key, turn, kind, text) in enumerate(rows)
    ]
    assert store.write(chat_id, blocks, {"turns": 2}) == "written"

    async def run() -> None:
        async with anyio.create_task_group() as group:
            history = History(RecordingEditor(), Tasks(group))
            history.configure(HistoryOptions(path=store.path), None)
            found = await history.load(chat_id)
            assert found is not None
            chat = Chat(1, "plain", history.editor)
            history.attach(chat, "/p", keep=False)
            await history.reopen(chat, *found)
            carried = history.carried(chat) or ""
            said = [intro, "echo: hello zebra", handed, forked, "go on"]
            assert [carried.index(words) for words in said] == sorted(
                carried.index(w) for w in said
            )
            assert restarted not in carried
            await history.close()
            group.cancel_scope.cancel()

    anyio.run(run)


def test_a_title_or_name_kept_with_a_line_break_is_read_as_one_line(tmp_path: Path) -> None:
    """A chat kept with an agent's title of two lines (or a name pasted with a line
    break) was listed, and exported, with it: the picker's entry broke in two."""
    store = store_at(tmp_path)
    titled = chat_with(store, "hello zebra", "echo")
    named = chat_with(store, "zebra again", "echo")
    store._run("UPDATE chats SET title = ? WHERE id = ?", ("fix the parser\nit fails", titled))
    store._run("UPDATE chats SET name = ? WHERE id = ?", (" the\r\nparser ", named))
    reader = Reader(lambda: store.path, lambda: None, lambda _: None)
    listed = {entry["id"]: entry["title"] for entry in reader.search("zebra")}
    assert listed == {titled: "fix the parser it fails", named: "the parser"}
    assert (reader.export(titled) or "").startswith("# fix the parser it fails\n")


def test_search_ignores_case_and_accents_of_every_script(tmp_path: Path) -> None:
    """FTS5's unicode61 drops the accents of Latin letters only: `елка` did not find
    ёлка, `καφες` not καφές, and `strasse` not Straße (its ß is no accent)."""
    store = store_at(tmp_path)
    greek = chat_with(store, "Ένας καφές στην Αθήνα", "ok")
    russian = chat_with(store, "Ёлка и Йошкар-Ола", "ok")
    german = chat_with(store, "Die STRASSE und die Straße", "ok")
    latin = chat_with(store, "un café ﬁn", "ok")
    for query, found in [
        ("καφες αθηνα", greek), ("ΚΑΦΈΣ", greek), ("ενας", greek), ("καφ*", greek),
        ("елка", russian), ("ЁЛКА", russian), ("йошкар", russian), ("ёлк*", russian),
        ("cafe fin", latin), ("CAFÉ", latin),
    ]:  # fmt: skip
        assert [h.chat.id for h in store.search(query)] == [found], query
    for query in ("strasse", "straße", "STRASSE", "Straße"):
        assert [h.chat.id for h in store.search(query)] == [german], query
    # The snippet is cut around the word found, however it is written there.
    assert store.search("елка")[0].snippet == "Ёлка и Йошкар-Ола"
    assert store.search("αθηνα")[0].snippet == "Ένας καφές στην Αθήνα"


def test_a_snippet_is_cut_around_a_word_written_in_a_compatibility_form(tmp_path: Path) -> None:
    """`mhz` finds `㎒` (the index holds it as its letters), but the snippet showed
    the start of the reply, far from it: the fold lowercased before it spelled the
    sign out, so `㎒` folded to `MHz`, never `mhz`. Greek's lunate sigma too (it
    folded to a final sigma, which the sigma of a query is not)."""
    store = store_at(tmp_path)
    words = "one two three four five six seven eight nine ten"
    lunate, sigma = "\u03f2", "\u03c3"
    chat_with(store, "clocks", f"{words} the bus runs at 5 ㎒ now; καφέ{lunate} {words}")
    [hit] = store.search("mhz")
    assert hit.snippet == f"… ten the bus runs at 5 ㎒ now; καφέ{lunate} one two three four …"
    [hit] = store.search(f"καφε{sigma}")
    assert hit.snippet == f"… bus runs at 5 ㎒ now; καφέ{lunate} one two three four five six …"


def test_a_store_indexed_before_words_were_folded_is_indexed_again(tmp_path: Path) -> None:
    """A store of schema 3 (its index unfolded) is indexed again as it is opened:
    its old chats are found as new ones are, and writes keep the index whole."""
    path = tmp_path / "h.sqlite3"
    schema_3(path, {1: ["Ёлка"]})
    store = Store(str(path))
    assert [h.chat.id for h in store.search("елка")] == [1]
    assert store.write(1, [StoredBlock(0, "k0", 1, "user", "Καφές")]) == "written"
    assert store.search("елка") == [] and [h.chat.id for h in store.search("καφες")] == [1]
    store.forget(1)
    assert store.search("καφες") == []
    assert store._run("INSERT INTO search(search) VALUES ('integrity-check')") == []


def test_a_search_while_the_writer_migrates_the_file_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first open after an upgrade re-indexes the file (seconds for a large one).
    A search made meanwhile (a chat opened, its writer migrating) waited its busy
    timeout of 250 ms and said the file was locked "by another program"; it waits
    for the migration, finds the old chats by their folded words, and the writer
    keeps its chats."""
    path = tmp_path / "h.sqlite3"
    schema_3(path, {1: ["Ёлка"]})
    # The writer's migration, once folding, held until the search waits for it (or failed).
    folding, settled, unheld = threading.Event(), threading.Event(), _store.fold

    def held(text: str) -> str:
        folding.set()
        settled.wait()
        return unheld(text)

    class Watched:
        """The migration's lock, telling when a second thread waits for it."""

        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __enter__(self) -> None:
            if not self.lock.acquire(blocking=False):
                settled.set()
                self.lock.acquire()

        def __exit__(self, *_: object) -> None:
            self.lock.release()

    monkeypatch.setattr(_store, "fold", held)
    monkeypatch.setattr(_store, "_MIGRATING", Watched(), raising=False)
    told: list[str] = []
    writer = Writer(str(path), lambda message, level: told.append(message))
    target = Target("demo", "/p")
    writer.put(target, [StoredBlock(0, "k0", 1, "user", "Καφές")], {}, 1.0)
    assert folding.wait(10)
    reader = Reader(lambda: str(path), lambda: None, lambda store: None)
    try:
        found = reader.search("елка")
    except StoreError as err:
        found = [{"error": str(err)}]
    finally:
        settled.set()
    assert [hit.get("id") for hit in found] == [1], found
    assert writer.written(10) and told == []
    assert [hit["id"] for hit in reader.search("καφες")] == [target.id]
    writer.close()


def test_an_older_acp_nvim_writing_the_upgraded_file_is_told_to_update(tmp_path: Path) -> None:
    """An older acp.nvim still running with the file open when a newer one re-indexed
    it has no fold function for the new index's triggers: its writes fail, retried,
    and its user is told once (its writer's line, `history: cannot write, retrying:`
    and the error). That said "no such function: acp_fold"; it says to update. The
    newer one's chats lose nothing to its failing writes."""
    path = tmp_path / "h.sqlite3"
    schema_3(path, {1: ["kept before"]})
    older = sqlite3.connect(path, isolation_level=None)  # opened before the upgrade
    newer = Store(str(path))
    chat = newer.new_chat("demo", "/p")
    older.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError) as failed:
        older.execute(
            "INSERT INTO blocks(id, key, turn, kind, text) VALUES (?, 'k1', 1, 'agent', 'lost')",
            (1 << _store.SEQ_BITS | 1,),
        )
    older.execute("ROLLBACK")
    told = f"history: cannot write, retrying: {_store._describe(failed.value, str(path))}"
    assert "newer acp.nvim" in told and "update" in told, told
    assert newer.write(chat, [StoredBlock(0, "k0", 1, "user", "Kept after")]) == "written"
    assert [h.chat.id for h in newer.search("kept")] == [chat, 1]
    older.close()


def test_a_chat_an_older_acp_nvim_made_without_a_turn_is_not_listed(tmp_path: Path) -> None:
    """An older acp.nvim running when a newer one re-indexed the file makes its new
    chat's row, then fails to write a block (0104): the row stayed, empty, in the
    newer one's :AcpHistory as "chat N · 0 turns", opening and exporting nothing.
    A row this one made whose first write failed (a locked file, a full disk) is as empty."""
    path = tmp_path / "h.sqlite3"
    schema_3(path, {1: ["kept before"]})
    older = sqlite3.connect(path, isolation_level=None)  # opened before the upgrade
    newer = Store(str(path))
    older.execute(
        "INSERT INTO chats(agent, cwd, created_at, updated_at) VALUES ('demo', '/p', 0, 9e9)"
    )
    unwritten = newer.new_chat("demo", "/p")
    assert [h.chat.id for h in newer.search()] == [1]
    assert [h.chat.id for h in newer.search(agent="demo", cwd=["/p"])] == [1]
    newer.write(unwritten, [StoredBlock(0, "k0", 1, "user", "written at last")])
    assert [h.chat.id for h in newer.search()] == [unwritten, 1]
    older.close()


def test_a_replay_made_turns_of_before_the_one_it_replaces_is_kept_whole(
    tmp_path: Path,
) -> None:
    """A v2 agent that replays after its answer died in the replay; restarted, its
    replay came in before the answer was taken (a loaded machine), under the late
    replay of the one it died in: its turns were made, then unmade with the dead
    one's at the answer and made again. Their blocks kept the node numbers of the
    first making (after the dead replay's turn): the stored chat's branch ended one
    turn short, and the chat reopened from the history lacked its last turn."""
    from acp_nvim.client.history._branches import branches_of, in_view
    from acp_nvim.client.session.chat import replayed, replayed_late
    from acp_nvim.client.session.model import MessagePatch

    def say(chat: Chat, role: str, message_id: str, text: str) -> None:
        chat.on_message(MessagePatch(message_id, role, text))  # type: ignore[arg-type]

    async def run() -> None:
        async with anyio.create_task_group() as group:
            history, chat = _keeping(tmp_path, RecordingEditor(), group)
            chat.session.session_id = "s9"
            chat.session.take("s9", created=False)
            chat.branches.unreplayed = 0  # the replay begins (``_replay``)
            replayed(chat, 0, 1)  # answered: it replays after its answer
            chat.branches.replaying = (0, 1)
            say(chat, "user", "u1", "one")
            say(chat, "agent", "m1", "s9: one")
            replayed_late(chat)  # then the agent died; restarted, it replays again
            chat.session.forget("s9")
            chat.session.take("s9", created=False)
            since = len(chat.session.items)
            for number, word in ((1, "one"), (2, "two")):
                say(chat, "user", f"u{number}", word)
                say(chat, "agent", f"m{number}", f"s9: {word}")
            replayed_late(chat)  # the new replay came before the answer was taken
            replayed(chat, chat.shown.unreplay(since), 2)  # the answer
            assert [t.prompt.text for t in chat.branches.path] == ["one", "two"]
            await history.close()
            group.cancel_scope.cancel()

    anyio.run(run)
    store = store_at(tmp_path)
    [row] = store.search("two")
    blocks = store.blocks(row.chat.id)
    _, shown = branches_of(row.chat.branches, blocks)
    assert [b.text for b in in_view(shown, blocks)] == ["one", "s9: one", "two", "s9: two"]
