"""The chat history: every chat kept in a local SQLite file, searched, reopened,
exported and handed over (issue 24, decision 0043).

Does not keep: image bytes, a tool call's raw input, login values (see _blocks).
"""

from __future__ import annotations

__all__ = [
    "FLUSH_SECONDS",
    "History",
    "Store",
    "StoreError",
    "StoredBlock",
    "show_kept_session",
    "steered_into",
]

from acp_nvim.client.history._history import FLUSH_SECONDS, History, show_kept_session, steered_into
from acp_nvim.client.history._store import Store, StoredBlock, StoreError
