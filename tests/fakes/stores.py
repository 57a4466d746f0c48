"""History files as an older acp.nvim left them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from acp_nvim.client.history import _store


def schema_3(path: Path, chats: dict[int, list[str]]) -> None:
    """A store of schema 3 (its index unfolded) holding ``chats``: their prompts by id."""
    old = sqlite3.connect(path, isolation_level=None)
    for script in _store._MIGRATIONS[:3]:
        for statement in _store._statements(script):
            old.execute(statement)
    old.execute("PRAGMA user_version = 3")
    old.execute("BEGIN")
    for chat_id, prompts in chats.items():
        old.execute(
            "INSERT INTO chats(id, agent, cwd, created_at, updated_at) VALUES (?, 'demo', '/p', 0, 0)",
            (chat_id,),
        )
        old.executemany(
            "INSERT INTO blocks(id, key, turn, kind, text) VALUES (?, ?, 1, 'user', ?)",
            [(chat_id << _store.SEQ_BITS | seq, f"k{seq}", text) for seq, text in enumerate(prompts)],
        )
    old.execute("COMMIT")
    old.close()
