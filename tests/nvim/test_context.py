"""Context in the prompt, completion in the input, usage and title: what reaches the
agent (the content blocks on the wire) and what the user sees."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.nvim.conftest import Editor


def blocks(editor: Editor, turn: int = 1) -> list[dict[str, Any]]:
    """The content blocks the fake agent received for the last prompt."""
    editor.wait_event("AcpTurnEnd", count=turn)
    [line] = [ln for ln in editor.transcript() if ln.startswith('[{"type"')][-1:]
    return list(json.loads(line))


def open_with(editor: Editor, scenario: str) -> dict[str, Any]:
    editor.setup(agents={"fake": editor.fake_agent(scenario)}, default_agent="fake")
    return editor.open_chat()


def test_a_mentioned_buffer_goes_embedded_with_its_unsaved_text(editor: Editor) -> None:
    path = editor.tmp / "project" / "a.py"
    path.write_text("x = 1\n")
    editor.nvim.command(f"edit {path}")
    editor.nvim.current.buffer[:] = ["x = 2  # not saved"]
    open_with(editor, "blocks+embed")
    editor.lua("require('acp').send('look at @a.py, please')")
    sent = blocks(editor)
    assert sent[0] == {"type": "text", "text": "look at @a.py, please"}
    assert sent[1]["type"] == "resource"
    assert sent[1]["resource"]["uri"] == path.as_uri()
    assert sent[1]["resource"]["text"] == "x = 2  # not saved\n"
    assert "*Attached: a.py*" in editor.transcript_text()


def test_without_embedded_context_a_file_is_a_link(editor: Editor) -> None:
    (editor.tmp / "project" / "b.txt").write_text("b\n")
    open_with(editor, "blocks")
    editor.lua("require('acp').send('see @b.txt')")
    link = blocks(editor)[1]
    assert (link["type"], link["name"]) == ("resource_link", "b.txt")
    assert link["uri"].endswith("/project/b.txt")


def test_acpadd_with_a_range_sends_those_lines(editor: Editor) -> None:
    path = editor.tmp / "project" / "c.lua"
    path.write_text("one\ntwo\nthree\nfour\n")
    status = open_with(editor, "blocks+embed")
    editor.nvim.command("wincmd p")
    editor.nvim.command(f"edit {path}")
    editor.nvim.command("2,3AcpAdd")
    assert editor.nvim.buffers[status["input_buf"]][:] == ["@c.lua:2-3 "]
    editor.lua("require('acp').send(...)", "explain @c.lua:2-3")
    resource = blocks(editor)[1]["resource"]
    assert resource["text"] == "two\nthree"
    assert resource["uri"].endswith("c.lua#L2-L3")


def test_diagnostics_and_the_lua_context_option(editor: Editor) -> None:
    path = editor.tmp / "project" / "d.py"
    path.write_text("import os\n")
    editor.nvim.command(f"edit {path}")
    editor.lua(
        "vim.diagnostic.set(vim.api.nvim_create_namespace('t'), 0, "
        "{{lnum = 0, col = 7, severity = 1, message = 'unused import', source = 'ruff'}})"
    )
    buf = editor.nvim.current.buffer.number
    open_with(editor, "blocks")
    editor.lua(
        "require('acp').send('fix it', {context = {{type = 'diagnostics', bufnr = ...}}})", buf
    )
    text = blocks(editor)[1]["text"]
    assert "d.py:1:8: error: unused import [ruff]" in text


def test_an_image_goes_only_to_an_agent_that_takes_images(editor: Editor) -> None:
    png = editor.tmp / "project" / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    open_with(editor, "blocks+embed+image")
    editor.lua("require('acp').send('what is in @shot.png')")
    image = blocks(editor)[1]
    assert (image["type"], image["mimeType"]) == ("image", "image/png")
    assert base64.b64decode(image["data"]) == png.read_bytes()


def test_an_image_the_agent_cannot_take_is_not_sent_and_said(editor: Editor) -> None:
    (editor.tmp / "project" / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    open_with(editor, "blocks")
    editor.lua("require('acp').send('what is in @shot.png')")
    assert len(blocks(editor)) == 1
    assert "shot.png not sent: the agent takes no images" in editor.transcript_text()


def test_slash_commands_and_context_complete_in_the_input(editor: Editor) -> None:
    (editor.tmp / "project" / "notes.md").write_text("n\n")
    editor.setup()
    status = editor.open_chat()
    editor.wait("#(require('acp').status().commands or {}) > 0")
    words = editor.lua(
        "local chat = require('acp.chat').get()"
        " return vim.tbl_map(function(i) return i.word end, require('acp.complete').items(chat, '/'))"
    )
    assert words == ["/help", "/explain"]
    mentions = editor.lua(
        "local chat = require('acp.chat').get()"
        " return vim.tbl_map(function(i) return i.word end, require('acp.complete').items(chat, '@'))"
    )
    assert mentions[:2] == ["@selection", "@diagnostics"] and "@notes.md" in mentions
    # The omnifunc finds the token before the cursor; `/` only at the start.
    editor.nvim.current.window = editor.nvim.windows[
        [w.buffer.number for w in editor.nvim.windows].index(status["input_buf"])
    ]
    editor.nvim.current.buffer[:] = ["/ex"]
    editor.nvim.current.window.cursor = (1, 3)
    assert editor.lua("return require('acp.complete').omnifunc(1, '')") == 0
    editor.nvim.current.buffer[:] = ["say /ex"]
    editor.nvim.current.window.cursor = (1, 7)
    assert editor.lua("return require('acp.complete').omnifunc(1, '')") == -3
    # After a command, its hint shows as virtual text.
    editor.nvim.current.buffer[:] = ["/explain "]
    editor.nvim.command("doautocmd TextChanged")
    marks = editor.lua(
        f"return vim.api.nvim_buf_get_extmarks({status['input_buf']}, "
        "vim.api.nvim_create_namespace('acp.hint'), 0, -1, {details = true})"
    )
    assert marks[0][3]["virt_text"] == [["what to explain", "Comment"]]


def test_usage_and_title_show_in_the_winbar_status_and_statusline(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('tell me about lua')")
    editor.wait_event("AcpTurnEnd")
    editor.wait("require('acp').status().usage ~= nil")
    status = editor.lua("return require('acp').status()")
    assert status["title"] == "tell me about lua"
    assert status["usage"]["size"] == 200_000 and status["usage"]["used"] > 0
    winbar = editor.lua("return vim.wo[vim.fn.bufwinid(require('acp').status().transcript_buf)].winbar")
    assert "ctx 1k/200k 1%% $0.00" in winbar and "tell me about lua" in winbar
    assert editor.lua("return require('acp').statusline()").startswith("acp demo · ready")


def test_blink_and_cmp_sources_serve_the_same_items(editor: Editor) -> None:
    editor.setup()
    status = editor.open_chat()
    editor.wait("#(require('acp').status().commands or {}) > 0")
    editor.nvim.command(f"buffer {status['input_buf']}")
    editor.nvim.current.buffer[:] = ["/"]
    labels = editor.lua(
        """
        local got = {}
        local blink = require('acp.completion.blink').new()
        assert(blink:enabled())
        blink:get_completions({bufnr = ..., line = '/', cursor = {1, 1}}, function(r)
          got.blink = vim.tbl_map(function(i) return i.label end, r.items)
        end)
        local cmp = require('acp.completion.cmp').new()
        cmp:complete({context = {cursor_before_line = '/'}}, function(r)
          got.cmp = vim.tbl_map(function(i) return i.label end, r.items)
        end)
        return got
        """,
        status["input_buf"],
    )
    assert labels == {"blink": ["/help", "/explain"], "cmp": ["/help", "/explain"]}
