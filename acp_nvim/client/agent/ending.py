"""How one start of an agent ends, as the user is told: once its output ends, its
exit code is collected (one that lives on without its output is stopped; one whose
output outlives it, held open by something it started, has its output closed and
the rest of its group stopped), and the failure is said with its code and what it
printed beside the protocol.

It does not decide when an agent that still talks is stopped (the connection
does) nor show anything (the chats do).
"""

from __future__ import annotations

__all__ = ["Ending"]

import anyio

from acp_nvim.client.agent.process import AgentProcess
from acp_nvim.client.errors import AgentFailed
from acp_nvim.protocol import Connection

# Seconds an agent whose output ended gets to exit before it is stopped.
_EXIT_AFTER_EOF = 2.0
# Seconds a report waits for the exit to be collected: the wait above, then
# AgentProcess.aclose's grace of 2 s.
_COLLECTED_WITHIN = 5.0
# Seconds the output of an agent that exited may stay open before it is closed:
# what it wrote before it exited is read meanwhile.
_EOF_AFTER_EXIT = 2.0


class Ending:
    """The end of ``process``: :attr:`exited` is set once it is collected (or stopped)."""

    def __init__(self, name: str, process: AgentProcess) -> None:
        self.name = name
        self.process = process
        self.exited = anyio.Event()

    def __repr__(self) -> str:
        return f"<Ending {self.name} {'exited' if self.exited.is_set() else 'running'}>"

    async def serve(self, connection: Connection) -> None:
        """Serve ``connection`` (this start's) until EOF, then collect the exit."""
        try:
            await connection.serve()
        finally:
            # EOF on stdout: the agent is gone or going; collect its exit code.
            with anyio.move_on_after(_EXIT_AFTER_EOF):
                await self.process.wait()
            if self.process.returncode is None:
                # It closed its output but lives on: it can no longer be talked to.
                self.process.output_closed = True
                await self.process.aclose()
            self.exited.set()

    async def watch(self, connection: Connection) -> None:
        """Collect the exit as soon as it comes (a leader reaped is let go of at once).
        An agent whose output a child of its group holds open is gone all the same:
        the group is stopped and ``connection`` (this start's) closed, as at EOF."""
        await self.process.wait()
        with anyio.move_on_after(_EOF_AFTER_EXIT):
            await self.exited.wait()
            return
        await self.process.aclose()
        await connection.aclose()

    def failure(self, when: str = "") -> AgentFailed:
        """How the agent ended ``when`` ("during the turn"): exited, or stopped by us."""
        code, when = self.process.returncode, f" {when}" if when else ""
        what = f"exited{when}" + (f" (exit code {code})" if code is not None else "")
        if self.process.output_closed:
            what = f"closed its output{when}, so it was stopped"
        return AgentFailed(f"agent {self.name!r} {what}", self.process.printed())

    async def collected_failure(self, when: str = "") -> AgentFailed:
        """:meth:`failure` once the exit is collected (or :data:`_COLLECTED_WITHIN`
        seconds passed): the exit code is known by then."""
        with anyio.move_on_after(_COLLECTED_WITHIN):
            await self.exited.wait()
        return self.failure(when)
