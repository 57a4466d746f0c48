"""The Lua side's shape: no require loop, requires point down the layers, no
function traced by LuaJIT.

The twin of test_layout.py for lua/acp/ and plugin/acp.lua. Every ``require``
counts, wherever it stands: file top or function body (a require inside a function
still loads the module when the function runs, so a loop through it is a loop).
The layers are drawn in doc/architecture.md; decision 0031 says why they are these.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A module may require modules of its own layer and of the layers below it, never
# one above. An entry ending in ".*" is a folder (its init.lua and every module
# under it); any other entry is one module.
LAYERS = [
    # Options, small helpers, buffer-local key sets, highlight groups.
    ("base", ["acp.defaults", "acp.config", "acp.util", "acp.keys", "acp.highlights", "acp.bufnames"]),
    # The transport: starts the Python side, sends to it, and dispatches what it
    # sends to the handlers the layers above register (acp.host.handle).
    ("host", ["acp.host.*"]),
    # The open chats: a leaf for the modules that act on "the chat".
    ("chats", ["acp.chat.registry"]),
    # The Lua half of the Editor port: file buffers, terminals, editor info, the
    # window beside the chat.
    ("editor", ["acp.editor.*"]),
    # The agent's changes in files: review state, hunk marks, :AcpDiff, previews of
    # edits waiting for permission.
    ("review", ["acp.review.*"]),
    # The chat windows: transcript, input, prompts, pickers.
    ("chat", ["acp.chat.*"]),
    # The public API, commands with a module of their own, completion sources.
    ("api", ["acp", "acp.install", "acp.health", "acp.log", "acp.completion.*"]),
    # User commands.
    ("plugin", ["plugin/acp"]),
]
TOP_FILES_MAX = 12


def module_name(path: Path) -> str:
    """``acp.chat`` for lua/acp/chat/init.lua, ``plugin/acp`` for plugin/acp.lua."""
    relative = path.relative_to(ROOT)
    if relative.parts[0] != "lua":
        return relative.with_suffix("").as_posix()
    parts = list(relative.with_suffix("").parts[1:])
    if parts[-1] == "init":
        parts.pop()
    return ".".join(parts)


# Lua tokens that matter here: long strings and comments, quoted strings, names and
# the rest one character at a time.
_TOKEN = re.compile(
    r"""
    --\[(?P<ceq>=*)\[.*?\](?P=ceq)\]     # long comment
  | --[^\n]*                             # line comment
  | \[(?P<seq>=*)\[(?P<long>.*?)\](?P=seq)\]  # long string
  | "(?P<dq>(?:\\.|[^"\\\n])*)"          # strings
  | '(?P<sq>(?:\\.|[^'\\\n])*)'
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<other>\S)
    """,
    re.VERBOSE | re.DOTALL,
)


def requires(source: str) -> list[str | None]:
    """Every module ``source`` requires, in order; None for a require whose argument
    is no string literal (a name computed at run time hides an edge)."""
    tokens: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(source):
        if match["name"] is not None:
            tokens.append(("name", match["name"]))
        elif match["other"] is not None:
            tokens.append(("other", match["other"]))
        elif (text := match["dq"] or match["sq"] or match["long"]) is not None:
            tokens.append(("string", text))
    found: list[str | None] = []
    for index, token in enumerate(tokens):
        if token != ("name", "require"):
            continue
        if index > 0 and tokens[index - 1] in (("other", "."), ("other", ":")):
            continue  # a field named require, not the function
        rest = tokens[index + 1 : index + 3]
        if rest and rest[0][0] == "string":
            found.append(rest[0][1])
        elif len(rest) == 2 and rest[0] == ("other", "(") and rest[1][0] == "string":
            found.append(rest[1][1])
        else:
            found.append(None)
    return found


def graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` it requires (others are Neovim's or a
    plugin's; a module's require of itself is a string Vim evaluates later)."""
    edges: dict[str, set[str]] = {}
    for module, source in sources.items():
        targets = requires(source)
        assert None not in targets, f"{module} requires a module by a computed name"
        edges[module] = {t for t in targets if t is not None and t in sources and t != module}
    return edges


def layer_of(module: str) -> int:
    """The layer naming ``module`` itself, else the one of its nearest folder (the
    leaf registry has a layer of its own, below the rest of acp.chat)."""
    folders: list[tuple[int, int]] = []  # (depth of the folder, layer)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if entry == module:
                return index
            folder = entry.removesuffix(".*")
            if entry != folder and (module == folder or module.startswith(folder + ".")):
                folders.append((folder.count("."), index))
    if not folders:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return max(folders)[1]


def upward(edges: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} ({LAYERS[layer_of(module)][0]}) requires {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(edges.items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "open"
        for target in sorted(edges.get(module, ())):
            if state.get(target) == "open":
                found.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    return found


JIT_OFF = "if jit then jit.off(true, true) end -- decision 0068"


def first_statement(source: str) -> str:
    """The first line of ``source`` after its header comment."""
    return next(line for line in source.splitlines() if not line.startswith("--"))


FILES = [*(ROOT / "lua").rglob("*.lua"), ROOT / "plugin" / "acp.lua"]
SOURCES = {module_name(path): path.read_text() for path in FILES}
EDGES = graph(SOURCES)


def test_every_module_is_in_a_layer() -> None:
    for module in SOURCES:
        layer_of(module)
    assert {"acp.host", "acp.chat.registry"} <= EDGES["acp.chat"]  # the files were read


def test_no_require_loop() -> None:
    assert cycles(EDGES) == []


def test_requires_only_point_down() -> None:
    assert upward(EDGES) == []


def test_a_dozen_files_at_most_at_the_top() -> None:
    top = sorted(path.name for path in (ROOT / "lua" / "acp").glob("*.lua"))
    assert len(top) <= TOP_FILES_MAX, top


def test_every_module_leaves_its_functions_to_the_interpreter() -> None:
    """Decision 0068: the first statement after a module's header comment keeps
    LuaJIT from tracing any of its functions (tests/nvim/test_render.py shows it
    takes)."""
    traced = [
        module
        for module, source in SOURCES.items()
        if module.startswith("acp") and first_statement(source) != JIT_OFF
    ]
    assert traced == []


# -- the checks themselves, on module sets made up for them


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('local host = require("acp.host")', ["acp.host"]),
        ("local function f()\n  return require('acp.chat').get()\nend", ["acp.chat"]),
        ('require "acp.util".notify("x")', ["acp.util"]),
        ("vim.bo.omnifunc = \"v:lua.require'acp.x'.f\"", []),  # a string Vim runs later
        ('-- require("acp.chat") in a comment', []),
        ('--[[ require("acp.chat")\n]] local a = 1', []),
        ('local s = [[require("acp.chat")]]', []),
        ("local m = require(name)", [None]),
        ("t.require('acp.chat')", []),
    ],
)
def test_every_require_is_seen_and_nothing_else(source: str, expected: list[str | None]) -> None:
    assert requires(source) == expected


def test_a_loop_through_a_function_body_is_found() -> None:
    edges = graph(
        {
            "acp.chat.a": 'local b = require("acp.chat.b")',
            "acp.chat.b": 'local M = {}\nfunction M.f()\n  return require("acp.chat.a")\nend',
        }
    )
    assert cycles(edges) == [["acp.chat.a", "acp.chat.b", "acp.chat.a"]]


def test_a_require_of_a_layer_above_is_found() -> None:
    edges = graph({"acp.host": 'local chat = require("acp.chat")', "acp.chat": ""})
    assert upward(edges) == ["acp.host (host) requires acp.chat (chat)"]


def test_the_registry_is_below_its_folder() -> None:
    edges = graph(
        {
            "acp.review.state": 'require("acp.chat.registry")',
            "acp.review.hunks": 'require("acp.chat.tools")',
            "acp.chat.registry": "",
            "acp.chat.tools": "",
        }
    )
    assert upward(edges) == ["acp.review.hunks (review) requires acp.chat.tools (chat)"]
