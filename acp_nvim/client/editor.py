"""The Editor port: everything the protocol core asks of the editor.

The core calls these methods from its event loop. The Neovim implementation
(:mod:`acp_nvim.nvim.editor`) batches them into one ordered stream per flush,
so a ``render`` followed by an ``emit`` reaches the user in that order.
The in-memory fake the core tests use, ``RecordingEditor``, is in
tests/fakes/editor.py (``make lint`` holds it to this port).
"""

from __future__ import annotations

__all__ = [
    "AppendOp",
    "BlockLocation",
    "BlockOp",
    "BlockPermission",
    "BlockPermissionOption",
    "BlockPermissionWhy",
    "BufferState",
    "CutOp",
    "CutTurn",
    "DropOp",
    "EditOp",
    "Editor",
    "EditorError",
    "ElicitField",
    "ElicitGoneOp",
    "ElicitOp",
    "Event",
    "InputOp",
    "LspRequest",
    "PreviewFile",
    "PreviewHunk",
    "RefusedOp",
    "RenderOp",
    "Spent",
    "StatusFields",
    "StatusOp",
    "TurnOp",
    "TurnTokens",
    "UncutOp",
    "WriteError",
]

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

from acp_nvim.client.text import Eol, join_text

if TYPE_CHECKING:
    # Annotations only: the review package is imported once a chat needs it.
    from acp_nvim.review import LineEdit

# -- Render ops: what the core draws in a chat (``Editor.render``), each a map with
# named fields that crosses msgpack to Lua as it is. Lua handles every op in one
# table by its "op" (``M.ops`` of lua/acp/chat/init.lua); tests/nvim/test_contract.py
# holds that table to :data:`RenderOp`. TypedDicts, not Structs: the dicts go to
# pynvim untouched, with no work per op on the streaming path (decision 0032).


class _BlockOpRequired(TypedDict):
    op: Literal["block"]
    id: str
    kind: str
    lines: list[str]


class BlockOp(_BlockOpRequired, total=False):
    """Create a block of the transcript, or replace it whole: a message (``kind``
    user, agent or thought), a tool call (``tool``), a plan (``plan``) or a notice
    of the client (``turn``, ``changes``: the files a turn changed, ``error``,
    ``info``), drawn as ``lines``. With ``start``
    and ``end`` (offsets from its header, ``end`` exclusive) only those rows of a
    tool call's block are replaced (see ``view.ToolCallDrawing``). ``prefix``: what
    Lua puts before each line appended to it (a thought's ``"> "``). A tool call
    carries its ``status``, the rows of its ``locations`` and of its pending or
    answered ``permission`` prompt; ``locations`` only when their rows may have moved.
    ``turn``: the user's message that begins that turn of the shown branch (``<CR>``
    on it edits it). Kind ``compaction`` is the agent compacting its context.
    """

    prefix: str
    status: str
    locations: list[BlockLocation]
    permission: BlockPermission
    start: int
    end: int
    turn: int


class _BlockLocationRequired(TypedDict):
    row: int  # offset from the block's header
    path: str


class BlockLocation(_BlockLocationRequired, total=False):
    """A place a tool call works on: ``<CR>`` on its row opens it."""

    line: int


class _BlockPermissionRequired(TypedDict):
    id: str  # the request
    row: int  # of the prompt's first line, an offset from the block's header
    title: str  # the tool call's
    pending: bool


class BlockPermission(_BlockPermissionRequired, total=False):
    """A permission prompt in a tool call's block: while ``pending``, its ``options``
    (each on its row, with the key that answers it) and the ``preview`` of the files
    an edit would change (drawn in them by lua/acp/review/preview.lua)."""

    options: list[BlockPermissionOption]
    preview: list[PreviewFile]
    why: BlockPermissionWhy


class _BlockPermissionWhyRequired(TypedDict):
    option: str
    row: int


class BlockPermissionWhy(_BlockPermissionWhyRequired, total=False):
    """"Reject, and say why": ``key`` (none when the user turned it off) on row
    ``row`` answers with ``option`` and the reason the user gives
    (lua/acp/chat/permission.lua asks for it)."""

    key: str


class _BlockPermissionOptionRequired(TypedDict):
    id: str
    name: str
    row: int


class BlockPermissionOption(_BlockPermissionOptionRequired, total=False):
    kind: str
    key: str


class _PreviewHunkRequired(TypedDict):
    row: int
    count: int
    lines: list[str]


class PreviewHunk(_PreviewHunkRequired, total=False):
    """Rows ``[row, row + count)`` of the file now (0-based) become ``lines``; where
    ``held``, they stay and ``lines`` wait in the review as a conflict."""

    held: bool


class PreviewFile(TypedDict):
    path: str
    created: bool
    deleted: bool
    hunks: list[PreviewHunk]


class AppendOp(TypedDict):
    """Stream ``text`` onto the end of block ``id`` (after its last line; each new
    line gets the block's prefix). The streaming path: nothing else is sent per chunk."""

    op: Literal["append"]
    id: str
    text: str


class _SpentRequired(TypedDict):
    tokens: int  # the context's growth (negative after a compaction)


class Spent(_SpentRequired, total=False):
    """What a turn, or a session's turns, used (decision 0042)."""

    cost: dict[str, Any]  # {amount, currency}: the cost's rise


class _TurnTokensRequired(TypedDict):
    input: int
    output: int
    total: int


class TurnTokens(_TurnTokensRequired, total=False):
    """A turn's tokens as the agent counts them (v1's unstable ``PromptResponse.usage``):
    what its model read and wrote, not the context's growth (decision 0042)."""

    thought: int
    cached_read: int
    cached_write: int


class StatusFields(TypedDict, total=False):
    """The chat's state for its header, ``status()`` (lua/acp/init.lua, ``acp.Status``)
    and the pickers; a field sent as None is cleared."""

    state: str  # starting, ready, running, error, closed
    agent: str
    agent_title: str | None
    session_id: str
    protocol_version: int
    stop_reason: str
    error: str | None  # why the chat stopped (state error); cleared when ready again
    turn_state: str
    queued: int
    queue: list[str]  # the queued prompts' texts, oldest first
    title: str | None
    name: str | None  # the user's for the chat (:AcpChats, :AcpHistory), kept with it
    usage: dict[str, Any]  # {used, size, cost?: {amount, currency}, turn?, session?: Spent}
    commands: list[dict[str, Any]]  # {name, description, hint?}
    config_options: list[dict[str, Any]]  # {id, name, type, category, current, choices}
    # The current value of the settings of these categories (a name where it has one).
    mode: str | bool | None
    model: str | bool | None
    thought_level: str | bool | None
    login_methods: list[dict[str, Any]]  # {id, name, kind, vars}
    can_fork: bool
    # What a ready chat waits for before a prompt goes (it only queues): "rewind" (the
    # session a rewind goes on in), "branch" (a picked branch's session); else None.
    waiting: str | None
    # An agent process runs for the chat: set as it takes the chat (a reopened chat's:
    # at its first prompt or :AcpRestart), cleared as it exits or lets the chat go.
    connected: bool
    unknown_update: str  # the last update the client could not show
    # The chat's id in the chat history (``status().history``); None once deleted from it.
    history: int | None
    turns: list[str]  # the shown branch's prompts, a first line each (session.branches)
    # {id, current, turns, leaves_at, prompt, last_prompt, session_id} (Branches.listed)
    branches: list[dict[str, Any]]
    # Where the agent works (session.workspace): the session's directory, the roots,
    # and the worktree {path, branch, project} of a worktree chat.
    cwd: str
    roots: list[str]
    worktree: dict[str, str] | None


class StatusOp(StatusFields):
    """Set these fields of the chat's status (the others keep their values)."""

    op: Literal["status"]


class TurnOp(TypedDict):
    """Turn ``number`` of the shown branch began with prompt line ``prompt``: the status
    fields ``turns`` (it replaces that turn and any after it) and ``branches`` (its
    first entry, the shown branch, becomes ``branch``) are kept in step in place. A
    turn start sends no more than this in a chat of any length (decision 0110); a
    view change sends both fields whole (``StatusOp``)."""

    op: Literal["turn"]
    number: int
    prompt: str
    branch: dict[str, Any]


class MoreCommandsOp(TypedDict):
    """More of the chat's slash commands, after those its ``commands`` status field
    holds: a long list is sent in slices (``NvimEditor``'s batch budget)."""

    op: Literal["more_commands"]
    commands: list[dict[str, Any]]


class _InputOpRequired(TypedDict):
    op: Literal["input"]
    text: str


class InputOp(_InputOpRequired, total=False):
    """Put ``text`` back in the chat's input, after what is there (a queued prompt
    taken out to edit, or prompts the host could no longer send). ``queued``: the
    rank of the queued prompt it is (``Prompt.rank``): it goes before the queued
    prompts given back earlier that came after it in the queue."""

    queued: int


class ElicitField(TypedDict):
    """One value a form asks for (see ``services.elicitations.Field``)."""

    name: str
    type: str
    title: str
    required: bool
    description: str | None
    default: str | int | float | bool | list[str] | None
    choices: list[tuple[str, str]] | None
    minimum: float | None
    maximum: float | None


class _ElicitOpRequired(TypedDict):
    op: Literal["elicit"]
    id: str  # the request, for the answer (``App.elicit``)
    message: str
    mode: Literal["form", "url"]
    fields: list[ElicitField]
    url: str | None


class ElicitOp(_ElicitOpRequired, total=False):
    """Ask the user what the agent asks (lua/acp/chat/elicit.lua): a form's
    ``fields``, or to open ``url`` on ``host`` (its host name, shown to check)."""

    host: str


class ElicitGoneOp(TypedDict):
    """The agent's question ``id`` is no longer asked (its turn ended): drop it
    unless the user is answering it."""

    op: Literal["elicit_gone"]
    id: str


class CutTurn(TypedDict):
    key: str  # the turn's key: its user message's
    block: str  # the block it begins with


class CutOp(TypedDict):
    """Take the blocks from the first of ``turns`` to the end out of view, kept by
    turn until an ``uncut`` (a rewind leaves them as a branch; decision 0041). The
    turns shown differ from turn ``since`` on: an edit of one of them ends."""

    op: Literal["cut"]
    turns: list[CutTurn]
    since: int


class UncutOp(TypedDict):
    """Put the kept blocks of ``turns`` (keys of ``cut``) back at the end, in order."""

    op: Literal["uncut"]
    turns: list[str]


class DropOp(TypedDict):
    """Take ``blocks`` out of the transcript for good, wherever they are: the notes of
    a view left before a turn was sent in it, the mark of a place no branch leaves
    any more (decision 0041)."""

    op: Literal["drop"]
    blocks: list[str]


class EditOp(TypedDict):
    """Put turn ``turn``'s prompt ``text`` in the input: sent, it goes from before
    that turn (a rewind, then the send)."""

    op: Literal["edit"]
    turn: int
    text: str


class RefusedOp(TypedDict):
    """What the failed chat was opened for cannot be (``error``: why): a session
    the agent does not know, a directory or worktree that cannot be made. The chat
    closes and gives its windows back to the chat it took them from, unless its
    input holds text."""

    op: Literal["refused"]
    error: str


RenderOp = (
    BlockOp
    | AppendOp
    | StatusOp
    | TurnOp
    | MoreCommandsOp
    | InputOp
    | ElicitOp
    | ElicitGoneOp
    | CutOp
    | UncutOp
    | DropOp
    | EditOp
    | RefusedOp
)
# The public events (``User`` autocmds), every one documented in doc/acp.txt
# (tests/nvim/test_surface.py holds the two together).
Event = Literal[
    "AcpSessionReady",
    "AcpTurnStart",
    "AcpTurnEnd",
    "AcpToolCall",
    "AcpChangesRecorded",
    "AcpQueued",
    "AcpSessionList",
    "AcpSessionDeleted",
    "AcpPermissionRequest",
    "AcpError",
]


# What the editor's language servers are asked (``Editor.lsp``).
LspRequest = Literal[
    "definition", "references", "hover", "document_symbols", "workspace_symbols"
]  # fmt: skip


class EditorError(Exception):
    """The editor could not do what was asked (a Lua error, a vanished buffer)."""


class WriteError(EditorError):
    """The editor could not write a buffer to its file, which is untouched; the
    buffer is as it was before the edit that came with the save."""


class BufferState:
    """A loaded file buffer: its lines, how :write would end them, and its changedtick.

    Give ``lines``, or ``joined`` (the lines joined with ``\\n``, none holding one):
    then ``text`` needs no list of lines, which for a 100k-line buffer costs more
    than the whole rest of an ``fs/read_text_file``; ``lines`` splits on first use.
    ``readonly``: 'readonly' or 'nomodifiable' is set. ``moved``: a checked read
    found the file changed on disk behind the buffer's unsaved edits. ``bom``:
    :write starts the file with a byte order mark ('bomb'). ``empty``: the buffer
    holds no line at all, which :write writes as the empty file; Neovim shows it as
    one empty line, as it does the line that :write ends with a newline.
    """

    def __init__(
        self,
        lines: list[str] | None = None,
        eol: Eol = "\n",
        final_newline: bool = True,
        modified: bool = False,
        tick: int = 0,
        *,
        joined: str | None = None,
        readonly: bool = False,
        moved: bool = False,
        bom: bool = False,
        empty: bool = False,
    ) -> None:
        if (lines is None) == (joined is None):
            raise TypeError("BufferState needs exactly one of lines and joined")
        self._lines = lines
        self._joined = joined
        self.eol, self.final_newline, self.modified, self.tick = eol, final_newline, modified, tick
        self.readonly, self.moved, self.bom, self.empty = readonly, moved, bom, empty

    def __repr__(self) -> str:
        return f"<BufferState tick {self.tick}{' modified' if self.modified else ''}>"

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            assert self._joined is not None
            self._lines = self._joined.split("\n")
        return self._lines

    @property
    def text(self) -> str:
        """The text :write would put on disk."""
        if self.empty:
            return ""
        if self._lines is None and self._joined is not None:
            body = self._joined if self.eol == "\n" else self._joined.replace("\n", self.eol)
            return body + self.eol if self.final_newline else body
        return join_text(self.lines, self.eol, self.final_newline)


class Editor(Protocol):
    """What the core needs from an editor. Methods must not block."""

    def render(self, chat: int, ops: list[RenderOp]) -> None:
        """Queue render ops for chat ``chat`` (see :data:`RenderOp` for each)."""

    def emit(self, event: Event, data: dict[str, Any]) -> None:
        """Fire a public event (a ``User`` autocmd in Neovim)."""

    def notify(self, message: str, level: str = "error") -> None:
        """Tell the user one short line (``acp:`` prefixed by the editor)."""

    def review(self, chat: int, summary: dict[str, Any]) -> None:
        """Queue the review state of chat ``chat`` (``{turn, files}``, plain data)."""

    def baseline(self, chat: int, data: dict[str, Any]) -> None:
        """Queue a file's text before a turn of chat ``chat``, to diff the file against
        (``{path, turn, lines}``, lines without terminators)."""

    def reply(self, token: int, result: Any, error: str | None = None) -> None:
        """Answer the editor's call ``token`` (one it made without waiting for the
        answer) with ``result``, or with ``error``, the line to show."""

    def hold(self) -> Callable[[], None]:
        """Keep what is queued from now on until the returned function is called (once
        or more), then send it as usual: a turn start's drawing waits for its prompt
        to be written to the agent."""

    async def drawn(self) -> None:
        """Return once everything queued to be drawn has been drawn: work that can wait
        (the history's write) waits for it, and leaves the cores to the editor while it
        draws a long message (decision 0072)."""

    async def room(self) -> None:
        """Return once what is queued to be drawn is no more than the editor draws at a
        time: an agent's stream is read no faster than it is drawn (decision 0072)."""

    async def read_buffer(
        self, path: str, *, load: bool = False, check: bool = False
    ) -> BufferState | None:
        """The loaded buffer of absolute ``path``, or None.

        With ``load``, a buffer without a window is created for the file first.
        With ``check``, the buffer is first compared with its file as Neovim's
        :checktime does: reloaded when unmodified and the file changed, else
        ``moved`` tells that the file changed behind its unsaved edits.

        Raises:
            EditorError: ``load`` and the file cannot be loaded (a swap file of
                it exists), saying why.
        """

    async def edit_buffer(
        self,
        path: str,
        tick: int,
        edits: list[LineEdit],
        *,
        save: bool,
        disk_changed: bool = False,
        disk_before: tuple[int, int] | None = None,
    ) -> int | None:
        """Apply ``edits`` (bottom to top) as one undo step if the buffer is still at ``tick``.

        Writes the buffer when ``save``, unless its file changed on disk since it
        was read (then it is reloaded instead, and None returned). ``disk_changed``:
        the file just changed behind the buffer's unsaved edits (the caller wrote it,
        or the agent did), which the editor then takes as seen; ``disk_before``: its
        (size, mtime_ns) before that change. When the editor last read or wrote the
        file as it was then, the buffer now holds all that changed in the file, and
        the editor takes the file as read (no question at the user's next write).
        Returns the new tick, or None when the buffer changed (or vanished) since
        ``tick``: read it again and retry.

        Raises:
            WriteError: the save failed (a full disk); nothing changed.
        """

    async def reload_buffers(self, paths: list[str]) -> None:
        """Reload the buffers of ``paths`` that hold no unsaved edits from disk."""

    async def delete_buffer(self, path: str, tick: int) -> bool:
        """Delete the buffer of ``path`` (its file is gone) if it is still at ``tick``.

        Windows showing it keep their place with another buffer. False when the
        buffer changed since ``tick`` (the user's text is kept) or there is none.
        """

    async def mark_saved(self, path: str, saved: bool) -> None:
        """Mark the buffer of ``path`` modified (not ``saved``: its file just removed,
        so that quitting asks before its text goes), or saved (its file was just
        written with what the buffer shows: an undo brought the agent's bytes back,
        written exactly), its undo states kept, no reload; nothing without one."""

    async def drop_buffers_under(self, directory: str) -> list[str]:
        """Delete the buffers of files under ``directory`` (removed with its files)
        that hold no unsaved edits, as :meth:`delete_buffer` does; the paths of those
        that hold some, kept."""

    async def open_terminal(
        self,
        key: str,
        cmd: str | list[str],
        cwd: str,
        env: dict[str, str],
        *,
        chat: int,
        show: bool = False,
    ) -> int | None:
        """Run ``cmd`` (a shell line, or argv) in a new terminal buffer named by ``key``,
        ``chat``'s (deleted when that chat closes); ``show`` opens it for the user to
        type in.

        Returns the process id (its process group), or None when the editor can
        make no terminal now (Neovim's command-line window is open): nothing
        started, ask again after :meth:`terminal_allowed`. Output and the exit
        code come back through the host
        (:meth:`~acp_nvim.client.services.terminals.Terminals.feed`).
        """

    async def terminal_allowed(self) -> None:
        """Return once the editor may make a terminal (at once, or when Neovim's
        command-line window closes)."""

    async def write_terminal(self, key: str, text: str, *, chat: int, reset: bool = False) -> None:
        """Show ``text`` (escapes and all) in display-only terminal ``key``, created on
        first write as ``chat``'s; ``reset`` first clears everything shown before."""

    async def stop_terminals(self, keys: list[str]) -> None:
        """Stop the commands of terminals ``keys`` still running; their buffers stay
        until their chat closes."""

    # -- what the editor MCP server asks (acp_nvim/client/mcp); lines and columns 1-based,
    # columns in characters

    async def list_buffers(self) -> list[dict[str, Any]]:
        """The loaded file buffers: ``{path, modified, filetype, line_count, visible,
        cursor}``, ``cursor`` ``[line, column]`` in the window showing it (or None)."""

    async def selection(self) -> dict[str, Any] | None:
        """The visual selection, else the last one, of the file buffer the user works
        in: ``{path, mode, start: [line, column], end: [line, column], text}``; None
        when it has none."""

    async def diagnostics(self, path: str | None) -> list[dict[str, Any]]:
        """The diagnostics of ``path``'s buffer (None: of every buffer), as
        ``{path, line, column, end_line, end_column, severity, message, source, code}``
        with ``severity`` ``error``, ``warning``, ``info`` or ``hint``."""

    async def lsp(
        self,
        request: LspRequest,
        path: str | None,
        position: tuple[int, int] | None,
        query: str,
        timeout: float,
    ) -> dict[str, Any]:
        """Ask the language servers attached to ``path``'s buffer (loaded without a
        window first when needed; ``workspace_symbols`` without a path asks every
        server). Returns ``{servers: [names], timed_out?: true, errors: [text], ...}``
        with ``items`` (``{path, line, column, text, kind?}``) or ``hover`` (markdown
        lines); ``servers`` is empty when none is attached. Waits at most ``timeout``
        seconds, then keeps what came.
        """

    async def show_file(self, path: str, line: int | None) -> int | None:
        """Show ``path`` at ``line`` to the user, in the window beside the chat;
        returns the line shown (the last for a line past it), or None when the editor
        shows it later (the command-line window is open).

        Raises:
            EditorError: it cannot be shown (a swap file of it exists), saying why.
        """

    async def watch_buffers(self) -> None:
        """From now on, tell the host when file buffers come and go
        (``App.buffers_changed``)."""
