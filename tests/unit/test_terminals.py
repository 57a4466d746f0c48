"""Terminals in the core: the command service behind v1 terminal/* and display terminals,
with the fake editor playing each command's output and exit the way Neovim's job
callbacks do."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import anyio.abc
import msgspec
import pytest
from msgspec import UNSET

from acp_nvim.client.agent import v1 as adapter_v1
from acp_nvim.client.app import App
from acp_nvim.client.services import terminals as terminals_module
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.services.terminals import CommandOutput, Terminals, tail_lines
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import ExitStatus, TerminalPart, ToolCallPatch
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.client.tasks import Tasks
from acp_nvim.protocol import schema_v1 as v1
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for

pytestmark = pytest.mark.anyio
SID = "s1"


class Rig:
    def __init__(self, tasks: anyio.abc.TaskGroup, cwd: Path) -> None:
        self.editor = RecordingEditor()
        self.chat = Chat(1, "fake", self.editor, Workspace(str(cwd)))
        self.chat.session.session_id = SID
        self.terminals = Terminals({SID: self.chat})
        self.terminals.start(Tasks(tasks))

    async def create(self, command: str, args: list[str] | None = None, **fields: object) -> str:
        return await self.terminals.create(SID, command, args or [], **fields)  # type: ignore[arg-type]

    async def output(self, terminal_id: str) -> CommandOutput:
        return self.terminals.output(SID, terminal_id)

    def block(self, call_id: str) -> list[str]:
        return self.editor.transcript(1)[call_id]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with anyio.create_task_group() as tasks:
        yield Rig(tasks, tmp_path)
        tasks.cancel_scope.cancel()


async def test_shell_line_runs_in_the_session_cwd_and_argv_runs_directly(
    rig: Rig, tmp_path: Path
) -> None:
    line = await rig.create("echo hi; printf 'x\\n'", args=[])
    argv = await rig.create(
        "printenv", args=["GREETING"], env={"GREETING": "hello"}, cwd="/"
    )
    assert rig.editor.terminals[line] | {"data": None} == {
        "cmd": "echo hi; printf 'x\\n'",
        "cwd": str(tmp_path),
        "env": {},
        "data": None,
        "stopped": False,
        "shown": False,
        "chat": rig.chat.id,
    }
    assert rig.editor.terminals[argv]["cmd"] == ["printenv", "GREETING"]
    assert rig.editor.terminals[argv]["cwd"] == "/"
    assert rig.editor.terminals[argv]["env"] == {"GREETING": "hello"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cwd": "relative/dir"}, "cwd must be an absolute path"),
        ({"cwd": "/no/such/dir"}, "cwd is not a directory"),
        ({"limit": -1}, "outputByteLimit must be 0 or more"),
    ],
)
async def test_bad_create_params_are_refused(
    rig: Rig, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ServiceError) as err:
        await rig.create("true", **fields)
    assert err.value.kind == "invalid"
    assert message in str(err.value)


async def test_output_is_escape_free_with_the_exit_status(rig: Rig) -> None:
    tid = await rig.create("make")
    rig.terminals.feed(tid, b"hi\r\n\x1b[31mre")
    early = await rig.output(tid)
    assert (early.text, early.exit_status) == ("hi\nre", None)
    rig.terminals.feed(tid, b"d\x1b[0m caf\xc3")  # a character split across reads
    assert (await rig.output(tid)).text == "hi\nred caf"
    rig.terminals.feed(tid, b"\xa9\r\n", exit_code=2)
    done = await rig.output(tid)
    assert done.text == "hi\nred café\n"
    assert done.truncated is False
    assert done.exit_status == ExitStatus(exit_code=2, signal=None)


async def test_truncation_keeps_the_end_at_a_character_boundary(rig: Rig) -> None:
    tid = await rig.create("cat", limit=5)
    rig.terminals.feed(tid, "a€€".encode(), exit_code=0)  # 1 + 3 + 3 bytes
    out = await rig.output(tid)
    # The last 5 bytes would start inside the first €: it goes whole.
    assert (out.text, out.truncated) == ("€", True)


async def test_the_raw_buffer_is_bounded_and_reports_what_it_dropped(rig: Rig) -> None:
    tid = await rig.create("yes", limit=10)
    cap = 10 + terminals_module._SLACK
    for i in range(200):
        rig.terminals.feed(tid, f"line {i} ".encode() * 100 + b"\r\n")
    term = rig.terminals._commands[tid]
    assert len(term.output.raw) <= cap + cap // 4
    out = await rig.output(tid)
    assert out.truncated and out.text.endswith("line 199 \n")
    assert len(out.text.encode()) <= 10


async def test_wait_for_exit_and_kill_report_the_signal(rig: Rig) -> None:
    tid = await rig.create("sleep 100")
    got: list[ExitStatus] = []

    async def wait() -> None:
        got.append(await rig.terminals.wait_for_exit(SID, tid))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        assert got == []
        await rig.terminals.kill(SID, tid)
        assert rig.editor.terminals[tid]["stopped"]
        rig.terminals.feed(tid, exit_code=128 + 15)  # how Neovim reports SIGTERM
    assert got == [ExitStatus(exit_code=None, signal="SIGTERM")]
    # Still valid after kill: output and exit status stay readable.
    out = await rig.output(tid)
    assert out.exit_status == ExitStatus(signal="SIGTERM")


async def test_an_exit_code_above_128_without_kill_is_a_code(rig: Rig) -> None:
    tid = await rig.create("exit 130")
    rig.terminals.feed(tid, exit_code=130)
    assert (await rig.output(tid)).exit_status == ExitStatus(exit_code=130)


async def test_release_stops_and_invalidates_but_the_tool_call_keeps_showing_it(rig: Rig) -> None:
    tid = await rig.create("tail -f log")
    rig.chat.on_tool_call(
        ToolCallPatch("call1", title="Tail", kind="execute", content=[TerminalPart(tid)])
    )
    rig.terminals.feed(tid, b"first\r\n")
    await rig.terminals.release(SID, tid)
    assert rig.editor.terminals[tid]["stopped"]
    for method in (rig.output,):
        with pytest.raises(ServiceError) as err:
            await method(tid)
        assert err.value.kind == "not_found"
    rig.terminals.feed(tid, exit_code=129)  # the hang-up arrives after the release
    assert rig.block("call1")[2:] == [
        f"[terminal {tid} · killed by SIGHUP] tail -f log",
        "```text",
        "first",
        "```",
    ]
    assert tid not in rig.terminals._commands


async def test_unknown_session_and_terminal(rig: Rig) -> None:
    with pytest.raises(ServiceError):
        await rig.terminals.create("nope", "true", [])
    with pytest.raises(ServiceError):
        await rig.output("t999999")


async def test_tool_call_block_shows_the_live_tail_throttled(rig: Rig) -> None:
    tid = await rig.create("for i in $(seq 20); do echo $i; done")
    rig.chat.on_tool_call(
        ToolCallPatch("c", title="Count", kind="execute", content=[TerminalPart(tid)])
    )
    assert rig.block("c")[2] == f"[terminal {tid} · running] for i in $(seq 20); do echo $i; done"
    before = len(rig.editor.ops[1])
    for i in range(1, 21):
        rig.terminals.feed(tid, f"{i}\r\n".encode())
    assert len(rig.editor.ops[1]) == before  # throttled: nothing drawn per read
    await wait_for(lambda: len(rig.editor.ops[1]) > before)
    assert len(rig.editor.ops[1]) == before + 1  # twenty reads, one redraw
    assert rig.block("c")[3:] == ["```text", *[str(i) for i in range(11, 21)], "```"]
    rig.terminals.feed(tid, exit_code=0)  # the exit shows at once
    assert rig.block("c")[2].startswith(f"[terminal {tid} · exit 0]")


def test_tail_lines_shows_the_last_frame_of_a_progress_bar() -> None:
    raw = b"build\r\n\x1b[32m10%\r50%\r100%\x1b[0m\r\ndone\r\n"
    assert tail_lines(raw) == ["build", "100%", "done"]
    # A window that starts mid-line drops that line.
    assert tail_lines(b"x" * 20000 + b"\nlast\n") == ["last"]


async def test_display_terminal_chunks_split_a_character_and_an_escape(rig: Rig) -> None:
    rig.chat.on_tool_call(
        ToolCallPatch("c", title="Run", kind="execute", content=[TerminalPart("term_1")])
    )
    data = "ok \x1b[1mcafé\x1b[0m\n".encode()
    cut_char = data.index(b"\xc3") + 1
    cut_escape = data.index(b"\x1b[0m") + 2
    for piece in (data[:cut_char], data[cut_char:cut_escape], data[cut_escape:]):
        rig.terminals.chunk(rig.chat, "term_1", base64.b64encode(piece).decode())
    rig.terminals.update(
        rig.chat, "term_1", command="make", cwd=UNSET, output=UNSET, exit_status=UNSET
    )
    await wait_for(lambda: "ok café" in rig.block("c"))
    key = rig.chat.session.terminals["term_1"].key
    assert rig.block("c")[2:] == [f"[terminal {key} · running] make", "```text", "ok café", "```"]
    # The editor's terminal gets the text as sent, escapes and all.
    assert rig.editor.terminals[key]["data"] == data.decode()

    rig.terminals.update(
        rig.chat,
        "term_1",
        command=UNSET,
        cwd=UNSET,
        output=b"fresh\n",
        exit_status={"exit_code": 0},
    )
    rig.terminals.chunk(rig.chat, "term_1", base64.b64encode(b"more\n").decode())
    await wait_for(lambda: "more" in rig.block("c"))
    assert rig.block("c")[2:] == [
        f"[terminal {key} · exit 0] make",
        "```text",
        "fresh",
        "more",
        "```",
    ]
    assert rig.editor.terminals[key]["data"] == "fresh\nmore\n"


async def test_a_bad_display_chunk_is_reported_not_raised(rig: Rig) -> None:
    rig.terminals.chunk(rig.chat, "term_1", "not base64!")
    assert "is not base64" in rig.editor.last_status(1)["unknown_update"]


def v1_update(update: dict[str, object]) -> object:
    raw = msgspec.json.encode({"sessionId": SID, "update": update})
    return v1.decode(raw, v1.SessionNotification).update


async def test_a_v1_calls_meta_terminal_is_shown_and_its_odd_fields_ignored(rig: Rig) -> None:
    """Zed's ``_meta.terminal_output`` convention (claude-agent-acp): ``terminal_info``
    shows a terminal at the call even where its content does not name it, output is
    appended (``terminal_output_delta`` too), ``terminal_exit`` ends it; a field of
    the wrong type is left out, never raised."""
    call = {"toolCallId": "c", "title": "ls", "kind": "execute", "status": "pending"}
    for update in (
        {"sessionUpdate": "tool_call", **call, "_meta": {"terminal_info": {"terminal_id": "t"}}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c",
         "_meta": {"terminal_info": "t", "terminal_output": {"terminal_id": "t", "data": 5},
                   "terminal_exit": {"terminal_id": 7}}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c",
         "_meta": {"terminal_output": {"terminal_id": "t", "data": "a.txt\n"}}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c",
         "_meta": {"terminal_output_delta": {"terminal_id": "t", "data": "b.txt\n"}}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed",
         "_meta": {"terminal_exit": {"terminal_id": "t", "exit_code": "0", "signal": None}}},
    ):  # fmt: skip
        adapter_v1.apply_update(rig.chat, v1_update(update), rig.terminals)
    await wait_for(lambda: "b.txt" in rig.block("c"))
    key = rig.chat.session.terminals["t"].key
    # An exit code that is no number is not known ("?").
    assert rig.block("c")[2:] == [f"[terminal {key} · exit ?]", "```text", "a.txt", "b.txt", "```"]
    assert rig.chat.session.tool_calls["c"].content == [TerminalPart("t")]
    assert rig.editor.terminals[key]["data"] == "a.txt\nb.txt\n"


async def test_a_v1_calls_terminal_told_again_is_shown_once(rig: Rig) -> None:
    """v1 agents send the same ``tool_call`` twice (see agent/v1.py), and an update
    may name the terminal again: each ``terminal_info`` of a call whose content
    does not name it appended it once more, the block showing the terminal twice."""
    info = {"terminal_info": {"terminal_id": "t"}}
    call = {"toolCallId": "c", "title": "ls", "kind": "execute", "_meta": info}
    for update in (
        {"sessionUpdate": "tool_call", **call, "status": "pending"},
        {"sessionUpdate": "tool_call", **call, "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "_meta": info},
    ):
        adapter_v1.apply_update(rig.chat, v1_update(update), rig.terminals)
    assert rig.chat.session.tool_calls["c"].content == [TerminalPart("t")]


async def test_ending_the_session_stops_commands_and_forgets_them(rig: Rig) -> None:
    """On a close and on :AcpRestart. The buffers are the chat's, not the agent
    process's: Neovim deletes them when the chat closes (tests/nvim/test_terminals.py)."""
    running = await rig.create("sleep 100")
    done = await rig.create("true")
    rig.terminals.feed(done, exit_code=0)
    rig.terminals.chunk(rig.chat, "d", base64.b64encode(b"x").decode())
    terminals = rig.chat.session.terminals
    # The display terminal's buffer opens with the next (throttled) redraw.
    await wait_for(lambda: "d" in terminals and terminals["d"].key in rig.editor.terminals)
    display = terminals["d"].key
    await rig.terminals.end_session(rig.chat)
    assert [key for key, term in rig.editor.terminals.items() if term["stopped"]] == [running]
    assert {rig.editor.terminals[key]["chat"] for key in (running, done, display)} == {rig.chat.id}
    for key in (running, done):
        with pytest.raises(ServiceError):
            await rig.output(key)


async def test_an_abandoned_turn_kills_its_own_commands_and_starts_no_more(rig: Rig) -> None:
    """A turn the agent goes on with after a cancel ends here (timeouts.cancel): the
    commands it started are killed, one an earlier turn left running (a server) is
    not, and the agent, still in that turn, runs nothing more."""
    rig.chat.turn = 1
    server = await rig.create("serve")
    rig.chat.turn = 2
    build = await rig.create("make")
    await rig.terminals.abandon(rig.chat)
    assert rig.editor.terminals[build]["stopped"] and not rig.editor.terminals[server]["stopped"]
    rig.terminals.feed(build, exit_code=129)
    assert (await rig.output(build)).exit_status == ExitStatus(signal="SIGHUP")  # still readable
    rig.chat.unshown.add(rig.chat.session.session_id)  # nothing more of that turn is shown
    with pytest.raises(ServiceError, match="the turn was cancelled") as err:
        await rig.create("make again")
    assert err.value.kind == "denied"


async def test_agent_exit_stops_what_runs(rig: Rig) -> None:
    tid = await rig.create("sleep 100")
    await rig.terminals.end_all()
    assert rig.editor.terminals[tid]["stopped"]


async def test_the_app_routes_editor_output_to_the_agent_that_asked(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        await app.open(1, None, str(tmp_path))
        tasks.start_soon(app.send, 1, "run")  # the demo agent checks we offer terminals
        await wait_for(lambda: bool(editor.terminals))
        key, term = next(iter(editor.terminals.items()))
        assert term["cmd"].startswith("echo hi;") and term["cwd"] == str(tmp_path)
        data = base64.b64encode(b"hi\r\ncounting: 1 2 3\r\n").decode()
        app.terminal_output([{"key": key, "data": data}, {"key": key, "exit": 0}])
        await wait_for(lambda: bool(editor.events) and editor.events[-1][0] == "AcpTurnEnd")
        reply = next(lines for lines in editor.transcript(1).values() if lines[0] == "## Agent")
        assert "The command exited with code 0 and printed:" in reply
        assert reply[-3:] == ["hi", "counting: 1 2 3", "```"]
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_command_waits_while_the_editor_makes_no_terminal(rig: Rig) -> None:
    """Neovim makes none in its command-line window: the agent's request waits for it
    to close, then the command starts, once."""
    rig.editor.terminals_after = anyio.Event()
    created: list[str] = []

    async def create() -> None:
        created.append(await rig.create("make"))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(create)
        await anyio.wait_all_tasks_blocked()
        assert len(rig.editor.terminals_refused) == 1 and rig.editor.terminals == {}
        rig.editor.terminals_after.set()
    assert list(rig.editor.terminals) == created == rig.editor.terminals_refused
    rig.terminals.feed(created[0], b"built\n", 0)
    assert (await rig.output(created[0])).text == "built\n"


async def _cancel(rig: Rig) -> None:
    rig.terminals.cancel(rig.chat)


@pytest.mark.parametrize(
    "stop",
    [
        pytest.param(_cancel, id="the turn cancelled"),
        pytest.param(lambda rig: rig.terminals.abandon(rig.chat), id="the turn left to the agent"),
        pytest.param(lambda rig: rig.terminals.end_session(rig.chat), id="the chat closed"),
        pytest.param(lambda rig: rig.terminals.end_all(), id="the agent gone"),
    ],
)
async def test_a_command_stopped_while_it_waits_for_the_editor_never_starts(
    rig: Rig, stop: Callable[[Rig], Awaitable[None]]
) -> None:
    rig.editor.terminals_after = anyio.Event()
    errors: list[ServiceError] = []

    async def create() -> None:
        with pytest.raises(ServiceError) as err:
            await rig.create("make")
        errors.append(err.value)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(create)
        await anyio.wait_all_tasks_blocked()
        await stop(rig)
    rig.editor.terminals_after.set()  # the window closes: nothing waits any more
    [error] = errors
    assert (error.kind, str(error)) == ("denied", "'make' was stopped before it could start")
    assert rig.editor.terminals == {} and rig.chat.session.terminals == {}
    assert repr(rig.terminals).startswith("<Terminals 0 commands")


async def test_a_waiting_command_whose_request_the_agent_cancels_is_forgotten(rig: Rig) -> None:
    rig.editor.terminals_after = anyio.Event()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(rig.create, "make")
        await anyio.wait_all_tasks_blocked()
        tasks.cancel_scope.cancel()  # as $/cancel_request does
    rig.editor.terminals_after.set()
    assert rig.editor.terminals == {} and rig.chat.session.terminals == {}
    assert repr(rig.terminals).startswith("<Terminals 0 commands")
