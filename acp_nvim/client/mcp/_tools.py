"""The editor's MCP tools: input models (pydantic), descriptions, and what each does.

Each tool calls the services that answer ACP's ``fs/*`` and ``terminal/*``:
reads and writes go through the chat's review (``SessionChanges``: buffer text
with unsaved edits, minimal edits merged with the user's typing, every change
recorded for ``:AcpReview``, the ``fs_access`` policy), commands through
``Terminals`` behind the permission prompt. Questions only Neovim can answer
(buffers, selection, diagnostics, language servers) go to the ``Editor`` port.

An argument that does not validate, or a service's refusal, is a result with
``isError`` and a sentence the model can act on. pydantic is imported with this
module, which :mod:`._core` loads on first use only.
"""

from __future__ import annotations

__all__ = ["TOOLS", "call", "describe"]

import itertools
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import msgspec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from acp_nvim.client.config import EDITOR_TOOLS
from acp_nvim.client.editor import EditorError, LspRequest
from acp_nvim.client.mcp._session import ToolSession
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.services.terminals import CommandOutput
from acp_nvim.client.session.chat import settled
from acp_nvim.client.session.model import PermissionOption, TerminalPart, ToolCallPatch
from acp_nvim.client.session.workspace import shown_path
from acp_nvim.client.text import eol_of
from acp_nvim.review import Hunk

Result = dict[str, Any]


class _Input(BaseModel):
    # Strict: JSON's true is no line 1, "5" no number of seconds (the schemas say so).
    model_config = ConfigDict(extra="forbid", strict=True)


_PATH = "The file: absolute, relative to the session's working directory, or a file:// URI."
# Lines and columns as Neovim counts them (int32): a bigger one could not reach it.
_MAX = 2**31 - 1


class NoInput(_Input):
    pass


class ReadBufferInput(_Input):
    path: str = Field(description=_PATH)
    line: int | None = Field(None, ge=1, le=_MAX, description="First line to return (1-based).")
    limit: int | None = Field(None, ge=1, le=_MAX, description="At most this many lines.")


class DiagnosticsInput(_Input):
    path: str | None = Field(None, description=_PATH + " Omit for every open buffer.")
    severity: Literal["error", "warning", "info", "hint"] | None = Field(
        None, description="Only diagnostics of this severity or worse."
    )


class PositionInput(_Input):
    path: str = Field(description=_PATH)
    line: int = Field(ge=1, le=_MAX, description="Line (1-based).")
    column: int = Field(ge=1, le=_MAX, description="Column (1-based, in characters).")


class SymbolsInput(_Input):
    path: str | None = Field(
        None, description=_PATH + " Omit to search the whole workspace for `query`."
    )
    query: str = Field("", description="Part of a symbol name (workspace search).")


class EditInput(_Input):
    path: str = Field(description=_PATH)
    old_text: str = Field(min_length=1, description="Exact text to replace, as read.")
    new_text: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence, not exactly one.")


class WriteInput(_Input):
    path: str = Field(description=_PATH)
    content: str = Field(description="The whole new text of the file.")


class RunInput(_Input):
    # No NUL byte: no process takes one in its arguments (Neovim's jobstart fails).
    command: str = Field(min_length=1, pattern=r"^[^\x00]*$", description="A shell command line.")
    cwd: str | None = Field(None, description="Directory to run in (default: the session's).")
    timeout: float = Field(120, gt=0, le=3600, description="Seconds before it is killed.")
    output_limit: int = Field(
        64_000, ge=1, le=4_000_000, description="Keep at most the last this many bytes of output."
    )


class OpenInput(_Input):
    path: str = Field(description=_PATH)
    line: int | None = Field(
        None, ge=1, le=_MAX, description="Line to show (1-based; past the end: the last)."
    )


# -- results


def _text(text: str, structured: dict[str, Any] | None = None, error: bool = False) -> Result:
    result: Result = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def _error(text: str) -> Result:
    return _text(text, error=True)


def _data(key: str, items: list[Any], empty: str, left_out: int = 0) -> Result:
    """A list as JSON text (what every client shows the model) and as structure;
    ``left_out``: how many entries :meth:`ToolSession.listable` kept back."""
    text = json.dumps(items, indent=1, ensure_ascii=False) if items else empty
    if left_out:
        text += f"\n\n({_left_out(left_out)})"
    return _text(text, {key: items})


def _left_out(count: int) -> str:
    return (
        f"{count} outside the session's directories left out (fs_access): "
        "name a file by its path to ask for it"
    )


# -- the tools


async def _list_buffers(session: ToolSession, _: NoInput) -> Result:
    buffers, left_out = session.listable(await session.editor.list_buffers())
    return _data("buffers", buffers, "No file is open in the editor.", left_out)


async def _read_buffer(session: ToolSession, args: ReadBufferInput) -> Result:
    text = await session.review().read(session.path(args.path), args.line, args.limit)
    return _text(text)


async def _get_selection(session: ToolSession, _: NoInput) -> Result:
    selection = await session.editor.selection()
    if selection is None:
        return _text("The user has selected nothing in the editor.")
    if selection.get("path"):  # its text is the file's: read as fs_access says
        await session.may_read(session.path(selection["path"]))
    return _text(json.dumps(selection, indent=1, ensure_ascii=False), selection)


_SEVERITY = {"error": 1, "warning": 2, "info": 3, "hint": 4}


async def _get_diagnostics(session: ToolSession, args: DiagnosticsInput) -> Result:
    path = session.path(args.path) if args.path is not None else None
    if path is not None:
        await session.may_read(path)
    found, left_out = await session.editor.diagnostics(path), 0
    if path is None:  # every buffer's: a listing
        found, left_out = session.listable(found)
    if args.severity is not None:
        worst = _SEVERITY[args.severity]
        found = [d for d in found if _SEVERITY.get(d.get("severity", ""), 4) <= worst]
    where = path or "the open buffers"
    return _data("diagnostics", found, f"No diagnostics in {where}.", left_out)


async def _lsp(
    session: ToolSession,
    request: LspRequest,
    path: str | None,
    position: tuple[int, int] | None = None,
    query: str = "",
) -> Result:
    if path is not None:
        path = session.path(path)
        await session.may_read(path)
        if (unloadable := _unloadable(path)) is not None:
            return _error(unloadable)
    timeout = session.lsp_timeout()
    answer = await session.editor.lsp(request, path, position, query, timeout)
    servers = answer.get("servers") or []
    if not servers:
        where = f"to {path}" if path else "to any buffer"
        return _error(f"No language server that answers this is attached {where}.")
    notes = [f"{e}" for e in answer.get("errors") or []]
    if answer.get("timed_out"):
        notes.append(f"not every language server answered within {timeout:g} s")
    if request == "hover":
        lines = answer.get("hover") or []
        text = "\n".join(lines).strip() or "No hover information here."
        structured: dict[str, Any] = {"hover": text, "servers": servers}
    else:
        items, left_out = answer.get("items") or [], 0
        if path is None:  # the workspace's symbols: a listing
            items, left_out = session.listable(items)
        if left_out:
            notes.append(_left_out(left_out))
        text = json.dumps(items, indent=1, ensure_ascii=False) if items else "Nothing found."
        structured = {"items": items, "servers": servers}
        if not items and answer.get("timed_out"):
            return _error(f"The language servers did not answer within {timeout:g} s.")
    if notes:
        text += "\n\n(" + "; ".join(notes) + ")"
    return _text(text, structured)


async def _lsp_definition(session: ToolSession, args: PositionInput) -> Result:
    return await _lsp(session, "definition", args.path, (args.line, args.column))


async def _lsp_references(session: ToolSession, args: PositionInput) -> Result:
    return await _lsp(session, "references", args.path, (args.line, args.column))


async def _lsp_hover(session: ToolSession, args: PositionInput) -> Result:
    return await _lsp(session, "hover", args.path, (args.line, args.column))


async def _lsp_symbols(session: ToolSession, args: SymbolsInput) -> Result:
    if args.path is None:
        return await _lsp(session, "workspace_symbols", None, query=args.query)
    return await _lsp(session, "document_symbols", args.path, query=args.query)


async def _edit_buffer(session: ToolSession, args: EditInput) -> Result:
    review, path = session.review(), session.path(args.path)
    async with session.editing(path):
        return await _edit(review, path, args)


async def _edit(review: SessionChanges, path: str, args: EditInput) -> Result:
    # As the user sees it, and the base the write merges the user's typing against.
    # A CRLF file's line endings are compared and written as "\n", conformed on
    # write; in any other file a "\r" before a "\n" is text (a file of mixed endings).
    text, old, new = await review.read(path), args.old_text, args.new_text
    if eol_of(text) == "\r\n":
        text, old, new = (part.replace("\r\n", "\n") for part in (text, old, new))
    count = text.count(old)
    if count == 0:
        return _error(f"old_text was not found in {path}: read it again (read_buffer).")
    if count > 1 and not args.replace_all:
        return _error(
            f"old_text occurs {count} times in {path}: include more of the text around "
            "it to pick one, or set replace_all."
        )
    conflicts = await review.write(
        path, text.replace(old, new) if args.replace_all else text.replace(old, new, 1)
    )
    replaced = count if args.replace_all else 1
    done = f"Edited {path}: {replaced} replacement{'s' if replaced > 1 else ''}."
    return _text(done + _held_back(conflicts))


async def _write_file(session: ToolSession, args: WriteInput) -> Result:
    path = session.path(args.path)
    async with session.editing(path):  # not between an edit's read and its write
        conflicts = await session.review().write(path, args.content)
    return _text(f"Wrote {path}." + _held_back(conflicts))


def _held_back(conflicts: list[Hunk]) -> str:
    """What a write left of the agent's text where the user had edited the same lines
    unsaved (decision 0015): the user's lines stay, the agent's wait in the review."""
    if not conflicts:
        return ""
    spans = []
    for hunk in conflicts:
        first, last = hunk.new_start + 1, hunk.new_end
        if last < first:
            spans.append(f"before line {first}")
        else:
            spans.append(f"line {first}" if first == last else f"lines {first}-{last}")
    return (
        f" At {', '.join(spans)} the user had unsaved edits of their own: their text was "
        "kept there, and yours waits in the user's review until they accept it. Read the "
        "file again before changing those lines."
    )


_RUN_OPTIONS = (
    ("allow", "Allow", "allow_once"),
    ("allow_always", "Always allow", "allow_always"),
    ("reject", "Reject", "reject_once"),
)
_runs = itertools.count(1)


async def _run_command(session: ToolSession, args: RunInput) -> Result:
    chat, call_id = session.chat, f"mcp-run-{next(_runs)}"
    cwd = session.path(args.cwd) if args.cwd is not None else session.cwd
    where = "" if cwd == session.cwd else f" in {shown_path(cwd, session.cwd)}"
    call = ToolCallPatch(
        call_id,
        title=f"Run `{args.command}`{where}",  # the user allows it knowing where
        kind="execute",
        status="pending",
        raw_input=args.model_dump(),
    )
    options = [PermissionOption(*option) for option in _RUN_OPTIONS]
    with settled(chat, call_id):  # a bad cwd fails it, a withdrawn call is cancelled
        choice = await session.permissions.ask(chat, call, options)
        if choice not in ("allow", "allow_always"):
            chat.on_tool_call(ToolCallPatch(call_id, status="failed"))
            return _error("The user did not allow this command.")
        out, timed_out = await _run(session, call_id, args, cwd)
        code = out.exit_status.exit_code if out.exit_status is not None else None
        chat.on_tool_call(ToolCallPatch(call_id, status="completed" if code == 0 else "failed"))
    signal = out.exit_status.signal if out.exit_status is not None else None
    ending = f"exit code {code}" if code is not None else f"killed by {signal}"
    if timed_out:
        ending = f"killed after {args.timeout:g} s ({ending})"
    cut = " (output cut to its end)" if out.truncated else ""
    structured = {
        "output": out.text,
        "exit_code": code,
        "signal": signal,
        "truncated": out.truncated,
        "timed_out": timed_out,
    }
    return _text(f"{out.text}\n[{ending}{cut}]", structured)


async def _run(
    session: ToolSession, call_id: str, args: RunInput, cwd: str
) -> tuple[CommandOutput, bool]:
    """Run the allowed command in ``cwd``, in a terminal shown at tool call
    ``call_id``: its output, and whether it was killed for its timeout."""
    terminals, session_id = session.terminals, session.chat.session.session_id
    terminal_id = await terminals.create(
        session_id, args.command, [], cwd=cwd, limit=args.output_limit
    )
    session.chat.on_tool_call(
        ToolCallPatch(call_id, status="in_progress", content=[TerminalPart(terminal_id)])
    )
    timed_out = False
    try:
        with anyio.move_on_after(args.timeout) as scope:
            await terminals.wait_for_exit(session_id, terminal_id)
        if scope.cancelled_caught:
            timed_out = True
            await terminals.kill(session_id, terminal_id)
            await terminals.wait_for_exit(session_id, terminal_id)
        return terminals.output(session_id, terminal_id), timed_out
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled call stops its command too
            await terminals.release(session_id, terminal_id)


def _unloadable(path: str) -> str | None:
    """Why Neovim should not load ``path`` into a buffer, or None: it shows a listing
    for a directory, and reads a FIFO until a writer closes it (the whole editor
    waits meanwhile), a device maybe for ever."""
    if os.path.isdir(path):
        return f"{path} is a directory."
    if os.path.exists(path) and not os.path.isfile(path):
        return f"{path} is not a regular file."
    return None


async def _open_file(session: ToolSession, args: OpenInput) -> Result:
    path = session.path(args.path)
    await session.may_read(path)
    if (unloadable := _unloadable(path)) is not None:
        return _error(unloadable)
    # Neovim would show an empty buffer for a missing file.
    if not os.path.exists(path) and await session.editor.read_buffer(path) is None:
        return _error(f"{path}: no such file.")
    shown = await session.editor.show_file(path, args.line)
    if shown is None:
        return _text(f"{path} is shown to the user once they leave the command-line window.")
    if args.line is None:
        return _text(f"Showed {path} to the user.")
    if shown < args.line:
        return _text(f"Showed {path} at line {shown}, its last, to the user: no line {args.line}.")
    return _text(f"Showed {path} at line {shown} to the user.")


# -- the registry


class Tool(msgspec.Struct, frozen=True):
    title: str
    description: str
    model: type[_Input]
    run: Callable[[ToolSession, Any], Awaitable[Result]]
    read_only: bool = True


TOOLS: dict[str, Tool] = {
    "list_buffers": Tool(
        "List open buffers",
        "The files open in the user's editor: path, unsaved changes (modified), "
        "filetype, line count, whether a window shows it, and its cursor there.",
        NoInput,
        _list_buffers,
    ),
    "read_buffer": Tool(
        "Read a file as the user sees it",
        "A file's text as it is in the editor, unsaved edits included (from disk when "
        "no buffer holds it). Optional `line` and `limit` read part of it.",
        ReadBufferInput,
        _read_buffer,
    ),
    "get_selection": Tool(
        "Get the user's selection",
        "The text the user selects in the editor (the current visual selection, else "
        "the last one), with its file and range (1-based lines and columns).",
        NoInput,
        _get_selection,
    ),
    "get_diagnostics": Tool(
        "Get diagnostics",
        "Errors, warnings and hints the editor shows (language servers, linters) for "
        "one file or every open buffer: range, severity, message, source.",
        DiagnosticsInput,
        _get_diagnostics,
    ),
    "lsp_definition": Tool(
        "Go to definition",
        "Where the symbol at a position is defined, from the language servers "
        "attached in the editor.",
        PositionInput,
        _lsp_definition,
    ),
    "lsp_references": Tool(
        "Find references",
        "Every reference to the symbol at a position, from the language servers "
        "attached in the editor.",
        PositionInput,
        _lsp_references,
    ),
    "lsp_hover": Tool(
        "Hover",
        "The language servers' hover text (type, signature, documentation) for the "
        "symbol at a position.",
        PositionInput,
        _lsp_hover,
    ),
    "lsp_symbols": Tool(
        "List symbols",
        "The symbols of one file (with `path`), or the workspace's symbols matching "
        "`query` (without `path`), from the language servers attached in the editor.",
        SymbolsInput,
        _lsp_symbols,
    ),
    "edit_buffer": Tool(
        "Edit a file",
        "Replace an exact piece of a file's text (as read_buffer shows it) by new "
        "text. The user's unsaved edits elsewhere are kept; the change is recorded "
        "for the user's review.",
        EditInput,
        _edit_buffer,
        read_only=False,
    ),
    "write_file": Tool(
        "Write a file",
        "Write a file's whole text (created if missing). Open buffers change in place "
        "and keep the user's unsaved edits; the change is recorded for review.",
        WriteInput,
        _write_file,
        read_only=False,
    ),
    "run_command": Tool(
        "Run a command",
        "Run a shell command in a terminal the user can watch, after the user allows "
        "it; returns its output (the last `output_limit` bytes) and exit code.",
        RunInput,
        _run_command,
        read_only=False,
    ),
    "open_file": Tool(
        "Show a file to the user",
        "Open a file in the user's editor, at a line, beside the chat (the user's "
        "cursor stays where it is).",
        OpenInput,
        _open_file,
    ),
}
assert tuple(TOOLS) == EDITOR_TOOLS, "the tools and config.EditorTool disagree"


def describe(name: str, version: str) -> dict[str, Any]:
    """The ``tools/list`` entry of tool ``name`` for protocol ``version``."""
    tool = TOOLS[name]
    schema = tool.model.model_json_schema()
    schema.pop("title", None)
    entry: dict[str, Any] = {"name": name, "description": tool.description, "inputSchema": schema}
    if version >= "2025-03-26":
        entry["annotations"] = {
            "title": tool.title,
            "readOnlyHint": tool.read_only,
            "destructiveHint": not tool.read_only,
            "openWorldHint": name == "run_command",
        }
    if version >= "2025-06-18":
        entry["title"] = tool.title
    return entry


async def call(session: ToolSession, name: str, arguments: dict[str, Any]) -> Result:
    """Run tool ``name``; what goes wrong is told in an ``isError`` result."""
    tool = TOOLS[name]
    if session.muted:  # as the turn's terminal/create and permission requests are
        return _error("The turn was cancelled: it runs no more tools.")
    try:
        args = tool.model.model_validate(arguments)
    except ValidationError as err:
        return _error(f"Invalid arguments for {name}: {_explain(err)}")
    try:
        return await tool.run(session, args)
    except ServiceError as err:
        return _error(str(err))
    except EditorError as err:
        return _error(f"The editor could not do it: {err}")


def _explain(err: ValidationError) -> str:
    """``line: Input should be greater than or equal to 1; path: Field required``."""
    parts = []
    for problem in err.errors(include_url=False):
        where = ".".join(str(p) for p in problem["loc"]) or "arguments"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)
