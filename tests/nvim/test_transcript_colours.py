"""The transcript's colours as a user sees them (an attached UI's screen), drawn for
the rows on screen from their blocks (decision 0050): the same after scrolling,
closing and opening folds, a tool call updated in place and a copied transcript;
and what that saves: no stored mark per row, no undo history, a turn's garbage
collected once it ends."""

from __future__ import annotations

from typing import Any

from tests.nvim.conftest import RENDER, Editor
from tests.nvim.screen import Screen

DIFF = [
    "```diff",
    "diff --git a/x.py b/x.py",
    "--- a/x.py",
    "+++ b/x.py",
    "@@ -1,30 +1,30 @@",
    *[row for n in range(30) for row in (f"-old {n}", f"+new {n}", f" same {n}")],
    "```",
]


def tool_lines(diff: list[str]) -> list[str]:
    return ["#### Edit x.py", "`edit` · completed", *diff, "→ /w/x.py:3"]


def expected(lines: list[str]) -> list[list[Any]]:
    """[row, group] for every coloured row, derived from the text alone: each block
    below starts at a header (or is a notice of one row kind)."""
    groups: list[list[Any]] = []
    kind, in_hunk = None, False
    for row, line in enumerate(lines):
        if line.startswith("#### "):
            kind, in_hunk = "tool", False
            groups.append([row, "AcpToolHeader"])
        elif line.startswith("### Thinking"):
            kind = "thought"
            groups.append([row, "AcpThoughtHeader"])
        elif line.startswith("## Agent"):
            kind = "agent"
            groups.append([row, "AcpAgentHeader"])
        elif line.startswith("*— "):
            kind = None
            groups.append([row, "AcpTurnEnd"])
        elif line == "":
            continue
        elif kind == "thought":
            groups.append([row, "AcpThought"])
        elif kind == "tool":
            if line.startswith("`edit` · "):
                groups.append([row, "AcpToolCompleted"])
            elif line.startswith("→ "):
                groups.append([row, "AcpLocation"])
            elif line.startswith("@@"):
                in_hunk = True
                groups.append([row, "AcpDiffHunk"])
            elif line.startswith(("diff ", "```")):
                in_hunk = False
            elif in_hunk and line[:1] in "+-":
                groups.append([row, "AcpDiffAdd" if line[0] == "+" else "AcpDiffDelete"])
    return groups


def seen(editor: Editor, screen: Screen, win: int) -> list[list[Any]]:
    """[row, group] for every row of ``win``'s buffer, a screenful at a time from the
    top (each screen drawn anew after scrolling there)."""
    count = editor.lua("return vim.api.nvim_buf_line_count(vim.api.nvim_win_get_buf(...))", win)
    rows: list[list[Any]] = []
    top = 1
    while top <= count:
        bottom = editor.lua(
            "local win, top = ...; return vim.api.nvim_win_call(win, function()"
            " vim.fn.winrestview({topline = top, lnum = top}); vim.cmd('redraw')"
            " return vim.fn.line('w$') end)",
            win,
            top,
        )
        rows += screen.rows(win, top - 1, bottom)
        top = bottom + 1
    return rows


def chat_with_a_long_transcript(editor: Editor) -> tuple[dict[str, Any], int]:
    editor.setup()
    status = editor.open_chat()
    ops = [
        {"op": "block", "id": "th", "kind": "thought", "lines": ["### Thinking", "> first"]},
        {"op": "append", "id": "th", "text": "\n> second\n> third"},
        {
            "op": "block",
            "id": "t",
            "kind": "tool",
            "status": "completed",
            "lines": tool_lines(DIFF),
        },
        {
            "op": "block",
            "id": "a",
            "kind": "agent",
            "lines": ["## Agent", *(f"row {n}" for n in range(60))],
        },
        {"op": "block", "id": "end", "kind": "turn", "lines": ["*— end_turn —*"]},
    ]
    ops[2]["locations"] = [{"row": len(tool_lines(DIFF)) - 1, "path": "/w/x.py", "line": 3}]
    editor.lua(RENDER, status["chat"], ops)
    win = editor.lua("return vim.fn.win_findbuf(...)[1]", status["transcript_buf"])
    return status, win


def test_every_row_shows_its_blocks_colours_after_scrolling_and_an_update(editor: Editor) -> None:
    status, win = chat_with_a_long_transcript(editor)
    screen = Screen.of(editor)
    lines = editor.transcript()
    assert len(lines) > 3 * editor.lua("return vim.api.nvim_win_get_height(...)", win)
    assert seen(editor, screen, win) == expected(lines)
    # The tool call's diff replaced in place by a shorter one (its rows and hunks
    # move): the colours follow the new text.
    shorter = ["```diff", "@@ -1 +1 @@", "-a", "+b", "```", "plain text", "+not a change"]
    editor.lua(
        RENDER,
        status["chat"],
        [{"op": "block", "id": "t", "status": "failed", "start": 1, "end": 2 + len(DIFF),
          "lines": ["`edit` · failed", *shorter],
          "locations": [{"row": 2 + len(shorter), "path": "/w/x.py", "line": 3}]}],
    )  # fmt: skip
    lines = editor.transcript()
    want = [
        [row, "AcpToolFailed" if group == "AcpToolCompleted" else group]
        for row, group in expected(lines)
    ]
    assert seen(editor, screen, win) == want
    head = lines.index("#### Edit x.py")
    assert [row for row, group in want if group.startswith("AcpDiff")] == [
        head + 3,
        head + 4,
        head + 5,
    ]


def test_a_closed_fold_shows_its_header_across_the_window_and_opens_coloured(
    editor: Editor,
) -> None:
    _, win = chat_with_a_long_transcript(editor)
    screen = Screen.of(editor)
    lines = editor.transcript()
    head = lines.index("#### Edit x.py")
    editor.lua(
        "local win, lnum = ...; vim.api.nvim_set_current_win(win)"
        "; vim.api.nvim_win_set_cursor(win, {lnum, 0}); vim.cmd('normal! zc')",
        win,
        head + 1,
    )
    assert editor.lua(f"return vim.fn.foldclosed({head + 1})") == head + 1
    screen.draw()
    assert screen.groups(win, head + 1) == {"AcpToolHeader"}
    assert screen.edge(win, head + 1) == {"AcpToolHeader"}  # to the window's last column
    # Below the fold, the next block's rows as before.
    agent = lines.index("## Agent")
    assert screen.rows(win, agent, agent + 3) == [[agent, "AcpAgentHeader"]]
    editor.nvim.command("normal! zo")
    assert seen(editor, screen, win) == expected(lines)


def test_a_rewound_transcript_shows_the_same_colours(editor: Editor) -> None:
    """A rewind takes blocks out of view and puts them back (cut, uncut): their rows
    are coloured as before."""
    status, win = chat_with_a_long_transcript(editor)
    screen = Screen.of(editor)
    original = seen(editor, screen, win)
    editor.lua(RENDER, status["chat"], [{"op": "cut", "turns": [{"key": "k", "block": "t"}]}])
    assert "#### Edit x.py" not in editor.transcript()
    editor.lua(RENDER, status["chat"], [{"op": "uncut", "turns": ["k"]}])
    assert seen(editor, screen, win) == original


def test_rows_cost_no_stored_marks_and_the_transcript_no_undo_history(editor: Editor) -> None:
    """What the screen-drawn colours save: a tool call with a 90-row diff, a thought
    of 3 rows and a notice keep one mark a block (where it starts) and one a header."""
    status, _ = chat_with_a_long_transcript(editor)
    marks, blocks = editor.lua(
        """
        local chat = require('acp.chat.registry').chats[...]
        local marks = vim.api.nvim_buf_get_extmarks(chat.transcript, -1, 0, -1, {})
        return {#marks, #chat.blocks.order}
        """,
        status["chat"],
    )
    assert blocks == 4 and marks <= 2 * blocks
    buf = status["transcript_buf"]
    assert editor.lua("return vim.bo[...].undolevels", buf) == -1
    assert editor.lua("return vim.fn.undotree(...).seq_last", buf) == 0


def test_a_turns_garbage_is_collected_once_it_ends_if_it_is_worth_it(editor: Editor) -> None:
    """After AcpTurnEnd the plugin runs the Lua collector to the end of two full
    cycles (in slices between events), so Neovim's heap does not keep a turn's
    garbage; a turn that left little since the last collection costs no cycle."""
    editor.setup()
    editor.open_chat()
    editor.lua(
        """
        _G.steps, _G.cycles = 0, 0
        local collect = collectgarbage
        _G.collectgarbage = function(what, ...)
          local done = collect(what, ...)
          if what == 'step' then
            _G.steps = _G.steps + 1
            if done then _G.cycles = _G.cycles + 1 end
          end
          return done
        end
        """
    )

    def turn(prompt: str, ended: int) -> None:
        editor.lua("require('acp').send(...)", prompt)
        editor.wait_event("AcpTurnEnd", count=ended)

    # What a large configuration keeps live (~5 MB): a tenth of it is worth a cycle.
    editor.lua("_G.ballast = {} for i = 1, 7e4 do _G.ballast[i] = {i} end")
    turn("hi", 1)  # the first turn's end: nothing was collected before
    editor.wait("_G.cycles >= 2", what="two collection cycles after the turn")
    editor.lua("_G.steps, _G.cycles = 0, 0")
    turn("hi", 2)
    # A collection would have begun before this timer's callback: none did.
    editor.lua("vim.defer_fn(function() _G.later = true end, 0)")
    editor.wait("_G.later")
    assert editor.lua("return _G.steps") == 0
    # Garbage enough to be worth two cycles (~7 MB), left behind by work before
    # the turn's end: its end frees it.
    before = editor.lua(
        "local junk = {} for i = 1, 1e5 do junk[i] = {i} end return collectgarbage('count')"
    )
    editor.lua("_G.cycles = 0")
    turn("hi", 3)
    editor.wait("_G.cycles >= 2", what="two collection cycles after the turn")
    assert editor.lua("return collectgarbage('count')") < before - 2048


def test_a_streamed_row_leaves_little_lua_garbage(editor: Editor) -> None:
    """A batch that streams a row onto a message, in a window that folds the
    transcript, leaves under 1.5 KB of Lua garbage, the row's text included (3 KB
    before decision 0100): what a turn leaves is what brings the turn end's
    collection (decision 0070), and a stream is many such batches."""
    editor.setup()
    status = editor.open_chat()
    editor.lua(RENDER, status["chat"], [{"op": "block", "id": "m", "kind": "agent", "lines": ["## Agent"]}])
    per_batch_kb = editor.lua(
        """
        local chat, count = ...
        local host = require('acp.host')
        local batches = {}
        for i = 1, count do -- made before counting: Python's batches arrive decoded
          local text = ('\\nrow %05d of the message, long enough to be a row'):format(i)
          batches[i] = { { kind = 'render', chat = chat, ops = { { op = 'append', id = 'm', text = text } } } }
        end
        host.apply(batches[1])
        collectgarbage()
        collectgarbage('stop')
        local before = collectgarbage('count')
        for i = 2, count do
          host.apply(batches[i])
        end
        local used = collectgarbage('count') - before
        collectgarbage('restart')
        return used / (count - 1)
        """,
        status["chat"],
        51,
    )
    assert editor.transcript()[-1] == "row 00051 of the message, long enough to be a row"
    assert per_batch_kb < 1.5


def test_a_turns_end_is_on_screen_before_its_garbage_is_collected(editor: Editor) -> None:
    """What a turn's last batch changes (its last words, its stop line, the winbar)
    is drawn before the turn's Lua garbage is collected. The collection walks all
    that is live in Neovim's Lua heap, ~1 ms of CPU per MB (tens of milliseconds
    with a large configuration), and its slices, scheduled callbacks, ran before
    Neovim drew again: the end of every answer reached the screen that much later.
    The test waits outside Neovim (its next notification), so Neovim's loop runs as
    for a user: a wait in vim.wait never draws."""
    editor.setup()
    editor.open_chat()
    Screen.of(editor)  # a UI attached: Neovim draws as for a user
    editor.lua(
        """
        local chan = ...
        _G.ballast = {} for i = 1, 7e4 do _G.ballast[i] = {i} end
        local draws, at_end, steps = 0, nil, 0
        vim.api.nvim_set_decoration_provider(vim.api.nvim_create_namespace('test.draws'), {
          on_start = function() draws = draws + 1 end,
        })
        local util = require('acp.util')
        local collect_garbage = util.collect_garbage
        util.collect_garbage = function()
          at_end = draws
          return collect_garbage()
        end
        local collect = collectgarbage
        _G.collectgarbage = function(what, ...)
          if what == 'step' and at_end then
            steps = steps + 1
            if steps == 1 then vim.rpcnotify(chan, 'first_step', draws > at_end) end
          end
          return collect(what, ...)
        end
        """,
        editor.nvim.channel_id,
    )
    editor.lua("require('acp').send(...)", "hi")  # the first turn's end collects (0070)
    while True:
        message = editor.nvim.next_message()
        if message[0] == "notification" and message[1] == "first_step":
            assert message[2] == [True], "the collection began before Neovim drew"
            return


def test_a_collection_between_the_collectors_cycles_runs_one(editor: Editor) -> None:
    """Garbage worth a collection that leaves the heap short of LuaJIT's own next cycle
    (twice what was live): the collector was between cycles, so one full cycle frees
    it and none follows (decision 0089); a second walked the whole heap again."""
    editor.setup()
    editor.open_chat()
    editor.lua(
        """
        _G.steps, _G.cycles, _G.steps_after = 0, 0, {}
        local collect = collectgarbage
        _G.collectgarbage = function(what, ...)
          local done = collect(what, ...)
          if what == 'step' then
            _G.steps = _G.steps + 1
            if done then
              _G.cycles = _G.cycles + 1
              -- Two loop turns on: a collection that goes on has stepped meanwhile.
              local at, after = _G.steps, _G.steps_after
              vim.schedule(function()
                vim.schedule(function() table.insert(after, _G.steps - at) end)
              end)
            end
          end
          return done
        end
        """
    )
    # What a large configuration keeps live (~5 MB).
    editor.lua("_G.ballast = {} for i = 1, 7e4 do _G.ballast[i] = {i} end")
    editor.lua("require('acp').send('hi')")
    editor.wait_event("AcpTurnEnd", count=1)
    editor.wait("#_G.steps_after >= 2", what="the first turn's end: two cycles")
    editor.lua("_G.steps, _G.cycles, _G.steps_after = 0, 0, {}")
    # ~1.4 MB of garbage: over a tenth of the heap, far from doubling it.
    before = editor.lua(
        "local junk = {} for i = 1, 2e4 do junk[i] = {i} end return collectgarbage('count')"
    )
    editor.lua("require('acp').send('hi')")
    editor.wait_event("AcpTurnEnd", count=2)
    editor.wait("#_G.steps_after >= 1", what="a collection cycle after the turn")
    assert editor.lua("return {_G.cycles, _G.steps_after[1]}") == [1, 0]
    assert editor.lua("return collectgarbage('count')") < before - 1024


def test_a_block_that_lost_its_row_is_drawn_plain_and_reported_once(editor: Editor) -> None:
    """Seen once: a block without its row made the screen's decoration provider fail,
    and Neovim stopped at a hit-enter prompt (no request answered) on that redraw and
    the next. Now those rows are drawn plain, one notice names the block, and Neovim
    goes on."""
    _, win = chat_with_a_long_transcript(editor)
    screen = Screen.of(editor)
    editor.lua(
        "local chat = require('acp.chat.registry').get(); local blocks = require('acp.chat.blocks')"
        " local block = chat.blocks.by_id['t']"
        " vim.api.nvim_buf_del_extmark(chat.transcript, blocks.ns, block.mark); blocks.moved(chat.blocks)"
    )
    for _ in range(2):
        seen(editor, screen, win)
        assert editor.lua("return vim.api.nvim_get_mode()") == {"mode": "n", "blocking": False}
    editor.wait("#_G.acp_notices > 0", what="the notice")
    [notice] = editor.lua("return _G.acp_notices")
    assert "drawn plain where its blocks are lost: transcript block #2 (tool" in notice["msg"]
