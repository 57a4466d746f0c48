"""Every fake agent by name: ``python tests/fakes/agent.py NAME`` runs ``SCENARIOS[NAME]``.

A scenario is a `Scenario` record on the shared handshake (tests/fakes/handshake.py):
its capabilities, hooks run before a method is answered, and its turn. To add one,
write its turn (``async def name(agent, prompt)``, returning a stop reason or None)
in the module of its concern and add ``Scenario("name", turn, ...)`` to that
module's ``SCENARIOS``:

- faults.py: agents that hang, flood, crash, speak garbage or ignore a cancel
- session.py: handshake differences (capabilities, settings, history, login, fork)
- tools.py: prompt-scripted files, permissions, tool calls, terminals, questions
- mcp.py: calls to the editor's MCP server
- rewind.py: an agent of its own (sessions, forks at a message, steering) for
  going back; its scenarios differ by the flags in their names
- workspace.py: an agent of its own whose sessions each keep their directory and
  roots (several chats, one process)
"""

from __future__ import annotations

__all__ = ["SCENARIOS"]

from tests.fakes.handshake import Scenario
from tests.fakes.scenarios import faults, mcp, rewind, session, tools, workspace

SCENARIOS: dict[str, Scenario] = {}
for _module in (session, faults, tools, mcp, rewind, workspace):
    for _scenario in _module.SCENARIOS:
        assert _scenario.name not in SCENARIOS, f"two scenarios named {_scenario.name!r}"
        SCENARIOS[_scenario.name] = _scenario
