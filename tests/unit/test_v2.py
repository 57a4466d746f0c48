"""ACP v2 against the core: wire fixtures through a Connection, and the demo agent.

Fixture transcripts are JSON lines an agent sends (one ``session/update`` per
line, or a batch array); they go through a real Connection over memory streams
into the v2 adapter and a RecordingEditor. A permission request sent last is the
barrier: notifications are handled in order, so once it is answered every
update before it has been applied.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest

from acp_nvim.client.agent.sessions import EarlyUpdates, Services
from acp_nvim.client.agent.v2 import SessionsV2
from acp_nvim.client.app import App
from acp_nvim.client.services.elicitations import Elicitations
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import Attachment, PermissionOption, ToolCallPatch
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.client.tasks import Tasks
from acp_nvim.protocol import RequestError
from acp_nvim.protocol import schema_v2 as v2
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for
from tests.unit.memory_agent import MemoryAgent, app_with

pytestmark = pytest.mark.anyio
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "v2"
FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "agent.py")
DEMO = [sys.executable, "-m", "acp_nvim.demo_agent"]

INIT = v2.decode(
    b'{"protocolVersion": 2, "info": {"name": "fake", "version": "0"},'
    b' "capabilities": {"session": {}}}',
    v2.InitializeResponse,
)


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": body},
    }


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Client:
    """The client side of one v2 session, fed by a raw agent peer."""

    def __init__(self, raw_peer: Any, answer: str | None = None) -> None:
        self.conn, self.peer = raw_peer(convert=v2.decode, enc_hook=v2.enc_hook)
        self.editor = RecordingEditor()
        self.chat = Chat(1, "fake", self.editor, Workspace("/w"))
        self.chat.ready("s1", 2, None)
        self.terminals = Terminals({"s1": self.chat})
        self.asked: list[tuple[ToolCallPatch, list[PermissionOption]]] = []
        self.questions: list[str | None] = []
        self.answer = answer

        async def ask(
            chat: Chat, call: ToolCallPatch, options: list[PermissionOption], question: str | None
        ) -> str | None:
            chat.on_tool_call(call)
            self.asked.append((call, options))
            self.questions.append(question)
            return self.answer

        # ``tasks`` is the serving task group, set by tests whose agent works on its own.
        self.services = Services(
            {"s1": self.chat}, {}, self.terminals, cast(Any, SimpleNamespace(ask=ask)),
            cast(Any, None), Elicitations(),
        )  # fmt: skip
        self.sessions = SessionsV2(self.conn, INIT, self.services)
        self._barrier = 1000

    async def send(self, *messages: Any) -> None:
        for message in messages:
            await self.peer.send_json(message)

    async def barrier(self, subject: dict[str, Any] | None = None) -> Any:
        """A permission request; returns its response once every earlier line is applied."""
        self._barrier += 1
        params: dict[str, Any] = {
            "sessionId": "s1",
            "title": "Barrier?",
            "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
        }
        if subject is not None:
            params["subject"] = subject
        await self.peer.send_json(
            {
                "jsonrpc": "2.0",
                "id": self._barrier,
                "method": "session/request_permission",
                "params": params,
            }
        )
        return await self.peer.receive_json()

    def blocks(self) -> dict[str, list[str]]:
        return self.editor.transcript(1)

    def text(self) -> str:
        return "\n".join("\n".join(lines) for lines in self.blocks().values())


def fixture(name: str) -> list[Any]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


# -- messages ------------------------------------------------------------------------


async def test_whole_message_replaces_clears_and_chunks_append_after(raw_peer, serving) -> None:
    client = Client(raw_peer)
    async with serving(client.conn):
        await client.send(*fixture("messages.jsonl"))
        await client.barrier()
    blocks = {key.removeprefix("#message:"): lines for key, lines in client.blocks().items()}
    assert blocks["a1"] == ["## Agent", "C and more"]  # [A, B] replaced by [C], then a chunk
    assert blocks["a2"] == ["## Agent", ""]  # content null clears
    assert blocks["a3"] == ["## Agent", ""]  # content [] clears
    assert blocks["a4"] == ["## Agent", "kept"]  # omitted content: only _meta changed
    assert blocks["t1"] == ["### Thinking", "> hmm"]


async def test_chunks_read_at_once_are_joined_per_message(raw_peer, serving) -> None:
    client = Client(raw_peer)

    def chunk(message_id: str, text: str, kind: str = "agent_message_chunk") -> str:
        body = {"sessionUpdate": kind, "messageId": message_id}
        return json.dumps(update({**body, "content": {"type": "text", "text": text}}))

    lines = [
        chunk("a1", "Hel"),
        chunk("a1", "lo"),
        chunk("t1", "hm", "agent_thought_chunk"),
        chunk("a1", "!"),  # back to a1: its block, after the thought
        chunk("a2", "second"),
    ]
    async with serving(client.conn):
        await client.peer.send_line("\n".join(lines))  # one read: one run
        await client.barrier()
    blocks = client.blocks()
    ids = ["#message:a1", "#message:t1", "#message:a2"]
    assert [blocks[i] for i in ids] == [
        ["## Agent", "Hello!"],
        ["### Thinking", "> hm"],
        ["## Agent", "second"],
    ]
    assert list(blocks)[:3] == ids


async def test_user_message_ack_replaces_the_local_echo(raw_peer, serving) -> None:
    client = Client(raw_peer)
    async with serving(client.conn):
        await client.chat.start_turn("hello")
        await client.send(
            update(
                {
                    "sessionUpdate": "user_message",
                    "messageId": "u-9",
                    "content": [{"type": "text", "text": "hello"}],
                }
            ),
            update(
                {
                    "sessionUpdate": "user_message_chunk",
                    "messageId": "u-9",
                    "content": {"type": "text", "text": " (seen)"},
                }
            ),
        )
        await client.barrier()
    users = [lines for lines in client.blocks().values() if lines[0] == "## You"]
    assert users == [["## You", "hello (seen)"]]  # one message, not echo + ack


WHOLE_ACK = {
    "sessionUpdate": "user_message",
    "messageId": "u-1",
    "content": [
        {"type": "text", "text": "explain this"},
        {"type": "resource", "resource": {"uri": "file:///w/a.py#L2-L3", "text": "x = 1\n"}},
    ],
}
CHUNKED_ACK = [
    {"sessionUpdate": "user_message_chunk", "messageId": "u-1", "content": block}
    for block in [{"type": "text", "text": "explain"}, *WHOLE_ACK["content"][1:], {"type": "text", "text": " this"}]
]


@pytest.mark.parametrize("ack", [[WHOLE_ACK], CHUNKED_ACK], ids=["whole", "chunked"])
async def test_an_ack_with_attachments_keeps_the_attached_line(
    raw_peer, serving, ack: list[dict[str, Any]]
) -> None:
    """An agent acknowledging a prompt with a file echoes the file as a resource: the
    message still names it on its own line, as the user named it, not as a link
    stuck to the typed words; an ack streamed in chunks goes above that line."""
    client = Client(raw_peer)
    attached = Attachment("selection", "a.py:2-3", "file:///w/a.py#L2-L3", "x = 1\n")
    async with serving(client.conn):
        await client.chat.start_turn("explain this", [attached])
        await client.send(*map(update, ack))
        await client.barrier()
    users = [lines for lines in client.blocks().values() if lines[0] == "## You"]
    assert users == [["## You", "explain this", "", "*Attached: a.py:2-3*"]]


WORDLESS_ACKS = {
    "empty": [{"sessionUpdate": "user_message", "messageId": "u-1", "content": []}],
    "null": [{"sessionUpdate": "user_message", "messageId": "u-1", "content": None}],
    "file only": [{**WHOLE_ACK, "content": WHOLE_ACK["content"][1:]}],
    "empty chunk": [{**CHUNKED_ACK[0], "content": {"type": "text", "text": ""}}],
}


@pytest.mark.parametrize("ack", WORDLESS_ACKS.values(), ids=WORDLESS_ACKS.keys())
async def test_an_ack_without_words_keeps_the_words_typed(
    raw_peer, serving, ack: list[dict[str, Any]]
) -> None:
    """An agent acknowledging a prompt with no words (an empty message, the file
    alone, an empty first chunk) replaced the words typed with nothing: the prompt
    showed empty. They stay until the acknowledgment's own words come, which then
    replace them once (not appended to them)."""
    client = Client(raw_peer)
    attached = Attachment("selection", "a.py:2-3", "file:///w/a.py#L2-L3", "x = 1\n")
    async with serving(client.conn):
        await client.chat.start_turn("explain this", [attached])
        await client.send(*map(update, ack))
        await client.barrier()
        users = [lines for lines in client.blocks().values() if lines[0] == "## You"]
        assert users == [["## You", "explain this", "", "*Attached: a.py:2-3*"]]
        await client.send(*map(update, CHUNKED_ACK))
        await client.barrier()
    users = [lines for lines in client.blocks().values() if lines[0] == "## You"]
    assert users == [["## You", "explain this", "", "*Attached: a.py:2-3*"]]


OLD_MESSAGE = [
    {"type": "text", "text": "compare"},
    {"type": "resource_link", "uri": "file:///w/src/b.py", "name": "b.py"},
    {"type": "image", "data": b64(b"png"), "mimeType": "image/png"},
]


@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
async def test_a_users_message_names_what_it_carries(raw_peer, serving, chunked: bool) -> None:
    """A user's message the client did not send (a loaded session's history) names
    its files by their paths in the session's directory, and an image as one, sent
    whole or in chunks (those showed `[resource_link …]` above the line)."""
    client = Client(raw_peer)
    whole = {"sessionUpdate": "user_message", "messageId": "u-old", "content": OLD_MESSAGE}
    chunks = [
        {"sessionUpdate": "user_message_chunk", "messageId": "u-old", "content": block}
        for block in OLD_MESSAGE
    ]
    async with serving(client.conn):
        await client.send(*map(update, chunks if chunked else [whole]))
        await client.barrier()
    assert client.blocks()["#message:u-old"] == [
        "## You", "compare", "", "*Attached: src/b.py, image*"
    ]  # fmt: skip


async def test_a_users_message_with_a_file_uri_that_does_not_parse_is_shown(
    raw_peer, serving
) -> None:
    """A replayed message linking ``file://[::1/a.py`` (no URI: urlparse raises): the
    label failed the whole update, and the message was never drawn."""
    client = Client(raw_peer)
    link = {"type": "resource_link", "uri": "file://[::1/a.py", "name": "a.py"}
    content = [{"type": "text", "text": "look"}, link]
    async with serving(client.conn):
        await client.send(
            update({"sessionUpdate": "user_message", "messageId": "u-old", "content": content})
        )
        await client.barrier()
    assert client.blocks()["#message:u-old"] == ["## You", "look", "", "*Attached: a.py*"]


async def test_a_left_sessions_updates_leave_room_for_a_new_ones(raw_peer, serving) -> None:
    """A session a chat left (a rewind) still streams while the next is created: its
    updates were held with the new session's until it was made, then dropped, and a
    thousand of them left no room for the new session's commands."""
    client = Client(raw_peer)
    left = Chat(3, "fake", client.editor, Workspace("/w"))
    client.services.register("s0", left)
    del client.services.chats["s0"]  # as the connection detaches a chat
    second = Chat(2, "fake", client.editor, Workspace("/w"))
    chunk = {"sessionUpdate": "agent_message_chunk", "messageId": "a", "content": {"type": "text", "text": "."}}
    commands = [{"name": "review", "description": "Review the code"}]

    def of(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {**update(body), "params": {"sessionId": session_id, "update": body}}

    async def agent() -> None:
        asked = await client.peer.receive_json()
        assert asked["method"] == "session/new"
        streamed = [json.dumps(of("s0", chunk))] * EarlyUpdates.LIMIT
        listed = of("s2", {"sessionUpdate": "available_commands_update", "availableCommands": commands})
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"sessionId": "s2"}}
        await client.peer.send_line("\n".join([*streamed, json.dumps(listed), json.dumps(answer)]))

    async with serving(client.conn) as tasks:
        tasks.start_soon(agent)
        assert await client.sessions.new_session(second) == "s2"
    assert [c["name"] for c in client.editor.last_status(2)["commands"]] == ["review"]


@pytest.mark.parametrize("gone", ["closed", "refused"])
async def test_a_session_id_the_agent_hands_out_again_keeps_its_early_updates(
    raw_peer, serving, gone: str
) -> None:
    """An agent that reuses a session id in one process (after it closed the session,
    or one it refused to resume) sends the new session's commands before its answer:
    they were dropped as a left session's, and the chat had no commands."""
    client = Client(raw_peer)
    first = Chat(3, "fake", client.editor, Workspace("/w"))
    second = Chat(2, "fake", client.editor, Workspace("/w"))
    commands = [{"name": "review", "description": "Review the code"}]
    body = {"sessionUpdate": "available_commands_update", "availableCommands": commands}
    listed = {**update(body), "params": {"sessionId": "s0", "update": body}}

    async def agent() -> None:
        asked = await client.peer.receive_json()
        if gone == "closed":
            assert asked["method"] == "session/close"
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {}})
        else:
            assert asked["method"] == "session/resume"
            error = {"code": -32002, "message": "Resource not found"}
            await client.send({"jsonrpc": "2.0", "id": asked["id"], "error": error})
        asked = await client.peer.receive_json()
        assert asked["method"] == "session/new"
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"sessionId": "s0"}}
        await client.peer.send_line("\n".join([json.dumps(listed), json.dumps(answer)]))

    async with serving(client.conn) as tasks:
        tasks.start_soon(agent)
        if gone == "closed":
            client.services.register("s0", first)
            del client.services.chats["s0"]  # as the connection detaches a closed chat
            await client.sessions.close("s0")
        else:
            with pytest.raises(RequestError):
                await client.sessions.resume(first, "s0", replay=False)
        assert await client.sessions.new_session(second) == "s0"
    assert [c["name"] for c in client.editor.last_status(2)["commands"]] == ["review"]


# -- the turn ------------------------------------------------------------------------


async def test_state_updates_drive_the_turn_and_updates_render_while_idle(
    raw_peer, serving
) -> None:
    client = Client(raw_peer)
    async with serving(client.conn) as tasks:
        client.services.tasks = Tasks(tasks)
        # Work the agent starts on its own (no prompt waits for its idle).
        await client.send(update({"sessionUpdate": "state_update", "state": "running"}))
        await client.send(update({"sessionUpdate": "state_update", "state": "requires_action"}))
        await client.barrier()
        assert client.editor.last_status(1)["turn_state"] == "requires_action"
        assert client.chat.state == "running"
        await client.send(
            update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "max_tokens"}),
            update(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "late",
                    "content": {"type": "text", "text": "background"},
                }
            ),
            update({"sessionUpdate": "state_update", "state": "_paused"}),
        )
        await client.barrier()
        await wait_for(lambda: client.chat.state == "ready")
    assert ("AcpTurnEnd", {"chat": 1, "stop_reason": "max_tokens"}) in client.editor.events
    assert client.blocks()["#message:late"] == ["## Agent", "background"]
    assert client.editor.last_status(1)["turn_state"] == "_paused"  # unknown state: shown


# -- tool calls ----------------------------------------------------------------------


async def test_tool_call_upserts(raw_peer, serving) -> None:
    client = Client(raw_peer)
    async with serving(client.conn):
        await client.send(*fixture("tool_calls.jsonl"))
        await client.barrier()
    call = client.chat.session.tool_calls["c1"]
    assert (call.title, call.kind, call.status) == ("", "read", "cancelled")  # title null cleared
    lines = client.blocks()["c1"]
    assert lines[:2] == ["#### read", "`read` · cancelled"]
    assert lines[2:] == ["replaced", "appended", "[_hologram content]"]
    assert client.chat.session.tool_calls["c2"].content == []  # content null cleared


# -- diffs ---------------------------------------------------------------------------


async def test_structured_diff_rendered_per_file(raw_peer, serving) -> None:
    client = Client(raw_peer)
    async with serving(client.conn):
        await client.send(*fixture("diff.jsonl"))
        await client.barrier()
    lines = client.blocks()["e1"]
    text = "\n".join(lines)
    # Named in the session's directory (/w); each file's patch as the agent sent it.
    assert "**modified** a.txt\n```diff\ndiff --git a.txt a.txt\n--- a.txt\n+++ a.txt" in text
    assert "-old\n+new\n```" in text
    assert "**added** new.txt\n```diff\ndiff --git new.txt new.txt\nnew file mode" in text
    assert "**deleted** gone.txt" in text
    assert "**moved** x.md → y.md" in text
    assert "**copied** c1 → c2" in text
    assert "**modified** logo.png (binary)" in text
    assert "**modified** link (symlink)" in text
    assert "**added** dir (directory)" in text
    assert "**_splice** odd" in text  # an unknown operation is listed as is
    # Patch-less changes have no diff block of their own.
    assert lines[lines.index("**deleted** gone.txt") + 1].startswith("**")


# -- terminals -----------------------------------------------------------------------


async def test_terminal_chunks_split_utf8_and_escapes_then_snapshot(raw_peer, serving) -> None:
    client = Client(raw_peer)
    data = "caf\u00e9 \x1b[31mred\x1b[0m done\n".encode()
    cut_utf8 = data.index("\u00e9".encode()) + 1
    cut_escape = data.index(b"\x1b[31m") + 3
    pieces = [data[:cut_utf8], data[cut_utf8:cut_escape], data[cut_escape:]]
    async with anyio.create_task_group() as tasks, serving(client.conn):
        client.terminals.start(Tasks(tasks))
        await client.send(
            update(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "run",
                    "title": "Run",
                    "kind": "execute",
                    "content": [{"type": "terminal", "terminalId": "t1"}],
                }
            ),
            update(
                {
                    "sessionUpdate": "terminal_update",
                    "terminalId": "t1",
                    "command": "make",
                    "cwd": "/w",
                }
            ),
        )
        for piece in pieces:
            await client.send(
                update(
                    {
                        "sessionUpdate": "terminal_output_chunk",
                        "terminalId": "t1",
                        "data": b64(piece),
                    }
                )
            )
        await client.barrier()
        await wait_for(lambda: "caf\u00e9 red done" in client.blocks().get("run", []))
        key = client.chat.session.terminals["t1"].key
        assert client.blocks()["run"][2:] == [
            f"[terminal {key} · running] make",
            "```text",
            "caf\u00e9 red done",
            "```",
        ]
        assert (
            client.editor.terminals[key]["data"] == data.decode()
        )  # the text as sent, escapes and all, for a real terminal
        await client.send(
            update(
                {
                    "sessionUpdate": "terminal_update",
                    "terminalId": "t1",
                    "output": {"data": b64(b"fresh\n")},
                    "exitStatus": {"exitCode": 2},
                }
            ),
            update(
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": "t1",
                    "data": b64(b"tail\n"),
                }
            ),
        )
        await client.barrier()
        await wait_for(lambda: "tail" in client.blocks()["run"])
        assert client.blocks()["run"][2:] == [
            f"[terminal {key} · exit 2] make",
            "```text",
            "fresh",
            "tail",
            "```",
        ]
        assert client.editor.terminals[key]["data"] == "fresh\ntail\n"
        tasks.cancel_scope.cancel()


# -- unknown variants and batches ----------------------------------------------------


async def test_unknown_variants_are_shown_generically(raw_peer, serving) -> None:
    client = Client(raw_peer)
    async with serving(client.conn):
        await client.send(*fixture("unknown.jsonl"))
        await client.barrier()
        assert client.chat.state == "ready"
    status = client.editor.last_status(1)
    assert status["unknown_update"] == "_sparkle"
    assert client.blocks()["#message:m1"] == ["## Agent", "[_hologram content]"]
    assert client.blocks()["#plan:p9"] == ["### Plan", "- [ ] (_markdown plan)"]
    assert client.chat.session.commands == [
        {"name": "search", "description": "Search", "hint": "query"},
        {"name": "pick", "description": "Pick", "input": "_choice"},
    ]
    assert [o.type for o in client.chat.session.config_options] == ["select", "_slider"]


async def test_batch_with_an_invalid_entry(raw_peer, serving) -> None:
    client = Client(raw_peer)
    async with serving(client.conn):
        await client.send(
            [
                update(
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "messageId": "b1",
                        "content": {"type": "text", "text": "one"},
                    }
                ),
                {"jsonrpc": "2.0", "id": 7},
                update(
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "messageId": "b1",
                        "content": {"type": "text", "text": " two"},
                    }
                ),
            ]
        )
        errors = await client.peer.receive_json()
        await client.barrier()
    assert [(e["id"], e["error"]["code"]) for e in errors] == [(7, -32600)]
    assert client.blocks()["#message:b1"] == ["## Agent", "one two"]


# -- plans ---------------------------------------------------------------------------


async def test_plans_are_keyed_by_id(raw_peer, serving) -> None:
    client = Client(raw_peer)

    def plan(plan_id: str, status: str) -> dict[str, Any]:
        entry = {"content": "step", "priority": "high", "status": status}
        return update(
            {
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": plan_id, "entries": [entry]},
            }
        )

    async with serving(client.conn):
        await client.send(plan("p1", "pending"), plan("p2", "pending"), plan("p1", "completed"))
        await client.barrier()
    assert client.blocks()["#plan:p1"] == ["### Plan", "- [x] step"]
    assert client.blocks()["#plan:p2"] == ["### Plan 2", "- [ ] step"]  # told apart


# -- permissions ---------------------------------------------------------------------


async def test_permission_subjects(raw_peer, serving) -> None:
    client = Client(raw_peer, answer="ok")
    async with serving(client.conn):
        tool = {
            "type": "tool_call",
            "toolCall": {
                "toolCallId": "c7",
                "title": "Edit a.txt",
                "kind": "edit",
                "status": "pending",
            },
        }
        answer = await client.barrier(tool)
        assert answer["result"]["outcome"] == {"outcome": "selected", "optionId": "ok"}
        await client.barrier({"type": "command", "command": "make test", "cwd": "/w"})
        await client.barrier({"type": "_robot", "arm": 1})
        await client.barrier()
        client.answer = "not-offered"
        refused = await client.barrier()
    assert refused["result"]["outcome"] == {"outcome": "cancelled"}
    calls = [call for call, _ in client.asked]
    assert calls[0].id == "c7" and client.chat.session.tool_calls["c7"].title == "Edit a.txt"
    # The request's own title goes with the prompt, not onto the tool call.
    assert client.questions[0] == "Barrier?"
    assert client.questions[1] is None  # the command's own call already carries it
    command = client.chat.session.tool_calls[calls[1].id]
    assert (command.title, command.kind) == ("Barrier?", "execute")
    assert "`$ make test`\nin `/w`" in command.content[0].text  # type: ignore[union-attr]
    assert "(_robot request)" in client.chat.session.tool_calls[calls[2].id].content[0].text  # type: ignore[union-attr]
    assert [o.id for o in client.asked[0][1]] == ["ok"]


# -- against the demo agent ----------------------------------------------------------


def agent_text(editor: RecordingEditor, chat: int) -> str:
    return "\n".join("\n".join(lines) for lines in editor.transcript(chat).values())


async def test_demo_v2_turn_features_and_session_surface(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        assert app.setup({"protocol_version": 2})
        await app.open(1, None, str(tmp_path))
        assert app.chats[1].protocol_version == 2
        assert editor.last_status(1)["mode"] == "Ask"
        await app.send(1, "hello tool diff terminal plan fix unknown")
        assert editor.events[-1] == ("AcpTurnEnd", {"chat": 1, "stop_reason": "end_turn"})
        text = agent_text(editor, 1)
        assert text.count("## You\nhello tool") == 1
        assert "You said: *hello tool diff terminal plan fix unknown*" in text
        assert "first line of notes\nsecond line of notes" in text
        assert "**moved** " in text and "(binary)" in text
        await wait_for(lambda: "passed: caf\u00e9 \u2713" in agent_text(editor, 1))
        assert "· exit 0] make test" in agent_text(editor, 1)
        assert "The answer is 42. (corrected)" in text and "answer is 41" not in text

        await app.set_config(1, "mode", "code")
        assert editor.last_status(1)["mode"] == "Code"
        # A switch typed as a word (`:AcpConfig suggest off`) is sent as a boolean.
        suggest = next(o for o in app.chats[1].session.config_options if o.id == "suggest")
        assert (suggest.type, suggest.current) == ("boolean", True)
        await app.set_config(1, "suggest", "off")
        suggest = next(o for o in app.chats[1].session.config_options if o.id == "suggest")
        assert suggest.current is False
        await app.set_config(1, "suggest", "maybe")
        assert editor.notices.pop() == ("error", "suggest is on or off, not 'maybe'")

        await app.list_sessions(1)
        listed = editor.events[-1]
        assert listed[0] == "AcpSessionList" and listed[1]["sessions"][0]["session_id"] == "demo-1"

        # Not resumed in a second chat while the first has it (issue 29.2); once the
        # first is closed, resumed with its history replayed.
        await app.open(2, None, str(tmp_path), session_id="demo-1")
        assert editor.last_status(2)["error"] == (
            "agent 'demo': session 'demo-1' is open in chat 1 already"
        )
        await app.login(1, None)
        await app.logout(1)
        await app.open(3, None, str(tmp_path))  # keeps the agent when chat 1 closes
        await app.close(1)
        await app.open(4, None, str(tmp_path), session_id="demo-1")
        assert app.chats[4].state == "ready"
        assert "You said: *hello tool diff terminal plan fix unknown*" in agent_text(editor, 4)

        # Not deleted under the chat on it; once that is closed, deleted.
        await app.delete_session(4, "demo-1")
        assert editor.notices.pop() == (
            "error", "chat 4 is on session demo-1: close it first to delete the session"
        )
        await app.close(4)
        await app.delete_session(3, "demo-1")
        assert editor.notices[-1] == ("info", "deleted session demo-1")
        assert [n for n in editor.notices if n[0] == "error"] == []
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_the_demo_v2_help_offers_nothing_it_does_not_show_over_v2(tmp_path: Path) -> None:
    """Its help listed the v1 demo's whole list too: `edit`, `run` and `disk` need
    the client's file system and terminals, which v2 does not have, and did nothing."""
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        assert app.setup({"protocol_version": 2})
        await app.open(1, None, str(tmp_path))
        await app.send(1, "help")
        helped = agent_text(editor, 1)
        assert "`tool`" in helped and "`long`" in helped
        await app.send(1, "edit run disk")
        assert app.chats[1].session.tool_calls == {}
        assert "You said: *edit run disk*" in agent_text(editor, 1)
        assert not any(f"`{word}" in helped for word in ("edit", "run", "disk"))
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_demo_v2_cancel_ends_on_idle_cancelled(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"protocol_version": 2})
        await app.open(1, None, str(tmp_path))
        tasks.start_soon(app.send, 1, "long")
        await wait_for(lambda: "word5 " in agent_text(editor, 1))
        await app.cancel(1)
        await wait_for(lambda: editor.events[-1][0] == "AcpTurnEnd")
        assert editor.events[-1][1]["stop_reason"] == "cancelled"
        assert app.chats[1].state == "ready"
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_v1_answer_restarts_the_agent_with_v1(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        # Configured like any agent, so it needs the tree on its path (the built-in demo has it).
        old = {"cmd": [*DEMO, "--v1"], "env": {"PYTHONPATH": str(Path(__file__).parents[2])}}
        app.setup({"protocol_version": 2, "agents": {"old": old}})
        await app.open(1, "old", str(tmp_path))
        assert app.chats[1].protocol_version == 1
        inits = [line for line in app.log.lines() if '"method":"initialize"' in line]
        assert (
            len(inits) == 2
            and '"protocolVersion":2' in inits[0]
            and '"protocolVersion":1' in inits[1]
        )
        await app.send(1, "hi")
        assert editor.events[-1] == ("AcpTurnEnd", {"chat": 1, "stop_reason": "end_turn"})
        await app.delete_session(1, "demo-1")  # the v1 demo offers no session/delete
        assert editor.notices[-1][1] == "agent 'old': deleting sessions is not offered by this agent"
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_other_version_ends_the_connection(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup(
            {
                "protocol_version": 2,
                "agents": {"future": {"cmd": [sys.executable, FAKE, "bad_version"]}},
            }
        )
        await app.open(1, "future", str(tmp_path))
        assert editor.events[-1][1]["message"] == (
            "agent 'future' speaks ACP version 7; acp.nvim speaks versions 1 and 2"
        )
        assert app.agents == {}
        tasks.cancel_scope.cancel()


async def test_v2_agent_exit_mid_turn_is_reported(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"protocol_version": 2})
        await app.open(1, None, str(tmp_path))
        await app.send(1, "crash")
        assert app.chats[1].state == "error"
        assert "exited during the turn (exit code 3)" in editor.events[-1][1]["message"]
        await app.shutdown()
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("policy", "verdict"), [("allow_all", "You allowed it"), ("ask", "Not allowed")]
)
async def test_demo_v2_permission_for_a_command(tmp_path: Path, policy: str, verdict: str) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"protocol_version": 2, "permission_policy": policy})
        await app.open(1, None, str(tmp_path))
        tasks.start_soon(app.send, 1, "permission")
        if policy == "ask":
            await wait_for(lambda: editor.last_status(1).get("turn_state") == "requires_action")
            await wait_for(lambda: app.agents["demo"].permissions.pending(app.chats[1]) != [])
            (request,) = app.agents["demo"].permissions.pending(app.chats[1])
            await app.answer(1, request, "no")
        await wait_for(lambda: editor.events[-1][0] == "AcpTurnEnd")
        text = agent_text(editor, 1)
        assert verdict in text
        assert "`$ rm -rf build`\nin `" in text and "clean the build directory" in text
        await app.shutdown()
        tasks.cancel_scope.cancel()


# -- elicitation -----------------------------------------------------------------------


def test_v2_offers_both_elicitation_modes() -> None:
    from acp_nvim.client.agent.v2 import initialize_request

    offered = v2.encode(initialize_request())
    assert json.loads(offered)["capabilities"]["elicitation"] == {"form": {}, "url": {}}


async def test_v2_elicitation_form_round_trip(raw_peer, serving) -> None:
    client = Client(raw_peer)
    schema = {
        "type": "object",
        "properties": {
            "size": {"type": "number", "title": "Size", "maximum": 9},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}},
        },
        "required": ["size"],
    }
    params = {"sessionId": "s1", "mode": "form", "message": "Which?", "requestedSchema": schema}
    async with serving(client.conn):
        await client.send({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": params})
        await wait_for(lambda: any(op["op"] == "elicit" for op in client.editor.ops.get(1, [])))
        (op,) = [op for op in client.editor.ops[1] if op["op"] == "elicit"]
        assert op["mode"] == "form" and op["message"] == "Which?"
        size, tags = op["fields"]
        assert (size["name"], size["type"], size["required"], size["maximum"]) == ("size", "number", True, 9)
        assert (tags["type"], tags["choices"]) == ("array", [("x", "X")])
        assert client.services.elicitations.answer(op["id"], "accept", {"size": 2.5, "tags": ["x"]})
        response = await client.peer.receive_json()
    assert response == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"action": "accept", "content": {"size": 2.5, "tags": ["x"]}},
    }
    assert not client.services.elicitations.answer(op["id"], "decline", None)  # answered once


def test_a_null_file_change_is_no_change() -> None:
    # The fuzzer's find (test_agent_output_mid_turn): `changes: [null]` in a diff
    # stopped the update with an internal error.
    from acp_nvim.client.agent.v2 import tool_call_patch
    from acp_nvim.client.session.model import ChangesPart, FileOp

    update = v2.decode(
        json.dumps(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c",
                "content": [{"type": "diff", "changes": [None, {"operation": "delete", "path": "/w/a"}]}],
            }
        ),
        v2.SessionUpdate,
    )
    assert isinstance(update, v2.SessionUpdateToolCallUpdate)
    [part] = tool_call_patch(update).content or []
    assert isinstance(part, ChangesPart)
    assert part.changes == [FileOp("delete", "/w/a", None, None)]


async def test_an_agent_without_sessions_is_not_asked_for_them(tmp_path: Path) -> None:
    """No ``capabilities.session``: no session/list, resume or close is offered, and
    without login methods no auth/logout: the user is told so, not "Method not
    found"; a chat still starts (the agent answers session/new)."""
    info = {"name": "memory", "version": "0"}
    result = {"protocolVersion": 2, "info": info, "capabilities": {}}
    agent = MemoryAgent(2, initialize=[{"jsonrpc": "2.0", "id": 0, "result": result}])
    async with app_with(agent, str(tmp_path)) as (app, editor):
        await app.send(1, "hi")
        assert "reply 1" in "\n".join(editor.transcript(1)["#message:reply-1"])
        await app.list_sessions(1)
        await app.logout(1)
        await app.open(2, None, str(tmp_path))  # keeps the agent when chat 1 closes
        await app.close(1)
        await app.open(3, None, str(tmp_path), session_id="s1")
        assert editor.last_status(3)["error"] == (
            "agent 'memory': resuming a session is not offered by this agent"
        )
    told = [message for level, message in editor.notices if level == "error"]
    assert told == [
        "agent 'memory': listing sessions is not offered by this agent",
        "agent 'memory': logging out is not offered by this agent",
    ]
    asked = {m.get("method") for m in agent.received if isinstance(m, dict)}
    assert not asked & {"session/list", "session/resume", "session/close", "auth/logout"}
