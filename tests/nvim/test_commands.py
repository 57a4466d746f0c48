"""Commands and keys as a Neovim user expects them: views that reuse their tab
page, `q` that closes, completion, one-line errors, described mappings, help."""

from __future__ import annotations

from tests.nvim.conftest import ROOT, Editor

TABS = "return #vim.api.nvim_list_tabpages()"


def test_review_and_log_reuse_their_tab_page_and_q_closes_them(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    for command, name in (("AcpReview", "acp://review/1"), ("AcpLog", "acp://log")):
        editor.nvim.command(command)
        assert editor.lua(TABS) == 2
        editor.nvim.command("tabfirst")
        editor.nvim.command(command)
        assert editor.lua(TABS) == 2, command
        assert editor.lua("return vim.api.nvim_buf_get_name(0)") == name
        editor.nvim.input("q")
        editor.wait("#vim.api.nvim_list_tabpages() == 1", what=f"q to close {name}")


def test_q_closes_a_terminal_window(editor: Editor) -> None:
    editor.setup()
    editor.lua("require('acp.editor.terminal').write('d1', 'output', false)")
    editor.nvim.command("AcpTerminal d1")
    assert editor.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 2
    editor.nvim.input("q")
    editor.wait("#vim.api.nvim_tabpage_list_wins(0) == 1", what="q to close the terminal")
    assert editor.lua("return vim.fn.reg_recording()") == ""


def test_unknown_terminal_is_one_line_not_a_traceback(editor: Editor) -> None:
    editor.setup()
    editor.lua("require('acp.editor.terminal').write('d1', 'x', false)")
    editor.nvim.command("AcpTerminal t9")  # raised a Lua traceback
    assert editor.lua("return _G.acp_notices[#_G.acp_notices].msg") == "acp: no terminal t9"


def test_acpconfig_completes_settings_then_their_values(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    editor.open_chat()

    def complete(line: str) -> list[str]:
        return list(editor.lua("return vim.fn.getcompletion(..., 'cmdline')", line))

    assert complete("AcpConfig ") == ["mode", "model", "thought", "suggest"]
    assert complete("AcpConfig mo") == ["mode", "model"]
    assert complete("AcpConfig mode ") == ["ask", "code"]
    assert complete("AcpConfig mode c") == ["code"]
    assert complete("AcpConfig suggest ") == ["on", "off"]


def test_every_chat_mapping_has_a_description(editor: Editor) -> None:
    editor.setup(agents={"fake": editor.fake_agent("permission")})
    status = editor.open_chat("fake")
    editor.lua("require('acp').send('edit')")
    editor.wait_event("AcpPermissionRequest")
    editor.lua("require('acp.editor.terminal').write('d1', 'x', false)")
    editor.nvim.command("AcpReview")
    review = editor.lua("return vim.api.nvim_get_current_buf()")
    log = editor.lua("return require('acp.log').open()")
    terminal = editor.lua("return require('acp.editor.terminal').terminals.d1.buf")
    # What the markdown filetype plugin maps on any markdown buffer is not ours.
    markdown = editor.lua(
        "local buf = vim.api.nvim_create_buf(false, true); vim.bo[buf].filetype = 'markdown'; return buf"
    )
    keymaps = """local maps = {}
        for _, mode in ipairs({'n', 'i'}) do
          for _, map in ipairs(vim.api.nvim_buf_get_keymap(..., mode)) do
            table.insert(maps, { lhs = map.lhs, desc = map.desc or '' })
          end
        end
        return maps"""
    filetype_maps = {m["lhs"] for m in editor.lua(keymaps, markdown)}
    for buf in (status["transcript_buf"], status["input_buf"], review, log, terminal):
        maps = [m for m in editor.lua(keymaps, buf) if m["lhs"] not in filetype_maps]
        assert maps, buf
        assert [m["lhs"] for m in maps if not m["desc"].startswith("acp")] == []
    def normal_keys(buf: int) -> set[str]:
        return set(
            editor.lua(
                "return vim.tbl_map(function(m) return m.lhs end, vim.api.nvim_buf_get_keymap(...,'n'))",
                buf,
            )
        )

    # The prompt's bare keys in the transcript; prefixed ones in the input you type in.
    assert {"a", "A", "r", "R"} <= normal_keys(status["transcript_buf"])
    assert not {"a", "A", "r", "R"} & normal_keys(status["input_buf"])
    assert {"\\y", "\\n"} <= normal_keys(status["input_buf"])


def test_help_acp_opens_on_the_quick_start_without_a_plugin_manager(editor: Editor) -> None:
    # The plugin is only on 'runtimepath' (tests/nvim/init.lua): doc/tags ships.
    assert (ROOT / "doc" / "tags").exists()
    editor.nvim.command("help acp")
    assert editor.lua("return vim.fn.expand('%:t')") == "acp.txt"
    top = editor.lua("return vim.fn.line('.')")
    lines = editor.nvim.current.buffer[top - 1 :]
    assert "*acp*" in lines[0]
    end = next(i for i, line in enumerate(lines) if line.startswith("====="))
    quick_start = "\n".join(lines[:end])
    assert end <= 24, "the quick start fits on one screen"
    for words in (":AcpChat", ":AcpToggle", "setup(", "|acp-contents|"):
        assert words in quick_start


def test_wrong_arguments_are_one_line_and_send_nothing(editor: Editor) -> None:
    """A turn that is no number, a prompt that is no text, a hunk without its file:
    an error that says so (not a traceback, not a picker, not a guess)."""
    editor.setup()
    editor.open_chat()
    for command, said in {
        "AcpRewind abc": 'acp: a turn is a whole number, not "abc"',
        "AcpEdit 1.5": "acp: a turn is a whole number, not 1.5",
        "AcpRestore x": 'acp: a turn is a whole number, not "x"',
    }.items():
        editor.lua("_G.acp_notices = {}; pcall(vim.cmd, ...)", command)
        assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [said], command
    for call, said in {
        "send('  ')": 'acp: send takes the prompt\'s text, not "  "',
        "send()": "acp: send takes the prompt's text, not nil",
        "reject(nil, 1)": "acp: a hunk is named with its file: (file, hunk)",
        "accept('nothing.txt')": "acp: no agent changes to nothing.txt",
    }.items():
        raised = editor.lua(f"return select(2, pcall(function() require('acp').{call} end))")
        assert raised == said, call
    assert editor.events("AcpTurnStart") == []
