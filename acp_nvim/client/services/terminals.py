"""Terminals: ACP v1 ``terminal/*`` commands and agent-owned display terminals.

A command terminal (ACP v1 ``terminal/*``) runs a real command in an editor
terminal buffer (a PTY the user can open and watch); the editor sends its raw
output back in batches (:meth:`Terminals.feed`), kept here in a bounded byte
buffer that answers the agent's output requests and feeds the live tail shown
in tool call blocks. A display terminal (ACP v2 ``terminal_update`` /
``terminal_output_chunk``, or a v1 tool call's ``_meta.terminal_output``; see
:class:`acp_nvim.client.agent.sessions.TerminalSink`) has no process: the agent
sends the output and the editor shows it in an input-less terminal buffer.

Both keep raw bytes and derive text only when it is shown or asked for, so a
UTF-8 character or an escape sequence split across chunks is whole by then;
what goes to a display terminal's buffer passes a :class:`ChunkDecoder` first.
Keys naming terminal buffers in the editor are unique editor-wide; a v1
terminal's id is its key.

Not here: terminal emulation for the transcript tail (escapes are stripped and
a carriage return only keeps the text after it), and input from the agent to a
command (ACP has none).
"""

from __future__ import annotations

__all__ = ["CommandOutput", "Terminals", "tail_lines"]

import base64
import codecs
import logging
import os
import shlex
import signal
from collections.abc import Mapping
from typing import Any

import anyio
import msgspec
from msgspec import UnsetType

from acp_nvim.client.editor import EditorError
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.services.terminal_keys import new_key
from acp_nvim.client.session.chat import Chat, muted
from acp_nvim.client.session.model import ExitStatus, TerminalView
from acp_nvim.client.tasks import Tasks
from acp_nvim.client.text import ChunkDecoder, strip_ansi, truncate_from_start, utf8_tail

log = logging.getLogger("acp_nvim")

# Raw bytes kept without an ``outputByteLimit``: escape sequences make raw output
# bigger than the text it yields, so a limit keeps twice its size (plus slack).
DEFAULT_RAW_CAP = 4 * 1024 * 1024
_SLACK = 64 * 1024
# The tool call block shows this many last lines, computed from this many bytes.
TAIL_LINES = 10
_TAIL_BYTES = 16 * 1024
_TAIL_WIDTH = 400
# Re-render a tool call block showing a terminal at most this often.
REFRESH_INTERVAL = 0.05
# Waiting longer than this for the editor to stop terminals would only hang a close.
_STOP_TIMEOUT = 2.0


class CommandOutput(msgspec.Struct):
    """A command's output as an agent asks for it: text, whether it was cut, exit."""

    text: str
    truncated: bool
    exit_status: ExitStatus | None


class _Output:
    """A bounded raw byte buffer: the newest ``cap`` bytes, cut after a newline when
    one is near so no half escape sequence starts it, else at a character boundary."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.raw = bytearray()
        self.dropped = False

    def append(self, data: bytes) -> None:
        self.raw += data
        # Trim in steps of a quarter cap: each trim copies the buffer.
        if len(self.raw) > self.cap + self.cap // 4:
            self._trim()

    def replace(self, data: bytes) -> None:
        self.raw = bytearray(data)
        self.dropped = False
        self._trim()

    def _trim(self) -> None:
        excess = len(self.raw) - self.cap
        if excess <= 0:
            return
        newline = self.raw.find(b"\n", excess, excess + 4096)
        if newline >= 0:
            cut = newline + 1
        else:
            cut = len(self.raw) - len(utf8_tail(bytes(self.raw), self.cap))
        del self.raw[:cut]
        self.dropped = True

    def text(self, *, ended: bool = False) -> str:
        """All kept output as text; an incomplete character at the end waits for its
        rest, unless the command ``ended``: then nothing comes, it is U+FFFD."""
        return codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(self.raw), ended)


def tail_lines(
    raw: bytes | bytearray, count: int = TAIL_LINES, *, ended: bool = False
) -> list[str]:
    """The last ``count`` displayable lines of raw terminal output (``ended``: of a
    command that has ended, see :meth:`_Output.text`).

    Escapes are stripped; a carriage return inside a line keeps only what follows
    it (a progress bar shows its last frame). A line cut by the byte window is
    dropped rather than shown half.
    """
    # Only the window is copied: the buffer may hold megabytes.
    window = utf8_tail(bytes(raw[-(_TAIL_BYTES + 4) :]), _TAIL_BYTES)
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(window, ended)
    lines = text.split("\n")
    if len(window) < len(raw):
        lines = lines[1:]
    if lines and lines[-1].strip("\r") == "":
        lines.pop()
    shown = [strip_ansi(line.rstrip("\r").rsplit("\r", 1)[-1]) for line in lines[-count:]]
    return [line[:_TAIL_WIDTH] for line in shown]


def _label(command: str | None) -> str:
    """One line naming the command (shell lines may span several)."""
    text = " ⏎ ".join(line for line in (command or "").splitlines() if line.strip())
    return text[:200]


class _Shown(msgspec.Struct, eq=False):
    """A terminal as the transcript shows it: its chat, wire id, and raw output."""

    key: str
    terminal_id: str
    chat: Chat
    output: _Output
    view: TerminalView

    def refresh(self) -> None:
        self.view.lines = tail_lines(self.output.raw, ended=self.view.exit_status is not None)
        self.chat.on_terminal(self.terminal_id)


class _Command(_Shown, eq=False):
    """A command running in an editor terminal buffer (ACP v1 ``terminal/*``)."""

    session_id: str = ""
    turn: int = 0  # the chat's turn that started it (Chat.turn)
    limit: int | None = None
    pid: int | None = None
    status: ExitStatus | None = None
    exited: anyio.Event = msgspec.field(default_factory=anyio.Event)
    released: bool = False
    kill_sent: bool = False
    # While the editor can make no terminal (Neovim's command-line window): cancelled
    # by a stop, the command never starts (Terminals._start).
    waiting: anyio.CancelScope | None = None


class _Display(_Shown, eq=False):
    """A display terminal: output from the agent, waiting to be written to the editor.

    The editor's terminal shows a character split across two writes as two
    replacement marks, so text goes out only whole (the decoder holds the rest).
    """

    decoder: ChunkDecoder = msgspec.field(default_factory=lambda: ChunkDecoder(strip=False))
    pending: list[str] = msgspec.field(default_factory=list)
    reset: bool = False

    def add(self, text: str) -> None:
        self.output.append(text.encode("utf-8", "surrogatepass"))
        self.pending.append(text)


class Terminals:
    """The terminals of one agent connection.

    ``create`` ... ``release`` serve commands (ACP v1 ``terminal/*``); the ``update`` /
    ``chunk`` methods make this the connection's display-terminal sink (ACP v2). ``start``
    must run first: refreshes of the transcript are throttled on its task group.

    Args:
        chats: the connection's chats by session id (shared, not copied). A command
            that names no directory runs in its chat's (``chat.workspace.cwd``).
    """

    def __init__(self, chats: Mapping[str, Chat]) -> None:
        self._chats = chats
        self._commands: dict[str, _Command] = {}  # by key (= v1 terminal id)
        self._displays: dict[tuple[int, str], _Display] = {}  # by (chat id, terminal id)
        self._tasks: Tasks | None = None
        self._dirty: dict[int, _Shown] = {}
        self._refresh_scheduled = False

    def __repr__(self) -> str:
        running = sum(1 for c in self._commands.values() if c.status is None)
        return (
            f"<Terminals {len(self._commands)} commands ({running} running), "
            f"{len(self._displays)} displays>"
        )

    @property
    def running(self) -> bool:
        """Whether a command it started has not ended yet."""
        return any(c.status is None for c in self._commands.values())

    def start(self, tasks: Tasks) -> None:
        self._tasks = tasks

    # -- commands (ACP v1 terminal/*) ----------------------------------------------

    async def create(
        self,
        session_id: str,
        command: str,
        args: list[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> str:
        """Start the command in a new editor terminal; returns its id at once.

        Without ``args`` the command is a shell line, run by the user's shell (real
        agents send whole lines); with ``args`` it is run directly. No ``cwd``
        means the session's. ``limit`` bounds the output kept (bytes).

        Raises:
            ServiceError: a bad cwd or limit, a NUL byte, a turn that ended here (see
                :meth:`abandon`), or the editor could not start it.
        """
        chat = self._chat(session_id)
        if muted(chat):
            raise ServiceError("the turn was cancelled: it runs no more commands", "denied")
        cwd = cwd or chat.workspace.cwd
        if not os.path.isabs(cwd):
            raise ServiceError(f"cwd must be an absolute path: {cwd!r}")
        if not os.path.isdir(cwd):
            raise ServiceError(f"cwd is not a directory: {cwd!r}")
        if limit is not None and limit < 0:
            raise ServiceError("outputByteLimit must be 0 or more")
        cmd: str | list[str] = [command, *args] if args else command
        label = shlex.join(cmd) if isinstance(cmd, list) else cmd
        key = new_key()
        cap = DEFAULT_RAW_CAP if limit is None else max(2 * limit, limit + _SLACK)
        view = TerminalView(key, _label(label))
        term = _Command(
            key, key, chat, _Output(cap), view, session_id=session_id, turn=chat.turn, limit=limit
        )
        await self._start(term, cmd, cwd, dict(env or {}), label)
        return key

    async def run(
        self, chat: Chat, argv: list[str], env: Mapping[str, str], label: str
    ) -> ExitStatus:
        """Run ``argv`` in a terminal the user sees and types in (a login the agent's
        program runs interactively); returns how it ended. Its tool call block in
        the chat names it ``label``.

        Raises:
            ServiceError: the editor could not start it.
        """
        key = new_key()
        view = TerminalView(key, _label(label))
        term = _Command(key, key, chat, _Output(DEFAULT_RAW_CAP), view)
        await self._start(term, argv, chat.workspace.cwd, dict(env), label, show=True)
        await term.exited.wait()
        term.released = True
        del self._commands[key]
        return term.status or ExitStatus()

    async def _start(
        self,
        term: _Command,
        cmd: str | list[str],
        cwd: str,
        env: dict[str, str],
        label: str,
        *,
        show: bool = False,
    ) -> None:
        """Have the editor start ``term``'s command; while it can make no terminal
        (Neovim's command-line window is open), once it can again.

        Raises:
            ServiceError: a NUL byte in it, the editor could not start it, or it was
                stopped first.
        """
        _refuse_nul(cmd, env)
        editor = term.chat.editor
        # Known before the editor starts it: its first output may arrive at once.
        self._commands[term.key] = term
        term.chat.session.terminals[term.key] = term.view
        try:
            while (
                pid := await editor.open_terminal(
                    term.key, cmd, cwd, env, chat=term.chat.id, show=show
                )
            ) is None:
                await self._until_allowed(term, label)
        except EditorError as err:
            self._forget(term)
            raise ServiceError(f"cannot run {label!r}: {err}", "internal") from None
        term.pid = pid

    async def _until_allowed(self, term: _Command, label: str) -> None:
        """Wait until the editor may make a terminal. Nothing of ``term`` runs yet: a
        stop (cancelling ``term.waiting``) or a cancel of this wait forgets it."""
        scope = term.waiting = anyio.CancelScope()
        try:
            with scope:
                await term.chat.editor.terminal_allowed()
            if scope.cancel_called:
                raise ServiceError(f"{label!r} was stopped before it could start", "denied")
        except BaseException:
            self._forget(term)
            raise
        finally:
            term.waiting = None

    def _forget(self, term: _Command) -> None:
        self._commands.pop(term.key, None)
        term.chat.session.terminals.pop(term.key, None)

    def output(self, session_id: str, terminal_id: str) -> CommandOutput:
        """The command's output so far, escape-free and cut to its limit."""
        term = self._command(session_id, terminal_id)
        text = strip_ansi(term.output.text(ended=term.status is not None))
        truncated = term.output.dropped
        if term.limit is not None:
            text, cut = truncate_from_start(text, term.limit)
            truncated = truncated or cut
        return CommandOutput(text, truncated, term.status)

    async def wait_for_exit(self, session_id: str, terminal_id: str) -> ExitStatus:
        term = self._command(session_id, terminal_id)
        await term.exited.wait()
        return term.status or ExitStatus()

    async def kill(self, session_id: str, terminal_id: str) -> None:
        await self._stop([self._command(session_id, terminal_id)])

    async def release(self, session_id: str, terminal_id: str) -> None:
        """Kill the command if it runs and forget the id; the buffer and the tool
        call's view of it stay for the user."""
        term = self._command(session_id, terminal_id)
        term.released = True
        await self._stop([term])
        if term.status is not None:
            del self._commands[term.key]

    async def abandon(self, chat: Chat) -> None:
        """``chat``'s running turn ended here while the agent goes on with it (it
        ignored the cancel): the commands that turn started are killed, as by
        ``terminal/kill``. Their buffers and output stay, and the agent may still
        read them; while its session is muted it starts no more (:meth:`create`)."""
        await self._stop([t for t in self._of_turn(chat) if not t.released])

    def cancel(self, chat: Chat) -> None:
        """``chat``'s turn was cancelled or is over: its commands still waiting for
        the editor (Neovim's command-line window) never start; the agent hears so."""
        for term in self._of_turn(chat):
            if term.waiting is not None:
                term.waiting.cancel()

    def _of_turn(self, chat: Chat) -> list[_Command]:
        return [t for t in self._commands.values() if t.chat is chat and t.turn == chat.turn]

    def _chat(self, session_id: str) -> Chat:
        chat = self._chats.get(session_id)
        if chat is None:
            raise ServiceError(f"unknown session {session_id}", "not_found")
        return chat

    def _command(self, session_id: str, terminal_id: str) -> _Command:
        term = self._commands.get(terminal_id)
        if term is None or term.released or term.session_id != session_id:
            raise ServiceError(f"unknown terminal {terminal_id}", "not_found")
        return term

    async def _stop(self, terms: list[_Command]) -> None:
        for term in terms:
            if term.waiting is not None:  # not started: it never will
                term.waiting.cancel()
        terms = [t for t in terms if t.waiting is None]
        running = [t for t in terms if t.status is None]
        for term in running:
            term.kill_sent = True
        keys = [t.key for t in running]
        if not keys:
            return
        with anyio.move_on_after(_STOP_TIMEOUT):
            try:
                await terms[0].chat.editor.stop_terminals(keys)
            except EditorError as err:
                log.warning("could not stop terminals %s: %s", keys, err)

    # -- from the editor -------------------------------------------------------------

    def feed(self, key: str, data: bytes = b"", exit_code: int | None = None) -> bool:
        """Output (and, once, the exit code) of terminal ``key``; False if not ours.

        The editor reports a death by signal as 128 + the signal number; after
        we stopped the command that is shown as the signal.
        """
        term = self._commands.get(key)
        if term is None:
            return False
        if data:
            term.output.append(data)
            self._mark(term)
        if exit_code is not None and term.status is None:
            term.status = _exit_status(exit_code, term.kill_sent)
            term.view.exit_status = term.status
            term.exited.set()
            self._dirty.pop(id(term), None)
            term.refresh()
            if term.released:
                del self._commands[key]
        return True

    # -- display terminals (the agent.sessions.TerminalSink protocol) --------------

    def update(
        self,
        chat: Chat,
        terminal_id: str,
        *,
        command: str | UnsetType | None,
        cwd: str | UnsetType | None,
        output: bytes | UnsetType | None,
        exit_status: dict[str, Any] | UnsetType | None,
    ) -> None:
        """Upsert a display terminal: UNSET leaves a field, None clears it, and
        ``output`` replaces every byte shown so far."""
        term = self._display(chat, terminal_id)
        if not isinstance(command, UnsetType):
            term.view.label = _label(command)
        if not isinstance(output, UnsetType):
            term.output.replace(b"")
            term.decoder.reset()
            term.pending, term.reset = [], True
            term.add(term.decoder.feed(base64.b64encode(output or b"").decode()))
        if not isinstance(exit_status, UnsetType):
            if exit_status is None:
                term.view.exit_status = None
            else:
                term.view.exit_status = ExitStatus(
                    exit_status.get("exit_code"), exit_status.get("signal")
                )
                term.add(term.decoder.flush())
        self._mark(term)

    def chunk(self, chat: Chat, terminal_id: str, data: str) -> None:
        """Append one base64 chunk, decoded on its own."""
        term = self._display(chat, terminal_id)
        try:
            term.add(term.decoder.feed(data))
        except ValueError as err:
            chat.on_info(unknown_update=f"terminal {terminal_id}: {err}")
            return
        self._mark(term)

    def append(self, chat: Chat, terminal_id: str, text: str) -> None:
        """Append output that came as text (v1's ``_meta.terminal_output``)."""
        term = self._display(chat, terminal_id)
        term.add(text)
        self._mark(term)

    def _display(self, chat: Chat, terminal_id: str) -> _Display:
        term = self._displays.get((chat.id, terminal_id))
        if term is None:
            key = new_key()
            view = TerminalView(key, "", display=True)
            term = _Display(key, terminal_id, chat, _Output(DEFAULT_RAW_CAP), view)
            self._displays[(chat.id, terminal_id)] = term
            chat.session.terminals[terminal_id] = view
        return term

    # -- throttled refresh -----------------------------------------------------------

    def _mark(self, term: _Shown) -> None:
        self._dirty[id(term)] = term
        if not self._refresh_scheduled and self._tasks is not None:
            self._refresh_scheduled = True
            self._tasks.start_soon(self._refresh_later)

    async def show_now(self, chat: Chat) -> None:
        """Show the output ``chat``'s terminals got since the last refresh now, in its
        transcript and in the display terminals' buffers: its turn ends, and the end
        (``AcpTurnEnd`` and a script's ``:AcpTerminal`` there, the history's write of
        the turn, an export or a close right after) must find it there."""
        shown = [term for term in self._dirty.values() if term.chat is chat]
        for term in shown:
            del self._dirty[id(term)]
        await self._show(shown)

    async def _refresh_later(self) -> None:
        await anyio.sleep(REFRESH_INTERVAL)
        self._refresh_scheduled = False
        dirty, self._dirty = list(self._dirty.values()), {}
        await self._show(dirty)

    @staticmethod
    async def _show(terms: list[_Shown]) -> None:
        for term in terms:
            term.refresh()
        for term in terms:
            if isinstance(term, _Display) and (term.pending or term.reset):
                data, reset = "".join(term.pending), term.reset
                term.pending, term.reset = [], False
                try:
                    await term.chat.editor.write_terminal(
                        term.key, data, chat=term.chat.id, reset=reset
                    )
                except EditorError as err:
                    log.warning("could not show terminal %s: %s", term.key, err)

    # -- session end -----------------------------------------------------------------

    async def end_session(self, chat: Chat) -> None:
        """The chat closed or goes on with another agent process (:AcpRestart): stop
        its commands. Their buffers stay; Neovim deletes them when the chat closes."""
        commands = [t for t in self._commands.values() if t.chat is chat]
        for key in [k for k, t in self._displays.items() if t.chat is chat]:
            del self._displays[key]
        for term in commands:
            term.released = True
        await self._stop(commands)
        for term in commands:
            if term.status is not None:
                self._commands.pop(term.key, None)

    async def end_all(self) -> None:
        """The agent is gone: stop every command still running (buffers stay)."""
        terms = list(self._commands.values())
        for term in terms:
            term.released = True
        await self._stop(terms)


def _exit_status(code: int, killed: bool) -> ExitStatus:
    if killed and 128 < code < 128 + 65:
        try:
            return ExitStatus(None, signal.Signals(code - 128).name)
        except ValueError:
            pass
    return ExitStatus(code, None)


def _refuse_nul(cmd: str | list[str], env: Mapping[str, str]) -> None:
    """No process can take a NUL byte in its argv or environment (Neovim's jobstart
    fails on it with a Lua stack trace): refused and named before anything starts. An
    env value is not quoted (:AcpLog redacts them)."""
    for word in [cmd] if isinstance(cmd, str) else cmd:
        if "\0" in word:
            raise ServiceError(f"{word!r} holds a NUL byte, which no program can take")
    for name, value in env.items():
        if "\0" in name + value:
            raise ServiceError(f"env {name!r} holds a NUL byte, which no program can take")
