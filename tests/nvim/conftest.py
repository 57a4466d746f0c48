"""A real headless Neovim per test, with isolated XDG dirs and the plugin on 'rtp'.

Waits are conditions evaluated inside Neovim with ``vim.wait`` (which keeps
processing events, including the Python host's RPC), never sleeps.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pynvim
import pytest

from tests import proc
from tests.proc import wait_gone as wait_gone  # the nvim tests import it from here

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fakes" / "agent.py"
# Lua drawing render ops (the ... args: chat id, ops) as Python's batches do.
RENDER = "local chat, ops = ...; require('acp.host').apply({ { kind = 'render', chat = chat, ops = ops } })"
# A Lua function: the chat's winbar as window `win` draws it (the transcript's first
# window without one); its 'winbar' is an expression (decision 0096).
WINBAR = (
    "(function(win) win = win ~= nil and win ~= vim.NIL and win"
    " or vim.fn.win_findbuf(require('acp').status().transcript_buf)[1]"
    " return vim.api.nvim_eval_statusline(vim.wo[win].winbar, {winid = win, use_winbar = true}).str end)"
)


def nvim_binary() -> str:
    """$NVIM_BIN, else the Neovim installed beside this Python (.venv), else nvim on PATH.

    Without one the headless tests skip, except under CI=true, where they fail: a
    green CI must mean they ran.
    """
    explicit = os.environ.get("NVIM_BIN")
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "nvim"
    if beside.exists():
        return str(beside)
    found = shutil.which("nvim")
    if found is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("no Neovim found under CI=true (set NVIM_BIN)", pytrace=False)
        pytest.skip("no Neovim found (set NVIM_BIN)")
    return found


# How long a wait gives a turn whose answer streams tens of thousands of chunks (the
# demo agent echoes a long prompt a word a chunk), not the 15 s a short turn gets: on
# two cores at load 12-15, ~1,000 chunks a second, so 24,000 end after ~23 s.
LONG_TURN = 120

# Marks the batches the Python side has Neovim apply: _G.in_batch is true while one
# is applied. A picker opened there holds Neovim inside it: the default
# vim.ui.select waits for the user, and Neovim answers no other request meanwhile.
NOTE_BATCHES = """
local host = require('acp.host')
local apply = host.apply
_G.in_batch = false
host.apply = function(...)
  _G.in_batch = true
  local ok, err = pcall(apply, ...)
  _G.in_batch = false
  assert(ok, err)
end
"""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A SIGTERM (``timeout`` cutting a run) that lands while pynvim waits for Neovim
    becomes that one test's error, ``Exception: Received signal SIGTERM``, and the run
    went on: a suite cut at 63% read as a set-up error of whichever test was starting
    its Neovim, then ran ten minutes more. The run stops there instead, saying why."""
    report: pytest.TestReport = yield
    error = call.excinfo
    if error is not None and str(error.value) == "Received signal SIGTERM":
        item.session.shouldstop = "SIGTERM received (the run was cut, as by `timeout`)"
    return report


def logged(way: str, text: str) -> str:
    """A Lua expression: the lines of the protocol log sent (``way`` ">>") or received
    ("<<") that hold ``text``."""
    return (
        f"vim.tbl_filter(function(l) return l:find({f' {way} '!r}, 1, true)"
        f" and l:find({text!r}, 1, true) end, require('acp.host').request('log'))"
    )


class Editor:
    """The test's handle on a child Neovim."""

    def __init__(self, nvim: pynvim.Nvim, marker: str, tmp: Path) -> None:
        self.nvim = nvim
        self.marker = marker
        self.tmp = tmp
        self.pid: int = nvim.funcs.getpid()
        self.closed = False

    def quit(self) -> None:
        """End the child Neovim and the pynvim session (no transport left open).

        A test may quit itself; the fixture's quit is then a no-op."""
        if self.closed:
            return
        self.closed = True
        try:
            self.nvim.command("qa!")
        except (OSError, EOFError):
            pass  # the channel closes under the request
        self.nvim.close()

    def __enter__(self) -> Editor:
        return self

    def __exit__(self, *exc: object) -> None:
        """Quit on leaving a ``with`` block, however it is left."""
        self.quit()

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def wait(self, condition: str, timeout: float = 15, what: str | None = None) -> None:
        """Wait until the Lua expression ``condition`` is true, processing events."""
        ok = self.lua(
            f"return vim.wait({int(timeout * 1000)}, function() return {condition} end, 5)"
        )
        if not ok:
            raise AssertionError(f"timed out waiting for {what or condition}; {self.debug()}")

    def as_typed(self, command: str) -> None:
        """Run Ex ``command`` as the user would, followed by the TextChanged that Neovim
        fires when it gets back to its main loop: a test waits inside vim.wait, which
        never gets there, so without it the autocmd could come only after the wait."""
        self.nvim.command(f"{command} | doautocmd <nomodeline> TextChanged")

    def debug(self) -> str:
        status = self.lua("return require('acp').status()")
        events = self.lua("return _G.acp_events")
        notices = self.lua("return _G.acp_notices")
        return f"status={status} events={events} notices={notices}"

    def setup(self, **options: Any) -> None:
        options.setdefault("python", sys.executable)
        self.lua("require('acp').setup(...)", options)

    def fake_agent(self, scenario: str) -> dict[str, Any]:
        return {"cmd": [sys.executable, str(FAKE), scenario]}

    def open_chat(self, agent: str | None = None, *, ready: bool = True) -> dict[str, Any]:
        self.lua("require('acp').open({agent = ...})", agent)
        if ready:
            self.wait_event("AcpSessionReady")
        status: dict[str, Any] = self.lua("return require('acp').status()")
        return status

    def reopen_last(self) -> int:
        """The stored chat last changed, reopened from the history (its agent not
        started) and shown: its chat id."""
        self.wait("#require('acp').history() > 0", what="the chat kept")
        entry = self.lua("return require('acp').history()[1]")
        chat: int = self.lua("return require('acp').open({history = ...})", entry["id"])
        self.wait("require('acp').status().state == 'ready'", what="the stored chat shown")
        return chat

    def events(self, name: str) -> list[dict[str, Any]]:
        events = self.lua("return _G.acp_events")
        return [e.get("data", {}) for e in events if e["name"] == name]

    def wait_event(self, name: str, count: int = 1, timeout: float = 15) -> dict[str, Any]:
        self.wait(
            f"#vim.tbl_filter(function(e) return e.name == {name!r} end, _G.acp_events) >= {count}",
            timeout,
            what=f"{count} x {name}",
        )
        return self.events(name)[count - 1]

    def winbar(self, win: int | None = None) -> str:
        """The chat's winbar as drawn in ``win``, else in the transcript's first window."""
        return str(self.lua(f"return {WINBAR}(...)", win))

    def transcript(self) -> list[str]:
        buf = self.lua("return require('acp').status().transcript_buf")
        return list(self.nvim.buffers[buf][:])

    def transcript_text(self) -> str:
        return "\n".join(self.transcript())

    def agent_pids(self) -> list[int]:
        """Processes started from this test's Neovim (Python host, agents): they carry
        the test's marker in their environment. Not the review's `git` runs, which
        end by themselves (one may be under way once a session is ready), nor a
        child the host has forked for one and not yet handed its program."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                name = (entry / "comm").read_text().strip()
            except OSError:
                continue
            found = proc.stat(entry.name)
            if (
                self.marker.encode() in environ
                and found is not None
                and found.state != "Z"
                and name not in ("git", "nice")
                and int(entry.name) != self.pid
                and not _forked_not_yet_running(entry, found.parent)
            ):
                pids.append(int(entry.name))
        return pids


def _forked_not_yet_running(entry: Path, parent: int) -> bool:
    """A child between fork and exec: it still runs its parent's command line."""
    try:
        return (entry / "cmdline").read_bytes() == Path(f"/proc/{parent}/cmdline").read_bytes()
    except OSError:
        return False


def child_editor(
    tmp_path: Path,
    init: str,
    extra_env: dict[str, str] | None = None,
    wrapper: list[str] | None = None,
) -> Editor:
    """A Neovim started with ``init`` (Lua) instead of the test init (through the
    command ``wrapper`` where given); the caller quits it.

    Events are recorded (tests/nvim/events.lua) unless ``init`` itself loads them."""
    env = {**os.environ, "ACP_DEMO_DELAY": "0", **(extra_env or {})}
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        path = tmp_path / f"xdg-{name.lower()}"
        path.mkdir(exist_ok=True)
        env[f"XDG_{name}_HOME"] = str(path)
    init_file = tmp_path / "init.lua"
    init_file.write_text(init)
    saved = os.environ.copy()
    os.environ.clear()
    os.environ.update(env)
    try:
        nvim = pynvim.attach(
            "child",
            argv=[
                *(wrapper or []),
                *(nvim_binary(), "--embed", "--headless", "-i", "NONE", "-n", "-u", str(init_file)),
            ],
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if not nvim.exec_lua("return _G.acp_events ~= nil"):
        nvim.exec_lua("dofile(...)", str(ROOT / "tests" / "nvim" / "events.lua"))
    return Editor(nvim, "unused", tmp_path)


@pytest.fixture
def editor(tmp_path: Path) -> Iterator[Editor]:
    marker = f"ACP_TEST_MARKER_{uuid.uuid4().hex}"
    env = {
        **os.environ,
        "ACP_TEST_ROOT": str(ROOT),
        "ACP_DEMO_DELAY": "0",
        marker: "1",
    }
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        path = tmp_path / f"xdg-{name.lower()}"
        path.mkdir()
        env[f"XDG_{name}_HOME"] = str(path)
    argv = [
        nvim_binary(),
        "--embed",
        "--headless",
        "-i",
        "NONE",
        "-n",
        "-u",
        str(ROOT / "tests" / "nvim" / "init.lua"),
    ]
    old_env = os.environ.copy()
    os.environ.clear()
    os.environ.update(env)
    try:
        nvim = pynvim.attach("child", argv=argv)
    finally:
        os.environ.clear()
        os.environ.update(old_env)
    cwd = tmp_path / "project"
    cwd.mkdir()
    nvim.command(f"cd {cwd}")
    handle = Editor(nvim, marker, tmp_path)
    try:
        yield handle
    finally:
        handle.quit()
