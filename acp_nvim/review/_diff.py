"""Line diffs: minimal buffer edits, hunks and unified-diff rendering.

Everything here works on lists of lines. Review code keeps each line's
terminator (``split_lines``), so joining lines gives the exact text back and a
change of line ending or final newline is an ordinary change. Buffer code
(``line_edits``) works on Neovim's terminator-less lines.
"""

from __future__ import annotations

__all__ = [
    "Hunk",
    "HunkStatus",
    "LineEdit",
    "Region",
    "compute_hunks",
    "diff_regions",
    "format_unified",
    "line_edits",
    "split_lines",
    "strip_eol",
]

import bisect
import difflib
import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import msgspec

HunkStatus = Literal["pending", "accepted", "rejected", "conflict", "reverted"]

# (i1, i2, j1, j2): a[i1:i2] became b[j1:j2]. Regions come in order and are
# always separated by at least one equal line (difflib never emits two
# non-equal opcodes in a row, and anchors are equal lines).
Region = tuple[int, int, int, int]

# Below this many lines per side, difflib runs on the whole range. Above it, a
# patience-style split on lines unique to both sides comes first: difflib's
# find_longest_match is quadratic in how often a line repeats (blank lines,
# "}"), which costs seconds on a 100k-line file.
_DIFFLIB_MAX = 2000
# Beyond this many inner-loop steps difflib is replaced by Myers' O(ND) diff,
# and Myers gives up (one whole-range replacement) beyond its own budget.
_DIFFLIB_WORK = 400_000
_MYERS_STEPS = 3_000_000


class LineEdit(msgspec.Struct, frozen=True):
    """Replace old rows ``[start, end)`` (0-based, end exclusive) with ``lines``.

    Matches ``nvim_buf_set_lines(buf, start, end, false, lines)``.
    """

    start: int
    end: int
    lines: list[str]


class Hunk(msgspec.Struct):
    """One change between a baseline and the current text.

    ``base_lines`` sat at ``base_start`` in the baseline; ``new_lines`` sit at
    ``new_start`` in the current text (0-based). For a ``conflict`` hunk,
    ``new_lines`` are the user's lines kept in the buffer, ``proposed`` the
    agent's lines, and ``base_lines`` what the agent had read there.
    """

    id: int
    base_start: int
    base_lines: list[str]
    new_start: int
    new_lines: list[str]
    status: HunkStatus = "pending"
    proposed: list[str] | None = None

    @property
    def base_end(self) -> int:
        return self.base_start + len(self.base_lines)

    @property
    def new_end(self) -> int:
        return self.new_start + len(self.new_lines)

    @property
    def open(self) -> bool:
        """Whether it still awaits a decision (pending, or a conflict)."""
        return self.status in ("pending", "conflict")

    @property
    def header(self) -> str:
        """Unified-diff style ``@@ -a,b +c,d @@`` (1-based, as git prints it)."""
        return (
            f"@@ -{_range(self.base_start, len(self.base_lines))}"
            f" +{_range(self.new_start, len(self.new_lines))} @@"
        )

    def __repr__(self) -> str:
        return (
            f"<Hunk {self.id} {self.status} -{self.base_start},{len(self.base_lines)}"
            f" +{self.new_start},{len(self.new_lines)}>"
        )


def split_lines(text: str | None) -> list[str]:
    """Split ``text`` after each ``\\n``, keeping terminators.

    ``"".join(split_lines(t)) == t`` always; ``None`` and ``""`` give ``[]``.
    Only ``\\n`` splits (``str.splitlines`` would also split on form feeds and
    U+2028, which Neovim keeps inside a line).
    """
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def strip_eol(line: str) -> str:
    """``line`` without its ``\\n`` or ``\\r\\n`` terminator."""
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    return line


def diff_regions(a: Sequence[str], b: Sequence[str]) -> list[Region]:
    """Changed regions turning ``a`` into ``b``, in order.

    The common prefix and suffix are trimmed first, then small inputs get
    difflib's opcodes (``SequenceMatcher(None, a, b, autojunk=False)``) for
    the middle. Large ones are first split at lines unique to both sides
    (patience diff) and difflib runs on the gaps; where even that would be
    quadratic (few distinct lines), Myers' O(ND) diff runs instead. A
    100k-line file with a few changes takes ~0.1 s.
    """
    out: list[Region] = []
    _diff(a, b, 0, len(a), 0, len(b), out)
    return out


def _diff(
    a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int, out: list[Region]
) -> None:
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        alo += 1
        blo += 1
    while ahi > alo and bhi > blo and a[ahi - 1] == b[bhi - 1]:
        ahi -= 1
        bhi -= 1
    if alo == ahi and blo == bhi:
        return
    if alo == ahi or blo == bhi:
        out.append((alo, ahi, blo, bhi))
        return
    if max(ahi - alo, bhi - blo) > _DIFFLIB_MAX:
        anchors = _unique_anchors(a, b, alo, ahi, blo, bhi)
        if anchors:
            i, j = alo, blo
            for ai, bj in anchors:
                # Most gaps are a few equal repeated lines ("", "}"): a C-level
                # slice compare skips them without a call.
                if (ai != i or bj != j) and (ai - i != bj - j or a[i:ai] != b[j:bj]):
                    _diff(a, b, i, ai, j, bj, out)
                i, j = ai + 1, bj + 1
            _diff(a, b, i, ahi, j, bhi, out)
            return
    if (ahi - alo) * (bhi - blo) > _DIFFLIB_WORK and _difflib_work(
        a, b, alo, ahi, blo, bhi
    ) > _DIFFLIB_WORK:
        # Few distinct lines, many of them: difflib would take seconds.
        regions = _myers(a, b, alo, ahi, blo, bhi)
        out.extend(regions if regions is not None else [(alo, ahi, blo, bhi)])
        return
    matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out.append((alo + i1, alo + i2, blo + j1, blo + j2))


def _difflib_work(
    a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int
) -> int:
    """Roughly the inner-loop steps of one difflib find_longest_match call."""
    count_b = Counter(b[blo:bhi])
    return sum(count_b.get(line, 0) for line in a[alo:ahi])


def _myers(
    a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int
) -> list[Region] | None:
    """Myers' O(ND) diff of the two ranges; ``None`` when over the step budget."""
    n, m = ahi - alo, bhi - blo
    v: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    steps = 0
    for d in range(n + m + 1):
        trace.append(dict(v))
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[alo + x] == b[blo + y]:
                x += 1
                y += 1
            steps += x - start + 1
            v[k] = x
            if x >= n and y >= m:
                return _myers_regions(trace, n, m, alo, blo)
        if steps > _MYERS_STEPS:
            return None
    return None  # unreachable: d = n + m always reaches the end


def _myers_regions(trace: list[dict[int, int]], n: int, m: int, alo: int, blo: int) -> list[Region]:
    # Walk the trace back from (n, m), collecting the diagonal (equal) steps.
    matches: list[tuple[int, int]] = []
    x, y = n, m
    for d in range(len(trace) - 1, -1, -1):
        v = trace[d]
        k = x - y
        prev_k = k + 1 if k == -d or (k != d and v[k - 1] < v[k + 1]) else k - 1
        prev_x = v[prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            matches.append((x, y))
        x, y = prev_x, prev_y
    matches.reverse()
    regions: list[Region] = []
    i = j = 0
    for mi, mj in [*matches, (n, m)]:
        if mi > i or mj > j:
            regions.append((alo + i, alo + mi, blo + j, blo + mj))
        i, j = mi + 1, mj + 1
    return regions


def _unique_anchors(
    a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int
) -> list[tuple[int, int]]:
    """Pairs (i, j) of lines unique in both ranges, longest increasing chain."""
    count_a = Counter(a[alo:ahi])
    count_b = Counter(b[blo:bhi])
    where_b = {b[j]: j for j in range(blo, bhi) if count_b[b[j]] == 1}
    pairs = [
        (i, where_b[line])
        for i, line in enumerate(a[alo:ahi], alo)
        if line in where_b and count_a[line] == 1
    ]
    if not pairs:
        return []
    js = [j for _, j in pairs]
    if all(j1 < j2 for j1, j2 in itertools.pairwise(js)):
        return pairs  # nothing moved: every pair is an anchor
    # Patience sorting: longest chain of pairs increasing in j.
    tails: list[int] = []  # tails[k] = smallest j ending a chain of length k+1
    tail_index: list[int] = []
    back: list[int] = []
    for index, j in enumerate(js):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_index.append(index)
        else:
            tails[k] = j
            tail_index[k] = index
        back.append(tail_index[k - 1] if k else -1)
    chain: list[tuple[int, int]] = []
    index = tail_index[-1]
    while index >= 0:
        chain.append(pairs[index])
        index = back[index]
    chain.reverse()
    return chain


def line_edits(old: Sequence[str], new: Sequence[str]) -> list[LineEdit]:
    """The smallest set of row replacements turning ``old`` into ``new``.

    Listed bottom to top, so applying them in order with
    ``nvim_buf_set_lines`` keeps each edit's indices valid and leaves
    untouched rows (and the cursor, marks and folds on them) alone.

    >>> line_edits(["a", "b", "c"], ["a", "B", "c"])
    [LineEdit(start=1, end=2, lines=['B'])]
    """
    return [
        LineEdit(i1, i2, list(new[j1:j2])) for i1, i2, j1, j2 in reversed(diff_regions(old, new))
    ]


def compute_hunks(base: str | None, current: str | None) -> list[Hunk]:
    """Hunks turning ``base`` into ``current``, ids numbered from 1.

    ``None`` (no file) counts as empty text. Lines keep their terminators.
    """
    a, b = split_lines(base), split_lines(current)
    return [
        Hunk(n, i1, a[i1:i2], j1, b[j1:j2])
        for n, (i1, i2, j1, j2) in enumerate(diff_regions(a, b), start=1)
    ]


def _range(start: int, count: int) -> str:
    # Unified diff: a zero-length range names the line before it.
    if count == 0:
        return f"{start},0"
    return f"{start + 1}" if count == 1 else f"{start + 1},{count}"


def _diff_line(prefix: str, line: str) -> list[str]:
    if line.endswith("\n"):
        return [prefix + line]
    return [prefix + line + "\n", "\\ No newline at end of file\n"]


def format_unified(path: str, base: str | None, current: str | None, context: int = 3) -> str:
    """Render a git-style unified diff of ``base`` -> ``current`` for display.

    ``None`` means the file does not exist (``/dev/null`` side). Returns ``""``
    when nothing changed. The output parses back with ``parse_unified``.
    """
    a, b = split_lines(base), split_lines(current)
    regions = diff_regions(a, b)
    if not regions and (base is None) == (current is None):
        return ""
    out = [f"diff --git {path} {path}\n"]
    if base is None:
        out.append("new file mode 100644\n")
    elif current is None:
        out.append("deleted file mode 100644\n")
    if not regions:
        return "".join(out)
    out.append(f"--- {'/dev/null' if base is None else path}\n")
    out.append(f"+++ {'/dev/null' if current is None else path}\n")
    # Group regions whose context would touch or overlap.
    groups: list[list[Region]] = [[regions[0]]]
    for region in regions[1:]:
        if region[0] - groups[-1][-1][1] <= 2 * context:
            groups[-1].append(region)
        else:
            groups.append([region])
    for group in groups:
        i_start = max(group[0][0] - context, 0)
        j_start = group[0][2] - (group[0][0] - i_start)
        i_end = min(group[-1][1] + context, len(a))
        j_end = group[-1][3] + (i_end - group[-1][1])
        out.append(
            f"@@ -{_range(i_start, i_end - i_start)} +{_range(j_start, j_end - j_start)} @@\n"
        )
        i = i_start
        for i1, i2, j1, j2 in group:
            for line in a[i:i1]:
                out.extend(_diff_line(" ", line))
            for line in a[i1:i2]:
                out.extend(_diff_line("-", line))
            for line in b[j1:j2]:
                out.extend(_diff_line("+", line))
            i = i2
        for line in a[i:i_end]:
            out.extend(_diff_line(" ", line))
    return "".join(out)
