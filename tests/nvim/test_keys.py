"""Every key the plugin maps comes from the `keys` option (issue 28.2): per table, a
remapped key works and the default lhs is free again; the older option names
still work; the chat's help key, motions and change summary (issue 30.10); no two
default keys meet in one buffer."""

from __future__ import annotations

from pathlib import Path

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen
from tests.nvim.test_files import run
from tests.nvim.test_permissions import PROMPT, wait_text


def mapped(editor: Editor, buf: int, lhs: str, mode: str = "n") -> bool:
    """Whether ``lhs`` has a buffer-local mapping in ``buf``."""
    return bool(
        editor.lua(
            "local buf, lhs, mode = ...;"
            " return vim.api.nvim_buf_call(buf, function()"
            "   return vim.fn.maparg(lhs, mode, false, true).buffer == 1 end)",
            buf,
            lhs,
            mode,
        )
    )


def go(editor: Editor, buf: int) -> None:
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(...)[1])", buf)


def test_chat_keys_remapped(editor: Editor) -> None:
    editor.setup(keys={"chat": {"hide": "gq", "cancel": False}})
    status = editor.open_chat()
    for buf in (status["transcript_buf"], status["input_buf"]):
        assert mapped(editor, buf, "gq") and not mapped(editor, buf, "q")
        assert not mapped(editor, buf, "<C-C>")  # turned off
    go(editor, status["transcript_buf"])
    editor.nvim.input("gq")
    editor.wait(
        "#vim.fn.win_findbuf(require('acp').status().transcript_buf) == 0", what="gq to hide"
    )


def test_input_keys_remapped_and_the_older_names(editor: Editor) -> None:
    editor.setup(
        agents={"fake": editor.fake_agent("echo")},
        default_agent="fake",
        keys={"input": {"send": "gs"}},
        chat={"send_key": "<C-x>"},  # the older name of keys.input.send_insert
    )
    status = editor.open_chat()
    buf = status["input_buf"]
    assert mapped(editor, buf, "gs") and not mapped(editor, buf, "<CR>")
    assert mapped(editor, buf, "<C-X>", "i") and not mapped(editor, buf, "<C-S>", "i")
    editor.nvim.input("ifirst<Esc>gs")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.input("isecond<C-x>")
    editor.wait_event("AcpTurnEnd", count=2)
    text = editor.transcript_text()
    assert "echo: first" in text and "echo: second" in text


def test_permission_keys_remapped(editor: Editor) -> None:
    editor.setup(
        agents={"fake": editor.fake_agent("permission")},
        keys={"permission": {"allow_once": "y", "buffer_reject_once": "<C-n>"}},
    )
    status = editor.open_chat("fake")
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    transcript, chat_input = status["transcript_buf"], status["input_buf"]
    assert mapped(editor, transcript, "y") and not mapped(editor, transcript, "a")
    assert "- `y` Allow" in editor.transcript_text()  # the prompt names the key it takes
    assert mapped(editor, chat_input, "<C-N>") and not mapped(editor, chat_input, "\\n")
    go(editor, transcript)
    editor.nvim.input("y")
    editor.wait_event("AcpTurnEnd")
    assert "permission: selected proceed_once" in editor.transcript_text()
    assert not mapped(editor, transcript, "y")  # gone with the prompt


def test_review_keys_remapped_and_hunk_keys_the_older_name(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    editor.nvim.command(f"edit {path}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.setup(
        agents={"files": editor.fake_agent("files")},
        keys={"review": {"accept": "x", "hunk_reject": "gR"}},
        hunk_keys={"accept": "gA"},  # the older name of keys.review.hunk_accept
    )
    editor.open_chat("files")
    run(editor, [{"write": {"path": str(path), "content": "one\n2\nthree\n"}}])
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 0, 1, false)[1] == 'one'")
    assert mapped(editor, buf, "gA") and mapped(editor, buf, "gR")
    assert not mapped(editor, buf, "\\a") and not mapped(editor, buf, "\\r")
    go(editor, buf)
    editor.lua("vim.api.nvim_win_set_cursor(0, {3, 0})")
    editor.nvim.input("gR")
    editor.wait("require('acp').changes()[1].hunks[2].status == 'rejected'")
    editor.nvim.command("AcpReview")
    review = editor.lua("return vim.api.nvim_get_current_buf()")
    assert mapped(editor, review, "x") and not mapped(editor, review, "a")
    heading = editor.nvim.current.buffer[0]
    assert heading.startswith("acp review · 1 open hunk · x/r accept/reject")
    editor.lua("vim.fn.cursor(1, 1); vim.fn.search('^  @@')")
    editor.nvim.input("x")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")


def test_queue_keys_remapped(editor: Editor) -> None:
    editor.setup(
        agents={"hold": editor.fake_agent("hold")},
        default_agent="hold",
        keys={"queue": {"edit_last": "gE"}},
    )
    status = editor.open_chat()
    editor.lua("require('acp').send('hold')")
    editor.wait("require('acp').status().state == 'running'")
    editor.lua("require('acp').send('second prompt')")
    editor.wait("require('acp').status().queued == 1")
    buf = status["input_buf"]
    assert mapped(editor, buf, "gE") and not mapped(editor, buf, "\\e")
    go(editor, buf)
    editor.nvim.input("gE")
    editor.wait("require('acp').status().queued == 0")
    assert editor.nvim.buffers[buf][:] == ["second prompt"]


def test_help_lists_the_chats_keys(editor: Editor) -> None:
    editor.setup(keys={"chat": {"help": "g?"}})
    status = editor.open_chat()
    go(editor, status["transcript_buf"])
    editor.nvim.input("g?")
    editor.wait("vim.iter(vim.api.nvim_list_wins()):any(function(w)"
                " return vim.api.nvim_win_get_config(w).relative ~= '' end)")  # fmt: skip
    text = editor.lua(
        """for _, w in ipairs(vim.api.nvim_list_wins()) do
             if vim.api.nvim_win_get_config(w).relative ~= '' then
               return table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false), '\\n')
             end
           end"""
    )
    assert "Transcript:" in text and "Input:" in text
    assert "  g?       show the chat's keys" in text
    assert "  <C-S>    send (Insert mode)" in text
    # The transcript is read-only: its keys are Normal mode's, <C-C> listed once, there;
    # the input's Insert-mode one under the input.
    transcript, input_keys = text.split("\nInput:\n")
    assert "(Insert mode)" not in transcript
    assert "  <C-C>    cancel the turn (Insert mode)" in input_keys
    # Whole, however small the chat's window, with the cursor in it: q closes it,
    # not the chat.
    float_win = editor.lua("return vim.api.nvim_get_current_win()")
    assert editor.lua("return vim.api.nvim_win_get_config(0).relative") == "editor"
    rows = editor.lua("return vim.o.lines - vim.o.cmdheight")
    assert editor.lua("return vim.api.nvim_win_get_height(0)") == min(len(text.split("\n")), rows - 2)
    editor.nvim.input("q")
    editor.wait(f"not vim.api.nvim_win_is_valid({float_win})", what="the help closed")
    assert editor.lua("return vim.api.nvim_get_current_buf()") == status["transcript_buf"]
    assert len(editor.lua("return vim.fn.win_findbuf(...)", status["input_buf"])) == 1
    # <Esc> closes it too, and so does leaving it.
    for leave in ("<Esc>", "<C-w>p"):
        editor.nvim.input("g?")
        editor.wait("vim.api.nvim_win_get_config(0).relative == 'editor'", what="the help")
        float_win = editor.lua("return vim.api.nvim_get_current_win()")
        editor.nvim.input(leave)
        editor.wait(f"not vim.api.nvim_win_is_valid({float_win})", what=f"{leave} closing the help")
        assert editor.lua("return vim.api.nvim_get_current_buf()") == status["transcript_buf"]


def test_motions_between_prompts_and_tool_calls(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.txt"
    editor.setup(agents={"files": editor.fake_agent("files")})
    status = editor.open_chat("files")
    run(editor, [{"disk": {"path": str(path), "content": "1\n"}}])
    # A step before it: the fake names a tool call by its step, and a new one is wanted.
    steps = [{"read": {"path": str(path)}}, {"disk": {"path": str(path), "content": "2\n"}}]
    run(editor, steps, turn=2)
    lines = editor.transcript()
    prompts = [i + 1 for i, line in enumerate(lines) if line == "## You"]
    tools = [i + 1 for i, line in enumerate(lines) if line.startswith("#### ")]
    assert len(prompts) == 2 and len(tools) == 2
    go(editor, status["transcript_buf"])
    for keys, line in (
        ("G[[", prompts[1]),
        ("[[", prompts[0]),
        ("]t", tools[0]),
        ("]]", prompts[1]),
        ("gg2]t", tools[1]),  # with a count
        ("[t", tools[0]),
    ):
        editor.nvim.input(keys)
        editor.wait(f"vim.fn.line('.') == {line}", what=f"{keys} to line {line}")


def test_a_turn_that_changed_files_ends_with_their_summary_and_the_review_keys(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "a.txt").write_text("a\n")
    editor.setup(agents={"files": editor.fake_agent("files")})
    editor.open_chat("files")
    steps = [
        {"write": {"path": str(project / "a.txt"), "content": "A\n"}},
        {"write": {"path": str(project / "b.txt"), "content": "b\n"}},
    ]
    run(editor, steps)
    lines = editor.transcript()
    row = lines.index("**2 files changed:** `a.txt`, `b.txt`")
    assert lines[row + 2].startswith("*— end_turn")
    named = "\\v review · \\A accept all · \\R reject all"
    assert hints(editor) == [(row, named)]
    # The keys do what they say; once no change is open they are named no more.
    go(editor, editor.lua("return require('acp').status().transcript_buf"))
    editor.nvim.input("\\A")
    editor.wait(
        "vim.iter(require('acp').changes()):all(function(f) return not f.open end)",
        what="every change accepted",
    )
    editor.wait(f"#{HINTS} == 0", what="the review's keys no longer named")
    # A turn that changes nothing ends without one.
    run(editor, [{"read": {"path": str(project / "a.txt")}}], turn=2)
    assert sum("changed:**" in line for line in editor.transcript()) == 1
    # Two turns that change files: the newer summary names the keys, the older not.
    run(editor, [{"write": {"path": str(project / "a.txt"), "content": "AA\n"}}], turn=3)
    run(editor, [{"write": {"path": str(project / "b.txt"), "content": "bb\n"}}], turn=4)
    rows = [i for i, line in enumerate(editor.transcript()) if "changed:**" in line]
    assert hints(editor) == [(rows[-1], named)]
    # Both taken back: nothing is open.
    editor.nvim.command("AcpRestore 3")
    editor.wait(f"#{HINTS} == 0", what="the review's keys no longer named")
    assert (project / "a.txt").read_text() == "A\n"


def test_accept_all_and_reject_all_with_nothing_open_say_so(editor: Editor) -> None:
    """`\\A` and `\\R` in a transcript with no change open did nothing at all, where
    every other key with nothing to act on says so (`<C-c>`, `\\q`)."""
    editor.setup()
    status = editor.open_chat()
    go(editor, status["transcript_buf"])
    told = "#vim.tbl_filter(function(n) return n.msg == 'acp: no hunk waits for a decision (:AcpReview)' end, _G.acp_notices)"
    editor.nvim.input("\\A")
    editor.wait(f"{told} == 1", what="accept all saying nothing waits")
    editor.nvim.input("\\R")
    editor.wait(f"{told} == 2", what="reject all saying nothing waits")


HINTS = (
    "vim.api.nvim_buf_get_extmarks(require('acp').status().transcript_buf,"
    " vim.api.nvim_get_namespaces()['acp.changes.hint'], 0, -1, {details = true})"
)


def hints(editor: Editor) -> list[tuple[int, str]]:
    """The transcript's rows that name the review's keys (below them), and what they say."""
    return [
        (m[1], " · ".join(line[0][0].strip() for line in m[3]["virt_lines"]))
        for m in editor.lua(f"return {HINTS}")
    ]


def test_the_review_keys_show_whole_at_the_chats_default_width(
    editor: Editor, tmp_path: Path
) -> None:
    # At the end of the summary's line, the 48 columns of a 120-column screen cut
    # them after "\A a": a line of their own fits them, wrapped when narrower.
    screen = Screen(editor, 120, 40)
    editor.setup(agents={"files": editor.fake_agent("files")})
    status = editor.open_chat("files")
    run(editor, [{"write": {"path": str(tmp_path / "project" / "b.txt"), "content": "b\n"}}])
    win = editor.lua("return vim.fn.bufwinid(...)", status["transcript_buf"])
    for width, named in (
        (None, "\\v review · \\A accept all · \\R reject all"),
        (30, "\\v review · \\A accept all \\R reject all"),  # a line for the last
    ):
        if width:
            editor.lua("vim.api.nvim_win_set_width(...)", win, width)
        shown = " ".join(" ".join(screen.window(win)).split())
        assert f"**1 file changed:** `b.txt` {named} *— end_turn" in shown


def test_a_window_at_the_end_still_shows_it_under_the_review_keys(editor: Editor) -> None:
    # The keys' line comes after the turn's rows were drawn and the window followed
    # them: it pushed the turn's end line below the window, the cursor on it.
    Screen(editor, 120, 40)
    project = editor.tmp / "project"
    (project / "demo.txt").write_text("one\ntwo\nthree\n")
    editor.nvim.command(f"cd {project}")
    editor.setup()
    editor.lua("vim.ui.select = function(items, opts, on_choice) on_choice(items[1], 1) end")
    status = editor.open_chat()
    win = editor.lua("return vim.fn.bufwinid(...)", status["transcript_buf"])
    editor.lua("vim.api.nvim_set_current_win(...)", win)
    for turn, prompt in enumerate(("permission", "edit"), 1):  # the second changes a file
        editor.lua("require('acp').send(...)", prompt)
        editor.wait_event("AcpPermissionRequest", count=turn)
        editor.nvim.command("AcpPermission")  # allowed
        editor.wait_event("AcpTurnEnd", count=turn)
    editor.wait(f"#vim.api.nvim_buf_get_extmarks({status['transcript_buf']}, -1, 0, -1, {{details = true}}) > 0")
    last, shown = editor.lua(
        "return vim.api.nvim_win_call(..., function() return {vim.fn.line('$'), vim.fn.line('w$')} end)",
        win,
    )
    assert editor.transcript()[-1].startswith("*— end_turn")
    assert shown == last, f"line {last} below the window"


# Records the buffer-local mappings the plugin makes (its descriptions start with
# "acp"), in Normal, Insert, Visual and Operator-pending mode, as they come and go:
# a key mapped again in a buffer where another of the plugin's keys holds it is a clash.
CLASHES = """
local set, del = vim.keymap.set, vim.keymap.del
local active, clashes = {}, {}
_G.acp_clashes = clashes
local function each(modes, buf, lhs, fn)
  buf = (buf == true or buf == 0) and vim.api.nvim_get_current_buf() or buf
  for _, mode in ipairs(type(modes) == "table" and modes or { modes }) do
    fn(("buffer %d, mode %s, %s"):format(buf, mode, vim.fn.keytrans(vim.keycode(lhs))))
  end
end
vim.keymap.set = function(modes, lhs, rhs, opts)
  local desc = opts and opts.desc or ""
  if opts and opts.buffer and desc:find("^acp") then
    each(modes, opts.buffer, lhs, function(where)
      if active[where] and active[where] ~= desc then
        table.insert(clashes, ("%s: %q and %q"):format(where, active[where], desc))
      end
      active[where] = desc
    end)
  end
  return set(modes, lhs, rhs, opts)
end
vim.keymap.del = function(modes, lhs, opts)
  if opts and opts.buffer then
    each(modes, opts.buffer, lhs, function(where)
      active[where] = nil
    end)
  end
  return del(modes, lhs, opts)
end
"""


def test_no_two_default_keys_meet_in_one_buffer(editor: Editor, tmp_path: Path) -> None:
    """With every kind of key mapped at once — the chat's, the input's and the queue's
    in both windows, a permission prompt waiting (its keys in the transcript, the input
    and the file its edit is previewed in), that file holding open agent hunks, and
    the review buffer open — no default key is mapped twice in one buffer: `?` shows
    the chat's keys while a prompt waits, and does not answer it."""
    from tests.nvim.test_inline import ask

    editor.lua(CLASHES)
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    editor.nvim.command(f"edit {path}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.setup(agents={"files": editor.fake_agent("files")})
    status = editor.open_chat("files")
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n"}}])
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 0, 1, false)[1] == 'one'")
    ask(editor, [{"ask": {"path": str(path), "oldText": "3", "newText": "three"}}])
    editor.wait(f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()"
                "['acp.preview'], 0, -1, {}) > 0")  # fmt: skip
    transcript, chat_input = status["transcript_buf"], status["input_buf"]
    assert all(mapped(editor, transcript, key) for key in ("a", "r", "s", "?", "q", "\\q"))
    assert all(mapped(editor, chat_input, key) for key in ("\\y", "\\n", "<CR>", "\\e"))
    assert all(mapped(editor, buf, key) for key in ("\\y", "\\n", "\\a", "\\r", "]h"))
    editor.nvim.command("AcpReview")
    review = editor.lua("return vim.api.nvim_get_current_buf()")
    assert mapped(editor, review, "a") and mapped(editor, review, "q")
    assert editor.lua("return _G.acp_clashes") == []

    go(editor, transcript)
    editor.nvim.input("?")
    editor.wait("vim.iter(vim.api.nvim_list_wins()):any(function(w)"
                " return vim.api.nvim_win_get_config(w).relative ~= '' end)")  # fmt: skip
    assert "permission: selected" not in editor.transcript_text()


def test_reject_why_set_to_the_help_key_still_answers(editor: Editor) -> None:
    """A user who keeps `?` for "reject, and say why" has it: while a prompt waits it
    answers (the help key is the chat's again once no prompt waits)."""
    from tests.nvim.test_chats import STUB_UI

    editor.setup(
        agents={"fake": editor.fake_agent("permission")}, keys={"permission": {"reject_why": "?"}}
    )
    status = editor.open_chat("fake")
    editor.lua("require('acp').send('edit')")
    wait_text(editor, "- `?` Reject, and say why")
    editor.lua(STUB_UI, "not that file")
    go(editor, status["transcript_buf"])
    editor.nvim.input("?")
    editor.wait_event("AcpTurnStart", count=2)  # the reason, as the next prompt
    assert editor.events("AcpTurnStart")[1]["prompt"] == "I rejected Fake edit: not that file"
    editor.wait_event("AcpPermissionRequest", count=2)  # this agent asks again: cancelled
    editor.lua("require('acp').cancel()")
    editor.wait_event("AcpTurnEnd", count=2)
    editor.wait("vim.fn.maparg('?', 'n', false, true).desc == \"acp: show the chat's keys\"")



def test_two_keys_set_to_one_lhs_in_one_buffer_are_reported(editor: Editor) -> None:
    """keys.chat.hide = keys.chat.cancel was taken without a word, and only the one
    mapped last worked. setup() now names both options (spelled either way, as
    Neovim reads a key); keys that share a lhs in different buffers are no clash."""
    editor.setup()
    assert editor.lua("return _G.acp_notices") == []
    editor.setup(
        keys={
            "chat": {"hide": "<c-c>", "open": "gx"},
            "input": {"send": "gx"},  # the input has no open key
            "review": {"accept": "\\a", "close": "A"},
        }
    )
    [notice] = editor.lua("return _G.acp_notices")
    assert notice["level"] == editor.lua("return vim.log.levels.WARN")
    assert notice["msg"] == (
        "acp: keys.chat.hide and keys.chat.cancel are both '<C-c>' in the chat's transcript;"
        " keys.review.accept_all and keys.review.close are both 'A' in the review:"
        " only one of each works"
    )
    status = editor.open_chat()  # still taken: the chat works as before
    assert mapped(editor, status["input_buf"], "gx")
