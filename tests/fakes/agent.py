"""Scripted ACP agents for the tests: ``python tests/fakes/agent.py SCENARIO``.

Each scenario is a small misbehaviour or a fixed script on a shared
handshake. The fake exits with code 97 if nobody talks to it for 60 s, so a
broken test never leaves it behind.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from acp_nvim.protocol import Connection, RequestError  # noqa: E402
from acp_nvim.protocol.stdio import stdio_streams  # noqa: E402

Params = dict[str, Any]
IDLE_EXIT = 97


class Fake:
    def __init__(self, connection: Connection, send: Any, scenario: str) -> None:
        self.c = connection
        self.send = send  # for writing bytes no Connection would write
        self.scenario = scenario
        self.init_params: Params = {}
        self.cancelled = anyio.Event()
        connection.on_request("initialize", dict, self.initialize)
        connection.on_request("session/new", dict, self.new_session)
        connection.on_request("session/prompt", dict, self.prompt)
        connection.on_notification("session/cancel", dict, self.cancel)

    async def initialize(self, params: Params) -> Params:
        self.init_params = params
        version = 7 if self.scenario == "bad_version" else 1
        return {"protocolVersion": version, "agentInfo": {"name": "fake", "version": "0"}}

    async def new_session(self, params: Params) -> Params:
        return {"sessionId": "fake-1"}

    async def cancel(self, params: Params) -> None:
        self.cancelled.set()

    async def say(self, text: str, kind: str = "agent_message_chunk") -> None:
        await self.c.notify(
            "session/update",
            {"sessionId": "fake-1", "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}},
        )

    async def prompt(self, params: Params) -> Params:
        text = params["prompt"][0]["text"]
        match self.scenario:
            case "endless":
                # Stream until cancelled; then answer the way every real agent does.
                i = 0
                while not self.cancelled.is_set():
                    await self.say(f"tick{i} ")
                    i += 1
                    with anyio.move_on_after(0.005):
                        await self.cancelled.wait()
                return {"stopReason": "cancelled"}
            case "crash_mid_turn":
                await self.say("about to crash")
                sys.stderr.write("fatal: the fake agent broke on purpose\n")
                sys.stderr.flush()
                os._exit(2)
            case "capabilities":
                await self.say(json.dumps(self.init_params, sort_keys=True))
            case "vendor":
                try:
                    await self.c.request("craft/drainMidTurnQueue", {})
                except RequestError as err:
                    await self.say(f"vendor request answered {err.code}. ")
                await self.c.notify("qwen/notify/session/mode-update", {"mode": "x"})
                await self.say("still here")
            case "garbage":
                await self.send.send(b"{not json\n")
                await self.send.send(b'{"jsonrpc": "2.0", "method": "x", "params": ' + b"1" * 70_000_000 + b"}\n")
                await self.say("after garbage")
            case _:
                await self.say(f"echo: {text}")
        return {"stopReason": "end_turn"}


async def main(scenario: str) -> None:
    receive, send = stdio_streams()
    connection = Connection(receive, send, name="fake")
    Fake(connection, send, scenario)
    with anyio.move_on_after(60):
        await connection.serve()
        return
    sys.exit(IDLE_EXIT)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "echo")
