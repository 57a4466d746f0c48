"""The process groups of the commands Neovim's terminals run for agents.

Neovim killed outright (SIGKILL, a crash) runs no exit hook, and its terminals'
hang-up reaches only each command's wrapper (lua/acp/editor/terminal.lua), which
waits for its command: the command and the wrapper ran on, orphaned. So each
running command's group is held as an agent's is (acp_nvim/client/agent/groups.py):
this process SIGKILLs it when it ends (Neovim gone, its stdin closed), and the
reaper does when this process is killed too. Held from Lua's word that the
command started until Lua's word that it exited (Neovim reaps it, not us).

Not here: stopping a command while Neovim runs (Lua does, decision 0036).
"""

from __future__ import annotations

__all__ = ["TerminalGroups"]

from acp_nvim.client.agent.groups import Group


class _Job:
    """A terminal's leader (its wrapper) as a group sees it: Neovim collects its exit."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None


class TerminalGroups:
    """The groups of running terminal commands, by terminal key."""

    def __init__(self) -> None:
        self._held: dict[str, Group] = {}

    def __repr__(self) -> str:
        return f"<TerminalGroups {sorted(self._held)}>"

    def started(self, key: str, pid: int, nvim_pid: int) -> None:
        """Terminal ``key``'s command runs as ``pid``, a child of Neovim (``nvim_pid``).
        Held only where it is vouched for: Neovim reaps it, not us, so a quick one may
        be gone by now, its pid anyone's."""
        group = Group(_Job(pid), parent=nvim_pid)
        if not group.vouched:
            return
        group.hold()
        self._held[key] = group

    def exited(self, keys: list[str]) -> None:
        """The commands of terminals ``keys`` exited: let go of their groups."""
        for key in keys:
            group = self._held.pop(key, None)
            if group is not None:
                group.drop()
