"""Errors the client reports to the user, importable without the protocol stack."""

from __future__ import annotations

__all__ = ["NO_AGENT", "STARTING", "AgentFailed", "Refused"]

# What a command asking a chat's agent says of a chat without one: a chat reopened
# from the history before its first prompt, one whose start failed or whose agent
# exited. Lua, which refuses some of them before asking, has them from
# lua/acp/defaults.lua (scripts/gen_defaults.py).
NO_AGENT = "the chat has no running agent (a prompt or :AcpRestart starts it)"
# ... and of a chat whose agent has not answered yet: what it offers is not known.
STARTING = "the chat's agent is still starting: try again once it is ready"


class AgentFailed(Exception):
    """The agent could not be started or initialized; ``details`` has its stderr tail,
    ``code`` the JSON-RPC error code when the agent refused a request."""

    # The agent's answer when it needs a login first (RequestError.AUTH_REQUIRED).
    AUTH_REQUIRED = -32000

    def __init__(
        self, message: str, details: list[str] | None = None, code: int | None = None
    ) -> None:
        super().__init__(message)
        self.details = details or []
        self.code = code


class Refused(AgentFailed):
    """The agent, running, answered a request with an error or does not offer it:
    what was asked cannot be, the agent itself is fine."""
