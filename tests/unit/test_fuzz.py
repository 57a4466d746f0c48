"""Fuzzing: generated agent output through the real App, then a clean turn that must work.

Messages are generated from the pinned v1 and v2 JSON schemas (``session/update``
notifications, the agent's requests, answers to ours: ``initialize`` with its login
methods, ``session/new``, ``session/fork``, ``session/prompt``), then mutated:
unknown tags, wrong types, odd strings and NUL bytes, integers at and past every
bound the schema's formats set, huge and deeply nested values (up to 100,000
levels), raw lines that are no JSON at all; valid updates are also inflated to
10,000 items. Paths are drawn from a set of odd ones (relative, a NUL byte, a
FIFO, ``/dev/stdin``, directories) and kept inside the case's own directory
wherever the client could write.

Each case opens a chat on an in-memory agent (tests/unit/memory_agent.py), sends
the generated lines during the first turn, and then needs a second turn to end
normally. It fails on an exception out of the app's task group, on any bug a
barrier contained (logged with a traceback), on a hang (the case's timeout), on
a blocked event loop (the watchdog) and on anything shown that msgpack could not
carry to Neovim.

The editor MCP server is fuzzed on its own socket: odd hellos (no token, garbage,
nesting, a lone surrogate), then requests of every MCP method with odd params,
every editor tool with arguments generated from its input schema and mutated,
garbage and nesting. Each request must be answered (a result, an ``isError``
result or a protocol error), nothing logged with a traceback, and the socket must
serve a new connection afterwards.

Budgets: the ``ci`` profile (``make test``) runs a small derandomized set; ``make
fuzz`` runs the ``fuzz`` profile (``ACP_FUZZ_PROFILE=fuzz``), over 20,000 cases.
A failing example becomes a test in test_reliability.py.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgpack
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from pynvim.compat import unicode_errors_default

from acp_nvim.client.config import EDITOR_TOOLS, FileAccessOptions
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.mcp import EditorSocket, ToolSession
from acp_nvim.client.services.access import FileAccess
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.client.tasks import Tasks
from acp_nvim.protocol import ConnectionClosed, LineReader
from acp_nvim.protocol.framing import lines_of as lines_of_block
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import assert_no_tracebacks, wait_for
from tests.unit.memory_agent import MemoryAgent, app_with, transcript_text, update, watchdog

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "spec/acp/schema"

# Examples per test: make test runs a few seconds of them, make fuzz over 20,000 in all.
# caplog is function-scoped on purpose: each example clears it (run_case).
SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
settings.register_profile(
    "ci",
    max_examples=15,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # a failure is shown as found: make fuzz shrinks
    deadline=None,
    print_blob=True,
    suppress_health_check=SUPPRESSED,
)
settings.register_profile(
    "fuzz",
    max_examples=2600,
    deadline=None,
    print_blob=True,
    suppress_health_check=SUPPRESSED,
)
PROFILE = os.environ.get("ACP_FUZZ_PROFILE", "ci")
settings.load_profile(PROFILE)
# The properties added for issues 27 and 29 run fewer examples under make test.
fewer = settings(max_examples=5) if PROFILE == "ci" else settings()

CWD = "\x01CWD\x01"  # stands for the case's directory until the case runs
CASE_TIMEOUT = 10.0

# -- values from the schema -------------------------------------------------------------


class SchemaValues:
    """Hypothesis strategies for the JSON values a schema's ``$defs`` describe.

    Covers what the ACP schemas use: ``$ref``, ``allOf``, ``anyOf``/``oneOf``,
    ``const``, ``enum``, ``type`` (one or several), ``properties``/``required``.
    Recursion is cut at ``depth`` (optional properties left out, lists empty).
    """

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self._refs: dict[tuple[str, int], st.SearchStrategy[Any]] = {}

    def ref(self, name: str, depth: int = 4) -> st.SearchStrategy[Any]:
        key = (name, depth)
        if key not in self._refs:
            self._refs[key] = st.deferred(lambda: self.of(self.defs[name], depth - 1))
        return self._refs[key]

    def of(self, schema: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
        if "$ref" in schema:
            return self.ref(schema["$ref"].rsplit("/", 1)[-1], depth)
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        members = schema.get("anyOf") or schema.get("oneOf")
        if members:
            return st.one_of([self.of(m, depth) for m in members])
        parts = [self.of(part, depth) for part in schema.get("allOf", [])]
        own = {k: v for k, v in schema.items() if k not in ("allOf", "description", "title")}
        if "properties" in own or own.get("type") or not parts:
            parts.insert(0, self.typed(own, depth))
        if len(parts) == 1:
            return parts[0]
        return st.tuples(*parts).map(_merged)

    def typed(self, schema: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
        kinds = schema.get("type") or ("object" if "properties" in schema else None)
        if kinds is None:
            return json_values
        if isinstance(kinds, list):
            return st.one_of([self.typed({**schema, "type": k}, depth) for k in kinds])
        if kinds == "object":
            props = schema.get("properties", {})
            if not props:
                return st.dictionaries(st.text(max_size=5), json_values, max_size=2)
            required = set(schema.get("required", []))
            must = {k: self.of(v, depth) for k, v in props.items() if k in required}
            may = {} if depth <= 0 else {k: self.of(v, depth) for k, v in props.items() if k not in required}
            return st.fixed_dictionaries(must, optional=may)
        if kinds == "array":
            items = self.of(schema.get("items", {}), depth)
            return st.lists(items, max_size=0 if depth <= 0 else 3)
        return SCALARS[kinds]


def _merged(parts: tuple[Any, ...]) -> Any:
    dicts = [p for p in parts if isinstance(p, dict)]
    if len(dicts) != len(parts):
        return parts[0]
    merged: dict[str, Any] = {}
    for part in reversed(dicts):  # the first part (the member's own tag) wins
        merged.update(part)
    return merged


odd_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "a\x00b", "#m0", "m0", "turn1", "_fuzz", "é", "\u202e", "\\"]),
)
# Each bound of the schema's integer formats (int32, uint32, int64, uint64), on
# both sides, and far past them.
INTEGER_EDGES = sorted(
    {edge + step for bits in (31, 32, 63, 64) for edge in (2**bits, -(2**bits)) for step in (-1, 0)}
    | {2**70, -(2**70)}
)
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "string": odd_text,
    "integer": st.one_of(
        st.integers(-5, 5), st.integers(-(2**70), 2**70), st.sampled_from(INTEGER_EDGES)
    ),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "null": st.none(),
}
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | odd_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3),
    max_leaves=6,
)


# Nesting as deep as this is kept out of Python (its own json would recurse): a
# marker string in the value, made that many nested arrays when the line is encoded.
DEPTHS = [300, 999, 1_000, 5_000, 100_000]
_NESTED = re.compile(r'"\\u0002nest(\d+)\\u0002"')


def _nested(depth: int) -> str:
    return f"\x02nest{depth}\x02"


def _expand(text: str) -> str:
    """``text`` (JSON) with each nesting marker made its nested arrays."""
    return _NESTED.sub(lambda m: "[" * int(m[1]) + "]" * int(m[1]), text)


# What a mutation puts somewhere in a message.
odd_values = st.one_of(
    json_values,
    st.sampled_from(["_fuzz_unknown_tag", "x" * 100_000, {"type": "_future"}]),
    st.sampled_from(DEPTHS).map(_nested),
)

# Paths as agents send them: inside the case's directory, odd, special.
SAFE_PATHS = st.sampled_from(
    [
        f"{CWD}/a.txt",
        f"{CWD}/new.txt",
        f"{CWD}/dir",
        f"{CWD}/dir/b.txt",
        f"{CWD}/pipe",
        f"{CWD}/a\x00b",
        f"{CWD}/dir/../a.txt",
        "a.txt",
        "",
        f"{CWD}",
    ]
)
READ_ONLY_PATHS = st.sampled_from(["/dev/stdin", "/dev/zero", "/nonexistent/x", "/"])
PATH_KEYS = ("path", "oldPath", "cwd")


@st.composite
def mutated(
    draw: st.DrawFn,
    base: st.SearchStrategy[Any],
    writes: bool = False,
    odd: st.SearchStrategy[Any] | None = None,
) -> Any:
    """A value of ``base`` with its paths replaced and, often, a few mutations."""
    # Copies: drawn values may be shared (st.just, sampled_from) and are changed here.
    value = copy.deepcopy(draw(base))
    paths = SAFE_PATHS if writes else st.one_of(SAFE_PATHS, READ_ONLY_PATHS)
    value = _replace_paths(value, lambda: draw(paths))
    for _ in range(draw(st.integers(0, 3))):
        spots = list(_spots(value))
        if not spots:
            break
        parent, key = draw(st.sampled_from(spots))
        parent[key] = copy.deepcopy(draw(odd_values if odd is None else odd))
    return value


def _replace_paths(value: Any, path: Any) -> Any:
    if isinstance(value, dict):
        return {k: path() if k in PATH_KEYS else _replace_paths(v, path) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_paths(v, path) for v in value]
    return value


def _spots(value: Any) -> Any:
    """(container, key) of every value inside ``value`` (paths excluded: see writes)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key not in PATH_KEYS:
                yield value, key
                yield from _spots(inner)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield value, index
            yield from _spots(inner)


@cache
def schema(version: int) -> SchemaValues:
    """The values of a version's schema; the unstable one's too (session/fork)."""
    defs: dict[str, Any] = {}
    for name in ("schema.unstable.json", "schema.json"):  # the stable defs win
        defs.update(json.loads((SCHEMA_DIR / f"v{version}" / name).read_text())["$defs"])
    return SchemaValues(defs)


def with_session(params: Any, session: str) -> Any:
    if isinstance(params, dict) and session:
        return {**params, "sessionId": session}
    return params


session_ids = st.sampled_from(["s1", "s1", "s1", "s1", "other"])
request_ids = st.one_of(st.integers(100, 10**6), st.text(max_size=4))


@st.composite
def notification(draw: st.DrawFn, version: int) -> Any:
    name = "SessionNotification" if version == 1 else "UpdateSessionNotification"
    params = draw(mutated(schema(version).ref(name)))
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": with_session(params, draw(session_ids)),
    }


V1_REQUESTS = {
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
    "session/request_permission": "RequestPermissionRequest",
}
V2_REQUESTS = {"session/request_permission": "RequestPermissionRequest"}


@st.composite
def agent_request(draw: st.DrawFn, version: int) -> Any:
    requests = V1_REQUESTS if version == 1 else V2_REQUESTS
    method = draw(st.sampled_from(sorted(requests)))
    writes = method == "fs/write_text_file"
    params = draw(mutated(schema(version).ref(requests[method]), writes=writes))
    return {
        "jsonrpc": "2.0",
        "id": draw(request_ids),
        "method": method,
        "params": with_session(params, draw(session_ids)),
    }


@st.composite
def answer(draw: st.DrawFn, version: int, msg_id: int, result: str) -> Any:
    """An answer to our request ``msg_id``, of any shape."""
    shape = draw(st.sampled_from(["result", "error", "odd error", "both", "bare"]))
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id}
    if shape in ("result", "both"):
        message["result"] = draw(mutated(schema(version).ref(result)))
    if shape in ("error", "both"):
        message["error"] = {"code": draw(st.integers()), "message": draw(odd_text)}
    if shape == "odd error":
        message["error"] = draw(odd_values)
    return message


garbage = st.one_of(
    st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b),
    st.sampled_from([b"", b"[]", b"{}", b"null", b'{"jsonrpc":"2.0"}', b"1e400", b"[1,2", b"\xff\xfe"]),
    st.sampled_from(DEPTHS).map(lambda depth: b"[" * depth),
    st.sampled_from(DEPTHS).map(lambda depth: b'{"a":' * depth),
)


def lines_of(version: int, *, prompt_answer: bool = True) -> st.SearchStrategy[list[Any]]:
    one = st.one_of(notification(version), agent_request(version), garbage)
    if prompt_answer:
        one = st.one_of(one, answer(version, 2, "PromptResponse"))
    return st.lists(one, min_size=1, max_size=6)


# -- running a case ---------------------------------------------------------------------


def encoded(line: Any, cwd: str) -> bytes:
    if isinstance(line, bytes):
        return line
    text = json.dumps(line).replace(json.dumps(CWD)[1:-1], cwd)
    return _expand(text).encode()


async def run(agent: MemoryAgent, cwd: str, started: bool) -> None:
    async with watchdog(), app_with(agent, cwd) as (app, editor):
        chat = app.chats[1]
        if not started:
            assert chat.state in ("ready", "error"), chat.state
            if chat.state == "error":
                assert editor.events[-1][0] == "AcpError"
                return
        await two_turns(app, agent, editor)


async def two_turns(app: Any, agent: MemoryAgent, editor: RecordingEditor) -> None:
    """The scripted first turn of chat 1, then a second that must end normally; all
    the chat showed must be what msgpack carries to Neovim."""
    chat = app.chats[1]
    with anyio.fail_after(CASE_TIMEOUT):
        await app.send(1, "go")
        await agent.wait_synced(1)
        await wait_for(lambda: chat.state == "ready")  # a v2 agent's own work ends with its idle
        await app.send(1, "again")
    ends = [data["stop_reason"] for event, data in editor.events if event == "AcpTurnEnd"]
    assert ends[-1] == "end_turn"
    assert f"reply {agent.prompts}" in transcript_text(editor)
    packable(editor)


def packable(editor: RecordingEditor) -> None:
    """What the chat sent to the editor, packed as pynvim packs it for Neovim."""
    packer = msgpack.Packer(unicode_errors=unicode_errors_default)
    for sent in (editor.ops, editor.events, editor.notices, editor.reviews, editor.baselines):
        packer.pack(sent)


def case_directory() -> tempfile.TemporaryDirectory[str]:
    directory = tempfile.TemporaryDirectory(prefix="acp-fuzz-")
    root = Path(directory.name)
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "dir").mkdir()
    (root / "dir" / "b.txt").write_text("b\n")
    os.mkfifo(root / "pipe")
    return directory


def run_case(caplog: pytest.LogCaptureFixture, agent: MemoryAgent, started: bool = True) -> None:
    caplog.clear()
    with case_directory() as cwd:
        agent.turns = [[encoded(line, cwd) for line in turn] for turn in agent.turns]
        agent.overrides = {
            k: None if v is None else [encoded(line, cwd) for line in v]
            for k, v in agent.overrides.items()
        }
        anyio.run(run, agent, cwd, started)
    assert_no_tracebacks(caplog)


@pytest.fixture
def caplog_errors(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.ERROR, logger="acp_nvim")
    return caplog


# -- the properties ---------------------------------------------------------------------


@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_agent_output_mid_turn(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """Updates, requests, answers to the prompt and garbage, in the first turn."""
    lines = data.draw(lines_of(version), label="lines")
    run_case(caplog_errors, MemoryAgent(version, [lines]))


@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_valid_updates_render(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """Unmutated schema updates of session s1 (many of them: they render)."""
    name = "SessionNotification" if version == 1 else "UpdateSessionNotification"
    params = st.builds(lambda p: with_session(p, "s1"), schema(version).ref(name))
    notes = st.lists(params.map(lambda p: {"jsonrpc": "2.0", "method": "session/update", "params": p}), min_size=1, max_size=8)
    run_case(caplog_errors, MemoryAgent(version, [data.draw(notes, label="updates")]))


@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_odd_starts(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """Answers of any shape to initialize or session/new: the chat is ready or clearly
    ended, never stuck, and the agent is never leaked."""
    method = data.draw(st.sampled_from(["initialize", "session/new"]), label="method")
    if method == "initialize":
        result = "InitializeResponse"
        lines = [data.draw(answer(version, 0, result), label="answer")]
        agent = MemoryAgent(version, initialize=lines)
    else:
        lines = [data.draw(answer(version, 1, "NewSessionResponse"), label="answer")]
        agent = MemoryAgent(version, new_session=lines)
    run_case(caplog_errors, agent, started=False)


# Odd values that leave the line itself decodable (no nesting past the limit).
shallow_odd = st.one_of(json_values, st.sampled_from(["_fuzz_unknown_tag", "x" * 1000, {"type": "_future"}]))


@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_turn_ended_only_by_the_agent(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """The first turn ends only through the generated lines plus one last answer of
    any shape (v2: and an idle): whatever it is, the turn ends and the next works."""
    lines = list(data.draw(lines_of(version, prompt_answer=False), label="lines"))
    lines.append(data.draw(answer(version, 2, "PromptResponse"), label="answer"))
    if version == 2:  # the idle itself intact, for the turn to end at all; odd extras
        # (shallow: a line nested past the limit is lost whole, an idle with it)
        extras = {"stopReason": shallow_odd, "_meta": shallow_odd, "messageId": shallow_odd}
        idle = st.fixed_dictionaries(
            {"sessionUpdate": st.just("state_update"), "state": st.just("idle")}, optional=extras
        )
        lines.append(update(data.draw(idle, label="idle")))
    run_case(caplog_errors, MemoryAgent(version, [lines], end_turns=False))


# -- login methods, forks, huge updates -------------------------------------------------

# codex's env_var login method, outside the schema: every field odd or missing.
env_var_methods = st.fixed_dictionaries(
    {"type": st.just("env_var")},
    optional={
        key: shallow_odd
        for key in ("id", "methodId", "name", "description", "vars")
    }
    | {"vars": st.lists(st.one_of(odd_text, st.fixed_dictionaries({"name": shallow_odd}), shallow_odd), max_size=3)},
)


def initialize_answer(version: int, fork: bool = False, **fields: Any) -> dict[str, Any]:
    info = {"name": "memory", "version": "0"}
    if version == 2:
        session = {"session": {"fork": {}}} if fork else {}
        result: dict[str, Any] = {"protocolVersion": 2, "info": info, "capabilities": session}
    else:
        result = {"protocolVersion": 1, "agentInfo": info}
        if fork:
            result["agentCapabilities"] = {"sessionCapabilities": {"fork": {}}}
    return {"jsonrpc": "2.0", "id": 0, "result": {**result, **fields}}


@fewer
@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_odd_login_methods(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """Login methods of any shape in a sound ``initialize`` answer: the chat starts
    and answers (issue 29.1: an env_var method with ``vars`` of 5 never started)."""
    method = st.one_of(
        mutated(schema(version).ref("AuthMethod"), odd=shallow_odd), env_var_methods, shallow_odd
    )
    methods = data.draw(st.lists(method, max_size=4), label="authMethods")
    agent = MemoryAgent(version, initialize=[initialize_answer(version, authMethods=methods)])
    run_case(caplog_errors, agent)


@st.composite
def fork_answer(draw: st.DrawFn, version: int) -> Any:
    """An answer of any shape to session/fork (request 2), often with the parent's id."""
    message = draw(answer(version, 2, "ForkSessionResponse"))
    if isinstance(message.get("result"), dict) and draw(st.booleans()):
        message["result"]["sessionId"] = draw(st.sampled_from(["s1", "s2"]))
    return message


async def run_fork(agent: MemoryAgent, cwd: str) -> None:
    async with watchdog(), app_with(agent, cwd) as (app, editor):
        with anyio.fail_after(CASE_TIMEOUT):
            await app.open(2, None, cwd, fork=1)
        fork = app.chats[2]
        assert fork.state in ("ready", "error"), fork.state
        assert fork.state == "error" or fork.session.session_id != "s1"
        await two_turns(app, agent, editor)  # the parent's, in the parent


@fewer
@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_fork_answers(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """Answers of any shape to ``session/fork``: the fork is ready or clearly failed,
    and the parent's turns stay its own (issue 29.2: its own id taken for the fork
    sent them to the fork, v1, or left the parent running forever, v2)."""
    line = data.draw(fork_answer(version), label="answer")
    agent = MemoryAgent(version, initialize=[initialize_answer(version, fork=True)], fork=[line])
    caplog_errors.clear()
    with case_directory() as cwd:
        agent.overrides["session/fork"] = [encoded(line, cwd)]
        anyio.run(run_fork, agent, cwd)
    assert_no_tracebacks(caplog_errors)


# Lists made this long (texts 10 times longer) under make test; make fuzz goes to
# 10,000 items and texts 100 times longer, lines of up to 20 MB.
HUGE = (100, 1_000) if PROFILE == "ci" else (1_000, 10_000)
LONGER = 10 if PROFILE == "ci" else 100
TEXT_KEYS = ("text", "description", "title", "name", "content", "message")


def inflated(value: Any, count: int, inside: bool = False) -> Any:
    """``value`` with each outermost list repeated to ``count`` items and its texts
    ``LONGER`` times longer: as valid as before, only bigger."""
    if isinstance(value, dict):
        return {
            k: v * LONGER if k in TEXT_KEYS and isinstance(v, str) else inflated(v, count, inside)
            for k, v in value.items()
        }
    if isinstance(value, list):
        items = [inflated(v, count, True) for v in value]
        return items if inside or not items else (items * count)[:count]
    return value


@fewer
@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_huge_valid_updates(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """Schema-valid updates, their lists long and their texts longer (issue 29.7: a
    10 MB line held the worker loop for half a second)."""
    name = "SessionNotification" if version == 1 else "UpdateSessionNotification"
    params = data.draw(schema(version).ref(name), label="update")
    count = data.draw(st.sampled_from(HUGE), label="count")
    line = {"jsonrpc": "2.0", "method": "session/update", "params": with_session(inflated(params, count), "s1")}
    assume(len(json.dumps(line)) < 20_000_000)
    run_case(caplog_errors, MemoryAgent(version, [[line]]))


# -- the editor MCP server --------------------------------------------------------------

TOKEN = "\x01TOKEN\x01"  # stands for the session's token until the case runs
MCP_VERSIONS = ["2024-11-05", "2025-11-25", "2026-07-28", "1999-01-01", ""]
MCP_METHODS = [
    *["tools/call"] * 3, "tools/list", "resources/list", "resources/read",
    "resources/templates/list", "initialize", "ping", "server/discover", "prompts/list",
]  # fmt: skip
cursors = st.one_of(
    odd_text, st.sampled_from(["\u00b2", "\u0663", "1" * 5000, "0", "-1", "99999999999", "5"])
)
ODD_URIS = [
    "file://[::1/", "file:///a%00b", "file:///%ff", f"file://{CWD}/a.txt", "file:relative",
    "file://host/x", "http://x/y", "file:///dev/stdin", f"file://{CWD}/pipe",
]  # fmt: skip
uris = st.one_of(odd_text, st.sampled_from(ODD_URIS))


@cache
def tool_schemas() -> dict[str, dict[str, Any]]:
    from acp_nvim.client.mcp import _tools

    return {name: _tools.describe(name, "2025-11-25")["inputSchema"] for name in EDITOR_TOOLS}


@st.composite
def tool_call(draw: st.DrawFn) -> dict[str, Any]:
    """``tools/call`` params: a tool and arguments from its input schema, mutated."""
    from acp_nvim.client.mcp import _tools

    name = draw(st.sampled_from(EDITOR_TOOLS))
    model = SchemaValues({}).of(tool_schemas()[name], depth=2)
    writes = not _tools.TOOLS[name].read_only
    arguments = draw(mutated(model, writes=writes))
    return {"name": name, "arguments": arguments}


@st.composite
def mcp_request(draw: st.DrawFn, msg_id: int) -> dict[str, Any]:
    method = draw(st.sampled_from(MCP_METHODS))
    params: Any = {
        "tools/call": tool_call(),
        "tools/list": st.fixed_dictionaries({}, optional={"cursor": cursors}),
        "resources/list": st.fixed_dictionaries({}, optional={"cursor": cursors}),
        "resources/read": st.fixed_dictionaries({"uri": uris}),
        "initialize": st.fixed_dictionaries({"protocolVersion": st.sampled_from(MCP_VERSIONS) | odd_text}),
    }.get(method, st.just({}))
    params = draw(mutated(params, writes=True))
    if isinstance(params, dict) and draw(st.booleans()):
        version = draw(st.sampled_from(MCP_VERSIONS))
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": version}
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


hellos = st.one_of(
    st.just({"token": TOKEN}),
    st.just({"token": TOKEN}),
    st.fixed_dictionaries({"token": st.one_of(odd_text, shallow_odd)}),
    shallow_odd,
    garbage,
    st.sampled_from([b"[" * 1020, b"\xff\xfe", b'{"token": "\\ud800"}', b"x" * 5000]),
)


@asynccontextmanager
async def mcp_host(cwd: str) -> AsyncIterator[tuple[EditorSocket, str]]:
    """The editor MCP server of one chat on its socket, as the App makes it (files
    outside ``cwd`` denied); the socket and the session's token."""
    async with anyio.create_task_group() as group:
        tasks = Tasks(group)
        editor = RecordingEditor()
        chat = Chat(1, "fuzz", editor, Workspace(cwd))
        chat.session.session_id = "s1"
        permissions = Permissions("allow_all")
        review = SessionChanges(editor, 1, cwd, tasks.reporting_to(chat.show_error))
        review.access = FileAccess(chat, permissions, FileAccessOptions(outside="deny"))
        await review.begin_turn()
        terminals = Terminals({"s1": chat})
        terminals.start(tasks)
        socket = EditorSocket(editor, tasks, lambda: ProtocolLog(1000))
        session = ToolSession(
            chat, {1: review}, terminals, permissions, list(EDITOR_TOOLS), lambda: 0.05
        )
        await socket.start()
        group.start_soon(editor.finish_commands, terminals, b"out\r\n")
        try:
            yield socket, socket.add(session)
        finally:
            await socket.aclose()
            review.close()
            group.cancel_scope.cancel()


async def exchange(path: str, data: bytes, answers: set[Any], accepted: bool = True) -> None:
    """Send ``data`` on a new connection; read the hello's answer, then until each id
    in ``answers`` was answered. A refused hello may find the connection gone."""
    async with await anyio.connect_unix(path) as stream:
        reader = LineReader(stream)
        try:
            await stream.send(data)
            hello = await reader.receive_line()
        except (anyio.BrokenResourceError, ConnectionClosed):
            assert not accepted  # refused, it hung up before reading it all
            return
        assert hello.startswith(b'{"ok": true}' if accepted else b'{"ok": false')
        while answers:
            for line in lines_of_block(await reader.receive_block()):
                message = json.loads(line)
                answers.discard(message.get("id") if isinstance(message, dict) else None)


async def run_mcp(hello: bytes, lines: list[bytes], answers: set[Any], cwd: str) -> None:
    async with watchdog(), mcp_host(cwd) as (socket, token):
        with anyio.fail_after(CASE_TIMEOUT):
            data = b"".join(line + b"\n" for line in [hello, *lines])
            data = data.replace(TOKEN.encode(), token.encode())
            accepted = json.dumps(token).encode() in data.partition(b"\n")[0]
            await exchange(socket.path, data, answers if accepted else set(), accepted)
            # The socket serves on: a new connection is answered.
            ping = b'{"jsonrpc": "2.0", "id": "after", "method": "ping"}\n'
            hello = json.dumps({"token": token}).encode() + b"\n"
            await exchange(socket.path, hello + ping, {"after"})
            assert os.path.exists(socket.path)
            # Each connection saw its client leave (none closed mid-read).
            await wait_for(lambda: not socket.connections)


def run_mcp_case(caplog: pytest.LogCaptureFixture, hello: Any, lines: list[Any]) -> None:
    caplog.clear()
    answers = {
        line["id"] for line in lines if isinstance(line, dict) and "method" in line and "id" in line
    } - {
        line["params"].get("requestId")  # cancelled: MCP wants no answer at all
        for line in lines
        if isinstance(line, dict) and line.get("method") == "notifications/cancelled"
        and isinstance(line.get("params"), dict)
    }  # fmt: skip
    with case_directory() as cwd:
        raw = [encoded(line, cwd) for line in lines]
        hello_line = encoded(hello, cwd).replace(json.dumps(TOKEN)[1:-1].encode(), TOKEN.encode())
        anyio.run(run_mcp, hello_line, raw, answers, cwd)
    assert_no_tracebacks(caplog)


@fewer
@given(data=st.data())
def test_mcp_socket(caplog_errors: Any, data: st.DataObject) -> None:
    """Any hello, then requests of every MCP method with odd params, cancellations,
    garbage and nesting: each request is answered, the socket serves on (issue
    27.2: one connection's garbage ended the listener, every chat's server with it)."""
    hello = data.draw(hellos, label="hello")
    count = data.draw(st.integers(1, 6), label="count")
    cancel = st.builds(
        lambda target: {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": target}},
        st.integers(1, count),
    )
    one = st.one_of(*(mcp_request(i) for i in range(1, count + 1)), cancel, garbage)
    lines = data.draw(st.lists(one, min_size=1, max_size=count), label="lines")
    run_mcp_case(caplog_errors, hello, lines)


@fewer
@given(data=st.data())
def test_mcp_tool_arguments(caplog_errors: Any, data: st.DataObject) -> None:
    """Every editor tool with arguments from its input schema, mutated, odd paths
    (NUL bytes, FIFOs, /dev/stdin) and integers past every bound: an answer each,
    a result or an ``isError`` result (issue 29.5: -32603 and a logged traceback)."""
    calls = data.draw(st.lists(tool_call(), min_size=1, max_size=4), label="calls")
    lines = [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call}
        for i, call in enumerate(calls, 1)
    ]
    run_mcp_case(caplog_errors, {"token": TOKEN}, lines)
