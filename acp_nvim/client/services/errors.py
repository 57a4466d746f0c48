"""The one error a service raises at whoever asked: the agent's adapter translates it."""

from __future__ import annotations

__all__ = ["ServiceError", "ServiceErrorKind"]

from typing import Literal

# invalid: the request itself is wrong; not_found: what it names does not exist;
# denied: the user (or the file's mode) does not allow it; internal: the editor
# could not do it.
ServiceErrorKind = Literal["invalid", "not_found", "denied", "internal"]


class ServiceError(Exception):
    """A request a service refuses or cannot carry out; ``str()`` says why."""

    def __init__(self, message: str, kind: ServiceErrorKind = "invalid") -> None:
        super().__init__(message)
        self.kind: ServiceErrorKind = kind
