"""Git-style unified diffs: parse them and apply them strictly.

Reads what ``git diff`` prints (and the ACP v2 ``git_patch`` format, which is
the same with absolute paths and no ``a/``/``b/`` prefixes): file headers,
modes, renames, copies, binary markers and ``\\ No newline at end of file``.
Applying never guesses: no fuzz, no offsets. A hunk whose context does not
match exactly raises :class:`PatchError`. Binary patches are recognised, not
applied.
"""

from __future__ import annotations

__all__ = [
    "FilePatch",
    "PatchError",
    "PatchHunk",
    "apply_patch",
    "parse_unified",
    "reverse_patch",
]

import re

import msgspec

from ._diff import split_lines, strip_eol


class PatchError(ValueError):
    """A patch that is malformed, or that does not fit the text it is applied to."""


class PatchHunk(msgspec.Struct):
    """One ``@@`` hunk. ``lines`` keep their ``" "``/``"-"``/``"+"`` tag and end in
    ``\\n`` unless the patch said ``\\ No newline at end of file``."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str = ""
    lines: list[str] = msgspec.field(default_factory=list)

    @property
    def old_lines(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def new_lines(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " +"]


class FilePatch(msgspec.Struct):
    """One file's section of a patch. ``None`` paths mean ``/dev/null``."""

    old_path: str | None
    new_path: str | None
    hunks: list[PatchHunk] = msgspec.field(default_factory=list)
    new_file: bool = False
    deleted: bool = False
    rename: bool = False
    copy: bool = False
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None

    @property
    def path(self) -> str:
        """The path after the change (the deleted path for a deletion)."""
        path = self.new_path or self.old_path
        assert path is not None
        return path

    @property
    def symlink(self) -> bool:
        return "120000" in (self.old_mode, self.new_mode)


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(text: str) -> tuple[str, str]:
    """Split a leading C-quoted path (as git writes odd names) off ``text``."""
    out = bytearray()
    i = 1
    while i < len(text):
        char = text[i]
        if char == '"':
            return out.decode("utf-8", "surrogateescape"), text[i + 1 :]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567":
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.extend(char.encode())
        i += 1
    raise PatchError(f"unterminated quoted path: {text!r}")


def _strip_prefix(path: str, prefix: str) -> str:
    return path[2:] if path.startswith(prefix) else path


def _header_path(text: str, prefix: str) -> str | None:
    """The path of a ``---``/``+++`` line (``None`` for /dev/null)."""
    if text.startswith('"'):
        path, _ = _unquote(text)
    else:
        path = text.split("\t", 1)[0]  # GNU diff appends "\t<timestamp>"
    return None if path == "/dev/null" else _strip_prefix(path, prefix)


def _git_header_paths(text: str) -> tuple[str, str]:
    """Both paths of ``diff --git A B``; ambiguous spaces resolved by equal names."""
    if text.startswith('"'):
        old, rest = _unquote(text)
        rest = rest.lstrip(" ")
        new = _unquote(rest)[0] if rest.startswith('"') else rest
        return _strip_prefix(old, "a/"), _strip_prefix(new, "b/")
    # Unquoted: the names may hold spaces. Without a rename both are equal.
    for cut in range(len(text)):
        if text[cut] == " ":
            old, new = _strip_prefix(text[:cut], "a/"), text[cut + 1 :]
            if new.startswith('"'):
                return old, _strip_prefix(_unquote(new)[0], "b/")
            if old == _strip_prefix(new, "b/"):
                return old, old
    old, _, new = text.partition(" ")
    return _strip_prefix(old, "a/"), _strip_prefix(new, "b/")


def parse_unified(text: str) -> list[FilePatch]:
    """Parse a git-style (or plain) unified diff into one :class:`FilePatch` per file.

    Lines are split on ``\\n`` only, so a CRLF file's ``\\r`` stays part of its
    lines. Text before the first file header is ignored. Raises
    :class:`PatchError` for a malformed hunk (bad counts, stray lines).

    >>> [p.path for p in parse_unified("--- a/x\\n+++ b/x\\n@@ -1 +1 @@\\n-a\\n+b\\n")]
    ['x']
    """
    lines = [_chomp(line) for line in split_lines(text)]
    patches: list[FilePatch] = []
    current: FilePatch | None = None
    in_git_header = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            old, new = _git_header_paths(line[len("diff --git ") :])
            current = FilePatch(old, new)
            patches.append(current)
            in_git_header = True
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_path = _header_path(line[4:], "a/")
            new_path = _header_path(lines[i + 1][4:], "b/")
            if current is None or not in_git_header:
                current = FilePatch(old_path, new_path)
                patches.append(current)
            current.old_path, current.new_path = old_path, new_path
            current.new_file = current.new_file or old_path is None
            current.deleted = current.deleted or new_path is None
            in_git_header = False
            i += 1
        elif line.startswith("@@"):
            if current is None:
                raise PatchError(f"line {i + 1}: hunk before any file header")
            i = _parse_hunk(lines, i, current)
            in_git_header = False
            continue
        elif current is not None and in_git_header:
            _git_extended(line, current)
        i += 1
    return patches


def _chomp(line: str) -> str:
    return line[:-1] if line.endswith("\n") else line


def _git_extended(line: str, patch: FilePatch) -> None:
    """Apply one extended header line (``new file mode``, ``rename from``...)."""
    word, _, rest = line.partition(" ")
    if line.startswith("new file mode "):
        patch.new_file, patch.old_path, patch.new_mode = True, None, line.rsplit(" ", 1)[1]
    elif line.startswith("deleted file mode "):
        patch.deleted, patch.new_path, patch.old_mode = True, None, line.rsplit(" ", 1)[1]
    elif line.startswith("old mode "):
        patch.old_mode = rest.split(" ", 1)[1]
    elif line.startswith("new mode "):
        patch.new_mode = rest.split(" ", 1)[1]
    elif line.startswith(("rename from ", "copy from ")):
        patch.rename, patch.copy = word == "rename", word == "copy"
        patch.old_path = _path_value(line.split(" ", 2)[2])
    elif line.startswith(("rename to ", "copy to ")):
        patch.new_path = _path_value(line.split(" ", 2)[2])
    elif line.startswith("index ") and len(parts := line.split(" ")) == 3:
        patch.old_mode = patch.old_mode or parts[2]
        patch.new_mode = patch.new_mode or parts[2]
    elif line.startswith("Binary files ") or line == "GIT binary patch":
        patch.binary = True


def _path_value(text: str) -> str:
    return _unquote(text)[0] if text.startswith('"') else text


def _parse_hunk(lines: list[str], i: int, patch: FilePatch) -> int:
    """Parse the hunk at ``lines[i]``; returns the index after it."""
    match = _HUNK.match(lines[i])
    if match is None:
        raise PatchError(f"line {i + 1}: bad hunk header {lines[i]!r}")
    old_start, old_count, new_start, new_count, section = match.groups()
    hunk = PatchHunk(
        int(old_start),
        1 if old_count is None else int(old_count),
        int(new_start),
        1 if new_count is None else int(new_count),
        section,
    )
    need_old, need_new = hunk.old_count, hunk.new_count
    i += 1
    while i < len(lines) and (need_old or need_new or lines[i].startswith("\\")):
        line = lines[i]
        tag = line[:1]
        if tag == "\\":  # "\ No newline at end of file": the previous line has no "\n"
            if not hunk.lines:
                raise PatchError(f"line {i + 1}: no-newline marker without a line")
            hunk.lines[-1] = hunk.lines[-1][:-1]
            i += 1
            continue
        if line == "":
            tag, line = " ", " "  # context whose trailing space was stripped in transit
        if tag == " ":
            need_old, need_new = need_old - 1, need_new - 1
        elif tag == "-":
            need_old -= 1
        elif tag == "+":
            need_new -= 1
        else:
            break
        if need_old < 0 or need_new < 0:
            raise PatchError(f"line {i + 1}: hunk longer than its header {hunk.section!r}")
        hunk.lines.append(line + "\n")
        i += 1
    if need_old or need_new:
        raise PatchError(
            f"line {i + 1}: hunk '@@ -{old_start} +{new_start} @@' is short by "
            f"{need_old} old and {need_new} new lines"
        )
    patch.hunks.append(hunk)
    return i


def apply_patch(old_text: str | None, patch: FilePatch) -> str | None:
    """Apply ``patch`` to ``old_text`` (``None``: no file); returns the new text.

    ``None`` is returned for a deletion. Context and removed lines must match
    exactly at the positions the hunks name. Raises :class:`PatchError` on a
    mismatch (naming the hunk and line), for a binary patch, when a new file
    already has content, or when a patched file does not exist.
    """
    where = patch.path
    if patch.binary:
        raise PatchError(f"{where}: binary patch cannot be applied as text")
    if patch.new_file and old_text:
        raise PatchError(f"{where}: patch creates the file but it already has content")
    if old_text is None and not patch.new_file:
        raise PatchError(f"{where}: file does not exist")
    old = split_lines(old_text)
    out: list[str] = []
    pos = 0
    for number, hunk in enumerate(patch.hunks, start=1):
        # A zero-length old range names the line *before* the insertion.
        start = hunk.old_start if hunk.old_count == 0 else hunk.old_start - 1
        expected = hunk.old_lines
        if start < pos:
            raise PatchError(f"{where}: hunk {number} overlaps the previous hunk")
        actual = old[start : start + len(expected)]
        if actual != expected:
            bad = next(
                (k for k, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b),
                len(actual),
            )
            got = repr(strip_eol(actual[bad])) if bad < len(actual) else "end of file"
            want = repr(strip_eol(expected[bad])) if bad < len(expected) else "end of file"
            raise PatchError(
                f"{where}: hunk {number} ({_header(hunk)}) does not apply at line "
                f"{start + bad + 1}: expected {want}, found {got}"
                + (" (line endings differ)" if got == want else "")
            )
        out.extend(old[pos:start])
        out.extend(hunk.new_lines)
        pos = start + len(expected)
    out.extend(old[pos:])
    if patch.deleted:
        if out:
            raise PatchError(f"{where}: patch deletes the file but leaves {len(out)} lines")
        return None
    return "".join(out)


def reverse_patch(patch: FilePatch) -> FilePatch:
    """``patch`` the other way round: applied to the text it made, it gives back the
    text it was made from (a file it created is deleted, one it deleted created)."""
    flip = {"+": "-", "-": "+"}
    return FilePatch(
        patch.new_path,
        patch.old_path,
        [
            PatchHunk(
                h.new_start,
                h.new_count,
                h.old_start,
                h.old_count,
                h.section,
                [flip.get(line[0], line[0]) + line[1:] for line in h.lines],
            )
            for h in patch.hunks
        ],
        new_file=patch.deleted,
        deleted=patch.new_file,
        rename=patch.rename,
        copy=patch.copy,
        binary=patch.binary,
        old_mode=patch.new_mode,
        new_mode=patch.old_mode,
    )


def _header(hunk: PatchHunk) -> str:
    return f"@@ -{hunk.old_start},{hunk.old_count} +{hunk.new_start},{hunk.new_count} @@"
