"""Transcript blocks: every row maps to its block, after appends and in-place redraws."""

from __future__ import annotations

from tests.nvim.conftest import Editor


def test_block_at_maps_every_row_after_appends_and_redraws(editor: Editor) -> None:
    ops = [
        {"op": "block", "id": f"b{i}", "kind": "tool", "lines": [f"#### b{i}", "x"]}
        for i in range(40)
    ]
    ops += [
        # Grow a block in the middle, shrink another, stream onto the last one.
        {"op": "block", "id": "b7", "kind": "tool", "lines": ["#### b7", "a", "b", "c", "d"]},
        {"op": "block", "id": "b20", "kind": "tool", "lines": ["#### b20"]},
        {"op": "append", "id": "b39", "text": "y\nz"},
    ]
    owners = editor.lua(
        """
        local render = require("acp.render")
        local buf = vim.api.nvim_create_buf(false, true)
        local blocks = render.new_blocks()
        render.apply(buf, blocks, ...)
        local owners = {}
        for row = 0, vim.api.nvim_buf_line_count(buf) - 1 do
          local id, _, first = render.block_at(buf, blocks, row)
          local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
          owners[#owners + 1] = { line, id, first }
        end
        return owners
        """,
        ops,
    )
    # Expected: a block owns its header row and every row up to the next header.
    owner, first_row, expected = None, None, []
    for row, (line, _, _) in enumerate(owners):
        if line.startswith("#### "):
            owner, first_row = line[5:], row
        expected.append([line, owner, first_row])
    assert owners == expected
    assert [line for line, _, _ in owners if line.startswith("#### b7")] == ["#### b7"]
    lines = [line for line, _, _ in owners]
    assert lines[lines.index("#### b7") : lines.index("#### b7") + 6] == [
        "#### b7",
        "a",
        "b",
        "c",
        "d",
        "",
    ]
    assert lines[-3:] == ["#### b39", "xy", "z"]
