"""The tool calls of the v1 demo agent: what the words ``permission``, ``edit``,
``disk``, ``run`` and the editor's (``EDITOR_WORDS``) have it do, each as a real
agent does it: shown as a tool call, asked for, done through the client (or behind
its back, on disk) and answered with a message.

:class:`DemoAgent` speaks the protocol (sessions, turns, the stream and its
history) and picks among these by the prompt's words; these only act within a turn.
"""

from __future__ import annotations

__all__ = ["ToolCalls"]

import itertools
import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from acp_nvim.demo_agent._mcp import ask_editor
from acp_nvim.protocol import Connection, RequestError

Params = dict[str, Any]


# Comment leaders for the line `edit` adds, by file extension.
_COMMENT = {".lua": "--", ".sql": "--", ".hs": "--", ".vim": '"', ".c": "//", ".h": "//",
            ".cpp": "//", ".go": "//", ".rs": "//", ".js": "//", ".ts": "//"}  # fmt: skip


def _named(path: str, cwd: str) -> str:
    """``path`` as a reply names it: relative to the session's directory ``cwd``, as
    the agents people use name the files they changed."""
    return os.path.relpath(path, cwd) if os.path.commonpath([path, cwd]) == cwd else path


_CALL_IDS = itertools.count(1)
_PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


class ToolCalls:
    """The tool calls of one connection's turns; each ends with the agent's message
    about it, streamed through the agent's own ``stream`` (its history keeps it)."""

    def __init__(
        self,
        connection: Connection,
        send_update: Callable[[str, Params], Awaitable[None]],
        stream: Callable[[str, str, str], Awaitable[None]],
    ) -> None:
        self.connection = connection
        self._send_update = send_update
        self._stream = stream
        # What the client offered in initialize: without it, the call says so instead.
        self.client_fs: Params = {}
        self.client_terminal = False

    async def pretend_command(self, session_id: str) -> None:
        """A command that needs permission; like gemini, the call exists first in the request."""
        call = {
            "toolCallId": f"demo-run-{next(_CALL_IDS)}",
            "title": "Run `make clean`",
            "kind": "execute",
            "rawInput": {"command": "make clean"},
        }
        kind = await self._ask_permission(session_id, call)
        if kind is None:
            return
        allowed = kind.startswith("allow")
        result = "removed build/ (pretend)" if allowed else "Rejected by the user."
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call["toolCallId"],
            "status": "completed" if allowed else "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": result}}],
        }
        await self._send_update(session_id, update)
        reply = "Done: `make clean` ran." if allowed else "Understood, I left it alone."
        await self._stream(session_id, "agent_message_chunk", reply)

    async def _ask_permission(self, session_id: str, tool_call: Params) -> str | None:
        """Ask before a tool call runs: the kind of the chosen option, None if cancelled.

        ``tool_call`` is the request's ``toolCall`` (at least ``toolCallId``); the
        option ids are Claude's, so the client has to go by kind.
        """
        params = {"sessionId": session_id, "toolCall": tool_call, "options": _PERMISSION_OPTIONS}
        answer = await self.connection.request("session/request_permission", params, dict)
        outcome = answer.get("outcome") or {}
        if outcome.get("outcome") != "selected":
            return None
        kinds = {option["optionId"]: option["kind"] for option in _PERMISSION_OPTIONS}
        return kinds.get(outcome.get("optionId", ""))  # an id we never offered: no approval

    async def edit_through_editor(self, session_id: str, path: str, cwd: str) -> None:
        """Read with fs/read_text_file, ask, add a comment line, fs/write_text_file."""
        if not (self.client_fs.get("readTextFile") and self.client_fs.get("writeTextFile")):
            await self._stream(session_id, "agent_message_chunk", "This client offers no fs/*.")
            return
        try:
            read = await self.connection.request(
                "fs/read_text_file", {"sessionId": session_id, "path": path}, dict
            )
            old: str | None = read["content"]
        except RequestError as err:
            if err.code != RequestError.RESOURCE_NOT_FOUND:
                await self._stream(session_id, "agent_message_chunk", f"Cannot read it: {err}")
                return
            old = None  # a new file
        leader = _COMMENT.get(os.path.splitext(path)[1], "#")
        new = f"{leader} Edited by the acp.nvim demo agent (review: :AcpReview)\n" + (old or "")
        call_id = f"demo-edit-{next(_CALL_IDS)}"
        call = {
            "toolCallId": call_id,
            "title": f"Edit {os.path.basename(path)}",
            "kind": "edit",
            "locations": [{"path": path, "line": 1}],
            "content": [{"type": "diff", "path": path, "oldText": old, "newText": new}],
        }
        await self._send_update(
            session_id, {"sessionUpdate": "tool_call", **call, "status": "pending"}
        )
        kind = await self._ask_permission(session_id, call)
        allowed = kind is not None and kind.startswith("allow")
        if allowed:
            params = {"sessionId": session_id, "path": path, "content": new}
            await self.connection.request("fs/write_text_file", params)
        status = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
        await self._send_update(
            session_id, {**status, "status": "completed" if allowed else "failed"}
        )
        name = _named(path, cwd)
        reply = f"I added a comment line at the top of `{name}`." if allowed else "I left it alone."
        await self._stream(session_id, "agent_message_chunk", reply)

    async def edit_on_disk(self, session_id: str, path: str, cwd: str) -> None:
        """Write the file directly; the client learns of it only from the tool call."""
        call_id = f"demo-disk-{next(_CALL_IDS)}"
        locations = [{"path": path}]
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call", "toolCallId": call_id, "status": "pending",
             "title": f"Write {os.path.basename(path)}", "kind": "edit", "locations": locations},
        )  # fmt: skip
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        new = (old or "") + "Written to disk directly by the acp.nvim demo agent.\n"
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
        diff = {"type": "diff", "path": path, "oldText": old, "newText": new}
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed",
             "content": [diff], "locations": locations},
        )  # fmt: skip
        name = _named(path, cwd)
        await self._stream(session_id, "agent_message_chunk", f"I appended a line to `{name}`.")

    async def run_command(self, session_id: str) -> None:
        """Run a short shell line in a client terminal shown in a tool call, the way
        Claude's older adapter does (whole line in ``command``, no args, no cwd)."""
        if not self.client_terminal:
            await self._stream(session_id, "agent_message_chunk", "This client has no terminals.")
            return
        command = (
            "echo hi; printf 'counting:'; for i in 1 2 3; do printf ' %s' $i; sleep 0.3; done;"
            " printf '\\n\\033[32mdone\\033[0m\\n'"
        )
        sid = {"sessionId": session_id}
        params = {**sid, "command": command, "args": [], "outputByteLimit": 32000}
        created = await self.connection.request("terminal/create", params, dict)
        term = {**sid, "terminalId": created["terminalId"]}
        call_id = f"run{next(_CALL_IDS)}"
        content = [{"type": "terminal", "terminalId": created["terminalId"]}]
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "Run a command",
             "kind": "execute", "status": "in_progress", "content": content,
             "rawInput": {"command": command}},
        )  # fmt: skip
        try:
            exit_status = await self.connection.request("terminal/wait_for_exit", term, dict)
            output = await self.connection.request("terminal/output", term, dict)
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled turn releases it too
                await self.connection.request("terminal/release", term, dict)
        code = exit_status.get("exitCode")
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
             "status": "completed" if code == 0 else "failed"},
        )  # fmt: skip
        reply = f"The command exited with code {code} and printed:\n\n```\n{output['output']}```"
        await self._stream(session_id, "agent_message_chunk", reply)

    async def call_editor_tools(
        self, session_id: str, servers: list[Params], words: set[str]
    ) -> None:
        """Call the editor's MCP tools the words name, each shown as a tool call."""
        call_id = f"demo-mcp-{next(_CALL_IDS)}"
        update = {"sessionUpdate": "tool_call", "toolCallId": call_id, "kind": "read",
                  "title": "Ask the editor (MCP)", "status": "in_progress"}  # fmt: skip
        await self._send_update(session_id, update)
        try:
            answers = await ask_editor(servers, words)
        except (LookupError, OSError, RequestError) as err:
            answers, failed = [], str(err)
        else:
            failed = ""
        status = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
        await self._send_update(
            session_id, {**status, "status": "failed" if failed else "completed"}
        )
        reply = failed or "\n\n".join(text for _, text in answers)
        await self._stream(session_id, "agent_message_chunk", reply)
