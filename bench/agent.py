"""The fast fake agent of the benchmarks: ``python bench/agent.py STAMPS_FILE``.

Speaks ACP v1 on stdio with raw NDJSON. The prompt text is a command:

- ``burst N NONCE``: N ``agent_message_chunk`` of exactly 20 bytes of text (every
  4th ends a line; the last one holds NONCE), pre-encoded, then written with one
  blocking write loop, as fast as the pipe takes them.
- ``fill LINES``: a message of LINES lines (1000 lines per chunk), to grow the transcript.
- ``tools N NONCE``: N ``tool_call`` + N ``tool_call_update`` with a 5 KB diff each;
  the last update's location holds NONCE.
- ``read N PATH...``: N ``fs/read_text_file`` round trips per path, timed here.
- ``ask PATH N``: a permission request for an edit of PATH (a diff with the whole
  file) replacing N of its lines, in hunks of 10 lines 40 lines apart.
- ``write PATH N``: the same edit through ``fs/write_text_file``.
- ``mcp_read N PATH...``: the same through the editor's MCP server (``read_buffer``
  via the stdio shim offered in ``mcpServers``), after timing the shim's start.
- ``terminal LIMIT LINE...``: the shell line LINE run through ``terminal/create``
  (``outputByteLimit`` LIMIT) until ``terminal/wait_for_exit`` answers; then its
  output and release. Timed here.
- ``pings MS``: for MS milliseconds, a request the client does not know (answered
  at once by its event loop) every millisecond, each round trip timed here.
- ``turn CHUNKS TOOLS NONCE``: CHUNKS chunks as ``burst``, then TOOLS tool calls as
  ``tools`` (ids unique per NONCE), the last location holding NONCE.
- ``big KIND``: one legal update of 1-17 MB in one line (see `big`).

Before answering the prompt it appends one JSON line to STAMPS_FILE with its own
``time.monotonic_ns()`` (CLOCK_MONOTONIC, the clock of Neovim's ``vim.uv.hrtime()``)
just before the first write and just after the last one returned. The same
program and bytes serve the plugin and the Lua floor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import msgspec

CHUNK = 20
STDOUT = 1
_stdin = os.fdopen(0, "rb", buffering=1 << 16)


def write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(STDOUT, view) :]


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def update(session: str, body: dict[str, Any]) -> bytes:
    params = {"sessionId": session, "update": body}
    return line({"jsonrpc": "2.0", "method": "session/update", "params": params})


# Lines end with a Markdown hard break (two spaces): the transcript joins a
# paragraph's soft breaks into rows (decision 0052), and the bench streams rows of
# 80 bytes, as every round before it did.
HARD_BREAK = "  \n"


def chunk_text(i: int, count: int, nonce: str) -> str:
    """Exactly CHUNK ASCII bytes; every 4th chunk ends a line of 80 bytes."""
    end = HARD_BREAK if i % 4 == 3 or i == count - 1 else " "
    body = f"END{nonce}" if i == count - 1 else f"w{i:07d} lorem ips"
    return body[: CHUNK - len(end)].ljust(CHUNK - len(end), ".") + end


def burst_text(count: int, nonce: str) -> str:
    """The whole text a burst streams (the bench checks the transcript against it)."""
    return "".join(chunk_text(i, count, nonce) for i in range(count))


def burst(session: str, count: int, nonce: str) -> list[bytes]:
    body = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""}}
    out = []
    for i in range(count):
        body["content"]["text"] = chunk_text(i, count, nonce)
        out.append(update(session, body))
    return [b"".join(out)]


def fill(session: str, lines: int) -> list[bytes]:
    out = []
    for start in range(0, lines, 1000):
        text = "".join(
            f"filler line {n:08d} of the long transcript{HARD_BREAK}"
            for n in range(start, min(lines, start + 1000))
        )
        out.append(
            update(
                session,
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
            )
        )
    return out


def big(session: str, kind: str, version: int = 1) -> list[bytes]:
    """One legal update in one line, as ACP ``version`` shapes it: ``commands`` 10k
    commands of 1,000-character descriptions (10 MB), ``config`` 1,000 settings of 500
    choices (17 MB), ``plan`` 10k entries (1.2 MB): what issue 29 measured holding
    the worker loop."""
    body: dict[str, Any]
    if kind == "commands":
        commands = [{"name": f"command{i}", "description": "d" * 1000} for i in range(10_000)]
        body = {"sessionUpdate": "available_commands_update", "availableCommands": commands}
    elif kind == "config":
        choices = [{"value": f"v{j}", "name": f"Choice {j}"} for j in range(500)]
        options = [
            {"id" if version == 1 else "configId": f"o{i}", "name": f"Option {i}",
             "type": "select", "currentValue": "v0", "options": choices}
            for i in range(1000)
        ]  # fmt: skip
        body = {"sessionUpdate": "config_option_update", "configOptions": options}
    else:
        entries = [
            {"content": f"step {i} " + "x" * 80, "priority": "medium", "status": "pending"}
            for i in range(10_000)
        ]
        body = {"sessionUpdate": "plan", "entries": entries}
        if version == 2:
            plan = {"type": "items", "planId": "big", "entries": entries}
            body = {"sessionUpdate": "plan_update", "plan": plan}
    return [update(session, body)]


def file_text(i: int, changed: bool) -> str:
    """About 5 KB of code; ``changed`` edits a few lines, as an agent's edit would."""
    rows = [f"def function_{i}_{n}(value: int) -> int:  # line {n}" for n in range(100)]
    if changed:
        for n in (10, 50, 90):
            rows[n] = f"def function_{i}_{n}(value: int) -> str:  # edited {n}"
    return "\n".join(rows) + "\n"


def tools(session: str, count: int, nonce: str, root: str) -> list[bytes]:
    out = []
    for i in range(count):
        call = f"bench-tool-{nonce}-{i}"
        out.append(
            update(
                session,
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call,
                    "title": f"Edit file_{i}.py",
                    "kind": "edit",
                    "status": "pending",
                },
            )
        )
        path = f"{root}/file_{i}.py"
        last = i == count - 1
        out.append(
            update(
                session,
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call,
                    "status": "completed",
                    "content": [
                        {
                            "type": "diff",
                            "path": path,
                            "oldText": file_text(i, False),
                            "newText": file_text(i, True),
                        }
                    ],
                    "locations": [{"path": f"{root}/END{nonce}.py" if last else path, "line": 11}],
                },
            )
        )
    return out


def edited(path: str, count: int) -> tuple[str, str]:
    """PATH's text, and the same with ``count`` lines replaced in hunks of 10, 40 apart."""
    with open(path) as f:
        old = f.read()
    rows = old.split("\n")
    for n in range(count):
        row = n // 10 * 40 + n % 10
        rows[row] = f"edited_{n} = {n}  # a line the agent replaced"
    return old, "\n".join(rows)


class Agent:
    def __init__(self, stamps: str) -> None:
        self.stamps = stamps
        self.next_id = 1000
        self.capabilities: dict[str, Any] = {}
        self.mcp_servers: list[dict[str, Any]] = []

    def receive(self) -> dict[str, Any]:
        raw = _stdin.readline()
        if not raw:
            sys.exit(0)
        # The fastest decoder at hand: a 4.4 MB file read is the agent's to parse,
        # and json.loads alone took 12 ms of the round trip (msgspec: 6 ms).
        message: dict[str, Any] = msgspec.json.decode(raw)
        return message

    def stamp(self, record: dict[str, Any]) -> None:
        with open(self.stamps, "a") as f:
            f.write(json.dumps(record) + "\n")

    def serve(self) -> None:
        while True:
            message = self.receive()
            method, msg_id = message.get("method"), message.get("id")
            if method == "initialize":
                self.capabilities = message["params"].get("clientCapabilities", {})
                result: Any = {
                    "protocolVersion": 1,
                    "agentCapabilities": {},
                    "agentInfo": {"name": "bench", "version": "0"},
                    "authMethods": [],
                }
            elif method == "session/new":
                self.mcp_servers = message["params"].get("mcpServers") or []
                result = {"sessionId": f"bench-{msg_id}"}
            elif method == "session/prompt":
                params = message["params"]
                self.prompt(params["sessionId"], params["prompt"][0]["text"].split())
                result = {"stopReason": "end_turn"}
            elif msg_id is None:
                continue  # session/cancel and other notifications
            else:
                write(
                    line(
                        {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "no"}}
                    )
                )
                continue
            write(line({"jsonrpc": "2.0", "id": msg_id, "result": result}))

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; its reply (updates and other messages first are skipped)."""
        self.next_id += 1
        write(line({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id and "method" not in reply:
                return reply

    def prompt(self, session: str, words: list[str]) -> None:
        command, args = words[0], words[1:]
        if command == "read":
            self.stamp(self.read(session, int(args[0]), args[1:]))
            return
        if command in ("ask", "write"):
            path, count = args[0], int(args[1])
            old, new = edited(path, count)
            if command == "write":
                reply = self.request(
                    "fs/write_text_file", {"sessionId": session, "path": path, "content": new}
                )
            else:
                diff = {"type": "diff", "path": path, "oldText": old, "newText": new}
                call = {"toolCallId": "bench-ask", "title": "Edit", "kind": "edit"}
                option = {"optionId": "allow", "name": "Allow", "kind": "allow_once"}
                params = {"sessionId": session, "toolCall": {**call, "content": [diff]}}
                reply = self.request("session/request_permission", {**params, "options": [option]})
            self.stamp({"command": command, "reply": reply})
            return
        if command == "mcp_read":
            self.stamp(self.mcp_read(int(args[0]), args[1:]))
            return
        if command == "terminal":
            self.stamp(self.terminal(session, int(args[0]), " ".join(args[1:])))
            return
        if command == "pings":
            self.stamp(self.pings(int(args[0])))
            return
        if command == "burst":
            payload = burst(session, int(args[0]), args[1])
        elif command == "turn":
            chunks = burst(session, int(args[0]), f"chunks-{args[2]}")
            payload = chunks + tools(session, int(args[1]), args[2], os.getcwd())
        elif command == "fill":
            payload = fill(session, int(args[0]))
        elif command == "tools":
            payload = tools(session, int(args[0]), args[1], os.getcwd())
        elif command == "big":
            payload = big(session, args[0])
        else:
            payload = [
                update(
                    session,
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "unknown command"},
                    },
                )
            ]
        first = time.monotonic_ns()
        for data in payload:
            write(data)
        last = time.monotonic_ns()
        self.stamp(
            {
                "command": command,
                "first_ns": first,
                "last_ns": last,
                "bytes": sum(len(d) for d in payload),
            }
        )

    def pings(self, ms: int) -> dict[str, Any]:
        """Round trips of an unknown request, one a millisecond: [sent_ns, rtt_ns]."""
        samples = []
        end = time.monotonic_ns() + ms * 1_000_000
        while (start := time.monotonic_ns()) < end:
            self.request("_bench/ping", {})
            samples.append([start, time.monotonic_ns() - start])
            time.sleep(0.001)
        return {"command": "pings", "samples": samples}

    def read(self, session: str, count: int, paths: list[str]) -> dict[str, Any]:
        """Round trips of fs/read_text_file as this agent sees them, in ns per path."""
        record: dict[str, Any] = {
            "command": "read",
            "advertised": self.capabilities.get("fs", {}),
            "times": {},
        }
        for path in paths:
            times = []
            for _ in range(count):
                start = time.monotonic_ns()
                reply = self.request("fs/read_text_file", {"sessionId": session, "path": path})
                times.append(time.monotonic_ns() - start)
                if "error" in reply:
                    record["error"] = reply["error"]
                    return record
                size = len(reply["result"]["content"])
            record["times"][path] = times
            record.setdefault("sizes", {})[path] = size
        return record

    def terminal(self, session: str, limit: int, command: str) -> dict[str, Any]:
        """A shell line from ``terminal/create`` to its exit, as this agent sees it."""
        start = time.monotonic_ns()
        params = {"sessionId": session, "command": command, "args": [], "outputByteLimit": limit}
        created = self.request("terminal/create", params)
        if "error" in created:
            return {"command": "terminal", "error": created["error"]}
        term = {"sessionId": session, "terminalId": created["result"]["terminalId"]}
        # Shown in a tool call, as agents do: the transcript follows its last lines.
        shown = {"type": "terminal", "terminalId": term["terminalId"]}
        call = {"sessionUpdate": "tool_call", "toolCallId": "bench-run", "title": "Run",
                "kind": "execute", "status": "in_progress", "content": [shown]}  # fmt: skip
        write(update(session, call))
        exited = self.request("terminal/wait_for_exit", term)["result"]
        exit_ns = time.monotonic_ns()
        output = self.request("terminal/output", term)["result"]
        self.request("terminal/release", term)
        return {
            "command": "terminal",
            "first_ns": start,
            "exit_ns": exit_ns,
            "exit": exited,
            "output": output["output"],
        }

    def mcp_read(self, count: int, paths: list[str]) -> dict[str, Any]:
        """Round trips of the editor MCP server's read_buffer through its stdio shim."""
        record: dict[str, Any] = {"command": "mcp_read", "times": {}}
        server = next((s for s in self.mcp_servers if s.get("name") == "nvim"), None)
        if server is None:
            record["error"] = "no editor MCP server offered"
            return record
        env = {**os.environ, **{v["name"]: v["value"] for v in server.get("env", [])}}
        start = time.monotonic_ns()
        shim = subprocess.Popen(
            [server["command"], *server.get("args", [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert shim.stdin is not None and shim.stdout is not None
        ids = iter(range(1, 1 << 30))

        def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            msg_id = next(ids)
            message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
            assert shim.stdin is not None and shim.stdout is not None
            shim.stdin.write(msgspec.json.encode(message) + b"\n")
            shim.stdin.flush()
            while True:
                reply: dict[str, Any] = msgspec.json.decode(shim.stdout.readline())
                if reply.get("id") == msg_id:
                    return reply

        try:
            hello = {"protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "bench", "version": "0"}}  # fmt: skip
            call("initialize", hello)
            shim.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            shim.stdin.flush()
            record["start_ns"] = time.monotonic_ns() - start
            for path in paths:
                times = []
                for _ in range(count):
                    begin = time.monotonic_ns()
                    reply = call("tools/call", {"name": "read_buffer", "arguments": {"path": path}})
                    times.append(time.monotonic_ns() - begin)
                    result = reply.get("result") or {}
                    if "error" in reply or result.get("isError"):
                        record["error"] = reply.get("error") or result
                        return record
                record["times"][path] = times
                record.setdefault("sizes", {})[path] = len(result["content"][0]["text"])
        finally:
            shim.stdin.close()
            shim.wait(5)
        return record


if __name__ == "__main__":
    Agent(sys.argv[1]).serve()
