"""Permission answers the user gave "always", kept across restarts: by project (the
chat's directory), agent and tool kind, in one small JSON file under Neovim's
stdpath("state") (decision 0047). Listed and revoked with ``:AcpPermission list``
and ``:AcpPermission forget``."""

from __future__ import annotations

__all__ = ["Grant", "Grants"]

import os
from typing import Any, TypedDict

from acp_nvim.client import json_file


class Grant(TypedDict):
    """One remembered answer, as ``:AcpPermission list`` shows it."""

    project: str
    agent: str
    kind: str  # the tool kind (edit, execute...)
    answer: str  # allow_always | reject_always


class Grants:
    """The remembered answers; a file read once, written whole at each change."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._by_project: dict[str, dict[str, dict[str, str]]] | None = None

    def __repr__(self) -> str:
        return f"<Grants {self.path} {len(self.entries())}>"

    def configure(self, state_dir: str | None) -> None:
        if state_dir and self.path is None:
            self.path = os.path.join(state_dir, "acp", "permissions.json")

    def answer(self, project: str, agent: str, kind: str) -> str | None:
        """The answer remembered for ``kind`` tool calls of ``agent`` in ``project``."""
        return self._load().get(project, {}).get(agent, {}).get(kind)

    def remember(self, project: str, agent: str, kind: str, answer: str) -> None:
        self._load().setdefault(project, {}).setdefault(agent, {})[kind] = answer
        self._save()

    def entries(self) -> list[Grant]:
        return [
            Grant(project=project, agent=agent, kind=kind, answer=answer)
            for project, agents in sorted(self._load().items())
            for agent, kinds in sorted(agents.items())
            for kind, answer in sorted(kinds.items())
        ]

    def request(self, forget: Any = None) -> list[Grant]:
        """``:AcpPermission list|forget`` (from Lua): revoke ``forget`` (a grant as
        :meth:`entries` gives it) when given, then the answers remembered."""
        if isinstance(forget, dict):
            grant = {key: str(forget.get(key)) for key in ("project", "agent", "kind")}
            self.forget(grant["project"], grant["agent"], grant["kind"])
        return self.entries()

    def forget(self, project: str, agent: str, kind: str) -> bool:
        """Revoke one answer; False when there was none."""
        agents = self._load().get(project, {})
        if agents.get(agent, {}).pop(kind, None) is None:
            return False
        if not agents[agent]:
            del agents[agent]
        if not agents:
            del self._load()[project]
        self._save()
        return True

    def _load(self) -> dict[str, dict[str, dict[str, str]]]:
        if self._by_project is None:
            self._by_project = _read(self.path)
        return self._by_project

    def _save(self) -> None:
        if self.path is None:
            return  # no state directory (tests, a bare App): kept for this run only
        json_file.write(self.path, self._by_project, indent=1, sort_keys=True)


def _read(path: str | None) -> dict[str, dict[str, dict[str, str]]]:
    """The file's answers; a missing or unreadable file holds none (answers are asked
    again, never taken from a file we do not understand)."""
    if path is None:
        return {}
    data = json_file.read_object(path)
    return {
        project: {
            agent: {k: a for k, a in kinds.items() if isinstance(a, str)}
            for agent, kinds in agents.items()
            if isinstance(kinds, dict)
        }
        for project, agents in data.items()
        if isinstance(agents, dict)
    }
