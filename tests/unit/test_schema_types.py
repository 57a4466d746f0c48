"""The generated ACP types: real-shaped messages decode, unknowns survive, encoding is wire JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_nvim.protocol import ProtocolError
from acp_nvim.protocol import schema_v1 as v1
from acp_nvim.protocol import schema_v2 as v2
from acp_nvim.protocol.unknown import Unknown, struct_type

REPO = Path(__file__).resolve().parents[2]
GEN = REPO / "scripts/gen_types.py"
SCHEMA_DIR = REPO / "spec/acp/schema"


def wire(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def v1_update(update: dict[str, Any]) -> v1.SessionNotification:
    raw = wire({"sessionId": "sess_1", "update": update})
    return v1.decode(msgspec.Raw(raw), v1.SessionNotification)


def roundtrip(obj: Any) -> Any:
    return json.loads(v1.encode(obj))


# --- v1: every session/update variant the client renders ------------------------------


def test_v1_agent_message_chunk() -> None:
    update = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Hello"},
    }
    note = v1_update(update)
    assert note.session_id == "sess_1"
    assert isinstance(note.update, v1.SessionUpdateAgentMessageChunk)
    assert isinstance(note.update, v1.ContentChunk)
    assert isinstance(note.update.content, v1.ContentBlockText)
    assert note.update.content.text == "Hello"
    assert note.update.message_id is None
    assert roundtrip(note) == {"sessionId": "sess_1", "update": update}


def test_v1_tool_call_with_diff_and_locations() -> None:
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_1",
        "title": "Edit main.py",
        "kind": "edit",
        "status": "pending",
        "content": [
            {"type": "diff", "path": "/w/main.py", "oldText": "a\n", "newText": "b\n"},
            {"type": "content", "content": {"type": "text", "text": "done"}},
            {"type": "terminal", "terminalId": "term_1"},
        ],
        "locations": [{"path": "/w/main.py", "line": 3}],
        "rawInput": {"path": "/w/main.py"},
    }
    call = v1_update(update).update
    assert isinstance(call, v1.SessionUpdateToolCall)
    assert (call.tool_call_id, call.title, call.kind, call.status) == (
        "call_1",
        "Edit main.py",
        "edit",
        "pending",
    )
    assert call.content is not None
    diff, text, term = call.content
    assert isinstance(diff, v1.ToolCallContentDiff)
    assert (diff.path, diff.old_text, diff.new_text) == ("/w/main.py", "a\n", "b\n")
    assert isinstance(text, v1.ToolCallContentContent)
    assert isinstance(text.content, v1.ContentBlockText)
    assert isinstance(term, v1.ToolCallContentTerminal)
    assert term.terminal_id == "term_1"
    assert call.locations == [v1.ToolCallLocation(path="/w/main.py", line=3)]
    assert call.raw_input == {"path": "/w/main.py"}
    assert roundtrip(call) == update


def test_v1_tool_call_update() -> None:
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}],
    }
    patch = v1_update(update).update
    assert isinstance(patch, v1.SessionUpdateToolCallUpdate)
    assert patch.status == "completed"
    assert patch.title is None
    assert patch.kind is None
    assert roundtrip(patch) == update


def test_v1_plan() -> None:
    update = {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "Read the code", "priority": "high", "status": "completed"},
            {"content": "Fix it", "priority": "medium", "status": "in_progress"},
        ],
    }
    plan = v1_update(update).update
    assert isinstance(plan, v1.SessionUpdatePlan)
    assert [(e.content, e.priority, e.status) for e in plan.entries] == [
        ("Read the code", "high", "completed"),
        ("Fix it", "medium", "in_progress"),
    ]
    assert roundtrip(plan) == update


def test_v1_available_commands_update() -> None:
    update = {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {"name": "web", "description": "Search the web", "input": {"hint": "query"}},
            {"name": "init", "description": "Create AGENTS.md"},
        ],
    }
    cmds = v1_update(update).update
    assert isinstance(cmds, v1.SessionUpdateAvailableCommandsUpdate)
    web, init = cmds.available_commands
    assert web.description == "Search the web"
    assert isinstance(web.input, v1.UnstructuredCommandInput)
    assert web.input.hint == "query"
    assert init.input is None
    assert roundtrip(cmds) == update


# --- unknown variants ----------------------------------------------------------------


def test_unknown_update_tag_is_kept_at_top_level() -> None:
    update = {"sessionUpdate": "_vendor_widget", "widget": {"size": 3}}
    note = v1_update(update)
    assert isinstance(note.update, Unknown)
    assert note.update.tag == "_vendor_widget"
    assert note.update.raw == update
    assert roundtrip(note) == {"sessionId": "sess_1", "update": update}
    # and through a default msgspec encoder, no hook needed
    assert json.loads(msgspec.json.encode(note))["update"] == update


def test_unknown_tool_call_content_keeps_the_tool_call() -> None:
    hologram = {"type": "hologram", "frames": [1, 2]}
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_2",
        "title": "Render",
        "content": [
            hologram,
            {"type": "content", "content": {"type": "video", "url": "x"}},
            {"type": "diff", "path": "/a", "newText": "b"},
        ],
    }
    call = v1_update(update).update
    assert isinstance(call, v1.SessionUpdateToolCall)
    assert call.content is not None
    first, nested, diff = call.content
    assert isinstance(first, Unknown)
    assert first.raw == hologram
    assert isinstance(nested, v1.ToolCallContentContent)
    assert isinstance(nested.content, Unknown)  # innermost level only
    assert isinstance(diff, v1.ToolCallContentDiff)
    assert roundtrip(call) == update


def test_unknown_enum_values_decode_as_str() -> None:
    update = {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t", "kind": "teleport"}
    call = v1_update(update).update
    assert isinstance(call, v1.SessionUpdateToolCall)
    assert call.kind == "teleport"
    assert "teleport" not in v1.TOOL_KIND_VALUES


def test_malformed_known_variant_is_an_error_with_a_path() -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": 3}}
    with pytest.raises(
        ProtocolError, match=r"`str`, got `int` - at `\$\.update\.content\.text"
    ):
        v1_update(update)


def test_marked_fields_fall_back_instead_of_failing_the_message() -> None:
    """x-deserialize-default-on-error: the default; x-deserialize-skip-invalid-items:
    the bad items dropped. The rest of the update stands."""
    update = v1_update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "t",
            "kind": ["edit"],
            "_meta": 1,
            "content": [{"type": "diff", "path": 3, "newText": "b"}, {"type": "terminal", "terminalId": "t"}],
            "locations": [{"path": "/a", "line": "one"}, {"line": 2}],
        }
    )
    update = update.update
    assert isinstance(update, v1.SessionUpdateToolCall)
    assert (update.title, update.kind, update.meta) == ("t", None, None)
    assert [type(c).__name__ for c in update.content or []] == ["ToolCallContentTerminal"]
    assert update.locations == [v1.ToolCallLocation(path="/a", line=None)]
    idle = v2.decode(b'{"sessionUpdate":"state_update","state":"idle","stopReason":5}', v2.SessionUpdate)
    assert isinstance(idle, v2.SessionUpdateStateUpdate) and idle.stop_reason is None
    with pytest.raises(ProtocolError, match=r"Expected `array`, got `int` - at `\$\.changes`"):
        v2.decode(b'{"type":"diff","changes":1}', v2.ToolCallContent)


def test_union_alias_as_decode_target() -> None:
    assert isinstance(
        v1.decode(b'{"type":"text","text":"x"}', v1.ContentBlock), v1.ContentBlockText
    )
    unknown = v1.decode(b'{"type":"smell"}', v1.ContentBlock)
    assert isinstance(unknown, Unknown)
    assert unknown.tag == "smell"


def test_decode_accepts_dicts_and_absent_params() -> None:
    chunk = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}
    note = v1.decode({"sessionId": "s", "update": chunk}, v1.SessionNotification)
    assert isinstance(note.update, v1.SessionUpdateAgentThoughtChunk)
    assert v1.convert(chunk, v1.SessionUpdate) == note.update
    assert v1.decode(None, v1.LogoutRequest) == v1.LogoutRequest()


# --- v1 requests and responses ------------------------------------------------------


def test_permission_option_without_kind() -> None:
    params = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "call_1", "title": "Run ls"},
        "options": [
            {"optionId": "allow", "name": "Allow"},
            {"optionId": "deny", "name": "Deny", "kind": "reject_once"},
        ],
    }
    request = v1.decode(wire(params), v1.RequestPermissionRequest)
    allow, deny = request.options
    assert allow.kind is None
    assert deny.kind == "reject_once"
    assert request.tool_call.title == "Run ls"
    response = v1.RequestPermissionResponse(
        outcome=v1.RequestPermissionOutcomeSelected(option_id="allow")
    )
    assert roundtrip(response) == {"outcome": {"outcome": "selected", "optionId": "allow"}}
    cancelled = v1.RequestPermissionResponse(outcome=v1.RequestPermissionOutcomeCancelled())
    assert roundtrip(cancelled) == {"outcome": {"outcome": "cancelled"}}


def test_initialize_roundtrip() -> None:
    request = v1.InitializeRequest(
        protocol_version=1,
        client_capabilities=v1.ClientCapabilities(
            fs=v1.FileSystemCapabilities(read_text_file=True, write_text_file=True),
            terminal=True,
        ),
        client_info=v1.Implementation(name="acp.nvim", version="0.1.0"),
        meta={"nvim": {"version": "0.11"}},
    )
    encoded = roundtrip(request)
    assert encoded["protocolVersion"] == 1
    assert encoded["clientCapabilities"]["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert encoded["clientCapabilities"]["terminal"] is True
    assert encoded["clientInfo"] == {"name": "acp.nvim", "version": "0.1.0"}
    assert encoded["_meta"] == {"nvim": {"version": "0.11"}}
    assert v1.decode(v1.encode(request), v1.InitializeRequest) == request

    result = {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "embeddedContext": True},
            "_meta": {"claude": {"x": 1}},
        },
        "authMethods": [
            {"id": "login", "name": "Log in"},
            {"type": "terminal", "id": "tui", "name": "Log in in a terminal", "args": ["-l"]},
            {"type": "_vendor_sso", "id": "sso", "name": "SSO"},
        ],
        "agentInfo": {"name": "claude-code", "version": "1.0"},
    }
    response = v1.decode(wire(result), v1.InitializeResponse)
    caps = response.agent_capabilities
    assert caps.load_session is True
    assert caps.prompt_capabilities.image is True
    assert caps.prompt_capabilities.audio is False
    assert caps.mcp_capabilities.http is False  # schema default
    assert caps.meta == {"claude": {"x": 1}}
    agent, terminal, sso = response.auth_methods
    assert isinstance(agent, v1.AuthMethodAgent)
    assert isinstance(terminal, v1.AuthMethodTerminal)
    assert terminal.args == ["-l"]
    assert isinstance(sso, Unknown)
    assert json.loads(v1.encode(response))["authMethods"] == result["authMethods"]
    assert v1.decode(b'{"protocolVersion": 1}', v1.InitializeResponse).auth_methods == []


def test_method_constants_and_table() -> None:
    assert v1.ClientMethod.SESSION_UPDATE == "session/update"
    assert v1.AgentMethod.SESSION_PROMPT == "session/prompt"
    assert v1.ProtocolMethod.CANCEL_REQUEST == "$/cancel_request"
    assert v1.METHODS["session/prompt"] == (v1.PromptRequest, v1.PromptResponse)
    assert v1.METHODS["session/update"] == (v1.SessionNotification, None)
    assert v2.AgentMethod.AUTH_LOGIN == "auth/login"
    assert v2.METHODS["session/update"] == (v2.UpdateSessionNotification, None)
    assert (v1.PROTOCOL_VERSION, v2.PROTOCOL_VERSION) == (1, 2)


# --- v2 ------------------------------------------------------------------------------


def v2_update(update: dict[str, Any]) -> Any:
    raw = wire({"sessionId": "s", "update": update})
    return v2.decode(raw, v2.UpdateSessionNotification).update


def test_v2_tool_call_update_three_state() -> None:
    omitted = v2_update({"sessionUpdate": "tool_call_update", "toolCallId": "c"})
    assert isinstance(omitted, v2.SessionUpdateToolCallUpdate)
    for name in ("title", "kind", "status", "content", "locations", "raw_input", "meta"):
        assert getattr(omitted, name) is msgspec.UNSET, name

    cleared = v2_update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "title": None,
            "content": None,
            "rawInput": None,
            "_meta": None,
        }
    )
    assert cleared.title is None
    assert cleared.content is None
    assert cleared.raw_input is None
    assert cleared.meta is None
    assert cleared.status is msgspec.UNSET

    valued = v2_update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "title": "Read",
            "status": "cancelled",
            "content": [{"type": "content", "content": {"type": "text", "text": "x"}}],
        }
    )
    assert valued.title == "Read"
    assert valued.status == "cancelled"
    assert isinstance(valued.content[0], v2.ToolCallContentContent)

    # null and omitted stay distinct on the way out too
    out = json.loads(v2.encode(cleared))
    assert out == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "title": None,
        "content": None,
        "rawInput": None,
        "_meta": None,
    }


def test_v2_message_upsert_three_state() -> None:
    def message(**extra: Any) -> Any:
        return v2_update({"sessionUpdate": "agent_message", "messageId": "m1", **extra})

    assert message().content is msgspec.UNSET
    assert message(content=None).content is None
    assert message(content=[]).content == []
    full = message(content=[{"type": "text", "text": "hi"}, {"type": "_x_sticker", "id": 1}])
    assert isinstance(full, v2.SessionUpdateAgentMessage)
    assert isinstance(full.content[0], v2.ContentBlockText)
    assert isinstance(full.content[1], Unknown)


def test_v2_plain_optional_fields_are_not_three_state() -> None:
    chunk = v2_update(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "a"},
        }
    )
    assert isinstance(chunk, v2.SessionUpdateAgentMessageChunk)
    assert chunk.meta is None
    assert chunk.content.annotations is None


def test_v2_state_update_and_unknown_tags() -> None:
    idle = v2_update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    assert isinstance(idle, v2.SessionUpdateStateUpdate)
    assert (idle.state, idle.stop_reason) == ("idle", "end_turn")
    assert v2_update({"sessionUpdate": "state_update", "state": "paused"}).state == "paused"
    future = v2_update({"sessionUpdate": "future_thing", "a": 1})
    assert isinstance(future, Unknown)
    assert future.tag == "future_thing"


def test_v2_structured_diff_with_unknown_operation() -> None:
    content = {
        "type": "diff",
        "changes": [
            {"operation": "modify", "path": "/w/a.py", "fileType": "text"},
            {"operation": "move", "oldPath": "/w/b.py", "path": "/w/c.py"},
            {"operation": "_vendor_chmod", "path": "/w/d", "mode": 755},
        ],
        "patch": {"format": "git_patch", "text": "diff --git a/w/a.py b/w/a.py\n"},
    }
    chunk = v2_update(
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c", "content": content}
    )
    assert isinstance(chunk, v2.SessionUpdateToolCallContentChunk)
    diff = chunk.content
    assert isinstance(diff, v2.ToolCallContentDiff)
    modify, move, chmod = diff.changes
    assert isinstance(modify, v2.DiffChangeModify)
    assert (modify.path, modify.file_type) == ("/w/a.py", "text")
    assert isinstance(move, v2.DiffChangeMove)
    assert move.old_path == "/w/b.py"
    assert isinstance(chmod, Unknown)
    assert diff.patch is not None
    assert diff.patch.format == "git_patch"
    assert json.loads(v2.encode(chunk))["content"] == content


def test_v2_permission_request_subjects() -> None:
    params = {
        "sessionId": "s",
        "title": "Run tests?",
        "subject": {"type": "command", "command": "pytest", "cwd": "/w"},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
    }
    request = v2.decode(wire(params), v2.RequestPermissionRequest)
    assert isinstance(request.subject, v2.RequestPermissionSubjectCommand)
    assert request.subject.command == "pytest"
    absent = v2.decode(wire({**params, "subject": None}), v2.RequestPermissionRequest)
    assert absent.subject is None
    unknown = v2.decode(wire({**params, "subject": {"type": "_net"}}), v2.RequestPermissionRequest)
    assert isinstance(unknown.subject, Unknown)


def test_v2_single_variant_unions() -> None:
    items = {"type": "items", "planId": "p", "entries": []}
    plan = v2_update({"sessionUpdate": "plan_update", "plan": items})
    assert isinstance(plan.plan, v2.PlanUpdateContentItems)
    other = v2_update({"sessionUpdate": "plan_update", "plan": {"type": "outline", "planId": "p"}})
    assert isinstance(other.plan, Unknown)
    markdown = {"type": "markdown", "planId": "p", "content": "1. x"}  # adopted (unstable)
    plan = v2_update({"sessionUpdate": "plan_update", "plan": markdown})
    assert isinstance(plan.plan, v2.PlanUpdateContentMarkdown) and plan.plan.content == "1. x"
    resume = v2.ResumeSessionRequest(session_id="s", cwd="/w", replay_from=v2.ReplayFromStart())
    assert json.loads(v2.encode(resume)) == {
        "sessionId": "s",
        "cwd": "/w",
        "replayFrom": {"type": "start"},
    }


# --- generic properties of the generated modules ---------------------------------------


@pytest.mark.parametrize("module", [v1, v2], ids=["v1", "v2"])
def test_every_type_resolves(module: Any) -> None:
    """Every struct's annotations resolve for msgspec and every union decoder builds,
    its open twins' too."""
    from acp_nvim.protocol.unknown import UnionDecoder

    for name, obj in vars(module).items():
        if isinstance(obj, type) and issubclass(obj, msgspec.Struct):
            msgspec.json.Decoder(obj)
        elif isinstance(obj, UnionDecoder):
            obj.prepare(open_twins=True)
            assert name == f"_{obj.name}Decoder"


def _holds_raw(info: msgspec.inspect.Type) -> bool:
    """Whether msgspec leaves a value of this type raw (at any depth but in structs)."""
    if isinstance(info, msgspec.inspect.RawType):
        return True
    if isinstance(info, msgspec.inspect.UnionType):
        return any(_holds_raw(t) for t in info.types)
    if isinstance(info, msgspec.inspect.ListType):
        return _holds_raw(info.item_type)
    if isinstance(info, msgspec.inspect.DictType):
        return _holds_raw(info.value_type)
    return False


@pytest.mark.parametrize("module", [v1, v2], ids=["v1", "v2"])
def test_only_structs_left_raw_by_the_closed_pass_run_python_after_it(module: Any) -> None:
    """A __post_init__ per struct cost more than the whole closed pass of a chunk; a
    struct has one where msgspec leaves a field raw there, and only there."""
    structs = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, msgspec.Struct)
        and obj.__module__ == module.__name__
    ]
    assert structs
    for cls in structs:
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        raw = any(_holds_raw(f.type) for f in info.fields)
        assert hasattr(cls, "__post_init__") == raw, cls.__name__


def test_known_variants_decode_in_one_closed_pass() -> None:
    """The structs themselves hold closed unions: a bare msgspec Decoder takes known
    variants in one pass and rejects unknown ones; `decode` then falls back to the
    open twins."""
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    known = wire({"sessionId": "s", "update": chunk})
    note = msgspec.json.decode(known, type=v1.SessionNotification)
    assert type(note.update) is v1.SessionUpdateAgentMessageChunk
    assert type(note.update.content) is v1.ContentBlockText
    assert v1.decode(known, v1.SessionNotification) == note
    unknown = wire({"sessionId": "s", "update": {"sessionUpdate": "nope"}})
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(unknown, type=v1.SessionNotification)
    assert isinstance(v1.decode(unknown, v1.SessionNotification).update, Unknown)


def test_open_twins_pass_for_their_structs() -> None:
    """A known variant holding an unknown one decodes as the open twin of its struct:
    same name, an instance of it, its fields and its wire form."""
    update = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "smell"},
        "messageId": "m1",
    }
    chunk = v1_update(update).update
    assert isinstance(chunk, v1.SessionUpdateAgentMessageChunk)
    assert type(chunk) is not v1.SessionUpdateAgentMessageChunk
    assert struct_type(chunk) is v1.SessionUpdateAgentMessageChunk
    assert type(chunk).__name__ == "SessionUpdateAgentMessageChunk"
    assert chunk.message_id == "m1" and isinstance(chunk.content, Unknown)
    assert roundtrip(chunk) == update
    text = {**update, "content": {"type": "text", "text": "x"}}
    assert struct_type(v1_update(text).update) is v1.SessionUpdateAgentMessageChunk


def printed_by(script: str) -> list[str]:
    """The words ``script`` prints, run by a Python of its own: the twins a process
    has built are its own."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    ).stdout.split()


TWINS_BUILT_WHEN_NEEDED = """
import sys
from acp_nvim.protocol import schema_v1 as v1
twins = "acp_nvim.protocol.schema_v1._open"
v1.decode(b'{"protocolVersion": 1, "agentCapabilities": {}}', v1.InitializeResponse)
text = b'{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}'
v1.decode(b'{"sessionId": "s", "update": ' + text + b'}', v1.SessionNotification)
v1.decode(text, v1.SessionUpdate)
print(twins in sys.modules)
smell = b'{"sessionUpdate": "agent_message_chunk", "content": {"type": "smell"}}'
note = v1.decode(b'{"sessionId": "s", "update": ' + smell + b'}', v1.SessionNotification)
print(twins in sys.modules, type(note.update.content).__name__)
"""


def test_open_twins_are_built_only_for_a_value_that_needs_them() -> None:
    """Known variants decode without the module's twins, which take some 20 ms to
    build: a session's start waits for none (issue 26). The first value that needs
    them builds them."""
    assert printed_by(TWINS_BUILT_WHEN_NEEDED) == ["False", "True", "Unknown"]


TWINS_OF_TWO_THREADS = """
import sys, threading, time
from acp_nvim.protocol import schema_v1 as v1, unknown
building, go_on = threading.Event(), threading.Event()
build = unknown._build_module_twins
def held_build(name):
    building.set()
    go_on.wait()
    build(name)
unknown._build_module_twins = held_build
smell = b'{"sessionUpdate": "agent_message_chunk", "content": {"type": "smell"}}'
note = b'{"sessionId": "s", "update": ' + smell + b'}'
seen = {}
def decode(who):
    seen[who] = type(v1.decode(note, v1.SessionNotification).update.content).__name__
first = threading.Thread(target=decode, args=("first",))
first.start()
building.wait()
second = threading.Thread(target=decode, args=("second",))
second.start()
while second.is_alive():  # until it waits for the first thread's build (or is done)
    frame = sys._current_frames().get(second.ident)
    if frame is not None and frame.f_code.co_name == "_build_twins":
        break
    time.sleep(0.001)
go_on.set()
first.join()
second.join()
print(seen.get("first"), seen.get("second"))
"""


def test_a_thread_needing_twins_another_is_building_waits_for_them() -> None:
    # A big setting is converted in a worker thread while the loop's thread decodes:
    # either may be the first to need a module's twins.
    assert printed_by(TWINS_OF_TWO_THREADS) == ["Unknown", "Unknown"]


# --- the generator ---------------------------------------------------------------------


def run_generator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GEN), *args], capture_output=True, text=True, timeout=60
    )


def test_generated_modules_are_up_to_date() -> None:
    done = run_generator("--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert v1.__file__ is not None
    first = Path(v1.__file__).read_text().splitlines()[0]
    assert first == (
        "# Generated by scripts/gen_types.py from spec/acp/schema/v1/schema.json — do not edit."
    )


def test_check_reports_drift(tmp_path: Path) -> None:
    schemas = tmp_path / "schema"
    shutil.copytree(SCHEMA_DIR, schemas)
    assert run_generator("--check", "--schema-dir", str(schemas)).returncode == 0
    path = schemas / "v2/schema.json"
    schema = json.loads(path.read_text())
    schema["$defs"]["Cost"]["description"] = "Money."
    path.write_text(json.dumps(schema))
    done = run_generator("--check", "--schema-dir", str(schemas))
    assert done.returncode == 1
    assert "schema_v2.py" in done.stderr
    assert "schema_v1.py" not in done.stderr


def test_check_says_a_missing_source_is_missing(tmp_path: Path) -> None:
    schemas = tmp_path / "schema"
    shutil.copytree(SCHEMA_DIR, schemas)
    (schemas / "v2/meta.unstable.json").unlink()
    for schema_dir in (schemas, tmp_path / "nothing"):
        done = run_generator("--check", "--schema-dir", str(schema_dir))
        assert done.returncode == 1
        assert "source missing" in done.stderr and "meta.unstable.json" in done.stderr
        assert "out of date" not in done.stderr


def test_the_repository_carries_its_sources_and_their_licence() -> None:
    assert SCHEMA_DIR.is_relative_to(REPO)
    assert "Apache License" in (SCHEMA_DIR.parent / "LICENSE").read_text()


@pytest.mark.parametrize("schema", [v1, v2])
def test_only_the_adopted_unstable_methods_are_generated(schema: Any) -> None:
    """session/fork and its capability come from schema.unstable.json (decision fork-);
    nothing else of it (nes, providers, document/*) does."""
    caps = schema.decode(msgspec.Raw(wire({"fork": {}})), schema.SessionCapabilities)
    assert isinstance(caps.fork, schema.SessionForkCapabilities)
    assert schema.decode(msgspec.Raw(wire({})), schema.SessionCapabilities).fork is None
    assert schema.METHODS["session/fork"] == (schema.ForkSessionRequest, schema.ForkSessionResponse)
    assert schema.AgentMethod.SESSION_FORK == "session/fork"
    request = schema.ForkSessionRequest(session_id="s", cwd="/p")
    assert json.loads(schema.encode(request)) == {"sessionId": "s", "cwd": "/p"}
    assert not hasattr(schema, "StartNesRequest") and not hasattr(schema, "ListProvidersRequest")
    assert "nes/start" not in schema.METHODS


@pytest.mark.parametrize("schema", [v1, v2])
def test_mcp_over_acp_is_adopted_in_both_versions(schema: Any) -> None:
    """mcp/connect, mcp/message, mcp/disconnect, the ``acp`` MCP server and the
    capability that advertises it come from schema.unstable.json (decision 0024)."""
    assert schema.METHODS["mcp/connect"] == (schema.ConnectMcpRequest, schema.ConnectMcpResponse)
    assert schema.METHODS["mcp/message"] == (schema.MessageMcpRequest, schema.MessageMcpResponse)
    assert schema.METHODS["mcp/disconnect"][0] is schema.DisconnectMcpRequest
    assert schema.ClientMethod.MCP_CONNECT == "mcp/connect"
    server = schema.McpServerAcp(name="nvim", server_id="x")
    assert json.loads(schema.encode(server)) == {"type": "acp", "name": "nvim", "serverId": "x"}
    request = schema.decode(msgspec.Raw(wire({"serverId": "x"})), schema.ConnectMcpRequest)
    assert request.server_id == "x"
    message = schema.decode(
        msgspec.Raw(wire({"connectionId": "c", "method": "ping"})), schema.MessageMcpNotification
    )
    assert (message.connection_id, message.method, message.params) == ("c", "ping", None)
    advertised = {"acp": True} if schema is v1 else {"acp": {}}
    caps = schema.decode(msgspec.Raw(wire(advertised)), schema.McpCapabilities)
    if schema is v1:
        assert caps.acp is True
    else:
        assert isinstance(caps.acp, schema.McpAcpCapabilities)
    assert not schema.decode(msgspec.Raw(wire({})), schema.McpCapabilities).acp


def test_v1_mcp_capabilities_default_when_not_advertised() -> None:
    """The stable default of ``mcpCapabilities`` omits the unstable ``acp``: still a default."""
    caps = v1.decode(msgspec.Raw(wire({})), v1.AgentCapabilities)
    assert caps.mcp_capabilities == v1.McpCapabilities()
