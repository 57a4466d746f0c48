"""The files a turn left to the agent names while the chat's next turn runs.

A cancelled turn the agent goes on with (decision 0080) is not shown, but its tool
calls still name the files it writes: those are not the open turn's changes, though
its end-of-turn check finds them on disk. A change no tool call names (a shell
command) cannot be told apart.
"""

from __future__ import annotations

__all__ = ["LeftBehind"]

from msgspec import UnsetType

from acp_nvim.client.services.disk_changes import call_paths
from acp_nvim.client.session.model import ToolCallPatch
from acp_nvim.client.session.workspace import shown_path


class LeftBehind:
    """The files the tool calls of a chat's turn left to the agent named (``paths``,
    absolute against ``cwd``), which the review's checks skip until a turn begins
    after that turn ended (but those the open turn's own calls name)."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.paths: dict[str, None] = {}
        self._running = False

    def __repr__(self) -> str:
        return f"<LeftBehind {len(self.paths)} files{' running' if self._running else ''}>"

    def named(self, patch: ToolCallPatch) -> None:
        """A tool call of that turn, not shown: its files are not the open turn's."""
        content = [] if isinstance(patch.content, UnsetType) else patch.content
        if not isinstance(patch.append_content, UnsetType):
            content = [*content, *patch.append_content]
        locations = [] if isinstance(patch.locations, UnsetType) else patch.locations
        self._running = True
        self.paths.update((path, None) for path, _ in call_paths(content, locations, self.cwd))

    def ended(self) -> list[str]:
        """That turn ended: the files its calls named, as the user names them."""
        self._running = False
        return [shown_path(path, self.cwd) for path in self.paths]

    def turn_begins(self) -> None:
        """A turn of the chat's begins: what the turn left wrote before is in its
        starting state, no longer to skip (unless that turn still runs)."""
        if not self._running:
            self.paths.clear()
