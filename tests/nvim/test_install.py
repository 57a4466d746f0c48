"""The first five minutes: a plugin without its Python environment says what to do,
:AcpInstall builds it, and the chat then works in the same Neovim.

Each test runs a fresh copy of the working tree (what a clone holds: no .venv).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import wheelhouse
from tests.nvim.conftest import ROOT, Editor, child_editor

# Notices are recorded (events.lua) and still reach :messages, which the tests read.
INIT = """
local notify = vim.notify
dofile({events!r})
local record = vim.notify
vim.notify = function(msg, level)
  record(msg, level)
  notify(msg, level)
end
vim.opt.runtimepath:prepend({plugin!r})
vim.cmd("runtime plugin/acp.lua")
{extra}
"""
TRACEBACK_SIGNS = ("Traceback", 'File "', "E5108", "stack traceback")
# uv for the uv route: on PATH, else the one the test extra put beside this Python;
# the PATH that finds it.
UV = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
UV_PATH = os.pathsep.join([os.path.dirname(UV or ""), os.environ["PATH"]])


def checkout(dest: Path) -> Path:
    """The files a fresh clone of this working tree has: tracked and new ones, no .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # not deleted in the working tree
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def bare_python(tmp_path: Path) -> str:
    """A Python without acp.nvim's dependencies (a venv without even pip)."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def path_without_uv(tmp_path: Path, python: str) -> str:
    """PATH with ``python3`` first and no uv, so :AcpInstall takes the pip route."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    keep = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "uv").exists()]
    return os.pathsep.join([str(bin_dir), *keep])


def start(
    tmp_path: Path, plugin: Path, extra: str = "", env: dict[str, str] | None = None
) -> Editor:
    init = INIT.format(
        events=str(ROOT / "tests" / "nvim" / "events.lua"), plugin=str(plugin), extra=extra
    )
    editor = child_editor(tmp_path, init, env)
    (tmp_path / "project").mkdir()
    editor.nvim.command(f"cd {tmp_path / 'project'}")
    return editor


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    return checkout(tmp_path / "acp.nvim")


@pytest.fixture
def no_deps(tmp_path: Path, plugin: Path) -> Iterator[Editor]:
    """The plugin without its venv; g:python3_host_prog is a Python without anyio."""
    editor = start(tmp_path, plugin, f"vim.g.python3_host_prog = {bare_python(tmp_path)!r}")
    try:
        yield editor
    finally:
        editor.quit()


def messages(editor: Editor) -> str:
    return str(
        editor.nvim.exec_lua("return vim.api.nvim_exec2('messages', {output = true}).output")
    )


def test_missing_dependencies_explain_themselves(no_deps: Editor) -> None:
    editor = no_deps
    editor.nvim.command("AcpChat")
    error = editor.wait_event("AcpError")
    message = error["message"]
    assert message.startswith("cannot start the Python side: /")
    assert "lacks a module acp.nvim needs: No module named 'anyio'" in message
    assert "Run :AcpInstall to build the plugin's own Python environment" in message
    status = editor.lua("return require('acp').status()")
    assert status["state"] == "error" and status["error"] == message
    assert editor.transcript() == [f"**Error:** {message}"]
    # The chat on screen says it; :messages gets neither the paragraph nor the traceback.
    shown = messages(editor)
    assert message not in shown
    assert not [sign for sign in (*TRACEBACK_SIGNS, "ModuleNotFoundError") if sign in shown]
    # The traceback is in :AcpLog.
    editor.nvim.command("AcpLog")
    log = "\n".join(editor.nvim.current.buffer[:])
    assert "host !! Traceback (most recent call last):" in log
    assert "host !! ModuleNotFoundError: No module named" in log

    # Every later :AcpChat tries again, in the same chat.
    editor.nvim.command("tabclose")
    editor.nvim.command("AcpChat")
    assert editor.wait_event("AcpError", count=2)["message"] == message
    assert editor.lua("return require('acp').status().chat") == status["chat"]
    assert editor.transcript() == [f"**Error:** {message}"]


def test_python_option_that_is_not_a_python_is_explained(no_deps: Editor) -> None:
    editor = no_deps
    editor.lua("require('acp').setup({ python = '/nonexistent/python3' })")
    # The failure is known at once: its error message would fail the RPC call.
    editor.lua("pcall(vim.cmd, 'AcpChat')")
    message = editor.wait_event("AcpError")["message"]
    assert message.startswith(
        "cannot start the Python side: /nonexistent/python3 is not an executable Python."
    )
    assert "Remove the `python` option from setup() and run :AcpInstall" in message
    assert editor.lua("return require('acp').status().state") == "error"
    # Commands for the failed chat say the same instead of starting anything.
    editor.lua("pcall(vim.cmd, 'AcpSend hello')")
    assert editor.lua("return _G.acp_notices[#_G.acp_notices].msg") == f"acp: {message}"
    assert not [sign for sign in TRACEBACK_SIGNS if sign in messages(editor)]


def test_python_option_naming_another_program_is_explained(editor: Editor) -> None:
    """It ran, and exited at once without a word: the chat said only "the Python side
    exited with code 1. :AcpChat starts it again", as if it had died mid-session."""
    editor.setup(python="/bin/false")
    editor.open_chat(ready=False)
    message = editor.wait_event("AcpError")["message"]
    assert message.startswith(
        "cannot start the Python side: /bin/false (setup option `python`) exited with"
        " code 1 as it started."
    )
    assert "Remove the `python` option from setup() and run :AcpInstall" in message
    assert editor.lua("return require('acp').status().state") == "error"


def test_checkhealth_suggests_acpinstall_without_the_venv(no_deps: Editor) -> None:
    no_deps.nvim.command("checkhealth acp")
    text = "\n".join(no_deps.nvim.current.buffer[:])
    assert "WARNING the plugin's own Python environment" in text
    assert "is missing; using " in text and "- Run :AcpInstall to build it\n" in text
    assert "ERROR anyio, msgspec, pydantic, pynvim not installed for " in text


def test_host_dying_under_a_hidden_chat_is_a_message_and_acpchat_restarts_it(
    editor: Editor,
) -> None:
    editor.setup()
    first = editor.open_chat()
    editor.nvim.command("close | close")  # the chat's two windows: hidden, still alive
    host_pid = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    os.kill(host_pid, signal.SIGKILL)
    message = editor.wait_event("AcpError")["message"]
    assert message == (
        "the Python side exited with code 137. :AcpChat starts it again. Details: :AcpLog."
    )
    editor.wait(
        f"#_G.acp_notices > 0 and _G.acp_notices[#_G.acp_notices].msg == {'acp: ' + message!r}"
    )
    assert editor.lua("return require('acp').status().state") == "error"
    # Its session died with the host: :AcpChat starts a new chat in its place.
    editor.nvim.command("AcpChat")
    editor.wait_event("AcpSessionReady", count=2)
    status = editor.lua("return require('acp').status()")
    assert status["chat"] != first["chat"] and status["state"] == "ready"


def test_failing_install_reports_the_command_and_its_output(tmp_path: Path, plugin: Path) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'cannot make a venv here' >&2\nexit 4\n")
    (fake / "python3").chmod(0o755)
    path = path_without_uv(tmp_path, str(fake / "python3"))
    # A broken environment (its Python gone) is removed, to be built anew.
    (plugin / ".venv" / "bin").mkdir(parents=True)
    (plugin / ".venv" / "bin" / "python").symlink_to(tmp_path / "gone")
    editor = start(tmp_path, plugin, env={"PATH": path})
    try:
        # In the background, as with a UI.
        assert editor.lua(
            "require('acp.install').run({ wait = false }) return require('acp.install').busy()"
        )
        editor.wait("not require('acp.install').busy()")
        assert not (plugin / ".venv").exists()
        notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
        assert notices[0] == "acp: install 1/5: creating .venv"
        assert notices[-1] == (
            f"acp: install failed: python3 -m venv {plugin}/.venv exited with code 4:\n"
            "cannot make a venv here"
        )
    finally:
        editor.quit()


def test_acpinstall_with_a_python_that_cannot_build_it_leaves_the_environment(
    tmp_path: Path, plugin: Path
) -> None:
    """A typo in :AcpInstall's [python], or a Python too old, is told before anything
    is removed: the environment that worked still does, the Python side still runs."""
    old = tmp_path / "python3.9"
    old.write_text("#!/bin/sh\nexit 1\n")  # fails the version check
    old.chmod(0o755)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(plugin / ".venv")], check=True)
    editor = start(tmp_path, plugin, f"require('acp').setup({{ python = {sys.executable!r} }})")
    try:
        editor.open_chat()
        for python in ("/nonexistent/python3", str(old)):
            editor.lua("pcall(vim.cmd, ...)", f"AcpInstall {python}")  # an error message
            said = editor.lua("return _G.acp_notices")[-1]["msg"]
            assert said == (
                f"acp: install failed: {python} is not a Python 3.10 or newer that runs;"
                " the environment was left as it was"
            )
        assert (plugin / ".venv" / "bin" / "python").exists()
        editor.lua("require('acp').send('still here')")
        assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    finally:
        editor.quit()


@pytest.fixture(scope="session")
def offline_index(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pip and uv told to install only from wheels of this test environment: no network.

    The wheelhouse holds the plugin's dependencies, the build backend and pip itself
    (what :AcpInstall's steps ask for)."""
    needs = [*wheelhouse.requirements("acp-nvim"), "setuptools", "pip"]
    house = wheelhouse.build(tmp_path_factory.mktemp("wheelhouse"), needs)
    return {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(house),
        "UV_OFFLINE": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(house),
    }


def install_then_chat(
    tmp_path: Path, plugin: Path, env: dict[str, str], tool: str, python: str = ""
) -> None:
    """The user story: no venv, the chat says what to do, :AcpInstall, the chat works."""
    editor = start(tmp_path, plugin, f"vim.g.python3_host_prog = {bare_python(tmp_path)!r}", env)
    try:
        editor.nvim.command("AcpChat")
        assert ":AcpInstall" in editor.wait_event("AcpError")["message"]

        editor.nvim.command(f"AcpInstall {python}")  # headless: returns when done
        notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
        assert f"installing the dependencies with {tool}" in "\n".join(notices)
        assert notices[-1].startswith("acp: installed in "), notices[-1]
        venv_python = plugin / ".venv" / "bin" / "python"
        assert editor.lua("return require('acp.host').python()") == str(venv_python)
        # The chat that failed starts again by itself, in the same Neovim.
        ready = editor.wait_event("AcpSessionReady", timeout=30)
        assert ready["agent"] == "demo"
        editor.lua("require('acp').send('after install')")
        assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
        assert "You said: *after install*" in editor.transcript_text()
        assert not [sign for sign in TRACEBACK_SIGNS if sign in messages(editor)]

        editor.nvim.command("checkhealth acp")
        text = "\n".join(editor.nvim.current.buffer[:])
        assert "OK anyio" in text and "WARNING" not in text, text
        # An update that changes the dependencies makes the environment stale.
        pyproject = plugin / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('"anyio>=4.11",', '"anyio>=4.12",'))
        editor.nvim.command("bwipeout | checkhealth acp")
        text = "\n".join(editor.nvim.current.buffer[:])
        assert "WARNING the plugin's Python environment was built for other dependencies" in text
        assert "Run :AcpInstall to bring it up to date" in text
    finally:
        editor.quit()


@pytest.mark.timeout(300)
def test_acpinstall_with_pip_then_chat(
    tmp_path: Path, plugin: Path, offline_index: dict[str, str]
) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    path = path_without_uv(tmp_path, base)
    install_then_chat(tmp_path, plugin, {**offline_index, "PATH": path}, "pip")


@pytest.mark.timeout(300)
@pytest.mark.skipif(UV is None, reason="no uv (the test extra installs it)")
def test_acpinstall_with_uv_then_chat(
    tmp_path: Path, plugin: Path, offline_index: dict[str, str]
) -> None:
    install_then_chat(tmp_path, plugin, {**offline_index, "PATH": UV_PATH}, "uv")


@pytest.mark.timeout(300)
@pytest.mark.skipif(UV is None, reason="no uv (the test extra installs it)")
def test_acpinstall_of_a_python_version_asks_uv_for_it(
    tmp_path: Path, plugin: Path, offline_index: dict[str, str]
) -> None:
    """`:AcpInstall 3.12` is uv's to find: one it does not have is told before
    anything is removed; one it has builds the environment."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(plugin / ".venv")], check=True)
    editor = start(tmp_path, plugin, env={**offline_index, "PATH": UV_PATH})
    try:
        editor.lua("pcall(vim.cmd, 'AcpInstall 3.99')")
        assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
            "acp: install failed: uv finds no Python 3.99 (`uv python install 3.99` fetches"
            " one); the environment was left as it was"
        )
        assert (plugin / ".venv" / "bin" / "python").exists()
    finally:
        editor.quit()
    shutil.rmtree(plugin / ".venv")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    install_then_chat(tmp_path / "again", plugin, {**offline_index, "PATH": UV_PATH}, "uv", version)
