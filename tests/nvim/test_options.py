"""The options Lua knows before the Python host answers are the ones Python defines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from acp_nvim.client.config import Config, ConfigError, builtin_agents, load_config
from tests.nvim.conftest import ROOT, Editor

HELP = (ROOT / "doc" / "acp.txt").read_text()
README = (ROOT / "README.md").read_text()


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
    # 0.4 of 200 columns (a split's share when none is given), within min..max_width.
    assert chat.width is None
    expected = max(chat.min_width, min(chat.max_width, round(200 * 0.4)))
    assert editor.lua(f"return vim.api.nvim_win_get_width({transcript})") == expected
    assert editor.lua(f"return vim.api.nvim_win_get_height({input_})") == chat.input_height
    editor.wait_event("AcpSessionReady")


def test_wrong_options_are_all_reported_once_and_no_lua_error(editor: Editor) -> None:
    editor.lua("vim.o.columns = 200")
    editor.setup(chat={"width": "wide", "position": "top"}, log_lines="many")
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["msg"] == (
        "acp: invalid options: chat.position: expected one of 'right', 'left', 'bottom',"
        " 'float', 'tab', got 'top'; chat.width: expected a number, got a string;"
        " log_lines: expected an integer, got a string"
    )
    # Lua goes on with the defaults of those keys: the chat opens, no traceback.
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")
    assert error["message"].startswith("invalid options: ")
    for key in ("chat.width", "chat.position", "log_lines"):
        assert key in error["message"]
    assert editor.lua("return vim.v.errmsg") == ""
    width = editor.lua(
        "return vim.api.nvim_win_get_width(vim.fn.bufwinid(require('acp').status().transcript_buf))"
    )
    assert width == 80  # 0.4 of 200 columns: the default
    editor.nvim.command("AcpChat")  # again: still no traceback
    assert editor.lua("return vim.v.errmsg") == ""
    assert len(editor.events("AcpError")) == 1
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    for key in ("chat.width", "chat.position", "log_lines"):
        assert f"ERROR invalid option {key}: " in text


def test_setup_given_no_table_of_options_says_so_and_changes_nothing(editor: Editor) -> None:
    """`setup({ { ... } })` (braces doubled) said "invalid option : expected a table,
    got a list", naming an empty key, and went on with every default."""
    editor.setup(chat={"position": "left"})
    for given in ("'left'", "{ { chat = { position = 'bottom' } } }"):
        raised = editor.lua(f"return select(2, pcall(require('acp').setup, {given}))")
        assert raised == "acp: setup() takes a table of options", given
        assert editor.lua("return require('acp.config').options.chat.position") == "left"
    assert editor.lua("return _G.acp_notices") == []


def test_a_chat_refused_by_wrong_options_starts_once_they_are_right(editor: Editor) -> None:
    """A chat opened under a wrong option shows it; with setup() right again, the
    prompt sent there starts the agent :AcpChat asked for (the default one) and
    goes to it. It was "unknown agent '?'": the refused chat never knew its agent."""
    editor.setup(chat={"width": "wide"})
    editor.nvim.command("AcpChat")
    editor.wait_event("AcpError")
    editor.setup()
    editor.lua("require('acp').send('hello')")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    assert [e["message"] for e in editor.events("AcpError")] == [
        "invalid option chat.width: expected a number, got a string"
    ]
    assert editor.events("AcpSessionReady")[0]["agent"] == "demo"


def test_a_chat_size_of_too_few_cells_is_told_by_setup_in_the_words_of_the_chat(
    editor: Editor,
) -> None:
    """`chat.width = 5` (columns, the help says 20 or more) passed setup() in
    silence, then failed the chat: setup() says it, as the chat does."""
    editor.setup(chat={"width": 5})
    [notice] = editor.lua("return _G.acp_notices")
    problem = "chat.width: expected a fraction (at most 1) or a whole number >= 20, got 5"
    assert notice["msg"] == f"acp: invalid option {problem}"
    editor.nvim.command("AcpChat")
    assert editor.wait_event("AcpError")["message"] == f"invalid option {problem}"


def test_an_option_set_to_vim_nil_is_not_given(editor: Editor) -> None:
    """vim.NIL (a null from a JSON file, a key cleared) was "expected an integer,
    got userdata" in Lua, and null for the Python host: valid for some keys there."""
    editor.lua("vim.o.columns = 200")
    # None arrives in Lua as vim.NIL.
    editor.setup(chat={"width": None, "min_width": None}, log_lines=None)
    assert editor.lua("return _G.acp_notices") == []
    editor.open_chat()  # the Python host took them too
    width = editor.lua(
        "return vim.api.nvim_win_get_width(vim.fn.bufwinid(require('acp').status().transcript_buf))"
    )
    assert width == 80  # 0.4 of 200 columns: the default
    # In a list, an item is wrong: said as it was written.
    problems = editor.lua(
        "return require('acp.config').set({agents = {x = {cmd = {'x', vim.NIL}}}})"
    )
    assert problems == ["agents.x.cmd[2]: expected a string, got vim.NIL"]


def test_lua_finds_the_wrong_keys_python_finds(editor: Editor) -> None:
    cases = [
        {"chat": {"width": "wide", "bogus": 1}, "auto_save": 1},
        {"agents": {"a": {"cmd": "a"}, "b": {}}, "editor_mcp": {"tools": ["nope"]}},
        {"keys": {"chat": {"hide": True}, "review": {"nope": "x"}}, "hunk_keys": True},
        {"timeouts": {"start": 0}, "fs_access": {"outside": "yes"}, "protocol_version": 3},
        {"mcp_servers": {"s": {"type": "ftp"}}, "history": {"max_age_days": "old"}},
        {"agents": {"blank": {"cmd": [""]}, "space": {"cmd": [" ", "x"]}}},
        {"chat": {"width": 5, "height": 2.5, "min_width": 3}},
    ]
    for raw in cases:
        with pytest.raises(ConfigError) as err:
            load_config(raw)
        python = sorted(p.split(":")[0].split("[")[0] for p in err.value.problems)
        lua = editor.lua(
            "local problems = require('acp.config').check(...)"
            " return vim.tbl_map(function(p) return (p:match('^[^:]+'):gsub('%[.*', '')) end, problems)",
            raw,
        )
        assert sorted(lua) == python, raw



@pytest.mark.parametrize(
    ("agent", "problems"),
    [
        ({}, ["agents.foo.cmd: required"]),
        (
            {"cmd": [1, 2], "env": {"A": 1}},
            ["agents.foo.cmd[1]: expected a string, got an integer",
             "agents.foo.env.A: expected a string, got an integer"],
        ),
        ({"cmd": [""]}, ["agents.foo.cmd: the first item must name a program"]),
        # Every wrong key is told, not only that cmd is missing or blank.
        (
            {"mode": 3, "bogus": 1},
            ["agents.foo.bogus: unknown option", "agents.foo.cmd: required",
             "agents.foo.mode: expected a string, got an integer"],
        ),
        (
            {"cmd": [" "], "mode": 3},
            ["agents.foo.cmd: the first item must name a program",
             "agents.foo.mode: expected a string, got an integer"],
        ),
    ],
)  # fmt: skip
def test_a_wrong_agent_is_told_alike_by_lua_and_python_and_not_also_unknown(
    editor: Editor, agent: dict[str, object], problems: list[str]
) -> None:
    editor.setup(agents={"foo": agent}, default_agent="foo")
    [notice] = editor.lua("return _G.acp_notices")
    assert "unknown agent" not in notice["msg"]
    said = re.sub(r"^acp: invalid options?:? ", "", notice["msg"])
    assert sorted(said.split("; ")) == problems
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")
    told = re.sub(r"^invalid options?:? ", "", error["message"])
    assert sorted(told.split("; ")) == problems


@pytest.mark.parametrize("program", ["", "  "])
def test_a_blank_program_is_told_by_setup_in_the_words_of_the_chat(
    editor: Editor, program: str
) -> None:
    """cmd = {''} passed setup(): only the chat's start said it was wrong."""
    editor.setup(agents={"foo": {"cmd": [program, "--acp"]}}, default_agent="foo")
    problem = "invalid option agents.foo.cmd: the first item must name a program"
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["msg"] == f"acp: {problem}"
    editor.nvim.command("AcpChat")
    assert editor.wait_event("AcpError")["message"] == problem


def test_a_root_that_is_no_directory_is_told_by_setup_in_the_words_of_the_chat(
    editor: Editor, tmp_path: Path
) -> None:
    """`roots = { "/no/such/dir" }` passed setup() in silence: only the chat's start
    said it was wrong."""
    missing, relative = str(tmp_path / "missing"), "relative/dir"
    editor.setup(roots=[missing], agents={"foo": {"cmd": ["foo-acp"], "roots": [relative]}})
    problems = [
        f"agents.foo.roots: {relative!r} is not an absolute path (nor ~/...)",
        f"roots: {missing!r} is not a directory",
    ]
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["msg"] == "acp: invalid options: " + "; ".join(problems)
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")
    assert sorted(error["message"].removeprefix("invalid options: ").split("; ")) == problems


def test_a_server_of_yours_named_nvim_is_refused_alike_by_lua_and_python(editor: Editor) -> None:
    """An `nvim` of mcp_servers went to the agent beside the editor's own `nvim`
    server, unsaid: the agent saw one name for two servers."""
    editor.setup(
        mcp_servers={"nvim": {"command": "sh"}},
        agents={"mine": {"cmd": ["mine-acp"], "mcp_servers": {"nvim": {"command": "sh"}}}},
    )
    taken = "'nvim' names the editor's own MCP server (editor_mcp): give yours another name"
    problems = [f"agents.mine.mcp_servers.nvim: {taken}", f"mcp_servers.nvim: {taken}"]
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["msg"] == "acp: invalid options: " + "; ".join(problems)
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")
    assert sorted(error["message"].removeprefix("invalid options: ").split("; ")) == problems
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert f"ERROR invalid option mcp_servers.nvim: {taken}" in text


# What a server's whole entry, or a path, tells beyond the types.
BEYOND_TYPES = [
    ({"mcp_servers": {"web": {"type": "http"}}},
     ["mcp_servers.web.url: required for an http server"]),
    ({"mcp_servers": {"lint": {"args": ["--stdio"]}, "web": {"command": "w", "url": "http://h"}}},
     ["mcp_servers.lint.command: required for a stdio server",
      'mcp_servers.web.url: only for type = "http" or "sse"']),
    ({"mcp_servers": {"web": {"type": "sse", "url": "http://h", "env": {"A": "b"}}}},
     ["mcp_servers.web.env: only for a stdio server"]),
    ({"fs_access": {"roots": ["relative/dir"]}},
     ["fs_access.roots: 'relative/dir' is not an absolute path (nor ~/...)"]),
    # A wrong server of an agent is left out, the agent's others still looked at...
    ({"agents": {"mine": {"cmd": ["m"], "mcp_servers": {"web": {"type": "http"}, "x": {"command": 1}}}}},
     ["agents.mine.mcp_servers.web.url: required for an http server",
      "agents.mine.mcp_servers.x.command: expected a string, got an integer"]),
    # A name that is no word (Python's `agents.my agent` would name no key).
    ({"agents": {"my agent": {"cmd": ["m"]}, "": {"cmd": ["m"]}},
      "mcp_servers": {"my server": {"command": "s"}}},
     ["agents: agent name '' must be a non-empty word",
      "agents: agent name 'my agent' must be a non-empty word",
      "mcp_servers: server name 'my server' must be a non-empty word"]),
    ({"agents": {"mine": {"cmd": ["m"], "mcp_servers": {"a b": {"command": "s"}}}}},
     ["agents.mine.mcp_servers: server name 'a b' must be a non-empty word"]),
    ({"agents": [{"cmd": ["m"]}]}, ["agents: expected a table, got a list"]),
    # ...but an agent told wrong is left out whole: its servers are not looked at.
    ({"agents": {"mine": {"cmd": ["m"], "mode": 3, "mcp_servers": {"web": {"type": "http"}}}}},
     ["agents.mine.mode: expected a string, got an integer"]),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "problems"), BEYOND_TYPES)
def test_a_server_or_path_python_refuses_is_told_by_setup_in_its_words(
    editor: Editor, raw: dict[str, object], problems: list[str]
) -> None:
    """An http server without its url, a relative `fs_access.roots`, an agent named
    `my agent` passed setup() in silence: only the next chat's start said it was wrong
    (and of `agents = { {...} }`, in other words than setup())."""
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    assert sorted(err.value.problems) == problems
    assert sorted(editor.lua("return (require('acp.config').check(...))", raw)) == problems


def test_setup_again_with_a_server_it_cannot_offer_says_so_while_a_chat_runs(
    editor: Editor,
) -> None:
    """setup() called again, a chat open, with an http server and no url: nothing was
    said, the chat went on with the options of before, and the next chat refused."""
    editor.setup()
    editor.open_chat()
    editor.setup(mcp_servers={"web": {"type": "http"}})
    problem = "invalid option mcp_servers.web.url: required for an http server"
    assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [f"acp: {problem}"]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"keys": {"review": {"accept": ""}}},
         "keys.review.accept: expected a non-empty string or false, got ''"),
        ({"permissions": {"allow": {"commands": [""]}}},
         "permissions.allow.commands[1]: expected a non-empty string, got ''"),
    ],
)  # fmt: skip
def test_an_empty_string_is_told_alike_by_lua_and_python(
    editor: Editor, raw: dict[str, object], problem: str
) -> None:
    """`accept = ""` was "expected a string or false, got a string" in Lua and "expected a
    string of length >= 1" in :checkhealth."""
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    assert err.value.problems == [problem]
    assert editor.lua("return (require('acp.config').check(...))", raw) == [problem]


WRONG_KINDS = [
    {"keys": {"chat": {"hide": 3}, "input": {"send": True}}, "hunk_keys": True},
    {"hunk_keys": 3, "diff_preview": True, "timeouts": {"start": 0}},
    {"chat": {"width": "wide"}, "history": {"max_age_days": "old"}},
    {"editor_mcp": {"tools": ["nope"]}},
    {"agents": {"x": {"cmd": ["x"], "editor_mcp": "x", "permission_policy": "no"}}},
    {"agents": {"x": {"cmd": "x", "bogus": 1}, "y": "y"}},
    {"agents": {"demo": {"config_options": {"x": 3, "y": "on"}, "env": {"A": 3, "B": ["b"]}}}},
]


@pytest.mark.parametrize("raw", WRONG_KINDS)
def test_lua_and_python_tell_a_wrong_option_in_the_same_words(
    editor: Editor, raw: dict[str, object]
) -> None:
    """The chat and :checkhealth (Python's words) said `keys.chat.hide: expected a
    boolean or a string` where setup() said `a non-empty string or false` (true is
    refused), `a number or nil`, `> 0.0`, `got True`; and of an agent with two wrong
    keys they told only the first."""
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    lua = editor.lua("return (require('acp.config').check(...))", raw)
    assert sorted(err.value.problems) == sorted(lua)


def test_a_choice_given_another_kind_names_the_choices_in_setup_and_the_chat(
    editor: Editor,
) -> None:
    """`fs_access = { outside = true }` was "expected 'ask' or 'allow' or 'deny', got
    true" by setup() and "expected a string, got a boolean" by the chat and
    :checkhealth: a string, any string, was not what was wanted."""
    editor.setup(
        chat={"position": 1},
        fs_access={"outside": True},
        protocol_version="1",
        mcp_servers={"web": {"type": 2, "url": "http://localhost"}},
    )
    problems = [
        "chat.position: expected one of 'right', 'left', 'bottom', 'float', 'tab', got an integer",
        "fs_access.outside: expected 'ask' or 'allow' or 'deny', got a boolean",
        "mcp_servers.web.type: expected 'stdio' or 'http' or 'sse', got an integer",
        "protocol_version: expected 1 or 2, got a string",
    ]
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["msg"] == "acp: invalid options: " + "; ".join(problems)
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")["message"]
    assert sorted(error.removeprefix("invalid options: ").split("; ")) == problems


def test_a_wrong_option_is_told_alike_by_setup_the_chat_and_checkhealth(editor: Editor) -> None:
    """The help: until the options are right, chats show the message setup() gave
    and :checkhealth acp lists each wrong option."""
    editor.setup(
        keys={"chat": {"hide": True}},
        agents={"mine": {"cmd": ["mine-acp"], "mode": 3, "permission_policy": "no"}},
    )
    [notice] = editor.lua("return _G.acp_notices")
    problems = [
        "agents.mine.mode: expected a string, got an integer",
        "agents.mine.permission_policy: expected 'ask' or 'allow_reads' or 'allow_all', got 'no'",
        "keys.chat.hide: expected a non-empty string or false, got a boolean",
    ]
    assert sorted(notice["msg"].removeprefix("acp: invalid options: ").split("; ")) == problems
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")["message"]
    assert sorted(error.removeprefix("invalid options: ").split("; ")) == problems
    editor.nvim.command("checkhealth acp")
    told = [line.split("ERROR invalid option ", 1)[1]
            for line in editor.nvim.current.buffer[:] if "ERROR invalid option " in line]  # fmt: skip
    assert sorted(told) == problems


def test_a_built_in_agent_is_tuned_without_restating_its_program(editor: Editor) -> None:
    """`agents = { codex = { editor_mcp = false } }`, the help's own example, and
    `agents.qwen.mode` of the README were "agents.codex.cmd: required"."""
    tuned = {"codex": {"editor_mcp": False}, "demo": {"mode": "code"}}
    assert editor.lua("return #require('acp.config').check(...)", {"agents": tuned}) == 0
    editor.setup(agents=tuned)
    assert editor.lua("return _G.acp_notices") == []
    editor.open_chat("demo")  # the built-in program, with the mode given
    editor.wait("require('acp').status().mode == 'Code'", what="the demo switched to mode code")
    assert editor.lua("return require('acp.config').options.agents.demo.cmd") is None


def test_checkhealth_looks_for_the_agents_given_beside_a_wrong_option(editor: Editor) -> None:
    """One wrong key elsewhere (`auto_save = 3`) and :checkhealth listed only the
    built-in agents: the user's own, not installed, was unsaid until that key was fixed."""
    editor.setup(
        agents={"mine": {"cmd": ["no-such-agent-binary"]}}, default_agent="mine", auto_save=3
    )
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert "ERROR invalid option auto_save: expected a boolean, got an integer" in text
    assert 'ERROR mine: "no-such-agent-binary" is not installed or not on PATH' in text


def test_checkhealth_without_python_still_lists_the_wrong_options(editor: Editor) -> None:
    """`python` naming no program: :checkhealth said only that, and nothing of the
    other wrong options setup() had already found."""
    editor.setup(python="/no/such/python3", chat={"width": "wide"})
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert 'ERROR Python "/no/such/python3" not found' in text
    assert "ERROR invalid option chat.width: expected a number, got a string" in text


# Each `setup()` example of the README and of doc/acp.txt, and the README's lazy.nvim
# spec (its `opts`), as a user would paste it.
SETUP_EXAMPLES = [
    *(m[1] for m in re.finditer(r">(?:lua)?\n(.*?)\n<", HELP, re.S) if 'require("acp").setup(' in m[1]),
    *(m[1] for m in re.finditer(r"```lua\n(.*?)```", README, re.S) if "setup(" in m[1]),
    *(f"return {m[1]}" for m in re.finditer(r"```lua\n(\{.*?)```", README, re.S)),
]
# Runs an example with require("acp") standing in: what it gives setup() (or a
# spec's `opts`) is returned, and vim.cmd does nothing (`packadd`).
RUN_EXAMPLE = """
local code = ...
local given
local stub = { setup = function(opts) given = opts end }
local env = setmetatable({
  require = function(name) return name == "acp" and stub or require(name) end,
  vim = setmetatable({ cmd = setmetatable({}, { __index = function() return function() end end }),
                       g = {} }, { __index = vim }),
}, { __index = _G })
local spec = setfenv(assert(loadstring(code)), env)()
given = given or spec.opts
return { given = given, problems = require("acp.config").check(given) }
"""


def test_every_setup_example_of_the_docs_is_a_valid_one(editor: Editor) -> None:
    """What the README and :help acp show is what a user pastes: each example's
    options pass setup()'s check and the Python side's."""
    assert len(SETUP_EXAMPLES) >= 9
    for example in SETUP_EXAMPLES:
        checked = editor.lua(RUN_EXAMPLE, example)
        assert checked["problems"] == [], example
        load_config(checked["given"])
