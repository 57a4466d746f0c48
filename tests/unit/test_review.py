from __future__ import annotations

import difflib
import gc
import math
import random
import time
from collections.abc import Callable

import msgspec
import pytest

import acp_nvim.review as review
from acp_nvim.review import (
    Changeset,
    FilePatch,
    Hunk,
    LineEdit,
    PatchError,
    ReviewError,
    ReviewStore,
    apply_patch,
    compute_hunks,
    format_unified,
    held_rows,
    line_edits,
    merge3,
    parse_unified,
    reverse_patch,
    split_lines,
)
from acp_nvim.review._diff import diff_regions
from acp_nvim.review._merge import Conflict, MergeResult, hold_back

P = "/proj/a.txt"


def text(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def apply_edits(old: list[str], edits: list[LineEdit]) -> list[str]:
    buf = list(old)
    for edit in edits:  # in the given (bottom-up) order, as Neovim applies them
        buf[edit.start : edit.end] = edit.lines
    return buf


def test_exports() -> None:
    assert sorted(review.__all__) == sorted(
        [
            "BinaryChange",
            "BinaryStatus",
            "Changeset",
            "Conflict",
            "FileChange",
            "FileKind",
            "FilePatch",
            "Hunk",
            "HunkStatus",
            "LineEdit",
            "MergeResult",
            "PatchError",
            "PatchHunk",
            "RestoreOutcome",
            "ReviewError",
            "ReviewStore",
            "WriteOutcome",
            "apply_patch",
            "binary_about",
            "compute_hunks",
            "format_unified",
            "held_rows",
            "line_edits",
            "merge3",
            "parse_unified",
            "reverse_patch",
            "split_lines",
        ]
    )


# -- line edits ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "edits"),
    [
        ([], [], []),
        (["a"], ["a"], []),
        ([], ["a", "b"], [LineEdit(0, 0, ["a", "b"])]),
        (["a", "b"], [], [LineEdit(0, 2, [])]),
        (["a", "b", "c"], ["a", "B", "c"], [LineEdit(1, 2, ["B"])]),
        (["a", "b", "c"], ["a", "c"], [LineEdit(1, 2, [])]),
        (["a", "c"], ["a", "b", "c"], [LineEdit(1, 1, ["b"])]),
        (["a", "b", "c"], ["x", "b", "y"], [LineEdit(2, 3, ["y"]), LineEdit(0, 1, ["x"])]),
        (["a", "b"], ["a", "b", "c"], [LineEdit(2, 2, ["c"])]),
        (["x", "a"], ["a"], [LineEdit(0, 1, [])]),
    ],
)
def test_line_edits_table(old: list[str], new: list[str], edits: list[LineEdit]) -> None:
    assert line_edits(old, new) == edits
    assert apply_edits(old, edits) == new


def test_line_edits_are_bottom_up_and_difflib_after_trimming() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        old = [rng.choice("abcde") for _ in range(rng.randrange(0, 30))]
        new = [rng.choice("abcdef") for _ in range(rng.randrange(0, 30))]
        edits = line_edits(old, new)
        assert apply_edits(old, edits) == new
        starts = [e.start for e in edits]
        assert starts == sorted(starts, reverse=True)
        # difflib's opcodes on what is left once the common prefix/suffix is trimmed.
        p = 0
        while p < min(len(old), len(new)) and old[p] == new[p]:
            p += 1
        s = 0
        while s < min(len(old), len(new)) - p and old[-1 - s] == new[-1 - s]:
            s += 1
        mid = difflib.SequenceMatcher(
            None, old[p : len(old) - s], new[p : len(new) - s], autojunk=False
        ).get_opcodes()
        trimmed = [(p + i1, p + i2, p + j1, p + j2) for t, i1, i2, j1, j2 in mid if t != "equal"]
        assert diff_regions(old, new) == trimmed


def test_line_edits_keep_untouched_lines_on_large_files() -> None:
    rng = random.Random(3)
    for repeated in (False, True):
        old = [
            ("" if i % 7 == 0 else "}") if repeated and i % 3 == 0 else f"line {i}"
            for i in range(30_000)
        ]
        new = list(old)
        for _ in range(20):
            k = rng.randrange(len(new))
            action = rng.choice(["change", "insert", "delete"])
            if action == "change":
                new[k] = "changed"
            elif action == "insert":
                new.insert(k, "inserted")
            else:
                del new[k]
        edits = line_edits(old, new)
        assert apply_edits(old, edits) == new
        # Minimal-ish: never more rows touched than the 20 edits could need.
        assert sum(e.end - e.start for e in edits) <= 20


def line_edits_growth(make: Callable[[int], tuple[list[str], list[str]]], n: int) -> float:
    """How much more CPU time ``line_edits`` takes on ``make(4 * n)`` than on
    ``make(n)``: the best of five interleaved pairs, the collector off. About 4 for
    linear work, 16 for quadratic; CPU time, not wall time, so a busy machine slows
    both sizes alike instead of failing the test."""
    inputs = {size: make(size) for size in (n, 4 * n)}
    best = dict.fromkeys(inputs, math.inf)
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            for size, (old, new) in inputs.items():
                started = time.process_time()
                line_edits(old, new)
                best[size] = min(best[size], time.process_time() - started)
    finally:
        gc.enable()
    return best[4 * n] / best[n]


def few_distinct_lines(n: int) -> tuple[list[str], list[str]]:
    # No unique lines at all: the patience split cannot help, difflib would be
    # quadratic; the Myers fallback keeps it linear and exact.
    old = ["", "}", "x"] * (n // 3)
    new = list(old)
    new[n // 60], new[n // 2], new[n - n // 60] = "a", "b", "c"
    return old, new


def test_line_edits_survive_few_distinct_lines() -> None:
    old, new = few_distinct_lines(60_000)
    assert line_edits(old, new) == [
        LineEdit(59_000, 59_001, ["c"]),
        LineEdit(30_000, 30_001, ["b"]),
        LineEdit(1000, 1001, ["a"]),
    ]
    assert line_edits_growth(few_distinct_lines, 4_200) < 8


def mostly_unique_lines(n: int) -> tuple[list[str], list[str]]:
    old = [("" if i % 10 == 0 else "}" if i % 10 == 5 else f"x_{i} = f({i})") for i in range(n)]
    new = list(old)
    new[n // 5] = "changed"
    new[n // 2 : n // 2] = ["ins 1", "ins 2"]
    del new[n * 4 // 5 : n * 4 // 5 + 3]
    return old, new


def test_line_edits_100k_lines_is_linear() -> None:
    old, new = mostly_unique_lines(100_000)
    assert line_edits(old, new) == [
        LineEdit(79_998, 80_001, []),
        LineEdit(50_000, 50_000, ["ins 1", "ins 2"]),
        LineEdit(20_000, 20_001, ["changed"]),
    ]
    assert line_edits_growth(mostly_unique_lines, 5_000) < 8


# -- hunks and unified diffs -------------------------------------------------------


def test_split_lines_keeps_terminators() -> None:
    for sample in ["", "a", "a\n", "a\r\nb", "a\n\n", "\n"]:
        assert "".join(split_lines(sample)) == sample
    assert split_lines("a\r\nb") == ["a\r\n", "b"]
    assert split_lines("x\x0cy\u2028z\n") == ["x\x0cy\u2028z\n"]
    assert split_lines(None) == []


def test_compute_hunks() -> None:
    hunks = compute_hunks(text("a", "b", "c", "d"), text("a", "B", "c", "d", "e"))
    assert hunks == [
        Hunk(1, 1, ["b\n"], 1, ["B\n"]),
        Hunk(2, 4, [], 4, ["e\n"]),
    ]
    assert [h.header for h in hunks] == ["@@ -2 +2 @@", "@@ -4,0 +5 @@"]
    assert compute_hunks(None, "x\n") == [Hunk(1, 0, [], 0, ["x\n"])]
    assert compute_hunks("x", "x\n") == [Hunk(1, 0, ["x"], 0, ["x\n"])]


def test_format_unified_looks_like_git() -> None:
    base = text(*[f"l{i}" for i in range(1, 11)])
    cur = base.replace("l2\n", "L2\n").replace("l10\n", "l10\nl11\n")
    assert format_unified("/p/f.txt", base, cur, context=2) == (
        "diff --git /p/f.txt /p/f.txt\n"
        "--- /p/f.txt\n"
        "+++ /p/f.txt\n"
        "@@ -1,4 +1,4 @@\n"
        " l1\n"
        "-l2\n"
        "+L2\n"
        " l3\n"
        " l4\n"
        "@@ -9,2 +9,3 @@\n"
        " l9\n"
        " l10\n"
        "+l11\n"
    )
    assert format_unified("/p/f", "a\n", "a\n") == ""
    assert format_unified("/p/f", "a", "a\n") == (
        "diff --git /p/f /p/f\n--- /p/f\n+++ /p/f\n@@ -1 +1 @@\n"
        "-a\n\\ No newline at end of file\n+a\n"
    )
    assert format_unified("/p/f", None, "") == "diff --git /p/f /p/f\nnew file mode 100644\n"


@pytest.mark.parametrize(
    ("base", "cur"),
    [
        (None, "new\nfile\n"),
        ("old\n", None),
        ("a\nb\nc\n", "a\nc\n"),
        ("a\r\nb\r\n", "a\r\nB\r\nc\r\n"),
        ("no eol", "no eol\nnow\n"),
        ("x\ny", "x\nz"),
        ("".join(f"{i}\n" for i in range(50)), "".join(f"{i}\n" for i in range(50) if i % 9)),
    ],
)
def test_format_unified_round_trips_through_parse_and_apply(
    base: str | None, cur: str | None
) -> None:
    patches = parse_unified(format_unified("/p/f", base, cur, context=1))
    assert len(patches) == 1
    assert apply_patch(base, patches[0]) == cur


# -- merge3 ----------------------------------------------------------------------

BASE = text("1", "2", "3", "4", "5", "6")


@pytest.mark.parametrize(
    ("ours", "theirs", "merged", "conflicts"),
    [
        # Separate regions merge cleanly, adjacent ones too.
        (
            text("1", "X", "3", "4", "5", "6"),
            text("1", "2", "3", "4", "Y", "6"),
            text("1", "X", "3", "4", "Y", "6"),
            [],
        ),
        (
            text("X", "2", "3", "4", "5", "6"),
            text("1", "Y", "3", "4", "5", "6"),
            text("X", "Y", "3", "4", "5", "6"),
            [],
        ),
        # Only one side changed.
        (BASE, text("1", "2", "T", "4", "5", "6"), text("1", "2", "T", "4", "5", "6"), []),
        (text("1", "2", "O", "4", "5", "6"), BASE, text("1", "2", "O", "4", "5", "6"), []),
        # Same change on both sides.
        (
            text("1", "S", "3", "4", "5", "6"),
            text("1", "S", "3", "4", "5", "6"),
            text("1", "S", "3", "4", "5", "6"),
            [],
        ),
        # Insertions at different points, and at the edge of the other's change.
        (
            text("1", "2", "i", "3", "4", "5", "6"),
            text("1", "2", "3", "4", "5", "j", "6"),
            text("1", "2", "i", "3", "4", "5", "j", "6"),
            [],
        ),
        (
            text("1", "2", "3", "4", "5", "6", "end"),
            text("1", "2", "3", "4", "5", "SIX"),
            text("1", "2", "3", "4", "5", "SIX", "end"),
            [],
        ),
        # Overlap: ours is kept, theirs reported.
        (
            text("1", "mine", "3", "4", "5", "6"),
            text("1", "agent", "3", "4", "5", "6"),
            text("1", "mine", "3", "4", "5", "6"),
            [(1, ["mine\n"], ["agent\n"], 1, ["2\n"])],
        ),
        # Overlapping ranges of different sizes widen the conflict.
        (
            text("1", "m", "m", "4", "5", "6"),
            text("1", "2", "a", "a", "5", "6"),
            text("1", "m", "m", "4", "5", "6"),
            [(1, ["m\n", "m\n", "4\n"], ["2\n", "a\n", "a\n"], 1, ["2\n", "3\n", "4\n"])],
        ),
        # Both insert at the same point.
        (
            text("1", "2", "3", "mine", "4", "5", "6"),
            text("1", "2", "3", "theirs", "4", "5", "6"),
            text("1", "2", "3", "mine", "4", "5", "6"),
            [(3, ["mine\n"], ["theirs\n"], 3, [])],
        ),
        # User deleted what the agent changed.
        (
            text("1", "2", "4", "5", "6"),
            text("1", "2", "THREE", "4", "5", "6"),
            text("1", "2", "4", "5", "6"),
            [(2, [], ["THREE\n"], 2, ["3\n"])],
        ),
        # A clean change before a conflict shifts the conflict's merged position.
        (
            text("1", "2", "3", "4", "u", "6"),
            text("0", "0", "1", "2", "3", "4", "a", "6"),
            text("0", "0", "1", "2", "3", "4", "u", "6"),
            [(6, ["u\n"], ["a\n"], 4, ["5\n"])],
        ),
    ],
)
def test_merge3(
    ours: str,
    theirs: str,
    merged: str,
    conflicts: list[tuple[int, list[str], list[str], int, list[str]]],
) -> None:
    result = merge3(BASE, ours, theirs)
    assert result.text == merged
    got = [
        (c.start, c.ours_lines, c.theirs_lines, c.base_start, c.base_lines)
        for c in result.conflicts
    ]
    assert got == conflicts
    assert result.clean is (not conflicts)


def test_merge3_union_keeps_both_sides_insertions_at_one_point() -> None:
    ours = text("1", "2", "3", "mine", "4", "5", "6")
    theirs = text("1", "2", "3", "theirs", "more", "4", "5", "6")
    result = merge3(BASE, ours, theirs, union=True)
    assert result.text == text("1", "2", "3", "mine", "theirs", "more", "4", "5", "6")
    assert result.clean
    # Only insertions: a change of base lines around the point still clashes.
    clash = merge3(BASE, ours, text("1", "2", "THREE", "FOUR", "5", "6"), union=True)
    assert clash.text == ours and len(clash.conflicts) == 1


def test_merge3_final_newline_and_empty_base() -> None:
    assert merge3("a\nb", "A\nb", "a\nb\n").text == "A\nb\n"
    assert merge3("", "x\n", "").text == "x\n"
    assert merge3("", "x\n", "y\n").conflicts[0].theirs_lines == ["y\n"]


def test_hold_back_keeps_the_buffers_lines_where_its_file_differs() -> None:
    """An agent's change merged into a buffer whose "u" is unsaved (the file has
    "3"): what reaches into "u" waits as a conflict, the rest stays, and what is
    left applies to the file cleanly, taking nothing of the buffer's own."""
    buffer = text("1", "2", "u", "4", "5", "6")
    own = Conflict(1, ["2\n"], ["TWO\n"], 1, ["2\n"])  # the user changed "2" since the read
    merged = MergeResult(text("1", "2", "U", "4", "FIVE", "6"), [own])
    result = hold_back(buffer, merged, BASE)
    assert result.text == text("1", "2", "u", "4", "FIVE", "6")
    assert result.conflicts == [own, Conflict(2, ["u\n"], ["U\n"], 2, ["u\n"])]
    on_disk = merge3(buffer, result.text, BASE)
    assert on_disk.clean and on_disk.text == text("1", "2", "3", "4", "FIVE", "6")
    # The merge's own conflict and an agent's change, both in unsaved lines ("u v"
    # for "3 4"): one conflict holding both.
    buffer = text("1", "2", "u", "v", "5", "6")
    own = Conflict(2, ["u\n"], ["X\n"], 2, ["3\n"])
    merged = MergeResult(text("1", "2", "u", "V", "5", "6"), [own])
    result = hold_back(buffer, merged, BASE)
    assert result.text == buffer
    assert result.conflicts == [Conflict(2, ["u\n", "v\n"], ["X\n", "V\n"], 2, ["u\n", "v\n"])]


# -- changesets: accept / reject ---------------------------------------------------

TEN = text(*[f"l{i}" for i in range(10)])


def changed(*edits: tuple[int, list[str] | None]) -> str:
    """TEN with line i replaced by the given lines (None: kept)."""
    rows: list[str] = []
    for i in range(10):
        repl = dict(edits).get(i)
        rows.extend([f"l{i}"] if repl is None else repl)
    return text(*rows)


def one_file(base: str | None, cur: str | None, kind: str = "write") -> Changeset:
    cs = Changeset(1)
    cs.record(P, base, cur, kind)  # type: ignore[arg-type]
    return cs


def test_reject_one_hunk_leaves_other_hunk_ids_and_text_alone() -> None:
    cur = changed((0, ["A", "A2"]), (4, []), (9, ["Z"]))
    cs = one_file(TEN, cur)
    first, middle, last = cs.hunks(P)
    assert (first.id, middle.id, last.id) == (1, 2, 3)
    assert (first.new_start, middle.new_start, last.new_start) == (0, 5, 9)

    after = cs.reject(P, 1)  # two lines back to one: later hunks move up by one
    assert after == changed((4, []), (9, ["Z"]))
    hunks = {h.id: h for h in cs.hunks(P)}
    assert hunks[1].status == "rejected"
    assert (hunks[2].status, hunks[2].new_start, hunks[2].base_start) == ("pending", 4, 4)
    assert (hunks[3].status, hunks[3].new_start, hunks[3].new_lines) == ("pending", 8, ["Z\n"])

    assert cs.reject(P, 3) == changed((4, []))
    assert cs.reject(P, 2) == TEN


def test_accept_then_reject_keeps_accepted_change() -> None:
    cur = changed((1, ["B"]), (5, ["F", "F2"]), (8, []))
    cs = one_file(TEN, cur)
    assert cs.accept(P, 2) == cur  # accepting never changes the text
    hunks = {h.id: h for h in cs.hunks(P)}
    assert hunks[3].base_start == 9  # was 8: the baseline grew by one line before it
    assert cs.file(P).baseline == changed((5, ["F", "F2"]))
    assert cs.reject(P) == changed((5, ["F", "F2"]))
    assert [h.status for h in cs.hunks(P)] == ["rejected", "accepted", "rejected"]
    assert not cs.file(P).open


@pytest.mark.parametrize(
    ("cur", "count"),
    [
        (changed((0, ["X"])), 1),  # first line
        (changed((9, ["X"])), 1),  # last line
        (changed((0, ["X"]), (2, ["Y"])), 2),  # one line apart
        (changed((0, []), (2, [])), 2),  # deletions only
        (changed((0, ["i", "l0"]), (5, ["l5", "j"]), (9, ["l9", "k"])), 3),  # insertions only
        (text("top", *[f"l{i}" for i in range(10)], "bottom"), 2),  # at both ends
        (changed(*[(i, [f"X{i}"]) for i in range(0, 10, 2)]), 5),  # every other line
    ],
)
def test_every_subset_of_rejections_gives_the_same_text_in_any_order(cur: str, count: int) -> None:
    hunks = compute_hunks(TEN, cur)
    assert len(hunks) == count
    base_lines, cur_lines = split_lines(TEN), split_lines(cur)
    for mask in range(1 << count):
        chosen = [h for h in hunks if mask >> (h.id - 1) & 1]
        # Expected: current with each chosen region swapped back, bottom-up.
        want = list(cur_lines)
        for h in sorted(chosen, key=lambda h: h.new_start, reverse=True):
            want[h.new_start : h.new_end] = h.base_lines
        for order in (chosen, list(reversed(chosen))):
            cs = one_file(TEN, cur)
            result: str | None = cur
            for h in order:
                result = cs.reject(P, h.id)
            assert result == "".join(want)
            # Hunks not rejected still describe the remaining differences exactly.
            for h in cs.hunks(P):
                if h.status == "pending":
                    assert "".join(split_lines(result)[h.new_start : h.new_end]) == "".join(
                        h.new_lines
                    )
                    assert base_lines[h.base_start : h.base_end] == h.base_lines
            if len(chosen) == count:
                assert result == TEN


@pytest.mark.parametrize(
    ("base", "cur"),
    [
        (TEN, changed((3, ["x"]), (7, []))),
        ("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\nd\r\n"),
        ("no final newline", "no final newline\nmore"),
        ("a\nb", "a\nb\n"),
        ("a\n", "a\r\n"),
        ("", "x\n"),
        ("x\n", ""),
    ],
)
def test_reject_all_restores_baseline_exactly(base: str, cur: str) -> None:
    assert one_file(base, cur).reject(P) == base
    assert one_file(base, cur).accept(P) == cur


def test_created_file_reject_means_delete_accept_means_keep() -> None:
    assert one_file(None, "new\n").reject(P) is None
    assert one_file(None, "").reject(P) is None  # empty new file: one pseudo-hunk
    cs = one_file(None, "new\n")
    assert cs.accept(P) == "new\n"
    assert cs.file(P).baseline == "new\n"


def test_deleted_file_reject_restores_accept_deletes() -> None:
    assert one_file("old\n", None).reject(P) == "old\n"
    assert one_file("", None).reject(P) == ""
    cs = one_file("old\n", None)
    assert cs.accept(P) is None
    assert cs.file(P).baseline is None


def test_decisions_are_idempotent_and_final() -> None:
    cs = one_file(TEN, changed((2, ["x"])))
    cs.accept(P, 1)
    assert cs.accept(P, 1) == changed((2, ["x"]))
    with pytest.raises(ReviewError, match="hunk 1 is already accepted"):
        cs.reject(P, 1)
    with pytest.raises(ReviewError, match="no hunk 9 in turn 1"):
        cs.accept(P, 9)
    with pytest.raises(ReviewError, match="/other: no changes in turn 1"):
        cs.hunks("/other")


def test_later_records_keep_baseline_and_ids_of_unchanged_hunks() -> None:
    cs = Changeset(1)
    step1 = changed((1, ["one"]), (6, ["six"]))
    cs.record(P, TEN, step1, "disk")
    ids = {h.new_lines[0]: h.id for h in cs.hunks(P)}
    step2 = changed((1, ["one"]), (4, ["four"]), (6, ["six"]))
    cs.record(P, step1, step2, "write")
    change = cs.file(P)
    assert change.original == TEN and change.kind == "disk"
    hunks = {h.new_lines[0]: h.id for h in cs.hunks(P)}
    assert hunks == {"one\n": ids["one\n"], "four\n": 3, "six\n": ids["six\n"]}
    assert cs.reject(P) == TEN


def test_user_edits_between_agent_writes_are_not_agent_hunks() -> None:
    cs = Changeset(1)
    agent1 = changed((2, ["agent"]))
    cs.record(P, TEN, agent1, "write")
    user = changed((2, ["agent"]), (8, ["user"]))
    agent2 = changed((2, ["agent"]), (5, ["agent2"]), (8, ["user"]))
    cs.record(P, user, agent2, "write")  # baseline says what the file held before
    assert [h.new_lines for h in cs.hunks(P)] == [["agent\n"], ["agent2\n"]]
    assert cs.reject(P) == changed((8, ["user"]))


def test_user_edit_inside_an_agent_hunk_joins_the_hunk() -> None:
    cs = Changeset(1)
    cs.record(P, TEN, changed((2, ["agent"])), "write")
    cs.file(P).user_edit(changed((2, ["agent+user"])))
    assert [(h.id, h.base_lines, h.new_lines) for h in cs.hunks(P)] == [
        (2, ["l2\n"], ["agent+user\n"])
    ]
    assert cs.reject(P) == TEN


def test_undo_reverts_hunks_and_redo_offers_them_again() -> None:
    cs = Changeset(1)
    agent = changed((2, ["agent"]), (5, []), (8, ["a8", "a8b"]))
    cs.record(P, TEN, agent, "write")
    change = cs.file(P)
    ids = [h.id for h in change.hunks()]
    # An undo of the agent's edit, plus a line the user typed meanwhile (the
    # agent's deletion was of l5: its undo brings l5 back).
    undone = changed((0, ["mine"]))
    assert change.user_edit(undone) == TEN
    assert [(h.id, h.status) for h in change.hunks()] == [(i, "reverted") for i in ids]
    assert [h.new_start for h in change.hunks()] == [2, 5, 8]
    assert not change.open and change.current == undone
    # The redo: the agent's lines are back, the agent's again (same ids), and only
    # the user's line is the user's.
    redone = changed((0, ["mine"]), (2, ["agent"]), (5, []), (8, ["a8", "a8b"]))
    assert change.user_edit(redone) == redone
    assert [(h.id, h.status) for h in change.hunks()] == [(i, "pending") for i in ids]
    assert change.baseline == changed((0, ["mine"]))
    assert cs.reject(P) == changed((0, ["mine"]))


def test_undo_of_a_reject_offers_the_hunk_again_and_typing_is_the_users() -> None:
    cs = Changeset(1)
    cs.record(P, TEN, changed((2, ["agent"])), "write")
    change = cs.file(P)
    [hunk] = change.hunks()
    assert cs.reject(P, hunk.id) == TEN
    assert change.user_edit(changed((2, ["agent"]))) == changed((2, ["agent"]))
    assert [(h.id, h.status) for h in change.hunks()] == [(hunk.id, "pending")]
    # Other text typed there is the user's own edit of the hunk, not the agent's.
    assert change.user_edit(changed((2, ["other"]))) is None
    assert [h.new_lines for h in change.hunks()] == [["other\n"]]


def test_restore_takes_every_later_turn_back_in_one_change_keeping_user_edits() -> None:
    store = ReviewStore()
    texts = [
        TEN,
        changed((1, ["t1"])),
        changed((1, ["t2"]), (4, ["t2"])),
        changed((1, ["t3"]), (4, ["t2"])),
    ]
    for turn in (1, 2, 3):
        store.begin_turn()
        store.record(P, texts[turn - 1], texts[turn], "disk")
    # The user edits a line turn 3 changed, and one no turn touched.
    mine = changed((1, ["t3 mine"]), (4, ["t2"]), (7, ["mine"]))
    store.turn(3).file(P).user_edit(mine)
    outcome = store.restore(P, 1)
    assert outcome.clashes == []
    assert outcome.text == changed((1, ["t3 mine"]), (7, ["mine"]))
    [conflict] = outcome.conflicts
    assert (conflict.new_start, conflict.new_lines, conflict.proposed) == (
        1,
        ["t3 mine\n"],
        ["l1\n"],
    )
    assert all(not store.turn(t).file(P).open or t == 3 for t in (1, 2, 3))
    # Accepting the conflict takes the restore's line: turn 1's baseline exactly.
    assert store.accept(P, conflict.id, turn=3) == changed((7, ["mine"]))


def statuses(store: ReviewStore, turn: int) -> list[str]:
    return [h.status for h in store.hunks(P, turn)]


def test_restore_takes_accepted_changes_back_too_and_marks_them_reverted() -> None:
    store = ReviewStore()
    texts = [
        TEN,
        changed((1, ["t1"])),
        changed((1, ["t1"]), (3, ["t2 kept"]), (6, ["t2", "t2b"])),
        changed((0, ["t3"]), (1, ["t1"]), (3, ["t2 kept"]), (6, ["t2", "t2b"])),
    ]
    for turn in (1, 2, 3):
        store.begin_turn()
        store.record(P, texts[turn - 1], texts[turn], "disk")
        if turn == 2:
            # The user accepts one hunk of turn 2 and types a line of their own.
            accepted = store.hunks(P)[0]
            assert store.accept(P, accepted.id) == texts[2]
            texts[2] = changed((1, ["t1"]), (3, ["t2 kept"]), (6, ["t2", "t2b"]), (9, ["mine"]))
            store.turn(2).file(P).user_edit(texts[2])
            texts[3] = changed(
                (0, ["t3"]), (1, ["t1"]), (3, ["t2 kept"]), (6, ["t2", "t2b"]), (9, ["mine"])
            )
    outcome = store.restore(P, 1)
    # Turn 1's baseline, with the user's own line: no agent line is left.
    assert (outcome.text, outcome.conflicts, outcome.clashes) == (changed((9, ["mine"])), [], [])
    assert (statuses(store, 1), statuses(store, 2), statuses(store, 3)) == (
        ["rejected"],
        ["reverted", "rejected"],
        ["rejected"],
    )
    assert all(not store.turn(t).file(P).applied for t in (1, 2, 3))
    # The turn's baseline no longer holds the accepted change either.
    assert store.turn(2).file(P).baseline == changed((1, ["t1"]), (9, ["mine"]))


def test_restore_keeps_an_accepted_change_the_user_edited_since() -> None:
    store = ReviewStore()
    store.begin_turn()
    store.record(P, TEN, changed((2, ["agent"]), (5, ["agent"])), "disk")
    store.accept(P)
    store.turn(1).file(P).user_edit(changed((2, ["agent, mine"]), (5, ["agent"])))
    store.begin_turn()
    store.record(
        P,
        changed((2, ["agent, mine"]), (5, ["agent"])),
        changed((2, ["agent, mine"]), (5, ["agent"]), (8, ["t2"])),
        "disk",
    )
    outcome = store.restore(P, 1)
    assert outcome.text == changed((2, ["agent, mine"]))
    assert outcome.clashes == [
        f"{P}: you edited a change of turn 1 after it was accepted; that text stays"
    ]
    assert sorted(statuses(store, 1)) == ["accepted", "reverted"]


def test_restore_removes_a_created_file_unless_the_user_edited_it_since() -> None:
    store = ReviewStore()
    store.begin_turn()
    store.record(P, None, text("new"), "write")
    store.accept(P)
    assert store.restore(P, 1).text is None
    assert statuses(store, 1) == ["reverted"]
    assert store.changes()[0]["created"] is False

    store = ReviewStore()
    store.begin_turn()
    store.record(P, None, text("new"), "write")
    store.turn(1).file(P).user_edit(text("new", "mine"))
    outcome = store.restore(P, 1)
    assert (outcome.text, outcome.clashes) == (
        text("new", "mine"),
        [f"{P}: not removed, you edited it since"],
    )
    assert store.turn(1).file(P).open


# -- conflicts -------------------------------------------------------------------


def test_write_merges_user_edits_the_agent_has_not_seen() -> None:
    cs = Changeset(1)
    user = changed((8, ["user"]))
    outcome = cs.write(P, changed((1, ["agent"])), editor_text=user, agent_read=TEN)
    assert outcome.text == changed((1, ["agent"]), (8, ["user"]))
    assert outcome.conflicts == []
    # The user's edit predates the write: it is baseline, not an agent hunk.
    assert [h.new_lines for h in cs.hunks(P)] == [["agent\n"]]
    assert cs.reject(P) == user


def test_write_over_user_edit_keeps_user_text_and_records_conflict() -> None:
    cs = Changeset(1)
    user = changed((3, ["user"]))
    agent = changed((0, ["agent0"]), (3, ["agent3"]))
    outcome = cs.write(P, agent, editor_text=user, agent_read=TEN)
    assert outcome.text == changed((0, ["agent0"]), (3, ["user"]))
    (conflict,) = outcome.conflicts
    assert conflict.status == "conflict"
    assert (conflict.new_start, conflict.new_lines, conflict.proposed) == (
        3,
        ["user\n"],
        ["agent3\n"],
    )
    assert conflict.base_lines == ["l3\n"]

    # Rejecting the other hunk shifts nothing here but must keep the conflict valid.
    pending = next(h for h in cs.hunks(P) if h.status == "pending")
    cs.reject(P, pending.id)
    assert cs.file(P).current == user
    # Accepting the conflict applies the agent's lines, as an accepted change.
    assert cs.accept(P, conflict.id) == changed((3, ["agent3"]))
    assert cs.file(P).baseline == changed((3, ["agent3"]))
    assert not cs.file(P).open


def test_conflict_survives_shifts_and_reject_keeps_user_text() -> None:
    cs = Changeset(1)
    user = changed((6, ["user"]))
    agent = changed((1, ["a", "b", "c"]), (6, ["agent"]))
    outcome = cs.write(P, agent, editor_text=user, agent_read=TEN)
    conflict_id = outcome.conflicts[0].id
    assert outcome.conflicts[0].new_start == 8
    pending = next(h for h in cs.hunks(P) if h.status == "pending")
    cs.reject(P, pending.id)  # three lines back to one: the conflict moves up by two
    conflict = next(h for h in cs.hunks(P) if h.id == conflict_id)
    assert (conflict.new_start, conflict.new_lines) == (6, ["user\n"])
    assert cs.accept(P) == user  # accept-all leaves conflicts for an explicit decision
    assert cs.file(P).open
    assert cs.reject(P, conflict_id) == user
    assert not cs.file(P).open


def test_accept_all_with_conflicts_applies_the_agent_everywhere() -> None:
    cs = Changeset(1)
    agent = changed((0, ["agent0"]), (3, ["agent3"]))
    cs.write(P, agent, editor_text=changed((3, ["user"])), agent_read=TEN)
    assert cs.accept(P, include_conflicts=True) == agent


def test_store_tracks_what_the_agent_read_and_wrote() -> None:
    store = ReviewStore()
    store.begin_turn()
    store.note_read(P, TEN)
    first = store.write(P, changed((2, ["agent"])), editor_text=TEN)
    assert first.conflicts == []
    # The user edits line 2 (the agent's line) and line 9; the agent writes
    # again from its own last text: line 9 merges, line 2 conflicts.
    user = changed((2, ["user"]), (9, ["user9"]))
    second = store.write(P, changed((2, ["agent again"]), (5, ["five"])), editor_text=user)
    assert second.text == changed((2, ["user"]), (5, ["five"]), (9, ["user9"]))
    assert [(c.new_lines, c.proposed) for c in second.conflicts] == [
        (["user\n"], ["agent again\n"])
    ]
    # A third write that leaves line 2 alone keeps the conflict (and its id).
    third = store.write(
        P, changed((2, ["agent again"]), (5, ["five"]), (7, ["seven"])), editor_text=second.text
    )
    assert third.conflicts == []
    conflicts = [h for h in store.hunks(P) if h.status == "conflict"]
    assert [(c.id, c.new_start, c.new_lines) for c in conflicts] == [
        (second.conflicts[0].id, 2, ["user\n"])
    ]


def test_write_without_a_known_read_keeps_your_text_and_holds_each_difference() -> None:
    """Nothing tells the agent's change from the user's edits (a file gone from disk
    behind unsaved edits, never read through us): each place the texts differ waits."""
    store = ReviewStore()
    outcome = store.write(P, "agent\n2\n3\n", editor_text="user\n2\nthree\n")
    assert outcome.text == "user\n2\nthree\n"
    assert [(c.new_lines, c.proposed) for c in outcome.conflicts] == [
        (["user\n"], ["agent\n"]),
        (["three\n"], ["3\n"]),
    ]
    assert store.current is not None and store.current.turn == 1
    new = store.write("/proj/new.txt", "agent\n", editor_text=None)
    assert (new.text, new.conflicts) == ("agent\n", [])  # no file: the agent's text


# -- store: turns and summaries ---------------------------------------------------


def test_changes_summary_is_plain_msgpack_data() -> None:
    store = ReviewStore()
    store.begin_turn()
    store.record(P, TEN, changed((1, ["B"]), (7, [])), "disk")
    store.record("/proj/new.txt", None, "hello\r\n", "write")
    store.note_read("/proj/c.txt", "x\n")
    store.write("/proj/c.txt", "agent\n", editor_text="user\n")
    summary = store.changes()
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(summary)) == summary
    assert [(f["path"], f["kind"], f["turn"], f["created"], f["open"]) for f in summary] == [
        (P, "disk", 1, False, True),
        ("/proj/new.txt", "write", 1, True, True),
        ("/proj/c.txt", "write", 1, False, True),
    ]
    assert summary[0]["hunks"] == [
        {
            "id": 1,
            "status": "pending",
            "base_start": 1,
            "base_count": 1,
            "new_start": 1,
            "new_count": 1,
            "header": "@@ -2 +2 @@",
            "preview": ["-l1", "+B"],
            "proposed": None,
        },
        {
            "id": 2,
            "status": "pending",
            "base_start": 7,
            "base_count": 1,
            "new_start": 7,
            "new_count": 0,
            "header": "@@ -8 +7,0 @@",
            "preview": ["-l7"],
            "proposed": None,
        },
    ]
    assert summary[1]["hunks"][0]["preview"] == ["+hello"]
    conflict = summary[2]["hunks"][0]
    assert (conflict["status"], conflict["preview"], conflict["proposed"]) == (
        "conflict",
        ["-user", "+agent"],
        ["agent"],
    )


def test_turns_and_reviewing_an_earlier_turn() -> None:
    store = ReviewStore()
    store.begin_turn()
    t1 = changed((1, ["one"]), (5, ["five"]))
    store.record(P, TEN, t1, "disk")
    store.begin_turn()
    t2 = changed((1, ["one"]), (5, ["five"]), (8, ["eight"]))
    store.record(P, t1, t2, "disk")
    assert [cs.turn for cs in store.turns()] == [1, 2]
    assert [h.new_lines for h in store.hunks(P)] == [["eight\n"]]
    assert [f["turn"] for f in store.changes(all_turns=True)] == [2, 1]
    assert store.changes(turn=1)[0]["turn"] == 1

    # Rejecting a turn-1 hunk reverts it in today's text, not in turn 1's copy.
    assert store.reject(P, 1, turn=1) == changed((5, ["five"]), (8, ["eight"]))
    assert store.turn(2).file(P).current == changed((5, ["five"]), (8, ["eight"]))
    # ...and turn 2 does not mistake the revert for an agent change.
    assert [h.new_lines for h in store.hunks(P)] == [["eight\n"]]
    assert store.reject(P) == changed((5, ["five"]))


def test_an_earlier_turns_open_hunks_are_placed_in_the_text_a_later_turn_left() -> None:
    store = ReviewStore()
    store.begin_turn()
    t1 = changed((1, ["one"]), (5, ["five"]), (8, ["eight"]))
    store.record(P, TEN, t1, "disk")
    store.accept(P, 3)
    store.begin_turn()
    # Turn 2 adds two lines at the top and rewrites turn 1's "five".
    t2 = text("x", "y") + changed((1, ["one"]), (5, ["FIVE", "5"]), (8, ["eight"]))
    store.record(P, t1, t2, "disk")
    store.accept(P)
    rows = [
        (h["id"], h["status"], h["base_start"], h["base_count"], h["new_start"], h["new_count"])
        for h in store.changes(turn=1)[0]["hunks"]
    ]
    # Rows in the file now: moved down by two, "five" widened over turn 2's lines.
    assert rows == [
        (1, "pending", 3, 1, 3, 1),
        (2, "pending", 7, 1, 7, 2),
        (3, "accepted", 8, 1, 11, 1),  # its base rows are the turn's own
    ]
    # The turn's own change still says what it did.
    assert store.changes(turn=1)[0]["hunks"][1]["preview"] == ["-l5", "+five"]
    # Its baseline is the file now without it: turn 2's accepted lines are not its
    # difference, and where turn 2 rewrote its lines they are the text before it.
    assert store.baseline(P, 1) == text("x", "y") + changed((8, ["eight"]))
    assert store.baseline(P) == t2


def test_earlier_turn_revert_that_clashes_is_refused_without_changes() -> None:
    store = ReviewStore()
    store.begin_turn()
    t1 = changed((3, ["turn1"]))
    store.record(P, TEN, t1, "disk")
    store.begin_turn()
    store.record(P, t1, changed((3, ["turn2"])), "disk")
    with pytest.raises(ReviewError, match="turn 2 changed the same lines; review that turn first"):
        store.reject(P, 1, turn=1)
    assert store.turn(1).hunks(P)[0].status == "pending"
    assert store.turn(2).file(P).current == changed((3, ["turn2"]))
    with pytest.raises(ReviewError, match="no turn 3"):
        store.hunks(P, turn=3)
    with pytest.raises(ReviewError, match="/nowhere: no recorded changes"):
        store.reject("/nowhere")


def test_paths_are_normalised() -> None:
    store = ReviewStore()
    store.record("/proj/./sub/../a.txt", "a\n", "b\n", "disk")
    assert store.reject(P) == "a\n"


# -- patches ---------------------------------------------------------------------

# `git diff --cached` output from a scratch repository.
GIT_DIFF = """\
diff --git a/a.txt b/a.txt
index c9e9e05..9630a9f 100644
--- a/a.txt
+++ b/a.txt
@@ -1,4 +1,4 @@
-one
+ONE
 two
 three
 four
@@ -8,3 +8,4 @@ seven
 eight
 nine
 ten
+eleven
diff --git a/crlf.txt b/crlf.txt
index 8561d5d..0eea3e2 100644
--- a/crlf.txt
+++ b/crlf.txt
@@ -1,2 +1,2 @@
 line1\r
-line2\r
+LINE2\r
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index 2fa992c..0000000
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-keep
diff --git a/img.png b/img.png
index f584f40..6bf43ff 100644
Binary files a/img.png and b/img.png differ
diff --git a/mode.sh b/mode.sh
old mode 100644
new mode 100755
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..d5a09df
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+brand new
diff --git a/nonl.txt b/nonl.txt
index 20cbb4d..10f7747 100644
--- a/nonl.txt
+++ b/nonl.txt
@@ -1 +1,2 @@
-no newline
\\ No newline at end of file
+no newline
+now has one
diff --git "a/\\303\\274n\\303\\257.txt" "b/\\303\\274n\\303\\257.txt"
new file mode 100644
index 0000000..be761e0
--- /dev/null
+++ "b/\\303\\274n\\303\\257.txt"
@@ -0,0 +1 @@
+\u00fc
diff --git a/old name.txt b/new name.txt
similarity index 65%
rename from old name.txt
rename to new name.txt
index 64be963..4fb5ba0 100644
--- a/old name.txt\t
+++ b/new name.txt\t
@@ -1,4 +1,4 @@
 rename me
-please
+please now
 three
 four
diff --git a/empty.txt b/empty.txt
new file mode 100644
index 0000000..e69de29
"""

OLD_FILES = {
    "a.txt": text("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    "crlf.txt": "line1\r\nline2\r\n",
    "gone.txt": "keep\n",
    "nonl.txt": "no newline",
    "old name.txt": text("rename me", "please", "three", "four"),
}
NEW_FILES = {
    "a.txt": OLD_FILES["a.txt"].replace("one", "ONE") + "eleven\n",
    "crlf.txt": "line1\r\nLINE2\r\n",
    "gone.txt": None,
    "nonl.txt": "no newline\nnow has one\n",
    "new.txt": "brand new\n",
    "\u00fcn\u00ef.txt": "\u00fc\n",
    "new name.txt": text("rename me", "please now", "three", "four"),
    "empty.txt": "",
}


def test_parse_real_git_output() -> None:
    patches = parse_unified(GIT_DIFF)
    summary = [
        (p.old_path, p.new_path, p.new_file, p.deleted, p.rename, p.binary, len(p.hunks))
        for p in patches
    ]
    assert summary == [
        ("a.txt", "a.txt", False, False, False, False, 2),
        ("crlf.txt", "crlf.txt", False, False, False, False, 1),
        ("gone.txt", None, False, True, False, False, 1),
        ("img.png", "img.png", False, False, False, True, 0),
        ("mode.sh", "mode.sh", False, False, False, False, 0),
        (None, "new.txt", True, False, False, False, 1),
        ("nonl.txt", "nonl.txt", False, False, False, False, 1),
        (None, "\u00fcn\u00ef.txt", True, False, False, False, 1),
        ("old name.txt", "new name.txt", False, False, True, False, 1),
        (None, "empty.txt", True, False, False, False, 0),
    ]
    mode = patches[4]
    assert (mode.old_mode, mode.new_mode, mode.symlink) == ("100644", "100755", False)
    assert patches[0].hunks[1].section == "seven"
    assert patches[6].hunks[0].old_lines == ["no newline"]


def test_apply_real_git_output() -> None:
    for patch in parse_unified(GIT_DIFF):
        if patch.binary or (not patch.hunks and not patch.new_file):
            continue
        old = None if patch.new_file else OLD_FILES[patch.old_path or ""]
        assert apply_patch(old, patch) == NEW_FILES[patch.path], patch.path


def test_a_reversed_patch_gives_back_the_old_text() -> None:
    """Real git output, taken back (the review's baseline of a v2 git_patch)."""
    for patch in parse_unified(GIT_DIFF):
        if patch.binary or (not patch.hunks and not patch.new_file):
            continue
        old = None if patch.new_file else OLD_FILES[patch.old_path or ""]
        assert apply_patch(NEW_FILES.get(patch.path), reverse_patch(patch)) == old, patch.path


def test_parse_acp_v2_git_patch_with_absolute_paths() -> None:
    patch_text = (
        "diff --git /home/user/project/src/config.json /home/user/project/src/config.json\n"
        "--- /home/user/project/src/config.json\n"
        "+++ /home/user/project/src/config.json\n"
        "@@ -1,3 +1,3 @@\n"
        " {\n"
        '-  "debug": false\n'
        '+  "debug": true\n'
        " }\n"
    )
    (patch,) = parse_unified(patch_text)
    assert patch.path == "/home/user/project/src/config.json"
    assert apply_patch('{\n  "debug": false\n}\n', patch) == '{\n  "debug": true\n}\n'


def test_parse_plain_unified_diff_and_spaces_in_git_header() -> None:
    (plain,) = parse_unified("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    assert (plain.old_path, plain.new_path) == ("x", "x")
    (spaced,) = parse_unified(
        "diff --git a/dir with space/f b/dir with space/f\nold mode 100644\nnew mode 120000\n"
    )
    assert spaced.path == "dir with space/f" and spaced.symlink


@pytest.mark.parametrize(
    ("old", "patch_text", "message"),
    [
        (
            "x\n",
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-y\n+z\n",
            "f: hunk 1 (@@ -1,1 +1,1 @@) does not apply at line 1: expected 'y', found 'x'",
        ),
        (
            "a\nb\n",
            "--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n b\n-c\n+d\n",
            "f: hunk 1 (@@ -2,2 +2,2 @@) does not apply at line 3: expected 'c', found end of file",
        ),
        (
            "a\r\n",
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n",
            "f: hunk 1 (@@ -1,1 +1,1 @@) does not apply at line 1: expected 'a', found 'a' "
            "(line endings differ)",
        ),
        (None, "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", "f: file does not exist"),
        (
            "x\n",
            "--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+n\n",
            "f: patch creates the file but it already has content",
        ),
        (
            "a\n",
            "diff --git a/f b/f\nBinary files a/f and b/f differ\n",
            "f: binary patch cannot be applied as text",
        ),
    ],
)
def test_apply_patch_is_strict(old: str | None, patch_text: str, message: str) -> None:
    (patch,) = parse_unified(patch_text)
    with pytest.raises(PatchError) as info:
        apply_patch(old, patch)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("patch_text", "message"),
    [
        ("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+b\n", "is short by 1 old and 1 new lines"),
        ("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n-b\n+c\n", "hunk longer than its header"),
        ("@@ -1 +1 @@\n-a\n+b\n", "line 1: hunk before any file header"),
        ("--- a/f\n+++ b/f\n@@ -x +1 @@\n", "line 3: bad hunk header"),
    ],
)
def test_parse_rejects_malformed_hunks(patch_text: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        parse_unified(patch_text)


def test_file_patch_path_prefers_new_path() -> None:
    assert FilePatch("old", "new").path == "new"
    assert FilePatch("old", None).path == "old"


def test_held_rows_are_the_conflicts_rows_in_the_text_merged_into() -> None:
    """A conflict sits in the merged text; the preview draws it on the buffer's text,
    where the change's lines above it are not yet."""
    buffer = text("a", "mine", "c")
    merged = MergeResult(
        text("new 1", "new 2", "a", "mine"),  # two lines added above, "c" deleted
        [Conflict(3, ["mine\n"], ["MINE\n"], 1, ["mine\n"])],
    )
    assert held_rows(buffer, merged) == [(1, 1, ["MINE"])]
    # An agent's deletion of the user's lines, held: none of its lines wait there.
    merged = MergeResult(buffer, [Conflict(1, ["mine\n"], [], 1, ["mine\n"])])
    assert held_rows(buffer, merged) == [(1, 1, [])]


def test_a_binary_file_is_one_whole_change_listed_after_the_turns_texts() -> None:
    store = ReviewStore()
    store.begin_turn()
    store.record("/p/a.txt", "x\n", "y\n", "disk")
    store.record_binary("/p/logo.png", b"\0old", 4, 2150, existed=True, kind="disk")
    store.record_binary("/p/logo.png", None, None, 3000, existed=False, kind="disk")
    [text, binary] = store.changes()
    assert text["path"] == "/p/a.txt" and "binary" not in text
    assert binary["hunks"] == [] and (binary["created"], binary["deleted"]) == (False, False)
    assert binary["binary"] == {"status": "pending", "size": 3000, "before_size": 4,
                                "restorable": True, "about": "binary, 2.9 KB"}  # fmt: skip
    assert store.open_hunks() == 2  # the text's hunk, and the binary file as one
    found = store.binary("/p/logo.png")
    assert found is not None and found.decide("reject") == b"\0old"  # the first before stays
    assert store.open_hunks() == 1


def test_a_binary_file_whose_bytes_were_not_kept_cannot_be_rejected() -> None:
    store = ReviewStore()
    store.begin_turn()
    change = store.record_binary("/p/big.bin", None, 3 << 20, None, existed=True, kind="disk")
    assert change.summary()["deleted"] and change.about == "binary, 3.0 MB"
    with pytest.raises(ReviewError, match="cannot be restored"):
        change.decide("reject")
    assert change.open
    made = store.record_binary("/p/new.bin", None, None, 1, existed=False, kind="disk")
    assert made.decide("reject") is None and made.about == "binary, 1 byte"  # removed
