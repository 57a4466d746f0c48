"""Turns model items into transcript render ops (markdown lines).

Each item of the session is one block with a stable id; Lua keeps one extmark
per block, so a redraw touches only that block and streaming touches only the
last line. Nothing here knows a protocol version.

Block ids share one namespace in Lua, while the agent names messages, tool calls
and plans independently (``"x"`` may be both a message and a tool call): a tool
call's block id is its key, a message's and a plan's carry their kind after a
``#``, which no tool call key starts with unless it is the client's own
(``#call1``; ``model.agent_id``). Notices from the client have local ids.
"""

from __future__ import annotations

__all__ = [
    "ALL_PARTS",
    "CONTENT",
    "HEAD",
    "HEADERS",
    "LOCATIONS",
    "MARK",
    "ToolCallDrawing",
    "append_op",
    "changes_op",
    "close_fence",
    "compaction_op",
    "config_fields",
    "counted_text",
    "cut_op",
    "drop_op",
    "edit_op",
    "is_mark",
    "mark_op",
    "message_block",
    "message_op",
    "notice_op",
    "one_row",
    "plan_op",
    "spent_text",
    "status_op",
    "turn_end_text",
    "turn_op",
    "uncut_op",
]

import math
import re
from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeGuard, overload

from acp_nvim.client.editor import (
    AppendOp,
    BlockLocation,
    BlockOp,
    BlockPermission,
    BlockPermissionOption,
    BlockPermissionWhy,
    CutOp,
    CutTurn,
    DropOp,
    EditOp,
    PreviewFile,
    PreviewHunk,
    RenderOp,
    Spent,
    StatusFields,
    StatusOp,
    TurnOp,
    TurnTokens,
    UncutOp,
)
from acp_nvim.client.session.model import (
    FILE_PLAN,
    MARKDOWN_PLAN,
    ChangesPart,
    Compaction,
    ConfigOption,
    ContentPart,
    DiffPart,
    FileOp,
    FilePreview,
    Message,
    PermissionOption,
    PermissionPrompt,
    PlanEntry,
    TerminalPart,
    TerminalView,
    TextPart,
    ToolCall,
)
from acp_nvim.client.session.prose import fence_after, reflow
from acp_nvim.client.session.workspace import shown_path, uri_path
from acp_nvim.review import FilePatch, PatchError, format_unified, parse_unified

if TYPE_CHECKING:
    from typing_extensions import Unpack

# Each message's heading, in the transcript and its export.
HEADERS = {"user": "## You", "agent": "## Agent", "thought": "### Thinking"}
# Thoughts are a markdown quote: distinct even without our highlights, foldable.
_PREFIXES = {"user": "", "agent": "", "thought": "> "}
_PLAN_MARKS = {"completed": "[x]", "in_progress": "[~]"}
# A backtick run that could close a fence: at a line's start after any indentation,
# as the transcript's syntax (syntax/acpchat.vim) reads one. A diff's context row of
# a Markdown file's own fence is one space, then the fence.
_TICKS = re.compile(r"\s*(`+)")


# Characters of one transcript line shown at most: a multi-megabyte line would
# hold Neovim's redraw for seconds. The model keeps the whole text.
LINE_MAX = 10_000
LINE_CUT = f" … [line cut at {LINE_MAX:,} characters]"


def bounded(op: RenderOp) -> RenderOp:
    """``op`` with the lines of a block cut at :data:`LINE_MAX`, each on one row
    (:func:`one_row`): Neovim refuses a buffer line holding a line break, and with it
    everything sent in the same batch (a plan's step of two lines took the reply
    after it)."""
    if op["op"] != "block" or all(
        len(line) <= LINE_MAX and "\n" not in line for line in op["lines"]
    ):
        return op
    cut: BlockOp = {**op, "lines": [_bounded_row(line) for line in op["lines"]]}
    return cut


def _bounded_row(line: str) -> str:
    line = one_row(line) if "\n" in line else line
    return line[:LINE_MAX] + LINE_CUT if len(line) > LINE_MAX else line


def visible_append(last_line: int, text: str) -> str:
    """What of ``text``, streamed onto a line of ``last_line`` characters, is shown:
    a line is cut once at :data:`LINE_MAX` (with a note) until the next newline."""
    if last_line + len(text) <= LINE_MAX:
        return text
    shown = []
    for index, piece in enumerate(text.split("\n")):
        before = last_line if index == 0 else 0
        if before + len(piece) <= LINE_MAX:
            shown.append(piece)
        elif before > LINE_MAX:
            shown.append("")  # cut earlier: the note is there already
        else:
            shown.append(piece[: LINE_MAX - before] + LINE_CUT)
    return "\n".join(shown)


def one_row(text: str) -> str:
    """``text`` on one row of the transcript, its lines joined by ``⏎`` (as
    :AcpBranches shows a prompt's), so that they stay apart: codex-acp names a tool
    call by its script, whose lines are its commands. A NUL is a space (Lua's
    util.one_row, whose rule this is, gives it to Vim's functions, which refuse it).

    >>> one_row("make\\nrm -rf build\\n")
    'make ⏎ rm -rf build'
    """
    return " ⏎ ".join(text.replace("\0", " ").strip().splitlines())


def message_block(key: str) -> str:
    """The block id of the message keyed ``key``."""
    return "#message:" + key


def plan_block(plan_id: str) -> str:
    return "#plan:" + plan_id


def compaction_block(compaction_id: str) -> str:
    return "#compaction:" + compaction_id


def message_op(message: Message, turn: int | None = None, shown: str | None = None) -> BlockOp:
    """The whole block of a message (on creation or replacement); ``turn``: the user's
    message begins that turn of the shown branch (Lua edits it on ``<CR>``);
    ``shown``: what of an agent's text to draw (default: all of it, soft line
    breaks joined: :mod:`.prose`). The user's text is drawn as typed."""
    prefix = _PREFIXES[message.role]
    text = message.text
    if message.role != "user":
        text = reflow(text) if shown is None else shown
    body = [prefix + line for line in text.split("\n")]
    if message.role == "user":
        body = close_fence(body)
    op: BlockOp = {
        "op": "block",
        "id": message_block(message.id),
        "kind": message.role,
        "lines": [HEADERS[message.role], *body],
        "prefix": prefix,
    }
    if turn is not None:
        op["turn"] = turn
    return op


def close_fence(lines: list[str]) -> list[str]:
    """``lines`` with a code fence they leave open closed after them: markdown
    would read every later block of the transcript (or export) as code."""
    fence = None
    for line in lines:
        fence = fence_after(fence, line)
    return [*lines, fence] if fence else lines


def append_op(message_id: str, text: str) -> AppendOp:
    """Stream ``text`` onto the end of a message; Lua applies the block's prefix."""
    return {"op": "append", "id": "#message:" + message_id, "text": text}


# The parts of a tool call block, each redrawn on its own (see ToolCallDrawing).
HEAD, CONTENT, LOCATIONS, PROMPT = range(4)
ALL_PARTS = frozenset({HEAD, CONTENT, LOCATIONS, PROMPT})


class ToolCallDrawing:
    """One tool call block as last sent to Lua, part by part: title, kind and status;
    content; locations; permission prompt. An update sends only the rows of the
    parts that changed: a title-only update of a call showing a 600 kB diff is two
    rows, not the diff again (issue 18).

    ``locations`` and ``permission`` tell Lua which rows of the block (offsets from
    its header) ``<CR>`` and the prompt keys act on; ``terminals`` (by terminal id)
    give the live view of terminal content. Files in the session's directory ``cwd``
    are named relative to it (an agent sends absolute paths: a diff's three header
    lines of them took six rows of a narrow chat).

    An op with ``start``/``end`` replaces those rows of the block (offsets from its
    header, ``end`` exclusive, in the block as it was); without them it is the whole
    block. ``locations`` (possibly thousands) is sent only when their rows may have
    moved; ``status`` and ``permission`` always.
    """

    def __init__(self, cwd: str) -> None:
        self._cwd = cwd
        self._parts: list[list[str]] | None = None

    def op(
        self,
        call: ToolCall,
        terminals: Mapping[str, TerminalView] | None = None,
        redraw: Collection[int] = ALL_PARTS,
    ) -> BlockOp | None:
        """The op drawing what changed in ``redraw`` (HEAD, CONTENT, LOCATIONS; the
        prompt is always redrawn); None when no row changed."""
        old = self._parts
        parts = list(old) if old is not None else [[], [], [], []]
        if old is None:
            redraw = ALL_PARTS
        title = call.title or call.kind
        if HEAD in redraw:
            parts[HEAD] = [f"#### {one_row(title)}", f"`{call.kind}` · {call.status}"]
        if CONTENT in redraw:
            parts[CONTENT] = _tool_content_lines(call, terminals or {}, self._cwd)
        op: BlockOp = {"op": "block", "id": call.id, "kind": "tool", "lines": []}
        op["status"] = call.status
        moved = CONTENT in redraw or LOCATIONS in redraw
        if moved:
            row = len(parts[HEAD]) + len(parts[CONTENT])
            locations, parts[LOCATIONS] = _locations(call, row, self._cwd)
            if locations or old is not None:
                op["locations"] = locations
        base = sum(len(part) for part in parts[:PROMPT])
        parts[PROMPT] = []
        if call.permission is not None:
            op["permission"] = _permission(
                call.permission, one_row(title), parts[PROMPT], base, self._cwd
            )
        self._parts = parts
        changed = [i for i in range(len(parts)) if old is None or parts[i] != old[i]]
        if not changed:
            return None
        if old is None or changed == [HEAD, CONTENT, LOCATIONS, PROMPT]:
            if old is not None and not op.get("locations"):
                op.pop("locations", None)
            op["lines"] = [line for part in parts for line in part]
            return op
        first, last = changed[0], changed[-1]
        op["start"] = sum(len(part) for part in old[:first])
        op["end"] = op["start"] + sum(len(part) for part in old[first : last + 1])
        op["lines"] = [line for part in parts[first : last + 1] for line in part]
        return op


def _tool_content_lines(
    call: ToolCall, terminals: Mapping[str, TerminalView], cwd: str
) -> list[str]:
    lines: list[str] = []
    for part in call.content:
        if isinstance(part, TerminalPart):
            terminal = terminals.get(part.terminal_id)
            lines.extend(terminal_lines(part.terminal_id, terminal, call.status))
        else:
            lines.extend(_content_lines(part, cwd))
    return lines


def _locations(call: ToolCall, row: int, cwd: str) -> tuple[list[BlockLocation], list[str]]:
    """The locations for Lua (their rows counted from ``row``, their full paths),
    and their lines."""
    locations: list[BlockLocation] = []
    lines: list[str] = []
    for location in call.locations:
        suffix = f":{location.line}" if location.line else ""
        where: BlockLocation = {"row": row + len(lines), "path": location.path}
        if location.line:
            where["line"] = location.line
        locations.append(where)
        lines.append(f"→ {shown_path(location.path, cwd)}{suffix}")
    return locations, lines


def _permission(
    prompt: PermissionPrompt, title: str, lines: list[str], base: int, cwd: str
) -> BlockPermission:
    """Append the prompt (or its outcome) to ``lines``, which start at row ``base`` of
    the block; returns what Lua needs of it. Files with no text the edit changes
    are named in it (no file can show them), the others previewed in their files."""
    if prompt.question:
        lines.extend(prompt.question.split("\n"))
    lines.extend(_whole_line(file, cwd) for file in prompt.preview if file.binary is not None)
    data: BlockPermission = {
        "id": prompt.id, "row": base + len(lines), "title": title, "pending": prompt.outcome is None
    }  # fmt: skip
    if prompt.outcome is not None:
        lines.append(f"**Permission:** {prompt.outcome}")
        return data
    lines.append("**Permission needed:** press a key, or `<CR>` for a menu")
    options: list[BlockPermissionOption] = []
    for option in prompt.options:
        row = base + len(lines)
        item: BlockPermissionOption = {"id": option.id, "name": option.name, "row": row}
        if option.kind is not None:
            item["kind"] = option.kind
        if option.key is not None:
            item["key"] = option.key
        options.append(item)
        lines.append(f"- `{option.key}` {option.name}" if option.key else f"- {option.name}")
    data["options"] = options
    reject = _rejecting(prompt)
    if reject is not None:
        # Reject, and the reason the user types goes to the agent (Lua asks for it).
        why: BlockPermissionWhy = {"option": reject.id, "row": base + len(lines)}
        if prompt.why_key is not None:
            why["key"] = prompt.why_key
        data["why"] = why
        key = f"`{prompt.why_key}` " if prompt.why_key is not None else ""
        lines.append(f"- {key}{reject.name}, and say why")
    if shown := [_preview(file) for file in prompt.preview if file.binary is None]:
        data["preview"] = shown
    return data


def _whole_line(file: FilePreview, cwd: str) -> str:
    """What the prompt says of a file with no text the edit changes as a whole, as
    the review would list it (decision 0099)."""
    name = f"`{shown_path(file.path, cwd)}` ({file.binary})"
    if file.created:
        return f"Makes {name}: not previewed"
    if file.deleted:
        return f"Deletes {name}"
    return f"Changes the whole of {name}: not previewed"


def _rejecting(prompt: PermissionPrompt) -> PermissionOption | None:
    """The option that rejects once (else always) where the agent offers one."""
    kinds = {option.kind: option for option in reversed(prompt.options)}
    return kinds.get("reject_once") or kinds.get("reject_always")


def _preview(file: FilePreview) -> PreviewFile:
    """A file's preview as Lua draws it in the file (``row`` 0-based, lines without
    terminators): plain data, so Lua never reads a diff of the wire."""
    hunks: list[PreviewHunk] = []
    for h in file.hunks:
        hunk: PreviewHunk = {"row": h.row, "count": h.count, "lines": h.lines}
        if h.held:
            hunk["held"] = True
        hunks.append(hunk)
    return {"path": file.path, "created": file.created, "deleted": file.deleted, "hunks": hunks}


def _content_lines(part: ContentPart, cwd: str) -> list[str]:
    if isinstance(part, TextPart):
        return part.text.split("\n")
    if isinstance(part, DiffPart):
        return list(_diff_lines(shown_path(part.path, cwd), part.old_text, part.new_text))
    if isinstance(part, ChangesPart):
        return _changes_lines(part, cwd)
    return terminal_lines(part.terminal_id, None)


@lru_cache(maxsize=16)
def _diff_lines(path: str, old: str | None, new: str) -> tuple[str, ...]:
    # A tool call's block is re-rendered on each of its updates (status, locations,
    # permission), mostly with the same diff: diff it once.
    if old and new and not old.endswith("\n") and not new.endswith("\n"):
        # Claude's adapters send the whole file minus its final newline, opencode a
        # fragment: an end without one on both sides says nothing of the file's.
        old, new = old + "\n", new + "\n"
    return tuple(fenced(format_unified(path, old, new).splitlines(), "diff"))


def fenced(body: Sequence[str], info: str) -> list[str]:
    """``body`` between fences (the first with ``info``) longer than any backtick
    run that could close one: a fence in it stays text of the block."""
    ticks = max((len(m.group(1)) for line in body if (m := _TICKS.match(line))), default=0)
    fence = "`" * max(3, ticks + 1)
    return [fence + info, *body, fence]


def terminal_lines(
    terminal_id: str, terminal: TerminalView | None, call_status: str = ""
) -> list[str]:
    """``[terminal KEY · state] command``, then the last output lines in a fence. An
    agent's own terminal that it never said ended takes the end of its call where that
    was cancelled or failed: Claude's Bash, cancelled, is never told to have stopped."""
    if terminal is None:
        return [f"[terminal {terminal_id}]"]
    status = terminal.exit_status
    if status is None and terminal.display and call_status in ("cancelled", "failed"):
        state = call_status
    elif status is None:
        state = "running"
    elif status.signal:
        state = f"killed by {status.signal}"
    else:
        state = f"exit {status.exit_code if status.exit_code is not None else '?'}"
    head = f"[terminal {terminal.key} · {state}]" + (f" {terminal.label}" if terminal.label else "")
    if not terminal.lines:
        return [head]
    return [head, *fenced(terminal.lines, "text")]


_OPERATIONS = {
    "add": "added",
    "delete": "deleted",
    "modify": "modified",
    "move": "moved",
    "copy": "copied",
}


def change_words(change: FileOp, cwd: str) -> tuple[str, str]:
    """What became of a changed file ("moved") and which it is ("a.md → b.md",
    "logo.png (binary)"), as the transcript and an export name it."""
    what = _OPERATIONS.get(change.operation, change.operation)
    path = shown_path(change.path, cwd)
    where = f"{shown_path(change.old_path, cwd)} → {path}" if change.old_path else path
    kind = f" ({change.file_type})" if change.file_type not in (None, "text") else ""
    return what, where + kind


def _changes_lines(part: ChangesPart, cwd: str) -> list[str]:
    """One header per changed file (named as :func:`shown_path` names it), each
    followed by its section of the patch: the agent's text, its file header
    naming the paths as the header does (:func:`_named_as_shown`).

    Changes with no text (binary, symlink, directory, or no patch at all) get
    the header only; a patch in a format we do not know is shown as is.
    """
    sections = _patch_sections(part.patch, cwd) if part.patch_format == "git_patch" else {}
    lines: list[str] = []
    for change in part.changes:
        what, where = change_words(change, cwd)
        lines.append(f"**{what}** {where}")
        section = sections.pop(change.path, None) or sections.pop(change.old_path or "", None)
        if section:
            lines += fenced(section, "diff")
    rest = [line for section in sections.values() for line in section]
    if part.patch and part.patch_format != "git_patch":
        rest = part.patch.splitlines()
    if rest:
        lines += fenced(rest, "diff")
    return lines


def _patch_sections(text: str | None, cwd: str) -> dict[str, list[str]]:
    """Split git patch text into its ``diff --git`` sections, keyed by file path."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in (text or "").splitlines():
        if line.startswith("diff --git ") or not sections:
            current = [line]
            sections[f"#{len(sections)}"] = current
        else:
            current.append(line)
    keyed: dict[str, list[str]] = {}
    for key, section in sections.items():
        try:
            patches = parse_unified("\n".join(section) + "\n")
        except PatchError:
            patches = []
        if patches:
            keyed[patches[0].path] = _named_as_shown(section, patches[0], cwd)
        else:
            keyed[key] = section
    return keyed


def _named_as_shown(section: list[str], patch: FilePatch, cwd: str) -> list[str]:
    """``section`` with the paths of its file header (the lines before its first
    hunk) named as :func:`shown_path` names them: v2 patches name files by
    absolute path, three times each, which took rows of a narrow chat. A line
    naming them otherwise (quoted, with ``a/``) stays as sent."""
    old = patch.old_path or patch.path
    new = patch.new_path or patch.path
    short_old, short_new = shown_path(old, cwd), shown_path(new, cwd)
    renamed = {
        f"diff --git {old} {new}": f"diff --git {short_old} {short_new}",
        f"--- {old}": f"--- {short_old}",
        f"+++ {new}": f"+++ {short_new}",
        **{f"{verb} from {old}": f"{verb} from {short_old}" for verb in ("rename", "copy")},
        **{f"{verb} to {new}": f"{verb} to {short_new}" for verb in ("rename", "copy")},
    }
    out = list(section)
    for i, line in enumerate(out):
        if line.startswith("@@"):
            break
        out[i] = renamed.get(line, line)
    return out


# Past this many choices in all (a 17 MB settings line has 500,000), a select's status
# entry leaves its choices out: packed for Lua they held the host's loop ~120 ms, and
# Lua asks for one setting's choices when a picker needs them (`choices_entries`).
SENT_CHOICES = 10_000


def config_fields(
    options: list[ConfigOption], entries: Sequence[dict[str, Any]] = ()
) -> StatusFields:
    """Status fields for the header and ``status()``: the options, and the current
    value of the well-known categories (mode, model, thought_level). ``entries`` are
    the `config_entry` of the first options, when already made off the loop."""
    whole = choice_count(options) <= SENT_CHOICES
    made = [config_entry(o, whole) for o in options[len(entries) :]]
    fields: StatusFields = {"config_options": [*entries, *made]}
    for option in options:
        if option.category not in ("mode", "model", "thought_level"):
            continue
        current = _current_name(option)
        if option.category == "mode":
            fields["mode"] = current
        elif option.category == "model":
            fields["model"] = current
        else:
            fields["thought_level"] = current
    return fields


def choice_count(options: Sequence[ConfigOption]) -> int:
    return sum(len(o.choices) for o in options)


def config_entry(option: ConfigOption, whole: bool = True) -> dict[str, Any]:
    """One setting as ``status().config_options`` lists it; not ``whole``, a select's
    ``choices`` are left out and ``current_name`` names its current value."""
    entry: dict[str, Any] = {
        "id": option.id,
        "name": option.name,
        "type": option.type,
        "category": option.category,
        "current": option.current,
    }
    if whole or option.type != "select":
        entry["choices"] = choices_entries(option)
    else:
        entry["current_name"] = _current_name(option)
    return entry


def choices_entries(option: ConfigOption) -> list[dict[str, str]]:
    """A setting's choices as Lua lists them: ``{value, name}``."""
    return [{"value": v, "name": n} for v, n in option.choices]


def _current_name(option: ConfigOption) -> str | bool | None:
    """The current value's name where the choices name it, else the value."""
    current = option.current
    if isinstance(current, str):
        return next((n for v, n in option.choices if v == current), current)
    return current


def notice_line(severity: str, title: str, description: str | None) -> str:
    """An agent's advisory (``Chat.on_notice``) as the one line the transcript shows."""
    marks = {"warning": "⚠ ", "error": "✗ "}
    text = f"{marks.get(severity, '')}{title}" + (f" — {description}" if description else "")
    return f"*{text}*"


def plan_name(number: int) -> str:
    """A session's ``number``-th plan as its heading names it: numbered from the second."""
    return "Plan" if number == 1 else f"Plan {number}"


@overload
def plan_op(plan_id: str, entries: list[PlanEntry], number: int = 1) -> BlockOp: ...
@overload
def plan_op(plan_id: str, entries: list[PlanEntry] | None, number: int = 1) -> BlockOp | DropOp: ...
def plan_op(plan_id: str, entries: list[PlanEntry] | None, number: int = 1) -> BlockOp | DropOp:
    """A plan's block; the session's ``number``-th plan is titled so from the second.
    Its steps as a checklist; a markdown plan as its text, a file's as its path
    (a location: ``<CR>`` opens it). None: the plan went, its block with it."""
    if entries is None:
        return drop_op([plan_block(plan_id)])
    lines = [f"### {plan_name(number)}"]
    locations: list[BlockLocation] = []
    for entry in entries:
        if entry.status == MARKDOWN_PLAN:
            lines.extend(close_fence(reflow(entry.content).split("\n")))
        elif entry.status == FILE_PLAN:
            path = _file_path(entry.content)
            if path is not None:
                locations.append({"row": len(lines), "path": path})
            lines.append(f"→ {path or entry.content}")
        else:
            lines.append(f"- {_PLAN_MARKS.get(entry.status, '[ ]')} {entry.content}")
    op: BlockOp = {"op": "block", "id": plan_block(plan_id), "kind": "plan", "lines": lines}
    if locations:
        op["locations"] = locations
    return op


def _file_path(uri: str) -> str | None:
    """The path a plan's file URI names, None for one that names none here."""
    try:
        return uri_path(uri)
    except ValueError:
        return None


def changes_op(block_id: str, files: list[str]) -> BlockOp:
    """The files a turn changed, at its end: ``**2 files changed:** `a.py`, `b.py```."""
    count = f"{len(files)} file{'s' if len(files) > 1 else ''} changed"
    names = ", ".join(f"`{name}`" for name in files)
    return notice_op(block_id, "changes", [f"**{count}:** {names}"])


def compaction_op(compaction: Compaction) -> BlockOp:
    """A compaction of the agent's context: a folded block, its summary inside."""
    done = {"completed": "compacted", "failed": "compaction failed",
            "cancelled": "compaction cancelled"}  # fmt: skip
    state = done.get(compaction.status, f"compacting ({compaction.status})")
    lines = [f"#### Context {state}"]
    if compaction.error:
        lines.append(f"**Error:** {compaction.error}")
    if compaction.summary:
        lines += compaction.summary.split("\n")
    return {"op": "block", "id": compaction_block(compaction.id), "kind": "compaction",
            "lines": lines}  # fmt: skip


def cut_op(turns: list[tuple[str, str]], since: int) -> CutOp:
    """Take the blocks of ``turns`` (the end of the transcript, in order: each its key
    and the block it begins with) out of view; Lua keeps them by those keys. The turns
    shown differ from turn ``since`` (1-based) on."""
    cut: list[CutTurn] = [{"key": key, "block": block} for key, block in turns]
    return {"op": "cut", "turns": cut, "since": since}


def drop_op(blocks: list[str]) -> DropOp:
    """Take ``blocks`` out of the transcript for good."""
    return {"op": "drop", "blocks": blocks}


def uncut_op(turns: list[str]) -> UncutOp:
    """Put the kept blocks of ``turns`` (keys as in :func:`cut_op`) back at the end."""
    return {"op": "uncut", "turns": turns}


def edit_op(turn: int, text: str) -> EditOp:
    """Put turn ``turn``'s prompt in the input to be edited; sent, it goes from there."""
    return {"op": "edit", "turn": turn, "text": text}


def _tokens(count: int) -> str:
    sign = "-" if count < 0 else ""
    count = abs(count)
    return f"{sign}{count / 1000:.1f}k" if count >= 1000 else f"{sign}{count}"


def used(spent: Spent | None) -> TypeGuard[Spent]:
    """Whether ``spent`` is anything (a turn the agent failed at once used nothing)."""
    return spent is not None and bool(spent["tokens"] or spent.get("cost", {}).get("amount"))


def turn_end_text(stop_reason: str, spent: Spent | None, counted: TurnTokens | None) -> str:
    """A turn's end line: its stop reason, what it used where anything (:func:`spent_text`)
    and the agent's own count of what its model read and wrote:
    ``end_turn · 1.2k tokens · $0.04 · 35.0k in · 900 out``."""
    figures = [stop_reason, spent_text(spent)] if used(spent) else [stop_reason]
    if counted is not None:
        figures.append(counted_text(counted["input"], counted["output"]))
    return " · ".join(figures)


def counted_text(read: int, wrote: int) -> str:
    """The agent's own count of a turn, for its end line: ``35.0k in · 900 out``."""
    return f"{_tokens(read)} in · {_tokens(wrote)} out"


def spent_text(spent: Spent) -> str:
    """What a turn or session used, for the turn's end line: ``1.2k tokens · $0.04``."""
    text = f"{_tokens(spent['tokens'])} tokens"
    cost = spent.get("cost")
    if cost is not None:
        amount, currency = money(cost["amount"]), cost["currency"]
        text += f" · ${amount}" if currency == "USD" else f" · {amount} {currency}"
    return text


def money(amount: float) -> str:
    """``amount`` to the cent, and one under a cent to two significant digits: a turn
    of a cheap model cost "$0.0031", not "$0.00" (winbar.lua's ``money`` says it alike)."""
    if abs(amount) >= 0.01 or abs(amount) < 1e-6:
        return f"{amount:.2f}"
    digits = 1 - math.floor(math.log10(abs(amount)))
    return f"{amount:.{digits}f}".rstrip("0")


def notice_op(block_id: str, kind: str, lines: list[str]) -> BlockOp:
    """A line or two from the client itself: turn end, errors, information."""
    return {"op": "block", "id": block_id, "kind": kind, "lines": lines}


# The prefix of a mark's block id (``Session.new_id``), which the history knows it by,
# and <CR> on it too (lua/acp/chat/tools.lua).
MARK = "branch"


def mark_op(block_id: str) -> BlockOp:
    """The mark where another branch leaves the one shown."""
    return notice_op(block_id, "info", ["*⎇ Another branch leaves here (:AcpBranches).*"])


def is_mark(key: str) -> bool:
    """Whether the block keyed ``key`` is a mark (:func:`mark_op`)."""
    return key.startswith("#" + MARK)


def status_op(**fields: Unpack[StatusFields]) -> StatusOp:
    return {"op": "status", **fields}


def turn_op(number: int, prompt: str, branch: dict[str, Any]) -> TurnOp:
    """Turn ``number`` of the shown branch began (``prompt``: its line in the status's
    ``turns``); ``branch``: the shown branch's entry in ``branches`` now."""
    return {"op": "turn", "number": number, "prompt": prompt, "branch": branch}
