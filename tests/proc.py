"""What Linux's /proc says of a process, for the tests of both suites: its state,
parent and process group (``/proc/<pid>/stat``)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Stat(NamedTuple):
    state: str  # R, S, Z, ...
    parent: int
    group: int


def stat(pid: int | str) -> Stat | None:
    """The process's state, parent and group; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Its name, in parentheses, may hold spaces and parentheses: the fields follow the last ")".
    fields = text.rsplit(")", 1)[1].split()
    return Stat(fields[0], int(fields[1]), int(fields[2]))


def alive(pid: int) -> bool:
    """The process runs (it is not gone, nor a zombie)."""
    found = stat(pid)
    return found is not None and found.state != "Z"
