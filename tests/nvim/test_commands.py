"""Commands and keys as a Neovim user expects them: views that reuse their tab
page, `q` that closes, completion, one-line errors, described mappings, help."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from acp_nvim.client.errors import NO_AGENT, STARTING
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


def complete(editor: Editor, line: str) -> list[str]:
    """What <Tab> offers at the end of `line` on the command line."""
    return list(editor.lua("return vim.fn.getcompletion(..., 'cmdline')", line))


def test_tab_offers_only_what_starts_with_the_text_typed(editor: Editor) -> None:
    """Neovim offers what a Lua `complete` function returns as it is: `:AcpChat d<Tab>`
    offered auggie, `:AcpHunk rej<Tab>` every action. Every command completed by a
    function narrows to what is typed, each argument to its own words."""
    (editor.tmp / "project" / "hello.py").write_text("print('hi')\n")
    (editor.tmp / "project" / "src").mkdir()
    editor.setup(permission_policy="allow_all")
    editor.open_chat()
    for turn, prompt in enumerate(("edit hello.py", "run"), start=1):
        editor.lua("require('acp').send(...)", prompt)
        editor.wait_event("AcpTurnEnd", count=turn)
    completed = editor.lua(
        "return vim.iter(vim.api.nvim_get_commands({})):filter(function(_, c)"
        " return vim.startswith(c.name, 'Acp') and c.complete == '<Lua function>' end)"
        ":map(function(name) return name end):totable()"
    )
    assert {"AcpChat", "AcpConfig", "AcpDiff", "AcpHunk", "AcpTerminal"} <= set(completed)
    # Each command's first argument, and the arguments that follow another.
    typed = [f"{name} " for name in sorted(completed)]
    typed += ["AcpChat! ", "AcpConfig mode ", "AcpDiff hello.py ", "AcpRoot add "]
    for line in typed:
        offered = complete(editor, line)
        assert offered, f"{line!r} offers something to narrow"
        for first in {word[0] for word in offered}:
            narrowed = [word for word in offered if word.startswith(first)]
            assert complete(editor, line + first) == narrowed, line + first
        assert complete(editor, line + "zzz") == [], line
    # After the argument of a one-argument command, and after a file its turns.
    assert complete(editor, "AcpHunk reject ") == complete(editor, "AcpChat demo ") == []
    assert complete(editor, "AcpDiff hello.py ") == ["1"]
    # The login methods the agent offers, the sessions :AcpResume offers too.
    assert complete(editor, "AcpLogin ") == ["demo-login"]
    assert complete(editor, "AcpDeleteSession ") == complete(editor, "AcpResume ") != []


def test_tab_completes_names_with_a_space_as_one_argument(editor: Editor) -> None:
    """`:AcpExport my\\ docs/<Tab>` and `:AcpRoot add my\\ docs/<Tab>` offered nothing (the
    words before were counted at each space), `:AcpRoot add my<Tab>` offered `my
    docs/` unescaped (two words then: E488), and `:AcpDiff` a changed file's name so."""
    project = editor.tmp / "project"
    (project / "my docs" / "sub").mkdir(parents=True)
    (project / "my docs" / "a b.txt").write_text("one\n")
    editor.setup(agents={"files": editor.fake_agent("files")})
    editor.open_chat("files")
    editor.lua("require('acp').send(...)", json.dumps([{"disk": {"path": str(project / "my docs" / "a b.txt"), "content": "two\n"}}]))
    editor.wait_event("AcpTurnEnd")
    assert complete(editor, "AcpExport my") == ["my\\ docs/"]
    assert complete(editor, "AcpExport my\\ docs/") == ["my\\ docs/a\\ b.txt", "my\\ docs/sub/"]
    assert complete(editor, "AcpExport my\\ docs/a\\ b.txt ") == []
    assert complete(editor, "AcpRoot add my") == ["my\\ docs/"]
    assert complete(editor, "AcpRoot add my\\ docs/") == ["my\\ docs/sub/"]
    assert complete(editor, "AcpRoot add my\\ docs/sub ") == []
    assert complete(editor, "AcpDiff my") == ["my\\ docs/a\\ b.txt"]
    assert complete(editor, "AcpDiff my\\ docs/a\\ b.txt ") == ["1"]
    editor.nvim.command("AcpRoot add " + complete(editor, "AcpRoot add my")[0])
    editor.wait("#require('acp').status().roots == 1", what="the root added")
    assert editor.lua("return require('acp').status().roots") == [str(project / "my docs")]


def test_tab_on_acpresume_in_a_chat_without_its_agent_tells_nothing(editor: Editor) -> None:
    """<Tab> after `:AcpResume ` in a reopened chat asked for the agent's sessions and
    notified "the chat has no running agent" while the user typed."""
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('hello zebra')")
    editor.wait_event("AcpTurnEnd")
    editor.wait("#require('acp').history({query = 'zebra'}) == 1", what="the chat kept")
    editor.nvim.command("AcpClose")
    editor.reopen_last()
    editor.lua("_G.acp_notices = {}")
    complete(editor, "AcpResume ")
    # :AcpSessions asks the same way after it: its notice comes after any of the Tab's.
    editor.nvim.command("AcpSessions")
    editor.wait("#_G.acp_notices > 0", what=":AcpSessions' notice")
    assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [f"acp: {NO_AGENT}"]


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
    """A turn that is no number, a prompt that is no text, a hunk without its file,
    a required argument missing: an error that says so (not a traceback, not a
    picker, not a guess). delete_session() left a KeyError in :AcpLog, handoff(nil)
    handed over to the same agent, forget(999999) and forget('x') said nothing."""
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
        "reject({}, 1)": "acp: a file is named by its path, not {}",  # was Vim's E730
        # Required arguments, named as vim.validate names them.
        "delete_session()": "acp: delete_session: session_id: expected string, got nil",
        "resume(' ')": 'acp: resume: session_id: expected string, got " "',
        "handoff(nil)": "acp: handoff: agent: expected string, got nil",
        "forget('x')": 'acp: forget: id: expected integer, got "x"',
        "forget(1.5)": "acp: forget: id: expected integer, got 1.5",
        # Options of the wrong type: a Lua error at ipairs, and a limit of "x" that
        # the store took for a damaged file ("move it away").
        "send('x', {context = 'file'})": 'acp: send: opts.context: expected list, got "file"',
        "history({limit = 'x'})": 'acp: history: opts.limit: expected integer, got "x"',
        "history('x')": 'acp: history: opts: expected table, got "x"',
        # A root came back as "root 't' is not an absolute path", a table agent as
        # "unknown agent 'table: 0x...'".
        "open({roots = '/tmp'})": 'acp: open: opts.roots: expected list of strings, got "/tmp"',
        "open({agent = {}})": "acp: open: opts.agent: expected string, got {}",
        "open({cwd = 5})": "acp: open: opts.cwd: expected string, got 5",
    }.items():
        raised = editor.lua(f"return select(2, pcall(function() require('acp').{call} end))")
        assert raised == said, call
    assert editor.events("AcpTurnStart") == []
    assert len(editor.lua("return require('acp').chats()")) == 1  # handoff(nil) opened one
    editor.lua("_G.acp_notices = {}; require('acp').forget(999999)")
    editor.wait("#_G.acp_notices > 0", what="what forget(999999) says")
    assert editor.lua("return _G.acp_notices[1].msg") == "acp: history: no stored chat 999999"


def test_an_optional_argument_of_another_kind_is_an_error_not_sent_on(editor: Editor) -> None:
    """`set_mode({id = "code"})` went to the agent as it was ("-32603 Internal error:
    unhashable type: 'dict'"), `export({force = true})` was Vim's E731, and
    `open({roots = {1}})` left a chat "starting" for good, with not a word."""
    editor.setup()
    editor.open_chat()
    for call, said in {
        "set_mode({id = 'code'})": 'acp: set_mode: mode: expected string, got { id = "code" }',
        "set_model(1)": "acp: set_model: model: expected string, got 1",
        "config('mode', 1)": "acp: config: value: expected string or boolean, got 1",
        "config(2)": "acp: config: id: expected string, got 2",
        "login(1)": "acp: login: method: expected string, got 1",
        "export({force = true})": "acp: export: path: expected string, got { force = true }",
        "open({new = true, roots = {1}})": "acp: open: opts.roots: expected list of strings, got { 1 }",
    }.items():
        raised = editor.lua(f"return select(2, pcall(function() require('acp').{call} end))")
        assert raised == said, call
    assert len(editor.lua("return require('acp').chats()")) == 1
    status = editor.lua("return require('acp').status()")
    assert (status["mode"], status["model"]) == ("Ask", "Demo small")


def test_permission_takes_what_acppermission_takes(editor: Editor) -> None:
    """The help: `require("acp").permission()` is "Like :AcpPermission"; but
    `permission("list")` opened the answer picker ("no permission request is
    pending"): list and forget were the command's only."""
    editor.setup()
    editor.open_chat()
    editor.lua("_G.acp_notices = {}; require('acp').permission('list')")
    said = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    editor.lua("_G.acp_notices = {}; vim.cmd('AcpPermission list')")
    assert said == [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert said == ["acp: no permission answer is remembered"]
    raised = editor.lua("return select(2, pcall(require('acp').permission, 'lsit'))")
    assert raised == "acp: unknown :AcpPermission lsit (list, forget)"


def test_an_option_a_lua_function_does_not_take_is_an_error(editor: Editor) -> None:
    """`open({agnet = "claude"})` opened the default agent's chat, `send("x", {nwo =
    true})` queued the text behind the running turn, `history({qeury = ...})` listed
    every chat: a misspelt option was ignored in silence, where setup() names one."""
    editor.setup()
    editor.open_chat()
    for call, said in {
        "open({agnet = 'demo'})": (
            "acp: open: opts.agnet: unknown option (agent, cwd, history, new, roots, session_id,"
            " worktree)"
        ),
        "send('x', {nwo = true})": "acp: send: opts.nwo: unknown option (context, now)",
        "send('x', {now = 'yes'})": 'acp: send: opts.now: expected boolean, got "yes"',
        "history({qeury = 'x'})": (
            "acp: history: opts.qeury: unknown option (agent, cwd, limit, query)"
        ),
        "changes({al = true})": "acp: changes: opts.al: unknown option (all)",
        "reject(nil, nil, {why = 'x'})": "acp: reject: opts.why: unknown option (reason)",
        "export(nil, {forse = true})": (
            "acp: export: opts.forse: unknown option (force, history, on_done)"
        ),
        "add({fiel = 'a.txt'})": "acp: add: opts.fiel: unknown option (file, range)",
    }.items():
        raised = editor.lua(f"return select(2, pcall(function() require('acp').{call} end))")
        assert raised == said, call
    assert len(editor.lua("return require('acp').chats()")) == 1
    assert editor.events("AcpTurnStart") == []


def test_commands_that_act_on_the_chat_say_so_when_none_is_open(editor: Editor) -> None:
    """:AcpClose said nothing at all, as if it had closed something."""
    editor.setup()
    for command in ("AcpClose", "AcpCancel", "AcpRestart"):
        editor.lua("_G.acp_notices = {}; pcall(vim.cmd, ...)", command)
        notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
        assert notices == ["acp: no chat is open (:AcpChat)"], command


def refusals(editor: Editor, asks: list[str]) -> dict[str, list[str]]:
    """What each command or Lua call in ``asks`` told the user (Python answers later:
    waited for)."""
    said = {}
    for ask in asks:
        editor.lua("_G.acp_notices = {}")
        if ask.startswith("require"):
            editor.lua(f"pcall(function() {ask} end)")
        else:
            editor.lua("pcall(vim.cmd, ...)", ask)
        editor.wait("#_G.acp_notices > 0", what=f"what {ask} says")
        said[ask] = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    return said


# What asks a chat's agent: the pickers Lua refuses, and what Python refuses.
ASKS = [
    "AcpConfig",
    "AcpMode",
    "AcpModel",
    "AcpConfig mode code",
    "AcpMode code",
    "AcpModel demo-large",
    "require('acp').set_mode('x')",
    "AcpSessions",
    "AcpDeleteSession demo-1",
]


def test_a_chat_whose_agent_is_starting_or_gone_says_so_whatever_asks_it(editor: Editor) -> None:
    """Reopened before its first prompt, `:AcpMode code` said "the agent offers no
    mode to choose"; starting, :AcpConfig said "the agent offers no settings" (the
    user concluded it had none); its agent dead, :AcpSessions said "agent 'demo' is
    not running". One sentence for each situation, whichever side refuses."""
    release = editor.tmp / "project" / "release"
    os.mkfifo(release)
    editor.setup(agents={"held": editor.fake_agent("held_init")})
    editor.open_chat("held", ready=False)
    editor.wait("require('acp').status().state == 'starting'")
    starting = [f"acp: {STARTING}"]
    assert refusals(editor, [*ASKS, "AcpFork"]) == {
        **{ask: starting for ask in ASKS},
        "AcpFork": [f"acp: cannot fork: {STARTING}"],
    }
    with open(release, "wb"):  # the agent answers its initialize now
        pass
    editor.wait_event("AcpSessionReady")
    editor.nvim.command("AcpClose")

    editor.open_chat()
    editor.lua("require('acp').send('hello whales')")
    editor.wait_event("AcpTurnEnd")
    editor.wait("#require('acp').history({query = 'whales'}) == 1", what="the chat kept")
    [demo] = [p for p in editor.agent_pids() if b"demo_agent" in Path(f"/proc/{p}/cmdline").read_bytes()]
    os.kill(demo, signal.SIGKILL)
    editor.wait_event("AcpError")
    no_agent = [f"acp: {NO_AGENT}"]
    expected = {**{ask: no_agent for ask in ASKS}, "AcpFork": [f"acp: cannot fork: {NO_AGENT}"]}
    assert refusals(editor, [*ASKS, "AcpFork"]) == expected, "its agent dead"

    editor.nvim.command("AcpClose")
    editor.reopen_last()
    assert refusals(editor, [*ASKS, "AcpFork"]) == expected, "reopened"


def test_acpdiff_refuses_a_word_it_cannot_use_and_opens_every_form_it_takes(
    editor: Editor,
) -> None:
    """`:AcpDiff hello.py 1 extra` opened the diff, `extra` dropped unsaid, and so did
    `:AcpDiff hello.py x`: a second word that is no turn was dropped, turn 1's diff
    opened. Each is an error naming the word, which opens nothing; each form the
    help gives opens the diff still."""
    (editor.tmp / "project" / "hello.py").write_text("print('hi')\n")
    editor.setup(permission_policy="allow_all")
    editor.open_chat()
    editor.lua("require('acp').send('edit hello.py')")
    editor.wait_event("AcpTurnEnd")
    baseline = "vim.fn.bufnr('acp://baseline/*')"
    for typed, said in {
        "AcpDiff hello.py 1 extra": "acp: E488: Trailing characters: extra",
        "AcpDiff hello.py x": 'acp: a turn is a whole number, not "x"',
        "AcpDiff hello.py 1.5": "acp: a turn is a whole number, not 1.5",
    }.items():
        editor.lua("_G.acp_notices = {}")
        editor.nvim.command(typed)
        assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [said], typed
        assert editor.lua(f"return {baseline}") == -1, typed
    editor.nvim.command("edit hello.py")
    for typed in ("AcpDiff hello.py 1", "AcpDiff hello.py", "AcpDiff 1", "AcpDiff"):
        editor.nvim.command(typed)
        editor.wait(f"{baseline} ~= -1", what=f"the diff of {typed}")
        editor.lua(f"vim.api.nvim_buf_delete({baseline}, {{ force = true }})")


@pytest.mark.parametrize("version", [1, 2])
def test_acpcancel_with_no_turn_running_says_there_is_nothing_to_cancel(
    editor: Editor, version: int
) -> None:
    """:AcpCancel in a ready chat said nothing: the user could not tell it was heard."""
    editor.setup(protocol_version=version)
    editor.open_chat()
    editor.lua("_G.acp_notices = {}")
    editor.nvim.command("AcpCancel")
    editor.wait("#_G.acp_notices > 0", what=":AcpCancel's notice")
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["msg"] == "acp: nothing to cancel: no turn is running"
    assert notice["level"] == editor.lua("return vim.log.levels.INFO")
    # A turn that ran and ended leaves nothing to cancel either; the chat goes on.
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.command("AcpCancel")
    editor.wait("#_G.acp_notices > 1", what="the second notice")
    assert editor.lua("return require('acp').status().state") == "ready"


@pytest.mark.parametrize("version", [1, 2])
def test_acpmode_completes_a_mode_by_its_name_in_any_case(editor: Editor, version: int) -> None:
    """`:AcpMode acc<Tab>` offered nothing for the mode named "Accept edits" (id
    acceptEdits), nor `:AcpMode ask<Tab>` for "Ask before edits" (id default): only
    ids matched, and in their own case. The id is what goes in the line."""
    editor.setup(
        agents={"claude": editor.fake_agent("named_modes")},
        default_agent="claude",
        protocol_version=version,
    )
    editor.open_chat()
    assert complete(editor, "AcpMode ") == ["default", "acceptEdits", "plan"]
    assert complete(editor, "AcpMode acc") == ["acceptEdits"]
    assert complete(editor, "AcpMode ask") == ["default"]
    assert complete(editor, "AcpMode PL") == ["plan"]
    assert complete(editor, "AcpMode zzz") == []
