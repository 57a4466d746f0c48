"""Errors the client reports to the user, importable without the protocol stack."""

from __future__ import annotations

__all__ = ["AgentFailed"]


class AgentFailed(Exception):
    """The agent could not be started or initialized; ``details`` has its stderr tail."""

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or []
