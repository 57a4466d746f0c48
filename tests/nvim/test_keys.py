"""Every key the plugin maps comes from the `keys` option (issue 28.2): per table, a
remapped key works and the default lhs is free again; the older option names
still work; the chat's help key, motions and change summary (issue 30.10)."""

from __future__ import annotations

from pathlib import Path

from tests.nvim.conftest import Editor
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
    assert heading.startswith("acp review · 1 open hunks · x/r accept/reject")
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
    hint = editor.lua(
        "return vim.api.nvim_buf_get_extmarks(require('acp').status().transcript_buf,"
        " vim.api.nvim_get_namespaces()['acp.changes.hint'], 0, -1, {details = true})"
    )
    assert [(m[1], m[3]["virt_text"][0][0]) for m in hint] == [
        (row, "  · \\v review · \\A accept all · \\R reject all")
    ]
    # The keys do what they say.
    go(editor, editor.lua("return require('acp').status().transcript_buf"))
    editor.nvim.input("\\A")
    editor.wait(
        "vim.iter(require('acp').changes()):all(function(f) return not f.open end)",
        what="every change accepted",
    )
    # A turn that changes nothing ends without one.
    run(editor, [{"read": {"path": str(project / "a.txt")}}], turn=2)
    assert sum("changed:**" in line for line in editor.transcript()) == 1
