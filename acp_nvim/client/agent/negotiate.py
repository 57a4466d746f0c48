"""Protocol version negotiation: which :class:`Sessions` implementation a connection gets.

With ``protocol_version = 2`` the client sends a v2 ``initialize``. An agent
that answers 1 only knows v1; it is then restarted and initialized with v1,
because a v1 connection is where our file and terminal capabilities live and
they must be advertised in the *first* ``initialize`` (see
doc/decisions/0004-v2-fallback-restarts-the-agent.md). Any other answer ends
the connection with a message naming both sides' versions. This is the one
place outside the two implementations that knows there are two versions.
"""

from __future__ import annotations

__all__ = ["SUPPORTED", "negotiate"]

from collections.abc import Awaitable, Callable
from typing import Final

import msgspec

from acp_nvim.client.agent import v1
from acp_nvim.client.agent.sessions import Services, Sessions
from acp_nvim.protocol import Connection, default_convert

SUPPORTED: Final = (1, 2)


class _Version(msgspec.Struct):
    protocol_version: object = msgspec.field(default=None, name="protocolVersion")


async def negotiate(
    agent: str,
    offer: int,
    services: Services,
    *,
    connect: Callable[[], Awaitable[Connection]],
    serve: Callable[[Connection], None],
    restart: Callable[[], Awaitable[None]],
) -> Sessions:
    """Initialize a connection in the best version both sides speak.

    ``connect`` spawns the agent (when needed) and returns its connection, not
    yet served; ``serve`` starts reading it, once its handlers are registered;
    ``restart`` ends the agent so that ``connect`` starts it afresh.

    Raises:
        v1.VersionMismatch: the agent speaks neither version.
        RequestError, ConnectionClosed, ProtocolError: as ``Connection.request``
        (a refused or badly shaped ``initialize``).
    """
    if offer == 2:
        # Imported here: the v2 types cost start-up time to every v1 session.
        from acp_nvim.client.agent import v2
        from acp_nvim.protocol import schema_v2

        connection = await connect()
        serve(connection)
        raw = await connection.request("initialize", v2.initialize_request())
        version = default_convert(raw, _Version).protocol_version
        if version == 2:
            init = schema_v2.decode(raw, schema_v2.InitializeResponse)
            return v2.SessionsV2(connection, init, services)
        if version != 1:
            raise v1.VersionMismatch(agent, version, SUPPORTED)
        await restart()
    connection = await connect()
    sessions = v1.SessionsV1(connection, services)
    serve(connection)
    await sessions.initialize(agent)
    return sessions
