"""Reads of the history file on the calling thread: the search, the export, what the
session picker and a resume ask of it.

A search is Neovim's request, answered on a thread of the host's own (not the one
taking Neovim's messages) without waiting for the worker's loop: each thread reads
through a connection of its own. Every read first
waits for the writer to write what it was handed before (a chat closed just now: its
last changes), a bounded wait on the reading thread.
"""

from __future__ import annotations

__all__ = ["Reader"]

import os
import threading
from collections.abc import Callable
from typing import Any

from acp_nvim.client.history._branches import branches_of, in_view
from acp_nvim.client.history._store import ChatRow, Store, StoredBlock, StoreError

# Milliseconds a read waits for another Neovim's write (Neovim waits for a search).
_READ_BUSY_MS = 250


class Reader:
    """The history file as the calling thread reads it (``path``: where it is now,
    None before setup(); ``written``: returns once the writer has written what it was
    handed by now; ``first``: run on the connection before a read, the history's
    expiry)."""

    def __init__(
        self,
        path: Callable[[], str | None],
        written: Callable[[], object],
        first: Callable[[Store], object],
    ) -> None:
        self._path = path
        self._written = written
        self._first = first
        self._stores = threading.local()

    def __repr__(self) -> str:
        return f"<Reader {self._path()}>"

    def store(self) -> Store:
        """This thread's connection to the file, once what the writer was handed by
        now is in it: a read through it sees every change made before it was asked.

        A file this user cannot write is read all the same (the writer tells
        that nothing is kept).

        Raises:
            StoreError: the history has no file yet, or it cannot be read.
        """
        self._written()
        path = self._path()
        if path is None:
            raise StoreError("the history has no file yet (setup() was not called)")
        store: Store | None = getattr(self._stores, "store", None)
        # A file moved away (a damaged one, as told) is read no more: the one there now.
        if store is None or store.path != path or store.moved():
            if store is not None:
                store.close()
            store = self._stores.store = _open(path)
        try:
            self._first(store)
        except StoreError as err:  # the expiry deletes: not in a file read only
            if not err.read_only:
                raise
        return store

    def read(self, history_id: int) -> tuple[ChatRow, list[StoredBlock]] | None:
        """A stored chat and its transcript; None when there is no such chat.
        Raises StoreError."""
        store = self.store()
        row = store.chat(history_id)
        return None if row is None else (row, store.blocks(history_id))

    def session_turns(self, agent: str) -> dict[str, int]:
        """The turns of ``agent``'s sessions the history knows, by session id, for
        the session picker: each branch's, in the session its last turn ran in (a
        chat a rewind branched holds more turns than any of its sessions); none when
        the history cannot be read (a picker shows less, no error)."""
        try:
            hits = self.store().search(agent=agent, limit=1000)
        except StoreError:
            return {}
        turns: dict[str, int] = {}
        for hit in hits:
            branches, _ = branches_of(hit.chat.branches, [])
            for branch in branches:
                if branch.session_id and branch.nodes:
                    turns.setdefault(branch.session_id, len(branch.nodes))
            if hit.chat.session_id:  # a chat kept before branches were
                turns.setdefault(hit.chat.session_id, hit.chat.turns)
        return turns

    def went_on_in(self, agent: str, session_id: str) -> list[int]:
        """The stored chats that went on in ``agent``'s session ``session_id``, the
        newest first. Raises StoreError."""
        hits = self.store().search(agent=agent, limit=1000)
        return [hit.chat.id for hit in hits if session_id in (hit.chat.branches or "")]

    def search(
        self,
        query: str | None = None,
        agent: str | None = None,
        cwd: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """``require("acp").history()``: stored chats newest first, as plain tables;
        ``cwd`` (absolute) the directory as given or through its symlinks, as a chat
        stores it (opened there, or in Neovim's resolved directory).

        Raises:
            StoreError: the file cannot be read.
        """
        cwds = () if cwd is None else {cwd, os.path.realpath(cwd)}
        hits = self.store().search(query, agent=agent, cwd=cwds, limit=limit)
        return [
            {
                "id": hit.chat.id,
                "title": hit.chat.name or hit.chat.title or f"chat {hit.chat.id}",
                "agent": hit.chat.agent,
                "cwd": hit.chat.cwd,
                "created_at": hit.chat.created_at,
                "updated_at": hit.chat.updated_at,
                "turns": _turns_shown(hit.chat),
                "snippet": hit.snippet,
            }
            for hit in hits
        ]

    def export(self, history_id: int) -> str | None:
        """A stored chat as Markdown, the branch it showed (None: no such chat).
        Raises StoreError."""
        from acp_nvim.client.history._blocks import markdown

        found = self.read(history_id)
        if found is None:
            return None
        row, blocks = found
        _, shown = branches_of(row.branches, blocks)
        return markdown(row, in_view(shown, blocks))


def _turns_shown(chat: ChatRow) -> int:
    """The turns of the branch a stored chat shows (what reopening or exporting it
    reads); ``ChatRow.turns`` counts every branch's, the next turn's number."""
    if chat.branches is None:  # no turn yet, or kept before branches were
        return chat.turns
    _, shown = branches_of(chat.branches, [])
    return len(shown.nodes)


def _open(path: str) -> Store:
    """A connection to ``path`` that reads (and writes, where it can)."""
    try:
        return Store(path, busy_ms=_READ_BUSY_MS)
    except StoreError as err:
        if not err.read_only:
            raise
    return Store(path, busy_ms=_READ_BUSY_MS, read_only=True)
