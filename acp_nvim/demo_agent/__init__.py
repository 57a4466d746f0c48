"""The offline demo agent: real ACP over stdio, no account, no network.

``python -m acp_nvim.demo_agent`` answers every prompt with streamed thoughts
and a markdown reply holding a code block. Words in the prompt pick what it
shows (``help`` lists them). Pacing: ``ACP_DEMO_DELAY`` seconds between
chunks (default 0.02; 0 for tests).
"""

from __future__ import annotations

__all__ = ["DemoAgent", "main"]

import os
import re
from typing import Any

import anyio

from acp_nvim import __version__
from acp_nvim.protocol import Connection, RequestError
from acp_nvim.protocol.stdio import stdio_streams

Params = dict[str, Any]

HELP = """I am the offline demo agent of acp.nvim. Try:

- anything: a short streamed reply with a code block
- `long`: a long reply (try `:AcpCancel` or `<C-c>` while it streams)
- `fail`: the agent answers the prompt with an error
- `crash`: the agent exits in the middle of the turn
"""


def _chunks(text: str) -> list[str]:
    """Split text into words with their spacing, the way a model streams tokens."""
    return re.findall(r"\S+\s*|\s+", text)


class DemoAgent:
    """The agent side of one connection."""

    def __init__(self, connection: Connection, delay: float) -> None:
        self.connection = connection
        self.delay = delay
        self.sessions: dict[str, anyio.CancelScope | None] = {}
        connection.on_request("initialize", dict, self.initialize)
        connection.on_request("session/new", dict, self.new_session)
        connection.on_request("session/prompt", dict, self.prompt)
        connection.on_notification("session/cancel", dict, self.cancel)

    async def initialize(self, params: Params) -> Params:
        return {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": False, "promptCapabilities": {}},
            "agentInfo": {"name": "demo", "title": "Demo agent", "version": __version__},
            "authMethods": [],
        }

    async def new_session(self, params: Params) -> Params:
        if not os.path.isabs(params.get("cwd", "")):
            raise RequestError.invalid_params("cwd must be an absolute path")
        session_id = f"demo-{len(self.sessions) + 1}"
        self.sessions[session_id] = None
        return {"sessionId": session_id}

    async def cancel(self, params: Params) -> None:
        scope = self.sessions.get(params.get("sessionId", ""))
        if scope is not None:
            scope.cancel()

    async def prompt(self, params: Params) -> Params:
        session_id = params["sessionId"]
        if session_id not in self.sessions:
            raise RequestError.resource_not_found(f"session {session_id}")
        text = " ".join(
            block.get("text", "") for block in params.get("prompt", []) if block.get("type") == "text"
        )
        words = set(re.findall(r"[a-z]+", text.lower()))
        if "fail" in words:
            raise RequestError.internal("the demo agent was asked to fail")
        with anyio.CancelScope() as scope:
            self.sessions[session_id] = scope
            await self._reply(session_id, text, words)
        self.sessions[session_id] = None
        return {"stopReason": "cancelled" if scope.cancel_called else "end_turn"}

    async def _reply(self, session_id: str, text: str, words: set[str]) -> None:
        await self._stream(session_id, "agent_thought_chunk", f"The user wrote {len(text)} characters. ")
        await self._stream(session_id, "agent_thought_chunk", "I will answer with a short example.")
        if "crash" in words:
            await self._stream(session_id, "agent_message_chunk", "Crashing now, as asked…")
            os._exit(3)
        if "help" in words:
            await self._stream(session_id, "agent_message_chunk", HELP)
            return
        reply = (
            f"You said: *{text.strip()}*\n\n"
            "Here is some code:\n\n"
            "```python\ndef greet(name: str) -> str:\n    return f\"Hello, {name}!\"\n```\n\n"
            "Type `help` to see what else I can do."
        )
        if "long" in words:
            reply += "\n\n" + " ".join(f"word{i}" for i in range(2000))
        await self._stream(session_id, "agent_message_chunk", reply)

    async def _stream(self, session_id: str, kind: str, text: str) -> None:
        for piece in _chunks(text):
            await self.connection.notify(
                "session/update",
                {
                    "sessionId": session_id,
                    "update": {"sessionUpdate": kind, "content": {"type": "text", "text": piece}},
                },
            )
            # A checkpoint even without delay, so a cancel can land mid-stream.
            await anyio.sleep(self.delay)


async def _serve() -> None:
    receive, send = stdio_streams()
    connection = Connection(receive, send, name="demo")
    DemoAgent(connection, float(os.environ.get("ACP_DEMO_DELAY", "0.02")))
    await connection.serve()


def main() -> None:
    anyio.run(_serve)
