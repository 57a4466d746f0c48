"""The first chat's agent starts with the Python host, not after it (decision 0051):
the chat talks to that very process, and one that no chat takes never outlives the
host."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.nvim.conftest import Editor, wait_gone
from tests.nvim.test_faults import fake_pids
from tests.nvim.test_history import second_neovim

# `python -m acp_nvim` as Lua runs it, telling which process it started first. The
# file appears whole (renamed into place): a test waits for it to exist, then reads it.
RECORDING_HOST = """\
import os, runpy, sys
from acp_nvim.client.agent import first
spawn = first.spawn
def recorded(*args):
    spawn(*args)
    with open({out!r} + ".part", "w") as f:
        f.write(str(first._waiting.popen.pid if first._waiting else 0))
    os.replace({out!r} + ".part", {out!r})
first.spawn = recorded
runpy.run_module("acp_nvim", run_name="__main__", alter_sys=True)
"""


def recording_python(tmp_path: Path) -> tuple[str, Path]:
    out = tmp_path / "first-agent-pid"
    script = tmp_path / "host.py"
    script.write_text(RECORDING_HOST.format(out=str(out)))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {script}\n')  # Lua's "-m acp_nvim" dropped
    python.chmod(0o755)
    return str(python), out


def test_the_first_chat_talks_to_the_agent_started_with_the_host(editor: Editor, tmp_path: Path) -> None:
    python, out = recording_python(tmp_path)
    editor.setup(python=python, agents={"echo": editor.fake_agent("echo")}, default_agent="echo")
    editor.open_chat()
    started_first = int(out.read_text())
    assert started_first > 0
    assert fake_pids(editor, "echo") == [started_first]  # taken over, not started again
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    assert "echo: hello" in editor.transcript_text()


def test_the_next_neovim_spawns_the_launch_the_first_kept(editor: Editor) -> None:
    # Decision 0066: kept in the cache directory, found again by another Neovim whose
    # Lua may encode the same options' keys in another order.
    options = {
        "agents": {"echo": editor.fake_agent("echo"), "plain": editor.fake_agent("blocks")},
        "default_agent": "echo",
        "chat": {"width": 60, "position": "right"},
    }
    editor.setup(**options)
    editor.open_chat()
    cache = Path(editor.lua("return vim.fn.stdpath('cache')")) / "acp" / "first-agents.json"
    kept = json.loads(cache.read_text())
    cwd = editor.lua("return vim.fn.getcwd()")
    assert list(kept.values()) == [{"cmd": options["agents"]["echo"]["cmd"], "cwd": cwd}]
    with second_neovim(editor) as other:
        other.setup(**options)
        other.open_chat()
        other.lua("require('acp').send('hello')")
        other.wait_event("AcpTurnEnd")
        assert "echo: hello" in other.transcript_text()
    assert json.loads(cache.read_text()) == kept  # found, not resolved into another entry


def test_a_chat_elsewhere_or_of_another_agent_ends_the_agent_started_first(
    editor: Editor, tmp_path: Path
) -> None:
    python, out = recording_python(tmp_path)
    agents = {"echo": editor.fake_agent("echo"), "other": editor.fake_agent("files")}
    editor.setup(python=python, agents=agents, default_agent="echo")
    # What Lua hands over names echo; the chat's own start asks for other.
    editor.lua("require('acp.host').retry({cwd = vim.fn.getcwd(), cwd_given = false})")
    editor.wait(f"vim.uv.fs_stat({str(out)!r}) ~= nil", what="the host's first agent")
    started_first = int(out.read_text())
    assert started_first > 0
    editor.open_chat("other")
    assert fake_pids(editor, "echo") == []  # ended as the other one started
    assert len(fake_pids(editor, "files")) == 1


def test_an_agent_started_first_that_no_chat_takes_ends_with_the_host(
    editor: Editor, tmp_path: Path
) -> None:
    python, out = recording_python(tmp_path)
    editor.setup(python=python, agents={"echo": editor.fake_agent("echo")}, default_agent="echo")
    editor.lua("require('acp.host').retry({cwd = vim.fn.getcwd(), cwd_given = false})")
    editor.wait(f"vim.uv.fs_stat({str(out)!r}) ~= nil", what="the host's first agent")
    started_first = int(out.read_text())
    assert fake_pids(editor, "echo") == [started_first]
    editor.lua("require('acp.host').stop()")
    assert wait_gone([started_first]) == []
