"""The agent subprocess: spawn, stderr ring, and a kill that leaves no orphans.

Each agent runs in its own process group (``start_new_session``) so closing it
also ends whatever it spawned (shells, language servers, MCP servers). Every
live group is remembered so :func:`kill_all` can end them from ``atexit`` or a
signal handler, when no event loop is left to await anything. And since neither
runs when this process is killed outright, a reaper outlives it: a small shell
in a session of its own that holds every live group and SIGKILLs them once this
process is gone (its end of the reaper's stdin closes, however it ended).

A group is signalled only while it is known to be ours (decision 0036): once
its leader is reaped, its pid may be handed to a stranger. Where the kernel
signals a group through the leader's pidfd (Linux 6.9), the group is named by
the process itself, never by a number, so it stays reachable after the leader
exits; elsewhere a group is signalled while its leader is unreaped (its pidfd
tells, else the exit code not yet collected) and dropped the moment it is. The
reaper, a shell holding numbers, lets go of a group when its leader is reaped.
"""

from __future__ import annotations

__all__ = ["AgentProcess", "SpawnError", "agent_cwd", "agent_process", "kill_all"]

import collections
import errno
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

_live_groups: dict[int, _Group] = {}  # by the leader's pid
# Lines on stdin: a group id to hold, or -id to let go. At EOF it kills what it holds.
# Builtins only: it forks nothing while it runs (a fork would take a pid).
_REAPER = """
trap '' HUP INT TERM
groups=""
while read -r pg; do
  case "$pg" in
    -*) kept=""; for g in $groups; do [ "$g" = "${pg#-}" ] || kept="$kept $g"; done
        groups=$kept ;;
    *) groups="$groups $pg" ;;
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
    for group in list(_live_groups.values()):
        group.signal(signal.SIGKILL)
        group.drop()


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


# pidfd_send_signal's flag for "the process group of this process" (Linux 6.9).
_PIDFD_SIGNAL_PROCESS_GROUP = 4
# Whether this kernel takes that flag; None until the first try.
_pidfd_groups: bool | None = None


def _child_pidfd(pid: int) -> int | None:
    """A pidfd of our child ``pid``; None where there are no pidfds (not Linux, or
    before 5.3) or when it has exited and been reaped already (asyncio reaps at once):
    then the number may be a stranger's, which its parent says."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        signal.pidfd_send_signal(fd, 0)  # still the process read above
    except (OSError, ValueError, IndexError):
        parent = -1
    if parent == os.getpid():
        return fd
    os.close(fd)
    return None


class _Group:
    """The process group an agent leads, signalled only while known to be ours."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.pid = process.pid
        self._process = process
        self._held = False  # by the reaper
        self._pidfd = _child_pidfd(self.pid)

    def __repr__(self) -> str:
        return f"<_Group {self.pid} pidfd={self._pidfd}>"

    def hold(self) -> None:
        """Remember the group, and hand it to the reaper."""
        _live_groups[self.pid] = self
        self._held = True
        _tell_reaper(str(self.pid))

    def _let_go(self) -> None:
        if self._held:
            self._held = False
            _tell_reaper(f"-{self.pid}")

    @property
    def named_by_pidfd(self) -> bool:
        """Whether the kernel signals this group through the leader's pidfd: then
        it reaches the group's own members even after the leader is reaped."""
        return self._pidfd is not None and _pidfd_groups is not False

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the group, if it is still ours (see the module docstring)."""
        global _pidfd_groups
        if self._pidfd is not None:
            if _pidfd_groups is not False:
                try:
                    signal.pidfd_send_signal(self._pidfd, sig, None, _PIDFD_SIGNAL_PROCESS_GROUP)
                    _pidfd_groups = True
                    return
                except OSError as err:
                    if err.errno != errno.EINVAL or _pidfd_groups:
                        return  # ESRCH: none of the group is left
                    _pidfd_groups = False  # a kernel before 6.9
            try:
                signal.pidfd_send_signal(self._pidfd, 0)  # a zombie leader counts
            except OSError:
                return  # reaped: its pid may be anyone's now
        elif self._process.returncode is not None:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def reaped(self) -> None:
        """The leader was reaped: the reaper lets go of its pid; only a group named
        by the pidfd is still signalled (by :meth:`AgentProcess.aclose` and
        :func:`kill_all`)."""
        if self.named_by_pidfd:
            self._let_go()
        else:
            self.drop()

    def drop(self) -> None:
        """Forget the group: no more signals to it, from here or the reaper."""
        self._let_go()
        if _live_groups.get(self.pid) is self:
            del _live_groups[self.pid]
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


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
        self._group: _Group | None = None
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
        self._group = _Group(self._process)
        self._group.hold()

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
        """Wait for the agent to exit; returns its exit code. Also run as a task
        from the start, so that a leader reaped is let go of at once."""
        assert self._process is not None
        self.returncode = await self._process.wait()
        if self._group is not None:
            self._group.reaped()
        return self.returncode

    async def aclose(self, grace: float = 2.0) -> None:
        """End the agent's whole process group: close stdin, SIGTERM, then SIGKILL."""
        process, group = self._process, self._group
        if process is None or group is None:
            return
        with anyio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            if process.returncode is None:
                group.signal(signal.SIGTERM)
                with anyio.move_on_after(grace):
                    await self.wait()
            # The group may outlive its leader (a shell's children): finish it while
            # it is known to be ours.
            group.signal(signal.SIGKILL)
            await self.wait()
            group.drop()
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
