"""Agent terminals as a user sees them: real PTY buffers, live tool call output, no orphans."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests import proc
from tests.nvim.conftest import ROOT, Editor, child_editor, wait_gone
from tests.nvim.test_permissions import wait_text


def run(
    editor: Editor, script: dict[str, Any], turn: int = 1, timeout: float = 15
) -> dict[str, Any]:
    """Send the fake agent a terminal script; returns its JSON report."""
    path = editor.tmp / f"report{turn}.json"
    editor.lua("require('acp').send(...)", json.dumps({**script, "report_to": str(path)}))
    editor.wait_event("AcpTurnEnd", count=turn, timeout=timeout)
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def open_fake(editor: Editor) -> dict[str, Any]:
    editor.setup(agents={"fake": editor.fake_agent("terminal")}, default_agent="fake")
    return editor.open_chat()


def lua_list(items: list[str]) -> str:
    """A Lua list of strings."""
    return "{" + ", ".join(json.dumps(item) for item in items) + "}"


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = proc.stat(entry.name)
            if found is not None and found.group == pgid and found.state != "Z":
                members.append(int(entry.name))
    return members


def test_shell_line_runs_in_session_cwd_with_env_and_reports_exit(editor: Editor) -> None:
    status = open_fake(editor)
    cwd = editor.lua("return vim.fn.getcwd()")
    report = run(
        editor,
        {
            "create": {
                "command": "printf 'hi\\n'; pwd; echo \"$GREETING\"; exit 3",
                "args": [],
                "env": [{"name": "GREETING", "value": "hello there"}],
                "outputByteLimit": 32000,
            }
        },
    )
    assert report["output"] == f"hi\n{cwd}\nhello there\n"
    assert report["truncated"] is False
    assert report["exit"] == {"exitCode": 3}
    assert report["exitStatus"] == {"exitCode": 3}
    assert report["after_release"] == -32002  # released: the id is gone
    # The value reached the command but not :AcpLog, which users paste into reports.
    log = editor.lua("return require('acp.host').request('log')")
    [create] = [line for line in log if '"terminal/create"' in line]
    assert "hello there" not in create and '"value":"<redacted>"' in create

    # The tool call shows the terminal's last lines and its exit, after release too.
    key = report["terminalId"]
    text = editor.transcript_text()
    assert f"[terminal {key} · exit 3] printf 'hi\\n'; pwd" in text
    assert f"```text\nhi\n{cwd}\nhello there\n```" in text

    # <CR> on that line opens the real terminal buffer in a split.
    lines = editor.transcript()
    row = next(i for i, line in enumerate(lines) if line.startswith(f"[terminal {key}")) + 1
    win = editor.lua(f"return vim.fn.win_findbuf({status['transcript_buf']})[1]")
    editor.lua(f"vim.api.nvim_set_current_win({win}); vim.api.nvim_win_set_cursor(0, {{{row}, 0}})")
    editor.nvim.feedkeys(editor.nvim.replace_termcodes("<CR>", True, False, True), "x")
    assert editor.lua("return vim.api.nvim_buf_get_name(0)").endswith(f"acp://terminal/{key}")
    assert editor.lua("return vim.bo.buftype") == "terminal"
    editor.wait(
        "vim.fn.join(vim.api.nvim_buf_get_lines(0, 0, -1, false), '|'):find('hello there') ~= nil"
    )


def test_args_run_directly_and_acp_terminal_opens_the_newest(editor: Editor) -> None:
    open_fake(editor)
    report = run(editor, {"create": {"command": "printf", "args": ["%s|%s", "a b", "$HOME"]}})
    assert report["output"] == "a b|$HOME"  # no shell between: nothing expanded
    assert report["exit"]["exitCode"] == 0
    editor.nvim.command("AcpTerminal")
    assert editor.lua("return vim.bo.buftype") == "terminal"
    assert editor.lua("return vim.api.nvim_buf_get_name(0)").endswith(report["terminalId"])


def test_acp_terminal_of_a_wiped_buffer_says_it_was_wiped(editor: Editor) -> None:
    """:bwipeout! of an agent's terminal, then :AcpTerminal KEY: it said `no terminal
    t1` as an error, as for a key never used; the user wiped it, a warning says so."""
    open_fake(editor)
    key = run(editor, {"create": {"command": "echo done"}})["terminalId"]
    buf = editor.lua(f"return require('acp.editor.terminal').terminals[{key!r}].buf")
    editor.nvim.command(f"bwipeout! {buf}")
    editor.lua("_G.acp_notices = {}")
    editor.nvim.command(f"AcpTerminal {key}")
    said = {"msg": f"acp: terminal {key}: its buffer was wiped", "level": 3}  # WARN
    assert editor.lua("return _G.acp_notices") == [said]


def test_acp_terminal_completion_leaves_out_a_wiped_buffer(editor: Editor) -> None:
    """Two commands, the first one's buffer wiped: `:AcpTerminal <Tab>` offered both
    keys, and picking the first only said its buffer was wiped."""
    open_fake(editor)
    wiped = run(editor, {"create": {"command": "echo one"}})["terminalId"]
    kept = run(editor, {"create": {"command": "echo two"}}, turn=2)["terminalId"]
    buf = editor.lua(f"return require('acp.editor.terminal').terminals[{wiped!r}].buf")
    editor.nvim.command(f"bwipeout! {buf}")
    assert editor.lua("return vim.fn.getcompletion('AcpTerminal ', 'cmdline')") == [kept]


def test_output_is_truncated_at_a_character_boundary(editor: Editor) -> None:
    open_fake(editor)
    # 1 + 3 * 3 bytes; the last 7 start inside the first "€", so it goes whole.
    report = run(editor, {"create": {"command": "printf 'x€€€'", "outputByteLimit": 7}})
    assert (report["output"], report["truncated"]) == ("€€", True)


def test_output_that_ends_inside_a_character_reaches_the_agent_as_a_replacement(
    editor: Editor,
) -> None:
    """A command killed while writing "€" (or printing bytes that are not UTF-8 last):
    the agent read its output without those bytes, as if it had ended cleanly."""
    open_fake(editor)
    report = run(editor, {"create": {"command": "printf 'ab\\342\\202'"}})
    assert report["exit"] == {"exitCode": 0}
    assert report["output"] == "ab\ufffd"
    assert "```text\nab\ufffd\n```" in editor.transcript_text()  # and so does the chat


def test_a_command_that_prints_much_and_exits_at_once_loses_no_output(editor: Editor) -> None:
    # Neovim drops unread PTY output when the process exits (neovim#37982): without
    # the draining wrapper this output ends thousands of lines early, every time.
    open_fake(editor)
    report = run(editor, {"create": {"command": "seq 20000", "outputByteLimit": 200_000}})
    assert report["output"] == "".join(f"{i}\n" for i in range(1, 20001))
    assert report["exit"] == {"exitCode": 0}


def test_a_megabyte_of_output_gives_the_agent_its_end_and_the_exit(editor: Editor) -> None:
    # 200,000 lines, then a coloured last line and a failure: the agent gets the
    # last 100 bytes of the text (escapes gone, the "é" whole) and the exit code;
    # the tool call shows the same end. Neovim's terminal takes a second or more
    # for this (doc/performance.md): the wait is generous, never a measure.
    open_fake(editor)
    command = "seq 200000; printf '\\033[1mfin \\303'; printf '\\251\\033[0m\\n'; exit 3"
    report = run(editor, {"create": {"command": command, "outputByteLimit": 100}}, timeout=120)
    text = "".join(f"{i}\n" for i in range(1, 200001)) + "fin é\n"
    assert report["output"] == text.encode()[-100:].decode()
    assert report["truncated"] is True
    assert report["exit"] == {"exitCode": 3}
    transcript = editor.transcript_text()
    assert f"[terminal {report['terminalId']} · exit 3]" in transcript
    assert "199999\n200000\nfin é\n```" in transcript


def test_kill_then_wait_reports_the_signal(editor: Editor) -> None:
    """A kill hangs the command up: the agent reads SIGHUP, and the transcript shows
    `killed by SIGHUP`, as the manual's example does (it said SIGTERM)."""
    open_fake(editor)
    # Killed once it runs: a hang-up before the shell even started ends it with code 1.
    command = {"command": "sh", "args": ["-c", "echo started; sleep 100"]}
    report = run(editor, {"create": command, "kill": "started"})
    assert report["exit"] == {"signal": "SIGHUP"}
    shown = f"[terminal {report['terminalId']} · killed by SIGHUP] sh -c 'echo started; sleep 100'"
    assert shown in editor.transcript_text()
    manual = " ".join((ROOT / "doc" / "acp.txt").read_text().split())
    assert "`killed by SIGHUP` when the agent stopped the command" in manual


def start_long_command(editor: Editor, ignores: str = "") -> tuple[str, list[int]]:
    """Have the agent run a shell that ignores the signals ``ignores`` (e.g. "HUP TERM",
    or none) around a running sleep; returns the terminal id and the group's processes."""
    open_fake(editor)
    pidfile = editor.tmp / "pid"
    deaf = f"trap '' {ignores}; " if ignores else ""
    report = run(
        editor,
        {
            "create": {"command": f"echo $$ > {pidfile}; {deaf}sleep 1000; sleep 1000"},
            "wait": False,
            "release": False,
        },
    )
    assert report == {"terminalId": report["terminalId"]}
    editor.wait(f"vim.fn.filereadable('{pidfile}') == 1 and vim.fn.readfile('{pidfile}')[1] ~= nil")
    shell = int(pidfile.read_text())
    editor.wait(f"#vim.api.nvim_get_proc_children({shell}) > 0")  # the sleep runs
    found = proc.stat(shell)
    assert found is not None
    pgid = found.group
    members = group_members(pgid)
    assert len(members) == 3  # the output-draining wrapper, the shell, its sleep
    return report["terminalId"], members


def test_a_command_of_a_turn_left_to_the_agent_is_killed(editor: Editor) -> None:
    """A command the agent started in a turn it then did not stop on a cancel ran on
    until :AcpClose. The turn left behind (timeouts.cancel), its commands are killed
    as terminal/kill does: the tool call says so, the agent reads the signal, the
    buffer keeps the output."""
    editor.setup(
        agents={"fake": editor.fake_agent("terminal")},
        default_agent="fake",
        timeouts={"cancel": 0.5},
    )
    editor.open_chat()
    report = editor.tmp / "report.json"
    # The agent waits for the command's exit and does not heed a cancel meanwhile.
    script = {"create": {"command": "echo started; sleep 100"}, "report_to": str(report)}
    editor.lua("require('acp').send(...)", json.dumps(script))
    editor.wait(
        "vim.fn.join(vim.fn.getbufline(require('acp').status().transcript_buf, 1, '$'),"
        " '|'):find('```text|started|```') ~= nil",
        what="the command runs",
    )
    editor.lua("require('acp').cancel()")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    editor.wait(f"vim.fn.filereadable('{report}') == 1", what="the agent's report")
    assert json.loads(report.read_text())["exit"] == {"signal": "SIGHUP"}
    [key] = re.findall(r"\[terminal (t\d+) · killed by SIGHUP\] echo started", editor.transcript_text())
    buf = editor.lua(f"return require('acp.editor.terminal').terminals[{key!r}].buf")
    assert editor.lua(f"return vim.api.nvim_buf_get_lines({buf}, 0, 1, false)") == ["started"]


def test_the_older_claude_adapters_command_released_after_a_cancel_ends(editor: Editor) -> None:
    """claude-code-acp 0.16 runs a whole shell line (``args: []``, no cwd, a 32000-byte
    limit) and, on a cancel, ends the turn ``cancelled`` and releases the terminal: the
    command is killed, the call shown cancelled, its terminal killed."""
    open_fake(editor)
    pidfile = editor.tmp / "pid"
    command = {"command": f"echo $$ > {pidfile}; echo started; sleep 100", "args": [],
               "outputByteLimit": 32000}  # fmt: skip
    editor.lua("require('acp').send(...)", json.dumps({"create": command, "until_cancel": True}))
    editor.wait(
        "vim.fn.join(vim.fn.getbufline(require('acp').status().transcript_buf, 1, '$'),"
        " '|'):find('```text|started|```') ~= nil",
        what="the command runs",
    )
    shell = int(pidfile.read_text())
    editor.lua("require('acp').cancel()")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    editor.wait(
        "vim.fn.join(vim.fn.getbufline(require('acp').status().transcript_buf, 1, '$'),"
        " '|'):find('· killed by SIG') ~= nil",
        what="the command killed",
    )
    assert re.search(r"#### Run\n`execute` · cancelled\n\[terminal t\d+ · killed by SIG", editor.transcript_text())
    assert wait_gone([shell], timeout=10) == []


def test_closing_the_chat_kills_a_command_that_ignores_hangups(editor: Editor) -> None:
    terminal_id, members = start_long_command(editor, "HUP")
    editor.lua("require('acp').close()")
    # Hang-up is ignored; Neovim escalates to SIGTERM after 2 s.
    assert wait_gone(members, timeout=10) == []
    assert editor.lua(f"return require('acp.editor.terminal').terminals[{terminal_id!r}]") is None


def test_quitting_neovim_kills_running_commands(editor: Editor) -> None:
    _, members = start_long_command(editor, "HUP TERM")
    editor.quit()
    assert wait_gone(members, timeout=10) == []


@pytest.mark.parametrize(
    ("ignores", "host_too"), [("", False), ("HUP TERM", False), ("HUP TERM", True)]
)
def test_neovim_killed_outright_kills_running_commands(
    editor: Editor, ignores: str, host_too: bool
) -> None:
    """Neovim killed (SIGKILL, a crash) runs no exit hook: its terminals' hang-up
    reaches only the wrapper, which waits for its command. The command and the
    wrapper ran on with parent 1; now they end with Neovim as agents do, also when
    the Python side is killed with it (only the reaper is left to end them: both
    are stopped first, so neither sees the other go)."""
    _, members = start_long_command(editor, ignores)
    host = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    if host_too:
        os.kill(editor.pid, signal.SIGSTOP)
        os.kill(host, signal.SIGSTOP)
        os.kill(host, signal.SIGKILL)
    os.kill(editor.pid, signal.SIGKILL)
    survivors = wait_gone(members, timeout=10)
    for pid in survivors:  # no orphan of a failure left to run for 1000 s
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert survivors == []


def test_python_host_dying_kills_running_commands(editor: Editor) -> None:
    _, members = start_long_command(editor, "HUP TERM")
    host = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    os.kill(host, signal.SIGKILL)
    assert wait_gone(members, timeout=10) == []
    # The reaper may end them before Neovim has heard of the host's end.
    editor.wait("require('acp').status().state == 'error'", what="the chat failed")


def test_a_new_python_host_gives_its_terminals_keys_of_their_own(editor: Editor) -> None:
    """Keys were counted from t1 in every Python host: after one died, the new host's
    first command took the key of the failed chat's terminal, whose buffer then
    belonged to no chat (its close left it) and whose name went to the new one."""
    old, _ = start_long_command(editor)
    host = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    os.kill(host, signal.SIGKILL)
    editor.wait("require('acp').status().state == 'error'", what="the chat failed")
    failed = editor.lua("return require('acp').status().chat")
    terminals = "require('acp.editor.terminal').terminals"
    old_buf = editor.lua(f"return {terminals}[...].buf", old)
    editor.open_chat(ready=False)  # a new host starts for it
    editor.wait_event("AcpSessionReady", count=2)
    new = run(editor, {"create": {"command": "echo new"}}, turn=2)["terminalId"]
    assert new != old
    new_buf = editor.lua(f"return {terminals}[...].buf", new)
    assert editor.lua(f"return vim.api.nvim_buf_get_name({new_buf})").endswith(f"/{new}")
    editor.lua("require('acp.chat').close(require('acp.chat.registry').chats[...])", failed)
    editor.wait(f"not vim.api.nvim_buf_is_valid({old_buf})", what="the failed chat's terminal gone")
    assert editor.lua(f"return vim.api.nvim_buf_is_valid({new_buf})")


def test_commands_leave_no_stray_buffers(editor: Editor) -> None:
    """Naming a command's terminal buffer acp://terminal/tN left its first name,
    term://…//PID:/bin/sh, behind as an empty unlisted buffer, one per command,
    in :ls! and buffer pickers, and :AcpClose did not delete it."""
    editor.setup()
    editor.open_chat()
    for turn in (1, 2):
        editor.lua("require('acp').send('run something')")
        editor.wait_event("AcpTurnEnd", count=turn)
    listed = editor.lua("return vim.api.nvim_exec2('ls!', { output = true }).output")
    assert len(re.findall(r"acp://terminal/t\d+", listed)) == 2
    assert "term://" not in listed


def test_display_terminal_buffer_takes_split_chunks_and_snapshots(editor: Editor) -> None:
    editor.setup()
    term = "require('acp.editor.terminal')"
    # An escape sequence split across writes (Python sends only whole characters).
    editor.lua(f"{term}.write('d1', 'ok café \\x1b[1', false)")
    editor.lua(f"{term}.write('d1', 'mbold\\x1b[0m', false)")
    buf = editor.lua(f"return {term}.terminals.d1.buf")
    assert editor.lua(f"return vim.bo[{buf}].buftype") == "terminal"
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 0, 1, false)[1] == 'ok café bold'")
    editor.lua(f"{term}.open('d1')")
    editor.lua(f"{term}.write('d1', 'fresh', true)")
    new = editor.lua(f"return {term}.terminals.d1.buf")
    assert new != buf and editor.lua(f"return vim.api.nvim_buf_is_valid({buf})") is False
    assert editor.lua("return vim.api.nvim_get_current_buf()") == new  # the window follows
    editor.wait(f"vim.api.nvim_buf_get_lines({new}, 0, 1, false)[1] == 'fresh'")


def test_demo_agent_runs_a_command_shown_live_in_the_chat(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('run something')")
    editor.wait_event("AcpTurnEnd")
    text = editor.transcript_text()
    assert "#### Run a command\n`execute` · completed\n[terminal t" in text
    assert "· exit 0] echo hi; printf 'counting:'" in text
    assert "```text\nhi\ncounting: 1 2 3\ndone\n```" in text
    assert (
        "The command exited with code 0 and printed:\n\n```\nhi\ncounting: 1 2 3\ndone\n```" in text
    )


def test_a_v2_agents_own_terminal_shows_in_its_tool_call_and_opens(editor: Editor) -> None:
    """ACP v2 has no client terminals: the demo agent runs ``make test`` itself and
    streams it as a display terminal, split inside a character and an escape."""
    editor.setup(protocol_version=2)
    editor.open_chat()
    editor.lua("require('acp').send('run the terminal')")
    editor.wait_event("AcpTurnEnd")
    text = editor.transcript_text()
    assert "#### Run the tests\n`execute` · completed\n[terminal t1 · exit 0] make test" in text
    assert "```text\nrunning 3 tests\npassed: café ✓\n```" in text
    editor.wait("require('acp.editor.terminal').terminals.t1 ~= nil", what="t1's buffer")
    assert editor.lua("return vim.fn.getcompletion('AcpTerminal ', 'cmdline')") == ["t1"]
    editor.nvim.command("AcpTerminal")
    assert editor.lua("return {vim.fn.bufname(), vim.bo.buftype}") == ["acp://terminal/t1", "terminal"]
    editor.wait("vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] == 'passed: café ✓'")
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, 1, false)") == ["running 3 tests"]
    # <CR> on its line in the transcript goes to it too.
    editor.nvim.command("close")
    transcript = editor.lua("return require('acp').status().transcript_buf")
    row = editor.transcript().index("[terminal t1 · exit 0] make test") + 1
    editor.lua(
        "local buf, row = ...; vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1]);"
        " vim.api.nvim_win_set_cursor(0, {row, 0})",
        transcript,
        row,
    )
    editor.nvim.input("<CR>")
    editor.wait("vim.fn.bufname() == 'acp://terminal/t1'", what="t1 open again")


def test_claudes_own_command_shows_its_output_in_a_terminal_of_the_chat(editor: Editor) -> None:
    """claude-agent-acp runs Bash itself; told the client takes ``_meta.terminal_output``
    (Zed's convention), it names a terminal the client never created and sends the
    output and exit there: shown as a display terminal at its tool call."""
    editor.setup(agents={"claude": editor.fake_agent("claude_bash")})
    editor.open_chat("claude")
    editor.lua("require('acp').send('hi from bash')")
    editor.wait_event("AcpTurnEnd")
    editor.wait(
        "table.concat(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf,"
        " 0, -1, false), '\\n'):find('· exit 0]\\n```text', 1, true) ~= nil",
        what="the terminal's exit and output in the transcript",
    )
    text = editor.transcript_text()
    block = text[text.index("#### echo hi from bash") :]
    assert re.match(
        r"#### echo hi from bash\n`execute` · completed\n\[terminal (t\d+) · exit 0\]\n"
        r"```text\nhi from bash\n```",
        block,
    ), block
    key = re.search(r"\[terminal (t\d+) ·", block).group(1)  # type: ignore[union-attr]
    term = f"require('acp.editor.terminal').terminals[{key!r}]"
    editor.wait(f"{term} ~= nil", what="the terminal's buffer")
    editor.nvim.command(f"AcpTerminal {key}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    assert buf == editor.lua(f"return {term}.buf")
    assert editor.lua(f"return vim.bo[{buf}].buftype") == "terminal"
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 0, 1, false)[1] == 'hi from bash'")


@pytest.mark.parametrize(
    ("version", "prompt", "agents"),
    [(2, "run the terminal", None), (1, "hi from bash", {"claude": "claude_bash"})],
    ids=["v2", "v1-terminal-output-meta"],
)
def test_an_agents_own_terminal_opens_from_the_turns_end(
    editor: Editor, version: int, prompt: str, agents: dict[str, str] | None
) -> None:
    """A script running :AcpTerminal when the turn ends (an AcpTurnEnd autocmd) was
    told "no terminal yet": a display terminal's buffer was written on the next
    throttled refresh, up to 50 ms after the turn had ended."""
    fakes = {name: editor.fake_agent(scenario) for name, scenario in (agents or {}).items()}
    editor.setup(agents=fakes, protocol_version=version)
    editor.lua(
        "vim.api.nvim_create_autocmd('User', {pattern = 'AcpTurnEnd', once = true, callback ="
        " function() vim.cmd.AcpTerminal(); _G.opened = {vim.fn.bufname(), vim.bo.buftype} end})"
    )
    editor.open_chat(next(iter(agents or {}), None))
    editor.lua("require('acp').send(...)", prompt)
    editor.wait_event("AcpTurnEnd")
    editor.wait("require('acp.editor.terminal').last ~= nil", what="the terminal's buffer")
    key = editor.lua("return require('acp.editor.terminal').last")
    assert editor.lua("return _G.opened") == [f"acp://terminal/{key}", "terminal"]
    assert not [n for n in editor.lua("return _G.acp_notices") if "no terminal" in n["msg"]]


def test_a_stopped_command_is_never_signalled_by_number_after_it_exited(editor: Editor) -> None:
    """Issue 27.4: M.stop scheduled SIGTERM and SIGKILL to the job's process group for
    2 and 4 s later, whether or not the job had exited by then; by then its pid may
    be a stranger's. Timers are run by hand here, once the job has exited: every
    signal M.stop causes must come while the job (its group's leader) still runs."""
    editor.setup()
    editor.lua(
        """
        local term = require('acp.editor.terminal')
        _G.timers, _G.signals = {}, {}
        vim.defer_fn = function(fn) table.insert(_G.timers, fn) end
        local kill = vim.uv.kill
        vim.uv.kill = function(pid, sig)
          local exited = vim.fn.jobwait({ term.terminals.s.job }, 0)[1] ~= -1
          table.insert(_G.signals, { pid = pid, sig = sig, exited = exited })
          return kill(pid, sig)
        end
        term.create('s', 'echo started; sleep 100', vim.fn.getcwd(), {})
        """
    )
    editor.wait(
        "vim.fn.join(vim.api.nvim_buf_get_lines(require('acp.editor.terminal').terminals.s.buf,"
        " 0, -1, false)):find('started') ~= nil",
        what="the command runs",
    )
    editor.lua("require('acp.editor.terminal').stop({'s'}, false)")
    editor.wait("not require('acp.editor.terminal').terminals.s.running", what="the exit")
    editor.lua("for _, fn in ipairs(_G.timers) do fn() end")
    signals = editor.lua("return _G.signals")
    assert signals and not [s for s in signals if s["exited"]], signals


def test_a_command_stopped_as_it_starts_ends_and_neovim_goes_on(editor: Editor) -> None:
    """Stopped the moment it started (an agent's terminal/kill right after
    terminal/create, on a busy machine), a command was hung up while it was still a
    forked Neovim, not yet its own program: Neovim's signal handlers in it passed the
    SIGHUP on to Neovim, which exited with code 1 ("Caught deadly signal 'SIGHUP'").
    The stop waits for the command's start: each one ends of the hang-up, and Neovim
    goes on."""
    editor.setup()
    keys = [f"s{i}" for i in range(20)]
    editor.lua(
        """
        local term = require('acp.editor.terminal')
        for _, key in ipairs(...) do
          term.create(key, 'sleep 100', vim.fn.getcwd(), {})
          term.stop({ key }, false)
        end
        """,
        keys,
    )
    editor.lua(
        """
        local terms = require('acp.editor.terminal').terminals
        _G.ends = function(keys)  -- what each terminal shows, its exit line once ended
          return vim.tbl_map(function(key)
            local lines = vim.api.nvim_buf_get_lines(terms[key].buf, 0, -1, false)
            return vim.trim(table.concat(lines, ''))
          end, keys)
        end
        """
    )
    editor.wait(
        f"vim.iter(_G.ends({lua_list(keys)})):all(function(s) return s:find('^%[Process exited') end)",
        what="every command ended",
    )
    ends = editor.lua("return _G.ends(...)", keys)
    assert ends == [f"[Process exited {128 + signal.SIGHUP}]"] * len(keys)


def test_a_command_that_rewrites_a_file_outside_git_is_in_the_review(editor: Editor) -> None:
    """Issue 27.7: no buffer, no tool call naming the file, no git: the file's text at
    the turn's start is the baseline, so the change can be reviewed and rejected."""
    notes = editor.tmp / "project" / "notes.txt"
    notes.write_text("mine\n")
    open_fake(editor)
    run(editor, {"create": {"command": f"echo theirs > {notes}"}})
    [change] = editor.lua("return require('acp').changes()")
    assert change["path"] == str(notes) and change["created"] is False
    assert [h["preview"] for h in change["hunks"]] == [["-mine", "+theirs"]]
    editor.lua("require('acp').reject()")
    editor.wait(f"vim.fn.readfile({str(notes)!r})[1] == 'mine'", what="the file back")


def test_a_chats_terminals_stay_through_a_restart_and_go_with_the_chat(editor: Editor) -> None:
    """:AcpClose deleted only the buffers of commands still running: those the agent
    had released stayed in :ls! for good. :AcpRestart deleted the running ones' buffers
    while the tool calls still named them. A chat's terminal buffers now last as long
    as the chat: a restart stops the commands and keeps them, the close deletes all."""
    running, members = start_long_command(editor)
    released = run(editor, {"create": {"command": "echo done"}}, turn=2)["terminalId"]
    terminals = "require('acp.editor.terminal').terminals"
    bufs = [editor.lua(f"return {terminals}[...].buf", key) for key in (running, released)]
    valid = f"vim.tbl_map(vim.api.nvim_buf_is_valid, {{{bufs[0]}, {bufs[1]}}})"
    editor.nvim.command("AcpRestart")
    editor.wait_event("AcpSessionReady", count=2)
    assert wait_gone(members, timeout=10) == []
    assert editor.lua(f"return {valid}") == [True, True]
    editor.lua("require('acp').close()")
    editor.wait(f"not vim.tbl_contains({valid}, true)", what="the buffers deleted")
    assert editor.lua(f"return vim.tbl_count({terminals})") == 0


def test_a_stored_chats_terminal_line_opens_no_other_chats_terminal(editor: Editor) -> None:
    """Terminal keys are counted per Python host: a chat kept from another Neovim
    names t1, and <CR> on its line opened this Neovim's t1, another chat's command."""
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('run something')")
    editor.wait_event("AcpTurnEnd")
    [key] = re.findall(r"\[terminal (t\d+) · exit 0\]", editor.transcript_text())
    editor.lua("require('acp').close()")
    editor.wait("#require('acp').history() > 0", what="the chat kept")
    entry = editor.lua("return require('acp').history()[1]")
    editor.quit()
    other = child_editor(
        editor.tmp, (ROOT / "tests" / "nvim" / "init.lua").read_text(), {"ACP_TEST_ROOT": str(ROOT)}
    )
    try:
        other.setup()
        other.open_chat()
        other.lua("require('acp').send('run something')")
        other.wait_event("AcpTurnEnd")
        assert other.lua(f"return require('acp.editor.terminal').terminals.{key} ~= nil")
        other.lua("require('acp').open({history = ...})", entry["id"])
        other.wait("require('acp').status().state == 'ready'", what="the stored chat shown")
        transcript = other.lua("return require('acp').status().transcript_buf")
        lines = other.transcript()
        row = next(i for i, line in enumerate(lines) if line.startswith(f"[terminal {key} ·"))
        win = other.lua(f"return vim.fn.win_findbuf({transcript})[1]")
        other.lua("vim.api.nvim_set_current_win(...)", win)
        other.lua("vim.api.nvim_win_set_cursor(0, { ..., 0 })", row + 1)
        assert other.lua("return require('acp.editor.terminal').open_at_cursor()") is False
        assert other.lua("return vim.api.nvim_get_current_buf()") == transcript
    finally:
        other.quit()


def test_a_terminal_asked_for_a_chat_as_it_closes_leaves_no_buffer(editor: Editor) -> None:
    """A chat's terminal buffers go when Lua closes the chat (close_chat); what the
    agent's command or streamed output asked for it while the close was on its way to
    Python (a terminal/create, a display write in flight) came after that, and made a
    buffer, a running command's too, that no chat would ever delete."""
    chat = open_fake(editor)["chat"]
    editor.lua("require('acp').close()")
    editor.wait("vim.tbl_isempty(require('acp.chat.registry').chats)", what="the chat closed")
    before = editor.lua("return #vim.api.nvim_list_bufs()")
    refused = editor.lua(
        """
        local term = require('acp.editor.terminal')
        term.write('late-output', 'hi', false, ...)
        local ok, err = pcall(term.create, 'late-command', 'sleep 100', vim.fn.getcwd(), {}, false, ...)
        return ok and 'started' or err
        """,
        chat,
    )
    assert refused == "its chat is closed"
    assert editor.lua("return vim.tbl_count(require('acp.editor.terminal').terminals)") == 0
    assert editor.lua("return #vim.api.nvim_list_bufs()") == before


def test_claudes_own_command_cancelled_is_not_left_running(editor: Editor) -> None:
    """A cancel while Claude's Bash runs: the agent ends the turn ``cancelled`` and
    never tells the call or its terminal that they ended. Neither is shown running
    under the ended turn."""
    editor.setup(agents={"claude": editor.fake_agent("claude_bash")})
    editor.open_chat("claude")
    editor.lua("require('acp').send('hold on')")
    editor.wait(
        "table.concat(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf,"
        " 0, -1, false), '\\n'):find('hold on\\n```', 1, true) ~= nil",
        what="the command's output in the transcript",
    )
    editor.nvim.command("AcpCancel")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "cancelled"
    text = editor.transcript_text()
    block = text[text.index("#### echo hold on") :]
    assert block.startswith("#### echo hold on\n`execute` · cancelled\n[terminal t"), block
    assert "· cancelled]" in block and "running" not in block
    # Reopened from the history, the block is as it was.
    editor.lua("require('acp').close()")
    editor.wait("#require('acp').history() > 0", what="the chat kept")
    editor.reopen_last()
    text = editor.transcript_text()
    assert "`execute` · cancelled\n[terminal t" in text and "· running]" not in text


@pytest.mark.parametrize("version", [1, 2])
def test_a_commands_last_output_is_shown_and_kept_when_its_turn_ends(
    editor: Editor, version: int
) -> None:
    """Claude's Bash printed its output, then the turn ended: the transcript showed the
    output only a moment after AcpTurnEnd, so an export made then, or a chat closed
    then (and reopened from the history), had the command without its output."""
    editor.setup(agents={"claude": editor.fake_agent("claude_bash")}, protocol_version=version)
    editor.open_chat("claude")
    editor.lua(
        """vim.api.nvim_create_autocmd('User', {pattern = 'AcpTurnEnd', once = true, callback = function()
             local buf = require('acp').status().transcript_buf
             _G.at_end = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\\n')
             require('acp').close()
           end})"""
    )
    editor.lua("require('acp').send('plain')")
    editor.wait_event("AcpTurnEnd")
    output = "[terminal t1 · exit 0]\n```text\nplain\n```"
    assert output in editor.lua("return _G.at_end")
    editor.reopen_last()
    assert output in editor.transcript_text()


@pytest.mark.parametrize("how", ["the agent dies", "AcpRestart"])
def test_a_command_stopped_with_its_agent_no_longer_shows_running(editor: Editor, how: str) -> None:
    """The agent exiting (or restarted) stops its commands, but the chat went on
    saying "running" for ever: the command's end reached only the agents still
    running. It shows how the command ended."""
    _, members = start_long_command(editor, "HUP TERM")
    if how == "AcpRestart":
        editor.nvim.command("AcpRestart")
        editor.wait_event("AcpSessionReady", count=2)
    else:
        [agent] = [p for p in editor.agent_pids() if b"agent.py" in Path(f"/proc/{p}/cmdline").read_bytes()]
        os.kill(agent, signal.SIGKILL)
        editor.wait_event("AcpError")
    assert wait_gone(members, timeout=10) == []
    wait_text(editor, "[terminal t1 · killed by SIGKILL]")
    assert "t1 · running" not in editor.transcript_text()
