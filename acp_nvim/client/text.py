"""Text helpers for the file and terminal handlers.

Files: split/join with Neovim's end-of-line rules, ``fs/read_text_file``
slicing, binary sniffing and decoding. Terminals: escape-sequence stripping,
byte-limited truncation (ACP ``outputByteLimit``) and an incremental decoder
for v2 ``terminal_output_chunk`` data.

Names: :func:`one_line`, a title or name as one line shows it; :func:`title`, a
chat's title as every place shows it.

Not here: charset detection beyond UTF-8/latin-1, and terminal emulation (a
lone carriage return is dropped, not replayed as "overwrite the line").
"""

from __future__ import annotations

__all__ = [
    "ChunkDecoder",
    "DecodedFile",
    "Eol",
    "FileEncoding",
    "decode_file",
    "encode_file",
    "eol_of",
    "join_text",
    "looks_binary",
    "one_line",
    "slice_lines",
    "split_as",
    "split_text",
    "strip_ansi",
    "title",
    "truncate_from_start",
    "utf8_tail",
]

import base64
import binascii
import codecs
import re
from typing import Literal

import msgspec

Eol = Literal["\n", "\r\n", "\r"]

_SNIFF_BYTES = 8192


# The control characters str.split() does not take for white space (C0 but for
# \t-\r and the file separators, and DEL): they part words as spaces do, as Lua's
# util.one_line has them (a NUL in a title left Neovim's winbar undrawn).
_CONTROLS_AS_SPACES = dict.fromkeys([*range(0x09), *range(0x0E, 0x1C), 0x7F], " ")


def one_line(text: str) -> str:
    """``text``'s words on one line, one space between them: a title or name holding
    a line break (an agent's title made of a multi-line prompt) broke the line of
    a picker, the winbar, a tab's label and the export's heading. Control
    characters part words too.

    >>> one_line("fix the parser\\n  it fails on tabs ")
    'fix the parser it fails on tabs'
    """
    return " ".join(text.translate(_CONTROLS_AS_SPACES).split())


# The most characters of a chat's title (the agent's, or its first prompt's): the
# winbar, the pickers and the history show it as made here, one rule.
TITLE_MAX = 80


def title(text: str | None) -> str | None:
    """``text`` as a chat's title: on one line, at most :data:`TITLE_MAX` characters
    (a longer one cut, ``…`` at its end); None when it has no words.

    >>> title("  ")
    >>> cut = title("fix " * 30)
    >>> len(cut), cut[-6:]
    (80, 'x fix…')
    """
    line = one_line(text or "")
    if len(line) > TITLE_MAX:
        return line[: TITLE_MAX - 1] + "…"
    return line or None


def split_text(text: str) -> tuple[list[str], Eol, bool]:
    """Split ``text`` into buffer lines the way Neovim reads a file.

    Returns ``(lines, eol, final_newline)``; :func:`join_text` gives ``text``
    back exactly. ``eol`` follows 'fileformats' ``unix,dos,mac``: ``"\\r\\n"``
    when every ``\\n`` is preceded by ``\\r`` (a stray ``\\r`` elsewhere stays in
    its line), ``"\\r"`` when there is no ``\\n`` but a ``\\r``, else ``"\\n"``.
    An empty text is one empty line without a final newline, as in Neovim.

    >>> split_text("a\\r\\nb\\r\\n")
    (['a', 'b'], '\\r\\n', True)
    """
    eol = eol_of(text)
    lines = text.split(eol)
    final_newline = len(lines) > 1 and lines[-1] == ""
    if final_newline:
        lines.pop()
    return lines, eol, final_newline


def eol_of(text: str) -> Eol:
    """What ends ``text``'s lines, as :func:`split_text` finds it (without splitting)."""
    newlines = text.count("\n")
    if newlines:
        return "\r\n" if text.count("\r\n") == newlines else "\n"
    return "\r" if "\r" in text else "\n"


def split_as(text: str, eol: Eol) -> tuple[list[str], bool]:
    """Split ``text`` into the lines of a file that ends its lines with ``eol``.

    Returns ``(lines, final_newline)``. Where the file ends its lines with
    ``"\n"`` alone (a file of mixed endings, a 'fileformat' unix buffer), a
    ``"\r"`` before one is its line's own, kept as it came: :func:`split_text`
    would take a text whose every ``"\n"`` follows a ``"\r"`` for a CRLF one
    and drop them all. Where it ends them with ``"\r\n"``, a ``"\n"`` alone
    ends a line too (an agent may send either).

    >>> split_as("a\r\nb\r\n", "\n")
    (['a\r', 'b\r'], True)
    """
    if eol == "\r":
        lines, _, final_newline = split_text(text)
        return lines, final_newline
    lines = text.split("\n")
    if eol == "\r\n":
        # The last piece ends no line: a "\r" there is text.
        lines[:-1] = [line.removesuffix("\r") for line in lines[:-1]]
    final_newline = len(lines) > 1 and lines[-1] == ""
    if final_newline:
        lines.pop()
    return lines, final_newline


def join_text(lines: list[str], eol: Eol = "\n", final_newline: bool = True) -> str:
    """Join buffer ``lines`` with ``eol``, ending in one when ``final_newline``.

    ``[""]`` without a final newline is the empty file.
    """
    return eol.join(lines) + (eol if final_newline else "")


def slice_lines(text: str, line: int | None = None, limit: int | None = None) -> str:
    """The part of ``text`` an ``fs/read_text_file`` request asks for.

    ``line`` is 1-based (default 1), ``limit`` a maximum line count (default:
    to the end). Line endings inside the slice are kept as they are.

    Raises:
        ValueError: ``line`` < 1, ``limit`` < 0, or ``line`` past the last
            line (line 1 of an empty file is allowed and gives ``""``).
    """
    if line is not None and line < 1:
        raise ValueError(f"line must be 1 or more, got {line}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}")
    start = 0 if line is None else line - 1
    if start == 0 and limit is None:
        return text
    _, eol, _ = split_text(text)
    parts = text.split(eol)
    # Keep each line's terminator; a trailing "" is not a line.
    rows = [part + eol for part in parts[:-1]]
    if parts[-1]:
        rows.append(parts[-1])
    if start >= len(rows) and not (start == 0 and not rows):
        raise ValueError(f"line {line} is past the end of the file ({len(rows)} lines)")
    end = len(rows) if limit is None else start + limit
    return "".join(rows[start:end])


def looks_binary(data: bytes) -> bool:
    """Whether ``data`` should not be edited as text.

    True for a NUL byte in the first 8 KB or bytes that are not UTF-8
    (a UTF-8 BOM is fine).
    """
    if b"\0" in data[:_SNIFF_BYTES]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


FileEncoding = Literal["utf-8", "latin-1", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]

# The byte order marks 'fileencodings' "ucs-bom" reads, UTF-32's before UTF-16's:
# "\xff\xfe\0\0" starts both UTF-32 LE and UTF-16 LE.
_BOMS: tuple[tuple[bytes, FileEncoding], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class DecodedFile(msgspec.Struct, frozen=True):
    """A decoded file: ``text`` without BOM, whether it had one, and the encoding used."""

    text: str
    bom: bool = False
    encoding: FileEncoding = "utf-8"


def decode_file(data: bytes) -> DecodedFile:
    """Decode file bytes like Neovim's default 'fileencodings' (ucs-bom,utf-8,latin1).

    A byte order mark (UTF-8, UTF-16 or UTF-32) is stripped and reported, and
    says the encoding; bytes that are not UTF-8 decode as latin-1, which never
    fails. Never raises.
    """
    for mark, encoding in _BOMS:
        if data.startswith(mark):
            try:
                return DecodedFile(data[len(mark) :].decode(encoding), True, encoding)
            except UnicodeDecodeError:
                break
    try:
        return DecodedFile(data.decode("utf-8"), False, "utf-8")
    except UnicodeDecodeError:
        return DecodedFile(data.decode("latin-1"), False, "latin-1")


def encode_file(text: str, like: DecodedFile | None = None) -> bytes:
    """Encode ``text`` for writing back with the BOM and encoding of ``like``.

    Raises:
        ValueError: ``like`` is latin-1 and ``text`` holds a character latin-1
            cannot (said with its line). Writing such a file as UTF-8 instead
            would change the bytes of every other non-ASCII character in it, and
            double-encode those of a UTF-8 file read as latin-1 for one stray byte
            (decision 0090).
    """
    if like is not None and like.encoding == "latin-1":
        try:
            return text.encode("latin-1")
        except UnicodeEncodeError as err:
            line = text.count("\n", 0, err.start) + 1
            why = f"its encoding latin-1 cannot hold {text[err.start]!r} (line {line})"
            raise ValueError(why) from None
    encoding = like.encoding if like is not None else "utf-8"
    data = text.encode(encoding, "surrogatepass")
    if like is not None and like.bom:
        return next(mark for mark, name in _BOMS if name == encoding) + data
    return data


# Terminal output ----------------------------------------------------------------

# CSI; OSC/DCS/SOS/PM/APC strings ended by BEL or ST; then the same cut short
# by the end of the text; then any other ESC + intermediates + final (charset
# selection "ESC ( B", "ESC 7", ...), which also eats the introducer of a
# malformed sequence. Order matters: "ESC [" alone is partial, not "other".
_ESCAPE = re.compile(
    r"\x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|(?P<partial>\x1b\[[\x30-\x3f]*[\x20-\x2f]*\Z"
    r"|\x1b[\]PX^_][^\x07\x1b]*\x1b?\Z"
    r"|\x1b[\x20-\x2f]*\Z)"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"
)
# Controls a buffer cannot show usefully: C0 except \t and \n, DEL, C1.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# An unterminated OSC is held back at most this long, then let go.
_MAX_HELD = 4096


def _partial_start(text: str) -> int:
    """Index where an escape sequence cut off by the end of ``text`` begins, or len."""
    for match in _ESCAPE.finditer(text):
        if match.group("partial") is not None and len(text) - match.start() <= _MAX_HELD:
            return match.start()
    return len(text)


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences and control characters from ``text``.

    Drops CSI (colours, cursor moves), OSC/DCS/APC strings (BEL or ST
    terminated), charset selection and other ESC sequences, including one cut
    off at the end. ``\\r\\n`` becomes ``\\n`` and any other ``\\r`` is dropped
    (no overwrite emulation: a progress bar's frames run together, nothing is
    lost). Other C0/C1 controls except tab and newline are dropped.
    """
    return _CONTROLS.sub("", _ESCAPE.sub("", text))


def utf8_tail(data: bytes, byte_limit: int) -> bytes:
    """The last ``byte_limit`` bytes of UTF-8 ``data``, never starting mid-character.

    Raises:
        ValueError: ``byte_limit`` < 0.
    """
    if byte_limit < 0:
        raise ValueError(f"byte_limit must be 0 or more, got {byte_limit}")
    if len(data) <= byte_limit:
        return data
    start = len(data) - byte_limit
    # Skip continuation bytes (10xxxxxx): they belong to a character cut in two.
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]


def truncate_from_start(text: str, byte_limit: int) -> tuple[str, bool]:
    """Keep the end of ``text`` that fits in ``byte_limit`` UTF-8 bytes.

    Implements ACP ``outputByteLimit``: earlier output goes first, the cut is
    at a character boundary, so the result may be a few bytes under the limit.
    Returns ``(text, truncated)``.

    Raises:
        ValueError: ``byte_limit`` < 0.
    """
    data = text.encode("utf-8", "surrogatepass")
    kept = utf8_tail(data, byte_limit)
    if len(kept) == len(data):
        return text, False
    return kept.decode("utf-8", "surrogatepass"), True


class ChunkDecoder:
    """Turns v2 ``terminal_output_chunk`` data into displayable text, chunk by chunk.

    Each chunk is base64-decoded on its own and appended. A UTF-8 character or
    an escape sequence split across chunks is held back until the rest
    arrives, so the concatenated output equals decoding everything at once.
    With ``strip=True`` (default) output goes through :func:`strip_ansi`; with
    ``strip=False`` escapes pass through (for a real terminal buffer).
    """

    def __init__(self, *, strip: bool = True) -> None:
        self._strip = strip
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""

    def __repr__(self) -> str:
        return f"<ChunkDecoder strip={self._strip} holding {len(self._held)} chars>"

    def feed(self, data: str) -> str:
        """Decode one base64 chunk; returns the text that is safe to show now.

        Raises:
            ValueError: ``data`` is not valid base64.
        """
        try:
            raw = base64.b64decode(data, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"terminal output chunk is not base64: {exc}") from None
        text = self._held + self._utf8.decode(raw)
        cut = _partial_start(text)
        self._held = text[cut:]
        return self._finish(text[:cut])

    def flush(self) -> str:
        """End of output: return whatever is held (an incomplete tail decodes as U+FFFD)."""
        text = self._held + self._utf8.decode(b"", final=True)
        self._held = ""
        return self._finish(text)

    def reset(self) -> None:
        """Forget held state (a ``terminal_update`` snapshot replaces all output)."""
        self._utf8.reset()
        self._held = ""

    def _finish(self, text: str) -> str:
        return strip_ansi(text) if self._strip else text
