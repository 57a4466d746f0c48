"""A real full disk (or a read-only one) for the tests: a small tmpfs, mounted where
root may mount one.

Both suites use it (``tests/unit``, ``tests/nvim``): a test asks for a directory on
a file system with a few kilobytes left, and skips, saying why, where none can be
mounted (not root, no mount(8), a container that forbids it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def fill(directory: Path, room: int = 8192) -> None:
    """Fill the file system of ``directory`` but ``room`` bytes (or add to its filler)."""
    with open(directory / ".filler", "ab") as filler:
        free = os.statvfs(directory)
        filler.write(b"\0" * max(0, free.f_bavail * free.f_frsize - room))


@contextmanager
def small_disk(directory: Path) -> Iterator[Path]:
    """Mount a 256 kB tmpfs on ``directory`` (made); :func:`fill` fills it."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk needs root to mount a small tmpfs")
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0777", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def read_only(directory: Path, read_only: bool = True) -> None:
    """Make the tmpfs :func:`small_disk` mounted on ``directory`` read-only (or
    writable again): a directory even root cannot write in."""
    mode = "remount,ro" if read_only else "remount,rw"
    subprocess.run(["mount", "-o", mode, str(directory)], check=True)
