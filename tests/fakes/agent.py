"""Scripted ACP agents for the tests: ``python tests/fakes/agent.py SCENARIO``.

Each scenario is a small misbehaviour or a fixed script on a shared handshake;
tests/fakes/scenarios/__init__.py lists where they live and how to add one. The
fake exits with code 97 if nobody talks to it for 60 s, so a broken test never
leaves it behind.
"""

from __future__ import annotations

import os
import sys

import anyio

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from acp_nvim.protocol import Connection
from acp_nvim.protocol.stdio import stdio_streams
from tests.fakes.handshake import Agent, Scenario
from tests.fakes.scenarios import SCENARIOS

IDLE_EXIT = 97


async def main(scenario: Scenario) -> None:
    receive, send = stdio_streams()
    connection = Connection(receive, send, name="fake")
    with anyio.move_on_after(60):
        async with anyio.create_task_group() as tasks:
            (scenario.agent or Agent)(connection, send, scenario, tasks)
            await connection.serve()
            if scenario.stays:
                await anyio.sleep(300)  # stdin closed: a stubborn agent stays anyway
            tasks.cancel_scope.cancel()
        return
    sys.exit(IDLE_EXIT)


def login_tui() -> None:
    """The interactive login of the "auth" scenario: a line typed in the terminal."""
    print("Press Enter to log in", flush=True)
    sys.stdin.readline()
    with open(os.environ["FAKE_AUTH_MARKER"], "w") as f:
        f.write("logged in\n")
    print("Logged in.", flush=True)


if __name__ == "__main__":
    if "login-tui" in sys.argv and os.environ.get("FAKE_TUI") == "1":
        login_tui()
    else:
        name = sys.argv[1] if len(sys.argv) > 1 else "echo"
        if name not in SCENARIOS:
            sys.exit(f"fake agent: no scenario {name!r} (tests/fakes/scenarios/)")
        anyio.run(main, SCENARIOS[name])
