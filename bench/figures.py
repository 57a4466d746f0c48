"""The measurements. Each function runs ONE repetition in a fresh Neovim and
returns named figures (milliseconds unless the name says otherwise)."""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.agent import burst_text
from bench.harness import Nvim, Pinger, nonce, rss_kb

Figures = dict[str, Any]
MS = 1e6


def p99(
    samples: list[tuple[int, int, int, int]], start: int, end: int, neovim: bool = False
) -> float:
    """p99 (ms) of the pings sent in [start, end] (NaN without any): round trips,
    or with ``neovim`` only the wait from the request in the socket until Neovim ran it."""
    rtts = sorted(
        (answered - sent if neovim else rtt)
        for begun, rtt, sent, answered in samples
        if start <= begun <= end
    )
    if not rtts:
        return float("nan")
    return rtts[min(len(rtts) - 1, int(0.99 * len(rtts)))] / MS


def _plugin_burst(n: Nvim, buf: int, count: int, ping: bool) -> tuple[float, float, float]:
    key = nonce()
    pinger = Pinger(n.socket) if ping else None
    seen, stamp = n.turn(buf, f"burst {count} {key}", f"END{key}")
    pings = pinger.stop() if pinger else []
    text = n.buffer_text(buf)
    if burst_text(count, key) not in text + "\n":
        raise AssertionError("the transcript does not hold the streamed text")
    return (
        (seen - stamp["first_ns"]) / MS,
        (seen - stamp["last_ns"]) / MS,
        p99(pings, stamp["first_ns"], seen),
    )


def _floor_burst(n: Nvim, count: int) -> tuple[float, float, float]:
    key = nonce()
    pinger = Pinger(n.socket)
    seen, stamp, buf = n.floor(f"burst {count} {key}", f"END{key}")
    pings = pinger.stop()
    if n.buffer_text(buf) != burst_text(count, key):
        raise AssertionError("the floor buffer does not hold the streamed text")
    n.nvim.command("close")
    return (
        (seen - stamp["first_ns"]) / MS,
        (seen - stamp["last_ns"]) / MS,
        p99(pings, stamp["first_ns"], seen),
    )


def streaming(run: int, count: int = 10_000, fill: int = 100_000) -> Figures:
    """Burst through the plugin and through the Lua floor (order alternates per
    run), then the same burst again after a ``fill``-line message."""
    n = Nvim()
    try:
        n.setup()
        buf = n.open_chat()
        # Warm-up: imports, JIT and first-use costs are start-up, not streaming.
        _plugin_burst(n, buf, 200, ping=False)
        _floor_burst(n, 200)
        figures: Figures = {}
        for who in ("plugin", "floor") if run % 2 == 0 else ("floor", "plugin"):
            if who == "plugin":
                total, tail, ping = _plugin_burst(n, buf, count, ping=True)
            else:
                total, tail, ping = _floor_burst(n, count)
            figures[f"{who}_total"], figures[f"{who}_tail"], figures[f"{who}_p99"] = (
                total,
                tail,
                ping,
            )
        n.turn(buf, f"fill {fill}", f"filler line {fill - 1:08d}")
        lines = int(n.lua("return vim.api.nvim_buf_line_count(...)", buf))
        full, _, _ = _plugin_burst(n, buf, count, ping=False)
        figures["transcript_lines"] = lines
        figures["chunk_us_empty"] = figures["plugin_total"] * 1000 / count
        figures["chunk_us_full"] = full * 1000 / count
        return figures
    finally:
        n.quit()


def _reads(n: Nvim, count: int, paths: list[str]) -> dict[str, Any]:
    """One prompt making the agent read each of ``paths`` ``count`` times; its stamp."""
    n.lua("require('acp').send(...)", f"read {count} {' '.join(paths)}")
    n.wait("AcpTurnEnd")
    return n.last_stamp()


def fs_read(run: int, sizes: tuple[int, ...] = (100, 10_000, 100_000), count: int = 20) -> Figures:
    """``fs/read_text_file`` round trips seen by the agent, on loaded buffers."""
    n = Nvim()
    try:
        n.setup()
        paths = []
        for size in sizes:
            path = n.project / f"lines_{size}.py"
            path.write_text(
                "".join(
                    f"value_{i} = {i} * 2  # a line of about forty bytes\n" for i in range(size)
                )
            )
            n.lua("vim.fn.bufload(vim.fn.bufadd(...))", str(path))
            paths.append(str(path))
        n.open_chat()
        cold = _reads(n, count, paths)
        if "error" in cold:
            return {"skip": f"fs/read_text_file answered {cold['error']}"}
        # Like a user typing in each buffer while the agent reads it again.
        n.lua("bench.typist(...)", paths, 5)
        edited = _reads(n, count, paths)
        n.lua("bench.typist({})")
        figures: Figures = {}
        for size, path in zip(sizes, paths, strict=True):
            figures[f"read_first_{size}"] = cold["times"][path][0] / MS
            figures[f"read_p50_{size}"] = statistics.median(cold["times"][path]) / MS
            figures[f"read_edited_p50_{size}"] = statistics.median(edited["times"][path]) / MS
        return figures
    finally:
        n.quit()


def mcp_read(run: int, size: int = 10_000, count: int = 20) -> Figures:
    """``read_buffer`` round trips through the editor MCP server's stdio shim, as the
    agent sees them, on a loaded buffer of ``size`` lines (the first read included)."""
    n = Nvim()
    try:
        n.setup()
        path = n.project / f"lines_{size}.py"
        path.write_text(
            "".join(f"value_{i} = {i} * 2  # a line of about forty bytes\n" for i in range(size))
        )
        n.lua("vim.fn.bufload(vim.fn.bufadd(...))", str(path))
        n.open_chat()
        n.lua("require('acp').send(...)", f"mcp_read {count} {path}")
        n.wait("AcpTurnEnd")
        stamp = n.last_stamp()
        if "error" in stamp:
            return {"skip": f"the editor MCP server answered {stamp['error']}"}
        times = stamp["times"][str(path)]
        return {
            "mcp_start": stamp["start_ns"] / MS,
            "mcp_read_first": times[0] / MS,
            "mcp_read_p50": statistics.median(times) / MS,
        }
    finally:
        n.quit()


def agent_own_start(cmd: list[str], cwd: str) -> float:
    """Spawn → ``session/new`` answered, talking to the agent directly (ms)."""
    init = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
        '"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false},'
        '"clientInfo":{"name":"acp-bench","version":"0"}}}\n'
    )
    start = time.monotonic_ns()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(init)
        proc.stdin.flush()
        while '"id":1' not in proc.stdout.readline().replace(" ", ""):
            pass
        params = {"cwd": cwd, "mcpServers": []}
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params})
        )
        proc.stdin.write("\n")
        proc.stdin.flush()
        while '"id":2' not in proc.stdout.readline().replace(" ", ""):
            pass
        return (time.monotonic_ns() - start) / MS
    finally:
        proc.kill()
        proc.wait()


def startup(run: int, agent: str | None = None) -> Figures:
    """``:AcpChat`` → AcpSessionReady in a fresh Neovim (cold Python host), and
    the agent's own start measured alone."""
    cmd = shlex.split(agent) if agent else [sys.executable, "-m", "acp_nvim.demo_agent"]
    n = Nvim()
    try:
        n.lua(
            "require('acp').setup(...)",
            {"python": sys.executable, "agents": {"measured": {"cmd": cmd}}},
        )
        n.lua("_G.bench.startup(...)", n.chan, "measured")
        total = int(n.wait("startup", 60)[0]) / MS
        own = agent_own_start(cmd, str(n.project))
        return {"startup_total": total, "agent_own": own, "startup_plugin": total - own}
    finally:
        n.quit()


def tools(run: int, count: int = 1000) -> Figures:
    """``count`` tool calls each completed by an update carrying a 5 KB diff."""
    n = Nvim()
    try:
        n.setup()
        buf = n.open_chat()
        key = nonce()
        seen, stamp = n.turn(buf, f"tools {count} {key}", f"END{key}", timeout=300)
        return {
            "tools_total": (seen - stamp["first_ns"]) / MS,
            "tools_tail": (seen - stamp["last_ns"]) / MS,
        }
    finally:
        n.quit()


def edits(run: int, changed: int = 1000) -> Figures:
    """An edit replacing ``changed`` lines (100 hunks of 10) of a file shown in a
    window: its preview at a permission request, then its marks after an
    ``fs/write_text_file``; the Lua time of the batch drawing each, and of the
    drawing alone."""
    n = Nvim()
    try:
        n.setup()
        path = n.project / "edited.py"
        path.write_text(
            "".join(f"value_{i} = {i}  # a line of about forty bytes\n" for i in range(4 * changed))
        )
        n.nvim.command(f"edit {path}")
        buf = int(n.lua("return vim.api.nvim_get_current_buf()"))
        n.lua("_G.bench.batches(...)", n.chan)
        n.open_chat()
        figures: Figures = {}
        count_marks = (
            "local buf, name = ...; local ns = vim.api.nvim_get_namespaces()[name]"
            "; return #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {})"
        )
        for command, part, namespace in (("ask", 2, "acp.preview"), ("write", 1, "acp.review")):
            n.reports("batch")
            n.lua("require('acp').send(...)", f"{command} {path} {changed}")
            if command == "ask":  # the preview is drawn while the request waits
                batch = n.wait("batch")
                while not int(batch[2]):
                    batch = n.wait("batch")
                drawn = n.lua(count_marks, buf, namespace)
                n.lua("_G.bench.answer()")
                n.wait("AcpTurnEnd")
            else:
                n.wait("AcpTurnEnd")
                batch = max(n.reports("batch"), key=lambda b: int(b[part]))
                drawn = n.lua(count_marks, buf, namespace)
            if drawn < changed // 10:
                raise AssertionError(f"{command}: {drawn} marks drawn for {changed // 10} hunks")
            figures[f"{command}_batch"] = int(batch[0]) / MS
            figures[f"{command}_draw"] = int(batch[part]) / MS
        return figures
    finally:
        n.quit()


def memory(run: int, chunks: int = 100_000, calls: int = 1000) -> Figures:
    """Python host RSS after a chat with ``chunks`` chunks and ``calls`` tool calls;
    then that chat closed and the same again in a new one."""
    n = Nvim()
    try:
        n.setup()
        figures: Figures = {}
        for round_ in (1, 2):
            buf = n.open_chat()
            for prompt in (f"burst {chunks}", f"tools {calls}"):
                key = nonce()
                n.turn(buf, f"{prompt} {key}", f"END{key}", timeout=600)
            figures[f"rss_mb_{round_}"] = rss_kb(n.host_pid()) / 1024
            n.lua("require('acp').close()")
        figures["rss_growth_mb"] = figures["rss_mb_2"] - figures["rss_mb_1"]
        return figures
    finally:
        n.quit()
