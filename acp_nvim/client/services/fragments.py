"""Where a tool call's diff sits in its file.

opencode sends only the replaced fragment as a diff's old and new text, so a diff
drawn from them numbers its hunks from the fragment's first line. The file is read
once per (path, old, new), off the event loop, to find the line the fragment
starts at (before the edit or after it); a whole file is found at line 1, as it
was drawn.
"""

from __future__ import annotations

__all__ = ["Fragments", "fragment_start"]

from collections.abc import Callable
from functools import partial

import anyio.to_thread

from acp_nvim.client.editor import Editor
from acp_nvim.client.services import files
from acp_nvim.client.services.files import FileError
from acp_nvim.client.session.model import DiffPart, ToolCall
from acp_nvim.client.tasks import Tasks

# What a diff says of its file: its path, old text and new text.
_Key = tuple[str, str | None, str]


def fragment_start(text: str, old: str | None, new: str) -> int:
    """The line (1-based) of ``text`` where a diff begins: where its old text is
    found once (the edit to come) or its new text (the edit made); 0 where neither
    is, or both are on different lines (the file read after an edit that left
    the old text elsewhere: which is the edit's is not known)."""
    lines = {
        text.count("\n", 0, text.index(fragment)) + 1
        for fragment in (old, new)
        if fragment and text.count(fragment) == 1
    }
    return lines.pop() if len(lines) == 1 else 0


class Fragments:
    """The lines the diffs of a chat's tool calls start at (``DiffPart.start``),
    each found once: an update sending the same diff again takes it from here."""

    def __init__(self, editor: Editor, tasks: Tasks) -> None:
        self._editor = editor
        self._tasks = tasks
        self._starts: dict[_Key, int | None] = {}  # None: being read, or no file

    def __repr__(self) -> str:
        return f"<Fragments {len(self._starts)} diffs>"

    def place(self, call: ToolCall, placed: Callable[[], None]) -> None:
        """Set the start of ``call``'s diffs, those not known yet once their files are
        read, then call ``placed`` (the call is drawn again)."""
        for part in call.content:
            if not isinstance(part, DiffPart) or part.start is not None:
                continue
            if not part.old_text:  # a new file, or an empty one: whole
                part.start = 1
                continue
            key = (part.path, part.old_text, part.new_text)
            if key in self._starts:
                part.start = self._starts[key]
            else:
                self._starts[key] = None
                self._tasks.start_soon(self._find, key, call, placed)

    async def _find(self, key: _Key, call: ToolCall, placed: Callable[[], None]) -> None:
        path, old, new = key
        try:
            text = (await files.load(self._editor, files.absolute(path))).text
        except FileError:
            text = None
        if text is None:  # no file to place it in (not written yet, gone): drawn as sent
            return
        found_at = partial(fragment_start, old=old, new=new)
        start = await anyio.to_thread.run_sync(found_at, text)
        self._starts[key] = start
        parts = [p for p in call.content if isinstance(p, DiffPart) and p.start is None]
        found = [p for p in parts if (p.path, p.old_text, p.new_text) == key]
        for part in found:
            part.start = start
        if found and start != 1:  # at line 1 it was drawn so already
            placed()
