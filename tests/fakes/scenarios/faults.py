"""Agents that misbehave: hang, flood, crash, speak garbage or ignore a cancel."""

from __future__ import annotations

__all__ = ["SCENARIOS"]

import os
import signal
import subprocess
import sys
import time

import anyio

from acp_nvim.protocol import RequestError
from tests.fakes.handshake import Agent, Params, Prompt, Scenario, echo


async def hang(agent: Agent, params: Params) -> None:
    """Never answer the request."""
    await anyio.sleep_forever()


async def banner(agent: Agent, params: Params) -> None:
    """Print on stdout what is no JSON (a banner, a login prompt), then never answer."""
    await agent.send.send(b"Fake Agent 1.0\n   Please log in at https://example.invalid/login   \n")
    await anyio.sleep_forever()


async def held(agent: Agent, params: Params) -> None:
    """Answer once the test releases the start: it opens the named pipe ``release``
    in the agent's directory for writing and closes it."""
    await anyio.to_thread.run_sync(lambda: open("release", "rb").read())  # noqa: SIM115


async def endless(agent: Agent, prompt: Prompt) -> str:
    """Streams until cancelled, then answers the way every real agent does; prompt
    "in code": inside a code block it opens first."""
    if prompt.text == "in code":
        await agent.say("Here:\n```python\n")
    i = 0
    while not agent.cancelled.is_set():
        await agent.say(f"tick{i} ")
        i += 1
        with anyio.move_on_after(0.005):
            await agent.cancelled.wait()
    return "cancelled"


async def ignore_cancel(agent: Agent, prompt: Prompt) -> str | None:
    """Goes on after a cancel: 100 more lines (2 s), then ends the turn cancelled;
    prompt "go long": 1000 lines (20 s). Prompts starting "after" are echoed."""
    if prompt.text.startswith("after"):
        await echo(agent, prompt)
        return None
    with anyio.move_on_after(30):
        left = 1000 if prompt.text == "go long" else 100
        for i in range(100_000):
            await agent.say(f"still working {i}\n")
            await anyio.sleep(0.02)
            left -= agent.cancelled.is_set()
            if not left:
                agent.cancelled = anyio.Event()
                return "cancelled"
    return None


async def hold(agent: Agent, prompt: Prompt) -> str | None:
    """Prompt "hold": says "holding" and waits for a cancel; anything else is echoed."""
    if prompt.text != "hold":
        await echo(agent, prompt)
        return None
    await agent.say("holding")
    return await agent.until_cancelled()


async def hold_then_crash(agent: Agent, prompt: Prompt) -> None:
    """Prompt "hold": as `hold`, but dies on the cancel instead of ending the turn."""
    if prompt.text != "hold":
        await echo(agent, prompt)
        return
    await agent.say("holding")
    await agent.cancelled.wait()
    os._exit(2)


async def stubborn(agent: Agent, prompt: Prompt) -> None:
    """Deaf to hang-ups, a grandchild in its group; says both pids."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "300"])
    await agent.say(f"pids {os.getpid()} {child.pid}")


async def leave_child(agent: Agent, prompt: Prompt) -> None:
    """Prompt "child": starts a child that keeps the agent's stdout open and says
    both pids; "die": says so and exits mid-turn, the child living on."""
    if prompt.text == "die":
        await agent.say("dying")
        os._exit(2)
    child = subprocess.Popen(["sleep", "300"])  # stdin, stdout and stderr are the agent's
    await agent.say(f"pids {os.getpid()} {child.pid}")


async def huge_line(agent: Agent, prompt: Prompt) -> None:
    await agent.say("x" * 2_000_000 + "\nafter the long line")


async def huge_ints(agent: Agent, prompt: Prompt) -> None:
    """Integers past the schema's uint64 and uint32 between text, then a usage within them."""
    await agent.say("before the numbers ")
    await agent.update({"sessionUpdate": "usage_update", "used": 2**64, "size": 1})
    location = {"path": "a.txt", "line": 2**64}
    await agent.update({"sessionUpdate": "tool_call", "toolCallId": "far",
                        "title": "Read far", "locations": [location]})  # fmt: skip
    await agent.say("after the numbers")
    await agent.update({"sessionUpdate": "usage_update", "used": 2**40, "size": 1})


async def stderr_flood(agent: Agent, prompt: Prompt) -> None:
    """8 MB of stderr without a newline, then a crash."""
    for _ in range(8):
        sys.stderr.write("e" * 1_000_000)
    sys.stderr.flush()
    os._exit(3)


async def crash_mid_turn(agent: Agent, prompt: Prompt) -> None:
    await agent.say("about to crash")
    sys.stderr.write("fatal: the fake agent broke on purpose\n")
    sys.stderr.flush()
    os._exit(2)


async def close_output(agent: Agent, prompt: Prompt) -> None:
    """A chunk, then stdout closed while the process lives on."""
    await agent.say("one chunk")
    await agent.send.aclose()  # a dup of fd 1
    os.close(1)
    time.sleep(60)  # blocks the loop too: nothing more is read or written


async def vendor(agent: Agent, prompt: Prompt) -> None:
    """A vendor request and a vendor notification mid-turn, then text."""
    try:
        await agent.c.request("craft/drainMidTurnQueue", {})
    except RequestError as err:
        await agent.say(f"vendor request answered {err.code}. ")
    await agent.c.notify("qwen/notify/session/mode-update", {"mode": "x"})
    await agent.update({"sessionUpdate": "_sparkle", "glitter": True})
    await agent.say("still here")


async def garbage(agent: Agent, prompt: Prompt) -> None:
    """A line that is not JSON, one nested past any recursion limit, a 70 MB line,
    then text."""
    await agent.send.send(b"{not json\n")
    await agent.send.send(b"[" * 100_000 + b"\n")
    await agent.send.send(
        b'{"jsonrpc": "2.0", "method": "x", "params": ' + b"1" * 70_000_000 + b"}\n"
    )
    await agent.say("after garbage")


async def nul_title(agent: Agent, prompt: Prompt) -> None:
    """A session title holding a NUL byte (which the winbar cannot show), then the
    reply to the prompt."""
    await agent.update({"sessionUpdate": "session_info_update", "title": "odd\u0000title"})
    await agent.say(f"The reply to {prompt.text}.")


SCENARIOS = (
    Scenario("silent_init", before={"initialize": hang}),
    Scenario("silent_new", before={"session/new": hang}),
    Scenario("banner_init", before={"initialize": banner}),
    Scenario("held_init", before={"initialize": held}),
    Scenario("bad_version", protocol_version=7),
    Scenario("endless", endless),
    Scenario("ignore_cancel", ignore_cancel, v2={}),
    Scenario("hold", hold, v2={}),
    Scenario("hold_then_crash", hold_then_crash),
    Scenario("stubborn", stubborn, stays=True),  # stays after stdin closes too
    Scenario("leave_child", leave_child),
    Scenario("huge_line", huge_line),
    Scenario("huge_ints", huge_ints),
    Scenario("stderr_flood", stderr_flood),
    Scenario("crash_mid_turn", crash_mid_turn),
    Scenario("close_output", close_output),
    Scenario("vendor", vendor),
    Scenario("garbage", garbage),
    Scenario("nul_title", nul_title),
)
