"""The options Lua knows before the Python host answers are the ones Python defines."""

from __future__ import annotations

from acp_nvim.client.config import Config, builtin_agents, load_config
from tests.nvim.conftest import Editor


def test_lua_defaults_are_the_python_defaults(editor: Editor) -> None:
    lua_defaults = editor.lua("return require('acp.config').options")
    assert load_config(lua_defaults) == Config()


def test_chat_layout_and_completion_need_no_host(editor: Editor) -> None:
    editor.lua("vim.o.columns = 200; vim.o.lines = 50")
    editor.setup(agents={"mine": {"cmd": ["mine-acp"]}})
    names = editor.lua("return vim.fn.getcompletion('AcpChat ', 'cmdline')")
    assert names == sorted([*builtin_agents(), "mine"])
    # The windows are drawn before the host could answer anything.
    editor.lua("require('acp').open()")
    chat = Config().chat
    transcript, input_ = editor.lua(
        """
        local chat = require('acp.chat.registry').get()
        return { vim.fn.win_findbuf(chat.transcript)[1], vim.fn.win_findbuf(chat.input)[1] }
        """
    )
    # 0.4 of 200 columns, within min_width..max_width.
    expected = max(chat.min_width, min(chat.max_width, round(200 * chat.width)))
    assert editor.lua(f"return vim.api.nvim_win_get_width({transcript})") == expected
    assert editor.lua(f"return vim.api.nvim_win_get_height({input_})") == chat.input_height
    editor.wait_event("AcpSessionReady")
