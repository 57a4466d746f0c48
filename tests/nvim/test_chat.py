"""The chat as a user sees it, on a real headless Neovim against real ACP agents."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.nvim.conftest import FAKE, RENDER, Editor, wait_gone
from tests.nvim.screen import Screen


@pytest.mark.parametrize("version", [1, 2])
def test_streamed_reply_appears_in_transcript(editor: Editor, version: int) -> None:
    editor.setup(protocol_version=version)
    status = editor.open_chat()
    assert status["state"] == "ready"
    assert status["agent"] == "demo"
    assert status["protocol_version"] == version
    assert status["session_id"] == "demo-1"

    editor.lua("require('acp').send('hello there')")
    end = editor.wait_event("AcpTurnEnd")
    assert end["stop_reason"] == "end_turn"

    text = editor.transcript_text()
    assert "## You\nhello there" in text
    assert "### Thinking\n> The user wrote 11 characters. I will answer" in text
    assert "## Agent\nYou said: *hello there*" in text
    assert '```python\ndef greet(name: str) -> str:\n    return f"Hello, {name}!"\n```' in text
    # The end line: the stop reason, and what the turn used (the demo reports usage).
    assert re.search(r"\*— end_turn · [\d.]+k tokens · \$[\d.]+ —\*$", text.rstrip())
    status = editor.lua("return require('acp').status()")
    assert status["state"] == "ready" and status["stop_reason"] == "end_turn"


@pytest.mark.parametrize("version", [1, 2])
def test_soft_line_breaks_of_a_reply_join_and_hard_ones_stay(editor: Editor, version: int) -> None:
    # Streamed a character at a time: each newline comes before the line it breaks to.
    editor.setup(
        agents={"fake": editor.fake_agent("trickle")}, default_agent="fake", protocol_version=version
    )
    editor.open_chat()
    said = "Run `git\nstatus` and\n  read it:\n- one\n- two\n\n```\na\nb\n```\nend\n42"
    editor.lua("require('acp').send(...)", said)
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    reply = lines[lines.index("## Agent") + 1 :]
    assert reply[:9] == [
        "Run `git status` and read it:",
        "- one",
        "- two",
        "",
        "```",
        "a",
        "b",
        "```",
        "end",  # the last line's digits came with no more text: a hard break
    ]
    assert reply[9] == "42"


@pytest.mark.parametrize("version", [1, 2])
def test_a_reply_ending_in_line_breaks_leaves_one_blank_row_before_the_next_block(
    editor: Editor, version: int
) -> None:
    editor.setup(
        agents={"fake": editor.fake_agent("trickle")}, default_agent="fake", protocol_version=version
    )
    editor.open_chat()
    editor.lua("require('acp').send(...)", "Done.\n\n")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    reply = lines[lines.index("## Agent") + 1 :]
    assert reply[:2] == ["Done.", ""] and reply[2].startswith("*— end_turn"), reply


@pytest.mark.parametrize("version", [1, 2])
def test_transcript_is_read_only_markdown_with_distinct_foldable_thoughts(
    editor: Editor, version: int
) -> None:
    editor.setup(protocol_version=version)
    editor.lua(
        "_G.markdown_loads = 0; vim.api.nvim_create_autocmd('Syntax', {pattern = 'markdown',"
        " callback = function(ev) if vim.api.nvim_buf_get_name(ev.buf):find('^acp://') then"
        " _G.markdown_loads = _G.markdown_loads + 1 end end})"
    )
    status = editor.open_chat()
    editor.lua("require('acp').send('hi')")
    editor.wait_event("AcpTurnEnd")
    buf = status["transcript_buf"]
    assert editor.lua(f"return vim.bo[{buf}].modifiable") is False
    assert editor.lua(f"return vim.bo[{buf}].filetype") == "markdown"
    # Drawn with the transcript's own syntax, the input too; markdown.vim was never
    # loaded for either.
    assert editor.lua(f"return vim.bo[{buf}].syntax") == "acpchat"
    assert editor.lua("return {vim.bo[...].filetype, vim.bo[...].syntax}", status["input_buf"]) == [
        "markdown",
        "acpchat",
    ]
    items = editor.lua(
        "return vim.api.nvim_buf_call(..., function() return vim.fn.execute('syntax list') end)",
        buf,
    )
    assert "acpchatHeading" in items and "markdownH1" not in items
    assert editor.lua("return _G.markdown_loads") == 0
    lines = editor.transcript()
    thought_row = next(i for i, line in enumerate(lines) if line.startswith("> The user wrote"))
    win = editor.lua(f"return vim.fn.win_findbuf({buf})[1]")
    assert Screen.of(editor).at(win, thought_row) == ["AcpThought"]
    assert (
        editor.lua(
            f"return vim.api.nvim_win_call({win}, function() return vim.fn.foldlevel({thought_row + 1}) end)"
        )
        == 1
    )
    # Every row of the answer, its header included, is outside the thought's fold.
    agent = lines.index("## Agent")
    levels = editor.lua(
        """
        local win, first, last = ...
        return vim.api.nvim_win_call(win, function()
          local levels = {}
          for lnum = first, last do
            table.insert(levels, vim.fn.foldlevel(lnum))
          end
          return levels
        end)
        """,
        win,
        agent + 1,
        len(lines),
    )
    assert levels == [0] * (len(lines) - agent)


# The fold level of each line of the transcript buffer (...) in its first window.
FOLD_LEVELS = """
local win = vim.fn.win_findbuf(...)[1]
return vim.api.nvim_win_call(win, function()
  local levels = {}
  for lnum = 1, vim.api.nvim_buf_line_count(0) do
    table.insert(levels, vim.fn.foldlevel(lnum))
  end
  return levels
end)
"""


def test_fold_levels_stay_right_when_an_earlier_block_grows(editor: Editor) -> None:
    """Rows a tool call gains above a streamed message fold with the tool call (the
    fold levels know where the last block starts until rows before it change), and
    the message's rows streamed after that stay outside every fold."""
    editor.setup()
    status = editor.open_chat()
    buf = status["transcript_buf"]

    def apply(*ops: dict[str, object]) -> None:
        editor.lua(RENDER, status["chat"], list(ops))

    apply(
        {"op": "block", "id": "t", "kind": "tool", "status": "pending", "lines": ["### Tool", "a"]},
        {"op": "block", "id": "m", "kind": "agent", "lines": ["## Agent", "one"]},
        {"op": "append", "id": "m", "text": "\ntwo"},
    )
    apply({"op": "block", "id": "t", "start": 1, "end": 2, "lines": ["b", "c", "d"]})
    apply({"op": "append", "id": "m", "text": "\nthree"})
    apply({"op": "append", "id": "t", "text": "\ne"})
    apply({"op": "append", "id": "m", "text": "\nfour"})
    lines = editor.transcript()
    head = lines.index("### Tool")
    levels = editor.lua(FOLD_LEVELS, buf)
    agent = lines.index("## Agent")
    assert lines[head:agent] == ["### Tool", "b", "c", "d", "e", ""]
    assert lines[agent:] == ["## Agent", "one", "two", "three", "four"]
    assert levels[head:agent] == [1] * 6  # the separator folds with the block above it
    assert levels[agent:] == [0] * (len(lines) - agent)


def test_a_tool_calls_header_rewritten_keeps_its_whole_fold(editor: Editor) -> None:
    """A tool call's header and status line rewritten, one row longer, while a tool
    call and a message follow it: zc on it folds all its rows, its separator
    included, and the next tool call folds on its own."""
    editor.setup()
    status = editor.open_chat()
    buf = status["transcript_buf"]

    def apply(*ops: dict[str, object]) -> None:
        editor.lua(RENDER, status["chat"], list(ops))

    apply(
        {"op": "block", "id": "t", "kind": "tool", "lines": ["### T", "pending", "a", "b"]},
        {"op": "block", "id": "u", "kind": "tool", "lines": ["### U", "pending"]},
        {"op": "block", "id": "m", "kind": "agent", "lines": ["## Agent", "one"]},
    )
    apply({"op": "block", "id": "t", "start": 0, "end": 2, "lines": ["### T", "done", "x"]})
    lines = editor.transcript()
    assert lines[: lines.index("## Agent")] == ["### T", "done", "x", "a", "b", "", "### U", "pending", ""]
    closed = editor.lua(
        """
        local buf, heads = ...
        vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1])
        return vim.tbl_map(function(lnum)
          vim.api.nvim_win_set_cursor(0, { lnum, 0 })
          vim.cmd('normal! zc')
          local rows = { vim.fn.foldclosed(lnum), vim.fn.foldclosedend(lnum) }
          vim.cmd('normal! zo')
          return rows
        end, heads)
        """,
        buf,
        [1, 7],
    )
    assert closed == [[1, 6], [7, 9]]


def test_fold_levels_of_a_window_opened_again_on_many_blocks(editor: Editor) -> None:
    """A window opened on a transcript asks each line's fold level from the top down
    (the block found last is kept for the next line): every row of a tool call or a
    thought folds with it, its separator included, and nothing else does. Rows asked
    out of order (<CR> and the prompt keys ask for one) find their block too, after
    earlier blocks grew while the chat was hidden."""
    editor.setup()
    status = editor.open_chat()
    buf = status["transcript_buf"]
    kinds = {"T": "tool", "M": "agent", "H": "thought"}
    names = [f"{letter}{i}" for i in range(1, 5) for letter in "TMH"]

    def apply(*ops: dict[str, object]) -> None:
        editor.lua(RENDER, status["chat"], list(ops))

    def blocks() -> tuple[list[str], list[int]]:
        """Each row's block, and the rows that begin one."""
        lines = editor.transcript()
        heads = sorted(lines.index(f"### {name}") for name in names)
        assert heads[0] == 0
        owners = []
        for head, end in zip(heads, [*heads[1:], len(lines)], strict=True):
            owners += [lines[head][4:]] * (end - head)
        return owners, heads

    def levels_are_the_blocks() -> None:
        owners, _ = blocks()
        assert editor.lua(FOLD_LEVELS, buf) == [int(name[0] in "TH") for name in owners]

    def rows_find_their_blocks() -> None:
        owners, _ = blocks()
        # Up three rows at a time, then down five: it ends on a late block.
        rows = [*range(len(owners) - 1, -1, -3), *range(0, len(owners), 5)]
        found = editor.lua(
            "local chat, buf, rows = ...; local blocks = require('acp.chat.registry').chats[chat]"
            ".blocks; return vim.tbl_map(function(row)"
            " return require('acp.chat.blocks').block_at(buf, blocks, row) end, rows)",
            status["chat"],
            buf,
            rows,
        )
        assert found == [owners[row] for row in rows]

    def toggle() -> None:
        editor.nvim.command("AcpToggle")

    apply(
        *(
            {"op": "block", "id": name, "kind": kinds[name[0]], "lines": [f"### {name}", "a"]}
            for name in names
        )
    )
    toggle()
    toggle()
    levels_are_the_blocks()
    rows_find_their_blocks()
    toggle()  # hidden: no fold levels are asked while earlier blocks grow
    apply({"op": "block", "id": "T2", "start": 1, "end": 2, "lines": ["b", "c", "d"]})
    rows_find_their_blocks()
    apply({"op": "append", "id": "H1", "text": "\nmore\nand more"})
    rows_find_their_blocks()
    toggle()
    levels_are_the_blocks()
    rows_find_their_blocks()


def zc_on_each_fold(editor: Editor, status: dict[str, object]) -> dict[str, dict[str, Any]]:
    """zc and zo on the header of each thought, tool call and compaction in the
    transcript's window: by block id, its `rows` (header to the blank line before
    the next block), whether it was `open` and the rows `zc` closed."""
    folds = editor.lua(
        """
        local chat, buf = ...
        local blocks, blocks_of = require('acp.chat.registry').chats[chat].blocks, require('acp.chat.blocks')
        vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1])
        local folds = {}
        for index, id in ipairs(blocks.order) do
          local block = blocks.by_id[id]
          if block.kind == 'tool' or block.kind == 'thought' or block.kind == 'compaction' then
            local lnum = blocks_of.start_row(buf, block) + 1
            local next_id = blocks.order[index + 1]
            local last = next_id and blocks_of.start_row(buf, blocks.by_id[next_id]) or vim.fn.line('$')
            local open = vim.fn.foldclosed(lnum) == -1
            vim.api.nvim_win_set_cursor(0, { lnum, 0 })
            vim.cmd('silent! normal! zc') -- no fold: E490
            local closed = { vim.fn.foldclosed(lnum), vim.fn.foldclosedend(lnum) }
            table.insert(folds, { id, { rows = { lnum, last }, open = open, zc = closed } })
            vim.cmd('silent! normal! zo')
          end
        end
        return folds
        """,
        status["chat"],
        status["transcript_buf"],
    )
    return dict(folds)


DEMO_FOLDS = ["#message:thought-1", "read-1", "edit-1", "run-1", "#compaction:compact-1"]


def test_zc_on_a_tool_call_folds_all_of_it_after_its_status_changed(editor: Editor) -> None:
    """A tool call's status line is rewritten after its output came (pending →
    completed): zc on its header still folds every row of it, down to the blank line
    before the next block, and so for each thought, tool call and compaction."""
    editor.setup(protocol_version=2)
    status = editor.open_chat()
    editor.lua("require('acp').send('tool diff terminal compact')")
    editor.wait_event("AcpTurnEnd")
    folds = zc_on_each_fold(editor, status)
    assert list(folds) == DEMO_FOLDS
    assert {name: fold["zc"] for name, fold in folds.items()} == {
        name: fold["rows"] for name, fold in folds.items()
    }


@pytest.mark.parametrize("where", ["input", "file"])
def test_zc_folds_each_tool_call_of_a_turn_drawn_while_you_typed(editor: Editor, where: str) -> None:
    """You type while a turn is drawn, in the chat's input or in a file in another
    tab (in insert mode Neovim updates no window's folds, and on leaving it the
    current window's only): after <Esc> (in the file <C-c>, which fires no
    InsertLeave), each thought, tool call and compaction is open, and zc on it
    folds all of it. A fold the user closed makes Vim create new folds closed:
    they still arrive open, and the user's stays closed."""
    editor.setup(protocol_version=2)
    status = editor.open_chat()
    editor.lua("require('acp').send('hi')")
    editor.wait_event("AcpTurnEnd")
    head = editor.transcript().index("### Thinking") + 1
    editor.lua(
        """
        local buf, lnum = ...
        vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1])
        vim.api.nvim_win_set_cursor(0, { lnum, 0 })
        vim.cmd('normal! zc')
        """,
        status["transcript_buf"],
        head,
    )
    if where == "input":
        editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(...)[1])", status["input_buf"])
    else:
        editor.nvim.command(f"tabnew {editor.tmp / 'notes.txt'}")
    typed_in = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.nvim.command("startinsert")
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "i"
    editor.lua("require('acp').send(...)", "tool diff terminal compact")
    editor.wait_event("AcpTurnEnd", count=2)
    assert editor.lua("return {vim.api.nvim_get_mode().mode, vim.api.nvim_get_current_buf()}") == ["i", typed_in]
    editor.nvim.input("<Esc>" if where == "input" else "<C-c>")
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "n"
    folds = zc_on_each_fold(editor, status)
    assert folds["#message:thought-1"]["rows"][0] == head
    assert {name: [fold["open"], fold["zc"]] for name, fold in folds.items()} == {
        name: [name != "#message:thought-1", fold["rows"]] for name, fold in folds.items()
    }


def test_treesitter_started_by_the_users_filetype_autocmd_stays_on_the_transcript(
    editor: Editor,
) -> None:
    """The transcript has a syntax of its own, unless the user's config starts
    treesitter on markdown buffers: then it is theirs, as on any markdown buffer."""
    editor.setup()
    editor.lua(
        "vim.api.nvim_create_autocmd('FileType', {pattern = 'markdown',"
        " callback = function(ev) vim.treesitter.start(ev.buf) end})"
    )
    buf = editor.open_chat()["transcript_buf"]
    assert editor.lua("return vim.treesitter.highlighter.active[...] ~= nil", buf) is True
    assert editor.lua("return vim.b[...].ts_highlight", buf) is True
    assert editor.lua("return vim.bo[...].syntax", buf) != "acpchat"


def test_zc_on_a_thought_header_folds_it_and_later_blocks_arrive_open(editor: Editor) -> None:
    editor.setup()
    status = editor.open_chat()
    editor.lua("require('acp').send('hi')")
    editor.wait_event("AcpTurnEnd")
    head = editor.transcript().index("### Thinking")
    win = editor.lua(f"return vim.fn.win_findbuf({status['transcript_buf']})[1]")
    editor.lua(
        "local win, lnum = ...; vim.api.nvim_set_current_win(win); vim.api.nvim_win_set_cursor(0, {lnum, 0})",
        win,
        head + 1,
    )
    editor.nvim.command("normal! zc")
    assert editor.lua(f"return vim.fn.foldclosed({head + 1})") == head + 1
    editor.lua("require('acp').send('again')")
    editor.wait_event("AcpTurnEnd", count=2)
    lines = editor.transcript()
    second = [i for i, line in enumerate(lines) if line == "### Thinking"][1]
    assert editor.lua(f"return vim.fn.foldclosed({second + 1})") == -1
    assert editor.lua(f"return vim.fn.foldclosed({head + 1})") == head + 1  # the user's choice stays
    # zM closes every fold: then new blocks arrive closed.
    editor.nvim.command("normal! zM")
    editor.lua("require('acp').send('third')")
    editor.wait_event("AcpTurnEnd", count=3)
    third = [i for i, line in enumerate(editor.transcript()) if line == "### Thinking"][2]
    assert editor.lua(f"return vim.fn.foldclosed({third + 1})") == third + 1


@pytest.mark.parametrize("version", [1, 2])
def test_an_unclosed_fence_in_the_prompt_leaves_later_blocks_alone(
    editor: Editor, version: int
) -> None:
    editor.setup(
        agents={"fake": editor.fake_agent("capabilities")},
        default_agent="fake",
        protocol_version=version,
    )
    status = editor.open_chat()
    editor.lua("require('acp').send(...)", "look:\n```python\nprint(1)")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    assert lines[:5] == ["## You", "look:", "```python", "print(1)", "```"]
    agent = lines.index("## Agent")
    syntax = editor.lua(
        """local buf, lnum = ...
        return vim.api.nvim_buf_call(buf, function()
          return vim.tbl_map(function(id) return vim.fn.synIDattr(id, 'name') end,
            vim.fn.synstack(lnum, 1))
        end)""",
        status["transcript_buf"],
        agent + 1,
    )
    assert syntax and not any("Code" in name for name in syntax), syntax


@pytest.mark.parametrize("version", [1, 2])
def test_enter_in_input_sends_and_clears_it(editor: Editor, version: int) -> None:
    editor.setup(protocol_version=version)
    status = editor.open_chat()
    input_buf = status["input_buf"]
    editor.lua(
        "local buf = ...; vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1]);"
        "vim.api.nvim_buf_set_lines(buf, 0, -1, false, {'first line', 'second line'})",
        input_buf,
    )
    editor.nvim.input("<Esc><CR>")
    editor.wait_event("AcpTurnEnd")
    assert "## You\nfirst line\nsecond line" in editor.transcript_text()
    assert editor.nvim.buffers[input_buf][:] == [""]


@pytest.mark.parametrize("version", [1, 2])
def test_acp_send_command(editor: Editor, version: int) -> None:
    editor.setup(protocol_version=version)
    editor.open_chat()
    editor.nvim.command("AcpSend from the command line")
    editor.wait_event("AcpTurnEnd")
    assert "You said: *from the command line*" in editor.transcript_text()


def test_cancel_mid_stream_ends_turn_cancelled(editor: Editor) -> None:
    editor.setup(agents={"endless": editor.fake_agent("endless")}, default_agent="endless")
    editor.open_chat()
    editor.lua("require('acp').send('go')")
    editor.wait("require('acp').status().state == 'running'")
    editor.wait(
        "vim.fn.join(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf, 0, -1, false)):find('tick3') ~= nil"
    )
    editor.nvim.command("AcpCancel")
    end = editor.wait_event("AcpTurnEnd")
    assert end["stop_reason"] == "cancelled"
    assert editor.transcript()[-1].startswith("*— cancelled")
    assert editor.lua("return require('acp').status().state") == "ready"


def test_a_turn_cancelled_in_a_code_block_leaves_the_rest_of_the_transcript_prose(
    editor: Editor,
) -> None:
    """Its fence left open, the transcript's syntax read every later line as code:
    the turn's end line, the next prompt's heading, its reply."""
    editor.setup(agents={"endless": editor.fake_agent("endless")}, default_agent="endless")
    editor.open_chat()
    editor.lua("require('acp').send('in code')")
    editor.wait(
        "vim.fn.join(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf, 0, -1, false)):find('tick3') ~= nil"
    )
    editor.nvim.command("AcpCancel")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    end = len(lines)  # the turn's end line
    assert lines[end - 1].startswith("*— cancelled") and "```" in lines[end - 3 : end - 1]
    groups = editor.lua(
        "local buf, row = ...; return vim.api.nvim_buf_call(buf, function() return"
        " vim.tbl_map(function(id) return vim.fn.synIDattr(id, 'name') end,"
        " vim.fn.synstack(row, 1)) end)",
        editor.lua("return require('acp').status().transcript_buf"),
        end,
    )
    assert "acpchatCodeBlock" not in groups


def test_ctrl_c_in_chat_buffers_cancels(editor: Editor) -> None:
    editor.setup(agents={"endless": editor.fake_agent("endless")}, default_agent="endless")
    status = editor.open_chat()
    editor.lua("require('acp').send('go')")
    editor.wait("require('acp').status().state == 'running'")
    for buf in (status["transcript_buf"], status["input_buf"]):
        desc = editor.lua(
            f"return vim.api.nvim_buf_call({buf}, function() return vim.fn.maparg('<C-c>', 'n', false, true).desc end)"
        )
        assert desc == "acp: cancel the turn"
    editor.lua(
        f"vim.api.nvim_buf_call({status['input_buf']}, function() vim.fn.maparg('<C-c>', 'n', false, true).callback() end)"
    )
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"


def test_agent_crash_during_turn_shows_error_and_stderr_tail(editor: Editor) -> None:
    editor.setup(agents={"crashy": editor.fake_agent("crash_mid_turn")}, default_agent="crashy")
    editor.open_chat()
    editor.lua("require('acp').send('go')")
    error = editor.wait_event("AcpError")
    assert "exited during the turn (exit code 2)" in error["message"]
    text = editor.transcript_text()
    assert "about to crash" in text
    assert "**Error:** agent 'crashy' exited during the turn (exit code 2)" in text
    assert "fatal: the fake agent broke on purpose" in text
    assert editor.lua("return require('acp').status().state") == "error"


def test_missing_agent_program_is_advice(editor: Editor) -> None:
    editor.setup(agents={"ghost": {"cmd": ["no-such-agent-binary"]}}, default_agent="ghost")
    editor.open_chat(ready=False)
    error = editor.wait_event("AcpError")
    assert (
        error["message"] == "agent 'ghost': 'no-such-agent-binary' is not installed or not on PATH"
    )


def test_invalid_option_is_reported_with_its_key(editor: Editor) -> None:
    editor.setup(agents={"claude": {"cmd": "claude-agent-acp"}})
    editor.open_chat(ready=False)
    error = editor.wait_event("AcpError")
    assert error["message"] == "invalid option agents.claude.cmd: expected a list, got a string"
    notices = editor.lua("return _G.acp_notices")
    assert any("agents.claude.cmd" in n["msg"] for n in notices)
    assert "invalid option agents.claude.cmd" in editor.transcript_text()


def test_agent_answering_another_version_is_refused(editor: Editor) -> None:
    editor.setup(agents={"future": editor.fake_agent("bad_version")}, default_agent="future")
    editor.open_chat(ready=False)
    error = editor.wait_event("AcpError")
    assert error["message"] == "agent 'future' speaks ACP version 7; acp.nvim speaks version 1"


def test_initialize_advertises_only_what_works(editor: Editor) -> None:
    editor.setup(agents={"caps": editor.fake_agent("capabilities")}, default_agent="caps")
    editor.open_chat()
    editor.lua("require('acp').send('show')")
    editor.wait_event("AcpTurnEnd")
    line = next(line for line in editor.transcript() if line.startswith('{"clientCapabilities"'))
    sent = json.loads(line)
    assert sent["protocolVersion"] == 1
    assert sent["clientInfo"]["name"] == "acp.nvim"
    capabilities = sent["clientCapabilities"]
    # Exactly what works: files from buffers, real terminals, terminal logins, both
    # elicitation modes; nothing else is claimed (ACP: omitted capabilities are unsupported).
    assert capabilities["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert capabilities["terminal"] is True
    assert capabilities["auth"] == {"terminal": True}
    assert capabilities["elicitation"] == {"form": {}, "url": {}}
    # Compaction updates (unstable schema): shown as a folded block (acp-compaction).
    assert capabilities["session"] == {"compaction": {}}
    # The output of commands the agent runs itself, in its tool calls (decision 0097).
    assert capabilities["_meta"] == {"terminal_output": True}
    assert {key for key, value in capabilities.items() if value} == {
        "fs", "terminal", "auth", "elicitation", "session", "_meta"
    }


def test_vendor_methods_and_garbage_do_not_break_the_chat(editor: Editor) -> None:
    editor.setup(
        agents={"vendor": editor.fake_agent("vendor"), "garbage": editor.fake_agent("garbage")},
        default_agent="vendor",
    )
    editor.open_chat()
    editor.lua("require('acp').send('x')")
    editor.wait_event("AcpTurnEnd")
    assert "vendor request answered -32601. still here" in editor.transcript_text()
    assert editor.lua("return require('acp').status().unknown_update") == "_sparkle"

    editor.lua("require('acp').open({agent = 'garbage'})")
    editor.wait_event("AcpSessionReady", count=2)
    editor.lua("require('acp').send('x')")
    assert editor.wait_event("AcpTurnEnd", count=2)["stop_reason"] == "end_turn"
    assert "after garbage" in editor.transcript_text()


def test_second_acpchat_focuses_and_bang_starts_new_session(editor: Editor) -> None:
    editor.setup()
    first = editor.open_chat()
    editor.nvim.command("wincmd p")
    editor.nvim.command("AcpChat")
    assert editor.lua("return vim.api.nvim_get_current_buf()") == first["input_buf"]
    assert editor.lua("return require('acp').status().chat") == first["chat"]

    editor.nvim.command("AcpChat!")
    editor.wait_event("AcpSessionReady", count=2)
    second = editor.lua("return require('acp').status()")
    assert second["chat"] != first["chat"]
    assert second["session_id"] == "demo-2"  # same agent process, new session
    assert editor.lua("return vim.api.nvim_get_current_buf()") == second["input_buf"]


def test_protocol_log_shows_both_directions_and_the_agents_stderr(editor: Editor) -> None:
    fake = editor.fake_agent("echo")
    talkative = {"cmd": ["sh", "-c", 'echo "warming up" >&2; exec "$@"', "sh", *fake["cmd"]]}
    editor.setup(agents={"talkative": talkative})
    editor.open_chat()
    editor.lua("require('acp').open({agent = 'talkative'})")
    editor.wait_event("AcpSessionReady", count=2)
    editor.wait(
        "#vim.tbl_filter(function(l) return l:find('talkative !! warming up', 1, true) end,"
        " require('acp.host').request('log')) > 0",
        what="the stderr line logged",
    )
    editor.nvim.command("AcpLog")
    # The protocol log comes from the Python side a moment later (never waited for).
    editor.wait("vim.api.nvim_buf_get_lines(0, -2, -1, false)[1] ~= '(asking the Python side for the protocol log)'")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert 'demo >> {"jsonrpc":"2.0","id":0,"method":"initialize"' in text
    assert "demo << " in text and '"protocolVersion":1' in text
    assert "talkative !! warming up" in text  # the agent's stderr, a line each


def test_checkhealth_reports_python_and_agents(editor: Editor) -> None:
    bin_dir = editor.tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "npx").write_text("#!/bin/sh\n")
    (bin_dir / "npx").chmod(0o755)
    (bin_dir / "plain.sh").write_text("#!/bin/sh\n")  # not executable
    editor.setup(
        agents={
            "ghost": {"cmd": ["no-such-agent-binary"]},
            "plain": {"cmd": [str(bin_dir / "plain.sh")]},
            "gone": {"cmd": [str(bin_dir / "gone")]},
            "fetched": {"cmd": ["npx", "-y", "some-agent@1.0"], "env": {"PATH": str(bin_dir)}},
        }
    )
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert "OK Neovim" in text
    assert "OK msgspec" in text and "OK anyio" in text
    assert "OK options are valid; default agent: demo" in text
    assert 'ERROR ghost: "no-such-agent-binary" is not installed' in text
    # A path says what is wrong with it, as the chat's start would.
    assert f'ERROR plain: "{bin_dir / "plain.sh"}" is not executable' in text
    assert f'ERROR gone: "{bin_dir / "gone"}" does not exist' in text
    # A launcher found is not the agent found: npx downloads it when it starts.
    assert (
        "fetched: npx -y some-agent@1.0 (npx fetches the agent when it starts: not checked here)"
        in text
    )
    assert "OK fetched" not in text
    # A built-in agent you did not configure is no error when missing (as :help
    # acp-health says): it is listed with what it needs.
    assert "ERROR gemini" not in text
    assert (
        "OK gemini: gemini --acp" in text
        or "gemini: cannot start here, needs 'gemini' on PATH (gemini --acp)" in text
    )
    assert "protocol log keeps 5000 lines" in text
    lines = editor.nvim.current.buffer[:]
    section = lines[lines.index("Agents ~") + 1 : lines.index("MCP ~")]
    named = [line.split(":")[0].split()[-1] for line in section if line.startswith("- ")]
    assert named == sorted(named) and {"demo", "fetched", "ghost", "plain"} <= set(named)


def test_on_windows_checkhealth_and_acpchat_say_it_is_unix_only(editor: Editor) -> None:
    """Issue 27.10: the plugin needs process groups, /bin/sh and Unix sockets; a
    Windows user is told so, once, instead of a chat that fails in odd ways."""
    editor.setup()
    editor.lua(
        "local has = vim.fn.has;"
        " vim.fn.has = function(feature) return feature == 'win32' and 1 or has(feature) end"
    )
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert "ERROR acp.nvim runs on Unix only (Linux, macOS, BSD)" in text
    assert "OK msgspec" not in text  # nothing else is tried
    editor.nvim.command("AcpChat")  # one line, no traceback
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["msg"].startswith("acp: acp.nvim runs on Unix only (Linux, macOS, BSD)")
    assert editor.lua("return require('acp').status()") is None
    assert editor.lua("return require('acp.host').chan") is None  # no Python started


def test_closing_the_chat_ends_the_agent(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    pids = editor.agent_pids()
    assert len(pids) >= 2  # the Python host and the demo agent
    host_pid = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    editor.nvim.command("AcpClose")
    assert wait_gone([pid for pid in pids if pid != host_pid]) == []
    assert editor.agent_pids() == [host_pid]


def test_closing_one_of_two_chats_of_an_agent_keeps_it_for_the_other(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    editor.nvim.command("AcpChat!")  # a second chat of the same agent
    editor.wait_event("AcpSessionReady", count=2)
    host_pid = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    [agent] = [pid for pid in editor.agent_pids() if pid != host_pid]
    [first, _] = [chat["id"] for chat in editor.lua("return require('acp').chats()")]
    editor.nvim.command("AcpClose")  # the second, the current one
    editor.lua(  # to the chat left
        "require('acp.chat').send(require('acp.chat.registry').chats[...], 'hello')", first
    )
    editor.wait_event("AcpTurnEnd")
    assert editor.events("AcpTurnEnd")[0]["stop_reason"] == "end_turn"
    assert [pid for pid in editor.agent_pids() if pid != host_pid] == [agent]
    editor.lua(  # the last chat of the agent
        "require('acp.chat').close(require('acp.chat.registry').chats[...], true)", first
    )
    assert wait_gone([agent]) == []


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="a Linux scheduling policy")
def test_what_we_start_runs_as_batch_work_and_neovim_does_not(editor: Editor) -> None:
    # The first chat's agent is spawned by the host's first lines, another agent's
    # by the worker loop; both, and every thread of the host, are batch work.
    editor.setup(agents={"other": editor.fake_agent("echo")})
    editor.open_chat()
    editor.nvim.command("AcpChat other")
    editor.wait_event("AcpSessionReady", count=2)
    host = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    # A process may end between the listing and the reads (one the agents or the
    # review ran): only those still there count.
    commands: list[list[bytes]] = []
    policies: dict[int, int] = {}
    for pid in editor.agent_pids():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            tasks = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        commands.append(command)
        for task in tasks:
            try:
                policies[int(task)] = os.sched_getscheduler(int(task))
            except ProcessLookupError:
                pass  # a thread that ended meanwhile
    assert host in policies
    assert [b"-m", b"acp_nvim.demo_agent"] in [command[1:3] for command in commands]
    assert [str(FAKE).encode(), b"echo"] in [command[1:3] for command in commands]
    assert len(policies) > len(commands)  # the host's worker thread among them
    assert set(policies.values()) == {os.SCHED_BATCH}
    assert os.sched_getscheduler(editor.pid) == os.SCHED_OTHER


def test_quitting_leaves_no_process(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    pids = editor.agent_pids()
    assert pids
    try:
        editor.nvim.command("qa!")
    except (OSError, EOFError):
        pass  # the channel closes under the request
    assert wait_gone(pids) == []


def test_killed_neovim_leaves_no_process(editor: Editor) -> None:
    editor.setup(agents={"endless": editor.fake_agent("endless")}, default_agent="endless")
    editor.open_chat()
    editor.lua("require('acp').send('go')")
    editor.wait("require('acp').status().state == 'running'")
    nvim_pid = editor.lua("return vim.fn.getpid()")
    pids = editor.agent_pids()
    assert len(pids) >= 2
    os.kill(nvim_pid, signal.SIGKILL)
    assert wait_gone(pids) == []
