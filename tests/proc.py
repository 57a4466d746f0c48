"""What Linux's /proc says of a process, for the tests of both suites: its state,
parent and process group (``/proc/<pid>/stat``); and a wait for processes to exit."""

from __future__ import annotations

import os
import select
import time
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


def wait_gone(pids: list[int], timeout: float = 10) -> list[int]:
    """Wait for processes to exit (pidfd: woken by the exit itself); returns survivors."""
    deadline = time.monotonic() + timeout
    survivors = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(max(0, deadline - time.monotonic()) * 1000):
                survivors.append(pid)
        finally:
            os.close(fd)
    return survivors
