"""The one session model, shaped like ACP v2 (the superset of v1).

Per-version adapters turn wire updates into the patches defined here; the model
applies them and reports what changed so the view can redraw just that item.
Nothing in this module knows a protocol version or a wire type.

- Messages are keyed by id: chunks append, a whole-message patch replaces.
- Tool calls are keyed by id: a patch names only the fields it sets
  (``UNSET`` = leave alone), and the first patch for an unknown id creates it.
- The turn state is ``idle`` / ``running`` / ``requires_action`` with the last
  stop reason.
- Ids the client makes (v1 messages, the prompt's echo, turn marks) start with one
  ``#``; an agent's id is keyed through :func:`agent_id`, so the two never meet. An
  agent's ids are unique within its session only: those of a chat's later sessions
  are keyed under a scope of their own (:func:`session_scope`).
"""

from __future__ import annotations

__all__ = [
    "FILE_PLAN",
    "MARKDOWN_PLAN",
    "UNSET",
    "Attachment",
    "ChangesPart",
    "Choices",
    "Compaction",
    "ConfigOption",
    "ContentPart",
    "DiffPart",
    "ExitStatus",
    "FileOp",
    "FilePreview",
    "Location",
    "LoginMethod",
    "Message",
    "MessagePatch",
    "PermissionOption",
    "PermissionPrompt",
    "PlanEntry",
    "PreviewHunk",
    "Prompt",
    "Session",
    "TerminalPart",
    "TerminalView",
    "TextPart",
    "ToolCall",
    "ToolCallPatch",
    "TurnState",
    "agent_id",
    "attached_line",
    "session_scope",
    "wire_id",
]

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, NamedTuple

import msgspec
from msgspec import UNSET, UnsetType

from acp_nvim.client.session.prose import fence_after

Role = Literal["user", "agent", "thought"]
TurnState = Literal["idle", "running", "requires_action"]


class LoginMethod(msgspec.Struct):
    """A way to log in to the agent: ``agent`` (it runs its own flow on request),
    ``terminal`` (its program runs with ``args``/``env`` in a terminal the user
    works in), or ``env`` (the user gives the values of ``vars``, passed in the
    agent's environment)."""

    id: str
    name: str
    kind: Literal["agent", "terminal", "env"]
    description: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    vars: list[str] = msgspec.field(default_factory=list)


class Attachment(msgspec.Struct):
    """Context the user sends with a prompt: a file, a selection, diagnostics, an image,
    a directory, the quickfix list, the work tree's diff, a web address.

    ``text`` is what the user sees (a buffer's unsaved text included); None sends
    only a link to ``uri``. ``data`` is an image's bytes, base64. ``label`` names it
    in the transcript (``a.py``, ``a.py:10-20``). ``links``: a directory's files,
    sent one link each to an agent that takes no embedded context. ``given``: apart
    from the prompt's text (``send()``'s ``context``), not by a mention in it: an edit
    of the prompt carries it (a mention there is resolved again, or gone with it).
    """

    kind: Literal[
        "file", "selection", "diagnostics", "image", "directory", "quickfix", "diff", "url"
    ]
    label: str
    uri: str
    text: str | None = None
    mime_type: str | None = None
    data: str | None = None
    links: tuple[str, ...] = ()
    given: bool = False


class Prompt(msgspec.Struct):
    """A prompt as the user sent it (or will: queued): its text and what is attached;
    ``rank``: its place in its chat's queue, once queued (``PromptQueue.put``);
    ``again``: a turn's prompt sent again (:AcpRegenerate), not taken from the
    input: refused, it goes back to none."""

    text: str
    attachments: list[Attachment] = msgspec.field(default_factory=list)
    rank: int = 0
    again: bool = False


# Tool call statuses that mean "still going"; at turn end they are shown cancelled.
UNFINISHED = ("pending", "in_progress")
# Streamed chunks joined into one run of a message (see Message).
_RUN = 256
# What a steer keeps of the line it waits to part a message at: enough to see a fence.
PARTING_LINE = 200


def agent_id(wire_id: str, scope: str = "") -> str:
    """The key of an id the agent chose in a session whose ids are keyed under
    ``scope`` (:func:`session_scope`): the id, unless it starts with ``#``, the mark
    of the client's own ids (:meth:`Session.new_id`); then it gets another."""
    return scope + ("#" + wire_id if wire_id.startswith("#") else wire_id)


def session_scope(number: int) -> str:
    """Where the agent's ids are keyed in the ``number``-th session (from 0) a chat
    shows: the spec makes them unique within a session only, and a chat goes on in
    new ones (a restart, a rewind), its earlier turns still shown. The first
    session's ids are keys as they are."""
    return f"#s{number}:" if number else ""


_SCOPE = re.compile(r"#s\d+:")


def wire_id(key: str) -> str | None:
    """The id the agent chose for the item keyed ``key`` (see :func:`agent_id`), or
    None for an id of the client's own."""
    if (scope := _SCOPE.match(key)) is not None:
        key = key[scope.end() :]
    if key.startswith("##"):
        return key[1:]
    return None if key.startswith("#") else key


class TextPart(msgspec.Struct):
    """Displayable text (markdown); non-text content arrives already described."""

    text: str


class DiffPart(msgspec.Struct):
    """A file change: ``old_text`` None means a new file."""

    path: str
    old_text: str | None
    new_text: str


class FileOp(msgspec.Struct):
    """One file-level change of a structured diff (v2 ``changes``).

    ``operation`` is add / delete / modify / move / copy, or a newer one kept as is;
    ``old_path`` is set for move and copy.
    """

    operation: str
    path: str
    old_path: str | None = None
    file_type: str | None = None


class ChangesPart(msgspec.Struct):
    """File changes with optional renderable patch text (``git_patch``)."""

    changes: list[FileOp]
    patch: str | None = None
    patch_format: str | None = None


class TerminalPart(msgspec.Struct):
    terminal_id: str


class ExitStatus(msgspec.Struct):
    """How a terminal's command ended: an exit code, or the signal that killed it."""

    exit_code: int | None = None
    signal: str | None = None


class TerminalView(msgspec.Struct):
    """What the transcript shows of a terminal (v1 command or display terminal).

    ``key`` names its editor buffer (``:AcpTerminal key``); ``lines`` are the
    last lines of its output, escape-free; ``exit_status`` None while it runs.
    ``display``: the agent runs it itself, so it ends only when the agent says.
    """

    key: str
    label: str = ""
    lines: list[str] = msgspec.field(default_factory=list)
    exit_status: ExitStatus | None = None
    display: bool = False


ContentPart = TextPart | DiffPart | ChangesPart | TerminalPart


class Location(msgspec.Struct):
    path: str
    line: int | None = None


class Message(msgspec.Struct):
    """A message; streamed chunks are kept in runs and joined when ``text`` is read.
    ``attached``: what a user's message carries besides its words, named on a line
    under them (chunks streamed into it go above that line); ``named_by_user``:
    those are the names the user's echo gave them, which the chunks of its
    acknowledgment keep (they carry the agent's URIs of the same files).

    Appending each chunk to one growing str would copy the whole message per
    chunk: 100k chunks of 20 bytes cost seconds (quadratic), while a list of runs
    costs O(1) per chunk and a few bytes of overhead per 256 chunks.
    """

    id: str
    role: Role
    _runs: list[str] = msgspec.field(default_factory=list)
    _chunks: list[str] = msgspec.field(default_factory=list)
    attached: tuple[str, ...] = ()
    named_by_user: bool = False

    @property
    def words(self) -> str:
        """Its text without the line naming what it carried (``attached``)."""
        words = "".join([*self._runs, *self._chunks])
        self._runs[:] = [words]
        self._chunks.clear()
        return words

    @property
    def text(self) -> str:
        words = self.words
        return words + "\n\n" + attached_line(self.attached) if self.attached else words

    @text.setter
    def text(self, text: str) -> None:
        self._runs[:] = [text]
        self._chunks.clear()

    def append(self, text: str) -> None:
        chunks = self._chunks
        chunks.append(text)
        if len(chunks) >= _RUN:
            self._runs.append("".join(chunks))
            chunks.clear()


class MessagePatch(msgspec.Struct):
    """Append ``text`` to a message (``replace`` False) or set its whole text."""

    message_id: str | None
    role: Role
    text: str
    replace: bool = False
    # What a user message carries besides its words (files, images), named on its
    # "Attached" line, not stuck to the words as links; set with its whole text,
    # added to by a chunk (a file streamed in a replayed message or an ack).
    attached: tuple[str, ...] = ()


def attached_line(labels: Sequence[str]) -> str:
    """The line under a prompt that names what was attached with it."""
    return "*Attached: " + ", ".join(labels) + "*"


class PermissionOption(msgspec.Struct):
    """One answer to a permission request; ``kind`` None when the agent sent none."""

    id: str
    name: str
    kind: str | None = None
    key: str | None = None  # the key that picks it in the chat


class PreviewHunk(msgspec.Struct):
    """Rows ``[row, row + count)`` of a file's text now (0-based) would become ``lines``;
    ``held``: they stay (the user's unsaved lines, kept by the write), and ``lines``,
    the agent's, wait there in the review as a conflict."""

    row: int
    count: int
    lines: list[str]
    held: bool = False


class FilePreview(msgspec.Struct):
    """What an edit waiting for permission would do to one file, against its text now
    (its buffer's, unsaved edits included, else the disk's): ``created`` when there is
    no such file yet, ``deleted`` when the edit removes it. ``binary``: a file with
    no text, changed as a whole (no hunks), what the review would say of it now
    (``binary, 2.1 KB``): the prompt names it, no file shows it."""

    path: str
    hunks: list[PreviewHunk]
    created: bool = False
    deleted: bool = False
    binary: str | None = None


class PermissionPrompt(msgspec.Struct):
    """A permission request shown at its tool call; ``outcome`` None while pending.

    ``question`` is the request's own wording (v2 ``title``/``description``) when the
    tool call's title alone does not carry it. ``preview``: the files the request's
    edit would change, shown in those files while it is pending. ``why_key``: the
    key for "reject, and say why" (the user's ``keys.permission.reject_why``; None:
    none, the picker still offers it).
    """

    id: str
    options: list[PermissionOption]
    outcome: str | None = None
    question: str | None = None
    preview: list[FilePreview] = msgspec.field(default_factory=list)
    why_key: str | None = None


class ToolCall(msgspec.Struct):
    id: str
    title: str = ""
    kind: str = "other"
    status: str = "pending"
    content: list[ContentPart] = msgspec.field(default_factory=list)
    locations: list[Location] = msgspec.field(default_factory=list)
    raw_input: Any = None
    permission: PermissionPrompt | None = None
    own: bool = False  # the client's own (a v2 permission's subject): no agent updates it
    name: str | None = None  # the tool's programmatic name (Bash, exec_command), if sent


class ToolCallPatch(msgspec.Struct):
    """Fields to set on a tool call; UNSET leaves a field as it is.

    ``id`` None: a call of the client's own (it gets a local id). ``append_content``
    adds to the content instead of replacing it (v2 chunks).
    """

    id: str | None
    title: str | UnsetType = UNSET
    kind: str | UnsetType = UNSET
    status: str | UnsetType = UNSET
    content: list[ContentPart] | UnsetType = UNSET
    append_content: list[ContentPart] | UnsetType = UNSET
    locations: list[Location] | UnsetType = UNSET
    raw_input: Any = UNSET
    name: str | UnsetType | None = UNSET


class Choices(msgspec.Struct, frozen=True):
    """A select's choices: (value, name) pairs when iterated, kept as two tuples of
    strings. 500,000 of them made as pairs were 500,000 objects for the collector to
    count and walk, holding the GIL 15-20 ms a collection (issue 29.7)."""

    values: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> Choices:
        values, names = [], []
        for value, name in pairs:
            values.append(value)
            names.append(name)
        return cls(tuple(values), tuple(names))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return zip(self.values, self.names, strict=True)

    def __len__(self) -> int:
        return len(self.values)


class ConfigOption(msgspec.Struct):
    """A session setting: a config option, or an agent's modes or models shown as one
    (category ``mode`` / ``model``) when it sends no config option of that category.

    ``type`` is ``select`` or ``boolean`` (newer types are listed, not editable);
    ``choices`` are the (value, name) pairs of a select; ``source`` is what the
    agent sent: ``config`` (a config option), ``modes`` or ``models``.
    """

    id: str
    name: str
    type: str
    current: str | bool | None
    category: str | None = None
    description: str | None = None
    choices: Choices = Choices()
    source: Literal["config", "modes", "models"] = "config"


class Compaction(msgspec.Struct):
    """The agent compacting its context: ``status`` in_progress, completed, failed,
    cancelled (or newer, kept as is); ``summary`` what it retained, as markdown."""

    id: str
    status: str = "in_progress"
    summary: str = ""
    error: str | None = None


# The statuses of a plan's one entry that is its whole markdown text, or its file's URI.
MARKDOWN_PLAN, FILE_PLAN = "markdown", "file"


class PlanEntry(NamedTuple):
    """One step of a plan. A tuple: the collector stops following it once it saw it,
    where 10k class instances of a plan made their update set off full collections
    (issue 29.7). A plan given otherwise than as steps (v2) is one entry whose status
    says how: :data:`MARKDOWN_PLAN` (``content``: its text), :data:`FILE_PLAN`
    (``content``: the URI of the file that holds it)."""

    content: str
    status: str = "pending"
    priority: str = "medium"


class Session(msgspec.Struct):
    """State of one ACP session as the user sees it.

    ``items`` is the transcript order: ("message" | "tool" | "plan" | "compaction",
    id) pairs.
    """

    session_id: str = ""
    state: TurnState = "idle"
    stop_reason: str | None = None
    # The agent was asked to stop the running turn: "cancelling" until it ends, though
    # an agent still running a tool reports ``running`` or ``requires_action``.
    cancelling: bool = False
    title: str | None = None
    items: list[tuple[str, str]] = msgspec.field(default_factory=list)
    messages: dict[str, Message] = msgspec.field(default_factory=dict)
    tool_calls: dict[str, ToolCall] = msgspec.field(default_factory=dict)
    plans: dict[str, list[PlanEntry]] = msgspec.field(default_factory=dict)
    compactions: dict[str, Compaction] = msgspec.field(default_factory=dict)
    commands: list[dict[str, Any]] = msgspec.field(default_factory=list)
    config_options: list[ConfigOption] = msgspec.field(default_factory=list)
    usage: dict[str, Any] = msgspec.field(default_factory=dict)
    # By terminal id as tool call content names it; kept after release (still shown).
    terminals: dict[str, TerminalView] = msgspec.field(default_factory=dict)
    # The local echo of the user's prompt, until the agent acknowledges it with its
    # own message id; that id is then an alias of the echo (one message, not two).
    pending_echo: str | None = None
    # What the echo shows attached: its acknowledgment shows it so too (the agent
    # names a file by its URI, the user by the name they gave it).
    echo_attached: tuple[str, ...] = ()
    # The echo acknowledged by a message with no words yet (an empty first chunk,
    # attachments only): the words typed stay until the acknowledgment's first.
    unsaid: str | None = None
    aliases: dict[str, str] = msgspec.field(default_factory=dict)
    # Where in items the agent's message is that a steered message came into mid-line
    # or in a code block: it runs on to the end of a line outside code above the
    # user's message (parts), else Markdown reads the user's as code. The fence open
    # in it and its last line so far (its first PARTING_LINE characters).
    parting: int | None = None
    _parting_fence: str | None = None
    _parting_line: str = ""
    # Where the agent's ids are keyed (session_scope): for each session taken (by
    # id), for the one shown, and how many sessions were taken (take).
    scopes: dict[str, str] = msgspec.field(default_factory=dict)
    scope: str = ""
    _taken: int = 0
    _ids: itertools.count[int] = msgspec.field(default_factory=itertools.count)

    def __repr__(self) -> str:
        return (
            f"<Session {self.session_id or '?'} {self.state}, "
            f"{len(self.messages)} messages, {len(self.tool_calls)} tool calls>"
        )

    def take(self, session_id: str, *, created: bool) -> None:
        """The updates of ``session_id`` are this model's from now on; ``created``: the
        agent has just made it (a new session, a fork), so none of its ids was seen
        here, even if its id was (an agent started again may hand that out again).

        The ids of a session after the first are keyed under a scope of their own:
        they are unique within a session only, and the chat still shows earlier
        turns (a restart, a rewind), whose "m1" a new session's must not reach. A
        session taken again (a branch picked) keys them as it did."""
        scope = None if created else self.scopes.get(session_id)
        if scope is None:
            scope = session_scope(self._taken)
            self._taken += 1
        self.scopes[session_id] = self.scope = scope

    def forget(self, session_id: str) -> None:
        """The ids ``session_id`` gave so far are not those it gives next: a replay of
        it asked again (the one the agent died in is still shown until it is answered,
        decision 0088) keys its ids under a scope of their own."""
        self.scopes.pop(session_id, None)

    def key(self, wire: str) -> str:
        """The key of the agent's id ``wire`` in the session shown; a key stays as it
        is (a patch whose id was keyed already, applied again)."""
        if self.scope and wire.startswith(self.scope):
            return wire
        return agent_id(wire, self.scope)

    def wire_id(self, key: str) -> str | None:
        """The agent's id of the message keyed ``key``: its own, or, for the rest of
        one a steer parted (``_part``: a key of the client's, so that it is shown
        below the user's message), the id the agent streamed it under; None for a
        message the agent gave no id."""
        own = wire_id(key)
        if own is not None:
            return own
        streamed = (wire_id(alias) for alias, target in self.aliases.items() if target == key)
        return next((found for found in streamed if found is not None), None)

    def new_id(self, prefix: str) -> str:
        """A local id for items the wire does not name (v1 messages, turn marks):
        ``#`` and ``prefix``, which no :func:`agent_id` key is."""
        return f"#{prefix}{next(self._ids)}"

    def apply_message(self, patch: MessagePatch) -> tuple[Message, bool]:
        """Apply a chunk or a replacement. Returns the message and whether it is new.

        Without an id a chunk continues the last item when that is a message of
        the same role (v1 has no message ids), else it starts a new message. The
        first user message with an unseen id (or none: v1) while an echo is pending
        takes the echo over: its content replaces the echo's, from its first words.
        """
        named_by_user = self._adopt_echo(patch)
        message_id = patch.message_id or self._continued_message(patch.role)
        message = self.messages.get(message_id) if message_id else None
        created = message is None
        if message is None:
            message = Message(message_id or self.new_id("m"), patch.role)
            self.messages[message.id] = message
            self.items.append(("message", message.id))
        if message.id == self.unsaid:  # the words typed stay until the ack's own come
            patch.attached = message.attached or patch.attached
            named_by_user = named_by_user or message.named_by_user
            if not patch.text:
                message.attached, message.named_by_user = patch.attached, named_by_user
                return message, created
            self.unsaid = None
            patch.replace = True
        if patch.replace:
            message.text = patch.text
            message.attached = patch.attached
            message.named_by_user = named_by_user
        else:
            message.append(patch.text)
            if not message.named_by_user:
                message.attached += patch.attached
        return message, created

    def _adopt_echo(self, patch: MessagePatch) -> bool:
        """Let a user's ``patch`` acknowledge the echo waiting, if it does; whether it
        took the names the echo gave what the prompt carried."""
        wire = patch.message_id
        if (
            patch.role == "user"
            and self.pending_echo is not None
            # Only the agent acknowledges: the client's next echo (a turn after one
            # whose agent died unacknowledged) is a message of its own.
            and (wire is None or wire_id(wire) is not None)
            and wire not in self.messages
            and wire not in self.aliases
        ):
            if wire is not None:
                self.aliases[wire] = self.pending_echo
            patch.message_id = self.pending_echo  # id-less: the chunks after it go on in it
            # The user's names of what the prompt carried, over the agent's URIs.
            named_by_user = bool(self.echo_attached)
            patch.attached = self.echo_attached or patch.attached
            self.echoed(None)
            patch.replace = True  # a first chunk of the ack starts the text afresh
            self.unsaid = patch.message_id
            return named_by_user
        if wire is not None:
            patch.message_id = self.aliases.get(wire, wire)
        return False

    def echoed(self, message_id: str | None, attached: Sequence[str] = ()) -> None:
        """The client's echo of the user's message ``message_id`` (None: none) waits
        for the agent's acknowledgment (v2 ``user_message``), which replaces it."""
        self.pending_echo = message_id
        self.echo_attached = tuple(attached)

    def steered(self) -> None:
        """A user's message joins the running turn: an echo the agent never
        acknowledged is not its to replace, and the agent's message streaming last
        goes on as a message of its own from the end of its line, or of the code block
        it is in (what comes of it, the same id, is shown after the user's, as it
        came; no line or block is cut)."""
        self.echoed(None)
        kind, key = self.items[-1] if self.items else ("", "")
        if kind != "message" or self.messages[key].role == "user":
            return
        text = self.messages[key].text
        *lines, line = text.split("\n")
        fence = None
        for complete in lines:
            fence = fence_after(fence, complete)
        if fence is None and text.endswith("\n"):
            self._part(key)
        else:
            self.parting = len(self.items) - 1
            self._parting_fence, self._parting_line = fence, line[:PARTING_LINE]

    def parts(self, patch: MessagePatch) -> Iterable[MessagePatch]:
        """``patch`` as the patches to apply one after the other: a chunk of the
        message a steer parts is cut after its first line end outside a code block,
        where it parts."""
        key = self._parting()
        if key is None or patch.replace:
            return (patch,)
        if patch.message_id is None:
            target = self._continued_message(patch.role)
        else:
            target = self.aliases.get(patch.message_id, patch.message_id)
        cut = self._line_end(patch.text) if target == key else -1
        if cut < 0:
            return (patch,)
        return self._parted(patch, key, patch.text[:cut], patch.text[cut:])

    def _line_end(self, text: str) -> int:
        """Where in ``text``, the next chunk of the message a steer parts, the first
        line outside a code block ends (past its newline); -1 when none does yet."""
        fence, line, start = self._parting_fence, self._parting_line, 0
        while (end := text.find("\n", start)) >= 0:
            fence = fence_after(fence, line + text[start:end])
            line, start = "", end + 1
            if fence is None:
                return start
        self._parting_fence, self._parting_line = fence, (line + text[start:])[:PARTING_LINE]
        return -1

    def _parted(
        self, patch: MessagePatch, key: str, head: str, tail: str
    ) -> Iterator[MessagePatch]:
        yield MessagePatch(key, patch.role, head)
        self._part(key)  # once the head is in
        if tail:
            yield MessagePatch(patch.message_id, patch.role, tail)

    def _part(self, key: str) -> None:
        """What the agent sends of message ``key`` from now on is a new message."""
        parted = self.new_id("m")
        for alias in [key, *(a for a, k in self.aliases.items() if k == key)]:
            self.aliases[alias] = parted
        self.parting = None

    def _parting(self) -> str | None:
        """The message a steer parts at a line's end: parted now when anything but
        the user's messages came after it (the agent went on to another step)."""
        if self.parting is None:
            return None
        key = self.items[self.parting][1]
        for kind, later in self.items[self.parting + 1 :]:
            if kind != "message" or self.messages[later].role != "user":
                self._part(key)
                return None
        return key

    def turn_ended(self) -> None:
        """The turn is over: no echo waits for its ack, no message for its line's end."""
        self.cancelling = False
        self.echoed(None)
        self.parting = None
        self.unsaid = None

    def _continued_message(self, role: Role) -> str | None:
        parting = self._parting()
        if parting is not None:  # past the user's messages a steer put after it
            return parting if self.messages[parting].role == role else None
        if not self.items or self.items[-1][0] != "message":
            return None
        last = self.messages[self.items[-1][1]]
        return last.id if last.role == role else None

    def apply_tool_call(self, patch: ToolCallPatch) -> tuple[ToolCall, bool]:
        """Upsert a tool call; the first patch for an unknown id creates it. Also
        whether the call is new or its status changed (what ``AcpToolCall`` tells)."""
        own = patch.id is None
        if patch.id is None:
            patch.id = self.new_id("call")
        call = self.tool_calls.get(patch.id)
        news = call is None
        if call is None:
            call = ToolCall(patch.id, own=own)
            self.tool_calls[call.id] = call
            self.items.append(("tool", call.id))
        if not isinstance(patch.title, UnsetType):
            call.title = patch.title
        if not isinstance(patch.kind, UnsetType):
            call.kind = patch.kind
        if not isinstance(patch.name, UnsetType):
            call.name = patch.name
        if not isinstance(patch.status, UnsetType):
            news = news or call.status != patch.status
            call.status = patch.status
        if not isinstance(patch.content, UnsetType):
            call.content = list(patch.content)
        if not isinstance(patch.append_content, UnsetType):
            call.content.extend(patch.append_content)
        if not isinstance(patch.locations, UnsetType):
            call.locations = list(patch.locations)
        if not isinstance(patch.raw_input, UnsetType):
            call.raw_input = patch.raw_input
        return call, news

    def apply_plan(self, plan_id: str, entries: list[PlanEntry] | None) -> int:
        """Replace a plan's entries, or (None) forget the plan; returns its number
        among the session's plans (from 1; 0 once it went)."""
        if entries is None:
            if self.plans.pop(plan_id, None) is not None:
                self.items.remove(("plan", plan_id))
            return 0
        if plan_id not in self.plans:
            self.items.append(("plan", plan_id))
        self.plans[plan_id] = entries
        return list(self.plans).index(plan_id) + 1

    def apply_compaction(
        self,
        compaction_id: str,
        *,
        status: str | UnsetType = UNSET,
        summary: str | UnsetType | None = UNSET,
        append: str = "",
        error: str | UnsetType | None = UNSET,
    ) -> Compaction:
        """Upsert a compaction: the first patch fixes its place in the transcript;
        ``summary`` and ``error`` are patches (UNSET leaves, None clears), ``append``
        adds a streamed piece of the summary."""
        compaction = self.compactions.get(compaction_id)
        if compaction is None:
            compaction = self.compactions[compaction_id] = Compaction(compaction_id)
            self.items.append(("compaction", compaction_id))
        if not isinstance(status, UnsetType):
            compaction.status = status
        if not isinstance(summary, UnsetType):
            compaction.summary = summary or ""
        compaction.summary += append
        if not isinstance(error, UnsetType):
            compaction.error = error
        return compaction

    def unfinished(self, since: int) -> list[tuple[Literal["tool", "compaction"], str]]:
        """The tool calls and compactions among the items from ``since`` on (a turn's)
        that have not finished, each its kind and key."""
        found: list[tuple[Literal["tool", "compaction"], str]] = []
        for kind, key in self.items[since:]:
            if kind == "tool" and self.tool_calls[key].status in UNFINISHED:
                found.append(("tool", key))
            elif kind == "compaction" and self.compactions[key].status in UNFINISHED:
                found.append(("compaction", key))
        return found
