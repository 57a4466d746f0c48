"""The small JSON files the client keeps itself (the permission answers, the first
agents' launches): read as an object whatever is there, written whole."""

from __future__ import annotations

__all__ = ["read_object", "write"]

import json
import os
from typing import Any


def read_object(path: str) -> dict[str, Any]:
    """The JSON object in ``path``; {} when the file is missing, unreadable or holds
    anything else."""
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write(path: str, data: Any, **dump: Any) -> None:
    """Write ``data`` (``json.dump`` with ``dump``) to ``path`` whole: into a file of
    this process's beside it, then renamed, so a reader (another Neovim's host, say)
    finds the old file or the new one, never a torn one. The directory is made,
    for this user only, when missing.

    Raises:
        OSError: it cannot be written; nothing is left beside it.
    """
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    partial = f"{path}.{os.getpid()}"
    try:
        with open(partial, "w", encoding="utf-8") as file:
            json.dump(data, file, **dump)
        os.replace(partial, path)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise
