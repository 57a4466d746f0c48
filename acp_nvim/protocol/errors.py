"""Exceptions of the protocol layer.

    AcpError                  base of everything raised by acp_nvim.protocol
    ├── ConnectionClosed      the peer went away (EOF, broken pipe) or we closed;
    │                         pending requests fail with it, later calls raise it
    ├── ProtocolError         the peer sent something malformed: no JSON-RPC, or a
    │   │                     value that does not decode into its type (`decode`,
    │   │                     `convert`, `default_convert`; the message names its path)
    │   └── LineTooLong       a line exceeded the byte cap; it was skipped
    └── RequestError          a JSON-RPC error object: raised by `Connection.request()`
                              when the peer answers with an error, and raised by our
                              handlers to answer with one

Foreign exceptions (anyio, OSError, msgspec) of the wire are translated into these
once, at the edge (framing, streams, connection, the decoders of `unknown`); nothing
above `protocol/` catches the foreign ones (tests/unit/test_layout.py holds it).
"""

from __future__ import annotations

__all__ = [
    "AcpError",
    "ConnectionClosed",
    "LineTooLong",
    "ProtocolError",
    "RequestError",
]

from typing import Any


class AcpError(Exception):
    """Base class of all protocol-layer errors."""


class ConnectionClosed(AcpError):
    """The connection is gone: peer EOF, broken pipe, or closed locally."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"connection closed: {self.reason}" if self.reason else "connection closed"


class ProtocolError(AcpError):
    """The peer sent something that is not valid ACP / JSON-RPC."""


class LineTooLong(ProtocolError):
    """A line longer than the cap arrived; its bytes were discarded, not buffered."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(size, limit)
        self.size = size
        self.limit = limit

    def __str__(self) -> str:
        return f"line of {self.size} bytes exceeds the {self.limit}-byte limit; skipped"


# The most of an error's detail a message carries (a stack trace has more lines).
_DETAIL = 300


class RequestError(AcpError):
    """A JSON-RPC error: `code`, `message` and optional `data`."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        detail = self.detail
        if detail and detail not in self.message:
            return f"{self.code} {self.message}: {detail}"
        return f"{self.code} {self.message}"

    def __repr__(self) -> str:
        return f"RequestError({self.code}, {self.message!r}, {self.data!r})"

    @property
    def detail(self) -> str | None:
        """What ``data`` tells a person beside ``message``: the text itself, or the
        ``details`` the ACP SDKs put there for an internal error (an agent's
        "-32603 Internal error" says its real cause only there); its first line, at
        most :data:`_DETAIL` characters."""
        data = self.data.get("details") if isinstance(self.data, dict) else self.data
        if not isinstance(data, str) or not data.strip():
            return None
        line = data.strip().split("\n", 1)[0]
        return line if len(line) <= _DETAIL else line[: _DETAIL - 1] + "…"

    # The detail goes into `message` (so logs and `str()` say what failed) and, where
    # it is a name, into `data` too (so a program can read it without parsing).

    @classmethod
    def parse_error(cls, detail: str | None = None) -> RequestError:
        return cls(cls.PARSE_ERROR, _join("Parse error", detail))

    @classmethod
    def invalid_request(cls, detail: str | None = None) -> RequestError:
        return cls(cls.INVALID_REQUEST, _join("Invalid request", detail))

    @classmethod
    def method_not_found(cls, method: str) -> RequestError:
        return cls(cls.METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})

    @classmethod
    def invalid_params(cls, detail: str | None = None) -> RequestError:
        return cls(cls.INVALID_PARAMS, _join("Invalid params", detail))

    @classmethod
    def internal(cls, detail: str | None = None) -> RequestError:
        return cls(cls.INTERNAL_ERROR, _join("Internal error", detail))

    @classmethod
    def cancelled(cls) -> RequestError:
        return cls(cls.REQUEST_CANCELLED, "Request cancelled")

    @classmethod
    def auth_required(cls, detail: str | None = None) -> RequestError:
        return cls(cls.AUTH_REQUIRED, _join("Authentication required", detail))

    @classmethod
    def resource_not_found(cls, uri: str | None = None) -> RequestError:
        return cls(
            cls.RESOURCE_NOT_FOUND,
            _join("Resource not found", uri),
            None if uri is None else {"uri": uri},
        )


def _join(title: str, detail: str | None) -> str:
    return f"{title}: {detail}" if detail else title
