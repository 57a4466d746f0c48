"""Context in the prompt, completion in the input, usage and title: what reaches the
agent (the content blocks on the wire) and what the user sees."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.nvim.conftest import Editor

# The protocol versions a test of the prompt's blocks runs over: v1 (every released
# agent) and v2 carry the same content blocks.
VERSIONS = pytest.mark.parametrize("version", [1, 2])


def blocks(editor: Editor, turn: int = 1) -> list[dict[str, Any]]:
    """The content blocks the fake agent received for the last prompt."""
    editor.wait_event("AcpTurnEnd", count=turn)
    [line] = [ln for ln in editor.transcript() if ln.startswith('[{"type"')][-1:]
    return list(json.loads(line))


def open_with(editor: Editor, scenario: str, version: int) -> dict[str, Any]:
    editor.setup(
        agents={"fake": editor.fake_agent(scenario)},
        default_agent="fake",
        protocol_version=version,
    )
    status = editor.open_chat()
    assert status["protocol_version"] == version
    return status


def notices(editor: Editor) -> list[str]:
    return [n["msg"] for n in editor.lua("return _G.acp_notices")]


@VERSIONS
def test_a_mentioned_buffer_goes_embedded_with_its_unsaved_text(editor: Editor, version: int) -> None:
    path = editor.tmp / "project" / "a.py"
    path.write_text("x = 1\n")
    editor.nvim.command(f"edit {path}")
    editor.nvim.current.buffer[:] = ["x = 2  # not saved"]
    open_with(editor, "blocks+embed", version)
    editor.lua("require('acp').send('look at @a.py, please')")
    sent = blocks(editor)
    assert sent[0] == {"type": "text", "text": "look at @a.py, please"}
    assert sent[1]["type"] == "resource"
    assert sent[1]["resource"]["uri"] == path.as_uri()
    assert sent[1]["resource"]["text"] == "x = 2  # not saved\n"
    assert "*Attached: a.py*" in editor.transcript_text()


@VERSIONS
def test_without_embedded_context_a_file_is_a_link(editor: Editor, version: int) -> None:
    (editor.tmp / "project" / "b.txt").write_text("b\n")
    open_with(editor, "blocks", version)
    editor.lua("require('acp').send('see @b.txt')")
    link = blocks(editor)[1]
    assert (link["type"], link["name"]) == ("resource_link", "b.txt")
    assert link["uri"].endswith("/project/b.txt")


@VERSIONS
def test_acpadd_with_a_range_sends_those_lines(editor: Editor, version: int) -> None:
    path = editor.tmp / "project" / "c.lua"
    path.write_text("one\ntwo\nthree\nfour\n")
    status = open_with(editor, "blocks+embed", version)
    editor.nvim.command("wincmd p")
    editor.nvim.command(f"edit {path}")
    editor.nvim.command("2,3AcpAdd")
    assert editor.nvim.buffers[status["input_buf"]][:] == ["@c.lua:2-3 "]
    editor.nvim.command("AcpAdd")  # one space apart, as typed
    assert editor.nvim.buffers[status["input_buf"]][:] == ["@c.lua:2-3 @c.lua "]
    editor.lua("pcall(vim.cmd, 'AcpAdd nothere.txt')")  # a typo: an error, nothing added
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        "acp: no file or buffer nothere.txt to mention"
    )
    assert editor.nvim.buffers[status["input_buf"]][:] == ["@c.lua:2-3 @c.lua "]
    editor.lua("require('acp').send(...)", "explain @c.lua:2-3")
    resource = blocks(editor)[1]["resource"]
    assert resource["text"] == "two\nthree"
    assert resource["uri"].endswith("c.lua#L2-L3")


def test_a_path_with_a_space_is_mentioned_escaped_and_attached(editor: Editor) -> None:
    """`:AcpAdd my\\ notes/a b.txt` wrote `@my notes/a b.txt`, the `@` completion offered
    it so, and the mention ended at the first space: the file was not attached, and
    nothing said so. A space in a mentioned path is written `\\ ` now."""
    (editor.tmp / "project" / "my notes").mkdir()
    (editor.tmp / "project" / "my notes" / "a b.txt").write_text("spaced\n")
    status = open_with(editor, "blocks", 1)
    editor.nvim.command("AcpAdd my\\ notes/a\\ b.txt")
    assert editor.nvim.buffers[status["input_buf"]][:] == ["@my\\ notes/a\\ b.txt "]
    editor.nvim.command(f"call win_gotoid(bufwinid({status['input_buf']}))")
    editor.nvim.input("A@my")
    menu = "vim.tbl_map(function(i) return i.word end, vim.fn.complete_info({'items'}).items)"
    editor.wait(f"vim.tbl_contains({menu}, '@my\\\\ notes/a\\\\ b.txt')", what="the file offered escaped")
    editor.nvim.input("\\ notes/a")  # typed on past the escaped space, the menu narrows
    editor.wait(f"vim.deep_equal({menu}, {{'@my\\\\ notes/a\\\\ b.txt'}})", what="the menu narrowed")
    editor.nvim.input("<C-e><Esc>")
    editor.nvim.input("<CR>")
    links = [block["name"] for block in blocks(editor)[1:]]
    assert links == ["my notes/a b.txt"]
    assert "*Attached: my notes/a b.txt*" in editor.transcript_text()


@VERSIONS
def test_a_mention_as_the_first_word_attaches_too(editor: Editor, version: int) -> None:
    (editor.tmp / "project" / "a.txt").write_text("a\n")
    (editor.tmp / "project" / "b.txt").write_text("b\n")
    open_with(editor, "blocks", version)
    editor.lua("require('acp').send('@a.txt x @b.txt')")
    links = [block["name"] for block in blocks(editor)[1:]]
    assert links == ["a.txt", "b.txt"]


@VERSIONS
def test_diagnostics_and_the_lua_context_option(editor: Editor, version: int) -> None:
    path = editor.tmp / "project" / "d.py"
    path.write_text("import os\n")
    editor.nvim.command(f"edit {path}")
    editor.lua(
        "vim.diagnostic.set(vim.api.nvim_create_namespace('t'), 0, "
        "{{lnum = 0, col = 7, severity = 1, message = 'unused import', source = 'ruff'}})"
    )
    buf = editor.nvim.current.buffer.number
    open_with(editor, "blocks", version)
    editor.lua(
        "require('acp').send('fix it', {context = {{type = 'diagnostics', bufnr = ...}}})", buf
    )
    text = blocks(editor)[1]["text"]
    assert "d.py:1:8: error: unused import [ruff]" in text


@VERSIONS
@pytest.mark.parametrize("embed", [True, False])
def test_a_selection_goes_as_its_unsaved_lines(editor: Editor, version: int, embed: bool) -> None:
    path = editor.tmp / "project" / "s.py"
    path.write_text("one\ntwo\nthree\n")
    editor.nvim.command(f"edit {path}")
    editor.nvim.current.buffer[1] = "TWO  # not saved"
    editor.nvim.command("normal! 2GVj")
    editor.nvim.input("<Esc>")
    editor.wait("vim.fn.mode() == 'n' and vim.api.nvim_buf_get_mark(0, '>')[1] == 3")
    open_with(editor, "blocks+embed" if embed else "blocks", version)
    editor.lua("require('acp').send('explain @selection')")
    sent = blocks(editor)[1]
    if embed:
        assert sent["resource"]["text"] == "TWO  # not saved\nthree"
        assert sent["resource"]["uri"] == path.as_uri() + "#L2-L3"
    else:  # a selection exists only here: it goes as text, not as a link
        assert sent == {"type": "text", "text": "s.py:2-3:\n```\nTWO  # not saved\nthree\n```"}
    assert "*Attached: s.py:2-3*" in editor.transcript_text()


@VERSIONS
def test_a_file_over_the_embed_limit_goes_as_a_link(editor: Editor, version: int) -> None:
    # 256 KiB is the most text one attachment embeds (services/context.py).
    (editor.tmp / "project" / "big.txt").write_text("x" * (256 * 1024 + 1))
    (editor.tmp / "project" / "fits.txt").write_text("y" * (256 * 1024))
    open_with(editor, "blocks+embed", version)
    editor.lua("require('acp').send('read @big.txt and @fits.txt')")
    link, resource = blocks(editor)[1:]
    assert (link["type"], link["name"]) == ("resource_link", "big.txt")
    assert link["uri"].endswith("/project/big.txt") and "resource" not in link
    assert resource["type"] == "resource"
    assert resource["resource"]["text"] == f"<{256 * 1024} chars>"  # the fake says its length
    assert "acp: big.txt is larger than 256 KiB: sent as a link" in notices(editor)


@VERSIONS
def test_an_image_over_the_limit_is_refused_with_a_notice(editor: Editor, version: int) -> None:
    # 5 MiB is the largest image sent (services/context.py).
    (editor.tmp / "project" / "huge.png").write_bytes(b"\x89PNG" + b"\0" * (5 * 2**20))
    open_with(editor, "blocks+embed+image", version)
    editor.lua("require('acp').send('what is in @huge.png')")
    assert blocks(editor) == [{"type": "text", "text": "what is in @huge.png"}]
    assert "acp: not attached: huge.png is larger than 5 MiB" in notices(editor)


@VERSIONS
def test_an_image_goes_only_to_an_agent_that_takes_images(editor: Editor, version: int) -> None:
    png = editor.tmp / "project" / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    open_with(editor, "blocks+embed+image", version)
    editor.lua("require('acp').send('what is in @shot.png')")
    image = blocks(editor)[1]
    assert (image["type"], image["mimeType"]) == ("image", "image/png")
    assert base64.b64decode(image["data"]) == png.read_bytes()


@VERSIONS
def test_an_image_the_agent_cannot_take_is_not_sent_and_said(editor: Editor, version: int) -> None:
    (editor.tmp / "project" / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    (editor.tmp / "project" / "notes.md").write_text("n\n")
    open_with(editor, "blocks", version)
    editor.lua("require('acp').send('what is in @shot.png and @notes.md')")
    assert [block["type"] for block in blocks(editor)] == ["text", "resource_link"]
    text = editor.transcript_text()
    assert "shot.png (12 B) not sent: the agent takes no images" in text
    # The prompt's attached line lists what was sent: the image is not among it.
    assert "*Attached: notes.md*" in text and "*Attached: shot.png" not in text


@VERSIONS
def test_slash_commands_and_context_complete_in_the_input(editor: Editor, version: int) -> None:
    (editor.tmp / "project" / "notes.md").write_text("n\n")
    editor.setup(protocol_version=version)
    status = editor.open_chat()
    editor.wait("#(require('acp').status().commands or {}) > 0")
    words = editor.lua(
        "local chat = require('acp.chat.registry').get()"
        " return vim.tbl_map(function(i) return i.word end, require('acp.chat.complete').items(chat, '/'))"
    )
    assert words == ["/help", "/explain"]
    mentions = item_words("@")
    # The files are listed in the background: there once the listing is done.
    editor.wait(f"vim.tbl_contains({mentions}, '@notes.md')", what="the file listed")
    assert editor.lua(f"return {mentions}")[:2] == ["@selection", "@diagnostics"]
    # The omnifunc finds the token before the cursor; `/` only at the start.
    editor.nvim.current.window = editor.nvim.windows[
        [w.buffer.number for w in editor.nvim.windows].index(status["input_buf"])
    ]
    editor.nvim.current.buffer[:] = ["/ex"]
    editor.nvim.current.window.cursor = (1, 3)
    assert editor.lua("return require('acp.chat.complete').omnifunc(1, '')") == 0
    editor.nvim.current.buffer[:] = ["say /ex"]
    editor.nvim.current.window.cursor = (1, 7)
    assert editor.lua("return require('acp.chat.complete').omnifunc(1, '')") == -3
    # After a command, its hint shows as virtual text.
    editor.nvim.current.buffer[:] = ["/explain "]
    editor.nvim.command("doautocmd TextChanged")
    marks = editor.lua(
        f"return vim.api.nvim_buf_get_extmarks({status['input_buf']}, "
        "vim.api.nvim_create_namespace('acp.hint'), 0, -1, {details = true})"
    )
    assert marks[0][3]["virt_text"] == [["what to explain", "Comment"]]


def items(prefix: str) -> str:
    """Lua: the completion items for ``prefix`` in the current chat (and the flag)."""
    return f"require('acp.chat.complete').items(require('acp.chat.registry').get(), {prefix!r})"


def item_words(prefix: str) -> str:
    """Lua: the words of the completion items for ``prefix``."""
    return f"vim.tbl_map(function(i) return i.word end, ({items(prefix)}))"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_every_file_of_a_big_project_can_be_found(editor: Editor) -> None:
    """Issue 27.7: `@` completion listed the first 5,000 files only; the others could
    not be found. A menu now holds at most 500 of the files its prefix matches, and
    typing more of the path lists again among them all."""
    project = editor.tmp / "project"
    for i in range(6000):
        (project / "many" / f"{i // 100:02}").mkdir(parents=True, exist_ok=True)
        (project / "many" / f"{i // 100:02}" / f"f{i}.txt").write_text("")
    (project / "zzz").mkdir()
    (project / "zzz" / "last.txt").write_text("")  # listed after the 6,000 others
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    editor.setup()
    editor.open_chat()
    editor.wait(f"vim.tbl_contains({item_words('@zzz/')}, '@zzz/last.txt')", what="the last file")
    everything = editor.lua(f"return {{{items('@')}}}")
    assert len(everything[0]) == 500 and everything[1] is True
    assert editor.lua(f"return {item_words('@many/59/f5999')}") == ["@many/59/f5999.txt"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_listing_the_files_never_holds_neovim(editor: Editor) -> None:
    """Issue 27.7: `git ls-files` ran on Neovim's loop (`:wait(2000)`). Here git waits
    for a file that Neovim writes only after asking for the completion items: listed
    on the loop, git would wait until it was killed; listed in the background, it
    finishes and its files are offered."""
    bin_dir, marker, done = editor.tmp / "bin", editor.tmp / "go", editor.tmp / "done"
    bin_dir.mkdir()
    git = bin_dir / "git"
    git.write_text(
        "#!/bin/sh\n"
        f"while [ ! -e {marker} ]; do sleep 0.01; done\n"
        f'{shutil.which("git")} "$@"; status=$?\n'
        f"touch {done}; exit $status\n"
    )
    git.chmod(0o755)
    project = editor.tmp / "project"
    (project / "seen.txt").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    editor.setup()
    editor.open_chat()
    editor.lua(f"vim.env.PATH = {str(bin_dir)!r} .. ':' .. vim.env.PATH")
    first = editor.lua(f"local w = {item_words('@')}; vim.fn.writefile({{}}, {str(marker)!r}); return w")
    assert "@seen.txt" not in first
    editor.wait(f"vim.fn.filereadable({str(done)!r}) == 1", what="git finished")
    editor.wait(f"vim.tbl_contains({item_words('@')}, '@seen.txt')", what="its files offered")


@pytest.mark.parametrize("version", [1, 2])
def test_usage_and_title_show_in_the_winbar_status_and_statusline(
    editor: Editor, version: int
) -> None:
    editor.setup(protocol_version=version)
    editor.lua("vim.o.columns = 200")  # a chat wide enough for every field of its winbar
    assert editor.open_chat()["protocol_version"] == version
    editor.lua("require('acp').send('tell me about lua')")
    editor.wait_event("AcpTurnEnd")
    editor.wait("require('acp').status().usage ~= nil")
    status = editor.lua("return require('acp').status()")
    assert status["title"] == "tell me about lua"
    assert status["usage"]["size"] == 200_000 and status["usage"]["used"] > 0
    winbar = editor.winbar()
    assert "ctx 1k/200k 1% $0.0032 " in winbar and "tell me about lua" in winbar
    assert editor.lua("return require('acp').statusline()").startswith("acp demo · ready")


WINBAR_SHOWN = """
local win = vim.fn.bufwinid(require('acp').status().transcript_buf)
return {vim.api.nvim_win_get_width(win),
        vim.api.nvim_eval_statusline(vim.wo[win].winbar, {winid = win, use_winbar = true}).str}
"""


def resized(editor: Editor, width: int) -> None:
    """Make the transcript's window ``width`` wide and wait for Neovim's WinResized,
    which fires only back in its main loop: not inside a vim.wait, where waiting for
    the winbar fitted timed out when this request came before the loop got there."""
    editor.lua(
        "local width, channel = ...; vim.api.nvim_create_autocmd('WinResized', {once = true,"
        " callback = function() vim.rpcnotify(channel, 'acp_test_resized') end})"
        "; vim.api.nvim_win_set_width(vim.fn.bufwinid(require('acp').status().transcript_buf), width)",
        width,
        editor.nvim.channel_id,
    )
    while editor.nvim.next_message()[1] != "acp_test_resized":
        pass


def test_a_narrow_winbar_keeps_state_agent_and_whole_fields(editor: Editor) -> None:
    """A chat 40 columns wide: the state and agent, then the fields a user needs most,
    each whole; a field is never cut through its middle (a 61-column chat showed
    "demo<ode · Demo small"). Wider, the context meter comes before the title (a
    48-column chat showed the title and not the meter), then the title, shortened
    where it does not fit, then everything."""
    editor.setup(chat={"width": 40})
    editor.open_chat()
    editor.lua("require('acp').send('tell me about lua and a title long enough to cut')")
    title = "tell me about lua and a"  # the demo's title: the prompt's first words
    editor.wait_event("AcpTurnEnd")
    editor.wait("require('acp').status().usage ~= nil")
    head, meter = " ready · demo · mode Ask", "ctx 1k/200k 1% $0.0036"  # under a cent
    assert editor.lua(WINBAR_SHOWN) == [40, head]
    editor.lua("vim.o.columns = 200")
    for width, fitted in (
        (50, f"{head} · {meter}"),
        (68, f"{head} · {meter} · tell me about l…"),
        (140, f" ready · demo · ACP v1 · mode Ask · Demo small · {meter} · {title}"),
    ):
        resized(editor, width)
        assert editor.lua(WINBAR_SHOWN) == [width, fitted]


def test_a_winbar_narrower_than_state_and_agent_cuts_their_end(editor: Editor) -> None:
    """A chat 20 columns wide waiting on a permission prompt showed "<ting for you ·
    demo": Neovim cuts a winbar's start unless told where; the state is what a user
    reads first."""
    editor.setup(agents={"fake": editor.fake_agent("permission")})
    editor.open_chat("fake")
    # Drawn again as the state changes: no wait on Neovim's WinResized, which fires
    # only back in its main loop.
    editor.lua("vim.api.nvim_win_set_width(vim.fn.bufwinid(require('acp').status().transcript_buf), 20)")
    editor.lua("require('acp').send('execute')")
    editor.wait("require('acp').status().turn_state == 'requires_action'")
    assert editor.lua(WINBAR_SHOWN) == [20, " waiting for you · >"]


def test_a_winbar_shows_names_with_a_nul_line_break_or_percent_on_one_line(
    editor: Editor,
) -> None:
    """The agent names its mode, model and session: a NUL in one made Vim's functions
    raise ("Using a Blob as a String") and the winbar went undrawn; a line break or
    a tab showed raw. Each field is one line as a title is, control characters
    spaces, and a `%` shows as it is."""
    editor.setup(agents={"fake": editor.fake_agent("odd_names")})
    editor.lua("vim.o.columns = 200")
    editor.open_chat("fake")
    editor.lua("require('acp').send(...)", "fix\x00the\nparser at 100%")
    editor.wait("require('acp').status().title == 'fix the parser at 100%'")
    editor.wait_event("AcpTurnEnd")
    _, shown = editor.lua(WINBAR_SHOWN)
    assert shown == " ready · fake · ACP v1 · mode Ask first · Small 100% · fix the parser at 100%"


ODD_TEXTS = [
    "a\x00b",
    "a\x01\x7fb\x1b",
    " \x1c\x1fa\tb\r\n",
    "a\u00a0b\u2028c",
    "a\x80\x85b",
    "\u3000a\r\n\nb\rc\x0bd\x0ce\x1ef\u2029g\u00a0\n",
    "\u20ac\u00a0",
    "\x00a\x00\nb\x00",
]


@pytest.mark.parametrize("text", ODD_TEXTS)
def test_one_line_and_one_row_are_one_rule_in_lua_and_python(editor: Editor, text: str) -> None:
    """The winbar and the pickers make a name one line and a prompt one row in Lua,
    the history and the transcript in Python: the same text shows the same there."""
    from acp_nvim.client.session.view import one_row
    from acp_nvim.client.text import one_line

    assert editor.lua("return require('acp.util').one_line(...)", text) == one_line(text)
    assert editor.lua("return require('acp.util').one_row(...)", text) == one_row(text)


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


def test_completion_opened_as_you_type_inserts_nothing_you_did_not_choose(
    editor: Editor,
) -> None:
    (editor.tmp / "project" / "sample.py").write_text("s\n")
    editor.setup()
    status = editor.open_chat()
    editor.wait("#(require('acp').status().commands or {}) > 0")
    editor.nvim.command(f"call win_gotoid(bufwinid({status['input_buf']}))")
    editor.nvim.input("ilook at @")
    editor.wait("vim.fn.pumvisible() == 1", what="the popup on @")
    editor.nvim.input("sam")
    editor.wait("vim.api.nvim_get_current_line():find('sam') ~= nil")
    assert editor.nvim.current.line == "look at @sam"
    editor.nvim.input("<Esc>ggdGi/")
    editor.wait("vim.fn.pumvisible() == 1", what="the popup on /")
    editor.nvim.input("e")
    editor.wait("vim.api.nvim_get_current_line():find('e') ~= nil")
    assert editor.nvim.current.line == "/e"
    # Typed faster than Neovim looks (one input: one TextChangedI for all of it), a
    # mention opens the menu too, with what matches so far; closed with <C-e>, it
    # stays closed while the mention is typed on.
    editor.nvim.input("<Esc>ggdGilook at @sa")
    editor.wait("vim.fn.pumvisible() == 1", what="the popup on @sa")
    words = editor.lua("return vim.tbl_map(function(i) return i.word end, vim.fn.complete_info({'items'}).items)")
    assert words == ["@sample.py"]
    editor.nvim.input("<C-e>")
    editor.wait("vim.fn.pumvisible() == 0", what="the popup closed")
    editor.nvim.input("m")
    editor.wait("vim.api.nvim_get_current_line() == 'look at @sam'")
    assert editor.lua("return vim.fn.pumvisible()") == 0


def test_a_mention_finds_a_path_by_letters_in_order(editor: Editor) -> None:
    """`@main` offers src/main.py: after the paths that begin with what is typed, those
    whose letters it holds in order, best first; each key asks again."""
    project = editor.tmp / "project"
    (project / "src" / "app").mkdir(parents=True)
    (project / "src" / "app" / "main.py").write_text("")
    (project / "src" / "maintenance.txt").write_text("")
    (project / "main.rs").write_text("")
    editor.setup()
    status = editor.open_chat()
    editor.nvim.command(f"call win_gotoid(bufwinid({status['input_buf']}))")
    editor.nvim.input("i@main")
    editor.wait("vim.fn.pumvisible() == 1", what="the popup on @main")
    shown = "vim.tbl_map(function(i) return i.word end, vim.fn.complete_info({'items'}).items)"
    editor.wait(f"#{shown} == 3", what="three files")
    words = editor.lua(f"return {shown}")
    assert words[0] == "@main.rs"  # the prefix first
    assert sorted(words[1:]) == ["@src/app/main.py", "@src/maintenance.txt"]
    editor.nvim.input(".p")  # narrowed by the next keys, asked again
    editor.wait(f"vim.deep_equal({shown}, {{'@src/app/main.py'}})", what="one file left")
    editor.nvim.input("<C-n><C-y>")
    editor.wait("vim.api.nvim_get_current_line() == '@src/app/main.py'")
