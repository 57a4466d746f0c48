"""One chat: an ACP session, its model, and what the user sees of it.

Adapters call the ``on_*`` methods with version-neutral patches carrying the
agent's own ids (keyed here through ``Session.key``, each session's in a scope of
its own); this class applies them to the
:class:`~acp_nvim.client.session.model.Session` and hands the matching render ops
to the Editor. Turn bookkeeping (start, stop reason,
unfinished tool calls shown as cancelled) lives here too, so v1 and v2 end a
turn the same way: :meth:`Chat.finish_turn`, after the review's final check.
"""

from __future__ import annotations

__all__ = [
    "Chat", "ChatState", "Chunk", "Record", "ShownBranch", "TurnReview", "muted", "replayed",
    "replayed_late", "settled",
]

import os
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol

from msgspec import UnsetType

from acp_nvim.client.editor import Editor, RenderOp, StatusFields, TurnTokens
from acp_nvim.client.session import view
from acp_nvim.client.session.branches import Branch, Branches, Turn, hide, prompt_line, show
from acp_nvim.client.session.model import (
    UNFINISHED,
    UNSET,
    Attachment,
    ConfigOption,
    ContentPart,
    FilePreview,
    MessagePatch,
    PermissionPrompt,
    PlanEntry,
    Prompt,
    Role,
    Session,
    TerminalPart,
    TextPart,
    ToolCall,
    ToolCallPatch,
    attached_line,
)
from acp_nvim.client.session.prose import Streams
from acp_nvim.client.session.usage import Usage
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.client.tasks import internal_error
from acp_nvim.client.text import title as title_of

if TYPE_CHECKING:
    from typing_extensions import Unpack

ChatState = Literal["starting", "ready", "running", "error", "closed"]
# A streamed chunk as (role, message id, text); see Chat.on_updates.
Chunk = tuple[Role, str | None, str]


class ChunkReader(Protocol):
    """An adapter's reader of streamed chunks (agent.sessions.StreamedChunks)."""

    def __call__(self, update: Any) -> Chunk | None:
        """The chunk ``update`` is; None for any other update."""

    def joined(self, updates: Sequence[Any]) -> Chunk | None:
        """All of ``updates`` as one chunk, their texts joined, when every one is a
        text chunk of one message; else None."""


# Stop reasons after which tool calls still running are shown as cancelled.
_ABANDONED = frozenset({"cancelled", "error"})


def _set(*fields: Any) -> bool:
    """Whether a patch sets any of ``fields`` (UNSET: left as is)."""
    return any(not isinstance(f, UnsetType) for f in fields)


class LeftFiles(Protocol):
    """What the review keeps of the files a turn left to the agent names."""

    def named(self, patch: ToolCallPatch) -> None:
        """A tool call of that turn, not shown: its files are not the open turn's."""

    def ended(self) -> list[str]:
        """That turn ended: the files its calls named, as the user names them."""


class TurnReview(Protocol):
    """What a chat tells the review of its agent's changes (services.changes)."""

    async def begin_turn(self, numbered: tuple[int, int] | None = None) -> None:
        """Take the state the turn's changes compare against (off the event loop);
        ``numbered``: the turn's review number and its number on the branch shown,
        where other branches number turns apart (:meth:`number` gave theirs)."""

    def on_tool_call(self, call: ToolCall) -> None: ...

    def turn_ended(self) -> None: ...

    @property
    def left(self) -> LeftFiles:
        """The files a turn left to the agent names (services.left_behind)."""

    async def end_turn(self) -> None:
        """The final disk check of the turn; the review is complete when it returns."""

    def turn_files(self) -> list[str]:
        """The files the latest turn changed, as the user names them (relative to
        the session's directory where inside it)."""

    async def preview(self, call: ToolCall, *, texts: bool = True) -> list[FilePreview]:
        """What the edits a tool call carries would do to their files (for its
        permission prompt); files whose text does not fit an edit are left out; not
        ``texts``: only the files with no text (named with previews off)."""

    def summary(self) -> dict[str, Any]:
        """The review as plain data: ``{turn, files}``, each file with its ``turn``,
        ``path``, ``created``, ``deleted`` and ``hunks`` (each with a ``status``)."""

    def number(self, shown: dict[int, int] | None) -> None:
        """The turns of the branch shown, by review number: their numbers there
        (``Branches.numbers``). The review names its turns by both."""


class Record(Protocol):
    """What a chat tells the history of its transcript (client.history): every op it
    draws, and what a prompt had attached (the transcript shows only the labels)."""

    def drawn(self, op: RenderOp) -> None: ...

    def prompted(self, message_id: str, text: str, attachments: Sequence[Attachment]) -> None: ...

    def replayed(self, turns: Sequence[Turn]) -> None:
        """``turns``, drawn before as blocks of no turn, are the agent's replay."""

    def unreplayed(self, turns: Sequence[Turn]) -> None:
        """``turns``, replayed, are gone with their blocks (``ShownBranch.unreplay``)."""


class _Unrecorded:
    """The record of a chat the history does not follow."""

    def drawn(self, op: RenderOp) -> None:
        pass

    def prompted(self, message_id: str, text: str, attachments: Sequence[Attachment]) -> None:
        pass

    def replayed(self, turns: Sequence[Turn]) -> None:
        pass

    def unreplayed(self, turns: Sequence[Turn]) -> None:
        pass


# Said where a new session takes the place of one resumed without its history shown.
UNSEEN_HISTORY = (
    "what the session held before it was resumed was never shown here, and the new one"
    " does not know it"
)


class Chat:
    """The client side of one session, bound to one chat window pair in the editor.

    ``workspace``: where its agent works (default: this process's directory).
    """

    def __init__(
        self, chat_id: int, agent: str, editor: Editor, workspace: Workspace | None = None
    ) -> None:
        self.id = chat_id
        self.agent = agent
        self.editor = editor
        self.workspace = workspace if workspace is not None else Workspace(os.getcwd())
        self.session = Session()
        self.state: ChatState = "starting"
        self.protocol_version: int | None = None
        self.turn = 0
        # Review of the agent's file changes; attached once the agent is known.
        self.changes: TurnReview | None = None
        # Sessions whose updates are not shown (:func:`muted`): history loaded again
        # that the chat shows, or a turn ended here while the agent goes on with it
        # (it ignored a cancel; until it ends it, whichever branch is shown: agent.turns).
        self.unshown: set[str] = set()
        # Sessions resumed without their history shown (an agent that does not replay
        # it): what they held before is in no view of the chat, and a session that
        # takes their place is told so (UNSEEN_HISTORY; decision 0088).
        self.unseen_history: set[str] = set()
        self._drawings: dict[str, view.ToolCallDrawing] = {}  # by tool call id
        self._streams = Streams()  # the agent's messages as drawn rows
        # A turn the user prompted runs, or is still ending: an idle arriving now
        # belongs to it, never to work the agent started on its own (v2).
        self.prompted = False
        self.record: Record = _Unrecorded()
        # The conversation so far, as Markdown, for the first prompt of a session that
        # does not know it (a rewound chat, a reopened one, one handed over from
        # another agent): session.seed; taken by the adapter once.
        self.seed: str | None = None
        # The turns shown and the branches rewinds left (session.branches).
        self.branches = Branches()
        # Rewinds and branch switches under way or asked: queued prompts wait for them.
        self.held = 0
        self.usage = Usage()  # what its turns used (the reports are the model's)
        # The title of the conversation it carries on (reopened, handed over): what a
        # new session of the agent calls itself does not rename the chat.
        self.kept_title: str | None = None
        self.shown = ShownBranch(self)  # rewinds and branch switches, as drawn
        # Notices said once in the chat, not at each start of its agent (mcp.McpOffer).
        self.said: set[str] = set()

    def __repr__(self) -> str:
        return f"<Chat {self.id} {self.agent} {self.state} session={self.session.session_id!r}>"

    # -- lifecycle -----------------------------------------------------------

    def set_state(self, state: ChatState, **fields: Any) -> None:
        self.state = state
        self._draw(view.status_op(state=state, **fields))

    def ready(
        self, session_id: str, version: int, agent_title: str | None, *,
        resumed: bool = False, created: bool = False,
    ) -> None:
        """Go on in ``session_id``, which an agent process ``resumed`` (or loaded), or
        has just ``created`` (a new session, a fork): see ``Usage.switch``."""
        usage = self.session.usage
        self.session.usage = self.usage.switch(session_id, usage, resumed=resumed, created=created)
        self.session.session_id = session_id
        self.protocol_version = version
        self.set_state(
            "ready",
            agent=self.agent,
            agent_title=agent_title,
            session_id=session_id,
            protocol_version=version,
            usage=self.usage.status(self.session.usage),  # another session's meter, if it moved
            error=None,  # what stopped it before (e.g. before an :AcpRestart) is over
        )
        data = {"chat": self.id, "agent": self.agent, "session_id": session_id}
        self.editor.emit("AcpSessionReady", {**data, "protocol_version": version})

    async def start_turn(self, text: str, attachments: Sequence[Attachment] = ()) -> None:
        """Show the user's message (and what is attached), mark the turn running, and
        let the review take its start (the prompt goes to the agent after that)."""
        replayed_late(self, done=True)
        self.branches.unreplayed = None  # the replay is over: an exit now is no death in it
        self.turn += 1
        self.prompted = True
        self.session.state = "running"
        self.editor.emit("AcpTurnStart", {"chat": self.id, "prompt": text})
        labels = [a.label for a in attachments]
        shown = text + ("\n\n" + attached_line(labels) if labels else "")
        start = len(self.session.items)
        patch = MessagePatch(None, "user", text, replace=True, attached=tuple(labels))
        self.on_message(patch, force_new=True, turn=len(self.branches.path) + 1)
        assert patch.message_id is not None
        self.record.prompted(patch.message_id, shown, attachments)
        prompt = Prompt(text, list(attachments))
        session_id = self.session.session_id
        begun = Turn(patch.message_id, self.turn, session_id, prompt, start)
        self.branches.begin(begun)
        self.session.echoed(patch.message_id, labels)
        self.usage.begin_turn(self.session.usage)
        self.set_state("running")
        # Only what the turn changed: the status's turns and branches are not sent
        # whole at each turn of a long chat (decision 0110).
        branches = self.branches
        number, entry = len(branches.path), branches.entry(branches.shown)
        self._draw(view.turn_op(number, prompt_line(begun), entry))
        if self.changes is not None:
            # Where other branches number turns apart, the review is told this one's
            # number: it holds the others' (``ShownBranch.list_branches``).
            await self.changes.begin_turn((begun.review, number) if branches.others else None)

    async def finish_turn(
        self, stop_reason: str, error: str | None = None, details: list[str] | None = None,
        *, settle: bool = False,
    ) -> None:  # fmt: skip
        """End the turn once the review has checked the disk (``changes()`` at ``AcpTurnEnd``
        has every file), ``error`` shown first (the chat goes on); ``settle``: see end_turn."""
        try:
            if self.changes is not None:
                await self.changes.end_turn()
        except Exception as err:  # a bug in the review must not keep the turn open
            self.show_error(internal_error("checking the turn's changes", err))
        if error is not None:
            self.show_error(error, details)
        self.end_turn(stop_reason, settle=settle)

    def end_turn(self, stop_reason: str, *, settle: bool = False) -> None:
        """Close the turn: its unfinished calls and compactions (not an earlier turn's) become
        cancelled after a cancel, an error, or with ``settle`` (nothing of it runs on)."""
        if settle or stop_reason in _ABANDONED:
            _cancel_unfinished(self)
        self._close_fence()
        self.session.state = "idle"
        self.session.stop_reason = stop_reason
        self.session.turn_ended()
        self.prompted = False
        if self.changes is not None:
            self.changes.turn_ended()
            files = self.changes.turn_files()
            if files:  # what the turn changed, at its end (Lua adds the review's keys)
                self._draw(view.changes_op(self.session.new_id("changes"), files))
        if self.branches.path:
            self.branches.path[-1].report = self.session.usage
        spent = self.usage.end_turn(self.session.usage)
        counted = self.usage.turn_tokens
        line = view.turn_end_text(stop_reason, spent, counted)
        block = self.session.new_id("turn")
        self._draw(view.notice_op(block, "turn", [f"*— {line} —*"]))
        fields = {"usage": self.usage.status(self.session.usage)} if spent or counted else {}
        self.set_state("ready", stop_reason=stop_reason, turn_state="idle", **fields)
        self.editor.emit("AcpTurnEnd", {"chat": self.id, "stop_reason": stop_reason})

    def on_state(
        self, state: str, stop_reason: str | None = None, tokens: TurnTokens | None = None
    ) -> None:
        """The agent reports its foreground work (v2 ``state_update``).

        ``idle`` marks a running turn over (``session.state``), with the agent's own
        count of its tokens where it gives one; whoever runs the turn then ends it
        with :meth:`finish_turn`. ``running`` also covers work the agent starts on
        its own; an unknown state is only shown.
        """
        if state == "idle":
            if self.state == "running":
                self.session.state = "idle"
                self.session.stop_reason = stop_reason or "idle"
                if tokens is not None:
                    self.usage.counted(tokens)
        elif state in ("running", "requires_action"):
            self.session.state = "running" if state == "running" else "requires_action"
            if self.state in ("ready", "running") and not self.session.cancelling:
                self.set_state("running", turn_state=state)
        else:
            self.on_info(turn_state=state)

    def fail(self, message: str, details: list[str] | None = None) -> None:
        """The chat cannot go on (the agent died or never started): show why and
        stay in ``error`` (with e.g. the agent's stderr tail). A turn it ends leaves
        no call of its own running."""
        if self.state == "running":
            _cancel_unfinished(self)
        if self.changes is not None:
            self.changes.turn_ended()
        # The state first: AcpError fires after it was drawn (a batch may go between).
        self.set_state("error", error=message)
        self.show_error(message, details)

    def show_error(self, message: str, details: list[str] | None = None) -> None:
        """Show an error in the transcript and fire ``AcpError``; the chat goes on."""
        lines = [f"**Error:** {message}"]
        if details:
            lines += ["```", *details, "```"]
        self._note("error", "error", lines)
        self.editor.emit("AcpError", {"chat": self.id, "message": message})

    def _draw(self, op: RenderOp) -> None:
        held = self._streams.holding  # a newline that waits for its next line
        if (
            held is not None
            and op["op"] != "status"
            and op["op"] != "turn"
            and op.get("id") != view.message_block(held)
            and (released := self._streams.release())  # "": the message ended a line
        ):
            self._draw(view.append_op(held, released))
        self.record.drawn(op)
        self.editor.render(self.id, [view.bounded(op)])

    def info(self, text: str, *, name: str = "info") -> None:
        """Draw a note of the client's (``name``: its block's, which says what it is)."""
        self._note(name, "info", text.split("\n"))

    def _note(self, name: str, kind: str, lines: list[str]) -> None:
        """Draw a notice of ``kind``, its block named after ``name``: after a rewind or
        a switch, one of the notes the next turn begins with (Branches.noted)."""
        block = self.session.new_id(name)
        self.branches.noted(block)
        self._draw(view.notice_op(block, kind, lines))

    # -- updates from the adapters -------------------------------------------

    def on_updates(
        self,
        updates: Sequence[Any],
        chunk: ChunkReader,
        other: Callable[[Any], None],
    ) -> None:
        """Apply a run of this session's updates, in order, for an adapter: chunks of
        one message in a row as one patch of their texts joined (what a patch each
        would show, without the steps per 20-byte chunk), others through ``other``."""
        if muted(self):
            return
        if (whole := chunk.joined(updates)) is not None:  # a stream's read, joined in C
            self.on_message(MessagePatch(whole[1], whole[0], whole[2]))
            return
        # The run of chunks being joined (none while texts is empty): role, message id.
        role: Role = "agent"
        message_id: str | None = None
        texts: list[str] = []
        for update in updates:
            # A barrier per update: a bug showing one costs that update, not the
            # rest of the run (nor, for v2, the idle that ends the turn).
            try:
                item = chunk(update)
                if texts and (item is None or item[0] != role or item[1] != message_id):
                    self.on_message(MessagePatch(message_id, role, "".join(texts)))
                    texts.clear()
                if item is None:
                    other(update)
                else:
                    role, message_id, text = item
                    texts.append(text)
            except Exception as err:
                texts = []
                self.show_error(internal_error(f"showing an update ({type(update).__name__})", err))
        if texts:
            self.on_message(MessagePatch(message_id, role, "".join(texts)))

    def on_message(
        self, patch: MessagePatch, *, force_new: bool = False, turn: int | None = None
    ) -> None:
        """Apply a message patch; ``turn``: the user's message that begins that turn."""
        if patch.message_id is not None:
            patch.message_id = self.session.key(patch.message_id)
        elif force_new:
            patch.message_id = self.session.new_id("m")
        for part in self.session.parts(patch):
            message, created = self.session.apply_message(part)
            # A user message is drawn whole, so that a fence it leaves open is closed.
            if message.role == "user":
                self._draw(view.message_op(message, turn))
            elif created or part.replace:
                shown = self._streams.start(message.id, message.text)
                self._draw(view.message_op(message, turn, shown))
            elif part.text:
                row, shown = self._streams.append(message.id, part.text)
                self._draw(view.append_op(message.id, view.visible_append(row, shown)))

    def on_tool_call(self, patch: ToolCallPatch) -> ToolCall:
        """Upsert a tool call the agent names (``id`` None: one of the client's own)."""
        if patch.id is not None:
            patch.id = self.session.key(patch.id)
        return self._apply_tool_call(patch)

    def _apply_tool_call(self, patch: ToolCallPatch) -> ToolCall:
        call, news = self.session.apply_tool_call(patch)
        if self.changes is not None:
            self.changes.on_tool_call(call)
        if news:  # AcpToolCall: on create and on each status change
            data = {"chat": self.id, "id": call.id, "title": call.title, "kind": call.kind}
            self.editor.emit("AcpToolCall", {**data, "name": call.name, "status": call.status})
        redraw = {view.HEAD} if _set(patch.title, patch.kind, patch.status) else set()
        if _set(patch.content, patch.append_content) or (
            _set(patch.status) and any(isinstance(p, TerminalPart) for p in call.content)
        ):  # an agent's own terminal may show its call's end (view.terminal_lines)
            redraw.add(view.CONTENT)
        if _set(patch.locations):
            redraw.add(view.LOCATIONS)
        self._draw_call(call, redraw)
        return call

    def _draw_call(self, call: ToolCall, redraw: Collection[int] = view.ALL_PARTS) -> None:
        """Send the rows of ``call``'s block that ``redraw`` changed (the prompt always)."""
        drawing = self._drawings.setdefault(call.id, view.ToolCallDrawing(self.workspace.cwd))
        op = drawing.op(call, self.session.terminals, redraw)
        if op is not None:
            self._draw(op)

    def on_terminal(self, terminal_id: str) -> None:
        """A terminal's output or exit changed: redraw the tool calls showing it."""
        for call in self.session.tool_calls.values():
            parts = call.content
            if any(isinstance(p, TerminalPart) and p.terminal_id == terminal_id for p in parts):
                self._draw_call(call, {view.CONTENT})

    def on_permission(self, call_id: str, prompt: PermissionPrompt | None) -> None:
        """Show a permission prompt (or its outcome) at its tool call; None removes it.
        A call of the client's own is the question alone: answered, it is done."""
        call = self.session.tool_calls.get(call_id)
        if call is not None:
            call.permission = prompt
            self._draw_call(call, ())
            if call.own and prompt is not None and prompt.outcome and call.status in UNFINISHED:
                done = "cancelled" if prompt.outcome == "cancelled" else "completed"
                self._apply_tool_call(ToolCallPatch(call.id, status=done))

    def on_plan(self, plan_id: str | None, entries: list[PlanEntry] | None) -> None:
        # v1 sends one plan per turn, whole each time: one block per turn. None: it went.
        plan_id = self.session.key(plan_id) if plan_id is not None else f"#plan{self.turn}"
        number = self.session.apply_plan(plan_id, entries)  # two plans: told apart
        if number:  # after the plans of the stored turns shown, as the export numbers them
            number += sum(turn.plans for turn in self.branches.path if turn.stored)
        self._draw(view.plan_op(plan_id, entries, number))

    def on_info(self, **fields: Unpack[StatusFields]) -> None:
        """Session-level facts for the header: title, mode, usage, commands."""
        if "title" in fields and self.kept_title is not None:
            fields["title"] = self.kept_title
        # The same title in the winbar, the pickers and the history (a name is, as typed).
        if "title" in fields:
            fields["title"] = title_of(fields["title"])
        if "title" in fields:
            self.session.title = fields["title"]
        if "usage" in fields:
            self.session.usage = fields["usage"]
        if "commands" in fields:
            self.session.commands = fields["commands"]
        self._draw(view.status_op(**fields))

    def keep_title(self, title: str) -> None:
        """Go by ``title`` (see ``kept_title``), whatever the agent calls its session."""
        self.kept_title = title
        self.on_info(title=title)

    def on_turn_tokens(self, tokens: TurnTokens) -> None:
        """The agent's own count of the turn's tokens, in its answer to the prompt (v1)."""
        self.usage.counted(tokens)

    def on_usage(self, used: int, size: int, cost: tuple[float, str] | None) -> None:
        """The context window (tokens used of size) and the session's cost so far."""
        usage: dict[str, Any] = {"used": used, "size": size}
        if cost is not None:
            usage["cost"] = {"amount": cost[0], "currency": cost[1]}
        self.session.usage = self.usage.reported(usage)
        self._draw(view.status_op(usage=self.usage.status(self.session.usage)))

    def _close_fence(self) -> None:
        """The turn ends in the agent's message with a code fence open (it was cut
        short): the fence is closed, or every later block would show as code."""
        kind, key = self.session.items[-1] if self.session.items else ("", "")
        fence = self._streams.closing(key) if kind == "message" else ""
        if fence:
            self.session.messages[key].append(fence)
            row, shown = self._streams.append(key, fence)
            self._draw(view.append_op(key, view.visible_append(row, shown)))

    def on_current(self, category: Literal["mode", "model"], value: str) -> None:
        """The current value of the setting of ``category`` changed (e.g. a mode)."""
        options = [o for o in self.session.config_options if o.category == category]
        for option in options:
            option.current = value
        if options:
            self.on_config(self.session.config_options)
        elif category == "mode":  # a setting the agent never listed: shown as it is
            self.on_info(mode=value)
        else:
            self.on_info(model=value)

    def on_config(
        self, options: list[ConfigOption], entries: Sequence[dict[str, Any]] = ()
    ) -> None:
        """The session's settings, whole (v2 ``configOptions``); the header shows them.
        ``entries``: those of the first options, made off the loop (`view.config_fields`)."""
        self.session.config_options = options
        self._draw(view.status_op(**view.config_fields(options, entries)))

    def on_steered(self, text: str) -> None:
        """The user's message went into the running turn (steering): shown there, and
        what the agent streams on below it (``Session.steered``)."""
        self.session.steered()
        patch = MessagePatch(None, "user", text, replace=True)
        self.on_message(patch, force_new=True)
        self.session.echoed(patch.message_id)
        self.info("*Sent into the running turn.*")

    def on_compaction(
        self,
        compaction_id: str,
        *,
        status: str | UnsetType = UNSET,
        summary: str | UnsetType | None = UNSET,
        append: str = "",
        error: str | UnsetType | None = UNSET,
    ) -> None:
        """The agent compacts its context (see ``Session.apply_compaction``)."""
        key = self.session.key(compaction_id)
        compaction = self.session.apply_compaction(
            key, status=status, summary=summary, append=append, error=error
        )
        self._draw(view.compaction_op(compaction))

    def on_notice(self, severity: str, title: str, description: str | None) -> None:
        """An advisory from the agent, not part of the conversation: one line."""
        line = view.notice_line(severity, title, description)
        self._note("notice", "error" if severity == "error" else "info", [line])


class ShownBranch:
    """The branch of turns ``chat``'s transcript shows: going back to before one of
    them (a rewind), or another branch shown in their place (``chat.branches`` keeps
    the turns; this draws the change)."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    def __repr__(self) -> str:
        return f"<ShownBranch of chat {self.chat.id}: {len(self.chat.branches.path)} turns>"

    def list_branches(self) -> None:
        """The header lists the turns and branches as they are now; the review
        numbers its turns by them."""
        chat, branches = self.chat, self.chat.branches
        chat._draw(view.status_op(turns=branches.prompt_lines(), branches=branches.listed()))
        if chat.changes is not None:
            chat.changes.number(branches.numbers())

    def leave(self, number: int) -> list[Turn]:
        """Go back to before turn ``number`` (1-based) of the shown branch: its turns
        from there are kept as another branch and leave the transcript, which marks
        the place. Returns them.

        Raises:
            ValueError: no such turn.
        """
        left = self.chat.branches.leave(number)
        self._take_out(left, number)
        self._mark(number - 1)
        self.list_branches()
        if number == 1:  # nothing is left of what the title named (a kept one stays)
            self.chat.on_info(title=None)
        return left

    def pick(self, branch_id: int) -> Branch:
        """Show branch ``branch_id`` in place of the shown one (from the turn where
        they part); returns it.

        Raises:
            KeyError: no such branch, or it is the one shown.
        """
        chat, branches = self.chat, self.chat.branches
        out, into = branches.pick(branch_id)
        self._take_out(out, len(branches.path) - len(into) + 1)
        self._mark(len(branches.path) - len(into))
        drawing, kept = show(chat.session, into)  # (stored blocks: the history has them)
        chat.editor.render(chat.id, [*drawing, view.uncut_op(kept)])
        self.list_branches()
        return branches.shown

    def _take_out(self, turns: list[Turn], since: int) -> None:
        """The view changes from turn ``since``: ``turns`` leave it, and what goes with
        it for good (``Branches.dropped``); this change's notes go with the next turn."""
        chat = self.chat
        gone = chat.branches.dropped()
        if gone:
            chat._draw(view.drop_op(gone))
        hide(chat.session, turns)
        for turn in turns:
            for call_id in turn.hidden.tool_calls if turn.hidden is not None else ():
                chat._drawings.pop(call_id, None)
        chat._draw(view.cut_op([(t.message, t.block) for t in turns], since))

    def unreplay(self, until: int) -> int:
        """A replay of the session is answered: what the one before it, which the agent
        died in (``Branches.unreplayed``, to item ``until``), drew leaves the model,
        the transcript and the history for good, with the turns made of it (an agent
        that replays after its answer). Kept until then: a refusal leaves it shown
        (decision 0088). Returns the item where the new replay's items now begin."""
        chat, since = self.chat, self.chat.branches.unreplayed
        if since is None or since >= until:
            return until
        gone = Turn("", 0, "", Prompt(""), start=since)
        after = Turn("", 0, "", Prompt(""), start=until)
        hide(chat.session, [gone, after])
        show(chat.session, [after])  # the new replay's items, back in their place
        turns = chat.branches.unmake(since)
        chat.record.unreplayed(turns)
        hidden = gone.hidden
        if hidden is not None:
            for call_id in hidden.tool_calls:
                chat._drawings.pop(call_id, None)
            blocks = [
                *map(view.message_block, hidden.messages),
                *hidden.tool_calls,
                *(view.plan_block(key) for key in hidden.plans),
                *(view.compaction_block(key) for key in hidden.compactions),
            ]
            chat._draw(view.drop_op(blocks))
        if turns:
            self.list_branches()
        return since

    def _mark(self, shared: int) -> None:
        """Mark the place after the first ``shared`` turns, where branches part."""
        block = self.chat.session.new_id(view.MARK)
        if self.chat.branches.mark(shared, block):
            self.chat._draw(view.mark_op(block))


def replayed(chat: Chat, since: int, agent: int, until: int | None = None) -> None:
    """The user's messages the agent replayed from item ``since`` of the model on (to
    ``until``; the history of a session it resumed) begin turns
    (``Branches.replayed``): numbered in the transcript (Lua edits one on ``<CR>``)
    and in the history, listed."""
    turns = chat.branches.replayed(chat.session, since, agent, until)
    if not turns:
        return
    first = len(chat.branches.path) - len(turns) + 1
    messages = chat.session.messages
    ops: list[RenderOp] = [
        view.message_op(messages[t.message], n) for n, t in enumerate(turns, first)
    ]
    chat.editor.render(chat.id, ops)
    chat.record.replayed(turns)
    chat.shown.list_branches()


def replayed_late(chat: Chat, *, done: bool = False) -> None:
    """What the agent replayed after it answered the resume (``Branches.replaying``)
    begins turns as what came before (decision 0088): each user message once
    something follows it (its chunks are all in), or every one when ``done`` (the
    chat's own turn begins, or the agent died in the replay and is asked again: the
    replay is over)."""
    if chat.branches.replaying is None:
        return
    since, agent = chat.branches.replaying
    items, messages = chat.session.items, chat.session.messages
    until = len(items)
    last = messages.get(items[-1][1]) if items and items[-1][0] == "message" else None
    if not done and last is not None and last.role == "user":
        until -= 1  # it may have chunks to come
    replayed(chat, since, agent, max(since, until))
    chat.branches.replaying = None if done else (max(since, until), agent)


def muted(chat: Chat) -> bool:
    """Whether nothing the agent sends of ``chat``'s session is shown (``Chat.unshown``)."""
    return chat.session.session_id in chat.unshown


@contextmanager
def settled(chat: Chat, call_id: str) -> Iterator[None]:
    """The one end of a tool call of the client's own (a file access asked about, an
    editor tool's command): no agent finishes its block, so whatever its body leaves
    unfinished ends here: completed, failed with the error's reason, or cancelled
    with the task (the agent withdrew the request, or went away).

    Example::

        with settled(chat, "mcp-run-1"):
            await permissions.ask(chat, ToolCallPatch("mcp-run-1", kind="execute"), options)
    """
    try:
        yield
    except Exception as err:
        _end(chat, call_id, "failed", str(err))
        raise
    except BaseException:  # the task was cancelled
        _end(chat, call_id, "cancelled")
        raise
    else:
        _end(chat, call_id, "completed")


def _cancel_unfinished(chat: Chat) -> None:
    """The turn's unfinished calls and compactions (not an earlier turn's) become
    cancelled: nothing of it runs on."""
    start = chat.branches.path[-1].start if chat.branches.path else 0
    for kind, key in chat.session.unfinished(start):
        if kind == "tool":
            chat._apply_tool_call(ToolCallPatch(key, status="cancelled"))
        else:
            compaction = chat.session.apply_compaction(key, status="cancelled")
            chat._draw(view.compaction_op(compaction))


def _end(chat: Chat, call_id: str, status: str, reason: str = "") -> None:
    call = chat.session.tool_calls.get(chat.session.key(call_id))
    if call is not None and call.status in UNFINISHED:
        why: list[ContentPart] = [TextPart(reason)] if reason else []
        chat.on_tool_call(ToolCallPatch(call.id, status=status, append_content=why))
