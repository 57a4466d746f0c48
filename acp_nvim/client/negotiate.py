"""Protocol version negotiation: offer v2, fall back to v1, refuse anything else.

With ``protocol_version = 2`` the client sends a v2 ``initialize``. An agent
that answers 1 only knows v1; the caller then restarts it and initializes with
v1, because a v1 connection is where our file and terminal capabilities live
and they must be advertised in the *first* ``initialize`` (see
doc/decisions/0004-v2-fallback-restarts-the-agent.md). Any other answer ends
the connection with a message naming both sides' versions.
"""

from __future__ import annotations

__all__ = ["SUPPORTED", "Fallback", "VersionMismatch", "offer_v2"]

from typing import Final

import msgspec

from acp_nvim.client import adapter_v2
from acp_nvim.protocol import Connection
from acp_nvim.protocol import schema_v2 as v2

SUPPORTED: Final = (1, 2)


class Fallback(Exception):
    """The agent answered a v2 offer with version 1: restart it and speak v1."""


class VersionMismatch(Exception):
    """The agent speaks a version we do not; ``str()`` names both sides' versions."""

    def __init__(self, agent: str, version: object, offered: tuple[int, ...]) -> None:
        ours = " and ".join(str(v) for v in offered)
        plural = "s" if len(offered) > 1 else ""
        super().__init__(
            f"agent {agent!r} speaks ACP version {version}; acp.nvim speaks version{plural} {ours}"
        )


class _Version(msgspec.Struct):
    protocol_version: object = msgspec.field(default=None, name="protocolVersion")


async def offer_v2(connection: Connection, agent: str) -> v2.InitializeResponse:
    """Send a v2 ``initialize`` and read the version the agent chose first.

    Raises:
        Fallback: the agent answered 1.
        VersionMismatch: the agent answered anything but 1 or 2.
        RequestError, ConnectionClosed, msgspec errors: as ``Connection.request``.
    """
    raw = await connection.request("initialize", adapter_v2.initialize_request())
    version = msgspec.json.decode(raw, type=_Version).protocol_version
    if version == 1:
        raise Fallback
    if version != 2:
        raise VersionMismatch(agent, version, SUPPORTED)
    return v2.decode(raw, v2.InitializeResponse)
