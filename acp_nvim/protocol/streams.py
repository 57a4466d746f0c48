"""Byte streams with their end, break and close said in our terms.

anyio streams end with ``EndOfStream`` and fail with ``BrokenResourceError``,
``ClosedResourceError`` or an ``OSError``; code above `protocol/` that reads or
writes a raw stream (an agent's stderr, the editor MCP socket's hello) goes
through these instead of catching them. Lines and JSON-RPC are `framing` and
`connection`, which use the same translation.
"""

from __future__ import annotations

__all__ = ["STREAM_GONE", "receive", "send"]

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from .errors import ConnectionClosed

# What a broken or closed byte stream raises.
STREAM_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


async def receive(stream: ByteReceiveStream, max_bytes: int = 65536) -> bytes:
    """The next bytes of ``stream``, at most ``max_bytes``; ``b""`` once it ended,
    broke or was closed."""
    try:
        return await stream.receive(max_bytes)
    except (anyio.EndOfStream, *STREAM_GONE):
        return b""


async def send(stream: ByteSendStream, data: bytes) -> None:
    """Send ``data``.

    Raises:
        ConnectionClosed: the stream broke or was closed.
    """
    try:
        await stream.send(data)
    except STREAM_GONE as exc:
        raise ConnectionClosed(f"write failed: {exc!r}") from None
