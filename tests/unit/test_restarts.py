""":AcpRestart asked again and again while the agent's start hangs: each ask settles,
the chat starts once, on one agent, in one session."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.unit.conftest import wait_for
from tests.unit.memory_agent import MemoryAgent, app_with, watchdog

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_tracebacks")]


async def test_two_restarts_while_the_start_hangs_settle_and_start_the_chat_once(
    tmp_path: Path,
) -> None:
    """The second took over the first's wait for the hung start to end: the first
    waited for ever (or, later, both began a session, the first left behind)."""
    agent = MemoryAgent()
    async with watchdog(), app_with(agent, str(tmp_path)) as (app, editor):
        agent.overrides["session/new"] = []  # the next start hangs on its session
        async with anyio.create_task_group() as hung:
            hung.start_soon(app.restart, 1)
            # Until the new process was asked its session.
            await wait_for(lambda: "session/new" not in agent.overrides, 5)
            with anyio.fail_after(5):
                async with anyio.create_task_group() as asked:
                    asked.start_soon(app.restart, 1)
                    asked.start_soon(app.restart, 1)
        assert app.chats[1].state == "ready"
        assert agent.sessions == 1  # of the process running now
        ready = [data for name, data in editor.events if name == "AcpSessionReady"]
        assert len(ready) == 2  # the first open's, and the restart's
