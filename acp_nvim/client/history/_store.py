"""The chat history's SQLite file: schema, migrations, writes and queries.

One file (WAL mode) shared by every Neovim of the user. Layout (decision 0043):

- ``chats``: one row per chat — agent, directory, title, the user's name for it,
  the agent's session id and protocol version, times, turns, and ``parent`` (the
  chat a continued or handed-off one comes from).
- ``blocks``: the transcript, one row per block. ``id`` is ``chat << 24 | seq``
  (``seq`` the block's place in the transcript), so a chat's blocks are one range
  of the primary key. ``text`` is the block's words (a message's text, a tool
  call's title, a notice's lines); ``data`` the rest as JSON (a tool call's diffs,
  status and permission outcome, a prompt's attachments, a turn's usage).
  ``node`` is the turn the block belongs to (the chat's turn count when that turn
  began; 0 before the first): the turn that was the last in view when the block
  was first drawn, as the transcript groups blocks when a rewind takes turns out.
  Rows kept before schema 2 have none, and ``branch``: ``SHOWN`` (0) for the blocks
  then in view, 1 for those of the branches a rewind left (not written since).
- ``chats.branches`` (since schema 2): the chat's branches as JSON (see
  ``history._branches``), each its turns (``node`` s) in order, the one in view
  named; with the blocks' ``node`` s it says what a reopened chat shows and which
  branches it can pick. Without it (a chat kept before), ``branch`` says it.
- ``chats.worktree`` (since schema 3): a worktree chat's worktree and its
  directory there, as JSON (``session.workspace.KeptWorktree``).
- ``search``: an FTS5 index over the ``text`` of prompts, replies and tool calls,
  folded (:func:`fold`, since schema 4), with no content of its own (the text is
  stored once, in ``blocks``).

Every public method raises :class:`StoreError` only (sqlite3's errors are
translated here); ``unavailable`` tells a store that cannot be used at all
(damaged, newer, locked, read-only) from a write that may succeed when retried.
"""

from __future__ import annotations

__all__ = [
    "SEQ_BITS",
    "SHOWN",
    "ChatRow",
    "Hit",
    "Store",
    "StoreError",
    "StoredBlock",
    "Written",
    "fold",
]

import os
import pathlib
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import msgspec

from acp_nvim.client.text import one_line
from acp_nvim.client.text import title as title_of

# A schema-1 row's ``branch``: in the transcript's view (else 1: on a branch a rewind left).
SHOWN = 0
# Blocks a chat holds at most: ``id`` is ``chat << SEQ_BITS | seq``.
SEQ_BITS = 24
# Milliseconds a statement waits for another Neovim's write to end.
BUSY_MS = 5000
# The kinds of block the search index holds.
SEARCHED = ("user", "agent", "tool")
# What became of a chat's write: ``forgotten``, the chat was deleted meanwhile;
# ``taken``, another Neovim wrote blocks after those this one knows of.
Written = Literal["written", "forgotten", "taken"]

# The SQL function the index's triggers fold words with (schema 4). An older
# acp.nvim still running with the file open has none: each write of its fails with
# "no such function: " and this name, the line its user is told (decision 0104).
_FOLD = "acp_fold, of a newer acp.nvim: update this one (restart Neovim)"

_MIGRATIONS: list[str] = [
    # 1: the first layout
    f"""
    CREATE TABLE chats (
        id INTEGER PRIMARY KEY,
        agent TEXT NOT NULL,
        cwd TEXT NOT NULL,
        title TEXT,
        name TEXT,
        session_id TEXT,
        protocol_version INTEGER,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        turns INTEGER NOT NULL DEFAULT 0,
        parent INTEGER
    );
    CREATE INDEX chats_updated ON chats(updated_at);
    CREATE TABLE blocks (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        branch INTEGER NOT NULL DEFAULT 0,
        turn INTEGER NOT NULL,
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        data TEXT
    );
    CREATE VIRTUAL TABLE search USING fts5(text, content='blocks', content_rowid='id');
    CREATE TRIGGER blocks_added AFTER INSERT ON blocks WHEN new.kind IN {SEARCHED} BEGIN
        INSERT INTO search(rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER blocks_removed AFTER DELETE ON blocks WHEN old.kind IN {SEARCHED} BEGIN
        INSERT INTO search(search, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    CREATE TRIGGER blocks_changed AFTER UPDATE OF text ON blocks
    WHEN new.kind IN {SEARCHED} AND new.text != old.text BEGIN
        INSERT INTO search(search, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO search(rowid, text) VALUES (new.id, new.text);
    END;
    """,
    # 2: every branch kept (issue 23's rewinds) can be reopened
    """
    ALTER TABLE blocks ADD COLUMN node INTEGER;
    ALTER TABLE chats ADD COLUMN branches TEXT;
    """,
    # 3: a worktree chat reopens in its worktree while that is kept
    """
    ALTER TABLE chats ADD COLUMN worktree TEXT;
    """,
    # 4: the index holds the words folded (fold: case, and the accents of Greek and
    # Cyrillic letters too), with no content of its own (the text stays as written)
    f"""
    DROP TRIGGER blocks_added;
    DROP TRIGGER blocks_removed;
    DROP TRIGGER blocks_changed;
    DROP TABLE search;
    CREATE VIRTUAL TABLE search USING fts5(text, content='');
    CREATE TRIGGER blocks_added AFTER INSERT ON blocks WHEN new.kind IN {SEARCHED} BEGIN
        INSERT INTO search(rowid, text) VALUES (new.id, "{_FOLD}"(new.text));
    END;
    CREATE TRIGGER blocks_removed AFTER DELETE ON blocks WHEN old.kind IN {SEARCHED} BEGIN
        INSERT INTO search(search, rowid, text) VALUES ('delete', old.id, "{_FOLD}"(old.text));
    END;
    CREATE TRIGGER blocks_changed AFTER UPDATE OF text ON blocks
    WHEN new.kind IN {SEARCHED} AND new.text != old.text BEGIN
        INSERT INTO search(search, rowid, text) VALUES ('delete', old.id, "{_FOLD}"(old.text));
        INSERT INTO search(rowid, text) VALUES (new.id, "{_FOLD}"(new.text));
    END;
    INSERT INTO search(rowid, text) SELECT id, "{_FOLD}"(text) FROM blocks WHERE kind IN {SEARCHED};
    """,
]
VERSION = len(_MIGRATIONS)
# One thread of the host migrates the file; another opening it meanwhile waits for
# that here, not its busy timeout: schema 4's re-index takes seconds on a large
# file, after which a search (250 ms) said the file was locked "by another
# program", and the writer (5 s) could turn the history off.
_MIGRATING = threading.Lock()


class StoreError(Exception):
    """The history file failed; ``unavailable``: it cannot be used at all;
    ``read_only``: because it cannot be written (it may be read: ``Store``'s
    ``read_only``)."""

    def __init__(self, message: str, *, unavailable: bool = False, read_only: bool = False) -> None:
        super().__init__(message)
        self.unavailable = unavailable
        self.read_only = read_only


class StoredBlock(msgspec.Struct):
    """One block of a stored transcript (see the module docstring)."""

    seq: int
    key: str
    turn: int
    kind: str
    text: str
    data: str | None = None
    branch: int = 0
    node: int | None = None


class ChatRow(msgspec.Struct):
    """A stored chat's facts; ``parent`` the chat it continues, if any."""

    id: int
    agent: str
    cwd: str
    created_at: float
    updated_at: float
    turns: int = 0
    title: str | None = None
    name: str | None = None
    session_id: str | None = None
    protocol_version: int | None = None
    parent: int | None = None
    branches: str | None = None
    worktree: str | None = None

    def __post_init__(self) -> None:
        # A title or name kept with a line break (an agent's title, kept before
        # titles were made one line), or a title kept longer than titles are now, is
        # read as shown.
        self.title = title_of(self.title)
        self.name = one_line(self.name) or None if self.name else None


class Hit(msgspec.Struct):
    """A chat found: its row and the matching words in their context."""

    chat: ChatRow
    snippet: str


_CHAT_COLUMNS = (
    "id, agent, cwd, created_at, updated_at, turns, title, name, session_id, "
    "protocol_version, parent, branches, worktree"
)


def _describe(err: sqlite3.Error, path: str) -> StoreError:
    """Our error for sqlite3's, naming the file and whether retrying may help."""
    text = str(err)
    if isinstance(err, sqlite3.OperationalError) and "locked" in text:
        return StoreError(f"{path} is locked by another program ({text})")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path} is read-only", unavailable=True, read_only=True)
    if isinstance(err, sqlite3.DatabaseError) and not isinstance(err, sqlite3.OperationalError):
        return StoreError(f"{path} is damaged ({text}): move it away", unavailable=True)
    return StoreError(f"{path}: {text}")


class Store:
    """One connection to the history file; use it from one thread only.
    ``read_only``: opened for reading only, as a file one cannot write (its
    directory neither, where SQLite keeps the -shm file readers share) still
    reads; its writes fail.

    Raises:
        StoreError: on open (``unavailable`` for a damaged, newer, read-only or
            locked file) and from every method.
    """

    def __init__(self, path: str, *, busy_ms: int = BUSY_MS, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        try:
            if read_only:
                self._db = _open_read_only(path, busy_ms)
            else:
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                self._db = sqlite3.connect(path, timeout=busy_ms / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as err:
            raise StoreError(f"cannot open {path}: {err}", unavailable=True) from None
        self._file = _file_id(path)
        # The index's triggers fold the words they index (schema 4).
        self._db.create_function(_FOLD, 1, fold, deterministic=True)
        try:
            self._migrate()
        except sqlite3.Error as err:
            self._db.close()
            failure = _describe(err, path)
            failure.unavailable = True
            raise failure from None
        except StoreError as err:  # at open, any failure leaves the file unused
            self._db.close()
            err.unavailable = True
            raise

    def __repr__(self) -> str:
        return f"<Store {self.path}>"

    def close(self) -> None:
        self._db.close()

    def moved(self) -> bool:
        """Whether the file at ``path`` is no longer the one open here (moved away or
        deleted, as a damaged one is told to be)."""
        return _file_id(self.path) != self._file

    def _migrate(self) -> None:
        db = self._db
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > VERSION:
            raise StoreError(
                f"{self.path} was written by a newer acp.nvim (schema {version}, this one "
                f"reads {VERSION}): update acp.nvim",
                unavailable=True,
            )
        if self.read_only:
            if version < VERSION:  # the queries name columns it lacks
                raise StoreError(
                    f"{self.path} is read-only and of an older acp.nvim (schema {version}): "
                    "open it once where it can be written"
                )
            return
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if version == VERSION:
            return
        # Two Neovims opening a new file: one migrates; two threads of ours: one
        # migrates and the other finds it done.
        with _MIGRATING, self._transaction():
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number, script in enumerate(_MIGRATIONS[version:], version + 1):
                for statement in _statements(script):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as err:
            raise _describe(err, self.path) from None

    # -- writes --------------------------------------------------------------------------

    def new_chat(self, agent: str, cwd: str, parent: int | None = None) -> int:
        now = time.time()
        [(chat_id,)] = self._run(
            "INSERT INTO chats(agent, cwd, created_at, updated_at, parent) "
            "VALUES (?, ?, ?, ?, ?) RETURNING id",
            (agent, cwd, now, now, parent),
        )
        return int(chat_id)

    def write(
        self,
        chat_id: int,
        blocks: Iterable[StoredBlock],
        facts: dict[str, Any] | None = None,
        updated_at: float | None = None,
        gone: Iterable[int] = (),
        top: int | None = None,
    ) -> Written:
        """Upsert ``blocks``, delete the blocks of seqs ``gone`` and set ``facts``
        (columns of ``chats``) of one chat, in one transaction. Nothing is written when
        the chat was forgotten meanwhile, nor when ``top`` (the last seq the writer
        knows the chat holds) is given and the chat holds one after it: another
        Neovim went on in it. Raises StoreError (the caller retries it whole)."""
        sets = {**(facts or {}), "updated_at": updated_at or time.time()}
        unknown = set(sets) - set(_CHAT_COLUMNS.split(", "))
        if unknown:
            raise ValueError(f"not a column of chats: {sorted(unknown)}")
        rows = [
            ((chat_id << SEQ_BITS) | b.seq, b.key, b.node, b.turn, b.kind, b.text, b.data)
            for b in blocks
        ]
        first = chat_id << SEQ_BITS
        with self._transaction() as db:
            if top is not None:
                [(last,)] = db.execute(
                    "SELECT max(id) FROM blocks WHERE id >= ? AND id < ?",
                    (first, first + (1 << SEQ_BITS)),
                ).fetchall()
                if last is not None and last > first + top:
                    return "taken"
            assignments = ", ".join(f"{column} = ?" for column in sets)
            there = db.execute(
                f"UPDATE chats SET {assignments} WHERE id = ? RETURNING id",
                [*sets.values(), chat_id],
            ).fetchall()
            if not there:
                return "forgotten"
            db.executemany(
                "INSERT INTO blocks(id, key, node, turn, kind, text, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "turn = excluded.turn, text = excluded.text, data = excluded.data",
                rows,
            )
            db.executemany("DELETE FROM blocks WHERE id = ?", [(first | seq,) for seq in gone])
        return "written"

    def branch_off(self, chat_id: int, top: int) -> int | None:
        """A new chat, whose parent is ``chat_id``, holding its facts and its blocks up
        to seq ``top``: where a Neovim goes on that another one's turns came after.
        None when there is no such chat."""
        first = chat_id << SEQ_BITS
        columns = _CHAT_COLUMNS.removeprefix("id, ").replace("parent", "?")
        with self._transaction() as db:
            made = db.execute(
                f"INSERT INTO chats({_CHAT_COLUMNS.removeprefix('id, ')}) "
                f"SELECT {columns} FROM chats WHERE id = ? RETURNING id",
                (chat_id, chat_id),
            ).fetchall()
            if not made:
                return None
            [(new,)] = made
            db.execute(
                "INSERT INTO blocks(id, key, branch, turn, kind, text, data, node) "
                "SELECT (? << ?) | (id - ?), key, branch, turn, kind, text, data, node "
                "FROM blocks WHERE id >= ? AND id <= ?",
                (new, SEQ_BITS, first, first, first + top),
            )
        return int(new)

    def rename(self, chat_id: int, name: str | None) -> bool:
        return bool(
            self._run("UPDATE chats SET name = ? WHERE id = ? RETURNING id", (name, chat_id))
        )

    def forget(self, chat_id: int) -> list[str | None]:
        """Delete a chat and its transcript; returns its ``worktree`` column in a list,
        empty when there is no such chat."""
        return self._forget_where("id = ?", (chat_id,))

    def forget_older(self, days: float, spared: Collection[int] = ()) -> list[str | None]:
        """Delete the chats not updated for ``days`` but those ``spared``; returns
        their ``worktree`` columns."""
        marks = ", ".join("?" * len(spared))
        return self._forget_where(
            f"updated_at < ? AND id NOT IN ({marks})", (time.time() - days * 86400, *spared)
        )

    def _forget_where(self, where: str, params: Sequence[Any]) -> list[str | None]:
        with self._transaction() as db:
            rows = db.execute(f"SELECT id, worktree FROM chats WHERE {where}", params).fetchall()
            for chat_id, _ in rows:
                first = chat_id << SEQ_BITS
                db.execute(
                    "DELETE FROM blocks WHERE id >= ? AND id < ?", (first, first + (1 << SEQ_BITS))
                )
                db.execute("DELETE FROM chats WHERE id = ?", (chat_id,))
        return [worktree for _, worktree in rows]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (taken at once: a second writer waits its busy timeout);
        rolled back on any error, sqlite3's translated."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                # A full disk has SQLite roll it back itself: its error is the one to tell.
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as err:
            raise _describe(err, self.path) from None

    # -- reads ---------------------------------------------------------------------------

    def chat(self, chat_id: int) -> ChatRow | None:
        rows = self._run(f"SELECT {_CHAT_COLUMNS} FROM chats WHERE id = ?", (chat_id,))
        return ChatRow(*rows[0]) if rows else None

    def blocks(self, chat_id: int) -> list[StoredBlock]:
        """The chat's transcript in order."""
        first = chat_id << SEQ_BITS
        rows = self._run(
            "SELECT id, key, turn, kind, text, data, branch, node FROM blocks "
            "WHERE id >= ? AND id < ? ORDER BY id",
            (first, first + (1 << SEQ_BITS)),
        )
        mask = (1 << SEQ_BITS) - 1
        return [StoredBlock(row[0] & mask, *row[1:]) for row in rows]

    def search(
        self,
        query: str | None = None,
        *,
        agent: str | None = None,
        cwd: Collection[str] = (),
        limit: int = 50,
    ) -> list[Hit]:
        """Chats newest first (by their last change), in one of the directories
        ``cwd`` if given, whose prompts, replies or tool calls hold every word of
        ``query`` (a word ending in ``*``: as a prefix; case and accents ignored, as
        :func:`fold` folds them; a word of a script written without spaces: anywhere
        in the text, as written); every chat without one.

        Raises:
            ValueError: ``query`` holds no word (only an emoji, only punctuation):
                matching every chat would answer another question than was asked.
        """
        words = _WORD.findall(query or "")
        if query is not None and query.strip() and not words:
            raise ValueError(f"history: {query!r} holds no word to look for (letters or digits)")
        where, params = ["1"], []
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if cwd:
            where.append(f"cwd IN ({', '.join('?' * len(cwd))})")
            params.extend(cwd)
        filters = " AND ".join(where)
        if not words:
            # A row without a block (an older acp.nvim's new chat that cannot write
            # into a newer file, a first write that failed) is no conversation to list.
            rows = self._run(
                f"SELECT {_CHAT_COLUMNS} FROM chats WHERE {filters} AND EXISTS "
                f"(SELECT 1 FROM blocks WHERE id >= chats.id << {SEQ_BITS} "
                f"AND id < (chats.id + 1) << {SEQ_BITS}) ORDER BY updated_at DESC LIMIT ?",
                (*params, limit),
            )
            return [Hit(ChatRow(*row), "") for row in rows]
        indexed = [fold(w) for w in words if not _UNSPACED.search(w)]
        scanned = [w.rstrip("*") for w in words if _UNSPACED.search(w)]
        terms = [f'"{w[:-1]}"*' if w.endswith("*") else f'"{w}"' for w in indexed]
        found = self._matching(_Hits(terms, scanned), filters, params, limit)
        return [Hit(chat, self._snippet(rowid, words)) for chat, rowid in found]

    def _matching(
        self, hits: _Hits, filters: str, params: list[Any], limit: int
    ) -> list[tuple[ChatRow, int]]:
        """The ``limit`` matching chats newest first, each with its newest matching block.

        Hits are read newest chat first (block ids grow with the chat's id) until
        ``limit`` chats matched: only their hits are read, however common a word.
        A chat made before those but changed after the last of them (reopened and
        continued) is then tested on its own, so the order by last change is exact.
        """
        newest: dict[int, int] = {}  # chat id → its newest matching block
        found: dict[int, ChatRow] = {}
        complete = True
        walk = _Walk(self._db, hits)
        try:
            # In the try: a damaged index fails here, said as the file's damage.
            for chat_id, rowid in walk.chats():
                rows = self._run(
                    f"SELECT {_CHAT_COLUMNS} FROM chats WHERE id = ? AND {filters}",
                    (chat_id, *params),
                )
                if rows and self._holds(chat_id, hits.tested):
                    newest[chat_id] = rowid
                    found[chat_id] = ChatRow(*rows[0])
                    if len(found) >= limit:
                        complete = False
                        break
        except sqlite3.Error as err:
            raise _describe(err, self.path) from None
        finally:
            walk.close()
        ranked = sorted(found.values(), key=lambda chat: chat.updated_at, reverse=True)
        if not complete:
            oldest = min(found)  # every chat from the newest to it was tested
            later = self._run(
                f"SELECT {_CHAT_COLUMNS} FROM chats WHERE id < ? AND updated_at > ? AND "
                f"{filters} ORDER BY updated_at DESC",
                (oldest, ranked[-1].updated_at, *params),
            )
            for row in later:
                first = row[0] << SEQ_BITS
                hit = self._run(*hits.newest_first((first, first + (1 << SEQ_BITS)), 1))
                if hit and self._holds_all(row[0], hits):
                    newest[row[0]] = hit[0][0]
                    ranked.append(ChatRow(*row))
            ranked.sort(key=lambda chat: chat.updated_at, reverse=True)
        return [(chat, newest[chat.id]) for chat in ranked[:limit]]

    def _holds_all(self, chat_id: int, hits: _Hits) -> bool:
        """Whether the chat holds every word of the query besides its first, each
        in any of its blocks: one query per word (for the few chats tested alone)."""
        within = (chat_id << SEQ_BITS, (chat_id + 1) << SEQ_BITS)
        return all(
            self._run(
                "SELECT 1 FROM search WHERE search MATCH ? AND rowid >= ? AND rowid < ? LIMIT 1",
                (term, *within),
            )
            for term in hits.terms[1:]
        ) and self._holds(chat_id, hits.tested)

    def _holds(self, chat_id: int, texts: list[str]) -> bool:
        """Whether the chat's prompts, replies or tool calls hold each of ``texts``."""
        first = chat_id << SEQ_BITS
        return all(
            self._run(
                f"SELECT 1 FROM blocks WHERE id >= ? AND id < ? AND kind IN {SEARCHED} "
                "AND instr(text, ?) > 0 LIMIT 1",
                (first, first + (1 << SEQ_BITS), text),
            )
            for text in texts
        )

    def _snippet(self, rowid: int, words: list[str]) -> str:
        """The words of block ``rowid`` around the first query word in it."""
        rows = self._run("SELECT text FROM blocks WHERE id = ?", (rowid,))
        return _cut(rows[0][0], words) if rows else ""


_WORD = re.compile(r"\w+\*?")
# The combining accents of Latin, Greek and Cyrillic letters (a script's own marks,
# a Devanagari vowel sign say, are its letters: kept).
_ACCENTS = re.compile("[\u0300-\u036f]+")


def fold(text: str) -> str:
    """``text`` as the search index holds it and a query's words are looked up:
    case folded as Unicode folds it (``ß`` is ``ss``, a final sigma a sigma),
    compatibility forms as their letters (the ligature ``ﬁ``, full-width ones),
    accents dropped (``é``, ``ά``, ``ё``, ``й``); FTS5's unicode61 only drops Latin ones.

    >>> fold("Straße ΚΑΦΈΣ Ёлка")
    'strasse καφεσ елка'
    """
    if text.isascii():  # most text: nothing to decompose
        return text.lower()
    # Spelled out before the case is folded: ``㎒`` is ``MHz``, a lunate sigma a final one.
    plain = _ACCENTS.sub("", unicodedata.normalize("NFKD", text).casefold())
    return unicodedata.normalize("NFC", plain)


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Japanese
# kana, Chinese characters, Hangul): the index holds a run of them as one word, so
# a word holding them is looked for in the text instead.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


class _Hits:
    """The blocks a query's words are found in: ``terms`` (FTS5 phrases) over the
    index, else the first of ``scanned`` (words of unspaced scripts) in the text. A
    chat is found once it holds every word, each in any of its blocks: a prompt's
    word and a reply's find it."""

    def __init__(self, terms: list[str], scanned: list[str]) -> None:
        self.terms = terms
        self.scanned = scanned
        # The scanned words a found chat is tested for: all but one that found it.
        self.tested = scanned[not terms :]

    def newest_first(
        self, within: tuple[int, int] | None = None, limit: int = -1, term: int = 0
    ) -> tuple[str, tuple[Any, ...]]:
        """The statement reading the ids of the blocks holding ``terms[term]`` (of
        ``scanned[0]`` without terms) newest first (``within``: an id range)."""
        params: tuple[Any, ...]
        if self.terms:
            sql, params = "SELECT rowid FROM search WHERE search MATCH ?", (self.terms[term],)
        else:
            sql = f"SELECT id FROM blocks WHERE kind IN {SEARCHED} AND instr(text, ?) > 0"
            params = (self.scanned[0],)
        if within is not None:
            sql += " AND rowid >= ? AND rowid < ?"
            params += within
        return sql + " ORDER BY rowid DESC LIMIT ?", (*params, limit)


# The hits of a word read past chats before its statement is opened again below
# them: FTS5 opens one in about as long as it reads 600 hits.
_SKIPPED = 200


class _Walk:
    """The chats holding every one of a query's terms (or its first scanned word),
    newest first, each with its newest block holding the first: a leapfrog join of
    each term's hits, read newest first. Two common words' chats are found reading
    their few hits in each, where a statement per chat and word cost a millisecond;
    a word's statement opens again below a chat when reading its hits down to it
    would cost more (a word in most blocks beside a rare one)."""

    def __init__(self, db: sqlite3.Connection, hits: _Hits) -> None:
        self._db = db
        self._hits = hits
        count = max(1, len(hits.terms))
        self._cursors: list[sqlite3.Cursor | None] = [None] * count
        self._at = [0] * count  # the last hit each one read
        self._top = [0] * count  # the chat of the first hit each one read since opened
        self._read = [0] * count  # the hits each one read since

    def chats(self) -> Iterator[tuple[int, int]]:
        target = (2**63 - 1 >> SEQ_BITS) - 1  # the newest chat that may hold them all
        while True:
            for term in range(len(self._cursors)):
                chat_id = self._reach(term, target)
                if chat_id is None:
                    return
                if chat_id < target:
                    target = chat_id
                    break
            else:
                yield target, self._at[0]
                target -= 1

    def _reach(self, term: int, target: int) -> int | None:
        """The chat of the newest hit of ``term`` in chat ``target`` or before."""
        below = (target + 1) << SEQ_BITS
        cursor = self._cursors[term]
        if cursor is not None and self._at[term] < below:
            return self._at[term] >> SEQ_BITS
        chat_id = self._at[term] >> SEQ_BITS
        per_chat = self._read[term] / (self._top[term] - chat_id + 1)
        if cursor is None or (chat_id - target) * per_chat > _SKIPPED:
            return self._open(term, target)
        for read, (rowid,) in enumerate(cursor, 1):
            if rowid < below:
                self._at[term], self._read[term] = rowid, self._read[term] + read
                return self._at[term] >> SEQ_BITS
            if read == _SKIPPED:
                return self._open(term, target)
        return None

    def _open(self, term: int, target: int) -> int | None:
        """Read ``term``'s hits again from the newest in chat ``target`` or before."""
        if (old := self._cursors[term]) is not None:
            old.close()
        below = (0, (target + 1) << SEQ_BITS)
        cursor = self._cursors[term] = self._db.execute(*self._hits.newest_first(below, term=term))
        row = cursor.fetchone()
        if row is None:
            return None
        self._at[term], self._read[term] = row[0], 1
        self._top[term] = self._at[term] >> SEQ_BITS
        return self._at[term] >> SEQ_BITS

    def close(self) -> None:
        for cursor in self._cursors:
            if cursor is not None:
                cursor.close()


def _cut(text: str, words: list[str], around: int = 6) -> str:
    """About ``around`` words either side of the first of ``words`` in ``text`` (a
    word ending in ``*`` matches a prefix), on one line, both folded as the index
    folds them; the start of ``text`` when none is found there (a word the index
    cut out of punctuation this split keeps, ``a.b``)."""
    at = _first_word(text, [fold(w) for w in words]) or 0
    before = text[:at].rsplit(None, around)
    shown = text[at:].split(None, around + 1)
    earlier = len(before) > around and bool(before[0].strip())
    later = len(shown) > around + 1
    kept = [*(before[-around:] if earlier else before), *shown[: around + 1]]
    if not around:
        kept = shown[:1]
    cut = " ".join(_shortened(word) for word in kept if word)
    return ("… " if earlier else "") + cut + (" …" if later else "")


# The characters a snippet shows of one word: a long one (a path, a URL, a pasted
# line of base64) made a picker line of hundreds of columns, or of a whole block.
_WORD_SHOWN = 40


def _shortened(word: str) -> str:
    return word if len(word) <= _WORD_SHOWN else word[: _WORD_SHOWN - 1] + "…"


# Characters of a block folded at once while its word is looked for: a block of
# megabytes (a pasted log) was folded word by word on the thread answering the
# search (0.19 s a MB) where the word was not found as written.
_FOLDED_AT_ONCE = 65536
_SPACE = re.compile(r"\s")
_TOKEN = re.compile(r"\S+")


def _first_word(text: str, wanted: list[str]) -> int | None:
    """Where the first word of ``text`` matching one of ``wanted`` (folded) starts.
    The text is folded a slice at a time (cut at white space): only a slice whose
    folded text holds one of them is looked at word by word."""
    needles = [w.rstrip("*") for w in wanted]

    def matches(token: str) -> bool:
        token = fold(token).strip("`*_.,;:!?()[]{}'\"<>")
        return any(
            w.rstrip("*") in token
            if _UNSPACED.search(w)
            else token.startswith(w[:-1])
            if w.endswith("*")
            else token == w
            for w in wanted
        )

    start = 0
    while start < len(text):
        space = _SPACE.search(text, start + _FOLDED_AT_ONCE)
        end = space.start() if space is not None else len(text)
        folded = fold(text[start:end])
        if any(needle in folded for needle in needles):
            for token in _TOKEN.finditer(text, start, end):
                if matches(token[0]):
                    return token.start()
        start = end + 1
    return None


def _file_id(path: str) -> tuple[int, int] | None:
    """Which file ``path`` is (None: none is there)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _open_read_only(path: str, busy_ms: int) -> sqlite3.Connection:
    """``path`` opened for reading: sharing the readers' -shm file (a writer's
    changes seen as they come), else, where that file cannot be made (the directory
    is read-only too, so no writer is at work), as a file that does not change.
    In autocommit, as the writer's: sqlite3 would begin a transaction for a write
    (a rename) that then fails, and every later read would see the file as it was."""
    uri = pathlib.Path(os.path.abspath(path)).as_uri()
    timeout = busy_ms / 1000
    shared = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, isolation_level=None)
    try:
        shared.execute("PRAGMA user_version").fetchone()
        return shared
    except sqlite3.OperationalError as err:
        shared.close()
        if "readonly" not in str(err):
            raise
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=timeout, isolation_level=None)


def _statements(script: str) -> list[str]:
    """The statements of a migration, one by one (a trigger's body holds semicolons)."""
    statements, current = [], ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
