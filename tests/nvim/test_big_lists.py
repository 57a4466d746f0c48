"""Lists too long to send to Lua in one piece (issue 29.7, decision 0038): settings
past 10,000 choices in all, thousands of slash commands, a plan of thousands of
entries. Packing such an op for Lua held the host's loop (and so every chat); now
the choices are asked for when a picker needs them, the commands and the plan go in
slices. What the user sees stays whole, over ACP v1 and v2."""

from __future__ import annotations

from typing import Any

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.test_settings import calls

pytestmark = pytest.mark.parametrize("version", [1, 2])


def big(editor: Editor, version: int, what: str) -> dict[str, Any]:
    """A chat on the "big" fake agent after it sent ``what``; its status()."""
    editor.setup(agents={"fake": editor.fake_agent("big")}, default_agent="fake",
                 protocol_version=version)  # fmt: skip
    editor.open_chat()
    assert editor.lua("return require('acp').status().protocol_version") == version
    editor.lua("require('acp').send(...)", what)
    editor.wait_event("AcpTurnEnd")
    status: dict[str, Any] = editor.lua("return require('acp').status()")
    return status


def picked(editor: Editor, *answers: int) -> None:
    """Stubs vim.ui.select: each call answers the item at the next of ``answers``
    (1-based) and keeps what it offered, as shown, in ``_G.offered``."""
    editor.lua(
        """
        _G.offered, _G.answers = {}, {...}
        vim.ui.select = function(items, opts, on_choice)
          table.insert(_G.offered, vim.tbl_map(opts.format_item, items))
          on_choice(items[table.remove(_G.answers, 1)])
        end
        """,
        *answers,
    )


def choices(option: int) -> list[str]:
    return [f"Choice {option}.{j}" for j in range(500)]


def test_settings_past_10000_choices_are_asked_for_when_a_picker_needs_them(
    editor: Editor, version: int
) -> None:
    status = big(editor, version, "settings")
    options = status["config_options"]
    assert len(options) == 30
    # Past the size each select names its current choice; its choices stay in Python.
    assert [o.get("choices") for o in options] == [None] * 30
    assert options[5]["current"] == "v1" and options[5]["current_name"] == "Choice 5.1"
    # status() still lists every mode and model.
    assert status["modes"]["current"] == "v1"
    assert [m["name"] for m in status["modes"]["available"]] == choices(0)
    assert [m["id"] for m in status["models"]["available"]] == [f"v{j}" for j in range(500)]
    assert status["mode"] == "Choice 0.1" and status["model"] == "Choice 1.1"

    # Completion of :AcpConfig's values and :AcpModel.
    values = [f"v{j}" for j in range(500)]
    assert editor.lua("return vim.fn.getcompletion('AcpConfig o12 ', 'cmdline')") == values
    assert editor.lua("return vim.fn.getcompletion('AcpModel ', 'cmdline')") == values

    # :AcpConfig: the settings, labelled with their current choice; then all 500 of
    # one (the pick cancelled).
    picked(editor, 8, 0)
    editor.nvim.command("AcpConfig")
    editor.wait("#_G.offered == 2")
    settings, offered = editor.lua("return _G.offered")
    assert settings[7] == "Option 7: Choice 7.1"
    assert offered[1] == "Choice 7.1 (current)"
    assert [o.removesuffix(" (current)") for o in offered] == choices(7)

    # A choice not offered is reported in one line, not with every one offered.
    editor.nvim.command("AcpModel nope")
    editor.wait("_G.acp_notices[#_G.acp_notices] and _G.acp_notices[#_G.acp_notices].msg:find('nope')")
    assert editor.lua("return _G.acp_notices[#_G.acp_notices].msg") == (
        "acp: no model 'nope' (offered: v0, v1, v2, v3, v4, v5, v6, v7 and 492 more)"
    )

    # The :AcpMode picker: all 500 modes; the one picked goes to the agent.
    picked(editor, 3)
    editor.nvim.command("AcpMode")
    editor.wait("#_G.offered == 1")
    assert [o.removesuffix(" (current)") for o in editor.lua("return _G.offered[1]")] == choices(0)
    [(method, params)] = calls(editor, turn=2)
    assert (method, params["configId"], params["value"]) == ("session/set_config_option", "o0", "v2")


def test_thousands_of_slash_commands_all_complete(editor: Editor, version: int) -> None:
    status = big(editor, version, "commands")
    assert [c["name"] for c in status["commands"]] == [f"c{i}" for i in range(3000)]
    items = editor.lua(
        "return require('acp.chat.complete').items(require('acp.chat.registry').get(), '/c2999')"
    )
    assert [(i["word"], i["menu"]) for i in items] == [("/c2999", "command 2999")]
    found = editor.lua(
        "return #require('acp.chat.complete').items(require('acp.chat.registry').get(), '/c')"
    )
    assert found == 3000


def test_qwens_skills_in_one_line_of_half_a_megabyte_all_complete(
    editor: Editor, version: int
) -> None:
    """qwen sends its slash commands in one 564 KB line, each skill's body in the
    command's ``_meta``: every one completes, and the turn goes on after it."""
    status = big(editor, version, "skills")
    assert [c["name"] for c in status["commands"]] == [f"skill{i}" for i in range(40)]
    items = editor.lua(
        "return require('acp.chat.complete').items(require('acp.chat.registry').get(), '/skill39')"
    )
    assert [(i["word"], i["menu"]) for i in items] == [("/skill39", "skill 39")]
    assert editor.transcript().count("sent skills") == 1


def test_a_plan_of_thousands_of_entries_shows_every_entry(editor: Editor, version: int) -> None:
    big(editor, version, "plan")
    lines = editor.transcript()
    start = lines.index("### Plan")
    assert lines[start + 1 : start + 3001] == [f"- [ ] step {i}" for i in range(3000)]
    assert lines[start + 3001 :].count("sent plan") == 1
