"""Three-way merge of line lists, for agent writes that race user edits.

Deliberately simpler than git's merge: no conflict markers (the caller keeps
"ours" and stores "theirs" as a proposal), and changes that merely touch
(adjacent lines, or an insertion at the edge of another change) merge cleanly.
With ``union``, insertions of both sides at the same point do too: both stay.
"""

from __future__ import annotations

__all__ = ["Conflict", "MergeResult", "merge3", "merge3_lines"]

from collections.abc import Sequence

import msgspec

from ._diff import diff_regions, split_lines


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
    # (i1, i2, replacement, side) with side 0 = ours, 1 = theirs. Sorting by
    # (i1, i2) puts an insertion before a change starting at the same line.
    changes = [(i1, i2, list(ours[j1:j2]), 0) for i1, i2, j1, j2 in diff_regions(base, ours)]
    changes += [(i1, i2, list(theirs[j1:j2]), 1) for i1, i2, j1, j2 in diff_regions(base, theirs)]
    changes.sort(key=lambda c: (c[0], c[1], c[3]))

    clusters: list[list[tuple[int, int, list[str], int]]] = []
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

    merged: list[str] = []
    conflicts: list[Conflict] = []
    pos = 0
    for cluster in clusters:
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


def _apply(
    base: Sequence[str], lo: int, hi: int, changes: list[tuple[int, int, list[str], int]]
) -> list[str]:
    """``base[lo:hi]`` with one side's ``changes`` (ordered, disjoint) applied."""
    out: list[str] = []
    pos = lo
    for i1, i2, lines, _ in changes:
        out.extend(base[pos:i1])
        out.extend(lines)
        pos = i2
    out.extend(base[pos:hi])
    return out
