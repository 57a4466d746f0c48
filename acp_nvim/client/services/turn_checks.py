"""When one session looks at the disk for what its agent changed there.

At a turn's start :class:`DiskChanges` reads what later checks compare against; as
tool calls complete, the files they name (and the bounded scan) are checked, a burst
of completions merged into a few checks; at the turn's end, every file named during
it. Outside a turn a change on disk is the user's: nothing is checked.

Not here: how a change is found (:class:`DiskChanges`), nor what a check records
(:class:`~acp_nvim.client.services.changes.SessionChanges` hands it in as ``record``
with each call, so that this holds no reference back to the review).
"""

from __future__ import annotations

__all__ = ["Record", "TurnChecks"]

from collections.abc import Awaitable, Callable

import anyio

from acp_nvim.client.services.disk_changes import DiskChanges
from acp_nvim.client.session.model import ToolCall
from acp_nvim.client.tasks import Tasks

# Records what changed on disk among the files named (and what the scan finds); it is
# called with the lock held.
Record = Callable[[dict[str, None]], Awaitable[None]]


class TurnChecks:
    """The disk checks of one session's turns, and whether a turn is open.

    Each check holds the review's ``lock``, so checks, writes and decisions never
    interleave. ``tasks`` runs the checks a completed tool call asks for (the
    review's ``close`` swaps it for one that tells the user of a failure).
    """

    def __init__(self, disk: DiskChanges, tasks: Tasks, lock: anyio.Lock) -> None:
        self.disk = disk
        self.tasks = tasks
        self.open = False  # a turn is under way
        self.begun = 0  # turns begun
        self._lock = lock
        self._queued = False  # a check is queued: completions until it runs join it

    def __repr__(self) -> str:
        return f"<TurnChecks {self.begun} turns{', one open' if self.open else ''}>"

    async def begin_turn(self) -> None:
        """A turn starts: read what its checks compare against (off the event loop:
        :meth:`DiskChanges.begin_turn`). Call with the lock held."""
        await self.disk.begin_turn()
        self.begun += 1
        self.open = True

    def prepare_soon(self) -> None:
        """The session is ready: read what the first turn will compare against now,
        so that its start only asks what changed since (decision 0060)."""
        self.tasks.start_soon(self._prepare)

    async def _prepare(self) -> None:
        # Not under the lock: the agent's first fs/* calls do not wait for the reading
        # (the first turn start does: DiskChanges.begin_turn).
        if self.begun == 0:
            await self.disk.prepare()

    def on_tool_call(self, call: ToolCall, record: Record) -> None:
        """Note the files a tool call names; check the disk once it completes.

        Completions arriving while a check runs are merged into the next one, so a
        burst of them costs a few checks, not one each. Outside a turn (an MCP call,
        or a refusal of one, before the first prompt or between turns) what changed on
        disk is the user's: nothing to check."""
        if self.disk.on_tool_call(call, self.open) and not self._queued:
            self._queued = True
            self.tasks.start_soon(self._check_due, record)

    def turn_ended(self, record: Record) -> None:
        """The turn ended without :meth:`end_turn` awaited (e.g. a v2 state update)."""
        if self.open:
            self.tasks.start_soon(self.end_turn, record)

    async def end_turn(self, record: Record) -> None:
        """Final disk check of the turn (idempotent)."""
        if self.open:
            self.open = False
            await self.check(record)
            self.disk.end_turn()

    async def check(self, record: Record) -> None:
        """Record files changed on disk since they were last seen."""
        async with self._lock:
            await record(self.disk.named)

    async def _check_due(self, record: Record) -> None:
        async with self._lock:
            self._queued = False
            await record(self.disk.take_due())
