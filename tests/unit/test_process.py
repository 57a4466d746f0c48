"""The agent process: its group is signalled only while it is ours (issue 27.4).

A pid is handed out again once its process is reaped and its group is empty. These
tests force that in a pid namespace of their own (``unshare``, writing
``/proc/sys/kernel/ns_last_pid``): an agent exits by itself, a stranger gets its pid
as the leader of a group of its own, and every way we end agents must leave the
stranger alone; so must a command of Neovim's terminals once Neovim said it exited.
And what a failure shows of what it printed beside the protocol.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from acp_nvim.client.agent import groups, process
from acp_nvim.nvim.terminal_groups import TerminalGroups

ROOT = Path(__file__).resolve().parents[2]

# Runs as pid 1 of a new pid namespace. argv: how the kernel is made to look
# ("named": groups named by pidfd; "leader": a kernel before 6.9, only the leader's
# pidfd; "number": no pidfd at all), then how the agent is ended.
_SCRIPT = """
import json, os, select, signal, subprocess, sys
import anyio
pidfd_open = os.pidfd_open
if sys.argv[1] == "number":
    del os.pidfd_open
from acp_nvim.client.agent import groups, process as module

async def main(kernel, ending):
    if kernel == "leader":
        groups._pidfd_groups = False
    report = {}
    agent = module.AgentProcess("a", ["sh", "-c", "read line"])
    await agent.start()
    pid = agent.pid
    await agent.stdin.aclose()  # it exits by itself (at EOF, like agents do)
    await agent.wait()  # reaped, as the connection's task does at once
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
    except OSError as err:
        print(json.dumps({"skip": f"cannot write ns_last_pid: {err}"}))
        return
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    report["reused"] = stranger.pid == pid
    if ending == "aclose":  # a restart, or the chat closed
        await agent.aclose()
    elif ending == "kill_all":  # :qa!, atexit
        groups.kill_all()
    else:  # the host killed outright: the reaper sees EOF and kills what it holds
        groups._reaper.stdin.close()
        groups._reaper.wait()
    # A signal sent before ours wins: it dies of SIGKILL if we killed it above.
    stranger.terminate()
    report["stranger_alive"] = stranger.wait() == -signal.SIGTERM
    if kernel == "named":  # a group named by pidfd: what an agent leaves is still ours
        report["leftover_alive"] = await leftover_alive()
    print(json.dumps(report))

async def leftover_alive():
    # An agent whose leader exits leaving a child behind: is it alive after aclose?
    agent = module.AgentProcess("b", ["sh", "-c", "sleep 300 & echo $!; read line"])
    await agent.start()
    leftover = pidfd_open(int((await agent.stdout.receive()).decode()))
    await agent.stdin.aclose()  # the leader reads EOF and exits
    await agent.wait()
    await agent.aclose()
    poll = select.poll()
    poll.register(leftover, select.POLLIN)
    return not poll.poll(10_000)  # readable once it exits

anyio.run(main, *sys.argv[1:])
"""


# The same for a terminal's command (acp_nvim/nvim/terminal_groups.py), this process
# playing Neovim: its exit heard, its pid goes to a stranger that every ending must
# leave alone; a command still running is ended.
_TERMINAL_SCRIPT = """
import json, os, signal, subprocess, sys
if sys.argv[1] == "number":
    del os.pidfd_open
from acp_nvim.client.agent import groups
from acp_nvim.nvim.terminal_groups import TerminalGroups

if sys.argv[1] == "leader":
    groups._pidfd_groups = False
held = TerminalGroups()
def start(key):
    job = subprocess.Popen(["sh", "-c", "read line"], stdin=subprocess.PIPE, start_new_session=True)
    held.started(key, job.pid, os.getpid())
    return job
running, ended = start("t1"), start("t2")
ended.stdin.close()
ended.wait()  # Neovim reaped it...
held.exited(["t2"])  # ...and said so
try:
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(ended.pid - 1))
except OSError as err:
    print(json.dumps({"skip": f"cannot write ns_last_pid: {err}"}))
    sys.exit()
stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
report = {"reused": stranger.pid == ended.pid}
if sys.argv[2] == "kill_all":  # the host ends (Neovim gone)
    groups.kill_all()
else:  # the host killed with Neovim: the reaper sees EOF
    groups._reaper.stdin.close()
    groups._reaper.wait()
report["running_killed"] = running.wait() == -signal.SIGKILL
stranger.terminate()
report["stranger_alive"] = stranger.wait() == -signal.SIGTERM
print(json.dumps(report))
"""


@cache
def _unshare() -> list[str] | str:
    """The unshare command that makes a pid namespace here, or why none can be made."""
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    why = ""
    for userns in (["--user", "--map-root-user"], []):
        command = ["unshare", *userns, "--pid", "--fork", "--mount-proc"]
        done = subprocess.run([*command, "true"], capture_output=True, text=True)
        if done.returncode == 0:
            return command
        why = done.stderr.strip()
    return f"cannot make a pid namespace here (unshare: {why})"


def _in_pid_namespace(script: str, *args: str) -> dict[str, Any]:
    """The JSON report of ``script`` run as pid 1 of a new pid namespace; skips where
    none can be made or its pids cannot be steered."""
    command = _unshare()
    if isinstance(command, str):
        pytest.skip(command)
    run = subprocess.Popen(
        [*command, sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        stdout, stderr = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        # The namespace's first process, in unshare's group, takes every other one
        # of the namespace with it: nothing of a hung script is left running.
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        raise
    assert run.returncode == 0, stderr
    report: dict[str, Any] = json.loads(stdout)
    if "skip" in report:
        pytest.skip(report["skip"])
    return report


@pytest.mark.parametrize("kernel", ["named", "leader", "number"])
@pytest.mark.parametrize("ending", ["aclose", "kill_all", "reaper"])
def test_a_recycled_pid_is_never_signalled(kernel: str, ending: str) -> None:
    report = _in_pid_namespace(_SCRIPT, kernel, ending)
    assert report["reused"], "the stranger did not get the agent's pid"
    assert report["stranger_alive"]
    if kernel == "named":
        assert report["leftover_alive"] is False


@pytest.mark.parametrize("kernel", ["named", "leader", "number"])
@pytest.mark.parametrize("ending", ["kill_all", "reaper"])
def test_a_terminal_commands_recycled_pid_is_never_signalled(kernel: str, ending: str) -> None:
    report = _in_pid_namespace(_TERMINAL_SCRIPT, kernel, ending)
    assert report["reused"], "the stranger did not get the command's pid"
    assert report["stranger_alive"]
    assert report["running_killed"]


def test_a_terminal_command_gone_before_it_is_held_is_not_held() -> None:
    """A quick command Neovim reaped before the host heard it started: its number may
    be anyone's by then, and was held (signalled, handed to the reaper) all the same."""
    if not groups._has_pidfds():
        pytest.skip("no pidfds here: a number is all there is (decision 0036)")
    done = subprocess.Popen(["true"])
    done.wait()
    held = TerminalGroups()
    held.started("t1", done.pid, os.getpid())
    assert repr(held) == "<TerminalGroups []>"


def test_a_failure_shows_the_last_lines_printed_on_stdout_trimmed_and_cut() -> None:
    agent = process.AgentProcess("a", ["a"])
    for line in (b"banner", b"  ", b"\tPlease log in\r ", "é".encode() * 300):
        agent.keep_stdout_text(line)
    agent.keep_stdout_text(b"last")
    cut = "é" * process.STDOUT_TEXT_MAX + "…"
    assert agent.printed() == ["stdout: Please log in", f"stdout: {cut}", "stdout: last"]


@pytest.mark.parametrize(
    ("script", "mode", "says"),
    [
        ("#!/nonexistent/interpreter -x\n", 0o755, "its interpreter /nonexistent/interpreter is not installed"),
        (None, 0, "not found"),
        ("#!/bin/sh\n", 0o644, "is not executable"),
    ],
)
@pytest.mark.anyio
async def test_a_program_that_cannot_start_says_why(
    tmp_path: Path, script: str | None, mode: int, says: str
) -> None:
    """A script whose #! names a missing interpreter was said to be "not found"."""
    program = tmp_path / "agent"
    if script is not None:
        program.write_text(script)
        program.chmod(mode)
    with pytest.raises(process.SpawnError) as raised:
        await process.AgentProcess("a", [str(program)]).start()
    assert str(raised.value) == f"agent 'a': {str(program)!r} {says}"
