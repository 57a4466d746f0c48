"""Transcript blocks: every row maps to its block, after appends and in-place redraws."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.nvim.conftest import RENDER, Editor
from tests.nvim.screen import Screen

# Draws render ops into a transcript buffer of no chat, as a chat's batch does.
DRAW = """
_G.draw = function(buf, blocks, ops)
  local render = require("acp.chat.render")
  local following = render.begin(buf)
  for _, op in ipairs(ops) do
    if op.op == "append" then
      render.append(buf, blocks, op)
    else
      render.block(buf, blocks, op)
    end
  end
  render.done(buf, following)
end
"""


def test_block_at_maps_every_row_after_appends_and_redraws(editor: Editor) -> None:
    editor.lua(DRAW)
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
        local render, blocks_of = require("acp.chat.render"), require("acp.chat.blocks")
        local buf = vim.api.nvim_create_buf(false, true)
        local blocks = blocks_of.new()
        _G.draw(buf, blocks, ...)
        local owners = {}
        for row = 0, vim.api.nvim_buf_line_count(buf) - 1 do
          local id, _, first = blocks_of.block_at(buf, blocks, row)
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


def test_a_chunk_streamed_onto_a_long_line_does_not_copy_the_line(editor: Editor) -> None:
    """A paragraph that streams as one line of 100k characters: each chunk lands at
    its end, and appending one does not read the line back (a copy of all of it,
    100 KB of Lua garbage a chunk, so a stream's cost grew with the square of the
    line). A write of anything else to the transcript between two chunks (here the
    block redrawn) is seen: the next chunk still lands at the line's end."""
    editor.lua(DRAW)
    used_kb, line = editor.lua(
        """
        local buf = vim.api.nvim_create_buf(false, true)
        local blocks = require("acp.chat.blocks").new()
        local chunk = { op = "append", id = "m", text = string.rep("word ", 20) }
        _G.draw(buf, blocks, { { op = "block", id = "m", kind = "agent", lines = { "" } } })
        _G.draw(buf, blocks, { { op = "append", id = "m", text = string.rep("x", 100000) }, chunk })
        local render = require("acp.chat.render")
        local following = render.begin(buf)
        collectgarbage()
        collectgarbage("stop")
        local before = collectgarbage("count")
        for _ = 1, 10 do
          render.append(buf, blocks, chunk)
        end
        local used = collectgarbage("count") - before
        collectgarbage("restart")
        render.done(buf, following)
        _G.draw(buf, blocks, { { op = "block", id = "m", kind = "agent", lines = { "redrawn" } }, chunk, chunk })
        return { used, vim.api.nvim_buf_get_lines(buf, 0, -1, false) }
        """
    )
    assert line == ["redrawn" + "word " * 40]
    assert used_kb < 20  # one read of the line would be ~100 KB


# Each row's block as the Lua side finds it (acp.chat.blocks.block_at), and the text.
_OWNERS = """
local buf, blocks = _G.model_buf, _G.model_blocks
local owners = {}
for row = 0, vim.api.nvim_buf_line_count(buf) - 1 do
  local ok, id = pcall(require("acp.chat.blocks").block_at, buf, blocks, row)
  owners[#owners + 1] = ok and (id or vim.NIL) or ("error: " .. id)
end
return { vim.api.nvim_buf_get_lines(buf, 0, -1, false), owners }
"""


def _shown(blocks: list[tuple[str, list[str]]]) -> tuple[list[str], list[str | None]]:
    """A transcript of ``blocks`` (id, lines): its lines, and the block of each row
    (a separator belongs to the block above it)."""
    if not blocks:
        return [""], [None]
    lines: list[str] = []
    owners: list[str | None] = []
    for index, (block_id, rows) in enumerate(blocks):
        if index:
            lines.append("")
            owners.append(blocks[index - 1][0])
        lines += rows
        owners += [block_id] * len(rows)
    return lines, owners


def test_random_ops_keep_every_row_with_its_block(editor: Editor) -> None:
    """Seeded sequences of what Python sends (new blocks, whole and partial redraws,
    appends, turns cut out of view and put back, blocks dropped anywhere) in batches:
    after each, the text and every row's block are what the ops say. A block that lost
    its row once stopped Neovim at a hit-enter prompt from the screen's decoration
    provider."""
    rng = random.Random(26)
    editor.lua(
        "_G.model_buf = vim.api.nvim_create_buf(false, true)"
        "; _G.model_blocks = require('acp.chat.blocks').new()"
        "; vim.api.nvim_win_set_buf(0, _G.model_buf)"
    )
    shown: list[tuple[str, list[str]]] = []
    hidden: dict[str, list[tuple[str, list[str]]]] = {}
    made = 0
    for _ in range(250):
        ops: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 4)):
            pick = rng.random()
            if pick < 0.3 or not shown:
                made += 1
                rows = [f"#### b{made}"] + [f"l{rng.randrange(99)}" for _ in range(rng.randrange(4))]
                shown.append((f"b{made}", rows))
                ops.append({"op": "block", "id": f"b{made}", "kind": "tool", "lines": rows})
                continue
            index = rng.randrange(len(shown))
            block_id, old = shown[index]
            if pick < 0.45:  # redrawn whole
                rows = [old[0]] + [f"r{rng.randrange(99)}" for _ in range(rng.randrange(5))]
                ops.append({"op": "block", "id": block_id, "kind": "tool", "lines": rows})
            elif pick < 0.6:  # some rows redrawn (the header again when from the first)
                start = rng.randrange(len(old) + 1)
                end = rng.randrange(max(start, 1), len(old) + 1)
                new = ([old[0]] if start == 0 else []) + ["p"] * rng.randrange(3)
                rows = old[:start] + new + old[end:]
                ops.append({"op": "block", "id": block_id, "kind": "tool", "lines": new,
                            "start": start, "end": end})  # fmt: skip
            elif pick < 0.8:  # streamed onto
                text = rng.choice(["a", "b\nc", "\n", "d\n"])
                first, *more = text.split("\n")
                rows = [*old[:-1], old[-1] + first, *more]
                ops.append({"op": "append", "id": block_id, "text": text})
            elif pick < 0.85:  # a turn cut out of view
                key = f"k{made}-{len(hidden)}"
                hidden[key], shown = shown[index:], shown[:index]
                ops.append({"op": "cut", "turns": [{"key": key, "block": block_id}]})
                continue
            elif pick < 0.9:  # blocks taken out for good, anywhere (a mark, notes)
                gone = rng.sample([b for b, _ in shown], min(len(shown), rng.randint(1, 2)))
                shown = [(b, rows) for b, rows in shown if b not in gone]
                ops.append({"op": "drop", "blocks": gone})
                continue
            else:  # a branch put back
                if hidden:
                    key = rng.choice(sorted(hidden))
                    shown += hidden.pop(key)
                    ops.append({"op": "uncut", "turns": [key]})
                continue
            shown[index] = (block_id, rows)
        editor.lua(
            "local ops = ...; local render = require('acp.chat.render')"
            "; local following = render.begin(_G.model_buf)"
            "; for _, op in ipairs(ops) do"
            "   if op.op == 'append' then render.append(_G.model_buf, _G.model_blocks, op)"
            "   elseif op.op == 'cut' then render.cut(_G.model_buf, _G.model_blocks, op.turns)"
            "   elseif op.op == 'uncut' then render.uncut(_G.model_buf, _G.model_blocks, op.turns)"
            "   elseif op.op == 'drop' then render.drop(_G.model_buf, _G.model_blocks, op.blocks)"
            "   else render.block(_G.model_buf, _G.model_blocks, op) end"
            " end; render.done(_G.model_buf, following)",
            ops,
        )
        assert editor.lua(_OWNERS) == list(_shown(shown)), ops


def test_tool_call_updates_rewrite_only_their_rows(editor: Editor) -> None:
    """The ops of a chat's tool call updates (header only, content, locations, a
    prompt) leave the buffer as whole redraws would, with the block's highlights."""
    editor.lua(DRAW)
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import (
        Location,
        PermissionOption,
        PermissionPrompt,
        TextPart,
        ToolCallPatch,
    )
    from tests.fakes.editor import RecordingEditor

    recording = RecordingEditor()
    chat = Chat(1, "fake", recording)
    diff = "```diff\n@@ -1 +1 @@\n-old\n+new\n```"
    chat.on_tool_call(ToolCallPatch("c", title="Edit", kind="edit", content=[TextPart(diff)]))
    chat.on_tool_call(ToolCallPatch("other", title="Other"))
    chat.on_tool_call(ToolCallPatch("c", title="Edit a.txt", status="in_progress"))
    chat.on_tool_call(ToolCallPatch("c", locations=[Location("/w/a.txt", 3)]))
    chat.on_permission("c", PermissionPrompt("p1", [PermissionOption("ok", "OK", key="a")]))
    chat.on_tool_call(ToolCallPatch("c", append_content=[TextPart("more")]))
    chat.on_tool_call(ToolCallPatch("c", status="completed"))
    ops = recording.ops[1]
    assert [op.get("start") for op in ops if op["op"] == "block"] == [None, None, 0, 7, 8, 2, 0]
    shown = editor.lua(
        """
        local render = require("acp.chat.render")
        local buf = vim.api.nvim_create_buf(false, true)
        _G.blocks = require("acp.chat.blocks").new() -- kept, as a chat keeps its blocks
        local blocks = _G.blocks
        _G.draw(buf, blocks, ...)
        vim.api.nvim_win_set_buf(0, buf)
        local block = blocks.by_id.c
        return { vim.api.nvim_buf_get_lines(buf, 0, -1, false), block.locations, block.permission.row }
        """,
        ops,
    )
    lines, locations, prompt_row = shown
    groups = Screen(editor).rows(editor.lua("return vim.api.nvim_get_current_win()"), 0, len(lines))
    whole = recording.transcript(1)
    assert lines == [*whole["c"], "", *whole["other"]]
    assert whole["c"][:2] == ["#### Edit a.txt", "`edit` · completed"]
    assert sorted(groups) == sorted(
        [
            [0, "AcpToolHeader"],
            [1, "AcpToolCompleted"],
            [3, "AcpDiffHunk"],
            [4, "AcpDiffDelete"],
            [5, "AcpDiffAdd"],
            [8, "AcpLocation"],
            [9, "AcpPermission"],
            [10, "AcpPermissionKey"],
            [12, "AcpToolHeader"],
            [13, "AcpToolPending"],
        ]
    )
    assert locations == [{"row": 8, "path": "/w/a.txt", "line": 3}]
    assert prompt_row == 9


def test_a_flood_keeps_its_colors_and_is_wrapped_plain_until_it_settles(editor: Editor) -> None:
    """The transcript's own syntax (syntax/acpchat.vim) colors the markdown a reply is
    read by, a flood included: nothing is switched off during it, so nothing loads
    again after it (markdown.vim took a frame to). List-aware wrapping costs 10-20
    µs a row: a flood is wrapped plain and list-aware again once it stops; a reply
    at a reading pace keeps it."""
    editor.setup()
    status = editor.open_chat()
    chat, buf = status["chat"], status["transcript_buf"]
    win = editor.lua("return vim.fn.win_findbuf(...)[1]", buf)

    def apply(*ops: dict[str, object]) -> None:
        editor.lua(RENDER, chat, list(ops))

    def sync() -> str:
        """How many lines above the window syntax looks back, as `:syntax sync` says."""
        output = editor.lua(
            "return vim.api.nvim_buf_call(..., function()"
            " return vim.api.nvim_exec2('syntax sync', {output = true}).output end)",
            buf,
        )
        return str(output)

    def shown_as(lnum: int, col: int = 1) -> str:
        """The highlight group the window draws line ``lnum`` with, at ``col``."""
        return str(
            editor.lua(
                "local win, lnum, col = ...; return vim.api.nvim_win_call(win, function()"
                " return vim.fn.synIDattr(vim.fn.synIDtrans(vim.fn.synID(lnum, col, 1)), 'name') end)",
                win,
                lnum,
                col,
            )
        )

    loads = "_G.syntax_loads"
    editor.lua(
        f"{loads} = 0; vim.api.nvim_create_autocmd('Syntax', {{buffer = ...,"
        f" callback = function() {loads} = {loads} + 1 end}})",
        buf,
    )
    breakindentopt = "return vim.wo[...].breakindentopt"
    apply({"op": "block", "id": "m9", "kind": "agent", "lines": ["## Agent", ""]})
    for n in range(5):
        apply({"op": "append", "id": "m9", "text": f"a line at a reading pace {n}\n"})
    header = editor.transcript().index("## Agent") + 1
    assert editor.lua("return vim.bo[...].syntax", buf) == "acpchat"
    assert shown_as(header) == "Title"
    assert sync() == "syncing starts 10 lines before top line"
    assert editor.lua(breakindentopt, win) == "list:-1"

    flood = ["```lua", "local x = 1", "```", "> a quote", "- an `item` with **bold**"] * 10
    apply({"op": "append", "id": "m9", "text": "".join(f"{line}\n" for line in flood)})
    assert editor.lua(breakindentopt, win) == ""
    fence = editor.transcript().index("```lua") + 1
    assert editor.transcript()[fence - 1 : fence + 5] == flood[:6]
    # Colored while it floods: a code block, a quote, a list item's marker, code, bold.
    assert shown_as(fence + 1) == "String"
    assert shown_as(fence + 3) == "Comment"
    assert shown_as(fence + 4) == "Special"
    assert shown_as(fence + 4, 6) == "String"
    bold = (
        "local win, lnum = ...; return vim.api.nvim_win_call(win, function()"
        " return vim.fn.synIDattr(vim.fn.synIDtrans(vim.fn.synID(lnum, 22, 1)), 'bold') end)"
    )
    assert editor.lua(bold, win, fence + 4) == "1"
    editor.wait(f"vim.wo[{win}].breakindentopt == 'list:-1'", what="the flood to settle")
    assert editor.lua(f"return {loads}") == 0  # no syntax was loaded again
    assert sync() == "syncing starts 10 lines before top line"
    assert editor.transcript()[-2] == flood[-1]


def test_a_window_at_the_transcripts_end_shows_each_batchs_last_line(editor: Editor) -> None:
    """A transcript window whose cursor is on its last line follows what a batch adds:
    drawn as Neovim draws after the batch (not a full redraw), its last row on an
    attached UI is the end of the transcript's last line: a long block, a stream onto
    it, a block of wrapped lines; a window moved up stays where it was."""
    editor.setup()
    status = editor.open_chat()
    chat, buf = status["chat"], status["transcript_buf"]
    win = editor.lua("return vim.fn.bufwinid(...)", buf)
    screen = Screen.of(editor)

    def last_row() -> str:
        screen.draw(full=False)
        row, col, height, width = editor.lua(
            "local i = vim.fn.getwininfo(...)[1]; return {i.winrow + i.winbar, i.wincol, i.height, i.width}",
            win,
        )
        return screen.text(row + height - 1, col, width).rstrip()

    def apply(*ops: dict[str, object]) -> str:
        editor.lua(RENDER, chat, list(ops))
        return last_row()

    lines = ["## Agent", *(f"line {i}" for i in range(200))]
    assert apply({"op": "block", "id": "m1", "kind": "agent", "lines": lines}) == "line 199"
    assert apply({"op": "append", "id": "m1", "text": "\nmore\nthe end"}) == "the end"
    wide = "word " * 60 + "tail"  # wraps over 3 rows of the window
    wrapped = {"op": "block", "id": "m2", "kind": "agent", "lines": ["## Agent", wide, wide]}
    assert apply(wrapped).endswith("word tail")
    editor.lua("vim.api.nvim_win_set_cursor(..., {1, 0})", win)
    shown = last_row()
    assert apply({"op": "append", "id": "m2", "text": "\nafter"}) == shown


def test_luajit_traces_none_of_our_functions(editor: Editor) -> None:
    """Decision 0068: a function of ours called thousands of times starts no trace
    of LuaJIT's (its hot loops and calls run in the interpreter); other code, such
    as the loop after it, still does."""
    editor.lua(DRAW)
    started = editor.lua(
        """
        if not jit then
          return vim.NIL
        end
        local render, blocks_of = require("acp.chat.render"), require("acp.chat.blocks")
        local buf = vim.api.nvim_create_buf(false, true)
        local blocks = blocks_of.new()
        local ops = {}
        for i = 1, 30 do
          ops[i] = { op = "block", id = "b" .. i, kind = "tool", lines = { "#### b" .. i, "x" } }
        end
        _G.draw(buf, blocks, ops)
        local started = {}
        local function on_trace(what, _, fn)
          if what == "start" then
            table.insert(started, require("jit.util").funcinfo(fn).source)
          end
        end
        jit.attach(on_trace, "trace")
        for _ = 1, 3000 do
          blocks_of.block_at(buf, blocks, 45)
        end
        local sum = 0
        for i = 1, 3000 do
          sum = sum + i % 7
        end
        jit.attach(on_trace)
        return started
        """
    )
    if started is None:
        pytest.skip("this Neovim's Lua is not LuaJIT")
    ours = [source for source in started if "/lua/acp/" in source]
    assert ours == [] and len(started) > 0, started


def test_an_op_neovim_refuses_costs_only_itself(editor: Editor) -> None:
    """A block whose line holds a line break (as codex's multi-line tool titles once
    made) is refused by Neovim: the ops after it in its batch were lost, the
    transcript left modifiable. Now they are drawn, and the user told once."""
    editor.setup()
    status = editor.open_chat()
    chat, buf = status["chat"], status["transcript_buf"]
    refused = {"op": "block", "id": "bad", "kind": "tool", "lines": ["#### make\nrm -rf build"]}
    ops = [
        {"op": "block", "id": "m", "kind": "agent", "lines": ["## Agent", "before"]},
        refused,
        {"op": "append", "id": "m", "text": " and after"},
        {"op": "block", "id": "n", "kind": "agent", "lines": ["## Agent", "the next block"]},
    ]
    editor.lua(RENDER, chat, ops)
    editor.lua(RENDER, chat, [refused])
    assert editor.transcript() == ["## Agent", "before and after", "", "## Agent", "the next block"]
    assert not editor.lua("return vim.bo[...].modifiable", buf)
    told = [n["msg"] for n in editor.lua("return _G.acp_notices") if "could not show" in n["msg"]]
    assert len(told) == 1 and "contains newlines" in told[0]
