"""|u| after the reject of a change of a file with no text (decision 0099), as after
a text hunk's, and after a restore (:AcpRestore, :AcpRewind) that took such a file
back, as after a text file's: a reject reloads the file's buffer (empties it, for a
file the agent made: ``put_bytes``), and an undo of that (the buffer showing the
agent's bytes again) puts those bytes back on disk, exactly, and the changes it
took back wait again; a redo rejects them again. A file the agent deleted kept its
text in its buffer: the reject empties it first, as a reload of no file would, so
that the undo has a state to come back to (:func:`emptied`).

The buffer's text is no copy of the bytes (Neovim converts what it reads), so the
agent's bytes are kept at the reject: at most ``SNAPSHOT_MAX_BYTES`` (2 MiB) a file,
and only for a file a buffer shows, unmodified, as ``u`` needs. Which state the
buffer is at is told by a digest of its text at the reject, before and after.
"""

from __future__ import annotations

__all__ = ["ByteUndo", "emptied"]

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

import anyio.to_thread

from acp_nvim.client.editor import Editor, EditorError
from acp_nvim.client.services import files
from acp_nvim.client.services.disk_changes import NOTHING, SNAPSHOT_MAX_BYTES, DiskChanges, Nothing
from acp_nvim.review import BinaryChange, BinaryStatus, LineEdit


class _Kept(NamedTuple):
    changes: tuple[BinaryChange, ...]  # what the reject took back, oldest turn first
    put_back: bytes | None  # the bytes it wrote back (None: it removed the file)
    taken: bytes | None  # the agent's bytes it took out (None: the agent deleted it)
    agent: str  # the digest of the buffer's text while it showed them
    before: str  # the same, once the reject's reload showed the bytes from before (or none)


class ByteUndo:
    """What a review keeps so that its rejects of files with no text can be undone
    in their buffers: one file's at most once each."""

    def __init__(self, editor: Editor, disk: DiskChanges) -> None:
        self.editor = editor
        self.disk = disk
        self._kept: dict[str, _Kept] = {}

    async def reject(
        self,
        changes: Sequence[BinaryChange],
        put_back: bytes | None,
        rejecting: Callable[[], Awaitable[None]],
    ) -> None:
        """Run ``rejecting``, which takes ``changes`` (one file's, oldest turn first:
        a reject's one, or a restore's) back to ``put_back`` (None: no file), keeping
        what an undo in the file's buffer needs: the agent's bytes, what the buffer
        showed before and after. A function, not its coroutine: one made before a
        look at the buffer that fails would never run."""
        path = changes[0].path
        self._kept.pop(path, None)
        if changes[-1].size is None and put_back is not None:
            await emptied(self.editor, path)  # the agent's state, shown: no file
        agent = await self._shown(path)
        taken = await self._agents_bytes(changes[-1]) if agent is not None else NOTHING
        await rejecting()
        if isinstance(taken, Nothing) or any(change.status != "rejected" for change in changes):
            return
        before = await self._shown(path)
        if agent is not None and before is not None and before != agent:
            self._kept[path] = _Kept(tuple(changes), put_back, taken, agent, before)

    async def follow(self, path: str) -> bool:
        """The user changed ``path``'s buffer: where an undo shows the agent's bytes
        of rejected changes again, they are written back and those wait again; where
        a redo shows the bytes from before, they are, and those are rejected again.
        Whether it was either (else the change of the buffer is the text review's)."""
        kept = self._kept.get(path)
        if kept is None:
            return False
        shown = await self._shown(path, modified=True)
        statuses = {change.status for change in kept.changes}
        data: bytes | None
        status: BinaryStatus
        if shown == kept.agent and statuses == {"rejected"}:
            data, then, status = kept.taken, kept.put_back, "pending"
        elif shown == kept.before and statuses == {"pending"}:
            data, then, status = kept.put_back, kept.taken, "rejected"
        else:
            return False  # the user's own edit, or the state the review has already
        if await anyio.to_thread.run_sync(files.digest_of, path) != _digest(then):
            self.editor.notify(f"{path}: changed since the reject; left as it is", "warn")
            return True
        try:
            if data is None:  # a file the agent made (or deleted), removed again
                await anyio.to_thread.run_sync(files.remove_disk, path)
            else:
                await anyio.to_thread.run_sync(files.write_bytes, path, data)
        except files.FileError as err:
            self.editor.notify(str(err), "warn")
            return True
        self.disk.seen(path)
        for change in kept.changes:
            change.status = status
        await self.editor.mark_saved(path, True)
        return True

    async def _agents_bytes(self, change: BinaryChange) -> bytes | Nothing | None:
        """The bytes ``change`` left in its file (None: it deleted it); NOTHING where
        more than an undo keeps, or unreadable."""
        if change.size is None:
            return None
        limit = SNAPSHOT_MAX_BYTES + 1
        taken = await anyio.to_thread.run_sync(files.read_bytes, change.path, limit)
        return NOTHING if taken is None or len(taken) > SNAPSHOT_MAX_BYTES else taken

    async def _shown(self, path: str, *, modified: bool = False) -> str | None:
        """The digest of the text of ``path``'s buffer (None: no buffer, or one with
        unsaved edits unless ``modified``)."""
        buffer = await self.editor.read_buffer(path)
        if buffer is None or (buffer.modified and not modified):
            return None
        return _digest(buffer.text.encode("utf-8", "surrogatepass"))


def _digest(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


async def emptied(editor: Editor, path: str) -> EditorError | None:
    """The buffer of ``path``, a file with no text gone from disk, holds nothing, saved,
    as a reload of no file would leave it: one undo step, which |u| takes back
    (:class:`ByteUndo`). Left showing the bytes, it stood for a file that is gone,
    and no undo state told the two apart. Not one with unsaved edits: the user's.
    Why the buffer would not take it ('nomodifiable', say), if it would not."""
    buffer = await editor.read_buffer(path)
    if buffer is None or buffer.modified or not buffer.text:
        return None
    try:
        done = await editor.edit_buffer(
            path, buffer.tick, [LineEdit(0, len(buffer.lines), [])], save=False
        )
    except EditorError as err:
        return err
    if done is not None:
        await editor.mark_saved(path, True)
    return None
