"""Transcript blocks as the history keeps them, and back.

A live chat's items (messages, tool calls, plans, compactions) and notices become
:class:`StoredBlock` rows here; stored rows become the same render ops the chat
drew (through ``session.view``, so a reopened chat looks as it did) and Markdown
(export, and the conversation a seeded session starts with).

Never stored: image bytes (an image is its path and size), a tool call's raw
input, the login values of ``:AcpLogin`` (they never reach a chat).
"""

from __future__ import annotations

__all__ = [
    "NOTICES",
    "attachment_data",
    "block_id",
    "date",
    "introduced",
    "kept_worktree",
    "markdown",
    "notice_block",
    "render_ops",
    "review_of",
    "stored",
    "stored_prompt",
    "turn_report",
    "waiting_files",
]

import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from acp_nvim.client.editor import RenderOp, TurnTokens
from acp_nvim.client.history._store import ChatRow, StoredBlock
from acp_nvim.client.session import view
from acp_nvim.client.session.model import (
    FILE_PLAN,
    MARKDOWN_PLAN,
    Attachment,
    ChangesPart,
    ContentPart,
    DiffPart,
    ExitStatus,
    FileOp,
    Location,
    Message,
    PermissionPrompt,
    PlanEntry,
    Prompt,
    Session,
    TerminalPart,
    TerminalView,
    TextPart,
    ToolCall,
    attached_line,
)
from acp_nvim.client.session.prose import heading_words, nested
from acp_nvim.client.session.workspace import KeptWorktree, Workspace, shown_path
from acp_nvim.review import format_unified

# Blocks the client draws itself (turn ends, the files a turn changed, errors,
# information).
NOTICES = ("turn", "changes", "error", "info")
_MESSAGE, _PLAN, _COMPACTION = "#message:", "#plan:", "#compaction:"
# The blocks of the agent's that the export puts under its heading (a message heads
# itself), and the levels of the export's own headings (title, who speaks, a part).
_AGENTS_PARTS = ("thought", "tool", "plan")
_LEVELS = 3
# The heading the export puts over the client's notices: neither the user's words
# nor the agent's (a turn's end says what the user made of its review).
_NOTICES_HEADING = "## acp.nvim"
# The line before a conversation handed over (introduced).
_INTRO = "#intro"
# The note after a conversation handed over or forked (its block's name: Chat.info).
CONTINUED = "continued"
# That note as kept before it had that name: a plain note (``#info<n>``) so worded.
_CONTINUED_BEFORE = re.compile(r"#info\d+\Z"), re.compile(r"\*(Handed over|Forked) from .*\*\Z")
_encode = msgspec.json.Encoder().encode


def _json(data: dict[str, Any] | None) -> str | None:
    return _encode(data).decode() if data else None


def attachment_data(attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """What is kept of a prompt's attachments: an image's path and size, never its bytes."""
    kept = []
    for a in attachments:
        item: dict[str, Any] = {"kind": a.kind, "label": a.label, "uri": a.uri}
        if a.mime_type:
            item["mime_type"] = a.mime_type
        if a.kind == "image":
            item["size"] = len(a.data or "") * 3 // 4
        elif a.text is not None:
            item["text"] = a.text
        if a.links:
            item["links"] = list(a.links)
        if a.given:
            item["given"] = True
        kept.append(item)
    return kept


def stored_prompt(block: StoredBlock) -> Prompt:
    """The prompt stored user's message ``block`` was, to edit or send again: its words
    (without the line naming its attachments) and what it carried, as it was sent.
    Not an image, whose bytes are not kept: it is attached again by hand."""
    kept = _data(block).get("attachments") or []
    attachments = []
    for item in kept:
        try:
            attachment = msgspec.convert(item, Attachment)
        except msgspec.ValidationError:
            continue
        if attachment.kind != "image":
            attachments.append(attachment)
    return Prompt(_words(block, kept), attachments)


def _words(block: StoredBlock, attachments: Sequence[dict[str, Any]]) -> str:
    """A stored message's text without the line naming ``attachments`` under it."""
    if not attachments:
        return block.text
    return block.text.removesuffix("\n\n" + attached_line([a["label"] for a in attachments]))


def stored(
    key: str, session: Session, seq: int, turn: int, extra: dict[str, Any] | None = None
) -> StoredBlock | None:
    """The live item drawn as block ``key`` as a row (None: no such item)."""
    if key.startswith(_MESSAGE):
        message = session.messages.get(key[len(_MESSAGE) :])
        if message is None:
            return None
        return StoredBlock(seq, key, turn, message.role, message.text, _json(extra))
    if key.startswith(_PLAN):
        entries = session.plans.get(key[len(_PLAN) :])
        if entries is None:
            return None
        data = {"entries": [[e.content, e.status, e.priority] for e in entries]}
        return StoredBlock(
            seq, key, turn, "plan", "\n".join(e.content for e in entries), _json(data)
        )
    if key.startswith(_COMPACTION):
        compaction = session.compactions.get(key[len(_COMPACTION) :])
        if compaction is None:
            return None
        # Kept as drawn (its state, the summary): drawn again as a notice is.
        lines = view.compaction_op(compaction)["lines"]
        return StoredBlock(seq, key, turn, "compaction", "\n".join(lines))
    call = session.tool_calls.get(key)
    if call is None:
        return None
    return StoredBlock(seq, key, turn, "tool", call.title, _json(_tool_data(call, session)))


def notice_block(
    key: str, kind: str, lines: list[str], seq: int, turn: int, data: dict[str, Any] | None
) -> StoredBlock:
    return StoredBlock(seq, key, turn, kind, "\n".join(lines), _json(data))


def introduced(source: str, agent: str, blocks: Sequence[StoredBlock]) -> list[StoredBlock]:
    """``blocks``, the conversation of chat ``source`` (as a transcript names it)
    handed over, after a line before every turn saying where it came from and that
    ``agent`` answered it. A conversation handed over before begins with such a
    line: it goes, and the new one names the chat it began in too, whose agent
    answered its first turns (the chats between are named by the line each
    hand-over left after their turns), so a chain of hand-overs is said once."""
    earlier = _data(blocks[0]) if blocks and blocks[0].key == _INTRO else {}
    origin = earlier.get("origin")
    if isinstance(origin, str):
        blocks, agent = blocks[1:], str(earlier.get("agent", agent))
        line = f"*From {source}, handed over from {origin}: {agent} answers from here.*"
    else:
        origin, line = source, f"*From {source}: {agent} answers from here.*"
    intro = notice_block(_INTRO, "info", [line], -1, 0, {"origin": origin, "agent": agent})
    intro.node = 0
    return [intro, *blocks]


def conversation(blocks: Sequence[StoredBlock]) -> list[StoredBlock]:
    """``blocks`` as a session that does not know them is told them: without the
    chat's errors and notes, the client's words to the user (but those saying where
    the turns came from and whose they are); how each turn ended and what it
    changed stay."""
    return [
        block
        for block in blocks
        if block.kind not in ("error", "info") or block.key == _INTRO or _continued(block)
    ]


def _continued(block: StoredBlock) -> bool:
    """Whether ``block`` is the note after a conversation handed over or forked,
    named so (since the thirty-eighth session) or kept before as a plain note."""
    if block.key.startswith(f"#{CONTINUED}"):
        return True
    key, text = _CONTINUED_BEFORE
    return key.match(block.key) is not None and text.match(block.text) is not None


def began_in_replay(blocks: Sequence[StoredBlock]) -> bool:
    """Whether a stored chat's conversation begins with a prompt its agent replayed
    (:AcpResume): it began before the chat, and nothing says when. The client's own
    notices drawn before the replay (an MCP server the agent cannot take) are not it."""
    said = (block for block in blocks if block.kind not in NOTICES)
    first = min(said, key=lambda block: block.seq, default=None)
    return first is not None and _data(first).get("replayed") is True


def review_of(summary: dict[str, Any], turn: int) -> list[dict[str, Any]]:
    """What is kept of the review of ``turn``'s files: each path, whether it was
    made or deleted, and each hunk's header and status (pending, accepted, ...); a
    file with no text, what the review says of it and its status as a whole."""
    kept = []
    for file in summary.get("files") or []:
        if file.get("turn") != turn:
            continue
        hunks = [[hunk["header"], hunk["status"]] for hunk in file.get("hunks") or []]
        item: dict[str, Any] = {"path": file["path"], "hunks": hunks}
        if binary := file.get("binary"):
            item["binary"] = [binary["about"], binary["status"]]
        kept.append(item | {k: True for k in ("created", "deleted") if file.get(k)})
    return kept


class _Cost(msgspec.Struct, frozen=True):
    amount: float
    currency: str


class _Spent(msgspec.Struct, frozen=True, omit_defaults=True):
    tokens: int
    cost: _Cost | None = None


class _Report(msgspec.Struct, frozen=True, omit_defaults=True):
    """A usage report with what its session's turns had used (``Usage.summed``)."""

    used: int
    size: int
    cost: _Cost | None = None
    session: _Spent | None = None


class _TurnUsed(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a turn's end kept beside the report: what the last turn used (the
    status's ``turn``, where known), the agent's own count of it."""

    turn: _Spent | None = None
    turn_tokens: TurnTokens | None = None


def turn_report(blocks: Sequence[StoredBlock]) -> dict[str, Any] | None:
    """The usage report the last turn end of ``blocks`` kept (a turn's blocks: when it
    ended), with what its session's turns had used and, where kept, what the turn
    used (:class:`_TurnUsed`, left out where it does not read); None where no report
    was kept or it does not read (a damaged row)."""
    ends = [block for block in blocks if block.kind == "turn"]
    if not ends:
        return None
    data = _data(ends[-1])
    try:
        report = msgspec.convert(data.get("usage"), _Report)
    except msgspec.ValidationError:
        return None
    try:
        used = msgspec.convert(data, _TurnUsed)
    except msgspec.ValidationError:
        used = _TurnUsed()
    return msgspec.to_builtins(report) | msgspec.to_builtins(used)  # type: ignore[no-any-return]


def waiting_files(blocks: Sequence[StoredBlock]) -> list[str]:
    """The files with hunks pending in a stored chat's review (as its turns' ends
    kept it), or with no text and their change pending, by the user's paths, in
    the order first met."""
    waiting: dict[str, None] = {}
    for block in blocks:
        if block.kind != "turn":
            continue
        for file in _data(block).get("review") or []:
            hunks = file.get("hunks") or []
            pending = hunks.get("pending") if isinstance(hunks, dict) else any(
                status == "pending" for _, status in hunks
            )
            if pending or (file.get("binary") or [None, None])[1] == "pending":
                waiting[file["path"]] = None
    return list(waiting)


def _review_lines(files: list[dict[str, Any]], cwd: str) -> list[str]:
    """A turn's review, a line per file: ``- `a.py`: `@@ -1 +1 @@` accepted, ...``;
    the user's files named relative to ``cwd``, the user's directory of the chat."""
    lines = ["*Review:*"]
    for file in files:
        hunks = file.get("hunks") or []
        if isinstance(hunks, dict):  # kept before hunks were listed: counts by status
            said = ", ".join(f"{n} {status}" for status, n in sorted(hunks.items()))
        else:
            said = ", ".join(f"`{header}` {status}" for header, status in hunks)
        if binary := file.get("binary"):  # as the live review says it (decision 0099)
            said = "{}, whole file {}".format(*binary)
        made = " (new)" if file.get("created") else " (deleted)" if file.get("deleted") else ""
        path = shown_path(file["path"], cwd)
        lines.append(f"- `{path}`{made}" + (f": {said}" if said else ""))
    return lines


def _tool_data(call: ToolCall, session: Session) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": call.kind, "status": call.status}
    if call.content:
        data["content"] = [_part(p, session.terminals) for p in call.content]
    if call.locations:
        data["locations"] = [[loc.path, loc.line] for loc in call.locations]
    prompt = call.permission
    if prompt is not None:
        data["permission"] = {"question": prompt.question, "outcome": prompt.outcome}
    return data


def _part(part: ContentPart, terminals: dict[str, TerminalView]) -> dict[str, Any]:
    match part:
        case TextPart(text=text):
            return {"type": "text", "text": text}
        case DiffPart(path=path, old_text=old, new_text=new):
            return {"type": "diff", "path": path, "old": old, "new": new}
        case ChangesPart(changes=changes, patch=patch, patch_format=patch_format):
            ops = [[c.operation, c.path, c.old_path, c.file_type] for c in changes]
            return {"type": "changes", "changes": ops, "patch": patch, "format": patch_format}
    # A terminal is kept as the transcript showed it: its last lines and exit.
    assert isinstance(part, TerminalPart)
    term = terminals.get(part.terminal_id)
    kept: dict[str, Any] = {"type": "terminal", "id": part.terminal_id}
    if term is not None:
        kept |= {"key": term.key, "label": term.label, "lines": term.lines}
        if term.display:
            kept["display"] = True
        if term.exit_status is not None:
            kept["exit"] = [term.exit_status.exit_code, term.exit_status.signal]
    return kept


def _data(block: StoredBlock) -> dict[str, Any]:
    if not block.data:
        return {}
    try:
        data = msgspec.json.decode(block.data)
    except msgspec.DecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _mapping(value: Any) -> dict[str, Any]:
    """A kept object, or an empty one where what was kept is not one."""
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    """A kept count of tokens; None where it is not one (``true`` is no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tool_call(block: StoredBlock, terminals: dict[str, TerminalView]) -> ToolCall:
    data = _data(block)
    call = ToolCall(block.key, block.text, str(data.get("kind", "other")))
    call.status = str(data.get("status", "pending"))
    for item in data.get("content") or []:
        match item.get("type"):
            case "text":
                call.content.append(TextPart(str(item.get("text", ""))))
            case "diff":
                call.content.append(DiffPart(item["path"], item.get("old"), item.get("new", "")))
            case "changes":
                changes = [FileOp(*c) for c in item.get("changes") or []]
                call.content.append(ChangesPart(changes, item.get("patch"), item.get("format")))
            case "terminal":
                terminal_id = str(item.get("id", "?"))
                if "key" in item:
                    code, signal = item.get("exit") or [None, None]
                    terminals[terminal_id] = TerminalView(
                        item["key"], item.get("label", ""), list(item.get("lines") or []),
                        ExitStatus(code, signal) if "exit" in item else None,
                        display=item.get("display") is True,
                    )  # fmt: skip
                call.content.append(TerminalPart(terminal_id))
    call.locations = [Location(path, line) for path, line in data.get("locations") or []]
    permission = data.get("permission")
    if permission is not None:
        # A request still pending when it was kept is over now.
        outcome = permission.get("outcome") or "not answered"
        call.permission = PermissionPrompt("", [], outcome, permission.get("question"))
    return call


def render_ops(
    blocks: Sequence[StoredBlock],
    prefix: str,
    workspace: Workspace,
    prompts: Mapping[int, int] | None = None,
    plans: int = 0,
) -> list[RenderOp]:
    """The ops drawing ``blocks`` as the chat drew them, with the ids of
    :func:`block_id` (``prefix``: a reopened chat's own blocks never meet them) and
    files named as the chat drawing them names them: the agent's relative to its
    session's directory, the review's (the user's files) to the user's.
    ``prompts``: the turn each prompt that begins one begins, by its block's seq (the
    edit key on it puts it back in the input). ``plans``: how many plans the chat
    showed before these blocks (numbered as the chat numbered them: in their order)."""
    ops: list[RenderOp] = []
    terminals: dict[str, TerminalView] = {}
    for block in blocks:
        op: RenderOp | None
        if block.kind in ("user", "agent", "thought"):
            message = Message(block.key.removeprefix(_MESSAGE), block.kind)  # type: ignore[arg-type]
            message.text = block.text
            op = view.message_op(message, (prompts or {}).get(block.seq))
        elif block.kind == "tool":
            op = view.ToolCallDrawing(workspace.cwd).op(_tool_call(block, terminals), terminals)
        elif block.kind == "plan":
            entries = [PlanEntry(*entry) for entry in _data(block).get("entries") or []]
            plans += 1
            op = view.plan_op(block.key.removeprefix(_PLAN), entries, plans)
        else:
            lines = block.text.split("\n")
            review = _data(block).get("review") if block.kind == "turn" else None
            if review:  # a paragraph of its own, as in the export
                lines += ["", *_review_lines(review, workspace.user_cwd)]
            # A turn's changed files as information: no review acts on them here.
            kind = "info" if block.kind == "changes" else block.kind
            op = view.notice_op(block.key, kind, lines)
        if op is not None:
            ops.append(view.bounded({**op, "id": block_id(prefix, block)}))
    return ops


def block_id(prefix: str, block: StoredBlock) -> str:
    """The id a stored block is drawn with: by its place (keys repeat in a chat that
    went on after a reopen: the live chat's ids start again)."""
    return f"{prefix}{block.seq}"


def markdown(chat: ChatRow, blocks: Sequence[StoredBlock], *, diffs: bool = True) -> str:
    """The chat as Markdown: a header (agent, directory, dates), then every prompt
    and reply, thoughts as quotes under their heading, tool calls (their diffs in fenced blocks with
    ``diffs``), plans, and each turn's end with its usage."""
    title = chat.name or chat.title or f"Chat {chat.id}"
    lines = [f"# {heading_words(title)}", "", f"- Agent: {chat.agent}", f"- Directory: {chat.cwd}"]
    # A worktree chat's files are named from its directory there, as its transcript
    # names them; the review's are the user's, from ``chat.cwd``.
    kept = kept_worktree(chat.worktree)
    worked_in = chat.cwd if kept is None else kept.cwd
    if kept is not None:
        lines.append(f"- Worktree: {kept.worktree.path} (branch {kept.worktree.branch})")
    lines += [f"- Started: {date(chat.created_at)}", f"- Last change: {date(chat.updated_at)}"]
    terminals: dict[str, TerminalView] = {}
    plans = 0
    # Whose section the lines go in: "user", "agent", "notices" (None: the header's).
    speaking = None
    for block in blocks:
        lines.append("")
        if block.kind in _AGENTS_PARTS and speaking != "agent":
            # Under the agent's heading, not the prompt's (the transcript heads the
            # first reply only): a thought or tool call before it was the user's part.
            lines += [view.HEADERS["agent"], ""]
            speaking = "agent"
        elif block.kind in NOTICES and speaking != "notices":
            # An error after a prompt read as the user's words, a turn's end (the
            # user's review of it) as the agent's.
            lines += [_NOTICES_HEADING, ""]
            speaking = "notices"
        if block.kind in ("user", "agent"):
            attachments = _data(block).get("attachments") or []
            # The list below names each with its address: the transcript's line goes.
            text = _words(block, attachments)
            lines += [view.HEADERS[block.kind], ""]
            speaking = block.kind
            # Its headings below the export's own, its code fence closed after it.
            lines += view.close_fence(nested(text.split("\n"), _LEVELS))
            lines += [""] if attachments else []
            for attachment in attachments:
                size = f", {attachment['size']} bytes" if "size" in attachment else ""
                lines.append(f"- attached: {attachment['label']} ({attachment['uri']}{size})")
        elif block.kind == "thought":  # headed as in the transcript: no words of the prompt
            lines += [view.HEADERS["thought"], ""]
            lines += ["> " + line if line else ">" for line in block.text.split("\n")]
        elif block.kind == "tool":
            lines += _tool_markdown(_tool_call(block, terminals), terminals, worked_in, diffs)
        elif block.kind == "plan":
            plans += 1
            lines += [f"**{view.plan_name(plans)}**", ""]
            # A markdown plan's text as it is; a file's URI.
            lines += [c if s in (MARKDOWN_PLAN, FILE_PLAN)
                      else f"- [{'x' if s == 'completed' else ' '}] {c}"
                      for c, s, _ in _data(block).get("entries") or []]  # fmt: skip
        elif block.kind == "turn":
            lines.append(_turn_markdown(block, chat.cwd))
        else:
            lines.append(block.text)
    return "\n".join(lines) + "\n"


def _tool_markdown(
    call: ToolCall, terminals: dict[str, TerminalView], cwd: str, diffs: bool
) -> list[str]:
    """A tool call as Markdown: files named as the transcript names them (``cwd``:
    the chat's directory, which the export's header gives)."""
    title = heading_words(view.one_row(call.title or call.kind))
    lines = [f"### Tool: {title}", "", f"`{call.kind}` · {call.status}"]
    for part in call.content:
        if isinstance(part, DiffPart):
            path = shown_path(part.path, cwd)
            if diffs:
                lines += ["", *_fence(format_unified(path, part.old_text, part.new_text), "diff")]
            else:
                lines.append(f"- changed {path}")
        elif isinstance(part, ChangesPart):
            lines += ["- " + " ".join(view.change_words(c, cwd)) for c in part.changes]
            if diffs and part.patch:
                lines += ["", *_fence(part.patch, "diff")]
        elif isinstance(part, TerminalPart):
            term = terminals.get(part.terminal_id)
            if term is not None:  # its command line and end, as the transcript shows them
                lines += ["", *view.terminal_lines(part.terminal_id, term, call.status)]
        elif part.text.strip():
            lines += ["", *view.close_fence(nested(part.text.split("\n"), _LEVELS))]
    for location in call.locations:
        where = shown_path(location.path, cwd)
        lines.append(f"- at {where}" + (f":{location.line}" if location.line else ""))
    if call.permission is not None:
        lines.append(f"- permission: {call.permission.outcome}")
    return lines


def _fence(text: str, info: str) -> list[str]:
    """``text`` fenced as the transcript fences it (:func:`view.fenced`)."""
    return view.fenced(text.rstrip("\n").split("\n"), info)


def _turn_markdown(block: StoredBlock, cwd: str) -> str:
    """A stored turn's end as it kept it: a figure that does not read (a damaged row)
    is left out, and the agent's own count is there only where it was kept (not in
    chats kept before it was read)."""
    data = _data(block)
    line = f"*Turn ended: {data.get('stop_reason', '?')}"
    usage = _mapping(data.get("usage"))
    if _count(usage.get("size")):
        line += f" · context {_count(usage.get('used')) or 0}/{usage['size']} tokens"
    cost = _mapping(usage.get("cost"))
    if isinstance(cost.get("amount"), (int, float)) and not isinstance(cost["amount"], bool):
        line += f" · cost {view.money(cost['amount'])} {cost.get('currency', '')}".rstrip()
    counted = _mapping(data.get("turn_tokens"))
    read, wrote = _count(counted.get("input")), _count(counted.get("output"))
    if read is not None and wrote is not None:
        line += f" · {view.counted_text(read, wrote)}"
    line += "*"
    if not data.get("review"):
        return line
    return "\n".join([line, "", *_review_lines(data["review"], cwd)])


def kept_worktree(text: str | None) -> KeptWorktree | None:
    """A stored chat's ``worktree`` column read, its paths resolved; None for none,
    or one that does not read."""
    if not text:
        return None
    try:
        kept = msgspec.json.decode(text, type=KeptWorktree)
    except msgspec.MsgspecError:
        return None
    # Kept before the worktrees' home was resolved (a stdpath("state") behind a
    # link): its real paths are those git, Neovim and the agent name its files by.
    # A relative one (a relative state directory) is the project's: git, which ran
    # there, made the worktree there, not in whichever directory reads it now.
    worktree = kept.worktree
    project = os.path.realpath(worktree.project)
    path = os.path.realpath(os.path.join(project, worktree.path))
    resolved = msgspec.structs.replace(worktree, path=path, project=project)
    return KeptWorktree(resolved, os.path.realpath(os.path.join(project, kept.cwd)))


def date(stamp: float) -> str:
    """When ``stamp`` was, as the export and the transcript say it."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))
