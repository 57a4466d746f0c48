"""The agent subprocess: spawn (or the first agent's adoption), stderr ring, and a
kill that ends its whole process group (acp_nvim/client/agent/groups.py).
"""

from __future__ import annotations

__all__ = ["AgentProcess", "SpawnError", "agent_process"]

import collections
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import IO

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from acp_nvim.client.agent import first
from acp_nvim.client.agent.groups import Group
from acp_nvim.client.config import AgentConfig, agent_cwd
from acp_nvim.client.log import ProtocolLog
from acp_nvim.protocol.streams import receive

# A stderr line longer than this is cut: one line without an end must not grow
# without bound (nor be re-split on every read).
STDERR_LINE_MAX = 4096
# What a failure shows of the lines the agent wrote on stdout that were no JSON (a
# banner, a login prompt, an error before it hung): the last few, cut short.
STDOUT_TEXT_LINES = 3
STDOUT_TEXT_MAX = 200


class SpawnError(RuntimeError):
    """The agent could not be started; the message is advice for the user."""


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
        self._stdout_text: collections.deque[str] = collections.deque(maxlen=STDOUT_TEXT_LINES)
        self._process: anyio.abc.Process | None = None
        self._group: Group | None = None
        self.returncode: int | None = None
        # Stopped by us because it closed its stdout (the protocol) but lived on.
        self.output_closed = False

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

    def keep_stdout_text(self, line: bytes) -> None:
        """Keep a line the agent wrote on stdout that was no JSON, trimmed and cut
        to :data:`STDOUT_TEXT_MAX` characters."""
        text = line[: STDOUT_TEXT_MAX * 4].decode("utf-8", "replace").strip()
        if len(text) > STDOUT_TEXT_MAX:
            text = text[:STDOUT_TEXT_MAX] + "…"
        if text:
            self._stdout_text.append(text)

    def printed(self) -> list[str]:
        """What the agent printed beside the protocol, for a failure's message: its
        stderr tail, then its last lines on stdout that were no JSON."""
        return [*self.stderr_tail(), *(f"stdout: {text}" for text in self._stdout_text)]

    async def start(self) -> None:
        """Spawn the process, or take over the first agent when it is this one
        (acp_nvim/client/agent/first.py).

        Raises:
            SpawnError: not installed / not on PATH / not executable / bad cwd.
        """
        first_agent = first.claim(self.cmd, self.env, self.cwd)
        if first_agent is not None:
            self._process, self._group = PipedProcess(first_agent.popen), first_agent.group
            return
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
            interpreter = _interpreter(shutil.which(program, path=self.env.get("PATH")))
            why = f"its interpreter {interpreter} is not installed" if interpreter else "not found"
            raise SpawnError(f"agent {self.name!r}: {program!r} {why}") from None
        except PermissionError:
            raise SpawnError(f"agent {self.name!r}: {program!r} is not executable") from None
        except OSError as err:
            raise SpawnError(f"agent {self.name!r}: cannot start {program!r}: {err}") from None
        self._group = Group(self._process)
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


def agent_process(name: str, config: AgentConfig, cwd: str, log: ProtocolLog) -> AgentProcess:
    """The (unstarted) process of agent ``name``; its stderr goes to the protocol log."""
    return AgentProcess(
        name,
        config.cmd,
        env=config.env,
        cwd=agent_cwd(config, cwd),
        on_stderr=lambda line: log.add(name, "!!", line),
    )


class PipedProcess(anyio.abc.Process):
    """A process started before the event loop existed (the first agent), driven by it:
    its pipes read and written without blocking as the loop says they are ready, its
    exit heard through a pidfd (else a thread waits for it)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        self._popen = popen
        self._stdin = _PipeSender(popen.stdin)
        self._stdout = _PipeReceiver(popen.stdout)
        self._stderr = _PipeReceiver(popen.stderr)
        self._waiting = anyio.Lock()

    async def wait(self) -> int:
        async with self._waiting:  # one waits for the exit, the others after it
            while (code := self._popen.poll()) is None:
                await _exited(self._popen)
        return code

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, sig: int) -> None:
        self._popen.send_signal(sig)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream:
        return self._stderr

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for pipe in (self._stdin, self._stdout, self._stderr):
                await pipe.aclose()
            await self.wait()


async def _exited(popen: subprocess.Popen[bytes]) -> None:
    """Return once ``popen`` has exited (it is not reaped here)."""
    try:
        pidfd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):  # no pidfds here, or it is reaped already
        await anyio.to_thread.run_sync(popen.wait, abandon_on_cancel=True)
        return
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


class _Pipe:
    """One end of a pipe, non-blocking; the loop says when it is ready."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        os.set_blocking(pipe.fileno(), False)

    def _fileno(self) -> int:
        if self._pipe.closed:
            raise anyio.ClosedResourceError
        return self._pipe.fileno()

    async def aclose(self) -> None:
        if not self._pipe.closed:
            anyio.notify_closing(self._pipe.fileno())
            self._pipe.close()


# A cancellation is taken before bytes move, never after: bytes read or written are
# never lost to one. A call that did not wait still lets the loop's other tasks run.


class _PipeReceiver(_Pipe, anyio.abc.ByteReceiveStream):
    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            try:
                data = os.read(self._fileno(), max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fileno())
                waited = True
                continue
            if not waited:
                await anyio.lowlevel.cancel_shielded_checkpoint()
            if not data:
                raise anyio.EndOfStream
            return data


class _PipeSender(_Pipe, anyio.abc.ByteSendStream):
    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        view, waited = memoryview(item), False
        while view:
            try:
                view = view[os.write(self._fileno(), view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fileno())
                waited = True
            except BrokenPipeError as err:
                raise anyio.BrokenResourceError from err
        if not waited:
            await anyio.lowlevel.cancel_shielded_checkpoint()


def _interpreter(path: str | None) -> str | None:
    """The program a script's ``#!`` line names, if ``path`` is one: the file is
    there, so a start that found nothing did not find that."""
    try:
        with open(path or "", "rb") as script:
            line = script.readline(256)
    except OSError:
        return None
    words = line[2:].split() if line.startswith(b"#!") else []
    return words[0].decode(errors="replace") if words else None
