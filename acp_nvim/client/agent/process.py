"""The agent subprocess: spawn, stderr ring, and a kill that leaves no orphans.

Each agent runs in its own process group (``start_new_session``) so closing it
also ends whatever it spawned (shells, language servers, MCP servers). Every
live group is remembered so :func:`kill_all` can end them from ``atexit`` or a
signal handler, when no event loop is left to await anything. And since neither
runs when this process is killed outright, a reaper outlives it: a small shell
in a session of its own that holds every live group and SIGKILLs them once this
process is gone (its end of the reaper's stdin closes, however it ended).
"""

from __future__ import annotations

__all__ = ["AgentProcess", "SpawnError", "agent_cwd", "agent_process", "kill_all"]

import collections
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence

import anyio
import anyio.abc

from acp_nvim.client.config import AgentConfig
from acp_nvim.client.log import ProtocolLog
from acp_nvim.protocol.streams import receive

_live_groups: set[int] = set()
# Lines on stdin: a group id to hold, or -id to let go. At EOF it kills what it holds.
_REAPER = """
trap '' HUP INT TERM
groups=" "
while read -r pg; do
  case "$pg" in
    -*) groups=$(printf '%s' "$groups" | sed "s/ ${pg#-} / /") ;;
    *) groups="$groups$pg " ;;
  esac
done
for pg in $groups; do kill -s KILL -- "-$pg" 2>/dev/null; done
"""
_reaper: subprocess.Popen[bytes] | None = None
# A stderr line longer than this is cut: one line without an end must not grow
# without bound (nor be re-split on every read).
STDERR_LINE_MAX = 4096


class SpawnError(RuntimeError):
    """The agent could not be started; the message is advice for the user."""


def kill_all() -> None:
    """SIGKILL every agent process group still alive (for atexit and signals)."""
    for pgid in list(_live_groups):
        _signal_group(pgid, signal.SIGKILL)
        _tell_reaper(f"-{pgid}")
    _live_groups.clear()


def _tell_reaper(line: str) -> None:
    """Hand a group to the reaper (``"123"``) or take it back (``"-123"``)."""
    global _reaper
    try:
        if _reaper is None or _reaper.poll() is not None:
            _reaper = subprocess.Popen(
                ["/bin/sh", "-c", _REAPER],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", os.defpath)},  # it needs nothing else
            )
        assert _reaper.stdin is not None
        _reaper.stdin.write(line.encode() + b"\n")
        _reaper.stdin.flush()
    except OSError:
        pass  # no reaper: kill_all and aclose still end the groups on a normal exit


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class AgentProcess:
    """One agent subprocess with piped stdio.

    Args:
        name: the agent's name, for messages.
        cmd: argv; ``cmd[0]`` is looked up on PATH.
        env: added to the user's full environment (agents need PATH, HOME, API keys).
        cwd: working directory of the agent.
        on_stderr: called with each stderr line (for the protocol log).
        stderr_lines: how many stderr lines to keep for error messages.
    """

    def __init__(
        self,
        name: str,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
        stderr_lines: int = 200,
    ) -> None:
        self.name = name
        self.cmd = list(cmd)
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self._on_stderr = on_stderr
        self._stderr: collections.deque[str] = collections.deque(maxlen=stderr_lines)
        self._process: anyio.abc.Process | None = None
        self.returncode: int | None = None

    def __repr__(self) -> str:
        pid = self._process.pid if self._process else None
        state = "exited" if self.returncode is not None else ("running" if pid else "new")
        return f"<AgentProcess {self.name} {state} pid={pid}>"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        assert self._process is not None and self._process.stdin is not None
        return self._process.stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        assert self._process is not None and self._process.stdout is not None
        return self._process.stdout

    def stderr_tail(self, count: int = 20) -> list[str]:
        """The last ``count`` lines the agent wrote to stderr."""
        return list(self._stderr)[-count:]

    async def start(self) -> None:
        """Spawn the process.

        Raises:
            SpawnError: not installed / not on PATH / not executable / bad cwd.
        """
        program = self.cmd[0]
        if os.sep not in program and shutil.which(program, path=self.env.get("PATH")) is None:
            raise SpawnError(f"agent {self.name!r}: {program!r} is not installed or not on PATH")
        if self.cwd is not None and not os.path.isdir(self.cwd):
            raise SpawnError(f"agent {self.name!r}: working directory {self.cwd!r} does not exist")
        try:
            self._process = await anyio.open_process(
                self.cmd, env=self.env, cwd=self.cwd, start_new_session=True
            )
        except FileNotFoundError:
            raise SpawnError(f"agent {self.name!r}: {program!r} not found") from None
        except PermissionError:
            raise SpawnError(f"agent {self.name!r}: {program!r} is not executable") from None
        except OSError as err:
            raise SpawnError(f"agent {self.name!r}: cannot start {program!r}: {err}") from None
        _live_groups.add(self._process.pid)
        _tell_reaper(str(self._process.pid))

    async def drain_stderr(self) -> None:
        """Read stderr into the ring until the agent closes it. Run as a task."""
        assert self._process is not None and self._process.stderr is not None
        line = bytearray()  # the line being read, cut at STDERR_LINE_MAX
        while data := await receive(self._process.stderr):
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                self._keep_stderr(bytes(_bounded(line, data[start:end])))
                line.clear()
                start = end + 1
            _bounded(line, data[start:])
        if line:
            self._keep_stderr(bytes(line))

    def _keep_stderr(self, line: bytes) -> None:
        self._stderr.append(line.decode("utf-8", "replace").rstrip("\r"))
        if self._on_stderr is not None:
            self._on_stderr(line)

    async def wait(self) -> int:
        """Wait for the agent to exit; returns its exit code."""
        assert self._process is not None
        self.returncode = await self._process.wait()
        return self.returncode

    async def aclose(self, grace: float = 2.0) -> None:
        """End the agent's whole process group: close stdin, SIGTERM, then SIGKILL."""
        process = self._process
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            if process.returncode is None:
                _signal_group(process.pid, signal.SIGTERM)
                with anyio.move_on_after(grace):
                    await process.wait()
            # The group may outlive its leader (a shell's children): always finish it.
            _signal_group(process.pid, signal.SIGKILL)
            await process.wait()
            self.returncode = process.returncode
            _live_groups.discard(process.pid)
            _tell_reaper(f"-{process.pid}")
            await process.aclose()


def _bounded(line: bytearray, more: bytes) -> bytearray:
    """``line`` with as much of ``more`` as fits in :data:`STDERR_LINE_MAX`."""
    room = STDERR_LINE_MAX - len(line)
    if room > 0:
        line += more[:room]
    return line


def agent_cwd(config: AgentConfig, cwd: str) -> str:
    """The agent's working directory: its own option, else the editor's."""
    return os.path.abspath(config.cwd or cwd)


def agent_process(name: str, config: AgentConfig, cwd: str, log: ProtocolLog) -> AgentProcess:
    """The (unstarted) process of agent ``name``; its stderr goes to the protocol log."""
    return AgentProcess(
        name,
        config.cmd,
        env=config.env,
        cwd=agent_cwd(config, cwd),
        on_stderr=lambda line: log.add(name, "!!", line),
    )
