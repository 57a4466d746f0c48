"""The first chat's agent, spawned before the host imports its event loop (decision
0051): what Lua hands over starts it, the chat's start takes it over when it is the
same agent, and it never outlives being unwanted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from acp_nvim.client.agent import first
from acp_nvim.client.agent.process import AgentProcess, PipedProcess
from acp_nvim.protocol.streams import receive
from tests.proc import alive

ROOT = Path(__file__).resolve().parents[2]

# Echoes stdin to stdout, says hello on stderr, exits 7 at the end of its input.
ECHO = [sys.executable, "-c", "import sys; sys.stderr.write('hello\\n'); sys.stderr.flush()"
        "\nfor line in sys.stdin: sys.stdout.write(line); sys.stdout.flush()\nsys.exit(7)"]


def given(tmp_path: Path, agent: str = "echo", cmd: list[str] = ECHO, **more: object) -> str:
    options = {"agents": {"echo": {"cmd": cmd}}, "default_agent": "echo"}
    return json.dumps({"options": options, "agent": agent, "cwd": str(tmp_path), **more})


@pytest.fixture(autouse=True)
def nothing_left_waiting() -> Iterator[None]:
    yield
    first.end()


def test_the_agent_starts_before_the_host_imports_an_event_loop(tmp_path: Path) -> None:
    # What `python -m acp_nvim` runs first, in a Python of its own: no asyncio, anyio
    # or pynvim imported yet when the agent is already running.
    script = textwrap.dedent(
        """
        import json, os, sys
        from acp_nvim.client.agent import first
        first.spawn()
        spawned = first._waiting
        print(json.dumps({
            "pid": spawned and spawned.popen.pid,
            "loaded": sorted(m for m in ("asyncio", "anyio", "pynvim") if m in sys.modules),
            "left_in_env": first.ENV in os.environ,
            "cwd": spawned and spawned.cwd,
        }))
        first.end()
        """
    )
    env = {**os.environ, first.ENV: given(tmp_path), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["pid"]
    assert report["loaded"] == []
    assert report["left_in_env"] is False  # no agent inherits it
    assert report["cwd"] == str(tmp_path)


@pytest.mark.anyio
async def test_the_chats_start_takes_the_first_agent_over_and_talks_to_it(tmp_path: Path) -> None:
    environ = {**os.environ, first.ENV: given(tmp_path)}
    first.spawn(environ)
    assert first.ENV not in environ
    waiting = first._waiting
    assert waiting is not None
    stderr: list[bytes] = []
    agent = AgentProcess("echo", ECHO, cwd=str(tmp_path), on_stderr=stderr.append)
    await agent.start()
    assert agent.pid == waiting.popen.pid
    assert first._waiting is None  # taken once
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(agent.drain_stderr)
        # More than a pipe holds, while it is read back: the writes wait for room.
        line = b"x" * 1000 + b"\n"
        async with anyio.create_task_group() as writers:
            writers.start_soon(agent.stdin.send, line * 300)
            echoed = b""
            while len(echoed) < len(line) * 300:
                echoed += await receive(agent.stdout)
        assert echoed == line * 300
        await agent.stdin.aclose()
        assert await receive(agent.stdout) == b""  # its end
        assert await agent.wait() == 7
    assert stderr == [b"hello"]
    await agent.aclose()
    assert not alive(waiting.popen.pid)


@pytest.mark.anyio
async def test_another_agents_first_start_ends_the_first_agent(tmp_path: Path) -> None:
    first.spawn({**os.environ, first.ENV: given(tmp_path)})
    waiting = first._waiting
    assert waiting is not None
    other = AgentProcess("other", [*ECHO, "other"], cwd=str(tmp_path))
    await other.start()
    try:
        assert other.pid != waiting.popen.pid
        assert waiting.popen.returncode is not None  # ended and reaped
        assert first._waiting is None
    finally:
        await other.aclose()


def test_an_agent_nothing_takes_is_ended(tmp_path: Path) -> None:
    first.spawn({**os.environ, first.ENV: given(tmp_path)})
    waiting = first._waiting
    assert waiting is not None and alive(waiting.popen.pid)
    first.end()
    assert waiting.popen.returncode is not None and not alive(waiting.popen.pid)


@pytest.mark.anyio
async def test_the_host_ends_an_agent_nothing_took_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_nvim.nvim import host

    monkeypatch.setattr(first, "CLAIM_SECONDS", 0.01)
    first.spawn({**os.environ, first.ENV: given(tmp_path)})
    waiting = first._waiting
    assert waiting is not None
    await host._end_first_agent_unclaimed()
    assert first._waiting is None and not alive(waiting.popen.pid)


def spawned_in_own_python(value: str) -> dict[str, object]:
    """``first.spawn()`` in a Python of its own, as ``python -m acp_nvim`` runs it:
    what it started, and which of the client's heavier modules it needed for that."""
    script = textwrap.dedent(
        """
        import json, sys
        from acp_nvim.client.agent import first
        first.spawn()
        spawned = first._waiting
        print(json.dumps({
            "cmd": spawned and spawned.cmd,
            "cwd": spawned and spawned.cwd,
            "loaded": sorted(m for m in ("msgspec", "acp_nvim.client.config") if m in sys.modules),
        }))
        first.end()
        """
    )
    env = {**os.environ, first.ENV: value, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_a_later_start_spawns_the_launch_the_first_kept(tmp_path: Path) -> None:
    # The first start resolves the agent with the options' module; the next one with
    # the same hand-over finds what it gave and spawns before importing any of it.
    cache = tmp_path / "cache"
    value = given(tmp_path, cache=str(cache))
    assert spawned_in_own_python(value) == {
        "cmd": ECHO,
        "cwd": str(tmp_path),
        "loaded": ["acp_nvim.client.config", "msgspec"],
    }
    assert (cache / "acp" / "first-agents.json").exists()
    assert spawned_in_own_python(value) == {"cmd": ECHO, "cwd": str(tmp_path), "loaded": []}
    # The next Neovim may encode the same tables' keys in another order.
    reordered = json.dumps(dict(reversed(json.loads(value).items())))
    assert reordered != value
    assert spawned_in_own_python(reordered)["loaded"] == []
    # Other options are another entry: resolved, not taken for the kept one.
    other = given(tmp_path, cmd=[*ECHO, "other"], cache=str(cache))
    assert spawned_in_own_python(other)["cmd"] == [*ECHO, "other"]
    assert spawned_in_own_python(value)["cmd"] == ECHO


def test_kept_launches_hold_neither_the_options_nor_an_agents_variables(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    options = {
        "agents": {
            "echo": {"cmd": ECHO},
            "keyed": {"cmd": [*ECHO, "keyed"], "env": {"SOME_KEY": "s3cret-value"}},
        },
        "default_agent": "echo",
    }
    for agent in ("echo", "keyed"):
        value = json.dumps({"options": options, "agent": agent, "cwd": str(tmp_path), "cache": str(cache)})
        first.spawn({**os.environ, first.ENV: value})
        assert first._waiting is not None
        first.end()
    text = (cache / "acp" / "first-agents.json").read_text()
    assert "s3cret" not in text and "SOME_KEY" not in text
    assert list(json.loads(text).values()) == [{"cmd": ECHO, "cwd": str(tmp_path)}]


@pytest.mark.anyio
async def test_a_kept_launch_the_chats_start_disagrees_with_is_dropped(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    value = given(tmp_path, cache=str(cache))
    first.spawn({**os.environ, first.ENV: value})
    first.end()
    store = cache / "acp" / "first-agents.json"
    [key] = json.loads(store.read_text())
    # Kept by an older version of the options' rules, say: another directory.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store.write_text(json.dumps({key: {"cmd": ECHO, "cwd": str(elsewhere)}}))
    first.spawn({**os.environ, first.ENV: value})
    waiting = first._waiting
    assert waiting is not None and waiting.cwd == str(elsewhere)
    agent = AgentProcess("echo", ECHO, cwd=str(tmp_path))
    await agent.start()
    try:
        assert agent.pid != waiting.popen.pid and not alive(waiting.popen.pid)
    finally:
        await agent.aclose()
    assert json.loads(store.read_text()) == {}
    first.spawn({**os.environ, first.ENV: value})  # resolved again, and right
    assert first._waiting is not None and first._waiting.cwd == str(tmp_path)
    assert json.loads(store.read_text()) == {key: {"cmd": ECHO, "cwd": str(tmp_path)}}


@pytest.mark.parametrize("content", ["{", "[1, 2]", '{"k": 3}', None])
def test_a_cache_that_cannot_be_read_is_no_entry(tmp_path: Path, content: str | None) -> None:
    store = tmp_path / "cache" / "acp" / "first-agents.json"
    store.parent.mkdir(parents=True)
    if content is None:
        store.mkdir()  # not a file: nothing can be read or written there
    else:
        store.write_text(content)
    first.spawn({**os.environ, first.ENV: given(tmp_path, cache=str(tmp_path / "cache"))})
    assert first._waiting is not None and first._waiting.cmd == ECHO
    if content is not None:
        assert [entry["cwd"] for entry in json.loads(store.read_text()).values()] == [str(tmp_path)]
    assert list(store.parent.glob("first-agents.json.*")) == []  # no half-written file left


@pytest.mark.parametrize(
    "case",
    ["unknown agent", "wrong options", "no such program", "no such directory", "not json", "unset"],
)
def test_what_cannot_start_starts_nothing_and_says_nothing(tmp_path: Path, case: str) -> None:
    # The chat's own start finds the same fault and says so in the chat.
    value = {
        "unknown agent": given(tmp_path, agent="nope"),
        "wrong options": json.dumps({"options": {"default_agent": 3}, "cwd": str(tmp_path)}),
        "no such program": given(tmp_path, cmd=[str(tmp_path / "missing")]),
        "no such directory": given(tmp_path / "gone"),
        "not json": "{",
        "unset": "",
    }[case]
    first.spawn({first.ENV: value})
    assert first._waiting is None


@pytest.mark.anyio
async def test_a_piped_process_closed_reads_nothing_more(tmp_path: Path) -> None:
    popen = subprocess.Popen(ECHO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = PipedProcess(popen)
    await process.aclose()  # its pipes closed: it exits (its write to stderr broke)
    assert process.returncode is not None and not alive(popen.pid)
    assert await receive(process.stdout) == b""


@pytest.mark.anyio
async def test_a_cancelled_read_takes_no_bytes(tmp_path: Path) -> None:
    popen = subprocess.Popen(ECHO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = PipedProcess(popen)
    try:
        await process.stdin.send(b"kept\n")
        assert popen.stdout is not None
        await anyio.wait_readable(popen.stdout.fileno())  # the line is there to take
        with anyio.CancelScope() as scope:
            scope.cancel()
            await process.stdout.receive()
        assert scope.cancelled_caught
        assert await process.stdout.receive() == b"kept\n"
    finally:
        await process.aclose()


# `python -m acp_nvim` up to serving Neovim, with a stand-in for the channel: what
# the host is like when it starts serving.
HOST_START = """
import gc, json, sys
import pynvim

def collections():
    return sum(generation["collections"] for generation in gc.get_stats())

class Channel:
    def run_loop(self, on_request, on_notification):
        print(json.dumps({
            "collecting": gc.isenabled(),
            "collections": collections() - before,
            "frozen": gc.get_freeze_count(),
            "chat_imported": "acp_nvim.client.session.chat" in sys.modules,
        }))

pynvim.attach = lambda *_: Channel()
from acp_nvim.__main__ import main
before = collections()
main()
"""


@pytest.mark.parametrize("agent_starting", [True, False], ids=["agent starting", "no agent"])
def test_the_host_starts_without_collecting_and_serves_collecting(
    tmp_path: Path, agent_starting: bool
) -> None:
    # Start-up's objects live as long as the process: no collection walks them while
    # they pile up. Served, the collector is on, and the modules' objects are frozen,
    # with the first chat's when its agent is already starting.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if agent_starting:
        env[first.ENV] = given(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", HOST_START], env=env, capture_output=True, text=True, timeout=60
    )
    report = json.loads(out.stdout)
    assert report["collections"] == 0
    assert report["collecting"] is True
    assert report["frozen"] > 10_000
    assert report["chat_imported"] is agent_starting
