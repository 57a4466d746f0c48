"""Byte streams over this process's stdin/stdout, for agent-side programs.

The demo agent and the test fakes speak ACP on their own stdio. Reads go
through an unbuffered file so a read returns whatever the pipe holds (a
buffered read of 64 KiB would wait for 64 KiB, stalling a stream of small
messages).
"""

from __future__ import annotations

__all__ = ["stdio_streams"]

import os

from anyio.streams.file import FileReadStream, FileWriteStream


def stdio_streams() -> tuple[FileReadStream, FileWriteStream]:
    """(receive, send) streams for fd 0 and fd 1."""
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    stdout = os.fdopen(os.dup(1), "wb", buffering=0)
    return FileReadStream(stdin), FileWriteStream(stdout)
