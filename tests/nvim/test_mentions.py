"""The mentions beyond one file (issue 28, point 4): `@dir/`, `@buffers`, `@quickfix`,
`@diff`, `@https://...`, an exact `@selection`, and an image from the clipboard — as
they arrive on the wire, in the form the agent's capabilities allow."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.test_context import VERSIONS, blocks, open_with


def project(editor: Editor) -> Path:
    return editor.tmp / "project"


@VERSIONS
@pytest.mark.parametrize("embed", [True, False])
def test_a_directory_is_a_link_per_file_or_one_listing(
    editor: Editor, version: int, embed: bool
) -> None:
    sub = project(editor) / "sub"
    (sub / "deep").mkdir(parents=True)
    (sub / "a.py").write_text("a\n")
    (sub / "deep" / "b.py").write_text("b\n")
    (sub / "node_modules").mkdir()
    (sub / "node_modules" / "skip.js").write_text("x\n")
    open_with(editor, "blocks+embed" if embed else "blocks", version)
    editor.lua("require('acp').send('look at @sub/')")
    sent = blocks(editor)[1:]
    if embed:
        [listing] = sent
        assert listing["resource"]["uri"] == sub.as_uri()
        assert listing["resource"]["text"] == "a.py\ndeep/b.py"
    else:
        assert [(b["type"], b["uri"]) for b in sent] == [
            ("resource_link", (sub / "a.py").as_uri()),
            ("resource_link", (sub / "deep" / "b.py").as_uri()),
        ]
    assert "*Attached: sub/*" in editor.transcript_text()


@VERSIONS
@pytest.mark.parametrize("embed", [True, False])
def test_buffers_sends_every_file_buffer_with_its_unsaved_text(
    editor: Editor, version: int, embed: bool
) -> None:
    one, two = project(editor) / "one.txt", project(editor) / "two.txt"
    for path in (one, two):
        path.write_text(f"{path.name}\n")
        editor.nvim.command(f"edit {path}")
    editor.nvim.current.buffer[:] = ["two, unsaved"]
    open_with(editor, "blocks+embed" if embed else "blocks", version)
    editor.lua("require('acp').send('all @buffers')")
    sent = blocks(editor)[1:]
    if embed:
        texts = {b["resource"]["uri"]: b["resource"]["text"] for b in sent}
        assert texts == {one.as_uri(): "one.txt\n", two.as_uri(): "two, unsaved\n"}
    else:  # links the agent reads, through the editor: the unsaved text too
        assert {(b["type"], b["uri"]) for b in sent} == {
            ("resource_link", one.as_uri()),
            ("resource_link", two.as_uri()),
        }


@VERSIONS
@pytest.mark.parametrize("embed", [True, False])
def test_quickfix_goes_as_text(editor: Editor, version: int, embed: bool) -> None:
    (project(editor) / "q.py").write_text("x\n")
    editor.lua(
        "vim.fn.setqflist({{filename = ..., lnum = 1, col = 2, text = 'bad x', type = 'E'}})",
        str(project(editor) / "q.py"),
    )
    open_with(editor, "blocks+embed" if embed else "blocks", version)
    editor.lua("require('acp').send('fix @quickfix')")
    [sent] = blocks(editor)[1:]
    if embed:
        assert sent["resource"]["text"] == "q.py:1:2: E: bad x"
    else:
        assert sent == {"type": "text", "text": "quickfix list:\n```\nq.py:1:2: E: bad x\n```"}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


@VERSIONS
@pytest.mark.parametrize("embed", [True, False])
def test_diff_is_the_work_trees_with_unsaved_buffers(
    editor: Editor, version: int, embed: bool
) -> None:
    root = project(editor)
    git(root, "init", "-q")
    (root / "saved.txt").write_text("old\n")
    (root / "open.txt").write_text("first\n")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (root / "saved.txt").write_text("new\n")
    editor.nvim.command(f"edit {root / 'open.txt'}")
    editor.nvim.current.buffer[:] = ["first", "unsaved"]
    open_with(editor, "blocks+embed" if embed else "blocks", version)
    editor.lua("require('acp').send('review @diff')")
    [diff] = blocks(editor)[1:]
    if embed:
        text = diff["resource"]["text"]
        assert diff["resource"]["mimeType"] == "text/x-diff"
    else:
        text = diff["text"]
        assert text.startswith("git diff:\n```")
    assert "-old\n+new\n" in text
    assert "+++ b/open.txt\n@@ -1 +1,2 @@\n first\n+unsaved\n" in text


@VERSIONS
def test_a_url_is_a_link(editor: Editor, version: int) -> None:
    open_with(editor, "blocks+embed", version)
    editor.lua("require('acp').send('read @https://example.com/doc.html.')")
    assert blocks(editor)[1] == {
        "type": "resource_link",
        "uri": "https://example.com/doc.html",
        "name": "https://example.com/doc.html",
    }


@VERSIONS
@pytest.mark.parametrize(("keys", "text"), [("0lvjl", "ne\ntwo"), ("0l<C-v>jl", "ne\nwo")])
def test_a_charwise_or_blockwise_selection_sends_exactly_its_text(
    editor: Editor, version: int, keys: str, text: str
) -> None:
    path = project(editor) / "s.txt"
    path.write_text("one\ntwo\nthree\n")
    editor.nvim.command(f"edit {path}")
    editor.nvim.input(keys + "<Esc>")
    editor.wait("vim.fn.mode() == 'n' and vim.api.nvim_buf_get_mark(0, '>')[1] == 2")
    open_with(editor, "blocks+embed", version)
    editor.lua("require('acp').send('explain @selection')")
    assert blocks(editor)[1]["resource"]["text"] == text


FAKE_WL_PASTE = """#!/bin/sh
printf '\\211PNG\\r\\n\\032\\nfake image'
"""


@VERSIONS
def test_a_clipboard_image_goes_as_an_image_block_shown_by_name_and_size(
    editor: Editor, version: int
) -> None:
    tools = editor.tmp / "bin"
    tools.mkdir()
    (tools / "wl-paste").write_text(FAKE_WL_PASTE)
    (tools / "wl-paste").chmod(0o755)
    editor.lua("vim.env.PATH = ... .. ':' .. vim.env.PATH", str(tools))
    status = open_with(editor, "blocks+embed+image", version)
    # Neovim's directory apart from the chat's: the mention must name the chat's file.
    editor.nvim.command(f"cd {editor.tmp}")
    editor.nvim.command("AcpPaste")
    input_buf = status["input_buf"]
    editor.wait(f"vim.api.nvim_buf_get_lines({input_buf}, 0, -1, false)[1]:find('@') ~= nil")
    [mention] = editor.nvim.buffers[input_buf][:]
    editor.lua("require('acp').send(...)", "what is this " + mention.strip())
    image = blocks(editor)[1]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == b"\x89PNG\r\n\x1a\nfake image"
    name = mention.strip().rsplit("/", 1)[1]
    assert name.startswith("clipboard-") and name.endswith(".png")
    assert f"{name} (18 B)*" in editor.transcript_text()


def test_without_a_clipboard_tool_paste_says_which_to_install(editor: Editor) -> None:
    empty = editor.tmp / "empty"
    empty.mkdir()
    editor.lua("vim.env.PATH = ...", str(empty))
    editor.setup()
    editor.open_chat(ready=False)
    editor.lua("require('acp').paste_image()")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        "acp: no clipboard tool for images: install wl-paste (Wayland), xclip (X11) or "
        "pngpaste (macOS)"
    )


MENU = "vim.tbl_map(function(i) return i.word end, vim.fn.complete_info({'items'}).items)"


def test_a_mention_typed_key_by_key_narrows_at_every_key(editor: Editor) -> None:
    """Typed one key at a time, as people type, each key of a mention asks again: `@main`
    keeps src/app/main.py (its letters in order), `.` and `/` narrow the menu rather
    than close it; closed with <C-e>, it stays closed while the mention is typed on."""
    (project(editor) / "src" / "app").mkdir(parents=True)
    (project(editor) / "src" / "app" / "main.py").write_text("")
    (project(editor) / "src" / "maintenance.txt").write_text("")
    (project(editor) / "main.rs").write_text("")
    editor.setup()
    status = editor.open_chat()
    editor.nvim.command(f"call win_gotoid(bufwinid({status['input_buf']}))")

    def type_keys(keys: str) -> None:
        for key in keys:
            typed = editor.nvim.current.line + key
            editor.nvim.input(key)
            editor.wait(
                f"vim.api.nvim_get_current_line() == {typed!r} and vim.fn.pumvisible() == 1",
                what=f"the menu at {typed!r}",
            )

    editor.nvim.input("i")
    type_keys("@")
    editor.wait(f"vim.tbl_contains({MENU}, '@src/app/main.py')", what="the files listed")
    type_keys("main")
    editor.wait(f"#{MENU} == 3", what="three files at @main")
    words = editor.lua(f"return {MENU}")
    assert words[0] == "@main.rs"
    assert sorted(words[1:]) == ["@src/app/main.py", "@src/maintenance.txt"]
    type_keys(".p")
    assert editor.lua(f"return {MENU}") == ["@src/app/main.py"]

    editor.nvim.input("<C-e><Esc>ggdGi")
    editor.wait("vim.api.nvim_get_current_line() == '' and vim.fn.mode() == 'i'")
    type_keys("@src/app/m")
    assert editor.lua(f"return {MENU}") == ["@src/app/main.py"]
    editor.nvim.input("<C-e>")
    editor.wait("vim.fn.pumvisible() == 0", what="the menu closed")
    editor.nvim.input("a")
    editor.wait("vim.api.nvim_get_current_line() == '@src/app/ma'")
    assert editor.lua("return vim.fn.pumvisible()") == 0
