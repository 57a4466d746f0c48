"""Issue 18: what a misbehaving agent sent, and what the user must see instead of a
dead worker or a stuck chat. Each test is the issue's minimal input (or a failing
example the fuzzer found), run through the real App on an in-memory agent; each
ends with a second turn that must work. doc/reliability.md lists them.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.client.app import App
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for
from tests.unit.memory_agent import MemoryAgent, app_with, transcript_text, update, watchdog

# A contained bug is still a bug: nothing may reach the barriers' log.
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_tracebacks")]

PROMPT_ID = 2  # initialize 0, session/new 1, the first prompt 2


async def next_turn_works(app: App, editor: RecordingEditor, turn: int = 2) -> None:
    """The chat takes another prompt and the agent's reply shows."""
    await wait_for(lambda: app.chats[1].state == "ready", 5)
    with anyio.fail_after(5):
        await app.send(1, "again")
    assert editor.events[-1] == ("AcpTurnEnd", {"chat": 1, "stop_reason": "end_turn"})
    assert f"reply {turn}" in transcript_text(editor)


async def one_turn(
    agent: MemoryAgent, cwd: Path, answered: tuple[int, ...] = (), **options: Any
) -> tuple[App, RecordingEditor]:
    """Open, run the scripted first turn (until the agent's requests ``answered`` are),
    check the second; returns what the user saw."""
    async with watchdog(), app_with(agent, str(cwd), **options) as (app, editor):
        assert app.chats[1].state == "ready"
        with anyio.fail_after(5):
            await app.send(1, "go")
            await agent.answered(*answered)
        await next_turn_works(app, editor)
    return app, editor


def tool_call(version: int, **fields: Any) -> dict[str, Any]:
    kind = "tool_call_update" if version == 2 else "tool_call"
    return update({"sessionUpdate": kind, "toolCallId": "t", "title": "x", **fields})


# -- 1. a NUL byte in a path ------------------------------------------------------------


@pytest.mark.parametrize("status", ["pending", "completed"])
@pytest.mark.parametrize("version", [1, 2])
async def test_nul_byte_in_a_location(tmp_path: Path, version: int, status: str) -> None:
    line = tool_call(version, status=status, locations=[{"path": "a\u0000b"}])
    _, editor = await one_turn(MemoryAgent(version, [[line]]), tmp_path)
    assert "→ a\x00b" in transcript_text(editor)


async def test_nul_byte_in_a_v1_diff_path(tmp_path: Path) -> None:
    diff = {"type": "diff", "path": "/x\u0000y", "oldText": "a", "newText": "b"}
    line = tool_call(1, status="pending", content=[diff])
    done = tool_call(1, status="completed")
    await one_turn(MemoryAgent(1, [[line, done]]), tmp_path)


async def test_nul_byte_in_a_v2_changes_path(tmp_path: Path) -> None:
    change = {"operation": "modify", "path": "a\u0000b"}
    line = tool_call(2, status="completed", content=[{"type": "diff", "changes": [change]}])
    await one_turn(MemoryAgent(2, [[line]]), tmp_path)


@pytest.mark.parametrize("version", [1, 2])
async def test_nul_byte_in_a_permission_tool_call(tmp_path: Path, version: int) -> None:
    call = {"toolCallId": "p", "title": "edit", "locations": [{"path": "/a\u0000b"}]}
    params: dict[str, Any] = {
        "sessionId": "s1",
        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
    }
    if version == 2:
        params["title"] = "Edit?"
        params["subject"] = {"type": "tool_call", "toolCall": {**call, "status": "pending"}}
    else:
        params["toolCall"] = {**call, "status": "pending"}
    request = {"jsonrpc": "2.0", "id": 50, "method": "session/request_permission", "params": params}
    agent = MemoryAgent(version, [[request]])
    await one_turn(agent, tmp_path, permission_policy="allow_all")
    assert any(a.get("id") == 50 and "result" in a for a in agent.answers())


async def test_nul_byte_in_fs_paths_is_refused(tmp_path: Path) -> None:
    def fs(msg_id: int, method: str, **params: Any) -> dict[str, Any]:
        params = {"sessionId": "s1", **params}
        return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}

    bad = f"{tmp_path}/a\u0000b"
    agent = MemoryAgent(
        1,
        [
            [
                fs(50, "fs/read_text_file", path=bad),
                fs(51, "fs/write_text_file", path=bad, content="x"),
                fs(52, "terminal/create", command="true", cwd=bad),
            ]
        ],
    )
    await one_turn(agent, tmp_path)
    errors = {a["id"]: a["error"]["message"] for a in agent.answers() if "error" in a}
    assert "not a file name" in errors[50] and "not a file name" in errors[51]
    assert "cwd is not a directory" in errors[52]


async def test_nul_byte_in_a_command_is_refused_before_it_runs(tmp_path: Path) -> None:
    def create(msg_id: int, **params: Any) -> dict[str, Any]:
        params = {"sessionId": "s1", "command": "echo", **params}
        return {"jsonrpc": "2.0", "id": msg_id, "method": "terminal/create", "params": params}

    agent = MemoryAgent(
        1,
        [
            [
                create(60, command="echo a\u0000b"),
                create(61, args=["a\u0000b"]),
                create(62, env=[{"name": "TOKEN", "value": "se\u0000cret"}]),
            ]
        ],
    )
    _, editor = await one_turn(agent, tmp_path, answered=(60, 61, 62))
    errors = {a["id"]: a["error"] for a in agent.answers() if "error" in a}
    refused = "holds a NUL byte, which no program can take"
    assert errors[60]["message"] == f"Invalid params: 'echo a\\x00b' {refused}"
    assert errors[61]["message"] == f"Invalid params: 'a\\x00b' {refused}"
    # The value is no more quoted than :AcpLog shows it.
    assert errors[62]["message"] == f"Invalid params: env 'TOKEN' {refused}"
    assert {errors[i]["code"] for i in (60, 61, 62)} == {-32602}
    assert editor.terminals == {}  # nothing was started


# -- 2. a badly shaped answer -----------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"jsonrpc": "2.0", "id": PROMPT_ID, "result": {"stopReason": 5}},
        {"jsonrpc": "2.0", "id": PROMPT_ID, "result": None},
        {"jsonrpc": "2.0", "id": PROMPT_ID, "error": "boom"},
        {"jsonrpc": "2.0", "id": PROMPT_ID},  # found by the fuzzer: waited forever
    ],
)
async def test_badly_shaped_prompt_answer_ends_the_turn(tmp_path: Path, answer: Any) -> None:
    agent = MemoryAgent(1, [[answer]], end_turns=False)
    _, editor = await one_turn(agent, tmp_path)
    turn_end = editor.events.index(("AcpTurnEnd", {"chat": 1, "stop_reason": "error"}))
    error = editor.events[turn_end - 1]
    assert error[0] == "AcpError" and "answered nonsense" in error[1]["message"]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("initialize", {"jsonrpc": "2.0", "id": 0, "result": None}),
        ("initialize", {"jsonrpc": "2.0", "id": 0, "error": "boom"}),
        ("session/new", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": 5}}),
        ("session/new", {"jsonrpc": "2.0", "id": 1, "result": None}),
    ],
)
async def test_badly_shaped_start_ends_the_chat_and_the_agent(
    tmp_path: Path, version: int, method: str, answer: Any
) -> None:
    key = "initialize" if method == "initialize" else "new_session"
    agent = MemoryAgent(version, **{key: [answer]})  # type: ignore[arg-type]
    async with watchdog(), app_with(agent, str(tmp_path)) as (app, _editor):
        chat = app.chats[1]
        assert chat.state == "error"
        assert "answered nonsense" in chat.editor.last_status(1)["error"]
        if method == "initialize":
            assert app.agents == {}  # closed, not leaked
        await app.send(1, "again")  # restarts the agent: its next answers are sound
        assert chat.state == "ready"
        await app.open(2, None, str(tmp_path))  # the next chat works
        assert app.chats[2].state == "ready"


# -- 3. an error answer -----------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_error_answer_ends_the_turn_and_the_chat_goes_on(tmp_path: Path, version: int) -> None:
    error = {"code": -32603, "message": "rate limited"}
    agent = MemoryAgent(version, [[{"jsonrpc": "2.0", "id": PROMPT_ID, "error": error}]], end_turns=False)
    _, editor = await one_turn(agent, tmp_path)
    assert ("AcpTurnEnd", {"chat": 1, "stop_reason": "error"}) in editor.events
    assert "**Error:** agent error -32603 rate limited" in transcript_text(editor)


async def test_an_idle_while_an_errored_turn_ends_does_not_end_the_next(tmp_path: Path) -> None:
    """Found by the fuzzer: the idle after an error answer arrived while the turn
    was ending, was taken for work the agent started on its own, and ended the
    next turn early; that turn's own idle then found no turn and it never ended."""
    error = {"jsonrpc": "2.0", "id": PROMPT_ID, "error": {"code": 1, "message": "no"}}
    idle = update({"sessionUpdate": "state_update", "state": "idle"})
    (tmp_path / "a.txt").write_text("x\n")  # the review's final check has a file to read
    _, editor = await one_turn(MemoryAgent(2, [[error, idle]], end_turns=False), tmp_path)
    ends = [data["stop_reason"] for event, data in editor.events if event == "AcpTurnEnd"]
    assert ends == ["error", "end_turn"]


# -- 4. a FIFO --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_a_fifo_named_by_a_pending_tool_call_is_not_read(tmp_path: Path, version: int) -> None:
    os.mkfifo(tmp_path / "pipe")
    pending = tool_call(version, status="pending", locations=[{"path": str(tmp_path / "pipe")}])
    done = tool_call(version, status="completed")
    await one_turn(MemoryAgent(version, [[pending, done]]), tmp_path)


@pytest.mark.parametrize("path", ["pipe", "/dev/stdin", "/dev/zero"])
async def test_fs_read_of_a_special_file_is_refused_and_the_next_is_answered(
    tmp_path: Path, path: str
) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("hello\n")

    def read(msg_id: int, name: str) -> dict[str, Any]:
        params = {"sessionId": "s1", "path": str(tmp_path / name)}
        return {"jsonrpc": "2.0", "id": msg_id, "method": "fs/read_text_file", "params": params}

    agent = MemoryAgent(1, [[read(50, path), read(51, "a.txt")]])
    await one_turn(agent, tmp_path, answered=(50, 51))
    answers = {a["id"]: a for a in agent.answers()}
    # Outside the session's directory the file access policy refuses first.
    reason = "not a regular file" if path == "pipe" else "outside the session's directory"
    assert reason in answers[50]["error"]["message"]
    assert answers[51]["result"] == {"content": "hello\n"}


# -- 5. an unknown v2 diff operation ----------------------------------------------------


async def test_unknown_diff_operation_with_odd_old_path(tmp_path: Path) -> None:
    patch = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"
    change = {"operation": "_splice", "path": "a.txt", "oldPath": [1]}
    content = [
        {"type": "diff", "changes": [change], "patch": {"format": "git_patch", "text": patch}},
        {"type": "terminal", "terminalId": "term"},
    ]
    lines = [
        tool_call(2, status="in_progress", content=content),
        update({"sessionUpdate": "terminal_update", "terminalId": "term", "output": {"data": "aGk="}}),
        tool_call(2, status="completed"),
    ]
    _, editor = await one_turn(MemoryAgent(2, [lines]), tmp_path)
    assert editor.transcript(1)["t"][2:5] == ["**_splice** a.txt", "```diff", "diff --git a/a.txt b/a.txt"]


# -- 6. non-ASCII base64 ----------------------------------------------------------------


async def test_non_ascii_terminal_snapshot(tmp_path: Path) -> None:
    content = [{"type": "terminal", "terminalId": "term"}]
    lines = [
        tool_call(2, status="in_progress", content=content),
        update({"sessionUpdate": "terminal_update", "terminalId": "term", "output": {"data": "é"}}),
    ]
    async with watchdog(), app_with(MemoryAgent(2, [lines]), str(tmp_path)) as (app, editor):
        with anyio.fail_after(5):
            await app.send(1, "go")  # the idle after the snapshot ends the turn
            await wait_for(lambda: bool(editor.terminals))  # after the refresh interval
        (shown,) = editor.terminals.values()
        assert shown["data"] == "[invalid terminal snapshot]"
        await next_turn_works(app, editor)


# -- 7. a bad value where the schema says "default on error" ----------------------------


@pytest.mark.parametrize(
    "idle",
    [
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": 5},
        {"sessionUpdate": "state_update", "state": "idle", "_meta": 1},
    ],
)
async def test_a_bad_marked_field_falls_back_to_its_default(tmp_path: Path, idle: Any) -> None:
    agent = MemoryAgent(
        2, [[{"jsonrpc": "2.0", "id": PROMPT_ID, "result": {}}, update(idle)]], end_turns=False
    )
    _, editor = await one_turn(agent, tmp_path)
    stop = "idle" if "stopReason" in idle else "end_turn"
    assert ("AcpTurnEnd", {"chat": 1, "stop_reason": stop}) in editor.events


# -- 8. session/list that never ends ----------------------------------------------------


async def test_session_list_stops_on_a_repeated_cursor(tmp_path: Path) -> None:
    page = {"sessions": [{"sessionId": "x", "cwd": "/"}], "nextCursor": "again"}
    agent = MemoryAgent(2, results={"session/list": page})
    async with watchdog(), app_with(agent, str(tmp_path)) as (app, editor):
        with anyio.fail_after(5):
            await app.list_sessions(1)
        event, data = editor.events[-1]
        assert event == "AcpSessionList" and [s["session_id"] for s in data["sessions"]] == ["x", "x"]
        lists = [m for m in agent.received if m.get("method") == "session/list"]
        assert [m["params"].get("cursor") for m in lists] == [None, "again"]


# -- 9. the agent's ids and the client's ------------------------------------------------


async def test_agent_tool_call_id_like_a_client_id(tmp_path: Path) -> None:
    agent = MemoryAgent(1, [[tool_call(1, toolCallId="m0", status="completed")]])
    _, editor = await one_turn(agent, tmp_path)
    blocks = list(editor.transcript(1).values())
    assert blocks[0] == ["## You", "go"]
    assert ["#### x", "`other` · completed"] in blocks


@pytest.mark.parametrize("message_id", ["m0", "#m0", "turn1", "#message:m0"])
async def test_agent_message_id_like_a_client_id(tmp_path: Path, message_id: str) -> None:
    chunk = {"type": "text", "text": "from the agent"}
    body = {"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": chunk}
    _, editor = await one_turn(MemoryAgent(2, [[update(body)]]), tmp_path)
    blocks = list(editor.transcript(1).values())
    assert blocks[:2] == [["## You", "go"], ["## Agent", "from the agent"]]


async def test_message_tool_call_and_plan_may_share_an_id(tmp_path: Path) -> None:
    chunk = {"type": "text", "text": "said"}
    plan = {"type": "items", "planId": "x", "entries": [{"content": "step", "priority": "high", "status": "pending"}]}
    lines = [
        update({"sessionUpdate": "agent_message_chunk", "messageId": "x", "content": chunk}),
        tool_call(2, toolCallId="x", status="completed"),
        update({"sessionUpdate": "plan_update", "plan": plan}),
    ]
    _, editor = await one_turn(MemoryAgent(2, [lines]), tmp_path)
    blocks = list(editor.transcript(1).values())
    assert blocks[1:4] == [["## Agent", "said"], ["#### x", "`other` · completed"], ["### Plan", "- [ ] step"]]


async def test_a_v1_echo_of_the_prompt_without_message_ids_is_shown_once(tmp_path: Path) -> None:
    """A v1 agent that echoes the prompt as ``user_message_chunk``s without a
    ``messageId`` acknowledges the client's echo, as one with ids does: the prompt is
    shown once, not twice in one message."""

    def said(kind: str, text: str) -> dict[str, Any]:
        return update({"sessionUpdate": kind, "content": {"type": "text", "text": text}})

    echo = [said("user_message_chunk", "g"), said("user_message_chunk", "o")]
    agent = MemoryAgent(1, [[*echo, said("agent_message_chunk", "ok")]])
    _, editor = await one_turn(agent, tmp_path)
    users = [lines for lines in editor.transcript(1).values() if lines[0] == "## You"]
    assert users == [["## You", "go"], ["## You", "again"]]
    assert ["## Agent", "ok"] in editor.transcript(1).values()


# -- 10. amplification ------------------------------------------------------------------


async def test_title_updates_of_a_big_tool_call_send_only_the_header(tmp_path: Path) -> None:
    text = "\n".join(f"line {i}" for i in range(20_000))
    content = [{"type": "content", "content": {"type": "text", "text": text}}]
    lines = [tool_call(1, status="in_progress", content=content)]
    lines += [update({"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": f"step {i}"}) for i in range(200)]
    _, editor = await one_turn(MemoryAgent(1, [lines]), tmp_path)
    sent = sum(len(op.get("lines", ())) for op in editor.ops[1] if op.get("id") == "t")
    assert sent < 20_000 + 2 + 200 * 2 + 100
    assert editor.transcript(1)["t"][0] == "#### step 199"
    assert len(editor.transcript(1)["t"]) == 20_002


async def test_many_locations_are_statted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_nvim.client.services import disk_changes

    statted: list[str] = []
    real = disk_changes.stat_of

    def counting(path: str) -> Any:
        statted.append(path)
        return real(path)

    monkeypatch.setattr(disk_changes, "stat_of", counting)
    locations = [{"path": f"{tmp_path}/f{i}.txt"} for i in range(2000)]
    lines = [tool_call(1, status="pending", locations=locations)]
    lines += [update({"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": f"step {i}"}) for i in range(50)]
    lines.append(update({"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "completed"}))
    await one_turn(MemoryAgent(1, [lines]), tmp_path)
    # One snapshot stat while pending, one check when completed, one at the turn's end.
    assert len(statted) <= 3 * 2000 + 10


# -- no task takes the worker down ------------------------------------------------------


async def test_a_failing_review_task_is_shown_in_its_chat_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from acp_nvim.client.services.changes import SessionChanges

    async def broken(self: SessionChanges, named: dict[str, None]) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(SessionChanges, "_check", broken)
    lines = [tool_call(1, status="completed", locations=[{"path": "a.txt"}])]
    _, editor = await one_turn(MemoryAgent(1, [lines]), tmp_path)
    errors = [data["message"] for event, data in editor.events if event == "AcpError"]
    assert errors and all(e.startswith("internal error while") for e in errors)
    assert "KeyError('boom')" in errors[0]
    caplog.clear()  # logged, as it should be


async def test_a_failing_update_costs_that_update_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from acp_nvim.client.session import view

    def broken(*args: Any) -> Any:
        raise RuntimeError("cannot draw")

    monkeypatch.setattr(view, "plan_op", broken)
    plan = update({"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]})
    chunk = update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "after"}})
    _, editor = await one_turn(MemoryAgent(1, [[plan, chunk]]), tmp_path)
    assert "after" in transcript_text(editor)
    assert "internal error while showing an update" in transcript_text(editor)
    caplog.clear()


# -- issue 27.1: a deeply nested line -------------------------------------------------


def nested(line: Any, depth: int) -> str:
    """``line`` as JSON, each ``"<nested>"`` in it made ``depth`` nested arrays."""
    empty = "[" * depth + "]" * depth
    return json.dumps(line).replace('"<nested>"', empty)


@pytest.mark.parametrize("depth", [900, 1_000, 100_000])
@pytest.mark.parametrize("version", [1, 2])
async def test_a_deeply_nested_line_costs_that_line_only(
    tmp_path: Path, version: int, depth: int
) -> None:
    """msgspec raises RecursionError past the interpreter's recursion limit: it ended
    the connection, the chat went to error "agent exited during the turn"."""
    chunk = {"type": "text", "text": "around"}
    body = {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": chunk}
    lines = [
        nested("<nested>", depth),
        nested({"jsonrpc": "2.0", "method": "session/update", "params": "<nested>"}, depth),
        nested({"jsonrpc": "2.0", "id": 60, "method": "fs/read_text_file", "params": "<nested>"}, depth),
        nested(update({**body, "_meta": "<nested>"}), depth),
        nested(tool_call(version, status="completed", rawInput="<nested>", rawOutput="<nested>"), depth),
    ]
    _, editor = await one_turn(MemoryAgent(version, [lines]), tmp_path)
    if depth < 1_000:  # within the limit: decoded, shown
        assert "around" in transcript_text(editor)
        assert ["#### x", "`other` · completed"] in editor.transcript(1).values()


def select(version: int, config_id: str, choices: int) -> dict[str, Any]:
    """A select setting of ``choices`` choices, its id named as ``version`` names it."""
    return {
        "type": "select",
        "configId" if version == 2 else "id": config_id,
        "name": config_id.title(),
        "currentValue": "c0",
        "options": [{"value": f"c{i}", "name": f"C{i}"} for i in range(choices)],
    }


@pytest.mark.parametrize("version", [1, 2])
async def test_a_big_settings_update_is_converted_off_the_loop(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29.7: 500,000 choices of a legal settings line held the loop a second while
    they became the chat's settings one by one. Past OFF_LOOP_CHOICES a worker thread
    converts them; a small update stays on the loop, and the updates keep their order.
    Past SENT_CHOICES the status leaves the choices out (their packing for Lua held the
    loop too): it names the current choice, and the choices are there to ask for."""
    from acp_nvim.client.agent import big_settings
    from acp_nvim.client.session import view

    monkeypatch.setattr(big_settings, "OFF_LOOP_CHOICES", 10)
    monkeypatch.setattr(view, "SENT_CHOICES", 10)
    on_loop: list[tuple[str, bool]] = []
    entry = view.config_entry

    def recording(option: Any, whole: bool = True) -> dict[str, Any]:
        on_loop.append((option.id, threading.current_thread() is threading.main_thread()))
        return entry(option, whole)

    monkeypatch.setattr(view, "config_entry", recording)
    settings = [[select(version, "big", 20)], [select(version, "small", 3)], [select(version, "big", 20)]]
    lines = [update({"sessionUpdate": "config_option_update", "configOptions": s}) for s in settings]
    app, editor = await one_turn(MemoryAgent(version, [lines]), tmp_path)
    assert on_loop == [("big", False), ("small", True), ("big", False)]
    (shown,) = editor.last_status(1)["config_options"]
    assert shown == {"id": "big", "name": "Big", "type": "select", "category": None,
                     "current": "c0", "current_name": "C0"}  # fmt: skip
    assert app.choices(1, "big") == [{"value": f"c{i}", "name": f"C{i}"} for i in range(20)]
    (small,) = [o for op in editor.ops[1] for o in op.get("config_options", []) if o["id"] == "small"]
    assert small["choices"] == [{"value": f"c{i}", "name": f"C{i}"} for i in range(3)]


# -- issue 29.1: login methods outside the schema ---------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_odd_env_var_login_methods_leave_the_chat_starting(
    tmp_path: Path, version: int
) -> None:
    """``vars`` of 5 or [null] raised AttributeError out of the App's task group:
    the chat never started. What cannot be run is left out; the rest is offered."""
    key = "methodId" if version == 2 else "id"
    methods = [
        {"type": "env_var", key: "a", "name": "A", "vars": 5},
        {"type": "env_var", key: "b", "name": "B", "vars": [5, None, {"name": 7}, {"name": "K"}, "L"]},
        {"type": "env_var", key: "c", "name": 7, "vars": None, "description": 2**70},
        {"type": "env_var", "name": "no id", "vars": ["X"]},
        {"type": "env_var", key: ["d"], "name": "D"},
        {key: "q", "name": "Q", "_meta": {"type": "terminal", "args": 5}},  # qwen's form
        {"type": "terminal", key: "", "name": ""},  # (fuzzer) an empty id
        None,  # (fuzzer)
    ]
    if version == 2:
        methods[-3]["type"] = "agent"
    info = {"name": "memory", "version": "0"}
    result: dict[str, Any] = (
        {"protocolVersion": 2, "info": info, "capabilities": {}, "authMethods": methods}
        if version == 2
        else {"protocolVersion": 1, "agentInfo": info, "authMethods": methods}
    )
    agent = MemoryAgent(version, initialize=[{"jsonrpc": "2.0", "id": 0, "result": result}])
    _, editor = await one_turn(agent, tmp_path)
    offered = [(m["id"], m["name"], m["kind"], m["vars"]) for m in editor.last_status(1)["login_methods"]]
    assert offered == [
        ("a", "A", "env", []), ("b", "B", "env", ["K", "L"]), ("c", "c", "env", []),
        ("q", "Q", "terminal", []), ("", "", "agent", []),
    ]  # fmt: skip


# -- issue 29.2: a session id that is another chat's ------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_a_session_id_of_another_chat_is_refused(tmp_path: Path, version: int) -> None:
    """A second session/new answered with chat 1's id, and chat 1's session resumed
    (v1: loaded) in another chat: each refused, chat 1 untouched and answering.
    (A fork answered with its parent's id: tests/nvim/test_fork.py.)"""
    info = {"name": "memory", "version": "0"}
    result: dict[str, Any] = (
        {"protocolVersion": 2, "info": info, "capabilities": {"session": {}}}
        if version == 2
        else {"protocolVersion": 1, "agentInfo": info, "agentCapabilities": {"loadSession": True}}
    )
    agent = MemoryAgent(
        version,
        initialize=[{"jsonrpc": "2.0", "id": 0, "result": result}],
        results={"session/new": {"sessionId": "s1"}},  # every time
    )
    async with watchdog(), app_with(agent, str(tmp_path)) as (app, editor):
        await app.open(2, None, str(tmp_path))
        await app.open(3, None, str(tmp_path), session_id="s1")
        assert editor.last_status(2)["error"] == (
            "agent 'memory': it answered session/new with session id 's1', chat 1's: refused"
        )
        assert editor.last_status(3)["error"] == "agent 'memory': session 's1' is open in chat 1 already"
        assert not any(m.get("method") in ("session/load", "session/resume") for m in agent.received)
        assert [c.state for c in app.chats.values()] == ["ready", "error", "error"]
        await next_turn_works(app, editor, turn=1)


# -- the watchdog itself ----------------------------------------------------------------


async def test_the_watchdog_catches_a_blocked_loop() -> None:
    """Blocked: waiting ten times its limit (less may be a loaded machine)."""
    import time

    from tests.unit.memory_agent import LoopStalled

    with pytest.RaisesGroup(LoopStalled):
        async with watchdog(0.2):
            time.sleep(3)


async def test_the_watchdog_catches_a_busy_loop() -> None:
    """Busy: its limit of the loop's own CPU time, however long that takes."""
    import time

    from tests.unit.memory_agent import LoopStalled

    with pytest.RaisesGroup(LoopStalled):
        async with watchdog(0.2):
            start = time.thread_time()
            while time.thread_time() - start < 1:
                pass
