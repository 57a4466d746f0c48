"""The stored chats of the history benchmark: built once per size, kept in the
system's temp directory (``acp-bench-history-CHATSxTURNS.sqlite3``) for the next run.

Words come from a 5,000-word vocabulary drawn with Zipf weights (a few words are in
most chats, most words in few), seeded: every run searches the same store.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import tempfile
from pathlib import Path

from acp_nvim.client.history import Store, StoredBlock
from acp_nvim.client.history._branches import StoredBranch, encode
from acp_nvim.client.history._store import VERSION

VOCABULARY = 5000
# The chat reopened by the benchmark: this many blocks, a tool call with a diff in each turn.
LONG_BLOCKS = 2000


def words(seed: int = 24) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(VOCABULARY)]


def build(chats: int, turns: int) -> tuple[Path, int]:
    """The store's path, and the id of its long chat (built when missing)."""
    name = f"acp-bench-history-{chats}x{turns}-v{VERSION}.sqlite3"  # (a layout of its own)
    path = Path(tempfile.gettempdir()) / name
    marker = path.with_suffix(".json")
    if marker.exists() and path.exists():
        return path, int(json.loads(marker.read_text())["long"])
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    vocabulary = words()
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(VOCABULARY)))
    rng = random.Random(20)
    store = Store(str(path))

    def said(count: int) -> str:
        return " ".join(rng.choices(vocabulary, cum_weights=cumulative, k=count))

    for _ in range(chats):
        chat = store.new_chat("bench", "/project")
        blocks = []
        for turn in range(1, turns + 1):
            blocks.append(StoredBlock(len(blocks), f"u{turn}", turn, "user", said(8), node=turn))
            blocks.append(StoredBlock(len(blocks), f"a{turn}", turn, "agent", said(30), node=turn))
        store.write(chat, blocks, {"turns": turns, "title": said(4), "branches": _one(turns)})
    long = store.new_chat("bench", "/project")
    blocks, turn = [], 0
    while len(blocks) < LONG_BLOCKS:
        turn += 1
        old = "\n".join(said(6) for _ in range(10)) + "\n"
        new = old.replace(vocabulary[0], "changed", 1) + said(6) + "\n"
        part = {"type": "diff", "path": f"/project/f{turn}.py", "old": old, "new": new}
        tool = json.dumps({"kind": "edit", "status": "completed", "content": [part]})
        end = json.dumps({"stop_reason": "end_turn", "usage": {}})
        seq = len(blocks)
        blocks += [
            StoredBlock(seq, f"u{turn}", turn, "user", said(8), node=turn),
            StoredBlock(seq + 1, f"a{turn}", turn, "agent", said(40), node=turn),
            StoredBlock(seq + 2, f"t{turn}", turn, "tool", f"Edit f{turn}.py", tool, node=turn),
            StoredBlock(seq + 3, f"e{turn}", turn, "turn", "*— end_turn —*", end, node=turn),
        ]
    store.write(long, blocks, {"turns": turn, "title": "the long chat", "branches": _one(turn)})
    store._run("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    marker.write_text(json.dumps({"long": long}))
    return path, long


def _one(turns: int) -> str:
    """The branches of a chat never rewound, as the history keeps them."""
    session = "0b4e3c1a-5d2f-4f6e-9a7b-8c9d0e1f2a3b"  # as long as a UUID
    return encode([StoredBranch(1, list(range(1, turns + 1)), session)], 1)


def text_bytes(path: Path) -> int:
    """The bytes of text the store holds (every block's words and data)."""
    store = Store(str(path))
    try:
        [(size,)] = store._run(
            "SELECT sum(length(CAST(text AS BLOB))) + sum(coalesce(length(CAST(data AS BLOB)), 0)) "
            "FROM blocks"
        )
        return int(size)
    finally:
        store.close()


def file_bytes(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())
