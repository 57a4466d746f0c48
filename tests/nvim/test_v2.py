"""ACP v2 as a user sees it: negotiation, the v2 turn, settings and resume, in Neovim."""

from __future__ import annotations

import re
import sys

from tests.nvim.conftest import ROOT, Editor

DEMO_V1_ONLY = {"cmd": [sys.executable, "-m", "acp_nvim.demo_agent", "--v1"]}


def winbar(editor: Editor) -> str:
    """The transcript's winbar, its window wide enough for every field."""
    buf = editor.lua("return require('acp').status().transcript_buf")
    editor.lua("vim.o.columns = 250; vim.api.nvim_win_set_width(vim.fn.win_findbuf(...)[1], 200)", buf)
    return editor.winbar()


def test_v2_is_negotiated_and_shown(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    status = editor.open_chat()
    assert status["protocol_version"] == 2
    assert editor.events("AcpSessionReady")[0]["protocol_version"] == 2
    assert "ACP v2" in winbar(editor)
    assert status["mode"] == "Ask" and status["model"] == "Demo small"


def test_v1_answer_falls_back_to_v1(editor: Editor) -> None:
    editor.setup(protocol_version=2, agents={"old": DEMO_V1_ONLY}, default_agent="old")
    status = editor.open_chat()
    assert status["protocol_version"] == 1
    assert "ACP v1" in winbar(editor)
    editor.lua("require('acp').send('hi')")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"


def test_v2_turn_streams_and_renders_features(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    editor.open_chat()
    editor.lua("require('acp').send('show me a diff and a plan')")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    text = editor.transcript_text()
    assert text.count("## You\nshow me a diff and a plan") == 1  # the ack replaced the echo
    assert "## Agent\nYou said: *show me a diff and a plan*" in text
    assert "**modified** " in text and '+  "debug": true' in text
    assert "### Plan\n- [x] Read the code\n- [~] Write the fix" in text
    assert re.search(r"\*— end_turn · [\d.]+k tokens · \$[\d.]+ —\*$", text.rstrip())


def test_a_prompt_with_a_file_keeps_its_attached_line_once_acknowledged(editor: Editor) -> None:
    """The demo acknowledges the prompt (``user_message``): the acknowledgment takes the
    echo's place and the file stays named on its own line."""
    (editor.tmp / "project" / "a.py").write_text("x = 1\n")
    editor.setup(protocol_version=2)
    editor.open_chat()
    editor.lua("require('acp').send('look at @a.py')")
    editor.wait_event("AcpTurnEnd")
    text = editor.transcript_text()
    assert text.count("## You\nlook at @a.py\n\n*Attached: a.py*") == 1
    assert "[resource" not in text


def test_v2_cancel_mid_stream(editor: Editor) -> None:
    # Paced as by default: unpaced (the tests' ACP_DEMO_DELAY=0), the demo could
    # stream its whole long reply before the cancel came on a loaded machine
    # (end_turn, not cancelled).
    paced = {
        "cmd": [sys.executable, "-m", "acp_nvim.demo_agent"],
        "env": {"ACP_DEMO_DELAY": "0.02", "PYTHONPATH": str(ROOT)},
    }
    editor.setup(agents={"paced": paced}, default_agent="paced", protocol_version=2)
    assert editor.open_chat()["protocol_version"] == 2
    editor.lua("require('acp').send('long')")
    editor.wait(
        "vim.fn.join(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf, 0, -1, false)):find('word3') ~= nil"
    )
    editor.nvim.command("AcpCancel")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    assert editor.transcript()[-1].startswith("*— cancelled")
    assert editor.lua("return require('acp').status().state") == "ready"


def test_config_and_resume(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    first = editor.open_chat()
    editor.nvim.command("AcpConfig mode code")
    editor.wait("require('acp').status().mode == 'Code'")
    editor.lua("require('acp').send('remember me')")
    editor.wait_event("AcpTurnEnd")
    # A session a chat shows is shown, not resumed twice: close that chat first.
    editor.nvim.command("AcpChat!")
    editor.wait_event("AcpSessionReady", count=2)
    editor.lua(
        "require('acp.chat').close(require('acp.chat.registry').chats[...])", first["chat"]
    )
    editor.nvim.command(f"AcpResume {first['session_id']}")
    editor.wait_event("AcpSessionReady", count=3)
    status = editor.lua("return require('acp').status()")
    assert status["chat"] != first["chat"] and status["session_id"] == first["session_id"]
    editor.wait(
        "vim.fn.join(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf, 0, -1, false), '\\n'):find('You said: %*remember me%*') ~= nil"
    )
    assert "## You\nremember me" in editor.transcript_text()


def test_acpconfig_picks_a_setting_then_its_value(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    editor.open_chat()
    # Stand-in for the user: pick "Mode" from the settings, then "Code".
    editor.lua(
        """
        _G.picked = {}
        vim.ui.select = function(items, opts, on_choice)
          local labels = vim.tbl_map(opts.format_item, items)
          table.insert(_G.picked, labels)
          on_choice(items[#_G.picked == 1 and 1 or 2])
        end
        """
    )
    editor.nvim.command("AcpConfig")
    editor.wait("require('acp').status().mode == 'Code'")
    picked = editor.lua("return _G.picked")
    assert picked[0] == [
        "Mode: Ask (mode)",
        "Model: Demo small (model)",
        "Thinking: Low (thought_level)",
        "Suggest follow-ups: on",
    ]
    assert picked[1] == ["Ask (current)", "Code"]  # the current value marked
    assert "mode Code" in winbar(editor)
    # A switch flips from the picker, and takes a word on the command line.
    editor.lua("vim.ui.select = function(items, opts, on_choice) on_choice(items[4]) end")
    editor.nvim.command("AcpConfig")
    suggest = "require('acp').status().config_options[4].current"
    editor.wait(f"{suggest} == false")
    editor.nvim.command("AcpConfig suggest on")
    editor.wait(f"{suggest} == true")


def test_a_markdown_or_file_plan_is_drawn_and_a_removed_plan_goes(editor: Editor) -> None:
    """v2 plans given as markdown or as a file showed "(markdown plan)", "(file plan)",
    and plan_removed was ignored: the plan stayed. A markdown plan shows its text, a
    file's its path, which <CR> opens; a removed plan leaves the transcript."""
    plan_file = editor.tmp / "project" / "PLAN one.md"
    plan_file.write_text("# The plan\n")
    editor.setup(
        agents={"fake": editor.fake_agent("plans")}, default_agent="fake", protocol_version=2
    )
    editor.open_chat()
    for turn, prompt in enumerate(["markdown", f"file {plan_file}"], start=1):
        editor.lua("require('acp').send(...)", prompt)
        editor.wait_event("AcpTurnEnd", count=turn)
    text = editor.transcript_text()
    assert "### Plan\n1. Read the code\n2. **Fix** it\n" in text
    assert f"### Plan 2\n→ {plan_file}\n" in text
    assert "(markdown plan)" not in text and "(file plan)" not in text
    # <CR> on the file's row opens it.
    row = editor.transcript().index(f"→ {plan_file}") + 1
    editor.lua(
        "local buf, row = ...; vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1]);"
        " vim.api.nvim_win_set_cursor(0, {row, 0})",
        editor.lua("return require('acp').status().transcript_buf"),
        row,
    )
    editor.nvim.feedkeys(editor.nvim.replace_termcodes("<CR>", True, False, True), "x", False)
    editor.wait(f"vim.fn.bufname() == {str(plan_file)!r}", what="the plan's file open")
    editor.lua("require('acp').send('remove m')")
    editor.wait_event("AcpTurnEnd", count=3)
    text = editor.transcript_text()
    assert "Read the code" not in text and f"→ {plan_file}" in text


def test_v1_plans_with_ids_are_drawn_as_v2s(editor: Editor) -> None:
    """v1's unstable plans with ids come only to a client advertising
    ``clientCapabilities.plan``: not advertised, an agent that has several plans, or
    one in markdown, could only send v1's single list of steps. Advertised, each
    plan is drawn by its id as over v2, and one taken away leaves the transcript."""
    editor.setup(agents={"fake": editor.fake_agent("plans")}, default_agent="fake")
    editor.open_chat()
    for turn, prompt in enumerate(["steps", "markdown"], start=1):
        editor.lua("require('acp').send(...)", prompt)
        editor.wait_event("AcpTurnEnd", count=turn)
    text = editor.transcript_text()
    assert "### Plan\n- [x] Read the code\n- [~] Fix it\n" in text
    assert "### Plan 2\n1. Read the code\n2. **Fix** it\n" in text
    editor.lua("require('acp').send('remove s')")
    editor.wait_event("AcpTurnEnd", count=3)
    text = editor.transcript_text()
    assert "- [x] Read the code" not in text and "2. **Fix** it" in text


def test_a_plan_step_of_two_lines_is_drawn_with_what_came_with_it(editor: Editor) -> None:
    """A plan step whose words hold a line break made a transcript row holding one,
    which Neovim refuses: the plan was not drawn, nor anything sent to Neovim with
    it (here the reply after it). Its lines show joined by ⏎, as a tool call's title."""
    editor.setup(agents={"fake": editor.fake_agent("plans")}, default_agent="fake")
    editor.open_chat()
    editor.lua("require('acp').send(...)", "steps Fix the parser\nthen run the tests")
    editor.wait_event("AcpTurnEnd")
    text = editor.transcript_text()
    assert "- [~] Fix the parser ⏎ then run the tests\n" in text and "done: steps" in text


def test_a_reopened_v2_chat_shows_what_the_chat_showed(editor: Editor) -> None:
    """A message corrected in place, an agent's own terminal, two plans and an update
    of a kind no client knows: reopened from the history, the transcript is the same."""
    editor.setup(protocol_version=2)
    editor.open_chat()
    editor.lua("require('acp').send('fix unknown plan terminal')")
    editor.wait_event("AcpTurnEnd")
    assert editor.lua("return require('acp').status().unknown_update") == "_demo_sparkle"
    live = editor.transcript_text()
    assert "## Agent\nThe answer is 42. (corrected)\n" in live and "41" not in live
    assert "### Plan 2\n" in live and "[terminal t1 · exit 0] make test\n```text\n" in live
    editor.lua("require('acp').close()")
    editor.reopen_last()
    assert editor.transcript_text() == live
