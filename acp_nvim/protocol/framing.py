"""Newline-delimited framing of the stdio transport, with a byte cap per line."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_LINE", "LineReader", "encode_line", "lines_of"]

import anyio
from anyio.abc import ByteReceiveStream

from .errors import ConnectionClosed, LineTooLong
from .streams import STREAM_GONE

DEFAULT_MAX_LINE = 64 * 1024 * 1024
_CHUNK = 65536


class LineReader:
    """Reads `\\n`-terminated lines from a byte stream.

    Lines come back without the `\\n` and without a trailing `\\r`; empty lines are
    skipped. A line longer than `max_line` is discarded chunk by chunk as it arrives
    (memory stays bounded by `max_line` plus one chunk) and `LineTooLong` is raised
    once its end is reached, so the caller can log it and read on. At EOF a final
    unterminated line is returned first, then `ConnectionClosed` is raised.
    """

    def __init__(self, stream: ByteReceiveStream, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._stream = stream
        self._max_line = max_line
        self._buf = bytearray()
        # Bytes of _buf already searched for b"\n": each byte is scanned once, so a
        # 50 MB line costs O(n), not O(n^2).
        self._scanned = 0
        self._eof = False
        # A block holds no more than this after its first line: within one read,
        # and no line in it too long.
        self._block_max = min(_CHUNK, max_line)

    def __repr__(self) -> str:
        return f"<LineReader {len(self._buf)} bytes buffered{', eof' if self._eof else ''}>"

    async def receive_line(self) -> bytes:
        while True:
            line = self._complete_line()
            if line is not None:
                return line
            if self._eof:
                raise ConnectionClosed("end of stream")
            if len(self._buf) > self._max_line:
                await self._skip_long_line()
            self._scanned = len(self._buf)
            chunk = await self._receive()
            if chunk is None:
                self._eof = True
            else:
                self._buf += chunk

    async def receive_block(self) -> bytes:
        """The next line and every further complete line already buffered (one
        read's worth), as they came: ``b"\\n"`` between lines, which may be empty or
        end in ``\\r`` (`lines_of` gives the lines). msgspec's ``decode_lines`` takes
        such a block whole: a stream's read is neither split nor joined in Python.

        A line past one read's size comes alone, as `receive_line` gives it (not
        copied once more), and so does the line before more than that or than
        ``max_line``: the next calls take those lines one by one, a too-long one
        raising `LineTooLong` then, the lines before it not lost.
        """
        first = await self.receive_line()
        buf = self._buf
        end = buf.rfind(b"\n")
        if end < 0 or end > self._block_max or len(first) > _CHUNK:
            return first
        with memoryview(buf) as view:
            block = b"".join((first, b"\n", view[:end]))
        del buf[: end + 1]
        self._scanned = 0
        return block

    def _complete_line(self) -> bytes | None:
        """The next non-empty complete line in the buffer, or None (also at EOF: the
        unterminated rest). Raises `LineTooLong` (the line is dropped)."""
        buf = self._buf
        while True:
            nl = buf.find(b"\n", self._scanned)
            if nl < 0:
                if self._eof and buf:
                    # The last line had no terminator; still a message.
                    return self._take(len(buf), len(buf)) or None
                return None
            self._scanned = 0
            if nl > self._max_line:
                del buf[: nl + 1]
                raise LineTooLong(nl, self._max_line)
            line = self._take(nl, nl + 1)
            if line:
                return line

    def _take(self, end: int, consumed: int) -> bytes:
        """Return buf[:end] (minus a trailing \\r) as bytes and drop `consumed` bytes."""
        if end and self._buf[end - 1] == 0x0D:  # CRLF
            end -= 1
        with memoryview(self._buf) as view:
            line = view[:end].tobytes()  # one copy, even for a 50 MB line
        # Deleting from the front of a bytearray is O(1) in CPython (it moves a start
        # offset), so many small lines in one chunk stay cheap.
        del self._buf[:consumed]
        return line

    async def _skip_long_line(self) -> None:
        size = len(self._buf)
        self._buf.clear()
        self._scanned = 0
        while True:
            chunk = await self._receive()
            if chunk is None:
                self._eof = True
                raise LineTooLong(size, self._max_line)
            nl = chunk.find(b"\n")
            if nl >= 0:
                self._buf += chunk[nl + 1 :]
                raise LineTooLong(size + nl, self._max_line)
            size += len(chunk)

    async def _receive(self) -> bytes | None:
        """One chunk, or None at EOF. Stream failures become ConnectionClosed."""
        try:
            chunk = await self._stream.receive(_CHUNK)
        except anyio.EndOfStream:
            return None
        except STREAM_GONE as exc:
            raise ConnectionClosed(f"read failed: {exc!r}") from exc
        # A well-behaved stream raises EndOfStream, but b"" must not spin forever.
        return chunk or None


def lines_of(block: bytes) -> list[bytes]:
    """The lines of a `LineReader.receive_block` block: without ``\\r``, none empty."""
    if b"\n" not in block:  # one line (a big one is not copied again)
        return [block] if block else []
    lines = block.split(b"\n")
    if b"\r" in block:
        lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    return list(filter(None, lines))


def encode_line(payload: bytes) -> bytes:
    """Frame one encoded JSON message for the wire."""
    # msgspec escapes newlines inside strings and never pretty-prints, so a raw
    # newline here would be a bug of ours that corrupts the stream.
    assert b"\n" not in payload, "JSON message contains a raw newline"
    return payload + b"\n"
