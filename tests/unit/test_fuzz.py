"""Fuzzing: generated agent output through the real App, then a clean turn that must work.

Messages are generated from the pinned v1 and v2 JSON schemas (``session/update``
notifications, the agent's requests, answers to ours), then mutated: unknown tags,
wrong types, odd strings and NUL bytes, huge and deeply nested values, raw lines
that are no JSON at all. Paths are drawn from a set of odd ones (relative, a NUL
byte, a FIFO, ``/dev/stdin``, directories) and kept inside the case's own
directory wherever the client could write.

Each case opens a chat on an in-memory agent (tests/unit/memory_agent.py), sends
the generated lines during the first turn, and then needs a second turn to end
normally. It fails on an exception out of the app's task group, on any bug a
barrier contained (logged with a traceback), on a hang (the case's timeout) and
on a blocked event loop (the watchdog).

Budgets: the ``ci`` profile (``make test``) runs a small derandomized set; ``make
fuzz`` runs the ``fuzz`` profile (``ACP_FUZZ_PROFILE=fuzz``), over 10,000 cases.
A failing example becomes a test in test_reliability.py.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.unit.memory_agent import MemoryAgent, app_with, transcript_text, update, watchdog

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "spec/acp/schema"

# Examples per test: make test runs a few seconds of them, make fuzz over 10,000 in all.
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
settings.load_profile(os.environ.get("ACP_FUZZ_PROFILE", "ci"))

CWD = "\x01CWD\x01"  # stands for the case's directory until the case runs
CASE_TIMEOUT = 10.0

# -- values from the schema -------------------------------------------------------------


class SchemaValues:
    """Hypothesis strategies for the JSON values a schema's ``$defs`` describe.

    Covers what the ACP schemas use: ``$ref``, ``allOf``, ``anyOf``/``oneOf``,
    ``const``, ``enum``, ``type`` (one or several), ``properties``/``required``.
    Recursion is cut at ``depth`` (optional properties left out, lists empty).
    """

    def __init__(self, version: str) -> None:
        self.defs: dict[str, Any] = json.loads((SCHEMA_DIR / version / "schema.json").read_text())[
            "$defs"
        ]
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
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "string": odd_text,
    "integer": st.one_of(st.integers(-5, 5), st.integers(-(2**70), 2**70)),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "null": st.none(),
}
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | odd_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3),
    max_leaves=6,
)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


# What a mutation puts somewhere in a message.
odd_values = st.one_of(
    json_values,
    st.sampled_from(["_fuzz_unknown_tag", "x" * 100_000, _nested(300), {"type": "_future"}]),
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
def mutated(draw: st.DrawFn, base: st.SearchStrategy[Any], writes: bool = False) -> Any:
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
        parent[key] = copy.deepcopy(draw(odd_values))
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
    return SchemaValues(f"v{version}")


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
    return text.encode()


async def run(agent: MemoryAgent, cwd: str, started: bool) -> None:
    async with watchdog(), app_with(agent, cwd) as (app, editor):
        chat = app.chats[1]
        if not started:
            assert chat.state in ("ready", "error"), chat.state
            if chat.state == "error":
                assert editor.events[-1][0] == "AcpError"
                return
        with anyio.fail_after(CASE_TIMEOUT):
            await app.send(1, "go")
            await agent.wait_synced(1)
            while chat.state != "ready":  # own work a v2 agent started ends with its idle
                await anyio.sleep(0.005)
            await app.send(1, "again")
        ends = [data["stop_reason"] for event, data in editor.events if event == "AcpTurnEnd"]
        assert ends[-1] == "end_turn"
        assert f"reply {agent.prompts}" in transcript_text(editor)


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
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]
    assert not errors, errors[0].getMessage()


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


@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_turn_ended_only_by_the_agent(caplog_errors: Any, data: st.DataObject, version: int) -> None:
    """The first turn ends only through the generated lines plus one last answer of
    any shape (v2: and an idle): whatever it is, the turn ends and the next works."""
    lines = list(data.draw(lines_of(version, prompt_answer=False), label="lines"))
    lines.append(data.draw(answer(version, 2, "PromptResponse"), label="answer"))
    if version == 2:  # the idle itself intact, for the turn to end at all; odd extras
        extras = {"stopReason": odd_values, "_meta": odd_values, "messageId": odd_values}
        idle = st.fixed_dictionaries(
            {"sessionUpdate": st.just("state_update"), "state": st.just("idle")}, optional=extras
        )
        lines.append(update(data.draw(idle, label="idle")))
    run_case(caplog_errors, MemoryAgent(version, [lines], end_turns=False))
