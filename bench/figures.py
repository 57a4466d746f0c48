"""The measurements. Each function runs ONE repetition in a fresh Neovim and
returns named figures (milliseconds unless the name says otherwise)."""

from __future__ import annotations

import atexit
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.agent import burst_text
from bench.harness import AGENT, ROOT, Nvim, Pinger, Ui, nonce, rss_kb

Figures = dict[str, Any]
MS = 1e6
# How long the pinger keeps going once a burst is on screen: what a client defers
# past a burst (the transcript's syntax back after a flood, 250 ms later) shows
# as a slow ping in this window.
AFTER_S = 0.6


def slowest(samples: list[tuple[int, int, int, int]], start: int) -> float:
    """The slowest round trip (ms) of the pings sent after ``start`` (NaN without any)."""
    return max((rtt for begun, rtt, _, _ in samples if begun > start), default=float("nan")) / MS


def p99(
    samples: list[tuple[int, int, int, int]],
    start: int = 0,
    end: int = 2**63,
    neovim: bool = False,
) -> float:
    """p99 (ms) of the pings sent in [start, end] (default: all; NaN without any): round
    trips, or with ``neovim`` only the wait from the request in the socket until Neovim
    ran it. Of fewer than 100 pings, that is their slowest."""
    rtts = sorted(
        (answered - sent if neovim else rtt)
        for begun, rtt, sent, answered in samples
        if start <= begun <= end
    )
    if not rtts:
        return float("nan")
    return rtts[min(len(rtts) - 1, int(0.99 * len(rtts)))] / MS


class _Burst:
    """One burst's figures (ms): first byte → visible, last byte → visible, the
    agent's own write time, first byte → text in the buffer, ping p99, the
    longest batch the plugin had Neovim apply (0 for the floors), the slowest ping
    in the :data:`AFTER_S` after the end was on screen."""

    def __init__(
        self, seen: int, shown: int, stamp: dict[str, Any], pings: list[Any], batch: float = 0
    ) -> None:
        self.total = (shown - stamp["first_ns"]) / MS
        self.tail = (shown - stamp["last_ns"]) / MS
        self.write = (stamp["last_ns"] - stamp["first_ns"]) / MS
        self.buffer = (seen - stamp["first_ns"]) / MS
        self.p99 = p99(pings, stamp["first_ns"], shown)
        self.after = slowest(pings, shown)
        self.batch = batch


def longest_batch(n: Nvim) -> float:
    """The longest batch applied since the last call (ms; see bench.lua time_batches)."""
    return longest_batches(n)[0]


def longest_batches(n: Nvim) -> tuple[float, float]:
    """The longest batch applied since the last call, and the most CPU time Neovim
    used in one (ms; see bench.lua time_batches)."""
    batches = n.lua("return _G.bench.applied()") or [[0, 0]]
    return max(wall for wall, _ in batches) / MS, max(cpu for _, cpu in batches) / MS


def _settle(n: Nvim) -> None:
    """Collect Lua's garbage, untimed, before a client's burst. A 10k burst through a
    Lua floor leaves 8-10 MB of it in Neovim (``vim.json.decode``'s tables; ours
    0.7 MB), and LuaJIT's collector has the allocations after it pay for sweeping it:
    whichever client came next paid for a floor's decoding (README, honesty rules).
    Each client's burst of a side-by-side round starts so; a burst after the same
    client's own work (the 100k-line transcript's, after the fill) pays for its own."""
    n.lua("collectgarbage()")


def _plugin_burst(n: Nvim, ui: Ui | None, buf: int, count: int, ping: bool) -> _Burst:
    key = nonce()
    pinger = Pinger(n.socket) if ping else None
    if ui is not None:
        ui.watch(f"END{key}")
    longest_batch(n)
    seen, stamp = n.turn(buf, f"burst {count} {key}", f"END{key}")
    shown = ui.seen() if ui is not None else seen
    if pinger:
        time.sleep(AFTER_S)
    pings = pinger.stop() if pinger else []
    batch = longest_batch(n)
    text = n.buffer_text(buf)
    if burst_text(count, key) not in text + "\n":
        raise AssertionError("the transcript does not hold the streamed text")
    return _Burst(seen, shown, stamp, pings, batch)


def _floor_burst(n: Nvim, ui: Ui, count: int, strong: bool = True) -> _Burst:
    key = nonce()
    pinger = Pinger(n.socket)
    ui.watch(f"END{key}")
    seen, stamp, buf = n.floor(f"burst {count} {key}", f"END{key}", strong=strong)
    shown = ui.seen()
    time.sleep(AFTER_S)
    pings = pinger.stop()
    if n.buffer_text(buf) != burst_text(count, key):
        raise AssertionError("the floor buffer does not hold the streamed text")
    n.nvim.command("close")
    return _Burst(seen, shown, stamp, pings)


CLIENTS = ("plugin", "floor", "jobstart")


def _side_by_side(n: Nvim, ui: Ui, buf: int, run: int, count: int) -> dict[str, _Burst]:
    """``count`` chunks through each client, in an order that rotates per run."""
    bursts = {}
    for who in CLIENTS[run % 3 :] + CLIENTS[: run % 3]:
        _settle(n)
        if who == "plugin":
            bursts[who] = _plugin_burst(n, ui, buf, count, ping=True)
        else:
            bursts[who] = _floor_burst(n, ui, count, strong=who == "floor")
    return bursts


def _with_ui() -> tuple[Nvim, Ui, int]:
    """A fresh Neovim with a UI, a chat open, every path warmed up (imports, JIT
    and first-use costs are start-up, not streaming)."""
    n = Nvim()
    ui = Ui(n.socket)
    n.setup()
    n.lua("_G.bench.time_batches()")
    buf = n.open_chat()
    _plugin_burst(n, ui, buf, 200, ping=False)
    _floor_burst(n, ui, 200)
    _floor_burst(n, ui, 200, strong=False)
    return n, ui, buf


def streaming(run: int, count: int = 10_000, fill: int = 100_000) -> Figures:
    """A burst through the plugin and both Lua floors with a UI attached, then
    the same burst again after a ``fill``-line message."""
    n, ui, buf = _with_ui()
    try:
        figures: Figures = {}
        bursts = _side_by_side(n, ui, buf, run, count)
        for who, burst in bursts.items():
            figures[f"{who}_total"], figures[f"{who}_tail"] = burst.total, burst.tail
            figures[f"{who}_buffer"], figures[f"{who}_p99"] = burst.buffer, burst.p99
            figures[f"{who}_after"] = burst.after
        figures["plugin_batch"] = bursts["plugin"].batch
        n.turn(buf, f"fill {fill}", f"filler line {fill - 1:08d}")
        figures["fill_batch"], figures["fill_batch_cpu"] = longest_batches(n)
        lines = int(n.lua("return vim.api.nvim_buf_line_count(...)", buf))
        full = _plugin_burst(n, ui, buf, count, ping=False)
        figures["transcript_lines"] = lines
        figures["chunk_us_empty"] = figures["plugin_buffer"] * 1000 / count
        figures["chunk_us_full"] = full.buffer * 1000 / count
        return figures
    finally:
        ui.close()
        n.quit()


def streaming_50k(run: int, count: int = 50_000) -> Figures:
    """A long burst: does the reader keep up with the writer (the agent's own
    write time: it waits on a full pipe when it does not)."""
    n, ui, buf = _with_ui()
    try:
        figures: Figures = {}
        bursts = _side_by_side(n, ui, buf, run, count)
        for who, burst in bursts.items():
            figures[f"{who}_total"], figures[f"{who}_write"] = burst.total, burst.write
            figures[f"{who}_p99"], figures[f"{who}_after"] = burst.p99, burst.after
        figures["plugin_batch"] = bursts["plugin"].batch
        return figures
    finally:
        ui.close()
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


# Shell lines an agent runs through terminal/create, each with the end its output
# must have: the size of a test suite's or a build's log, in long and short lines.
TERMINAL_LINES = {
    "seq": ("seq 1 200000", "199999\n200000\n"),
    "yes": ("yes | head -c 1000000; echo END", "y\ny\nEND\n"),
}


def _cpu_s(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def terminal(run: int, limit: int = 100) -> Figures:
    """Each of TERMINAL_LINES through ``terminal/create`` (create → exit answered, as
    the agent sees it; the agent shows it in a tool call) and in a bare hidden
    terminal buffer in the same Neovim (the floor: Neovim's own terminal, nothing of
    ours); a UI attached, so both terminals are as wide as its screen and the
    transcript is drawn as the tail changes. The order alternates per run."""
    n = Nvim()
    ui = Ui(n.socket)
    try:
        n.setup()
        n.open_chat()
        host = n.host_pid()
        n.lua("_G.bench.busy(false)")
        figures: Figures = {}

        def ours(name: str, line: str, end: str) -> None:
            cpu, host_cpu = n.lua("return _G.bench.cpu_used()"), _cpu_s(host)
            n.lua("_G.bench.stretches = {}")
            n.lua("require('acp').send(...)", f"terminal {limit} {line}")
            n.wait("AcpTurnEnd", timeout=300)
            stamp = n.last_stamp("terminal")
            if "error" in stamp or stamp["exit"] != {"exitCode": 0}:
                raise RuntimeError(f"{line!r}: {stamp.get('error') or stamp['exit']}")
            if not stamp["output"].endswith(end) or len(stamp["output"].encode()) > limit:
                raise RuntimeError(f"{line!r}: wrong output end {stamp['output'][-40:]!r}")
            figures[f"term_{name}"] = (stamp["exit_ns"] - stamp["first_ns"]) / MS
            figures[f"term_{name}_cpu"] = (n.lua("return _G.bench.cpu_used()") - cpu) / MS
            figures[f"term_{name}_host_cpu"] = (_cpu_s(host) - host_cpu) * 1000
            figures[f"term_{name}_turn"] = _longest_stretch(n)

        def floor(name: str, line: str) -> None:
            n.lua("_G.bench.stretches = {}")
            n.lua("_G.bench.terminal_floor(...)", line, n.chan)
            start, end, cpu = n.wait("terminal_floor", timeout=300)
            figures[f"term_{name}_floor"] = (end - start) / MS
            figures[f"term_{name}_floor_cpu"] = cpu / MS
            figures[f"term_{name}_floor_turn"] = _longest_stretch(n)

        for name, (line, end) in TERMINAL_LINES.items():
            if run % 2:
                floor(name, line)
                ours(name, line, end)
            else:
                ours(name, line, end)
                floor(name, line)
        return figures
    finally:
        ui.close()
        n.quit()


def _longest_stretch(n: Nvim) -> float:
    """Neovim's longest turn of its event loop since ``bench.stretches`` was emptied (ms)."""
    return max((took for _, took in n.lua("return _G.bench.stretches")), default=0) / MS


def _answer(out: Any, request: int) -> None:
    """Read the agent's stdout up to its answer to ``request`` (an agent that exits
    first fails the run, rather than spinning on an empty read forever)."""
    while True:
        line = out.readline()
        if not line:
            raise RuntimeError(f"the agent exited before answering request {request}")
        if f'"id":{request}' in line.replace(" ", ""):
            return


PYTHONPATH = os.environ.get("PYTHONPATH")


def agent_own_start(cmd: list[str], cwd: str) -> float:
    """Spawn → ``session/new`` answered, talking to the agent directly (ms). With the
    ``PYTHONPATH`` the host gives the agents it starts (the plugin's root first): the
    demo agent measured is this checkout's, as ``:AcpChat`` starts it, not whichever
    one an editable install of the package points at."""
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
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), PYTHONPATH]))},
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(init)
        proc.stdin.flush()
        _answer(proc.stdout, 1)
        params = {"cwd": cwd, "mcpServers": []}
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params})
        )
        proc.stdin.write("\n")
        proc.stdin.flush()
        _answer(proc.stdout, 2)
        return (time.monotonic_ns() - start) / MS
    finally:
        proc.kill()
        proc.wait()


# Starts per run of the startup group: on a 2-core machine one start is one draw from
# a spread with two peaks (~155 and ~220 ms to ready, minute to minute), so a run
# takes the median of several.
STARTS = 5


def startup(run: int, agent: str | None = None, starts: int = STARTS) -> Figures:
    """``:AcpChat`` → AcpSessionReady in a fresh Neovim (cold Python host), twice in
    the same project and XDG dirs: the first start there, then a later one, which
    finds the launch the first kept (decision 0066); and the agent's own start alone.
    Each the median of ``starts`` such pairs, each pair in dirs of its own."""
    cmd = shlex.split(agent) if agent else [sys.executable, "-m", "acp_nvim.demo_agent"]
    options = {"python": sys.executable, "agents": {"measured": {"cmd": cmd}}}
    firsts, laters, owns = [], [], []
    for _ in range(starts):
        first = Nvim()
        try:
            firsts.append(_chat_ready(first, options))
        finally:
            first.quit(keep=True)
        n = Nvim(first.tmp)
        try:
            laters.append(_chat_ready(n, options))
        finally:
            n.quit(keep=True)
        # Once Neovim has quit (its host and agents end with it): beside the chat, the
        # agent measured alone shared the cores with the chat's work after ready (the
        # review's scan, the history's store).
        try:
            owns.append(agent_own_start(cmd, str(n.project)))
        finally:
            shutil.rmtree(n.tmp, ignore_errors=True)
    total, first_total, own = (statistics.median(v) for v in (laters, firsts, owns))
    return {
        "startup_total": total,
        "startup_first": first_total,
        "agent_own": own,
        "startup_plugin": total - own,
        "startup_first_plugin": first_total - own,
    }


def _chat_ready(n: Nvim, options: dict[str, Any]) -> float:
    """``:AcpChat measured`` → AcpSessionReady (ms)."""
    n.lua("require('acp').setup(...)", options)
    n.lua("_G.bench.startup(...)", n.chan, "measured")
    return int(n.wait("startup", 60)[0]) / MS


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
                n.wait("AcpPermissionRequest")  # its event may come in a later batch
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


# The host's memory is read once it is idle after a turn: the chat history writes
# the turn at most 0.5 s after its end and 0.25 s after Neovim drew it (decision
# 0072), then gives back what the write freed. Read at the turn's end, the RSS was
# 63-94 MB run to run for the same held memory.
SETTLED_S = 1.5


def memory(run: int, chunks: int = 100_000, calls: int = 1000) -> Figures:
    """Python host RSS after a chat with ``chunks`` chunks and ``calls`` tool calls,
    the host idle; then that chat closed and the same again in a new one, twice. The
    first chat's agent starts with the host (decision 0051), the others as any later
    chat's: the growth is the third's over the second's, two chats started alike."""
    n = Nvim()
    try:
        n.setup()
        figures: Figures = {}
        for round_ in (1, 2, 3):
            buf = n.open_chat()
            for prompt in (f"burst {chunks}", f"tools {calls}"):
                key = nonce()
                n.turn(buf, f"{prompt} {key}", f"END{key}", timeout=600)
            time.sleep(SETTLED_S)
            figures[f"rss_mb_{round_}"] = rss_kb(n.host_pid()) / 1024
            n.lua("require('acp').close()")
        figures["rss_growth_mb"] = figures["rss_mb_3"] - figures["rss_mb_2"]
        return figures
    finally:
        n.quit()


_trees: dict[int, Path] = {}


def git_tree(files: int = 20_000, dirty: int = 200) -> Path:
    """A git work tree of ``files`` small committed files, ``dirty`` of them edited
    since (built once per process: ``git add`` of 20k files takes a while)."""
    if files not in _trees:
        root = Path(tempfile.mkdtemp(prefix="acp-bench-tree-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        for i in range(files):
            folder = root / f"pkg{i // 100:03d}"
            folder.mkdir(exist_ok=True)
            (folder / f"mod{i % 100:02d}.py").write_text(f"value = {i}\n" * 5)
        git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=b@x"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "tree"], check=True)
        for i in range(0, files, files // dirty):
            (root / f"pkg{i // 100:03d}" / f"mod{i % 100:02d}.py").write_text("edited = 1\n")
        _trees[files] = root
    return _trees[files]


def turn_start(
    run: int, files: int = 20_000, pings_ms: int = 3000, rounds: int = 5, after_ms: int = 5
) -> Figures:
    """A turn started in a git work tree of ``files`` files while another chat's agent
    measures the worker loop: it sends a request every millisecond and times the
    answer. The turn start: sent → its prompt reached the agent; its end: the agent's
    last update written → AcpTurnEnd (the review's last check is in it); Neovim's
    longest turn of its event loop, meanwhile and the second before.
    Then ``rounds`` rounds of a turn start of ours and one of the strong floor's in
    the same tree, prober and Neovim: the pings sent in the ``after_ms`` after each
    send pooled per client (the same span for both, so as many pings: the floor's
    prompt reaches its agent in ~0.6 ms, and its window alone held 0-2), and the CPU
    time of Neovim's loop turns in that span, the median of the rounds.
    Neovim's ping p99 meanwhile (sent → prompt at the agent) is compared with the
    second before, the loop prober already running (its requests cost the host and
    the cores too), each pooled over all of a client's turn starts: one window
    (2-3 ms) holds 0-4 pings, too few for a p99 of its own (decision 0064). And
    with a Neovim left alone."""
    tree = git_tree(files)
    n = Nvim()
    ui = Ui(n.socket)
    try:
        n.setup()
        pinging, _ = n.open_chat_in(n.project, "other")
        chat, _ = n.open_chat_in(tree)
        # Warm-up: imports, the review's first use, the tree in the page cache.
        n.send_to(chat, f"burst 10 {nonce()}")
        n.wait_turn_end(chat)
        alone = Pinger(n.socket)
        time.sleep(1)
        alone_pings = alone.stop()
        n.lua("_G.bench.busy(true)")

        def turn_start_pinged(
            chat: int | None, wait: Any, after_ms: int = 0
        ) -> tuple[list[Any], int, int, int, int]:
            """One turn start in ``chat`` (None: the strong floor's), the prober and
            the pinger running from a second before and at least ``after_ms`` after
            the send: the pings, their start, when it was sent, when the prompt
            arrived and when its turn ended (``wait``). Neovim sends it on a timer
            while this process waits in a blocking read (bench.lua send_later)."""
            n.send_to(pinging, f"pings {pings_ms}")
            time.sleep(0.3)  # the pings are under way
            pinger = Pinger(n.socket)
            before = time.monotonic_ns()
            n.lua("_G.bench.send_later(...)", 1000, f"burst 10 {nonce()}", chat)
            ended = wait()
            sent = int(n.lua("return _G.bench.sent"))
            time.sleep(max(0, sent + after_ms * MS - time.monotonic_ns()) / 1e9)
            pings = pinger.stop()
            n.wait_turn_end(pinging)
            return pings, before, sent, n.last_stamp("burst")["first_ns"], ended

        meanwhile: dict[str, list[Any]] = {"ours": [], "floor": []}
        second_before: dict[str, list[Any]] = {"ours": [], "floor": []}

        def pool(name: str, pings: list[Any], before: int, sent: int, started: int) -> None:
            meanwhile[name] += [ping for ping in pings if sent <= ping[0] <= started]
            second_before[name] += [ping for ping in pings if before <= ping[0] < sent]

        ours = (chat, lambda: n.wait_turn_end(chat))
        pings, before, sent, started, ended = turn_start_pinged(*ours)
        pool("ours", pings, before, sent, started)
        burst = n.last_stamp("burst")
        samples = n.last_stamp("pings")["samples"]
        during = [rtt for begun, rtt in samples if begun + rtt >= sent and begun <= started]
        usual = [rtt for begun, rtt in samples if begun + rtt < sent]
        stretches = n.lua("return _G.bench.stretches")

        def busiest(start: int, end: int) -> float:  # the stretches that overlap [start, end)
            return max((t for at, t in stretches if at < end and at + t >= start), default=0) / MS

        figures = {
            "turn_start": (started - sent) / MS,
            "turn_end": (ended - burst["last_ns"]) / MS,
            # NaN when no answer overlapped: a window of ~1 ms fits between two of them.
            "loop_stall": max(during, default=float("nan")) / MS,
            "loop_rtt_before": statistics.median(usual) / MS,
            "nvim_p99_alone": p99(alone_pings),
            "nvim_busy_turn_start": busiest(sent, started),
            "nvim_busy_idle": busiest(before, sent - 1),
        }
        n.lua("_G.bench.floor_chat(...)", [*AGENT, n.stamps], str(tree), n.chan)
        n.wait("floor_ready")
        floor = (None, lambda: n.wait("floor_end"))
        n.lua("_G.bench.floor_send(...)", f"burst 10 {nonce()}")  # warm-up, as ours had
        n.wait("floor_end")
        windows: dict[str, list[float]] = {"ours": [], "floor": []}
        met: dict[str, list[float]] = {"ours": [], "floor": []}
        cpu: dict[str, list[float]] = {"ours": [], "floor": []}
        for _ in range(rounds):
            for name, client in (("ours", ours), ("floor", floor)):
                pings, before, sent, started, _ = turn_start_pinged(*client, after_ms)
                pool(name, pings, before, sent, started)
                windows[name].append((started - sent) / MS)
                end = sent + after_ms * MS
                met[name] += [rtt / MS for begun, rtt, _, _ in pings if sent <= begun <= end]
                cpu[name].append(n.lua("return _G.bench.cpu_between(...)", sent, end) / MS)
        for name in ("ours", "floor"):
            figures[f"{name}_rounds_turn_start"] = statistics.median(windows[name])
            figures[f"{name}_rounds_pings"] = len(met[name])
            figures[f"{name}_rounds_slowest"] = max(met[name], default=float("nan"))
            figures[f"{name}_rounds_cpu"] = statistics.median(cpu[name])
            figures[f"{name}_p99_turn_start"] = p99(meanwhile[name])
            figures[f"{name}_p99_idle"] = p99(second_before[name])
            figures[f"{name}_pings_turn_start"] = len(meanwhile[name])
        return figures
    finally:
        ui.close()
        n.quit()


def big_lines(run: int, pings_ms: int = 4000) -> Figures:
    """One legal line of 1-17 MB of each kind (``big`` of bench/agent.py) while another
    chat's agent measures the worker loop as in turn_start: the longest answer while
    the line was handled, and the time from sending the prompt to its turn's end."""
    n = Nvim()
    figures: Figures = {}
    try:
        n.setup()
        pinging, _ = n.open_chat_in(n.project, "other")
        chat, _ = n.open_chat_in(n.project)
        for kind in ("commands", "config", "plan"):
            n.send_to(pinging, f"pings {pings_ms}")
            time.sleep(0.3)  # the pings are under way
            sent = n.send_to(chat, f"big {kind}")
            n.wait_turn_end(chat)
            ended = time.monotonic_ns()
            n.wait_turn_end(pinging)
            samples = n.last_stamp("pings")["samples"]
            during = [rtt for begun, rtt in samples if begun + rtt >= sent and begun <= ended]
            figures[f"{kind}_stall"] = max(during) / MS
            figures[f"{kind}_turn"] = (ended - sent) / MS
        return figures
    finally:
        n.quit()


def long_session(run: int, turns: int = 100, chunks: int = 1000, calls: int = 10) -> Figures:
    """``turns`` turns of ``chunks`` chunks and ``calls`` tool calls (5 KB diffs) in one
    chat: the cost of a turn (first byte → its last tool call in the transcript),
    the median of the first ten and of the last ten, and the host's RSS after."""
    n = Nvim()
    ui = Ui(n.socket)
    try:
        n.setup()
        buf = n.open_chat()
        costs = []
        for _ in range(turns):
            key = nonce()
            seen, stamp = n.turn(buf, f"turn {chunks} {calls} {key}", f"END{key}")
            costs.append((seen - stamp["first_ns"]) / MS)
        first, last = statistics.median(costs[:10]), statistics.median(costs[-10:])
        return {
            "turn_first": first,
            "turn_last": last,
            "long_rss_mb": rss_kb(n.host_pid()) / 1024,
            "long_lines": int(n.lua("return vim.api.nvim_buf_line_count(...)", buf)),
        }
    finally:
        ui.close()
        n.quit()


def _keys(n: Nvim, win: int, keys: list[str], insert: bool = False) -> list[float]:
    """Neovim's time (ms) for each of ``keys`` typed in ``win`` (each in Insert mode
    entered and left for it with ``insert``), its redraw included."""
    return [ns / MS for ns in n.lua("return _G.bench.keys(...)", win, keys, insert)]


def _browse(n: Nvim, win: int, name: str, middle: str) -> Figures:
    """The slowest scroll, jump and search key in ``win`` (ms)."""
    scroll = ["gg", *["<C-d>"] * 20, *["<C-f>"] * 20, *["<C-u>"] * 10, *["<C-b>"] * 10]
    return {
        f"{name}_scroll": max(_keys(n, win, scroll)),
        f"{name}_jump": max(_keys(n, win, ["G", "gg", "G", "gg", "G"])),
        f"{name}_search": max(_keys(n, win, [f"/END{middle}<CR>", "N", "n"])),
    }


def long_transcript(run: int, lines: int = 100_000, chunks: int = 1000, calls: int = 10) -> Figures:
    """A transcript of ``lines`` lines made of turns of ``chunks`` chunks and ``calls``
    tool calls with diffs (their folds), a UI attached: the first key into it from
    the input, the slowest key of each kind (Neovim's work for it and its redraw),
    :AcpToggle showing it again, :AcpExport, Neovim's RSS against the text's size."""
    n = Nvim()
    ui = Ui(n.socket)
    try:
        n.setup()
        buf = n.open_chat()
        pid = int(n.lua("return vim.fn.getpid()"))
        rss_before = rss_kb(pid) / 1024
        keys = []
        while int(n.lua("return vim.api.nvim_buf_line_count(...)", buf)) < lines:
            key = nonce()
            n.turn(buf, f"turn {chunks} {calls} {key}", f"END{key}")
            keys.append(key)
        figures: Figures = {"transcript_nvim_rss_mb": rss_kb(pid) / 1024 - rss_before}
        win = int(n.lua("return vim.fn.win_findbuf(...)[1]", buf))
        input_win = int(n.lua("return vim.fn.win_findbuf(require('acp').status().input_buf)[1]"))
        # The text grew while the input was the current window: the first key
        # into the transcript (it lies above the input).
        figures["transcript_enter"] = _keys(n, input_win, ["<C-w>k"])[0]
        if int(n.lua("return vim.api.nvim_get_current_win()")) != win:
            raise AssertionError("<C-w>k did not enter the transcript")
        middle = keys[len(keys) // 2]
        figures |= _browse(n, win, "transcript", middle)
        # The floor: the same keys in a plain buffer holding the same text, in the
        # same window (no syntax, folds or marks), after the transcript's own.
        plain = n.lua(
            "local plain = vim.api.nvim_create_buf(false, true); vim.api.nvim_buf_set_lines("
            "plain, 0, -1, false, vim.api.nvim_buf_get_lines(..., 0, -1, false)); return plain",
            buf,
        )
        n.lua("vim.api.nvim_win_set_buf(...)", win, plain)
        figures |= _browse(n, win, "plain", middle)
        n.lua("vim.api.nvim_win_set_buf(...)", win, buf)
        # A tool call's block below the match: the cursor on it, its fold closed and opened.
        row = n.lua(
            "return vim.api.nvim_win_call(..., function() local l = vim.fn.line('.')"
            " while vim.fn.foldlevel(l) == 0 do l = l + 1 end return l end)",
            win,
        )
        n.lua("vim.api.nvim_win_set_cursor(...)", win, [row, 0])
        figures["transcript_fold"] = max(_keys(n, win, ["zc", "zo", "zc", "zo"]))
        figures["transcript_type"] = max(
            _keys(n, input_win, list("hello, a long chat"), insert=True)
        )
        # Hidden and shown again: a new window on the whole transcript.
        figures["transcript_show"] = _keys(n, input_win, [":AcpToggle<CR>"] * 2)[1]
        if input_win == int(n.lua("return vim.api.nvim_get_current_win()")):
            raise AssertionError(":AcpToggle did not open a new window")
        # Exported to a buffer: the command's own time, then the time until that
        # buffer (a tab page of its own, read-only while it fills) holds all of it.
        tabs = int(n.lua("return vim.fn.tabpagenr('$')"))
        before = int(n.lua("return vim.uv.hrtime()"))
        current = int(n.lua("return vim.api.nvim_get_current_win()"))
        figures["transcript_export"] = _keys(n, current, [":AcpExport<CR>"])[0]
        full = n.lua(
            "local tabs = ...; return vim.wait(60000, function() return"
            " vim.fn.tabpagenr('$') > tabs and vim.bo.modifiable end, 1) and vim.uv.hrtime()",
            tabs,
        )
        if not full:
            raise AssertionError(":AcpExport filled no buffer")
        figures["transcript_export_full"] = (full - before) / MS
        text = int(
            n.lua(
                "return vim.api.nvim_buf_call(..., function()"
                " return vim.fn.line2byte(vim.fn.line('$') + 1) end)",
                buf,
            )
        )
        figures["transcript_lines"] = int(n.lua("return vim.api.nvim_buf_line_count(...)", buf))
        figures["transcript_text_mb"] = text / 2**20
        return figures
    finally:
        ui.close()
        n.quit()


def history(run: int, chats: int = 10_000, turns: int = 100, queries: int = 100) -> Figures:
    """The chat history: ``history({query})`` over ``chats`` stored chats of ``turns``
    turns (words drawn with Zipf weights, bench/history.py), :AcpHistory opening,
    a 2,000-block chat reopened (its first screen), the store's size against its
    text; then 10k chunks streamed with the history on and off (alternating)."""
    from bench import history as stored

    path, long = stored.build(chats, turns)
    figures: Figures = {"store_ratio": stored.file_bytes(path) / stored.text_bytes(path)}
    n = Nvim()
    try:
        n.setup()
        n.lua("require('acp').setup(...)", {
            "python": sys.executable, "history": {"path": str(path)},
            "agents": {"bench": {"cmd": [*AGENT, n.stamps]}},
        })  # fmt: skip
        n.lua("require('acp').history({limit = 1})")  # the host started, the file open
        rng = random.Random(run)
        words = stored.words()
        took = []
        for _ in range(queries):
            # Half the queries a word of any rank, half two words of the 500 commonest.
            query = (
                rng.choice(words) if rng.random() < 0.5 else " ".join(rng.sample(words[:500], 2))
            )
            took.append(n.lua(TIMED, "require('acp').history({query = ...})", query) / MS)
        took.sort()
        figures["search_p50"] = took[len(took) // 2]
        figures["search_p95"] = took[int(0.95 * len(took))]
        n.lua("vim.ui.select = function(items) _G.picked = vim.uv.hrtime() end")
        for command, key in (("AcpHistory", "picker"), (f"AcpHistory {words[3]}", "picker_query")):
            start = n.lua("local t = vim.uv.hrtime(); vim.cmd(...); return t", command)
            figures[key] = (n.lua("return _G.picked") - start) / MS
        start, opened = n.lua(
            "local t = vim.uv.hrtime(); require('acp').open({history = ...});"
            "_G.bench.rows(require('acp').status().transcript_buf, 48, select(2, ...));"
            "return {t, vim.uv.hrtime()}",
            long, n.chan, "screen",
        )  # fmt: skip
        screen = int(n.wait("screen")[0])
        figures["reopen_screen"] = (screen - start) / MS
        figures["reopen_chat"] = (opened - start) / MS
    finally:
        n.quit()
    figures |= _stream_with_history()
    return figures


TIMED = (
    "local t = vim.uv.hrtime(); assert(loadstring(...))(select(2, ...)); return vim.uv.hrtime() - t"
)


def _stream_with_history(count: int = 10_000, rounds: int = 5) -> Figures:
    """10k chunks with the history on and off, in turn, in one Neovim with a UI."""
    n, ui, _ = _with_ui()
    try:
        totals: dict[bool, list[float]] = {True: [], False: []}
        pings: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(rounds):
            for on in (True, False):
                n.lua("require('acp').setup(...)", {
                    "python": sys.executable, "history": {"enabled": on},
                    "agents": {"bench": {"cmd": [*AGENT, n.stamps]}},
                })  # fmt: skip
                buf = n.open_chat()
                burst = _plugin_burst(n, ui, buf, count, ping=True)
                totals[on].append(burst.total)
                pings[on].append(burst.p99)
                n.lua("require('acp').close()")
        return {
            "stream_history_on": statistics.median(totals[True]),
            "stream_history_off": statistics.median(totals[False]),
            "ping_history_on": statistics.median(pings[True]),
            "ping_history_off": statistics.median(pings[False]),
        }
    finally:
        ui.close()
        n.quit()


def prompts(run: int, projects: int = 20, kept: int = 100, sends: int = 10) -> Figures:
    """Sends in a chat with no prompt history, then in one whose history file
    (stdpath("state")/acp/history.json) holds ``kept`` prompts of ~330 bytes for
    each of ``projects`` agents and directories (0.67 MB): Neovim's longest turn of
    its event loop from each send until its prompt is on disk (the chat's own
    drawing in it too), the median of ``sends``, the chat's first send included."""
    n = Nvim()
    try:
        n.setup()
        path = n.tmp / "xdg-state" / "nvim" / "acp" / "history.json"
        n.lua("_G.bench.busy()")

        def longest_per_send() -> float:
            chat, _ = n.open_chat_in(n.project)
            longest = []
            for _ in range(sends):
                key = nonce()
                n.lua("_G.bench.stretches = {}")
                n.send_to(chat, f"burst 10 {key}")
                n.wait_turn_end(chat)
                while not path.exists() or key not in path.read_text():  # written later
                    time.sleep(0.005)
                stretches = n.lua("return _G.bench.stretches")
                longest.append(max((t for _, t in stretches), default=0) / MS)
            return statistics.median(longest)

        figures = {"prompts_none": longest_per_send()}
        path.write_text(
            json.dumps(
                {
                    f"agent {p}\t/project/{p}": [f"prompt {i} " + "x" * 320 for i in range(kept)]
                    for p in range(projects)
                }
            )
        )
        figures["prompts_long"] = longest_per_send()
        return figures
    finally:
        n.quit()
