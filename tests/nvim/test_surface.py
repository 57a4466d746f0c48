"""The public surface is pinned: every `require("acp")` function, user command,
`User` event and editor MCP tool has its tag in doc/acp.txt and every such tag names
one that exists; a command's usage lines and a tool's show the arguments it takes;
every highlight group the Lua names is defined (so tagged); `status()` returns
exactly the fields `acp.Status` annotates (and the doc shows)."""

from __future__ import annotations

import os
import re
import signal
import typing
from pathlib import Path
from typing import Any

from acp_nvim.client.config import EDITOR_TOOLS
from acp_nvim.client.editor import Event
from tests.nvim.conftest import ROOT, Editor

DOC = (ROOT / "doc" / "acp.txt").read_text()
TAGS = set(re.findall(r"\*([^*\s]+)\*", DOC))

PUBLIC_FUNCTIONS = """
local names = {}
for name, value in pairs(require("acp")) do
  if type(value) == "function" and not name:match("^_") then
    table.insert(names, name)
  end
end
return names
"""


def same(found: set[str], tagged: set[str], what: str) -> None:
    assert not found - tagged, f"{what} without a tag in doc/acp.txt: {sorted(found - tagged)}"
    assert not tagged - found, f"tags in doc/acp.txt naming no {what}: {sorted(tagged - found)}"


def test_every_public_function_has_a_tag_and_every_tag_a_function(editor: Editor) -> None:
    tagged = {m[1] for t in TAGS if (m := re.fullmatch(r"acp\.(\w+)\(\)", t))}
    same(set(editor.lua(PUBLIC_FUNCTIONS)), tagged, "functions")


def test_every_command_has_a_tag_and_every_tag_a_command(editor: Editor) -> None:
    commands = {
        name: info
        for name, info in editor.lua("return vim.api.nvim_get_commands({})").items()
        if name.startswith("Acp")
    }
    tags = {t[1:] for t in TAGS if t.startswith(":Acp")}
    same(set(commands), {t.removesuffix("!") for t in tags}, "commands")
    # `:AcpChat!` is documented: the command takes a bang.
    for tag in (t for t in tags if t.endswith("!")):
        assert commands[tag[:-1]]["bang"], tag
    # The README's lazy.nvim spec loads the plugin on every command (else E492).
    lazy_cmd = re.search(r"cmd = \{(.*?)\}", (ROOT / "README.md").read_text(), re.S)
    assert lazy_cmd is not None
    assert set(re.findall(r'"(Acp\w+)"', lazy_cmd[1])) == set(commands)


# Every hot-link :help draws in doc/acp.txt whose tag no help file has: CTRL-] on
# it is E426, and the bars it hides joined the words around it.
DEAD_LINKS = r"""
vim.cmd("syntax on")
vim.cmd("help acp")
vim.bo.syntax = "help"
local dead = {}
for lnum, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
  for col, tag in line:gmatch("()|([^|]+)|") do
    local group = vim.fn.synIDattr(vim.fn.synID(lnum, col + 1, 1), "name")
    if group == "helpHyperTextJump" and #vim.fn.taglist("^" .. vim.fn.escape(tag, [[\.*$~[]]) .. "$") == 0 then
      table.insert(dead, lnum .. ": " .. tag)
    end
  end
end
return dead
"""


def test_every_link_of_the_help_leads_to_a_tag(editor: Editor) -> None:
    assert editor.lua(DEAD_LINKS) == []


def test_every_event_has_a_tag_and_every_tag_an_event() -> None:
    # Bare Acp* tags are events (options are acp-option-*, highlights hl-Acp*).
    tagged = {t for t in TAGS if re.fullmatch(r"Acp\w+", t)}
    same(set(typing.get_args(Event)), tagged, "events")
    # Lua fires no User event of its own: it relays the ones Python emits (typed Event).
    fired = [
        (path.relative_to(ROOT / "lua").as_posix(), pattern)
        for path in (ROOT / "lua").rglob("*.lua")
        for pattern in re.findall(
            r'nvim_exec_autocmds\(\s*"User",\s*\{\s*pattern\s*=\s*([^,]+),', path.read_text()
        )
    ]
    assert fired == [("acp/host/init.lua", "item.name")]


def test_every_mcp_tool_has_a_tag_over_its_arguments() -> None:
    """The editor MCP server's tools had no tags, and `run_command`'s defaults and
    bounds were nowhere: each entry's first line shows the tool's input schema,
    {required} and [{optional}] arguments in the schema's order."""
    from acp_nvim.client.mcp import _tools

    tagged = {m[1] for t in TAGS if (m := re.fullmatch(r"acp-mcp-tool-(\w+)", t))}
    same(set(EDITOR_TOOLS), tagged, "editor MCP tools")
    for name in EDITOR_TOOLS:
        schema = _tools.describe(name, "2025-11-25")["inputSchema"]
        required = set(schema.get("required", ()))
        args = [f"{{{a}}}" if a in required else f"[{{{a}}}]" for a in schema["properties"]]
        usage = DOC.split(f"*acp-mcp-tool-{name}*\n", 1)[1].splitlines()[0]
        assert usage == " ".join([name, *args])


def test_every_highlight_group_the_lua_names_is_defined_and_tagged() -> None:
    """A group the Lua draws with but highlights.lua does not list is neither
    defined (no colour) nor in doc/acp.txt: every Acp word under lua/ is a group
    of that list, a command, an event, or the host's own function."""
    lua = (ROOT / "lua" / "acp" / "highlights.lua").read_text()
    groups = set(re.findall(r'\{ "(Acp\w+)", "\w+", "[^"]+" \}', lua))
    assert {t.removeprefix("hl-") for t in TAGS if t.startswith("hl-Acp")} == groups
    commands = set(re.findall(r'command\("(Acp\w+)"', (ROOT / "plugin" / "acp.lua").read_text()))
    named = {
        (path.relative_to(ROOT).as_posix(), word)
        for path in (ROOT / "lua").rglob("*.lua")
        for word in re.findall(r"\bAcp[A-Z]\w*", path.read_text())
    }
    known = groups | commands | set(typing.get_args(Event)) | {"AcpHostNotify"}
    assert {(path, word) for path, word in named if word not in known} == set()


def usage_forms(command: str) -> list[tuple[bool, bool, list[str]]]:
    """The usage lines of `command` in the commands section of doc/acp.txt:
    (bang, range, arguments)."""
    section = DOC.split("*acp-commands*", 1)[1].split("*acp-chat*", 1)[0]
    forms = []
    for line in section.splitlines():
        if m := re.match(rf":(\{{range\}})?{command}(\[!\]|!)?(?=\s|$)(.*)", line):
            arguments = re.sub(r"\s+\*\S+\*$", "", m[3]).split()
            forms.append((m[2] is not None, m[1] is not None, arguments))
    return forms


def test_every_commands_usage_shows_the_arguments_it_takes(editor: Editor) -> None:
    """What `:help :AcpX` shows is what Neovim takes: an [optional] argument for
    nargs ?, a {required} one for nargs 1, a bang or a range only where the
    command takes it."""
    commands = {
        name: info
        for name, info in editor.lua("return vim.api.nvim_get_commands({})").items()
        if name.startswith("Acp")
    }
    optional = re.compile(r"\[.*")
    wrong = []
    for name, info in commands.items():
        forms = usage_forms(name)
        args = [a for _, ranged, a in forms if not ranged]
        fits = {
            "0": all(a == [] for a in args),
            "1": all(len(a) == 1 and not optional.match(a[0]) for a in args),
            "?": all(len(a) <= 1 and all(optional.match(w) for w in a) for a in args)
            and any(a for a in args),
            "+": all(a and not optional.match(a[0]) for a in args),
            "*": all(all(optional.match(w) for w in a) for a in args) and any(a for a in args),
        }[info["nargs"]]
        bang = any(b for b, _, _ in forms) == info["bang"]
        # Neovim leaves `range` out of a command that takes none.
        ranged = any(r for _, r, _ in forms) == ("range" in info)
        if not (forms and fits and bang and ranged):
            wrong.append((name, info["nargs"], info["bang"], "range" in info, forms))
    assert wrong == []


def annotated_status() -> dict[str, tuple[str, bool]]:
    """``acp.Status`` of lua/acp/init.lua: field -> (LuaLS type, optional)."""
    lua = (ROOT / "lua" / "acp" / "init.lua").read_text()
    block = lua.split("---@class (exact) acp.Status\n", 1)[1]
    fields = {}
    for line in block.splitlines():
        if not (m := re.match(r"---@field (\w+)(\??) (\S+)", line)):
            break
        fields[m[1]] = (m[3], m[2] == "?")
    return fields


def documented_status() -> set[str]:
    """The keys of the example under *acp.status()* in doc/acp.txt."""
    example = DOC.split("*acp.status()*", 1)[1].split("\n<\n", 1)[0]
    code = "\n".join(line.split("--")[0] for line in example.splitlines())
    return set(re.findall(r"(\w+) = ", code))


def lua_type_holds(lua_type: str, value: Any) -> bool:
    for alternative in lua_type.split("|"):
        if alternative.startswith('"'):
            if value == alternative.strip('"'):
                return True
        elif alternative == "boolean":
            if isinstance(value, bool):
                return True
        elif alternative == "integer":
            if isinstance(value, int) and not isinstance(value, bool):
                return True
        elif alternative == "string":
            if isinstance(value, str):
                return True
        elif alternative == "string[]":
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return True
        elif alternative == "acp.Usage":
            if isinstance(value, dict) and {"used", "size"} <= set(value):
                return True
        elif alternative == "acp.Command[]":
            if isinstance(value, list) and all("name" in v for v in value):
                return True
        elif alternative == "acp.Choices":
            if isinstance(value, dict) and {"current", "available"} <= set(value):
                return True
        elif alternative == "table[]":
            if isinstance(value, list) and all(isinstance(v, dict) for v in value):
                return True
        else:
            raise AssertionError(f"acp.Status: no check for the type {alternative!r}")
    return False


# :AcpChats names its first chat (vim.ui.select takes it, then "rename").
RENAME = """
local name = ...
vim.ui.select = function(items, opts, choice)
  choice(opts.prompt == 'Chats' and items[1] or 'rename')
end
vim.ui.input = function(opts, done) done(name) end
vim.cmd.AcpChats()
"""


def the_demo_agent(editor: Editor) -> int:
    (agent,) = (
        pid
        for pid in editor.agent_pids()
        if b"acp_nvim.demo_agent" in Path(f"/proc/{pid}/cmdline").read_bytes()
    )
    return agent


def test_status_returns_what_acp_status_annotates(editor: Editor) -> None:
    annotated = annotated_status()
    assert set(annotated) == documented_status(), "acp.Status and the example in doc/acp.txt"
    editor.setup(protocol_version=2)  # the demo's v2 settings fill mode, model, ...
    status = editor.open_chat()
    required = {name for name, (_, optional) in annotated.items() if not optional}
    assert required <= set(status)
    editor.lua(RENAME, "parser")
    # A finished turn (stop_reason), then the agent dies (error): every field is set.
    editor.lua("require('acp').send('hi unknown')")  # an update of a kind no client knows
    editor.wait_event("AcpTurnEnd")
    editor.wait("require('acp').status().history ~= nil")  # once the history wrote it
    os.kill(the_demo_agent(editor), signal.SIGKILL)
    editor.wait_event("AcpError")
    status = editor.lua("return require('acp').status()")
    # Only a worktree chat has a worktree (tests/nvim/test_workspaces.py), only a chat
    # awaiting a rewind's or a branch's session is waiting (tests/nvim/test_rewind.py).
    assert set(status) | {"worktree", "waiting"} == set(annotated), "status() and acp.Status"
    wrong = {
        name: (value, annotated[name][0])
        for name, value in status.items()
        if not lua_type_holds(annotated[name][0], value)
    }
    assert not wrong


def test_status_names_the_chat_and_says_whether_its_agent_runs(editor: Editor) -> None:
    """A statusline could show neither the chat's name nor whether its agent ran:
    status() returned no `name` and no `connected`."""
    editor.setup()
    status = editor.open_chat()
    assert status["connected"] is True and "name" not in status
    editor.lua(RENAME, "parser")
    assert editor.lua("return require('acp').status().name") == "parser"
    editor.lua("require('acp').send('hello zebra')")
    editor.wait_event("AcpTurnEnd")
    editor.wait("#require('acp').history({query = 'zebra'}) == 1", what="the chat kept")

    os.kill(the_demo_agent(editor), signal.SIGKILL)
    editor.wait_event("AcpError")
    assert editor.lua("return require('acp').status().connected") is False
    editor.nvim.command("AcpRestart")
    editor.wait_event("AcpSessionReady", count=2)
    assert editor.lua("return require('acp').status().connected") is True

    # Reopened from the history: named as before, no agent until its first prompt.
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    status = editor.lua("return require('acp').status()")
    assert (status["name"], status["connected"]) == ("parser", False)
    editor.lua("require('acp').send('again')")
    editor.wait_event("AcpTurnEnd", count=2)
    assert editor.lua("return require('acp').status().connected") is True
    editor.lua(RENAME, "")
    assert "name" not in editor.lua("return require('acp').status()")


def test_every_command_tag_heads_the_commands_own_usage_line() -> None:
    """`:help :AcpLogout` landed on a tag with no line of its own under it: the
    window showed :AcpReview's usage and help, and :AcpLogout was nowhere described."""
    lines = DOC.splitlines()
    unheaded = []
    for index, line in enumerate(lines):
        for tag in re.findall(r"\*:(Acp\w+)!?\*", line):
            usage = line if line.startswith(":") else lines[index + 1]
            if not re.match(rf":(\{{range\}})?{tag}\b", usage):
                unheaded.append(tag)
    assert unheaded == []
