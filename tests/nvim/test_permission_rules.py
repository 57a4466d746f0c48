"""Permission requests answered without asking: the user's allow-list, an agent's own
policy, and "always" answers remembered per project across restarts (issue 28,
point 6)."""

from __future__ import annotations

import sys

import pytest

from tests.nvim.conftest import ROOT, Editor, child_editor

# What the demo agent asks to run when told "permission", and says once it may.
COMMAND = {1: ("make clean", "Done: `make clean` ran."), 2: ("rm -rf build", "build cleaned")}


def asked(editor: Editor) -> int:
    return len(editor.events("AcpPermissionRequest"))


@pytest.mark.parametrize("version", [1, 2])
def test_an_allow_listed_command_is_not_asked(editor: Editor, version: int) -> None:
    command, done = COMMAND[version]
    prefix = command.rsplit(" ", 1)[0]  # a prefix: `make` allows `make clean`
    editor.setup(protocol_version=version, permissions={"allow": {"commands": [prefix]}})
    editor.open_chat()
    editor.lua("require('acp').send('permission')")
    editor.wait_event("AcpTurnEnd")
    assert asked(editor) == 0
    assert done in editor.transcript_text()
    assert "allowed command `" + prefix + "`" in editor.transcript_text()


def test_a_command_not_on_the_list_is_asked(editor: Editor) -> None:
    editor.setup(permissions={"allow": {"commands": ["git status"], "paths": ["."]}})
    editor.open_chat()
    editor.lua("require('acp').send('permission')")
    editor.wait_event("AcpPermissionRequest")


def test_an_agents_own_policy_wins_over_the_global_one(editor: Editor) -> None:
    trusting = {
        "cmd": [sys.executable, "-m", "acp_nvim.demo_agent"],
        "env": {"PYTHONPATH": str(ROOT)},
        "permission_policy": "allow_all",
    }
    editor.setup(agents={"trusting": trusting}, permission_policy="ask")
    editor.open_chat("trusting")
    editor.lua("require('acp').send('permission')")
    editor.wait_event("AcpTurnEnd")
    assert asked(editor) == 0
    assert "(policy allow_all)" in editor.transcript_text()


PICK_FIRST = "vim.ui.select = function(items, opts, on_choice) on_choice(items[1], 1) end"


def test_an_always_answer_survives_a_restart_until_forgotten(editor: Editor) -> None:
    editor.setup()
    status = editor.open_chat()
    editor.lua("require('acp').send('permission')")
    editor.wait_event("AcpPermissionRequest")
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(...)[1])", status["transcript_buf"])
    editor.nvim.input("A")
    editor.wait_event("AcpTurnEnd")
    editor.quit()

    other = child_editor(
        editor.tmp, (ROOT / "tests" / "nvim" / "init.lua").read_text(), {"ACP_TEST_ROOT": str(ROOT)}
    )
    try:
        other.nvim.command(f"cd {editor.tmp / 'project'}")
        other.setup()
        other.open_chat()
        other.lua("require('acp').send('permission')")
        other.wait_event("AcpTurnEnd")
        assert asked(other) == 0
        assert "Done: `make clean` ran." in other.transcript_text()
        other.nvim.command("AcpPermission list")
        [notice] = other.lua("return _G.acp_notices")
        assert notice["msg"] == (
            "acp: remembered permission answers:\n"
            f"allow `execute` for demo in {editor.tmp / 'project'}"
        )
        other.lua(PICK_FIRST)
        other.nvim.command("AcpPermission forget")
        other.lua("require('acp').send('permission')")
        other.wait_event("AcpPermissionRequest")
        other.nvim.command("AcpPermission list")
        assert other.lua("return _G.acp_notices")[-1]["msg"] == (
            "acp: no permission answer is remembered"
        )
    finally:
        other.quit()
