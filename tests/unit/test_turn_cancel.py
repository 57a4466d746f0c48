"""A cancel given while the turn starts, before its prompt is written to the agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from acp_nvim.client.app import App
from tests.unit.memory_agent import MemoryAgent, app_with, watchdog

pytestmark = pytest.mark.anyio


def methods(agent: MemoryAgent) -> list[str]:
    return [m["method"] for m in agent.received if isinstance(m, dict) and "method" in m]


def held_turn_start(
    app: App, monkeypatch: pytest.MonkeyPatch, *, fail: bool = False
) -> tuple[anyio.Event, anyio.Event]:
    """Hold chat 1's first turn start (the review's) from the first event until the
    second is set; then it goes on, or with ``fail`` fails as a scan may."""
    changes = app.chats[1].changes
    assert changes is not None
    begin_turn, starting, release = changes.begin_turn, anyio.Event(), anyio.Event()

    async def held(*args: Any) -> None:
        if not starting.is_set():
            starting.set()
            await release.wait()
            if fail:
                raise OSError("the scan failed")
        await begin_turn(*args)

    monkeypatch.setattr(changes, "begin_turn", held)
    return starting, release


@pytest.mark.parametrize("version", [1, 2])
async def test_a_cancel_during_the_turn_start_reaches_the_agent_after_its_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """The turn shows as running while the review takes its start (the scan); a
    cancel then went to the agent ahead of the prompt, which the agent, idle at the
    cancel, then ran whole while the chat ended the turn and hid it. The cancel now
    follows the prompt."""
    agent = MemoryAgent(version, turns=[[]], end_turns=False)  # holds its turn
    options: dict[str, Any] = {"timeouts": {"cancel": 0.2}}
    async with watchdog(), app_with(agent, str(tmp_path), **options) as (app, editor):
        starting, release = held_turn_start(app, monkeypatch)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(app.send, 1, "go")
                await starting.wait()
                assert app.chats[1].state == "running"
                tasks.start_soon(app.cancel, 1)
                await anyio.wait_all_tasks_blocked()  # the cancel has gone, or waits
                release.set()
            while "session/cancel" not in methods(agent):
                await checkpoint()
        sent = methods(agent)
        assert sent.index("session/prompt") < sent.index("session/cancel")
        assert editor.events[-1] == ("AcpTurnEnd", {"chat": 1, "stop_reason": "cancelled"})


@pytest.mark.parametrize("version", [1, 2])
async def test_a_cancel_waiting_for_a_prompt_that_never_went_leaves_the_next_turn_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """The turn start failed while a cancel waited for its prompt, and a prompt sent
    meanwhile (the chat still showed the turn cancelling) went next: the cancel woke
    to that turn and cancelled it."""
    agent = MemoryAgent(version)  # each turn answers "reply N" and ends
    async with watchdog(), app_with(agent, str(tmp_path)) as (app, editor):
        starting, release = held_turn_start(app, monkeypatch, fail=True)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(app.send, 1, "one")
                await starting.wait()
                tasks.start_soon(app.cancel, 1)
                await anyio.wait_all_tasks_blocked()  # the cancel waits for the prompt
                await app.send(1, "two")  # queued behind the turn
                release.set()
            while ("AcpTurnEnd", {"chat": 1, "stop_reason": "end_turn"}) not in editor.events:
                await checkpoint()
        assert "session/cancel" not in methods(agent)
        assert methods(agent).count("session/prompt") == 1
