"""The one contract between Python and Lua: every kind of batch item (``BatchItem`` of
acp_nvim/nvim/batcher.py) has its handler in acp.host's dispatch table, and every
render op (``RenderOp`` of acp_nvim/client/editor.py) its handler in acp.chat's
table, and neither side knows a kind the other does not."""

from __future__ import annotations

import typing
from typing import Any

from acp_nvim.client.editor import RenderOp
from acp_nvim.client.errors import NO_AGENT, STARTING
from acp_nvim.nvim.batcher import BatchItem
from tests.nvim.conftest import ROOT, Editor


def kinds(union: Any, tag: str) -> set[str]:
    """The values of the ``tag`` field of each TypedDict of ``union``."""
    found = set()
    for member in typing.get_args(union):
        (kind,) = typing.get_args(typing.get_type_hints(member)[tag])
        found.add(kind)
    return found


def same(python: set[str], lua: set[str], what: str) -> None:
    assert not python - lua, f"{what} Python sends that Lua does not handle: {sorted(python - lua)}"
    assert not lua - python, f"{what} Lua handles that Python never sends: {sorted(lua - python)}"


def test_the_kinds_are_read_from_the_python_types() -> None:
    assert kinds(BatchItem, "kind") >= {"render", "event"}
    assert kinds(RenderOp, "op") >= {"block", "append"}


def test_every_batch_item_kind_has_one_lua_handler_once_a_chat_can_exist(editor: Editor) -> None:
    # A batch can only be about a chat once acp.chat is loaded: loading it must
    # register every handler the transport itself does not have.
    handled = editor.lua(
        """
        assert(package.loaded["acp.chat"] == nil, "acp.chat is loaded already")
        require("acp.chat")
        return vim.tbl_keys(require("acp.host").handlers)
        """
    )
    same(kinds(BatchItem, "kind"), set(handled), "batch item kinds")


def test_every_render_op_has_one_lua_handler(editor: Editor) -> None:
    handled = editor.lua("return vim.tbl_keys(require('acp.chat').ops)")
    same(kinds(RenderOp, "op"), set(handled), "render ops")


def test_lua_refuses_in_the_words_python_says_it_in(editor: Editor) -> None:
    # :AcpFork and :AcpMode refuse a chat without an agent (or still starting) in
    # Lua, :AcpSessions in Python: one sentence each, Python's, which Lua reads from
    # the generated defaults.
    assert editor.lua("return require('acp.defaults').no_agent") == NO_AGENT
    assert editor.lua("return require('acp.defaults').starting") == STARTING
    copies = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "lua").rglob("*.lua")
        for words in (NO_AGENT, STARTING)
        if path.name != "defaults.lua" and words in path.read_text()
    ]
    assert copies == []
