"""Where a file's text lives (a loaded buffer, else the disk) and the fs/* handlers.

A :class:`Document` is one file as the editor sees it right now: the buffer's
text when one is loaded (unsaved edits included), else the disk's, decoded
the way Neovim would ('fileencodings' ucs-bom,utf-8,latin1; 'fileformats'
unix,dos,mac). Texts are kept with their real line endings, so a CRLF file
reads, diffs and writes back as CRLF.

Agents' reads and writes (v1 ``fs/*``, the editor MCP server) go through the
session's :class:`~acp_nvim.client.services.changes.SessionChanges`, which
records every write for review. OS errors are translated here, once, into
:class:`FileError`.

Not here: files other than regular text files (binary files, directories,
FIFOs, devices and sockets are refused: reading a FIFO blocks until someone
writes it, and ``/dev/stdin`` is the host's RPC channel), and the review state
itself.
"""

from __future__ import annotations

__all__ = [
    "Document",
    "FileError",
    "Stat",
    "applied",
    "as_first_read",
    "check_writable",
    "encoding_of",
    "file_name",
    "follow",
    "load",
    "load_to_edit",
    "read_part",
    "save",
    "stat_of",
]

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import anyio.to_thread
import msgspec

from acp_nvim.client.editor import BufferState, Editor, EditorError, WriteError
from acp_nvim.client.services.errors import ServiceError, ServiceErrorKind
from acp_nvim.client.text import (
    DecodedFile,
    Eol,
    decode_file,
    encode_file,
    eol_of,
    join_text,
    split_as,
    split_text,
)
from acp_nvim.review import LineEdit, MergeResult, line_edits, merge3

# Files bigger than this are not read as text (an agent asking for a 200 MB log
# would stall the editor and its own context alike).
MAX_BYTES = 16 * 1024 * 1024
# Bytes read at a time from a file larger than that (read_part).
_PIECE = 65536
# Attempts at applying an edit while the user keeps typing in the buffer, or while
# something else keeps changing its file (see save's ``behind``).
RETRIES = 5

FileErrorKind = Literal[
    "relative",
    "invalid",
    "missing",
    "directory",
    "special",
    "binary",
    "too_large",
    "range",
    "readonly",
    "io",
    "moved",
]
# What the OS raises for a path it cannot take: ValueError for a NUL byte in it.
_OS_ERRORS = (OSError, ValueError)


_SERVICE_KINDS: dict[FileErrorKind, ServiceErrorKind] = {
    "missing": "not_found",
    "readonly": "denied",
    "io": "internal",
}


class FileError(ServiceError):
    """A file the agent named cannot be read or written as text (``reason`` says how)."""

    def __init__(self, reason: FileErrorKind, message: str) -> None:
        super().__init__(message, _SERVICE_KINDS.get(reason, "invalid"))
        self.reason: FileErrorKind = reason


class Document(msgspec.Struct):
    """One file's text as the editor holds it now.

    ``text`` is None when there is no file; ``buffer`` is set when a buffer holds
    it (with ``text`` None, a buffer still showing a deleted file's text: saving
    writes the file through it, deleting takes it away); ``encoding`` (disk only)
    is how to write it back.
    """

    path: str
    text: str | None
    buffer: BufferState | None = None
    encoding: DecodedFile | None = None

    @property
    def eol(self) -> Eol:
        if self.buffer is not None:
            return self.buffer.eol
        return eol_of(self.text or "")

    @property
    def _bom(self) -> bool:
        if self.buffer is not None:
            return self.buffer.bom
        return self.encoding is not None and self.encoding.bom

    def conform(self, content: str) -> str:
        """``content`` with this file's line endings and final newline.

        The agent's own endings count only for an empty or new file on disk; a
        buffer always writes with its 'fileformat' and 'eol'/'fixeol'. Where the
        file starts with a byte order mark, one the agent's text starts with is
        that mark (an agent that read the file itself may keep it), not a second.
        """
        if content.startswith("\ufeff") and self._bom:
            content = content[1:]
        if self.buffer is not None:
            eol, final_newline = self.buffer.eol, self.buffer.final_newline
            lines = split_as(content, self._ends_lines(eol))[0]
            return BufferState(lines, eol, final_newline, empty=not content).text
        if not self.text:
            return content
        _, eol, final_newline = split_text(self.text)
        return join_text(split_as(content, self._ends_lines(eol))[0], eol, final_newline)

    def _ends_lines(self, eol: Eol) -> Eol:
        """What ends a line of the agent's text in this file ending its lines with
        ``eol``: a ``"\r"`` before a ``"\n"`` is a line's own text only in a file
        of mixed endings (it has some); in one of LF lines alone, the agent's CRLF
        ends a line as its LF does, and the file stays LF."""
        text = self.buffer.text if self.buffer is not None else self.text
        return "\r\n" if eol == "\n" and "\r\n" not in (text or "") else eol


def absolute(path: str) -> str:
    """``path`` normalized; raises :class:`FileError` when it is relative (ACP wants
    absolute) or no file can have it (see :func:`file_name`)."""
    if not os.path.isabs(path):
        raise FileError("relative", f"path must be absolute: {path!r}")
    return os.path.normpath(file_name(path))


def file_name(path: str) -> str:
    """``path``, if a file can have it: not with a NUL byte, nor with a character the
    system cannot encode (a lone surrogate in JSON); else :class:`FileError`."""
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError:
        encoded = b"\0"
    if b"\0" in encoded:
        raise FileError("invalid", f"not a file name: {path!r}")
    return path


def _open_regular(path: str, flags: int) -> int:
    """A descriptor of the regular file at ``path``; anything else is refused unopened.

    Checked again on the open descriptor (opened non-blocking, so a FIFO put in
    its place meanwhile cannot block): the path may change between the two.

    Raises:
        FileError: a directory or another kind of file that is not regular.
        OSError, ValueError: as ``os.open``.
    """
    try:
        kind = os.stat(path).st_mode
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        kind = stat.S_IFREG
    fd = -1
    if stat.S_ISREG(kind):
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY, 0o666)
        kind = os.fstat(fd).st_mode
    if stat.S_ISREG(kind):
        return fd
    if fd >= 0:
        os.close(fd)
    if stat.S_ISDIR(kind):
        raise FileError("directory", f"{path} is a directory")
    raise FileError("special", f"{path} is not a regular file")


Stat = tuple[int, int]  # (size, mtime_ns)


def stat_of(path: str) -> Stat | None:
    """(size, mtime_ns) of ``path``; None when there is no such file, or no file
    can have that name (an agent's path with a NUL byte raises ValueError)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns)


def read_disk(path: str) -> Document:
    """The file at ``path`` from disk (``text`` None when missing).

    Never blocks on a FIFO or a device: only regular files are read.

    Raises:
        FileError: a directory, not a regular file, a binary file, too large,
            or unreadable.
    """
    data = read_bytes(path, MAX_BYTES + 1)
    if data is None:
        return Document(path, None)
    if len(data) > MAX_BYTES:
        why = f"{path} is larger than {MAX_BYTES // 2**20} MB: read it in parts (line, limit)"
        raise FileError("too_large", why)
    # A NUL marks binary data (a UTF-16 file's NUL bytes decode to other characters);
    # other non-UTF-8 bytes read as latin-1, as in Neovim.
    decoded = decode_file(data)
    if "\0" in decoded.text[:8192]:
        raise FileError("binary", f"{path} is a binary file")
    return Document(path, decoded.text, encoding=decoded)


def read_bytes(path: str, limit: int) -> bytes | None:
    """The first ``limit`` bytes of the regular file at ``path`` (None: no file).

    Raises:
        FileError: a directory, not a regular file, or unreadable.
    """
    try:
        with open(_open_regular(path, os.O_RDONLY), "rb") as f:
            return f.read(limit)
    except FileNotFoundError:
        return None
    except _OS_ERRORS as err:
        raise FileError("io", f"{path}: {_reason(err)}") from None


def read_part(path: str, line: int | None, limit: int | None, whole: FileError) -> str:
    """Lines ``line`` (1-based) on, at most ``limit`` of them, of a file on disk that
    ``whole`` says is too large to read whole: read a piece at a time, keeping only
    the lines asked for (at most :data:`MAX_BYTES` of them).

    Raises:
        FileError: ``whole`` when it is not about the size or no part was asked
            for; the part too large, a binary file, ``line`` past the end, unreadable.
    """
    if whole.reason != "too_large" or (line is None and limit is None):
        raise whole
    start, number, taken, ended = (line or 1) - 1, 0, bytearray(), True  # number: lines read
    try:
        with open(_open_regular(path, os.O_RDONLY), "rb") as f:
            if b"\0" in f.read(8192):
                raise FileError("binary", f"{path} is a binary file")
            f.seek(0)
            while limit is None or number < start + limit:
                piece = f.readline(_PIECE)  # a line, or a piece of a long one
                if not piece:
                    break
                if number >= start:
                    taken += piece
                    if len(taken) > MAX_BYTES:
                        why = f"{MAX_BYTES // 2**20} MB: ask for fewer (limit)"
                        raise FileError("too_large", f"the lines of {path} are larger than {why}")
                ended = piece.endswith(b"\n")
                number += ended
    except _OS_ERRORS as err:
        raise FileError("io", f"{path}: {_reason(err)}") from None
    number += not ended  # a last line without a line break
    if start and number <= start and limit != 0:
        why = f"line {line} is past the end of the file ({number} lines)"
        raise FileError("range", f"{path}: {why}")
    return decode_file(bytes(taken)).text


def write_disk(path: str, text: str, like: DecodedFile | None) -> None:
    """Write ``text`` to ``path`` (parents created) in the encoding of ``like``.

    Safely (:func:`replace_file`): whatever fails, the file holds its old text or
    the new one, never part of it.

    Raises:
        FileError: a directory or special file, or the write failed (the reason
            said, e.g. "No space left on device"); the file is untouched then.
    """
    _make_parents(path)
    try:
        replace_file(os.path.realpath(path), encode_file(text, like))  # through a symlink
    except _OS_ERRORS as err:  # ValueError: text the encoding cannot hold
        raise FileError("io", f"cannot write {path}: {_reason(err)}") from None


def write_bytes(path: str, data: bytes) -> None:
    """:func:`replace_file`, whose failure (a read-only directory, a full disk) is
    told with its reason, as :func:`write_disk` tells it.

    Raises:
        FileError: a directory or special file, or the write failed; the file is
            untouched then.
    """
    try:
        replace_file(path, data)
    except OSError as err:
        raise FileError("io", f"cannot write {path}: {_reason(err)}") from None


def _make_parents(path: str) -> None:
    """Create the directories a new file at ``path`` needs.

    Raises:
        FileError: one cannot be created (the reason said).
    """
    try:
        os.makedirs(os.path.dirname(os.path.realpath(path)), exist_ok=True)
    except _OS_ERRORS as err:
        raise FileError("io", f"cannot write {path}: {_reason(err)}") from None


def digest_of(path: str) -> str | None:
    """The SHA-256 of the regular file at ``path``'s bytes; None when there is no
    such file or it cannot be read."""
    try:
        digest = hashlib.sha256()
        with open(_open_regular(path, os.O_RDONLY), "rb") as f:
            while piece := f.read(_PIECE):
                digest.update(piece)
        return digest.hexdigest()
    except (*_OS_ERRORS, FileError):
        return None


def replace_file(path: str, data: bytes) -> None:
    """Make the regular file ``path`` (no symlink) hold ``data``, all or nothing.

    The bytes go to a new file in the same directory, synced, which then takes
    the old one's mode and owner and replaces it in one rename (decision 0037).
    A file whose inode must stay (hard links, another user's file we may write
    but not own, a directory we may not create files in) is overwritten in
    place instead, its room reserved first where the file system can, so that a
    full disk fails the write before any byte of the old text is lost.

    Raises:
        FileError: ``path`` is a directory or not a regular file.
        OSError: the write failed; ``path`` is as it was.
    """
    try:
        old: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        os.close(_open_regular(path, os.O_RDONLY))  # raises the FileError that says what it is
    if old is not None and old.st_nlink > 1:
        _overwrite(path, data)
        return
    try:
        fd, temporary = _sibling(path, 0o600 if old is not None else 0o666)
    except PermissionError:
        if old is None:
            raise
        _overwrite(path, data)  # a directory we may not create files in
        return
    try:
        with open(fd, "wb", closefd=True) as f:
            if old is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                if (old.st_uid, old.st_gid) != _ids(f.fileno()):
                    os.fchown(f.fileno(), old.st_uid, old.st_gid)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except PermissionError:
        _discard(temporary)
        if old is None:
            raise
        _overwrite(path, data)  # its owner or group cannot be kept: stay its inode
        return
    except BaseException:
        _discard(temporary)
        raise
    _sync_directory(os.path.dirname(path))


def _sibling(path: str, mode: int) -> tuple[int, str]:
    """A new file beside ``path`` (hidden, named after it), opened for writing."""
    head, tail = os.path.split(path)
    for _ in range(100):
        name = os.path.join(head, f".{tail}.{secrets.token_hex(4)}.acp~")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", path)


def _ids(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_uid, st.st_gid


def _discard(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _sync_directory(path: str) -> None:
    """Make the rename itself durable (best effort: not every system can)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _overwrite(path: str, data: bytes) -> None:
    """Write ``data`` over ``path`` keeping its inode; room for it is reserved
    before the old bytes are touched, where the file system can reserve."""
    fd = _open_regular(path, os.O_WRONLY)
    try:
        if hasattr(os, "posix_fallocate") and data:
            try:
                os.posix_fallocate(fd, 0, len(data))
            except OSError as err:
                if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def encoding_of(decoded: DecodedFile | None) -> DecodedFile | None:
    """How a file read from disk (``decoded``, a Document's ``encoding``) is encoded,
    without its text, to be kept; None for none read."""
    if decoded is None:
        return None
    return DecodedFile("", decoded.bom, decoded.encoding)


def as_first_read(doc: Document, first: DecodedFile | None) -> Document:
    """``doc`` to be written in ``first``, the encoding its file had when first read,
    where its text now cannot tell: a latin-1 file the agent's text left ASCII reads
    as UTF-8, and a review's text given back to it (a reject) would be written so,
    its "é" as two bytes; one gone from disk would come back as UTF-8. A buffer
    writes with its own 'fileencoding'."""
    if first is None or doc.buffer is not None:
        return doc
    utf8 = doc.encoding is not None and doc.encoding.encoding == "utf-8" and not doc.encoding.bom
    if doc.text is None or (utf8 and doc.text.isascii()):
        return msgspec.structs.replace(doc, encoding=first)
    return doc


def remove_disk(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except _OS_ERRORS as err:
        raise FileError("io", f"cannot delete {path}: {_reason(err)}") from None


def _reason(err: OSError | ValueError) -> str:
    return (err.strerror if isinstance(err, OSError) else None) or str(err)


async def load(
    editor: Editor, path: str, *, load_buffer: bool = False, check: bool = False
) -> Document:
    """``path`` from its loaded buffer, else from disk (see :class:`Document`).

    With ``load_buffer`` a buffer without a window is created when none exists.
    With ``check`` (before a write) a buffer is first compared with its file, as
    Neovim's W11/W12 check does: reloaded when unmodified and the file changed on
    disk, else ``buffer.moved`` says the file changed behind its unsaved edits.

    Raises:
        FileError: see :func:`read_disk`; the buffer cannot be loaded (a swap
            file of it exists).
    """
    if load_buffer and os.path.isdir(path):
        raise FileError("directory", f"{path} is a directory")
    try:
        buffer = await editor.read_buffer(path, load=load_buffer, check=check)
    except EditorError as err:
        raise FileError("io", str(err)) from None
    if buffer is not None:
        return Document(path, buffer.text, buffer)
    return await anyio.to_thread.run_sync(read_disk, path)


async def load_to_edit(editor: Editor, path: str) -> Document:
    """``path`` in a buffer loaded without a window, for an edit left unsaved there;
    a new file's directories are made first, or the user's :write fails (E212).

    Raises:
        FileError: see :func:`load`; a directory cannot be made.
    """
    await anyio.to_thread.run_sync(_make_parents, path)
    return await load(editor, path, load_buffer=True)


def check_writable(doc: Document) -> None:
    """Refuse to write a file its buffer or its mode marks read-only.

    Raises:
        FileError: ``readonly``, saying which.
    """
    if doc.buffer is not None and doc.buffer.readonly:
        raise FileError(
            "readonly", f"{doc.path} is read-only in the editor ('readonly' or 'nomodifiable')"
        )
    try:
        mode = os.stat(doc.path).st_mode
    except OSError:
        return  # a new file: its directory says, when it is written
    # The mode bits too: root may write anything, but 0444 still means "do not".
    if not mode & 0o222 or not os.access(doc.path, os.W_OK):
        raise FileError("readonly", f"{doc.path} is read-only (no write permission)")


def applied(change: tuple[str, str], disk: str | None) -> MergeResult:
    """The change ``(before, after)`` of a buffer applied to its file's ``disk`` text
    (``.text``; ``.clean``: no clash).

    Lines the buffer holds unsaved (where it differs from the disk) stay the disk's,
    unless the change itself replaces them. A missing file counts as empty.
    """
    before, after = change
    return merge3(before, after, disk or "")


async def follow(editor: Editor, doc: Document, change: tuple[str, str]) -> None:
    """Write to its file ``change`` (before, after) that ``doc``'s buffer held (the
    user's undo or redo of agent hunks, which the review took): the buffer is saved
    when that publishes nothing else of it (nothing is written once it moved on: it
    showed its file), else the change alone goes to the disk's text behind the
    buffer's unsaved edits (:func:`applied`), even when it moved on since. A change
    that clashes with the disk's text is not written: the clash would take the
    buffer's lines, maybe the user's unsaved ones; nor one to a file gone from disk.

    Raises:
        FileError: the file cannot be read or written.
    """
    assert doc.buffer is not None
    disk = await anyio.to_thread.run_sync(read_disk, doc.path)
    if disk.text is None:
        return  # gone from disk: the buffer stands for it (see save), the user's to write
    merged = applied(change, disk.text)
    target = disk.conform(merged.text)
    if target == (disk.text or ""):
        return
    if not merged.clean:
        editor.notify(f"{doc.path}: your undo or redo clashes with the file: not written", "warn")
        return
    tick = doc.buffer.tick
    if target == doc.text:
        # The tick is checked where the buffer is written, in one step of Neovim's loop.
        # Moved on since (a redo straight after the undo), it showed its file's text:
        # written behind it, Neovim would reload it, the redo lost; the next change
        # follows from the file as it is.
        with _saving(doc.path):
            await editor.edit_buffer(doc.path, tick, [], save=True)
        return
    # Also when the buffer moved on since ``doc``: the review took the change, so the
    # disk must too, or the next change, followed from the review's text, would meet
    # a file without this one (behind the buffer's unsaved edits).
    await anyio.to_thread.run_sync(write_disk, doc.path, target, disk.encoding)
    await editor.edit_buffer(doc.path, tick, [], save=False, disk_changed=True)


def _buffer_edits(buffer: BufferState, new: list[str], text: str) -> list[LineEdit]:
    """The edits making ``buffer`` hold ``new``, the lines of ``text``. The empty file
    is a buffer left with no lines: one left with an empty line, :write writes as "\n"
    (where 'eol' or 'fixeol' is set); an empty buffer given one empty line writes it."""
    if not text and buffer.text:
        return [LineEdit(0, len(buffer.lines), [])]
    if text and buffer.empty:
        return [LineEdit(0, len(buffer.lines), new)]
    return line_edits(buffer.lines, new)


@contextmanager
def _saving(path: str) -> Iterator[None]:
    """The editor's failed save of ``path`` told as a :class:`FileError`."""
    try:
        yield
    except WriteError as err:
        raise FileError("io", f"cannot write {path}: {err}") from None


async def save(
    editor: Editor,
    doc: Document,
    text: str | None,
    *,
    to_disk: bool = True,
    moved: bool = False,
    before: Stat | None = None,
    behind: str | None = None,
) -> str | None:
    """Make ``doc``'s file hold ``text`` (None: delete it); returns what it holds after.

    A buffer gets only the changed lines (cursor, marks and folds elsewhere
    survive) and is written when ``to_disk``. If the user typed in the buffer
    since ``doc`` was read, the change is merged onto their text (theirs wins
    on a clash), so the result may differ from ``text``. A buffer with unsaved
    edits is never written (they are the user's to publish): its file gets the
    change alone, applied to the disk's text (:func:`applied`), and the buffer
    stays modified; where there is no file behind it, none is made. Without a
    buffer the file is written directly, with its encoding. Deleting the file
    also deletes its buffer, unless the user typed in it since ``doc`` was read.
    ``moved``: the file changed behind the buffer
    (the agent's own write, merged into it; ``before``: the file's stat before it):
    Neovim takes its new time as seen. Where nothing but that change (or ours, to
    the file of a modified buffer) came between Neovim's last read or write of the
    file and now, its "changed since reading it" question at the user's next
    :write is answered too: the buffer holds the change (lua/acp/editor/buffers.lua).
    ``behind``: the file's text behind the buffer's unsaved edits that the change
    was held back against (decision 0015): a file holding other text by now is not
    written, nor the buffer (``moved``, raised): where the change clashed with it,
    the change would win and take the buffer's lines there, unsaved ones too.

    Raises:
        FileError: the file cannot be written; ``moved``: see ``behind``.
    """
    if text is None:
        await anyio.to_thread.run_sync(remove_disk, doc.path)
        if doc.buffer is not None:
            # Gone with its file, unless the user typed in it since it was read.
            await editor.delete_buffer(doc.path, doc.buffer.tick)
        return None
    if doc.buffer is None:
        await anyio.to_thread.run_sync(write_disk, doc.path, text, doc.encoding)
        return text
    buffer = doc.buffer
    change = (buffer.text, doc.conform(text))
    beside = False  # the change was written to the file behind the buffer
    for _ in range(RETRIES):
        if to_disk and buffer.modified and not beside:
            before = await anyio.to_thread.run_sync(stat_of, doc.path)
            disk = await anyio.to_thread.run_sync(read_disk, doc.path)
            if behind is not None and disk.text != behind:
                raise FileError("moved", f"{doc.path} changed on disk while it was written")
            # No file behind the buffer (gone, or never made): the change alone has no
            # text to go to, and a file made of it would be a fragment, or the user's.
            beside = disk.text is not None
            target = disk.conform(applied(change, disk.text).text) if beside else None
            if target is not None and target != disk.text:
                await anyio.to_thread.run_sync(write_disk, doc.path, target, disk.encoding)
        target = doc.conform(text)
        with _saving(doc.path):
            tick = await editor.edit_buffer(
                doc.path,
                buffer.tick,
                _buffer_edits(buffer, split_as(target, buffer.eol)[0], target),
                save=to_disk and not buffer.modified,
                disk_changed=beside or moved,
                disk_before=before,
            )
        if tick is not None:
            return target
        fresh = await editor.read_buffer(doc.path)
        if fresh is None:  # the buffer went away: write the file instead
            disk = await anyio.to_thread.run_sync(read_disk, doc.path)
            return await save(editor, disk, applied(change, disk.text).text, to_disk=to_disk)
        text = merge3(buffer.text, fresh.text, text).text
        doc, buffer = Document(doc.path, fresh.text, fresh), fresh
    raise FileError("io", f"{doc.path}: the buffer keeps changing; the edit was not applied")
