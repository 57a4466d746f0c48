"""Sending like a chat (send key, history, :AcpEdit) and several chats at once
(:AcpChats, acp.chats(), another agent's chat beside the first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.nvim.conftest import Editor

# vim.ui.select and vim.ui.input answer from _G.answers, in order (an index, or the
# text typed); what they were asked is kept in _G.asked.
STUB_UI = """
_G.asked, _G.answers = {}, {...}
vim.ui.select = function(items, opts, on_choice)
  local format = opts.format_item or tostring
  table.insert(_G.asked, {prompt = opts.prompt, items = vim.tbl_map(format, items)})
  local pick = table.remove(_G.answers, 1)
  on_choice(items[pick], pick)
end
vim.ui.input = function(opts, on_confirm)
  table.insert(_G.asked, {prompt = opts.prompt, default = opts.default})
  on_confirm(table.remove(_G.answers, 1))
end
"""


def input_lines(editor: Editor) -> list[str]:
    return editor.lua("return vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1, false)")  # type: ignore[no-any-return]


def wait_input(editor: Editor, lines: list[str]) -> None:
    editor.lua("_G.want_input = {...}", *lines)
    editor.wait(
        "vim.deep_equal(vim.api.nvim_buf_get_lines(require('acp').status().input_buf, 0, -1,"
        " false), _G.want_input)",
        what=f"input {lines}",
    )


def test_send_key_in_insert_mode_and_history_kept_across_chats(editor: Editor) -> None:
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    assert editor.lua("return vim.api.nvim_get_current_buf()") == (
        editor.lua("return require('acp').status().input_buf")
    )
    editor.nvim.input("ifirst<C-s>")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.input("second<C-s>")
    editor.wait_event("AcpTurnEnd", count=2)
    text = editor.transcript_text()
    assert "echo: first" in text and "echo: second" in text
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "i"
    assert input_lines(editor) == [""]

    # What was typed but not sent comes back past the newest prompt.
    editor.nvim.input("draft<Up>")
    wait_input(editor, ["second"])
    editor.nvim.input("<Up>")
    wait_input(editor, ["first"])
    editor.nvim.input("<Up>")  # nothing older: stays
    editor.nvim.input("<Down>")
    wait_input(editor, ["second"])
    editor.nvim.input("<Down>")
    wait_input(editor, ["draft"])

    # Kept in stdpath("state"): a new chat (as after a restart) starts with it. The
    # file is written off Neovim's loop, a moment after the send: wait for it.
    path = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.json"
    on_disk = f"vim.fn.filereadable('{path}') == 1 and vim.fn.readfile('{path}')[1]:find('second')"
    editor.wait(f"{on_disk} ~= nil", what="the prompts on disk")
    stored = json.loads(path.read_text())
    assert list(stored.values()) == [["first", "second"]]
    editor.nvim.input("<Esc>")
    editor.nvim.command("AcpChat!")
    editor.wait_event("AcpSessionReady", count=2)
    editor.nvim.input("i<Up>")
    wait_input(editor, ["second"])


def test_a_prompt_typed_in_a_chat_that_closes_is_kept(editor: Editor) -> None:
    """:AcpClose took what the input held with it: a long prompt, gone."""
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.nvim.input("ia long prompt<CR>on two lines<Esc>")
    wait_input(editor, ["a long prompt", "on two lines"])
    editor.nvim.command("AcpClose")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        "acp: chat #1's unsent prompt is in the prompt history (<Up> in the input)"
    )
    editor.open_chat()
    editor.nvim.input("i<Up>")
    wait_input(editor, ["a long prompt", "on two lines"])
    # Neovim quits: kept too.
    editor.nvim.input("<Esc>")
    editor.lua("vim.api.nvim_buf_set_lines(require('acp').status().input_buf, 0, -1, false, {'still typing'})")
    assert quit_with(editor, "") == [["a long prompt\non two lines", "still typing"]]


def quit_with(editor: Editor, lua: str) -> list[list[str]]:
    """Run ``lua`` and quit Neovim in the same turn of its loop; the prompt history
    on disk then, per agent and directory."""
    editor.closed = True
    try:
        editor.lua(f"{lua} vim.cmd('qa!')")
    except (OSError, EOFError):
        pass  # the channel closes under the request
    editor.nvim.close()
    stored = json.loads((editor.tmp / "xdg-state" / "nvim" / "acp" / "history.json").read_text())
    return list(stored.values())


def test_a_prompt_sent_as_neovim_quits_is_kept(editor: Editor) -> None:
    """The prompt history is written off the loop; quitting writes what is left."""
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.lua("require('acp').send('first')")
    editor.wait_event("AcpTurnEnd")
    # In the same turn of the loop: the prompt's write had not begun.
    assert quit_with(editor, "require('acp').send('last words')") == [["first", "last words"]]


def test_a_prompt_is_merged_into_what_the_file_holds(editor: Editor) -> None:
    """The file is read again at each write (off Neovim's loop): another agent's or
    project's prompts stay, and this chat's keep the last 100."""
    path = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    cwd = editor.lua("return require('acp').status().cwd")
    mine = f"fake\t{cwd}"
    older = [f"old {i}" for i in range(100)]
    path.write_text(json.dumps({"other\t/elsewhere": ["theirs"], mine: older}))
    editor.lua("require('acp').send('new')")
    editor.wait_event("AcpTurnEnd")
    editor.lua("require('acp.chat.prompt_history').flush()")  # its write is done
    assert json.loads(path.read_text()) == {"other\t/elsewhere": ["theirs"], mine: [*older[1:], "new"]}


def test_a_chat_reads_its_history_in_a_thread_as_it_opens(editor: Editor) -> None:
    """Before its first send or <Up>, which then need not decode the file on the loop."""
    path = editor.tmp / "xdg-state" / "nvim" / "acp" / "history.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    cwd = editor.lua("return vim.fn.getcwd()")
    path.write_text(json.dumps({f"fake\t{cwd}": ["earlier"], "other\t/elsewhere": ["theirs"]}))
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    history = "require('acp.chat.registry').chats[require('acp').status().chat].history"
    editor.wait(f"{history} ~= nil", what="the history read")
    assert editor.lua(f"return {history}.entries") == ["earlier"]
    editor.nvim.input("i<Up>")
    wait_input(editor, ["earlier"])


def test_history_keys_move_as_usual_inside_a_multiline_input(editor: Editor) -> None:
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.lua("require('acp').send('sent')")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.input("ione<CR>two<Up>")
    editor.wait("vim.api.nvim_win_get_cursor(0)[1] == 1", what="cursor on the first line")
    assert input_lines(editor) == ["one", "two"]
    editor.nvim.input("<Up>")
    wait_input(editor, ["sent"])


def test_acpedit_resends_from_before_the_last_turn(editor: Editor) -> None:
    project = editor.tmp / "project"
    a = project / "a.txt"
    a.write_text("a0\n")
    editor.setup(agents={"fake": editor.fake_agent("files")}, default_agent="fake")
    editor.open_chat()

    def steps(text: str) -> str:
        return json.dumps([{"disk": {"path": str(a), "content": text}}])

    editor.lua("require('acp').send(...)", steps("a1\n"))
    editor.wait_event("AcpTurnEnd")
    assert a.read_text() == "a1\n"

    editor.nvim.command("AcpEdit")
    wait_input(editor, [steps("a1\n")])
    editor.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {...})", steps("a2\n"))
    editor.nvim.input("<CR>")
    editor.wait_event("AcpTurnEnd", count=2)
    # Sent from before the turn it edits: the files and the conversation went back.
    text = editor.transcript_text()
    assert "Rewound to before turn 1, the conversation and the files (`a.txt`)." in text
    assert text.count("## You") == 1 and '"a1\\n"' not in text
    assert a.read_text() == "a2\n"
    # The resent turn's baseline is the text before the first answer.
    files = editor.lua("return require('acp').changes()")
    assert [(f["path"], f["turn"]) for f in files] == [(str(a), 2)]
    editor.lua("require('acp').reject()")
    editor.wait(f"vim.fn.readfile({str(a)!r})[1] == 'a0'", what="a.txt back to a0")


def test_an_earlier_prompt_put_back_keeps_what_you_were_typing(editor: Editor) -> None:
    """:AcpEdit (and <Up>) put an earlier prompt in the input over what you were
    typing: that text waits past the newest prompt (<Down>), and comes back once the
    earlier prompt is sent."""
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.lua("require('acp').send('first')")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.input("ia draft<Esc>")
    wait_input(editor, ["a draft"])
    editor.nvim.command("AcpEdit")
    wait_input(editor, ["first"])
    editor.nvim.input("A<Down>")  # past the newest prompt: the draft
    wait_input(editor, ["a draft"])
    editor.nvim.input("<Esc>")
    editor.nvim.command("AcpEdit")
    wait_input(editor, ["first"])
    editor.nvim.input("A again<Esc><CR>")
    editor.wait_event("AcpTurnEnd", count=2)
    assert "echo: first again" in editor.transcript_text()
    wait_input(editor, ["a draft"])
    # The same from <Up>: the old prompt sent, the draft back.
    editor.nvim.input("ccanother draft<Up><Esc><CR>")
    editor.wait_event("AcpTurnEnd", count=3)
    wait_input(editor, ["another draft"])


def test_acpedit_without_a_prompt_says_so(editor: Editor) -> None:
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.nvim.command("AcpEdit")
    editor.wait(
        "vim.iter(_G.acp_notices):any(function(n)"
        " return n.msg == 'acp: no prompt was sent in this chat' end)"
    )


def shown(editor: Editor, chat: int) -> bool:
    return bool(
        editor.lua(
            "local c = require('acp.chat.registry').chats[...]; return #vim.fn.win_findbuf(c.transcript) > 0",
            chat,
        )
    )


def test_two_agents_chats_side_by_side_and_the_picker(editor: Editor, tmp_path: Path) -> None:
    editor.setup(
        agents={"one": editor.fake_agent("echo"), "two": editor.fake_agent("echo")},
        default_agent="one",
    )
    editor.lua("vim.o.columns = 200")
    first = editor.open_chat()["chat"]
    second = editor.open_chat("two")["chat"]
    assert second != first
    assert shown(editor, first) and shown(editor, second)  # beside each other
    editor.lua("require('acp').send('to two')")
    editor.wait_event("AcpTurnEnd")
    assert "echo: to two" in editor.transcript_text()
    chats = editor.lua("return require('acp').chats()")
    cwd = str(editor.tmp / "project")
    here = {"cwd": cwd, "waiting": 0}  # and no worktree
    assert all(c.pop("active_at") > 0 for c in chats)
    assert chats == [
        {"id": first, "agent": "one", "title": "one #1", "state": "ready", "permissions": 0,
         "turns": 0, **here},
        {"id": second, "agent": "two", "title": "two #2", "state": "ready", "permissions": 0,
         "turns": 1, **here},
    ]  # fmt: skip

    # Rename the first chat, then switch to it from the picker: it shows the agent,
    # the title, the directory, how long ago it was active, its turns and state.
    editor.lua(STUB_UI, 1, 3, "work", 1, 1)
    editor.nvim.command("AcpChats")
    asked = editor.lua("return _G.asked")
    assert asked[0]["prompt"] == "Chats"
    items = [item.split(" · ") for item in asked[0]["items"]]
    assert [i[:3] + i[4:] for i in items] == [
        ["one", "one #1", cwd, "0 turns", "ready"],
        ["two", "two #2", cwd, "1 turn", "ready"],
    ]
    assert all(i[3].endswith(" ago") or i[3] == "just now" for i in items)
    assert asked[1]["items"] == ["switch", "close", "rename"]
    assert asked[2] == {"prompt": "Name: ", "default": "one #1"}
    editor.nvim.command("AcpChats")
    assert editor.lua("return _G.asked")[3]["items"][0].split(" · ")[:2] == ["one", "work"]
    assert editor.lua("return require('acp').status().chat") == first
    assert editor.lua("return vim.api.nvim_get_current_buf()") == (
        editor.lua("return require('acp').status().input_buf")
    )
    assert "work" in editor.winbar()

    # Close the second one from the picker.
    editor.lua(STUB_UI, 2, 2)
    editor.nvim.command("AcpChats")
    assert [c["id"] for c in editor.lua("return require('acp').chats()")] == [first]


@pytest.mark.parametrize("version", [1, 2])
def test_a_hidden_chats_permission_counts_in_the_picker_and_notifies_its_name(
    editor: Editor, version: int
) -> None:
    editor.setup(
        agents={"asker": editor.fake_agent("permission"), "two": editor.fake_agent("echo")},
        default_agent="asker",
        protocol_version=version,
    )
    first = editor.open_chat()["chat"]
    editor.lua(STUB_UI, 1, 3, "mine")
    editor.nvim.command("AcpChats")  # rename the first
    editor.nvim.command("AcpToggle")  # hide it
    editor.wait(f"#vim.fn.win_findbuf(require('acp.chat.registry').chats[{first}].transcript) == 0")
    editor.open_chat("two")
    editor.lua("require('acp.chat').send(require('acp.chat.registry').chats[...], 'read')", first)
    editor.wait(
        "vim.iter(_G.acp_notices):any(function(n) return n.msg:find('asks permission', 1, true) end)"
    )
    notice = editor.lua("return _G.acp_notices[#_G.acp_notices].msg")
    assert notice.startswith('acp: asker in "mine" asks permission: ')
    chats = editor.lua("return require('acp').chats()")
    assert chats[0]["title"] == "mine" and chats[0]["permissions"] == 1
    editor.lua(STUB_UI)
    editor.nvim.command("AcpChats")
    assert editor.lua("return _G.asked")[0]["items"][0].endswith(" · 1 permission pending")


def test_without_room_beside_another_agents_chat_takes_the_windows(editor: Editor) -> None:
    editor.setup(
        agents={"one": editor.fake_agent("echo"), "two": editor.fake_agent("echo")},
        default_agent="one",
    )
    assert editor.lua("return vim.o.columns") == 80  # room for one chat of 40 columns
    first = editor.open_chat()["chat"]
    second = editor.open_chat("two")["chat"]
    assert shown(editor, second) and not shown(editor, first)
    assert [c["agent"] for c in editor.lua("return require('acp').chats()")] == ["one", "two"]


def test_a_third_agents_chat_beside_two_takes_a_window_without_squeezing_one(
    editor: Editor,
) -> None:
    """Room beside one chat is not room beside two: the third takes the windows of
    the chat it replaces (it took the first's window down to one column)."""
    agents = {name: editor.fake_agent("echo") for name in ("one", "two", "three")}
    editor.setup(agents=agents, default_agent="one", chat={"width": 60})
    editor.lua("vim.o.columns = 150")  # room for two chats of 60 columns and the rest
    first = editor.open_chat()["chat"]
    second = editor.open_chat("two")["chat"]
    assert shown(editor, first) and shown(editor, second)
    third = editor.open_chat("three")["chat"]
    assert shown(editor, third) and [shown(editor, first), shown(editor, second)].count(True) == 1
    widths = editor.lua(
        "return vim.tbl_map(vim.api.nvim_win_get_width, vim.api.nvim_tabpage_list_wins(0))"
    )
    assert min(widths) >= 20, widths


def test_switching_to_a_hidden_chat_from_the_picker_shows_it_in_the_windows(
    editor: Editor,
) -> None:
    editor.setup(
        agents={"one": editor.fake_agent("echo"), "two": editor.fake_agent("echo")},
        default_agent="one",
    )
    first = editor.open_chat()["chat"]
    second = editor.open_chat("two")["chat"]  # no room beside: the first is hidden
    windows = editor.lua("return vim.api.nvim_tabpage_list_wins(0)")
    editor.lua(STUB_UI, 1, 1)  # the first chat, "switch"
    editor.nvim.command("AcpChats")
    assert shown(editor, first) and not shown(editor, second)
    # In the windows the second chat had, with the cursor in the first's input.
    assert editor.lua("return vim.api.nvim_tabpage_list_wins(0)") == windows
    assert editor.lua("return require('acp').status().chat") == first
    assert editor.lua("return vim.api.nvim_get_current_buf()") == (
        editor.lua("return require('acp.chat.registry').chats[...].input", first)
    )
    editor.lua("require('acp').send('back to one')")
    editor.wait_event("AcpTurnEnd")
    assert "echo: back to one" in editor.transcript_text()


def test_a_chat_is_named_by_its_configured_agent(editor: Editor) -> None:
    from acp_nvim.client.config import builtin_agents

    demo = builtin_agents()["demo"]
    editor.setup(agents={"demo2": {"cmd": demo.cmd, "env": demo.env}})
    status = editor.open_chat("demo2")
    assert status["agent_title"] == "Demo agent"  # the agent's own name for itself
    [chat] = editor.lua("return require('acp').chats()")
    assert chat["title"] == "demo2 #1"
    winbar = editor.winbar()
    assert "demo2" in winbar and "Demo agent" not in winbar


def test_acpchat_after_closing_the_shown_chat_shows_a_hidden_one(editor: Editor) -> None:
    editor.setup()
    first = editor.open_chat()["chat"]
    editor.nvim.command("AcpChat!")  # a new session takes the windows; the first hides
    editor.wait_event("AcpSessionReady", count=2)
    editor.nvim.command("AcpClose")
    editor.nvim.command("AcpChat")
    assert editor.lua("return require('acp').status().chat") == first
    assert shown(editor, first)
    assert len(editor.events("AcpSessionReady")) == 2  # no new session


def test_switching_to_a_shown_chat_keeps_the_sizes_you_gave(editor: Editor) -> None:
    """:AcpChats → switch to a chat already shown sized it to its share again, which
    took the columns from the chat beside it, and undid a width the user had set."""
    editor.setup(
        agents={"one": editor.fake_agent("echo"), "two": editor.fake_agent("echo")},
        default_agent="one",
    )
    editor.lua("vim.o.columns = 200")
    first = editor.open_chat()["chat"]
    editor.open_chat("two")
    transcript = editor.lua("return vim.fn.win_findbuf(require('acp.chat.registry').chats[...].transcript)[1]", first)
    editor.lua("vim.api.nvim_win_set_width(..., 50)", transcript)
    sizes = "return vim.tbl_map(function(w) return {vim.api.nvim_win_get_width(w), vim.api.nvim_win_get_height(w)} end, vim.api.nvim_tabpage_list_wins(0))"
    before = editor.lua(sizes)
    editor.lua(STUB_UI, 1, 1)  # the first chat, "switch"
    editor.nvim.command("AcpChats")
    assert editor.lua("return require('acp').status().chat") == first
    assert editor.lua("return vim.api.nvim_get_current_buf()") == (
        editor.lua("return require('acp.chat.registry').chats[...].input", first)
    )
    assert editor.lua(sizes) == before
