"""Tasks that cannot take the worker down.

The worker runs all work in one task group: an exception escaping any task would
cancel the group, and with it every chat and agent. :class:`Tasks` starts work
in that group behind a barrier: a failure is logged with its traceback and
handed to ``report`` (a chat shows it as an error), and everything else goes on.
The barrier is for bugs; expected failures are handled where they happen.
"""

from __future__ import annotations

__all__ = ["Report", "Tasks", "internal_error"]

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.abc

log = logging.getLogger("acp_nvim")

# Told what failed, e.g. "internal error while checking the disk: KeyError('x')".
Report = Callable[[str], None]


def internal_error(what: str, err: BaseException) -> str:
    """Log ``err`` with its traceback; returns the one line a user is shown."""
    log.error("internal error while %s", what, exc_info=err)
    return f"internal error while {what}: {err!r}"


def _log_only(message: str) -> None:
    pass


class Tasks:
    """Starts tasks in ``group``; one that raises is reported, not propagated.

    Example::

        tasks = Tasks(group).reporting_to(chat.internal_error)
        tasks.start_soon(review.check)
    """

    def __init__(self, group: anyio.abc.TaskGroup, report: Report = _log_only) -> None:
        self.group = group
        self._report = report

    def __repr__(self) -> str:
        return f"<Tasks of {self.group!r}>"

    def reporting_to(self, report: Report) -> Tasks:
        """The same group, with failures told to ``report`` (e.g. one chat's)."""
        return Tasks(self.group, report)

    def start_soon(self, func: Callable[..., Awaitable[Any]], *args: Any) -> None:
        what = getattr(func, "__name__", repr(func)).strip("_").replace("_", " ")

        async def guarded() -> None:
            try:
                await func(*args)
            except Exception as err:
                self._report(internal_error(what, err))

        self.group.start_soon(guarded, name=what)
