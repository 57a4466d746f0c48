"""Three-way merge of line lists, for agent writes that race user edits.

Deliberately simpler than git's merge: no conflict markers (the caller keeps
"ours" and stores "theirs" as a proposal), and changes that merely touch
(adjacent lines, or an insertion at the edge of another change) merge cleanly.
With ``union``, insertions of both sides at the same point do too: both stay.
"""

from __future__ import annotations

__all__ = [
    "Conflict",
    "MergeResult",
    "held_rows",
    "hold_back",
    "merge3",
    "merge3_lines",
    "unmerged",
]

from collections.abc import Sequence

import msgspec

from ._diff import Region, diff_regions, split_lines, strip_eol

# (i1, i2, replacement, side): base[i1:i2] becomes replacement on one side (0 = ours,
# 1 = theirs; hold_back's 2 = an agent's change already held back).
_Change = tuple[int, int, list[str], int]


class Conflict(msgspec.Struct, frozen=True):
    """Both sides changed base lines ``[base_start, base_start + len(base_lines))``.

    The merged text holds ``ours_lines`` at ``start``; ``theirs_lines`` is the
    other side's version of the same region.
    """

    start: int
    ours_lines: list[str]
    theirs_lines: list[str]
    base_start: int
    base_lines: list[str]


class MergeResult(msgspec.Struct, frozen=True):
    """``text`` is the merge (ours wherever the sides clash); ``conflicts`` lists the clashes."""

    text: str
    conflicts: list[Conflict]

    @property
    def clean(self) -> bool:
        return not self.conflicts


def merge3(base: str, ours: str, theirs: str, *, union: bool = False) -> MergeResult:
    """Merge the changes ``base -> ours`` and ``base -> theirs``.

    Changes to separate regions all apply. Where both sides changed
    overlapping lines (or inserted at the same point) differently, the result
    keeps ``ours`` and reports a :class:`Conflict`. Identical changes on both
    sides are not conflicts. With ``union``, where both sides only inserted
    lines at the same point, both insertions stay, ours first: no conflict.

    >>> merge3("a\\nb\\nc\\n", "A\\nb\\nc\\n", "a\\nb\\nC\\n").text
    'A\\nb\\nC\\n'
    """
    lines, conflicts = merge3_lines(
        split_lines(base), split_lines(ours), split_lines(theirs), union=union
    )
    return MergeResult("".join(lines), conflicts)


def merge3_lines(
    base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], *, union: bool = False
) -> tuple[list[str], list[Conflict]]:
    """Line-level :func:`merge3`: returns the merged lines and the conflicts."""
    changes = _changes(ours, diff_regions(base, ours), 0)
    changes += _changes(theirs, diff_regions(base, theirs), 1)
    merged: list[str] = []
    conflicts: list[Conflict] = []
    pos = 0
    for cluster in _clusters(changes):
        lo = cluster[0][0]
        top = max(c[1] for c in cluster)
        merged.extend(base[pos:lo])
        pos = top
        versions = [_apply(base, lo, top, [c for c in cluster if c[3] == side]) for side in (0, 1)]
        sides = {c[3] for c in cluster}
        if sides == {1}:
            merged.extend(versions[1])
        elif sides == {0} or versions[0] == versions[1]:
            merged.extend(versions[0])
        elif union and lo == top:  # both sides only inserted, here
            merged.extend(versions[0] + versions[1])
        else:
            conflicts.append(
                Conflict(len(merged), versions[0], versions[1], lo, list(base[lo:top]))
            )
            merged.extend(versions[0])
    merged.extend(base[pos:])
    return merged, conflicts


def unmerged(ours: str, theirs: str) -> MergeResult:
    """``ours`` kept, each place ``theirs`` differs from it a conflict: a merge whose
    base is unknown, which cannot tell one side's changes from the other's."""
    kept, other = split_lines(ours), split_lines(theirs)
    conflicts = [
        Conflict(i1, list(kept[i1:i2]), list(other[j1:j2]), i1, list(kept[i1:i2]))
        for i1, i2, j1, j2 in diff_regions(kept, other)
    ]
    return MergeResult(ours, conflicts)


def hold_back(base: str, merged: MergeResult, saved: str) -> MergeResult:
    """``merged``, an agent's change merged into a buffer's text ``base``, with what
    of it clashes with ``saved`` held back as conflicts.

    ``saved`` is the file's text behind the buffer: where the two differ, the buffer
    holds the user's unsaved lines. An agent's change reaching into them keeps the
    buffer's lines there and waits in a conflict hunk, as one reaching into lines
    the user changed since the agent's read does (``merged``'s own conflicts, which
    stay, or take in what joins them). What is left then fits the file as it is:
    ``merge3(base, result.text, saved)`` takes no line from the buffer that the file
    does not hold.
    """
    lines, ours = split_lines(base), split_lines(merged.text)
    regions = diff_regions(lines, ours)
    on_disk = split_lines(saved)
    changes = _changes(ours, regions, 0) + _changes(on_disk, diff_regions(lines, on_disk), 1)
    # The merge's own conflicts, where they sit in ``base``: the agent's lines there.
    own: dict[tuple[int, int], Conflict] = {}
    for conflict in merged.conflicts:
        start = _to_base(regions, conflict.start)
        own[start, start + len(conflict.ours_lines)] = conflict
        changes.append((start, start + len(conflict.ours_lines), list(conflict.theirs_lines), 2))

    kept: list[str] = []
    conflicts: list[Conflict] = []
    pos = 0
    for cluster in _clusters(changes):
        lo = cluster[0][0]
        top = max(c[1] for c in cluster)
        kept.extend(lines[pos:lo])
        pos = top
        sides = {c[3] for c in cluster}
        agents = _apply(lines, lo, top, [c for c in cluster if c[3] != 1])
        on_file = _apply(lines, lo, top, [c for c in cluster if c[3] == 1])
        if sides == {0} or (sides == {0, 1} and agents == on_file):
            kept.extend(agents)  # nothing of the buffer's own reaches the file
            continue
        buffers = list(lines[lo:top])
        if sides == {2} and len(cluster) == 1:
            conflicts.append(msgspec.structs.replace(own[lo, top], start=len(kept)))
        elif sides != {1}:
            conflicts.append(Conflict(len(kept), buffers, agents, lo, buffers))
        kept.extend(buffers)
    kept.extend(lines[pos:])
    return MergeResult("".join(kept), conflicts)


def held_rows(base: str, merged: MergeResult) -> list[tuple[int, int, list[str]]]:
    """Where ``merged``, a merge into ``base`` that keeps ``base``'s lines at its
    conflicts, holds them: each conflict as rows ``[row, row + count)`` of ``base``
    and the other side's lines waiting there (without terminators)."""
    regions = diff_regions(split_lines(base), split_lines(merged.text))
    return [
        (
            _to_base(regions, conflict.start),
            len(conflict.ours_lines),
            [strip_eol(line) for line in conflict.theirs_lines],
        )
        for conflict in merged.conflicts
    ]


def _changes(lines: Sequence[str], regions: list[Region], side: int) -> list[_Change]:
    """``regions`` of a diff from the base to ``lines``, as one side's changes."""
    return [(i1, i2, list(lines[j1:j2]), side) for i1, i2, j1, j2 in regions]


def _to_base(regions: list[Region], pos: int) -> int:
    """Line ``pos`` of the changed side of ``regions`` at its place in the base: the
    start of the change it falls in."""
    for i1, _, j1, j2 in regions:
        if pos <= j1:
            return pos + i1 - j1
        if pos < j2:
            return i1
    return pos + (regions[-1][1] - regions[-1][3] if regions else 0)


def _clusters(changes: list[_Change]) -> list[list[_Change]]:
    """``changes`` of both sides grouped where they overlap, or insert at one point,
    in base order: each group is merged, or clashes, as one."""
    # Sorting by (i1, i2) puts an insertion before a change starting at the same line.
    changes.sort(key=lambda c: (c[0], c[1], c[3]))
    clusters: list[list[_Change]] = []
    hi = -1
    for change in changes:
        i1, i2 = change[0], change[1]
        joins = bool(clusters) and (
            i1 < hi or (i1 == i2 == hi and any(c[0] == c[1] == hi for c in clusters[-1]))
        )
        if joins:
            clusters[-1].append(change)
            hi = max(hi, i2)
        else:
            clusters.append([change])
            hi = i2
    return clusters


def _apply(base: Sequence[str], lo: int, hi: int, changes: list[_Change]) -> list[str]:
    """``base[lo:hi]`` with one side's ``changes`` (ordered, disjoint) applied."""
    out: list[str] = []
    pos = lo
    for i1, i2, lines, _ in changes:
        out.extend(base[pos:i1])
        out.extend(lines)
        pos = i2
    out.extend(base[pos:hi])
    return out
