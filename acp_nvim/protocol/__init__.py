"""JSON-RPC 2.0 over newline-delimited JSON: framing, errors, and the `Connection` peer."""

from __future__ import annotations

__all__ = [
    "CANCEL_REQUEST_METHOD",
    "DEFAULT_MAX_LINE",
    "AcpError",
    "Connection",
    "ConnectionClosed",
    "Convert",
    "LineReader",
    "LineTooLong",
    "OnSent",
    "ProtocolError",
    "RequestError",
    "default_convert",
    "encode_line",
]

from .connection import CANCEL_REQUEST_METHOD, Connection, Convert, OnSent, default_convert
from .errors import AcpError, ConnectionClosed, LineTooLong, ProtocolError, RequestError
from .framing import DEFAULT_MAX_LINE, LineReader, encode_line
