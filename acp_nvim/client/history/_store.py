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
  ``branch`` is 0: the column is there for rewound branches (issue 20).
- ``search``: an FTS5 index over the ``text`` of prompts, replies and tool calls,
  with ``blocks`` as its external content (the text is stored once).

Every public method raises :class:`StoreError` only (sqlite3's errors are
translated here); ``unavailable`` tells a store that cannot be used at all
(damaged, newer, locked, read-only) from a write that may succeed when retried.
"""

from __future__ import annotations

__all__ = ["SEQ_BITS", "ChatRow", "Hit", "Store", "StoreError", "StoredBlock"]

import os
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# Blocks a chat holds at most: ``id`` is ``chat << SEQ_BITS | seq``.
SEQ_BITS = 24
# Milliseconds a statement waits for another Neovim's write to end.
BUSY_MS = 5000
# The kinds of block the search index holds.
SEARCHED = ("user", "agent", "tool")
# A search that finds more blocks than this tests chats newest first instead of
# collecting every hit (see Store.search).
_COLLECT_AT_MOST = 40_000

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
]
VERSION = len(_MIGRATIONS)


class StoreError(Exception):
    """The history file failed; ``unavailable``: it cannot be used at all."""

    def __init__(self, message: str, *, unavailable: bool = False) -> None:
        super().__init__(message)
        self.unavailable = unavailable


@dataclass
class StoredBlock:
    """One block of a stored transcript (see the module docstring)."""

    seq: int
    key: str
    turn: int
    kind: str
    text: str
    data: str | None = None
    branch: int = 0


@dataclass
class ChatRow:
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


@dataclass
class Hit:
    """A chat found: its row and the matching words in their context."""

    chat: ChatRow
    snippet: str


_CHAT_COLUMNS = (
    "id, agent, cwd, created_at, updated_at, turns, title, name, session_id, "
    "protocol_version, parent"
)


def _describe(err: sqlite3.Error, path: str) -> StoreError:
    """Our error for sqlite3's, naming the file and whether retrying may help."""
    text = str(err)
    if isinstance(err, sqlite3.OperationalError) and "locked" in text:
        return StoreError(f"{path} is locked by another program ({text})")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path} is read-only", unavailable=True)
    if isinstance(err, sqlite3.DatabaseError) and not isinstance(err, sqlite3.OperationalError):
        return StoreError(f"{path} is damaged ({text}): move it away", unavailable=True)
    return StoreError(f"{path}: {text}")


class Store:
    """One connection to the history file; use it from one thread only.

    Raises:
        StoreError: on open (``unavailable`` for a damaged, newer, read-only or
            locked file) and from every method.
    """

    def __init__(self, path: str, *, busy_ms: int = BUSY_MS) -> None:
        self.path = path
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self._db = sqlite3.connect(path, timeout=busy_ms / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as err:
            raise StoreError(f"cannot open {path}: {err}", unavailable=True) from None
        try:
            self._migrate()
        except sqlite3.Error as err:
            self._db.close()
            failure = _describe(err, path)
            raise StoreError(str(failure), unavailable=True) from None
        except StoreError:
            self._db.close()
            raise

    def __repr__(self) -> str:
        return f"<Store {self.path}>"

    def close(self) -> None:
        self._db.close()

    def _migrate(self) -> None:
        db = self._db
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > VERSION:
            raise StoreError(
                f"{self.path} was written by a newer acp.nvim (schema {version}, this one "
                f"reads {VERSION}): update acp.nvim",
                unavailable=True,
            )
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if version == VERSION:
            return
        db.execute("BEGIN IMMEDIATE")  # two Neovims opening a new file: one migrates
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number, script in enumerate(_MIGRATIONS[version:], version + 1):
                for statement in _statements(script):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

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
    ) -> bool:
        """Upsert ``blocks`` and set ``facts`` (columns of ``chats``) of one chat, in
        one transaction; False when the chat was forgotten meanwhile (nothing is
        written). Raises StoreError (the caller retries it whole)."""
        sets = {**(facts or {}), "updated_at": updated_at or time.time()}
        unknown = set(sets) - set(_CHAT_COLUMNS.split(", "))
        if unknown:
            raise ValueError(f"not a column of chats: {sorted(unknown)}")
        rows = [
            ((chat_id << SEQ_BITS) | b.seq, b.key, b.branch, b.turn, b.kind, b.text, b.data)
            for b in blocks
        ]
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                assignments = ", ".join(f"{column} = ?" for column in sets)
                there = db.execute(
                    f"UPDATE chats SET {assignments} WHERE id = ? RETURNING id",
                    [*sets.values(), chat_id],
                ).fetchall()
                if there:
                    db.executemany(
                        "INSERT INTO blocks(id, key, branch, turn, kind, text, data) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                        "turn = excluded.turn, text = excluded.text, data = excluded.data",
                        rows,
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as err:
            raise _describe(err, self.path) from None
        return bool(there)

    def rename(self, chat_id: int, name: str | None) -> bool:
        return bool(
            self._run("UPDATE chats SET name = ? WHERE id = ? RETURNING id", (name, chat_id))
        )

    def forget(self, chat_id: int) -> bool:
        """Delete a chat and its transcript; False when there is no such chat."""
        return self._forget_where("id = ?", (chat_id,)) > 0

    def forget_older(self, days: float) -> int:
        """Delete the chats not updated for ``days``; returns how many."""
        return self._forget_where("updated_at < ?", (time.time() - days * 86400,))

    def _forget_where(self, where: str, params: Sequence[Any]) -> int:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                ids = [row[0] for row in db.execute(f"SELECT id FROM chats WHERE {where}", params)]
                for chat_id in ids:
                    first = chat_id << SEQ_BITS
                    db.execute(
                        "DELETE FROM blocks WHERE id >= ? AND id < ?",
                        (first, first + (1 << SEQ_BITS)),
                    )
                    db.execute("DELETE FROM chats WHERE id = ?", (chat_id,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as err:
            raise _describe(err, self.path) from None
        return len(ids)

    # -- reads ---------------------------------------------------------------------------

    def chat(self, chat_id: int) -> ChatRow | None:
        rows = self._run(f"SELECT {_CHAT_COLUMNS} FROM chats WHERE id = ?", (chat_id,))
        return ChatRow(*rows[0]) if rows else None

    def blocks(self, chat_id: int) -> list[StoredBlock]:
        """The chat's transcript in order."""
        first = chat_id << SEQ_BITS
        rows = self._run(
            "SELECT id, key, turn, kind, text, data, branch FROM blocks "
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
        cwd: str | None = None,
        limit: int = 50,
    ) -> list[Hit]:
        """Chats newest first (by their last change) whose prompts, replies or tool
        calls hold every word of ``query`` (a word ending in ``*``: as a prefix;
        case and accents ignored); every chat without one.

        With many hits the chats are tested newest first until ``limit`` matched;
        with fewer, every hit's chat is collected and sorted: both exact.
        """
        match = _match_expression(query or "")
        where, params = ["1"], []
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if cwd is not None:
            where.append("cwd = ?")
            params.append(cwd)
        filters = " AND ".join(where)
        if match is None:
            rows = self._run(
                f"SELECT {_CHAT_COLUMNS} FROM chats WHERE {filters} "
                "ORDER BY updated_at DESC LIMIT ?",
                (*params, limit),
            )
            return [Hit(ChatRow(*row), "") for row in rows]
        hits = self._collect(match, filters, params, limit)
        if hits is None:
            hits = self._test_newest(match, filters, params, limit)
        return hits

    def _collect(self, match: str, filters: str, params: list[Any], limit: int) -> list[Hit] | None:
        """Every matching chat, sorted (None when the hits are too many to collect)."""
        try:
            cursor = self._db.execute(
                f"SELECT DISTINCT rowid >> {SEQ_BITS} FROM search WHERE search MATCH ? "
                f"LIMIT {_COLLECT_AT_MOST + 1}",
                (match,),
            )
            ids = [row[0] for row in cursor]
        except sqlite3.Error as err:
            raise _describe(err, self.path) from None
        if len(ids) > _COLLECT_AT_MOST:
            return None
        found: list[Hit] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._run(
                f"SELECT {_CHAT_COLUMNS} FROM chats WHERE id IN ({marks}) AND {filters}",
                (*chunk, *params),
            )
            found += [Hit(ChatRow(*row), "") for row in rows]
        found.sort(key=lambda hit: hit.chat.updated_at, reverse=True)
        found = found[:limit]
        for hit in found:
            hit.snippet = self._snippet(match, hit.chat.id) or ""
        return found

    def _test_newest(self, match: str, filters: str, params: list[Any], limit: int) -> list[Hit]:
        """Chats newest first, each tested for a hit, until ``limit`` matched."""
        found: list[Hit] = []
        try:
            cursor = self._db.execute(
                f"SELECT {_CHAT_COLUMNS} FROM chats WHERE {filters} ORDER BY updated_at DESC",
                params,
            )
            for row in cursor.fetchall():
                snippet = self._snippet(match, row[0])
                if snippet is not None:
                    found.append(Hit(ChatRow(*row), snippet))
                    if len(found) >= limit:
                        break
        except sqlite3.Error as err:
            raise _describe(err, self.path) from None
        return found

    def _snippet(self, match: str, chat_id: int) -> str | None:
        """The newest matching block of the chat, cut around the words; None without one."""
        first = chat_id << SEQ_BITS
        rows = self._run(
            "SELECT snippet(search, 0, '', '', '…', 12) FROM search "
            "WHERE search MATCH ? AND rowid >= ? AND rowid < ? ORDER BY rowid DESC LIMIT 1",
            (match, first, first + (1 << SEQ_BITS)),
        )
        return " ".join(str(rows[0][0]).split()) if rows else None


_WORD = re.compile(r"\w+\*?")


def _match_expression(query: str) -> str | None:
    """An FTS5 expression holding every word of ``query`` (None for no word): each
    word quoted, so that nothing the user types is FTS5 syntax."""
    words = _WORD.findall(query)
    if not words:
        return None
    return " AND ".join(f'"{w[:-1]}"*' if w.endswith("*") else f'"{w}"' for w in words)


def _statements(script: str) -> list[str]:
    """The statements of a migration, one by one (a trigger's body holds semicolons)."""
    statements, current = [], ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
