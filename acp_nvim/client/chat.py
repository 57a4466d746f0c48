"""One chat: an ACP session, its model, and what the user sees of it.

Adapters call the ``on_*`` methods with version-neutral patches; this class
applies them to the :class:`~acp_nvim.client.model.Session` and hands the
matching render ops to the Editor. Turn bookkeeping (start, stop reason,
unfinished tool calls shown as cancelled) lives here too, so v1 and v2 end a
turn the same way.
"""

from __future__ import annotations

__all__ = ["Chat", "ChatState"]

from typing import Any, Literal

from acp_nvim.client import view
from acp_nvim.client.editor import Editor
from acp_nvim.client.model import MessagePatch, PlanEntry, Session, ToolCallPatch

ChatState = Literal["starting", "ready", "running", "error", "closed"]


class Chat:
    """The client side of one session, bound to one chat window pair in the editor."""

    def __init__(self, chat_id: int, agent: str, editor: Editor) -> None:
        self.id = chat_id
        self.agent = agent
        self.editor = editor
        self.session = Session()
        self.state: ChatState = "starting"
        self.protocol_version: int | None = None
        self.turn = 0

    def __repr__(self) -> str:
        return f"<Chat {self.id} {self.agent} {self.state} session={self.session.session_id!r}>"

    # -- lifecycle -----------------------------------------------------------

    def set_state(self, state: ChatState, **fields: Any) -> None:
        self.state = state
        self.editor.render(self.id, [view.status_op(state=state, **fields)])

    def ready(self, session_id: str, protocol_version: int, agent_title: str | None) -> None:
        self.session.session_id = session_id
        self.protocol_version = protocol_version
        self.set_state(
            "ready",
            agent=self.agent,
            agent_title=agent_title,
            session_id=session_id,
            protocol_version=protocol_version,
        )
        self.editor.emit(
            "AcpSessionReady",
            {
                "chat": self.id,
                "agent": self.agent,
                "session_id": session_id,
                "protocol_version": protocol_version,
            },
        )

    def start_turn(self, text: str) -> None:
        """Show the user's message and mark the turn running."""
        self.turn += 1
        self.session.state = "running"
        self.on_message(MessagePatch(None, "user", text, replace=True), force_new=True)
        self.set_state("running")

    def end_turn(self, stop_reason: str) -> None:
        """Close the turn: unfinished tool calls become cancelled, then the stop line."""
        if stop_reason == "cancelled":
            for call in self.session.unfinished_tool_calls():
                self.on_tool_call(ToolCallPatch(call.id, status="cancelled"))
        self.session.state = "idle"
        self.session.stop_reason = stop_reason
        block = self.session.new_id("turn")
        self.editor.render(self.id, [view.notice_op(block, "turn", [f"*— {stop_reason} —*"])])
        self.set_state("ready", stop_reason=stop_reason)
        self.editor.emit("AcpTurnEnd", {"chat": self.id, "stop_reason": stop_reason})

    def fail(self, message: str, details: list[str] | None = None) -> None:
        """Show an error in the transcript (with e.g. the agent's stderr tail)."""
        lines = [f"**Error:** {message}"]
        if details:
            lines += ["```", *details, "```"]
        block = self.session.new_id("error")
        self.editor.render(self.id, [view.notice_op(block, "error", lines)])
        self.set_state("error", error=message)
        self.editor.emit("AcpError", {"chat": self.id, "message": message})

    def info(self, text: str) -> None:
        block = self.session.new_id("info")
        self.editor.render(self.id, [view.notice_op(block, "info", text.split("\n"))])

    # -- updates from the adapters -------------------------------------------

    def on_message(self, patch: MessagePatch, *, force_new: bool = False) -> None:
        if force_new and patch.message_id is None:
            patch.message_id = self.session.new_id("m")
        message, created = self.session.apply_message(patch)
        if created or patch.replace:
            self.editor.render(self.id, [view.message_op(message)])
        elif patch.text:
            self.editor.render(self.id, [view.append_op(message.id, patch.text)])

    def on_tool_call(self, patch: ToolCallPatch) -> None:
        call, _ = self.session.apply_tool_call(patch)
        self.editor.render(self.id, [view.tool_call_op(call)])

    def on_plan(self, plan_id: str | None, entries: list[PlanEntry]) -> None:
        # v1 sends one plan per turn, whole each time: one block per turn.
        plan_id = plan_id or f"plan{self.turn}"
        self.session.apply_plan(plan_id, entries)
        self.editor.render(self.id, [view.plan_op(plan_id, entries)])

    def on_info(self, **fields: Any) -> None:
        """Session-level facts for the header: title, mode, usage, commands."""
        if "title" in fields:
            self.session.title = fields["title"]
        if "usage" in fields:
            self.session.usage = fields["usage"]
        if "commands" in fields:
            self.session.commands = fields["commands"]
        self.editor.render(self.id, [view.status_op(**fields)])
