"""Permission prompts and tool call blocks as a user sees them in a headless Neovim."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen

PROMPT = "**Permission needed:** press a key, or `<CR>` for a menu"

# Replaces vim.ui.select: records what it was offered and picks item `_G.pick`.
STUB_SELECT = """
_G.selects = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(_G.selects, {
    prompt = opts.prompt,
    items = vim.tbl_map(opts.format_item, items),
  })
  on_choice(items[_G.pick], _G.pick)
end
"""


def start(editor: Editor, scenario: str = "permission", **options: Any) -> dict[str, Any]:
    editor.setup(agents={"fake": editor.fake_agent(scenario)}, **options)
    return editor.open_chat("fake")


def wait_text(editor: Editor, text: str) -> None:
    buf = editor.lua("return require('acp').status().transcript_buf")
    editor.wait(
        f"table.concat(vim.api.nvim_buf_get_lines({buf}, 0, -1, false), '\\n'):find({text!r}, 1, true) ~= nil",
        what=repr(text),
    )


def focus_transcript(editor: Editor, row: int | None = None) -> None:
    """Make the transcript window current, the cursor on 0-based ``row`` if given."""
    editor.lua(
        """
        local buf, row = require('acp').status().transcript_buf, ...
        local win = vim.fn.win_findbuf(buf)[1]
        vim.api.nvim_set_current_win(win)
        if row ~= vim.NIL then vim.api.nvim_win_set_cursor(win, {row + 1, 0}) end
        """,
        row,
    )


def mapped(editor: Editor, key: str) -> bool:
    """Whether ``key`` has a normal-mode mapping on the transcript buffer."""
    return bool(
        editor.lua(
            """
            local buf, key = require('acp').status().transcript_buf, ...
            for _, map in ipairs(vim.api.nvim_buf_get_keymap(buf, 'n')) do
              if map.lhs == key then return true end
            end
            return false
            """,
            key,
        )
    )


def groups_at(editor: Editor, row: int) -> list[str]:
    """Our highlight groups on a 0-based transcript row, as the screen shows them."""
    win = editor.lua("return vim.fn.win_findbuf(require('acp').status().transcript_buf)[1]")
    return Screen.of(editor).at(win, row)


@pytest.mark.parametrize("version", [1, 2])
def test_prompt_appears_at_its_tool_call_and_a_key_answers(editor: Editor, version: int) -> None:
    start(editor, protocol_version=version)
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    lines = editor.transcript()
    # gemini style: the tool call exists only in the request; the prompt sits under it.
    head = lines.index("#### Fake edit")
    assert lines[head : head + 8] == [
        "#### Fake edit",
        "`edit` · pending",
        PROMPT,
        "- `a` Allow",
        "- `A` Always allow",
        "- `r` Reject",
        "- `R` Never",
        "- `s` Reject, and say why",
    ]
    assert groups_at(editor, head + 2) == ["AcpPermission"]
    request = editor.wait_event("AcpPermissionRequest")
    assert request["title"] == "Fake edit" and request["kind"] == "edit"
    assert [o["kind"] for o in request["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert editor.winbar().startswith(" waiting for you · fake")
    assert groups_at(editor, head + 5) == ["AcpPermissionKey"]
    focus_transcript(editor)
    assert all(mapped(editor, key) for key in "aArR")

    editor.nvim.input("r")
    end = editor.wait_event("AcpTurnEnd")
    assert end["stop_reason"] == "end_turn"
    text = editor.transcript_text()
    assert "permission: selected cancel" in text  # the agent saw the reject option's id
    assert "**Permission:** Reject" in text
    assert PROMPT not in text
    assert not any(mapped(editor, key) for key in "aArR")
    assert "waiting for you" not in editor.winbar()


@pytest.mark.parametrize("version", [1, 2])
def test_a_prompt_for_a_call_already_shown_sits_under_it_once(editor: Editor, version: int) -> None:
    """Claude style: the call comes first, the request names it by its id; over v2
    with a title of its own, the call's: it is not said a second time."""
    start(editor, protocol_version=version)
    editor.lua("require('acp').send('execute first')")
    wait_text(editor, PROMPT)
    lines = editor.transcript()
    head = lines.index("#### Fake execute")
    assert lines[head : head + 4] == ["#### Fake execute", "`execute` · pending", PROMPT, "- `a` Allow"]
    assert lines.count("Fake execute") == 0 and lines.count("#### Fake execute") == 1
    focus_transcript(editor)
    editor.nvim.input("a")
    editor.wait_event("AcpTurnEnd")
    assert "permission: selected proceed_once" in editor.transcript_text()


def test_options_without_kind_get_digit_keys(editor: Editor) -> None:
    start(editor)
    editor.lua("require('acp').send('execute nokind')")
    wait_text(editor, PROMPT)
    assert "- `1` Yes" in editor.transcript() and "- `2` No" in editor.transcript()
    focus_transcript(editor)
    editor.nvim.input("2")
    editor.wait_event("AcpTurnEnd")
    assert "permission: selected no" in editor.transcript_text()


def test_an_allow_listed_command_codex_runs_through_its_shell_is_not_asked(
    editor: Editor,
) -> None:
    """codex-acp's request names the command as an argv through the user's shell
    (``["/bin/bash", "-lc", "git status"]``): matched as ``bash -lc 'git status'`` it
    was never the allow-listed ``git status``, and every codex command asked."""
    start(editor, "codex_exec", permissions={"allow": {"commands": ["git status"]}})
    editor.lua("require('acp').send('git status --short')")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    text = editor.transcript_text()
    assert "permission: selected approved" in text and PROMPT not in text
    assert "allowed command `git status`" in text
    # A script that runs more than the command is still asked, and codex's reject
    # ends the turn cancelled with the call not left pending.
    editor.lua("require('acp').send('git status && rm -rf build')")
    wait_text(editor, PROMPT)
    focus_transcript(editor)
    editor.nvim.input("r")
    assert editor.wait_event("AcpTurnEnd", 2)["stop_reason"] == "cancelled"
    lines = editor.transcript()
    assert lines[lines.index("#### git status && rm -rf build") + 1] == "`execute` · cancelled"


def test_a_multi_line_script_codex_asks_to_run_is_drawn_and_asked(editor: Editor) -> None:
    """codex-acp names a call by its script: one of several lines made the tool
    call's heading a line holding line breaks, which Neovim refuses; the block was
    not drawn, and the permission it asks for never shown. Its heading shows the
    lines joined by ⏎ (as :AcpBranches shows a prompt's), the export's too, and the
    menu's prompt (it had the lines as they came)."""
    start(editor, "codex_exec")
    editor.lua(STUB_SELECT + "_G.pick = 2")
    editor.lua("require('acp').send(...)", "make build\n## then\nrm -rf build ##\n")
    heading = "make build ⏎ ## then ⏎ rm -rf build ##"
    wait_text(editor, PROMPT)
    lines = editor.transcript()
    assert lines[lines.index(f"#### {heading}") + 1] == "`execute` · pending"
    focus_transcript(editor, lines.index(PROMPT))
    editor.nvim.input("<CR>")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    assert [select["prompt"] for select in editor.lua("return _G.selects")] == [
        f"acp: allow {heading}?"
    ]
    export = "return vim.api.nvim_buf_get_lines(require('acp').export(), 0, -1, false)"
    exported = editor.lua(export)
    assert f"### Tool: {heading[:-2]}\\##" in exported  # a closing ## is a title's own
    assert "## then" not in exported


def test_an_allow_listed_command_gemini_names_only_in_its_title_is_not_asked(
    editor: Editor,
) -> None:
    """gemini-cli sends no raw input for its shell commands: the command is in the
    title only (``git status [current working directory /p] (why)``), and the user who
    allowed ``git status`` was asked every time. A chained command is still asked."""
    start(editor, "gemini_shell", permissions={"allow": {"commands": ["git status"]}})
    editor.lua("require('acp').send('git status --short -- Show the working tree')")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    text = editor.transcript_text()
    assert "permission: selected proceed_once" in text and PROMPT not in text
    assert "allowed command `git status`" in text
    editor.lua("require('acp').send('git status; rm -rf ~ -- Show the working tree')")
    wait_text(editor, PROMPT)
    focus_transcript(editor)
    editor.nvim.input("r")
    assert editor.wait_event("AcpTurnEnd", 2)["stop_reason"] == "end_turn"
    assert "permission: selected cancel" in editor.transcript_text()


# The lines the input's permission hint shows under its last line.
INPUT_HINT = (
    "local mark = vim.api.nvim_buf_get_extmarks(..., vim.api.nvim_get_namespaces()"
    "['acp.permission.hint'], 0, -1, {details = true})[1][4]"
    "; return vim.tbl_map(function(line) return line[1][1] end, mark.virt_lines)"
)


def test_the_input_answers_a_prompt_with_keys_that_edit_nothing(editor: Editor) -> None:
    status = start(editor)
    screen = Screen.of(editor)
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(...)[1])", status["input_buf"])
    editor.lua("vim.api.nvim_win_set_width(0, 20)")
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    # It says which keys answer there, under what is typed, wrapped to the window
    # (after the text, on its row, a chat 20 columns wide cut it after "\\y Al").
    assert editor.lua(INPUT_HINT, status["input_buf"]) == ["permission: \\y Allow", "  \\n Reject"]
    win = editor.lua("return vim.api.nvim_get_current_win()")
    assert screen.window(win)[1:3] == ["permission: \\y Allow", "  \\n Reject"]
    # `a` appends, as always: the prompt waits on.
    editor.nvim.input("anote<Esc>")
    editor.wait(f"vim.api.nvim_buf_get_lines({status['input_buf']}, 0, 1, false)[1] == 'note'")
    assert PROMPT in editor.transcript()
    editor.nvim.input("\\y")
    editor.wait_event("AcpTurnEnd")
    assert "permission: selected proceed_once" in editor.transcript_text()
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "n"
    assert editor.nvim.buffers[status["input_buf"]][:] == ["note"]
    assert editor.lua("return vim.fn.maparg('\\\\y', 'n')") == ""  # gone with the prompt


@pytest.mark.parametrize(
    ("prompt", "offered", "answer", "answered"),
    [
        ("execute nokind", "1 2", "1", "selected yes"),
        # Every key the prompt lists, "reject and say why" too (`s` was left out).
        ("execute nonever", "a A r s", "a", "selected proceed_once"),
    ],
)
def test_keys_a_prompt_does_not_offer_do_not_fall_through(
    editor: Editor, prompt: str, offered: str, answer: str, answered: str
) -> None:
    start(editor)
    editor.lua("require('acp').send(...)", prompt)
    wait_text(editor, PROMPT)
    focus_transcript(editor)
    editor.nvim.input("R")
    editor.wait("#_G.acp_notices > 0", what="a notice for R")
    assert editor.lua("return _G.acp_notices[#_G.acp_notices].msg") == (
        f"acp: the permission prompt takes {offered} (or :AcpPermission)"
    )
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "n"
    assert "E21" not in editor.lua("return vim.v.errmsg")
    assert PROMPT in editor.transcript()  # still waiting
    editor.nvim.input(answer)
    editor.wait_event("AcpTurnEnd")
    assert f"permission: {answered}" in editor.transcript_text()


@pytest.mark.parametrize("version", [1, 2])
def test_picker_on_cr_and_always_is_remembered(editor: Editor, version: int) -> None:
    start(editor, protocol_version=version)
    editor.lua(STUB_SELECT + "_G.pick = 2")
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    focus_transcript(editor, editor.transcript().index(PROMPT))
    editor.nvim.input("<CR>")
    editor.wait_event("AcpTurnEnd")
    selects = editor.lua("return _G.selects")
    assert selects == [
        {
            "prompt": "acp: allow Fake edit?",
            "items": [
                "[a] Allow", "[A] Always allow", "[r] Reject", "[R] Never",
                "[s] Reject and say why",
            ],
        }
    ]
    assert "permission: selected proceed_always" in editor.transcript_text()

    # The next edit is answered without asking, with the option of the same kind.
    editor.lua("require('acp').send('edit')")
    editor.wait_event("AcpTurnEnd", count=2)
    text = editor.transcript_text()
    assert text.count("permission: selected proceed_always") == 2
    assert "**Permission:** Always allow (remembered for `edit` in this project)" in text
    assert len(editor.lua("return _G.selects")) == 1


@pytest.mark.parametrize("version", [1, 2])
def test_permission_command_and_notice_when_the_chat_is_hidden(editor: Editor, version: int) -> None:
    start(editor, protocol_version=version)
    editor.lua(STUB_SELECT + "_G.pick = 1")
    editor.nvim.command("AcpPermission")
    assert (
        editor.lua("return _G.acp_notices[#_G.acp_notices].msg")
        == "acp: no permission request is pending"
    )
    # Hide the chat (its `q`), then the agent asks.
    focus_transcript(editor)
    editor.nvim.input("q")
    editor.wait("#vim.fn.win_findbuf(require('acp').status().transcript_buf) == 0")
    editor.lua("require('acp').send('read')")
    editor.wait(
        "vim.iter(_G.acp_notices):any(function(n) return n.msg:find('asks permission', 1, true) end)"
    )
    notice = editor.lua("return _G.acp_notices[#_G.acp_notices]")
    assert notice["msg"] == "acp: fake in chat #1 asks permission: Fake read (:AcpPermission)"
    editor.nvim.command("AcpPermission")
    editor.wait_event("AcpTurnEnd")
    assert "permission: selected proceed_once" in editor.transcript_text()


def test_allow_reads_policy_answers_reads_only(editor: Editor) -> None:
    start(editor, permission_policy="allow_reads")
    editor.lua("require('acp').send('search')")
    editor.wait_event("AcpTurnEnd")
    assert "**Permission:** Allow (policy allow_reads)" in editor.transcript_text()
    editor.lua("require('acp').send('execute')")
    wait_text(editor, PROMPT)


@pytest.mark.parametrize("version", [1, 2])
def test_cancel_while_pending_answers_cancelled(editor: Editor, version: int) -> None:
    start(editor, protocol_version=version)
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    editor.lua("require('acp').cancel()")
    end = editor.wait_event("AcpTurnEnd")
    assert end["stop_reason"] == "cancelled"
    text = editor.transcript_text()
    assert "permission: cancelled" in text
    assert "**Permission:** cancelled" in text
    assert "`edit` · cancelled" in text
    focus_transcript(editor)
    assert not mapped(editor, "a")


@pytest.mark.parametrize("agent", ["gemini", "opencode"])
def test_a_call_rejected_at_its_prompt_is_not_left_running_when_the_turn_ends(
    editor: Editor, tmp_path: Path, agent: str
) -> None:
    """gemini's rejected edit exists only in its request (pending); opencode asks with
    its call in progress. After the reject the agent ends the turn (``end_turn``) and
    never finishes the call: its block said pending / in_progress under an ended turn."""
    if agent == "gemini":
        start(editor)
        editor.lua("require('acp').send('edit')")
        header, running = "#### Fake edit", "`edit` · pending"
    else:
        start(editor, "files")
        step = {"opencode": {"path": str(tmp_path / "new.py"), "content": "x = 1\n"}}
        editor.lua("require('acp').send(...)", json.dumps([step]))
        header, running = "#### write", "`edit` · in_progress"
    wait_text(editor, PROMPT)
    lines = editor.transcript()
    assert lines[lines.index(header) + 1] == running
    focus_transcript(editor)
    editor.nvim.input("r")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    lines = editor.transcript()
    assert lines[lines.index(header) + 1] == "`edit` · cancelled"
    assert not (tmp_path / "new.py").exists()


def test_prompt_disappears_when_the_agent_dies(editor: Editor) -> None:
    start(editor)
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    fake = [
        pid
        for pid in editor.agent_pids()
        if b"agent.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(fake) == 1
    os.kill(fake[0], signal.SIGKILL)
    editor.wait_event("AcpError")
    editor.wait(
        f"not vim.tbl_contains(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf, 0, -1, false), {PROMPT!r})"
    )
    focus_transcript(editor)
    assert not mapped(editor, "a")


def test_prompt_keys_go_when_the_python_host_dies(editor: Editor) -> None:
    start(editor)
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    focus_transcript(editor)
    assert mapped(editor, "a")
    os.kill(editor.lua("return vim.fn.jobpid(require('acp.host').chan)"), signal.SIGKILL)
    editor.wait("require('acp').status().state == 'error'")
    # A key press must not start a new host that knows nothing of the request.
    assert not mapped(editor, "a")
    assert editor.lua("return require('acp.host').chan") is None


def write_file(editor: Editor, name: str = "notes.txt") -> str:
    path = editor.tmp / "project" / name
    path.write_text("".join(f"line {i}\n" for i in range(1, 8)))
    return str(path)


@pytest.mark.parametrize("version", [1, 2])
def test_cr_on_a_location_opens_the_file_at_the_line(editor: Editor, version: int) -> None:
    start(editor, "tool_calls", protocol_version=version)
    path = write_file(editor)
    editor.lua("require('acp').send(...)", f"{path}:3")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    row = lines.index("→ notes.txt:3")  # named in the chat's directory
    # The diff renders as a unified diff with our highlights on its lines.
    assert groups_at(editor, lines.index("-two")) == ["AcpDiffDelete"]
    assert groups_at(editor, lines.index("+2")) == ["AcpDiffAdd"]
    assert groups_at(editor, next(i for i, line in enumerate(lines) if line.startswith("@@"))) == [
        "AcpDiffHunk"
    ]
    assert groups_at(editor, row) == ["AcpLocation"]

    focus_transcript(editor, row)
    editor.nvim.input("<CR>")
    editor.wait(f"vim.api.nvim_buf_get_name(0) == {path!r}")
    assert editor.lua("return vim.api.nvim_win_get_cursor(0)") == [3, 0]
    assert editor.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 3  # no new window


@pytest.mark.parametrize("version", [1, 2])
def test_cr_on_a_diff_row_opens_the_file_at_that_line(editor: Editor, version: int) -> None:
    start(editor, "tool_calls", protocol_version=version)
    path = write_file(editor)
    editor.lua("require('acp').send(...)", f"{path}:3")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    # The diff of "one\ntwo\n" -> "one\n2\n": rows " one", "-two", "+2" of @@ -1,2 +1,2 @@
    # (over v2 the agent's git patch, its absolute paths named as over v1).
    named = "notes.txt"
    assert lines.index(f"diff --git {named} {named}") < lines.index(f"+++ {named}")
    for row, line in ((" one", 1), ("-two", 2), ("+2", 2), (f"+++ {named}", 1)):
        focus_transcript(editor, lines.index(row))
        editor.nvim.input("<CR>")
        editor.wait(f"vim.api.nvim_buf_get_name(0) == {path!r}", what=f"<CR> on {row!r}")
        assert editor.lua("return vim.api.nvim_win_get_cursor(0)") == [line, 0], row
        assert editor.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 3  # no new window


@pytest.mark.parametrize("version", [1, 2])
def test_follow_agent_shows_the_location_without_taking_focus(
    editor: Editor, version: int
) -> None:
    start(editor, "tool_calls", follow_agent=True, protocol_version=version)
    path = write_file(editor)
    input_win = editor.lua("return vim.api.nvim_get_current_win()")
    editor.lua("require('acp').send(...)", f"{path}:5")
    editor.wait_event("AcpTurnEnd")
    shown = editor.lua(
        """
        for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)) == ... then
            return vim.api.nvim_win_get_cursor(win)
          end
        end
        """,
        path,
    )
    assert shown == [5, 0]
    assert editor.lua("return vim.api.nvim_get_current_win()") == input_win


def test_tool_block_folds_from_its_header_shown_as_it_is(editor: Editor) -> None:
    start(editor, "tool_calls")
    path = write_file(editor)
    editor.lua("require('acp').send(...)", f"{path}:3")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    head = lines.index("#### Edit file")
    focus_transcript(editor, head)
    editor.nvim.command("normal! zc")  # on the header itself: no E490
    assert editor.lua(f"return vim.fn.foldclosed({head + 1})") == head + 1
    assert editor.lua(f"return vim.fn.foldclosedend({head + 1})") >= lines.index("→ notes.txt:3") + 1
    assert editor.lua("return vim.wo.foldtext") == ""  # the closed fold shows the header line


@pytest.mark.parametrize("answer", ["allow", "cancel"])
def test_a_v2_prompt_without_a_tool_call_settles_its_own_block(editor: Editor, answer: str) -> None:
    """v2 asks about a command with no tool call: the client's own block carries the
    question, and nothing else would ever end its "pending"."""
    editor.setup(protocol_version=2)
    editor.lua("vim.ui.select = function(items, opts, on_choice) on_choice(items[1], 1) end")
    editor.open_chat()
    editor.lua("require('acp').send('permission')")
    editor.wait_event("AcpPermissionRequest")
    assert "`execute` · pending" in editor.transcript_text()
    editor.nvim.command("AcpPermission" if answer == "allow" else "AcpCancel")
    editor.wait_event("AcpTurnEnd")
    text = editor.transcript_text()
    status = "completed" if answer == "allow" else "cancelled"
    assert f"`execute` · {status}" in text and "· pending" not in text
