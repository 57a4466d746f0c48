"""Where the agent works (|acp-workspaces|): each chat in its own directory, more
workspace roots, and worktree chats, over ACP v1 and v2 (the "workspace" agents of
tests/fakes/scenarios/workspace.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_nvim.client.services.worktrees import make_worktree
from acp_nvim.client.session.workspace import Worktree
from tests.nvim.conftest import Editor, wait_gone
from tests.nvim.test_history import second_neovim

VERSIONS = pytest.mark.parametrize("version", [1, 2])


STUB_SELECT = """
_G.asked, _G.answers = {}, {...}
vim.ui.select = function(items, opts, on_choice)
  table.insert(_G.asked, { prompt = opts.prompt, items = items })
  local pick = table.remove(_G.answers, 1)
  on_choice(items[pick], pick)
end
"""


def send(editor: Editor, chat: int, text: str) -> Any:
    """Send ``text`` to chat ``chat``, wait for its turn to end; the RESULT it said."""
    ended = len(editor.events("AcpTurnEnd"))
    editor.lua(
        "local chats = require('acp.chat.registry').chats; require('acp.chat').send(chats[...], select(2, ...))",
        chat,
        text,
    )
    editor.wait_event("AcpTurnEnd", count=ended + 1)
    results = [line for line in transcript(editor, chat) if line.startswith("RESULT ")]
    return json.loads(results[-1].removeprefix("RESULT "))


def transcript(editor: Editor, chat: int) -> list[str]:
    buf = editor.lua("return require('acp.chat.registry').chats[...].transcript", chat)
    return list(editor.nvim.buffers[buf][:])


def review(editor: Editor, chat: int) -> list[dict[str, Any]]:
    """Chat ``chat``'s review: its files as Lua holds them."""
    files: list[dict[str, Any]] = editor.lua(
        "local r = require('acp.review.state').by_chat[...]; return r and r.files or {}", chat
    )
    return files


def chat_ids(editor: Editor) -> list[int]:
    return [chat["id"] for chat in editor.lua("return require('acp').chats()")]


def agent_pids(editor: Editor) -> list[int]:
    return [
        pid
        for pid in editor.agent_pids()
        if b"\0workspace" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


@VERSIONS
def test_two_chats_of_one_agent_from_two_directories_work_each_in_its_own(
    editor: Editor, version: int
) -> None:
    a, b = editor.tmp / "a", editor.tmp / "b"
    a.mkdir()
    b.mkdir()
    editor.setup(
        agents={"ws": editor.fake_agent("workspace")}, default_agent="ws", protocol_version=version
    )
    editor.nvim.command(f"cd {a}")
    editor.nvim.command("AcpChat ws")
    editor.wait_event("AcpSessionReady")
    editor.nvim.command(f"cd {b}")
    editor.nvim.command("AcpChat! ws")
    editor.wait_event("AcpSessionReady", count=2)
    first, second = chat_ids(editor)
    assert len(agent_pids(editor)) == 1  # one process, a session in each directory

    assert send(editor, first, "where") == {"cwd": str(a), "roots": None}
    assert send(editor, second, "where") == {"cwd": str(b), "roots": None}
    assert editor.lua("return require('acp').status().cwd") == str(b)

    send(editor, first, "write notes.txt from a")
    send(editor, second, "write notes.txt from b")
    assert (a / "notes.txt").read_text() == "from a\n"
    assert (b / "notes.txt").read_text() == "from b\n"
    [in_a] = review(editor, first)
    [in_b] = review(editor, second)
    assert (in_a["path"], in_a["created"]) == (str(a / "notes.txt"), True)
    assert (in_b["path"], in_b["created"]) == (str(b / "notes.txt"), True)
    # A relative path (v2: the editor MCP tools') and a terminal (v1) are the chat's.
    assert read_text(send(editor, first, "read notes.txt"), version) == "from a\n"
    assert read_text(send(editor, second, "read notes.txt"), version) == "from b\n"
    if version == 1:
        assert send(editor, first, "pwd") == str(a)
        assert send(editor, second, "pwd") == str(b)

    # :AcpSessions lists the sessions of the chat's directory.
    editor.lua(STUB_SELECT)  # none picked
    editor.lua("require('acp').sessions()")
    editor.wait("#_G.asked == 1", what="the sessions picked from")
    assert len(editor.lua("return _G.asked[1].items")) == 1  # the one session in b
    assert send(editor, first, "calls")[-1] == ["list", {"cwd": str(b)}]


def read_text(result: Any, version: int) -> str:
    """The text a ``read`` said it got (v1: fs/read_text_file, v2: read_buffer)."""
    if version == 1:
        return str(result["content"])
    assert result["isError"] is False, result
    return str(result["content"][0]["text"])


def words(editor: Editor) -> list[str]:
    """What ``@`` completes in the current chat's input."""
    return editor.lua(  # type: ignore[no-any-return]
        "return vim.tbl_map(function(item) return item.word end,"
        " require('acp.chat.complete').items(require('acp.chat.registry').get(), '@'))"
    )


def offered(editor: Editor, word: str) -> None:
    """Wait until ``@`` completes ``word`` (the files are listed in the background)."""
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(item) return item.word end,"
        " (require('acp.chat.complete').items(require('acp.chat.registry').get(), '@'))),"
        f" {word!r})",
        what=f"{word} offered",
    )


@VERSIONS
def test_a_root_reaches_the_agent_and_is_read_without_asking_and_completed(
    editor: Editor, version: int
) -> None:
    project, lib = editor.tmp / "project", editor.tmp / "lib"
    lib.mkdir()
    (lib / "util.py").write_text("def util(): ...\n")
    editor.setup(
        agents={"ws": editor.fake_agent("workspace")},
        default_agent="ws",
        protocol_version=version,
        roots=[str(lib)],
    )
    chat = editor.open_chat()["chat"]
    assert send(editor, chat, "where") == {"cwd": str(project), "roots": [str(lib)]}

    read = send(editor, chat, f"read {lib / 'util.py'}")
    assert read_text(read, version) == "def util(): ...\n"
    text = "\n".join(transcript(editor, chat))
    assert "Permission needed" not in text and "not told" not in text

    offered(editor, f"@{lib / 'util.py'}")
    assert editor.lua("return require('acp').status().roots") == [str(lib)]
    assert "+ lib" in editor.winbar()

    # A command's change in the root, no tool call naming it: the review's scan finds it.
    send(editor, chat, f"run {lib / 'made.py'} made = True")
    [made] = review(editor, chat)
    assert (made["path"], made["created"]) == (str(lib / "made.py"), True)


@VERSIONS
def test_acproot_adds_a_root_at_once_and_the_next_resume_tells_the_agent(
    editor: Editor, version: int
) -> None:
    docs = editor.tmp / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n")
    editor.setup(
        agents={"ws": editor.fake_agent("workspace")}, default_agent="ws", protocol_version=version
    )
    chat = editor.open_chat()["chat"]
    assert editor.lua("return require('acp').status().roots") == []
    assert f"@{docs / 'guide.md'}" not in words(editor)

    editor.nvim.command(f"AcpRoot add {docs}")
    editor.wait(f"vim.deep_equal(require('acp').status().roots, {{ {str(docs)!r} }})")
    offered(editor, f"@{docs / 'guide.md'}")
    read = send(editor, chat, f"read {docs / 'guide.md'}")
    assert read_text(read, version) == "# Guide\n"
    text = "\n".join(transcript(editor, chat))
    assert "Permission needed" not in text
    assert f"Added the workspace root `{docs}`: the agent is told when its session" in text

    editor.nvim.command("AcpRestart")
    editor.wait_event("AcpSessionReady", count=2)
    [(_, resumed)] = send(editor, chat, "calls")  # a new process: its one request
    assert (resumed["cwd"], resumed["additionalDirectories"]) == (
        str(editor.tmp / "project"),
        [str(docs)],
    )

    editor.nvim.command(f"AcpRoot remove {docs}")
    editor.wait("vim.deep_equal(require('acp').status().roots, {})")


@VERSIONS
def test_a_session_resumed_from_the_list_goes_on_with_the_roots_it_had(
    editor: Editor, version: int
) -> None:
    """The agent lists each session with its roots (``additionalDirectories``), and a
    resume that does not name them again takes them away. Picked in :AcpSessions
    from a chat without roots, the session was resumed without its roots; one that
    is no directory any more is left out (it would refuse the chat)."""
    docs, gone = editor.tmp / "docs", editor.tmp / "gone"
    docs.mkdir()
    gone.mkdir()
    editor.setup(
        agents={"ws": editor.fake_agent("workspace")}, default_agent="ws", protocol_version=version
    )
    editor.lua("require('acp.chat').open({ agent = 'ws', roots = { ... } })", str(docs), str(gone))
    first = editor.wait_event("AcpSessionReady")["chat"]
    assert send(editor, first, "where")["roots"] == [str(docs), str(gone)]
    editor.nvim.command("AcpChat!")  # the agent goes on for it
    second = editor.wait_event("AcpSessionReady", count=2)["chat"]
    editor.lua("require('acp.chat').close(require('acp.chat.registry').chats[...])", first)
    editor.wait(f"require('acp.chat.registry').chats[{first}] == nil", what="the chat closed")
    gone.rmdir()
    editor.lua(STUB_SELECT, 1)
    editor.lua("require('acp').sessions()")
    resumed = editor.wait_event("AcpSessionReady", count=3)
    assert resumed["session_id"] == "ws-1" and resumed["chat"] not in (first, second)
    project = str(editor.tmp / "project")
    assert send(editor, resumed["chat"], "where") == {"cwd": project, "roots": [str(docs)]}
    assert editor.lua("return require('acp').status().roots") == [str(docs)]


def test_an_agent_that_takes_no_roots_is_told_nothing_but_the_chat_says_so_once(
    editor: Editor,
) -> None:
    lib = editor.tmp / "lib"
    lib.mkdir()
    (lib / "a.txt").write_text("a\n")
    editor.setup(
        agents={"ws": editor.fake_agent("workspace+untold")}, default_agent="ws", roots=[str(lib)]
    )
    chat = editor.open_chat()["chat"]
    assert send(editor, chat, "where") == {"cwd": str(editor.tmp / "project"), "roots": None}
    assert read_text(send(editor, chat, f"read {lib / 'a.txt'}"), 1) == "a\n"
    editor.nvim.command("AcpRestart")
    editor.wait_event("AcpSessionReady", count=2)
    text = "\n".join(transcript(editor, chat))
    assert text.count(f"it was not told of `{lib}`. It may still read and write there.") == 1
    assert "Permission needed" not in text


def test_a_root_that_is_no_directory_is_an_error_naming_it(editor: Editor) -> None:
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.lua("require('acp').open({ roots = { 'lib' } })")
    error = editor.wait_event("AcpError")
    assert error["message"] == "root 'lib' is not an absolute path (nor ~/...)"
    # No chat is left to close: the error is a notice.
    editor.wait("#require('acp').chats() == 0", what="the refused chat closed")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == f"acp: {error['message']}"

    editor.nvim.command("AcpChat")
    editor.wait_event("AcpSessionReady")
    editor.lua("_G.acp_notices = {}")
    editor.nvim.command(f"AcpRoot add {editor.tmp / 'gone'}")
    editor.wait("#_G.acp_notices > 0")
    assert editor.lua("return _G.acp_notices[#_G.acp_notices].msg") == (
        f"acp: root {str(editor.tmp / 'gone')!r} is not a directory"
    )
    assert editor.lua("return require('acp').status().roots") == []


def test_acproot_takes_one_directory_and_refuses_a_word_more(editor: Editor) -> None:
    """`:AcpRoot add /tmp/my docs` added /tmp/my, `docs` dropped unsaid: a directory
    whose name has a space became another root. A word more is an error (E488), as
    for :AcpDiff and :AcpConfig, which adds nothing; an escaped space is one word."""
    spaced = editor.tmp / "my docs"
    spaced.mkdir()
    editor.setup()
    editor.open_chat()
    editor.lua("_G.acp_notices = {}")
    editor.nvim.command(f"AcpRoot add {editor.tmp}/my docs")
    assert [n["msg"] for n in editor.lua("return _G.acp_notices")] == [
        "acp: E488: Trailing characters: docs"
    ]
    assert editor.lua("return vim.fn.getcompletion('AcpRoot add /tmp ', 'cmdline')") == []
    editor.nvim.command(f"AcpRoot add {editor.tmp}/my\\ docs")
    editor.wait("#require('acp').status().roots == 1", what="the root added")
    assert editor.lua("return require('acp').status().roots") == [str(spaced)]


def test_an_agent_cwd_that_is_no_directory_is_named_as_the_option(editor: Editor) -> None:
    gone = str(editor.tmp / "gone")
    fake = {**editor.fake_agent("workspace"), "cwd": gone}
    editor.setup(agents={"ws": fake}, default_agent="ws")
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")
    assert error["message"] == f"cannot work in {gone!r} (the agent's cwd option): no such directory"
    editor.nvim.command("checkhealth acp")
    assert f'ERROR ws: agents.ws.cwd "{gone}" is no directory' in "\n".join(
        editor.nvim.current.buffer[:]
    )


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def wait_worktree_removed(editor: Editor, project: Path, worktree: Path) -> None:
    """Until the chat's worktree branch is gone from ``project``; the worktree with it."""
    branches = f"vim.fn.system({{ 'git', '-C', {str(project)!r}, 'branch', '--list', 'acp/*' }})"
    editor.wait(f"{branches} == ''", what="the worktree's branch removed")
    assert not worktree.exists()


def repository(editor: Editor) -> Path:
    """Neovim's directory as a git project: f.txt committed, then g.txt changed and
    new.txt added without a commit."""
    project = editor.tmp / "project"
    git(project, "init", "-q")
    git(project, "config", "user.email", "you@example.com")
    git(project, "config", "user.name", "You")
    git(project, "config", "commit.gpgsign", "false")
    (project / "f.txt").write_text("1\n2\n3\n4\n5\n")
    (project / "g.txt").write_text("g\n")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "start")
    (project / "g.txt").write_text("g, as you changed it\n")
    (project / "new.txt").write_text("new\n")
    return project


def buffer_lines(editor: Editor, path: Path) -> list[str]:
    return editor.lua(  # type: ignore[no-any-return]
        "return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(path)
    )


@VERSIONS
def test_a_worktree_chats_agent_writes_in_its_worktree_and_accept_brings_it_in(
    editor: Editor, version: int
) -> None:
    project = repository(editor)
    f = project / "f.txt"
    editor.setup(
        agents={"ws": editor.fake_agent("workspace")}, default_agent="ws", protocol_version=version
    )
    editor.nvim.command(f"edit {f}")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    worktree = Path(listed["worktree"])
    assert worktree.is_dir() and not worktree.is_relative_to(project)
    assert (listed["cwd"], listed["waiting"]) == (str(worktree), 0)
    assert git(worktree, "branch", "--show-current") == f"acp/{listed['id']}\n"
    # The agent starts from what you have on disk.
    assert (worktree / "g.txt").read_text() == "g, as you changed it\n"
    assert (worktree / "new.txt").read_text() == "new\n"
    assert "worktree acp/" in editor.winbar()
    assert " · in " not in editor.winbar()  # the branch names where it works
    # status() names it as chats() does (it had no worktree field).
    assert editor.lua("return require('acp').status().worktree") == str(worktree)

    chat = listed["id"]
    if version == 1:  # its terminals run there too
        assert send(editor, chat, "pwd") == str(worktree)
    send(editor, chat, "write f.txt one\n2\n3\n4\nfive")
    assert (worktree / "f.txt").read_text() == "one\n2\n3\n4\nfive\n"
    assert f.read_text() == "1\n2\n3\n4\n5\n"
    assert buffer_lines(editor, f) == ["1", "2", "3", "4", "5"]
    [file] = review(editor, chat)
    assert (file["path"], file["source"]) == (str(f), str(worktree / "f.txt"))
    # Named as the review names it: your file, where accepting brings it.
    assert editor.events("AcpChangesRecorded")[-1] == {"chat": chat, "files": [str(f)]}
    editor.nvim.command("AcpTurnDiff")  # the worktree's copy: where the hunks wait
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == str(worktree / "f.txt")
    drawn = "return vim.api.nvim_eval_statusline(vim.wo.winbar, {use_winbar = true}).str"
    assert editor.lua(drawn).endswith(" · f.txt · +2 -2 · in the worktree")
    editor.nvim.command("tabclose")
    first, last = file["hunks"]
    assert editor.lua("return require('acp').chats()[1].waiting") == 2

    changenr = editor.lua("return vim.fn.bufnr(...)", str(f))
    before = editor.lua(
        "return vim.api.nvim_buf_call(..., function() return vim.fn.changenr() end)", changenr
    )
    editor.lua("require('acp').accept(...)", str(f), first["id"])
    editor.wait(f"vim.fn.readfile({str(f)!r})[1] == 'one'", what="the hunk in your file")
    assert f.read_text() == "one\n2\n3\n4\n5\n"
    assert buffer_lines(editor, f) == ["one", "2", "3", "4", "5"]
    after = editor.lua(
        "return vim.api.nvim_buf_call(..., function() return vim.fn.changenr() end)", changenr
    )
    assert after == before + 1  # one undo step
    editor.lua("require('acp').reject(...)", str(f), last["id"])
    editor.wait("require('acp').chats()[1].waiting == 0")
    assert (worktree / "f.txt").read_text() == "one\n2\n3\n4\n5\n"  # dropped from the worktree
    assert f.read_text() == "one\n2\n3\n4\n5\n"

    # A buffer of the worktree's copy left open, and one you typed in.
    editor.nvim.command(f"edit {worktree / 'g.txt'}")
    editor.nvim.command("normal! Oyours")
    editor.nvim.command(f"split {worktree / 'f.txt'}")
    editor.lua("require('acp').close()")  # nothing waits: no question
    branches = f"vim.fn.system({{ 'git', '-C', {str(project)!r}, 'branch', '--list', 'acp/*' }})"
    editor.wait(f"{branches} == ''", what="the worktree's branch removed")
    editor.wait(f"require('acp.review.state').by_chat[{chat}] == nil", what="its review let go")
    assert not worktree.exists()
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1
    # Its files' buffers go, their windows show another; your unsaved text stays.
    kept = "its files' unsaved edits stay in buffers: g.txt"
    editor.wait(
        f"vim.iter(_G.acp_notices):any(function(n) return n.msg:find({kept!r}, 1, true) end)",
        what="the kept buffer told",
    )
    assert editor.lua("return vim.fn.bufexists(...)", str(worktree / "f.txt")) == 0
    assert buffer_lines(editor, worktree / "g.txt")[0] == "yours"
    shown = editor.lua("return vim.tbl_map(vim.fn.winbufnr, vim.api.nvim_tabpage_list_wins(0))")
    assert editor.lua("return vim.fn.bufnr(...)", str(worktree / "g.txt")) in shown


def test_a_worktree_hunk_brought_in_beside_your_unsaved_line_never_saves_it(
    editor: Editor,
) -> None:
    """Decision 0015 for a worktree chat's accept. You saved "3, saved" after the
    worktree was made, took it back in the buffer (unsaved) and typed a line under
    it. The agent's change of line 3 merged cleanly against the worktree's copy, and
    saving it behind your unsaved edits took its part of the buffer to the file, your
    unsaved line with it. Now what reaches into unsaved lines waits as a conflict."""
    project = repository(editor)
    f = project / "f.txt"
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command(f"edit {f}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    send(editor, listed["id"], "write f.txt 1\n2\nthree\n4\n5")
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, {'3, saved'})", buf)
    editor.lua("vim.api.nvim_buf_call(..., function() vim.cmd('write') end)", buf)
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, {'3', 'mine, unsaved'})", buf)
    editor.lua("require('acp').accept(...)", str(f))
    editor.wait("require('acp').chats()[1].waiting == 0", what="the hunk brought in")
    assert f.read_text() == "1\n2\n3, saved\n4\n5\n"  # never "mine, unsaved"
    assert buffer_lines(editor, f) == ["1", "2", "3", "mine, unsaved", "4", "5"]
    assert editor.lua("return vim.bo[...].modified", buf)
    editor.wait(
        f"#vim.tbl_filter(function(f) return f.source == nil end, "
        f"require('acp.review.state').by_chat[{listed['id']}].files) == 1",
        what="the clash listed",
    )
    [clash] = [f for f in review(editor, listed["id"]) if f.get("source") is None]
    assert [(h["status"], h["proposed"]) for h in clash["hunks"]] == [
        ("conflict", ["three", "mine, unsaved"])
    ]


def test_worktree_chats_run_side_by_side_and_closing_one_asks_while_hunks_wait(
    editor: Editor,
) -> None:
    project = repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    first = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    second = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady", count=2)
    send(editor, first, "write f.txt first")
    send(editor, second, "write f.txt second")
    one, two = editor.lua("return require('acp').chats()")
    assert (one["waiting"], two["waiting"]) == (1, 1)
    assert Path(one["worktree"], "f.txt").read_text() == "first\n"
    assert Path(two["worktree"], "f.txt").read_text() == "second\n"
    assert (project / "f.txt").read_text() == "1\n2\n3\n4\n5\n"
    branches = git(project, "branch", "--list", "--format=%(refname:short)", "acp/*")
    assert branches.split() == [f"acp/{first}", f"acp/{second}"]
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice) _G.listed = vim.tbl_map(opts.format_item, items) end"
    )
    editor.nvim.command("AcpChats")
    agent, title, where, _age, turns, state = editor.lua("return _G.listed")[0].split(" · ")
    assert (agent, title, where, turns, state) == (
        "ws",
        f"ws #{first}",
        f"worktree acp/{first}, 1 hunk waiting",  # its branch, as the winbar names it
        "1 turn",
        "ready",
    )

    editor.lua(STUB_SELECT, 2)  # keep the worktree
    editor.lua("require('acp').close()")  # the current chat: the second
    editor.wait("#require('acp').chats() == 1", what="the chat closed")
    [asked] = editor.lua("return _G.asked")
    assert asked["prompt"] == f"1 hunk waits in the worktree of ws #{second}"
    kept = f"acp: kept the worktree {two['worktree']} (branch acp/{second})"
    editor.wait(
        f"vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices), {kept!r})"
    )
    assert Path(two["worktree"], "f.txt").read_text() == "second\n"
    assert git(project, "branch", "--list", "--format=%(refname:short)", "acp/*").split() == [
        f"acp/{first}",
        f"acp/{second}",
    ]


@pytest.mark.parametrize("answer", ["remove", "keep"])
def test_closing_a_worktree_chat_whose_agent_only_made_a_file_executable_asks(
    editor: Editor, answer: str
) -> None:
    """The agent ran `chmod +x` on a file of yours in its worktree and changed no
    text: no hunk waits, so closing the chat asked nothing and kept the worktree with
    a notice, where a hunk would have been asked about: the user's word was never
    taken for work the review does not list. The close asks, naming the file."""
    project = repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    chat = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    (worktree / "f.txt").chmod(0o755)  # as the agent's shell does, in its worktree
    send(editor, chat, "where")
    editor.lua(STUB_SELECT, 1 if answer == "remove" else 2)
    editor.lua("require('acp').close()")
    editor.wait("#require('acp').chats() == 0", what="the chat closed")
    [asked] = editor.lua("return _G.asked")
    assert asked["prompt"] == (
        f"the agent changed the execute bit of f.txt in the worktree of ws #{chat}"
    )
    if answer == "remove":
        wait_worktree_removed(editor, project, worktree)
    else:
        kept = f"acp: kept the worktree {worktree} (branch acp/{chat})"
        notices = "vim.tbl_map(function(n) return n.msg end, _G.acp_notices)"
        editor.wait(f"vim.tbl_contains({notices}, {kept!r})", what="the worktree kept")
        assert (worktree / "f.txt").stat().st_mode & 0o100
    assert not (project / "f.txt").stat().st_mode & 0o100


def test_closing_a_worktree_chat_names_both_hunks_and_execute_bits_that_wait(
    editor: Editor,
) -> None:
    """A hunk waits and the agent made another file executable: the close asked
    about the hunk alone, and the user kept or removed the worktree not told of the
    execute bit. The question names both."""
    repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    chat = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    (worktree / "g.txt").chmod(0o755)  # as the agent's shell does, in its worktree
    send(editor, chat, "write f.txt agent")
    editor.wait("require('acp').chats()[1].waiting == 1", what="a hunk waiting")
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    editor.lua("require('acp').close()")
    editor.wait("#require('acp').chats() == 0", what="the chat closed")
    [asked] = editor.lua("return _G.asked")
    assert asked["prompt"] == (
        "1 hunk waits and the agent changed the execute bit of g.txt "
        f"in the worktree of ws #{chat}"
    )


def test_a_worktree_kept_unasked_names_both_hunks_and_execute_bits_that_wait(
    editor: Editor,
) -> None:
    """The chat's transcript wiped out (no question asked): the notice of the kept
    worktree named the hunk alone, not the file the agent made executable."""
    repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    chat = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    (worktree / "g.txt").chmod(0o755)  # as the agent's shell does, in its worktree
    send(editor, chat, "write f.txt agent")
    editor.wait("require('acp').chats()[1].waiting == 1", what="a hunk waiting")
    editor.lua("vim.cmd('bwipeout! ' .. require('acp').status().transcript_buf)")
    kept = (
        f"acp: kept the worktree {worktree} (branch acp/{chat}): 1 hunk waits and the agent"
        " changed the execute bit of g.txt in it"
    )
    notices = "vim.tbl_map(function(n) return n.msg end, _G.acp_notices)"
    editor.wait(f"vim.tbl_contains({notices}, {kept!r})", what="the worktree kept, both named")
    assert (worktree / "g.txt").stat().st_mode & 0o100


def test_quitting_neovim_removes_the_worktrees_that_hold_no_work(editor: Editor) -> None:
    project = repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command("AcpWorktree")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    pids = editor.agent_pids()
    editor.quit()
    assert not wait_gone(pids)  # the Python side ended, after its shutdown
    assert not worktree.exists()
    assert git(project, "branch", "--list", "acp/*") == ""


def test_a_worktree_chat_works_beside_a_branch_of_yours_named_acp(editor: Editor) -> None:
    """With a branch ``acp`` in the repository git can make no ``acp/<n>``: every
    worktree chat failed ("cannot lock ref 'refs/heads/acp/1'"). Its branch is
    ``acp-<n>`` there; yours is untouched."""
    project = repository(editor)
    git(project, "branch", "acp")
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    worktree = Path(listed["worktree"])
    assert git(worktree, "branch", "--show-current") == f"acp-{listed['id']}\n"
    assert f"worktree acp-{listed['id']}" in editor.winbar()
    assert git(project, "branch", "--list", "--format=%(refname:short)", "acp*").split() == [
        "acp", f"acp-{listed['id']}"
    ]


def left_by_a_killed_neovim(editor: Editor, project: Path, *, detached: bool = False) -> Worktree:
    """A worktree chat's worktree of ``project`` whose Neovim was killed (its
    process gone, its held file left; ``detached``: its agent left it on no
    branch), then the plugin set up with a worktree-capable agent."""
    home = Path(editor.lua("return vim.fn.stdpath('state')")) / "acp" / "worktrees"
    left, _ = make_worktree(str(project), "1", str(home))
    if detached:
        git(Path(left.path), "checkout", "-q", "--detach")
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    admin = Path(git(Path(left.path), "rev-parse", "--absolute-git-dir").strip())
    (admin / f"acp-held-{dead.pid}").write_text("")
    editor.setup(
        agents={"ws": editor.fake_agent("workspace")},
        default_agent="ws",
        history={"enabled": False},
    )
    return left


def test_a_worktree_a_killed_neovim_left_is_told_of_once_by_the_first_chat(
    editor: Editor,
) -> None:
    """A Neovim killed with a worktree chat open, the history off, left its worktree
    and branch: nothing ever removed them or said they were there, and only a new
    worktree chat of that project looked, so a user who opened none never heard."""
    project = repository(editor)
    left = left_by_a_killed_neovim(editor, project)
    assert f"WARNING {left.path} (branch acp/1) of {project}: left by a Neovim" in health(editor)
    editor.open_chat()  # no worktree chat
    found = f"function(n) return n.msg:find({left.path!r}, 1, true) end"
    notices = f"vim.tbl_filter({found}, _G.acp_notices)"
    editor.wait(f"#{notices} > 0", what="the worktree left told of")
    git_c = f"git -C {project}"
    assert [n["msg"] for n in editor.lua(f"return {notices}")] == [
        f"acp: the worktree {left.path} (branch acp/1) of {project} was left by a Neovim"
        " that ended without closing its chat: reopen that chat from the history to go"
        f" on there, or remove it ({git_c} worktree remove --force {left.path};"
        f" {git_c} branch -D acp/1)"
    ]
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady", count=2)
    assert len(editor.lua(f"return {notices}")) == 1
    assert Path(left.path).is_dir()  # what it holds is the user's to judge
    assert f"{left.path} (branch acp/1) of {project}: kept, no chat works in it" in health(editor)


def test_a_left_worktree_on_no_branch_is_told_of_with_commands_that_run(
    editor: Editor,
) -> None:
    """The agent of a killed Neovim's worktree chat had checked out a commit: the
    worktree is on no branch. :checkhealth named "branch " and advised
    ``git branch -D`` with no name, which git refuses."""
    project = repository(editor)
    left = left_by_a_killed_neovim(editor, project, detached=True)
    said = health(editor)
    assert f"WARNING {left.path} (branch none) of {project}: left by a Neovim" in said
    assert f"remove it: git -C {project} worktree remove --force {left.path}\n" in said + "\n"


def health(editor: Editor) -> str:
    """What :checkhealth acp says of worktrees."""
    editor.nvim.command("checkhealth acp")
    lines = editor.nvim.current.buffer[:]
    text = "\n".join(lines[lines.index("Worktrees ~") + 1 :])
    editor.nvim.command("bwipeout")
    return text


def test_a_worktree_outside_git_or_that_git_refuses_is_an_error_and_changes_nothing(
    editor: Editor,
) -> None:
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    project = editor.tmp / "project"
    first = editor.open_chat()
    windows = editor.lua("return vim.tbl_map(vim.api.nvim_win_get_buf, vim.api.nvim_list_wins())")
    editor.nvim.command("AcpWorktree")
    error = editor.wait_event("AcpError")
    assert error["message"] == f"cannot make a worktree: {project} is not in a git repository"
    # No failed chat in place of the one shown: the error is a notice.
    editor.wait("#require('acp').chats() == 1", what="the refused chat closed")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == f"acp: {error['message']}"
    assert editor.lua("return require('acp').status().chat") == first["chat"]
    shown = editor.lua("return vim.tbl_map(vim.api.nvim_win_get_buf, vim.api.nvim_list_wins())")
    assert shown == windows

    git(project, "init", "-q")  # no commit yet: no HEAD to start from
    (project / "a.txt").write_text("yours\n")
    editor.nvim.command("AcpWorktree")
    error = editor.wait_event("AcpError", count=2)
    assert error["message"] == (  # not git's "fatal: not a valid object name: 'HEAD'"
        f"cannot make a worktree: {project} has no commit yet, and a worktree starts"
        " from one (git commit first)"
    )
    assert git(project, "status", "--porcelain") == "?? a.txt\n"
    assert git(project, "branch", "--list") == ""
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def open_worktree_chat(editor: Editor, version: int) -> tuple[Path, int, Path]:
    """A worktree chat of the "ws" agent (``other``: a second one) in a git project
    whose agent changed f.txt there: the project, the chat, its worktree."""
    project = repository(editor)
    editor.setup(
        agents={"ws": editor.fake_agent("workspace"), "other": editor.fake_agent("workspace")},
        default_agent="ws",
        protocol_version=version,
    )
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    send(editor, listed["id"], "write f.txt first")
    return project, listed["id"], Path(listed["worktree"])


def slow_worktree_chat(editor: Editor, **others: dict[str, Any]) -> tuple[Path, int, Path]:
    """A worktree chat, in a git project, of a "ws" agent that takes its time to end
    (SIGTERM ignored until the SIGKILL, 2 s after), ``others`` the other agents: the
    project, the chat, its worktree. Its close is still under way when the test goes on."""
    project = repository(editor)
    fake = editor.fake_agent("workspace")["cmd"]
    slow = ["sh", "-c", 'trap "" TERM; "$0" "$@"; sleep 30', *fake]
    editor.setup(agents={"ws": {"cmd": slow}, **others}, default_agent="ws")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    return project, listed["id"], Path(listed["worktree"])


def close_chat(editor: Editor, chat: int) -> None:
    """Close chat ``chat`` as :AcpChats does (asking while hunks wait)."""
    left = len(editor.lua("return require('acp').chats()")) - 1
    editor.lua(
        "local chats = require('acp.chat.registry').chats; require('acp.chat').close(chats[...], true)",
        chat,
    )
    editor.wait(f"#require('acp').chats() == {left}", what=f"chat {chat} closed")


@VERSIONS
@pytest.mark.parametrize("how", ["fork", "handoff"])
def test_a_fork_or_handoff_of_a_worktree_chat_works_in_the_same_worktree(
    editor: Editor, version: int, how: str
) -> None:
    project, first, worktree = open_worktree_chat(editor, version)
    editor.nvim.command("AcpFork" if how == "fork" else "AcpHandoff other")
    editor.wait_event("AcpSessionReady", count=2)
    [_, second] = chat_ids(editor)
    one, two = editor.lua("return require('acp').chats()")
    assert two["agent"] == ("ws" if how == "fork" else "other")
    assert two["worktree"] == one["worktree"] == str(worktree) and two["cwd"] == str(worktree)
    assert send(editor, second, "where")["cwd"] == str(worktree)
    assert "worktree acp/" in editor.winbar()

    # It goes on from the first agent's work, whose hunk stays in the first chat's review.
    send(editor, second, "write g.txt second")
    assert (worktree / "f.txt").read_text() == "first\n"
    assert (worktree / "g.txt").read_text() == "second\n"
    assert (project / "g.txt").read_text() == "g, as you changed it\n"
    [mine] = review(editor, first)
    [theirs] = review(editor, second)
    assert (mine["path"], mine["source"]) == (str(project / "f.txt"), str(worktree / "f.txt"))
    assert (theirs["path"], theirs["source"]) == (str(project / "g.txt"), str(worktree / "g.txt"))
    assert [c["waiting"] for c in editor.lua("return require('acp').chats()")] == [1, 1]
    editor.lua("require('acp').accept()")  # the current chat: the second
    editor.wait(f"vim.fn.readfile({str(project / 'g.txt')!r})[1] == 'second'")

    # Closing the first chat asks nothing and keeps the worktree: the second works in it.
    # Its review, gone, said "nothing of it waits any more": a notice says where its
    # hunk stays, which no review lists now, and when it is asked about.
    editor.lua(STUB_SELECT)
    close_chat(editor, first)
    assert editor.lua("return _G.asked") == []
    assert worktree.is_dir()
    told = (
        f"acp: 1 hunk of closed chat #{first} stays unreviewed in the worktree {worktree}"
        f" (branch acp/{first}), where chat #{second} works: the last chat there to close"
        " asks about them"
    )
    editor.wait(
        f"vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices), {told!r})",
        what="the hunk left told",
    )
    assert send(editor, second, "where")["cwd"] == str(worktree)
    # The hunk the first chat left waiting is work: closing the last chat asks about
    # it (it asked nothing: its own review lists none), as a close unasked keeps the
    # worktree for it and says so.
    registry = "require('acp.chat.registry')"
    title = editor.lua(f"return {registry}.title({registry}.chats[...])", second)
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, second)
    assert [a["prompt"] for a in editor.lua("return _G.asked")] == [
        f"1 hunk waits in the worktree of {title}"
    ]
    kept = f"acp: kept the worktree {worktree} (branch acp/{first})"
    editor.wait(
        f"vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices), {kept!r})"
    )
    assert (worktree / "f.txt").read_text() == "first\n"
    assert (project / "f.txt").read_text() == "1\n2\n3\n4\n5\n"


@VERSIONS
def test_a_session_resumed_from_a_worktree_chats_list_works_in_its_worktree(
    editor: Editor, version: int
) -> None:
    """:AcpSessions in a worktree chat lists the sessions of its worktree; the one
    picked goes on in that worktree as a worktree chat (its review, its winbar), not
    as a plain chat in the worktree's directory."""
    project, first, worktree = open_worktree_chat(editor, version)
    editor.nvim.command("AcpFork")
    forked = editor.wait_event("AcpSessionReady", count=2)
    close_chat(editor, forked["chat"])
    editor.lua("require('acp.chat').switch(require('acp.chat.registry').chats[...])", first)
    editor.lua(STUB_SELECT)
    editor.lua("_G.answers = { 2 }")  # listed in the order made: the fork's is second
    editor.nvim.command("AcpSessions")
    ready = editor.wait_event("AcpSessionReady", count=3)
    assert ready["session_id"] == forked["session_id"]
    resumed = next(c for c in editor.lua("return require('acp').chats()") if c["id"] == ready["chat"])
    assert resumed["worktree"] == str(worktree) and resumed["cwd"] == str(worktree)
    assert "worktree acp/" in editor.winbar()
    # It answers for the worktree with the chat it was listed from: closing that one keeps it.
    editor.lua(STUB_SELECT)
    close_chat(editor, first)
    assert worktree.is_dir() and send(editor, ready["chat"], "where")["cwd"] == str(worktree)
    assert (project / "f.txt").read_text() == "1\n2\n3\n4\n5\n"


@VERSIONS
def test_a_session_resumed_from_a_worktree_chats_list_has_the_roots_it_was_listed_with(
    editor: Editor, version: int
) -> None:
    """A session picked in a worktree chat's :AcpSessions goes on in the worktree, with
    the roots the agent lists it with, as a resume from any other chat does: it took
    the listing chat's roots (a root added there since), which the session never had."""
    docs = editor.tmp / "docs"
    docs.mkdir()
    _, first, worktree = open_worktree_chat(editor, version)
    editor.nvim.command("AcpFork")
    forked = editor.wait_event("AcpSessionReady", count=2)
    close_chat(editor, forked["chat"])
    editor.lua("require('acp.chat').switch(require('acp.chat.registry').chats[...])", first)
    editor.nvim.command(f"AcpRoot add {docs}")
    editor.wait("#require('acp').status().roots == 1", what="the root added")
    editor.lua(STUB_SELECT)
    editor.lua("_G.answers = { 2 }")  # listed in the order made: the fork's is second
    editor.nvim.command("AcpSessions")
    ready = editor.wait_event("AcpSessionReady", count=3)
    assert ready["session_id"] == forked["session_id"]
    resumed = next(c for c in editor.lua("return require('acp').chats()") if c["id"] == ready["chat"])
    assert resumed["worktree"] == str(worktree)
    roots = "return require('acp.chat.registry').chats[...].status.roots"
    assert editor.lua(roots, ready["chat"]) == []
    assert send(editor, ready["chat"], "where") == {"cwd": str(worktree), "roots": None}


@pytest.mark.parametrize("how", ["fork", "handoff"])
def test_the_last_chat_in_a_shared_worktree_removes_it(editor: Editor, how: str) -> None:
    project, first, worktree = open_worktree_chat(editor, 1)
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').chats()[1].waiting == 0")
    editor.nvim.command("AcpFork" if how == "fork" else "AcpHandoff other")
    editor.wait_event("AcpSessionReady", count=2)
    [_, second] = chat_ids(editor)
    close_chat(editor, second)
    assert worktree.is_dir() and send(editor, first, "where")["cwd"] == str(worktree)
    close_chat(editor, first)
    wait_worktree_removed(editor, project, worktree)


def test_a_fork_reopened_in_its_worktree_keeps_it_when_the_chat_it_forked_closes(
    editor: Editor,
) -> None:
    """A fork of a worktree chat, closed and reopened from the history while the
    chat it forked still worked in the worktree: closing that chat removed the
    worktree under the reopened fork, whose agent then worked nowhere."""
    _, first, worktree = open_worktree_chat(editor, 1)
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').chats()[1].waiting == 0")
    editor.nvim.command("AcpFork")
    editor.wait_event("AcpSessionReady", count=2)
    [_, fork] = chat_ids(editor)
    send(editor, fork, "where")
    editor.wait("#require('acp').history({query = 'where'}) == 1", what="the fork kept")
    [entry] = editor.lua("return require('acp').history({query = 'where'})")
    close_chat(editor, fork)
    reopened = editor.lua("return require('acp').open({history = ...})", entry["id"])
    editor.wait("require('acp').status().state == 'ready'", what="the fork shown")
    close_chat(editor, first)
    assert send(editor, reopened, "where")["cwd"] == str(worktree)
    send(editor, reopened, "write g.txt again")
    assert (worktree / "g.txt").read_text() == "again\n"


def test_the_winbar_names_a_chats_directory_where_it_is_not_neovims(editor: Editor) -> None:
    project = editor.tmp / "project"  # Neovim's directory
    (project / "sub").mkdir()
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.open_chat()
    assert " · in " not in editor.winbar()
    chat = editor.lua("return require('acp').open({ cwd = ... })", str(project / "sub"))
    editor.wait_event("AcpSessionReady", count=2)
    assert " · ws · in sub" in editor.winbar()
    editor.nvim.command("cd ..")  # shown as it differs from Neovim's directory now
    assert " · ws · in project/sub" in editor.winbar()

    # A narrow window shortens it before it gives way.
    def directory(width: int) -> str | None:
        text = editor.lua(
            "local chat = require('acp.chat.registry').chats[...]"
            " return require('acp.chat.winbar').text(chat, select(2, ...), vim.fn.getcwd())",
            chat,
            width,
        )
        return next((f for f in text.split(" · ") if f.startswith("in ")), None)

    seen = [directory(width) for width in range(120, 0, -1)]
    assert list(dict.fromkeys(seen)) == ["in project/sub", "in p/sub", None]

    editor.nvim.command("cd project/sub")
    assert " · in " not in editor.winbar()


@VERSIONS
def test_open_with_cwd_works_there_and_at_paths_are_its_own(editor: Editor, version: int) -> None:
    a, b = editor.tmp / "a", editor.tmp / "b"
    for where in (a, b):
        where.mkdir()
        (where / "notes.txt").write_text(f"in {where.name}\n")
    (a / "only_a.txt").write_text("a\n")
    editor.setup(
        agents={"ws": editor.fake_agent("workspace"), "blocks": editor.fake_agent("blocks")},
        default_agent="ws",
        protocol_version=version,
    )
    editor.nvim.command(f"cd {b}")
    chat = editor.lua("return require('acp').open({ cwd = ... })", str(a))
    editor.wait_event("AcpSessionReady")
    assert send(editor, chat, "where") == {"cwd": str(a), "roots": None}
    assert editor.lua("return require('acp').status().cwd") == str(a)
    offered(editor, "@only_a.txt")  # listed in the background
    # @path in a prompt is a file of the chat's directory, not Neovim's.
    other = editor.lua("return require('acp').open({ agent = 'blocks', cwd = ... })", str(a))
    editor.wait_event("AcpSessionReady", count=2)
    ended = len(editor.events("AcpTurnEnd"))
    editor.lua("require('acp').send('see @notes.txt')")
    editor.wait_event("AcpTurnEnd", count=ended + 1)
    [line] = [ln for ln in transcript(editor, other) if ln.startswith('[{"type"')]
    link = json.loads(line)[1]
    assert (link["type"], link["uri"]) == ("resource_link", (a / "notes.txt").as_uri())


def test_acpadd_in_a_worktree_chat_mentions_the_worktrees_copy_of_your_file(
    editor: Editor,
) -> None:
    """:AcpAdd in your own file, to point a worktree chat's agent at it, mentioned it
    by its path in your project: the agent, told of a file outside its worktree,
    went to edit yours there, not its own copy."""
    project, first, _worktree = open_worktree_chat(editor, 1)
    editor.nvim.command(f"edit {project / 'f.txt'}")
    editor.nvim.command("AcpAdd")
    editor.nvim.command("2,3AcpAdd")
    input_lines = editor.lua(
        "return vim.api.nvim_buf_get_lines(require('acp.chat.registry').chats[...].input, 0, -1, false)",
        first,
    )
    assert input_lines == ["@f.txt @f.txt:2-3 "]
    # `@` offers your buffer so too, as the worktree's copy (its text is not yours).
    offered(editor, "@f.txt")
    items = editor.lua(
        "return require('acp.chat.complete').items(require('acp.chat.registry').get(), '@')"
    )
    assert [item["menu"] for item in items if item["word"] == "@f.txt"] == ["worktree's copy"]


def test_a_worktree_chat_through_symlinks_names_its_files_as_neovim_does(editor: Editor) -> None:
    """The project opened through a link to it, Neovim's state directory (the
    worktrees' home) reached through another: Neovim names the worktree's files by
    their real path, the chat by the link's. :AcpAdd in the worktree's copy named it
    by that whole path, not as the chat's own file, and its diff opened a buffer the
    review did not know as the copy."""
    project = repository(editor)
    link = editor.tmp / "link"
    link.symlink_to(project)
    state = Path(editor.lua("return vim.fn.stdpath('state')")) / "acp"
    state.mkdir(parents=True, exist_ok=True)
    (editor.tmp / "elsewhere").mkdir()
    (state / "worktrees").symlink_to(editor.tmp / "elsewhere")
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.lua("require('acp').open({ cwd = ..., worktree = true })", str(link))
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    chat, worktree = listed["id"], Path(listed["worktree"])
    send(editor, chat, "write f.txt one\n2\n3\n4\n5")
    [file] = review(editor, chat)
    assert (file["path"], file["source"]) == (str(project / "f.txt"), str(worktree / "f.txt"))
    editor.nvim.command(f"edit {state / 'worktrees' / worktree.name / 'f.txt'}")
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == str(worktree / "f.txt")
    editor.nvim.command("AcpAdd")
    input_lines = editor.lua(
        "return vim.api.nvim_buf_get_lines(require('acp.chat.registry').chats[...].input, 0, -1, false)",
        chat,
    )
    assert input_lines == ["@f.txt "]
    editor.lua("require('acp').accept()")
    editor.wait(f"vim.fn.readfile({str(project / 'f.txt')!r})[1] == 'one'", what="brought in")


def test_a_worktree_chat_kept_and_reopened_goes_on_in_its_worktree(editor: Editor) -> None:
    project, first, worktree = open_worktree_chat(editor, 1)
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, first)
    assert worktree.is_dir()

    chat = editor.reopen_last()
    assert "worktree acp/" in editor.winbar()
    [listed] = editor.lua("return require('acp').chats()")
    assert (listed["cwd"], listed["worktree"], listed["waiting"]) == (str(worktree), str(worktree), 1)
    # The hunk it left waiting is there to decide, before its agent starts.
    [waited] = review(editor, chat)
    assert (waited["path"], waited["source"]) == (str(project / "f.txt"), str(worktree / "f.txt"))
    assert send(editor, chat, "where")["cwd"] == str(worktree)
    send(editor, chat, "write g.txt again")
    assert (worktree / "g.txt").read_text() == "again\n"
    assert (project / "g.txt").read_text() == "g, as you changed it\n"  # your file untouched
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').chats()[1].waiting == 0", what="both brought in")
    assert (project / "f.txt").read_text() == "first\n"
    assert (project / "g.txt").read_text() == "again\n"

    # Nothing waits now: closing it removes the worktree, as the chat that made it would.
    close_chat(editor, chat)
    wait_worktree_removed(editor, project, worktree)


def test_a_worktree_chat_reopened_as_its_close_ends_removes_the_worktree_it_closes_on(
    editor: Editor,
) -> None:
    """Closed with "keep the worktree", then reopened from the history at once, while
    that close still let its agent go (up to its grace to end): the release last to
    come, the first close's, decided with its "keep" (or, had the reopened chat been
    open still, left that word to it), and counted the hunk its stale review listed,
    which the reopened chat had brought in. Closing the reopened chat with nothing
    waiting kept the worktree and its branch. The last close decides, with its
    review, whichever release ends last."""
    project, first, worktree = slow_worktree_chat(editor)
    send(editor, first, "write f.txt agent")
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, first)
    chat = editor.reopen_last()
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').chats()[1].waiting == 0", what="the hunk brought in")
    close_chat(editor, chat)
    wait_worktree_removed(editor, project, worktree)


def test_deleting_a_stored_worktree_chat_names_the_worktree_it_kept(editor: Editor) -> None:
    _, first, worktree = open_worktree_chat(editor, 1)
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, first)
    editor.wait("#require('acp').history() == 1", what="the chat kept")
    entry = editor.lua("return require('acp').history()[1]")
    editor.lua("require('acp').forget(...)", entry["id"])
    editor.wait("#require('acp').history() == 0", what="the chat deleted")
    # Nothing reopens the worktree now, and it may hold work: it stays, and is named.
    said = f"acp: history: the worktrees deleted chats kept stay: {worktree} (branch acp/"
    editor.wait(f"vim.iter(_G.acp_notices):any(function(n) return vim.startswith(n.msg, {said!r}) end)")
    assert worktree.is_dir()


def test_a_worktree_chat_reopened_once_its_worktree_is_gone_says_where_it_works(
    editor: Editor,
) -> None:
    project, first, worktree = open_worktree_chat(editor, 1)
    editor.lua(STUB_SELECT, 2)  # keep the worktree, then remove it yourself
    close_chat(editor, first)
    git(project, "worktree", "remove", "--force", str(worktree))

    chat = editor.reopen_last()
    gone = f"is gone: it goes on in your directory `{project}`"
    # Said before anything is sent: the agent's changes will land in your files.
    assert any(gone in line for line in transcript(editor, chat))
    assert "worktree acp/" not in editor.winbar()
    assert send(editor, chat, "where")["cwd"] == str(project)


@pytest.mark.parametrize("how", ["rm -rf", "git worktree remove", "and its branch"])
def test_a_worktree_chat_whose_worktree_you_removed_closes_without_a_false_word(
    editor: Editor, how: str
) -> None:
    """You removed the chat's worktree yourself (its directory, with git or without,
    its branch too): closing the chat says nothing of work kept there, and takes
    away what git still held of it (the branch with no commit of the agent's, the
    worktree's registration). The hunk that waited there went with it: the close
    asked about it, and said it kept a worktree that was no more."""
    project = repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    chat = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    send(editor, chat, "write f.txt agent")
    editor.lua(STUB_SELECT)  # no answer: a question would keep the chat open
    if how == "rm -rf":
        shutil.rmtree(worktree)
    else:
        git(project, "worktree", "remove", "--force", str(worktree))
    if how == "and its branch":
        git(project, "branch", "-D", f"acp/{chat}")
    editor.lua("require('acp').close()")
    editor.wait("#require('acp').chats() == 0", what="the chat closed")
    editor.wait(
        "vim.system({'git', 'branch', '--list', 'acp/*'}, {text = true}):wait().stdout == ''",
        what="the branch removed",
    )
    listed = git(project, "worktree", "list", "--porcelain")
    assert str(worktree) not in listed, listed
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert not [n for n in notices if "worktree" in n], notices
    assert editor.lua("return _G.asked") == []


def test_a_worktree_chat_stored_by_its_link_path_reopens_by_the_real_one(
    editor: Editor,
) -> None:
    """A worktree chat kept before the worktrees' home was resolved (Neovim's state
    directory behind a link) was stored with the link's paths: reopened, its hunk
    was reviewed by a copy Neovim names by another path, and :AcpAdd in that copy
    named it by its whole path. The stored paths are resolved as they are read."""
    project = repository(editor)
    state = Path(editor.lua("return vim.fn.stdpath('state')")) / "acp"
    state.mkdir(parents=True, exist_ok=True)
    (editor.tmp / "elsewhere").mkdir()
    (state / "worktrees").symlink_to(editor.tmp / "elsewhere")
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    editor.nvim.command("AcpWorktree ws")
    editor.wait_event("AcpSessionReady")
    [listed] = editor.lua("return require('acp').chats()")
    chat, worktree = listed["id"], Path(listed["worktree"])
    send(editor, chat, "write f.txt one\n2\n3\n4\n5")
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    pids = editor.agent_pids()
    close_chat(editor, chat)
    editor.quit()
    assert not wait_gone(pids)  # its history written, before the row is changed here
    linked = state / "worktrees" / worktree.name  # as an older acp.nvim kept it
    store = state / "history.sqlite3"
    with sqlite3.connect(store) as db:
        [(column,)] = db.execute("SELECT worktree FROM chats WHERE worktree IS NOT NULL")
        kept = json.loads(column)
        kept["worktree"]["path"], kept["cwd"] = str(linked), str(linked)
        db.execute("UPDATE chats SET worktree = ?", (json.dumps(kept),))
    db.close()

    other = second_neovim(editor)
    try:
        other.setup(agents={"ws": other.fake_agent("workspace")}, default_agent="ws")
        reopened = other.reopen_last()
        [again] = other.lua("return require('acp').chats()")
        assert (again["worktree"], again["cwd"]) == (str(worktree), str(worktree))
        [waited] = review(other, reopened)
        copy = str(worktree / "f.txt")
        assert (waited["path"], waited["source"]) == (str(project / "f.txt"), copy)
        other.nvim.command(f"edit {linked / 'f.txt'}")
        other.nvim.command("AcpAdd")
        input_lines = other.lua(
            "return vim.api.nvim_buf_get_lines(require('acp.chat.registry').chats[...].input, 0, -1, false)",
            reopened,
        )
        assert input_lines == ["@f.txt "]
    finally:
        other.quit()


def test_a_stored_worktree_chat_does_not_take_a_newer_worktree_of_its_name(
    editor: Editor,
) -> None:
    """Worktrees are named by the chat (`acp/1`, `project-1`), and chat numbers start
    again in each Neovim: reopened after its own worktree went, a chat took the
    worktree a newer chat made under the same name, worked in it, and closing it
    removed it under that chat, with the hunks waiting there."""
    project, first, worktree = open_worktree_chat(editor, 1)
    editor.lua(STUB_SELECT, 1)  # remove the worktree
    close_chat(editor, first)
    branches = f"vim.fn.system({{ 'git', '-C', {str(project)!r}, 'branch', '--list', 'acp/*' }})"
    editor.wait(f"{branches} == ''", what="the worktree and its branch removed")
    editor.quit()
    assert not worktree.exists()

    other = second_neovim(editor)
    try:
        other.setup(agents={"ws": other.fake_agent("workspace")}, default_agent="ws")
        other.nvim.command("AcpWorktree ws")
        other.wait_event("AcpSessionReady")
        [newer] = other.lua("return require('acp').chats()")
        assert newer["worktree"] == str(worktree)  # the same name again
        send(other, newer["id"], "write f.txt second")
        [stored] = [e for e in other.lua("return require('acp').history()")
                    if e["title"] == "write f.txt first"]  # fmt: skip
        reopened = other.lua("return require('acp').open({history = ...})", stored["id"])
        other.wait("require('acp').status().state == 'ready'", what="the stored chat shown")
        gone = f"is gone: it goes on in your directory `{project}`"
        assert any(gone in line for line in transcript(other, reopened))
        listed = {c["id"]: c for c in other.lua("return require('acp').chats()")}
        assert listed[reopened].get("worktree") is None
        assert listed[reopened]["cwd"] == str(project)
        close_chat(other, reopened)
        assert (worktree / "f.txt").read_text() == "second\n"
        assert other.lua("return require('acp').chats()[1].waiting") == 1
    finally:
        other.quit()


def test_a_worktree_chat_reopened_in_another_neovim_leaves_the_worktree_to_the_first(
    editor: Editor,
) -> None:
    """A worktree chat open in one Neovim, reopened from the history in another and
    closed there: the second removed the worktree under the first's running chat."""
    _project, first, worktree = open_worktree_chat(editor, 1)
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').chats()[1].waiting == 0", what="the hunk brought in")
    editor.wait("#require('acp').history() == 1", what="the chat kept")
    [stored] = editor.lua("return require('acp').history()")

    other = second_neovim(editor)
    try:
        other.setup(agents={"ws": other.fake_agent("workspace")}, default_agent="ws")
        reopened = other.lua("return require('acp').open({history = ...})", stored["id"])
        other.wait("require('acp').status().state == 'ready'", what="the stored chat shown")
        assert other.lua("return require('acp').chats()[1].worktree") == str(worktree)
        close_chat(other, reopened)
        kept = f"acp: kept the worktree {worktree} (branch acp/{first}): a chat of another Neovim works in it"
        other.wait(
            f"vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices), {kept!r})",
            what="the notice",
        )
    finally:
        other.quit()
    assert worktree.is_dir()
    assert send(editor, first, "where")["cwd"] == str(worktree)
    # Its own Neovim, the last to work there, removes it as ever.
    close_chat(editor, first)
    editor.wait(f"vim.fn.isdirectory({str(worktree)!r}) == 0", what="the worktree removed")


def test_a_worktree_chats_export_names_its_files_as_its_transcript_does(editor: Editor) -> None:
    """A worktree chat's transcript names the file its agent wrote `f.txt`; its
    export named it by the worktree's whole path (the diff's header, the line under
    it), under a header that named only your directory."""
    project, first, worktree = open_worktree_chat(editor, 1)
    assert "diff --git f.txt f.txt" in editor.transcript_text()
    branch = git(worktree, "branch", "--show-current").strip()

    def exported(options: dict[str, Any]) -> str:
        path = editor.tmp / f"chat{len(options)}.md"
        editor.lua("require('acp').export(...)", str(path), options)
        return path.read_text()

    live = exported({})
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, first)
    editor.wait("#require('acp').history() == 1", what="the chat kept")
    stored = exported({"history": editor.lua("return require('acp').history()[1].id")})
    for markdown in (live, stored):
        assert "diff --git f.txt f.txt\n--- f.txt\n+++ f.txt\n" in markdown
        assert f"- Directory: {project}\n- Worktree: {worktree} (branch {branch})\n" in markdown
        assert "- at f.txt\n" in markdown and "*Review:*\n- `f.txt`: `@@ -1,5 +1 @@` pending" in markdown


def test_quitting_neovim_while_a_worktree_chat_closes_keeps_what_the_close_keeps(
    editor: Editor,
) -> None:
    """Closed with "keep the worktree", then Neovim quit at once: the close lets the
    agent go (up to its grace to end) before the worktree, and the shutdown meanwhile
    found the worktree with no review left to it, so holding no work, and removed it
    with the hunk the user had kept. The shutdown waits for the closes under way."""
    project, chat, worktree = slow_worktree_chat(editor)
    send(editor, chat, "write f.txt agent")
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    pids = editor.agent_pids()
    close_chat(editor, chat)
    editor.quit()
    assert not wait_gone(pids)  # the Python side ended, after its shutdown
    assert (worktree / "f.txt").read_text() == "agent\n"
    assert git(project, "branch", "--list", "--format=%(refname:short)", "acp/*").split() == [
        f"acp/{chat}"
    ]


def test_a_worktree_chat_stored_with_relative_paths_reopens_in_its_worktree(
    editor: Editor,
) -> None:
    """An older acp.nvim, with a relative state directory, kept a worktree's paths as
    it gave them to git, which ran in the project and so made the worktree there.
    Reopened from another directory, the chat took them from the host's directory:
    it said its worktree was gone (the hunk waiting there out of reach), and went
    on in your own files. Relative stored paths are the project's."""
    project, first, worktree = open_worktree_chat(editor, 1)
    store = Path(editor.lua("return vim.fn.stdpath('state')")) / "acp" / "history.sqlite3"
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    pids = editor.agent_pids()
    close_chat(editor, first)
    editor.quit()
    assert not wait_gone(pids)  # its history written, before the row is changed here
    with sqlite3.connect(store) as db:
        [(column,)] = db.execute("SELECT worktree FROM chats WHERE worktree IS NOT NULL")
        kept = json.loads(column)
        relative = os.path.relpath(worktree, project)  # as git took it, in the project
        kept["worktree"]["path"], kept["cwd"] = relative, relative
        db.execute("UPDATE chats SET worktree = ?", (json.dumps(kept),))
    db.close()

    other = second_neovim(editor)
    try:
        other.nvim.command(f"cd {editor.tmp}")  # the history is reopened from anywhere
        other.setup(agents={"ws": other.fake_agent("workspace")}, default_agent="ws")
        reopened = other.reopen_last()
        [again] = other.lua("return require('acp').chats()")
        assert (again["worktree"], again["cwd"]) == (str(worktree), str(worktree))
        [waited] = review(other, reopened)
        assert (waited["path"], waited["source"]) == (str(project / "f.txt"), str(worktree / "f.txt"))
        assert not [line for line in transcript(other, reopened) if "is gone" in line]
    finally:
        other.quit()


def test_closing_a_worktree_chat_whose_execute_bits_git_could_not_check_asks(
    editor: Editor,
) -> None:
    """Git took longer than its limit looking for the execute bits the agent changed
    (a slow disk, a busy machine): the close took that for "none changed", asked
    nothing, and removed the worktree with the agent's `chmod +x` in it. Not knowing
    is not nothing: the close asks, saying it could not check."""
    project = repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    chat = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    (worktree / "f.txt").chmod(0o755)  # as the agent's shell does, in its worktree
    send(editor, chat, "where")
    # Git slower than its limit to list the worktree's changes: an index refresh
    # that waits on a file-system monitor (as a busy one does).
    slow = editor.tmp / "slow-monitor"
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(0o755)
    git(project, "config", "core.fsmonitor", str(slow))
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    editor.lua("require('acp').close()")
    editor.wait("#require('acp').chats() == 0", what="the chat closed", timeout=30)
    [asked] = editor.lua("return _G.asked")
    assert asked["prompt"] == (
        "the execute bits could not be checked (git diff took longer than 2 s)"
        f" in the worktree of ws #{chat}"
    )
    kept = f"acp: kept the worktree {worktree} (branch acp/{chat})"
    notices = "vim.tbl_map(function(n) return n.msg end, _G.acp_notices)"
    editor.wait(f"vim.tbl_contains({notices}, {kept!r})", what="the worktree kept")
    assert (worktree / "f.txt").stat().st_mode & 0o100


@pytest.mark.parametrize("how", ["rm -rf", "git worktree remove"])
def test_a_prompt_to_a_chat_whose_worktree_you_removed_says_so_and_stays_yours(
    editor: Editor, how: str
) -> None:
    """You removed the worktree of a running chat outside Neovim: the next prompt
    went to an agent working nowhere, whose write failed with "No such file or
    directory" (or whose process could not start a command at all). The prompt
    stays in the input, and a notice says why and how to go on."""
    project = repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    chat = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    send(editor, chat, "where")
    if how == "rm -rf":
        shutil.rmtree(worktree)
    else:
        git(project, "worktree", "remove", "--force", str(worktree))
    editor.lua(
        "local chats = require('acp.chat.registry').chats; require('acp.chat').send(chats[...], 'write g.txt again')",
        chat,
    )
    told_gone(editor, project, worktree, chat, "cannot send", turns=1)


def told_gone(
    editor: Editor, project: Path, worktree: Path, chat: int, what: str, turns: int
) -> None:
    """The notice that ``chat``'s ``worktree`` is gone came (after ``what``), 'write g.txt
    again' is back in its input, and no more than ``turns`` turns started (g.txt is
    yours as it was)."""
    gone = (
        f"acp: {what}: the worktree of this chat ({worktree}, branch acp/{chat}) is gone,"
        " removed outside Neovim: close the chat, then reopen it from the history to go on"
        " in your own directory"
    )
    notices = "vim.tbl_map(function(n) return n.msg end, _G.acp_notices)"
    editor.wait(f"vim.tbl_contains({notices}, {gone!r})", what="the notice")
    input_buf = editor.lua("return require('acp').status().input_buf")
    editor.wait(
        f"vim.api.nvim_buf_get_lines({input_buf}, 0, -1, false)[1] == 'write g.txt again'",
        what="the prompt back in the input",
    )
    assert len(editor.events("AcpTurnStart")) == turns
    assert (project / "g.txt").read_text() == "g, as you changed it\n"


def test_closing_the_last_chat_of_a_worktree_while_the_first_closes_keeps_your_word(
    editor: Editor,
) -> None:
    """A hand-over's chat closed right after the chat it took over from, whose agent
    was still ending (its grace before a SIGKILL): the hand-over's close asked about
    its hunk and the user said to keep the worktree, but it let the worktree go to
    the first chat's close, still under way, which had no word and no hunk of its
    own: it removed the worktree, with the hunk the user had just kept."""
    project, first, worktree = slow_worktree_chat(editor, other=editor.fake_agent("workspace"))
    send(editor, first, "where")
    editor.nvim.command("AcpHandoff other")
    editor.wait_event("AcpSessionReady", count=2)
    [_, second] = chat_ids(editor)
    send(editor, second, "write g.txt second")
    registry = "require('acp.chat.registry')"
    title = editor.lua(f"return {registry}.title({registry}.chats[...])", second)
    editor.lua(STUB_SELECT, 2)  # keep the worktree
    close_chat(editor, first)  # asks nothing: the hand-over works there
    close_chat(editor, second)  # at once: the first's agent is still ending
    assert [a["prompt"] for a in editor.lua("return _G.asked")] == [
        f"1 hunk waits in the worktree of {title}"
    ]
    kept = f"acp: kept the worktree {worktree} (branch acp/{first})"
    notices = "vim.tbl_map(function(n) return n.msg end, _G.acp_notices)"
    editor.wait(f"vim.tbl_contains({notices}, {kept!r})", what="the worktree kept", timeout=30)
    assert (worktree / "g.txt").read_text() == "second\n"
    assert (project / "g.txt").read_text() == "g, as you changed it\n"


def test_prompts_queued_before_you_removed_the_worktree_come_back_and_its_hunks_count_none(
    editor: Editor,
) -> None:
    """You removed a worktree outside Neovim while its chat's turn ran, a prompt queued
    behind it: at the turn's end the queue went to the agent working nowhere, and the
    chat still counted the hunk that went with the worktree (:AcpChats, acp.chats()).
    The queued prompts come back to the input with the notice a prompt sent then
    gets; the chat names its worktree gone and counts no hunk waiting there. The
    turn's end found the worktree's files gone, and listed each as the agent's
    deletion, which accepting would have brought into your files."""
    project = repository(editor)
    editor.setup(agents={"ws": editor.fake_agent("workspace")}, default_agent="ws")
    chat = editor.lua("return require('acp').open({ worktree = true })")
    editor.wait_event("AcpSessionReady")
    worktree = Path(editor.lua("return require('acp').chats()[1].worktree"))
    send(editor, chat, "write h.txt new")
    editor.wait("require('acp').chats()[1].waiting == 1", what="the hunk counted")
    release = editor.tmp / "release"
    os.mkfifo(release)
    editor.lua(
        "local chats = require('acp.chat.registry').chats; local chat = chats[...]"
        "; require('acp.chat').send(chat, select(2, ...)); require('acp.chat').send(chat, 'write g.txt again')",
        chat,
        f"wait {release}",
    )
    editor.wait("require('acp').status().queued == 1")
    git(project, "worktree", "remove", "--force", str(worktree))
    with open(release, "wb"):
        pass  # the turn ends
    told_gone(editor, project, worktree, chat, "cannot send the queued prompts", turns=2)
    assert editor.lua("return require('acp').chats()[1].waiting") == 0
    # The files gone with it are no deletions of the agent's, to accept into yours.
    assert len(editor.events("AcpChangesRecorded")) == 1
    deleted = [f["path"] for f in editor.lua("return require('acp').changes()") if f.get("deleted")]
    assert deleted == []
    editor.lua(
        "vim.ui.select = function(items, opts) _G.offered = vim.tbl_map(opts.format_item, items) end"
    )
    editor.nvim.command("AcpChats")
    [entry] = editor.lua("return _G.offered")
    assert f"worktree acp/{chat} gone" in entry and "waiting" not in entry
    assert f"worktree acp/{chat} gone" in editor.winbar()
