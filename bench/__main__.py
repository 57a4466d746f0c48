"""``make bench`` / ``python -m bench``: run the figures, print one table.

Examples::

    python -m bench                         # every figure, 5 runs each
    python -m bench --runs 3 --only stream,startup
    python -m bench --agent 'claude-agent-acp'   # start-up against a real agent
    python -m bench --json results.json     # also keep the raw per-run figures
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import figures
from bench.harness import ROOT, nvim_binary

# One table row: label, target, value of one run's figures, pass test on the median.
Row = tuple[
    str, str, Callable[[dict[str, Any]], float], Callable[[float, dict[str, float]], bool] | None
]


def _ratio(a: str, b: str) -> Callable[[dict[str, Any]], float]:
    return lambda f: float(f[a]) / float(f[b])


def _key(name: str) -> Callable[[dict[str, Any]], float]:
    return lambda f: float(f[name])


TAIL = "last byte written → visible (ms)"
# Another client's round trips during a burst and after it (stream and stream50k).
PINGS: list[Row] = [
    ("Neovim ping p99 during the burst (ms)", "—", _key("plugin_p99"), None),
    ("  strong floor: same (ms)", "—", _key("floor_p99"), None),
    ("  jobstart floor: same (ms)", "—", _key("jobstart_p99"), None),
    (
        "  plugin / strong floor",
        "≤ 1.0x",
        _ratio("plugin_p99", "floor_p99"),
        lambda m, _: m <= 1.0,
    ),
    (
        "slowest ping in the 0.6 s after the end is visible (ms)",
        "≤ 16",
        _key("plugin_after"),
        lambda m, _: m <= 16,
    ),
    ("  strong floor: same (ms)", "—", _key("floor_after"), None),
    ("  jobstart floor: same (ms)", "—", _key("jobstart_after"), None),
]

ROWS: dict[str, list[Row]] = {
    "stream": [
        (
            "10k chunks, UI attached: first byte → last token visible (ms)",
            "—",
            _key("plugin_total"),
            None,
        ),
        ("  strong Lua floor (vim.system): same (ms)", "—", _key("floor_total"), None),
        ("  jobstart Lua floor: same (ms)", "—", _key("jobstart_total"), None),
        (
            "  plugin / strong floor",
            "≤ 1.0x",
            _ratio("plugin_total", "floor_total"),
            lambda m, _: m <= 1.0,
        ),
        ("  jobstart floor / strong floor", "—", _ratio("jobstart_total", "floor_total"), None),
        (TAIL, "—", _key("plugin_tail"), None),
        ("  strong floor: same (ms)", "—", _key("floor_tail"), None),
        (
            "  plugin / strong floor",
            "≤ 1.5x or ≤ 4 ms",
            _ratio("plugin_tail", "floor_tail"),
            lambda m, medians: m <= 1.5 or medians[TAIL] <= 4,
        ),
        *PINGS,
        (
            "longest batch Neovim applied for the plugin (ms)",
            "≤ 4",
            _key("plugin_batch"),
            lambda m, _: m <= 4,
        ),
        (
            "  the same while a 100k-line message arrived (ms)",
            "≤ 4",
            _key("fill_batch"),
            lambda m, _: m <= 4,
        ),
        (
            "    Neovim's CPU time in its costliest batch (ms)",
            "—",
            _key("fill_batch_cpu"),
            None,
        ),
        ("first byte → text in the buffer (ms)", "—", _key("plugin_buffer"), None),
        ("  strong floor: same (ms)", "—", _key("floor_buffer"), None),
        ("cost per chunk, empty transcript (µs)", "—", _key("chunk_us_empty"), None),
        ("cost per chunk, 100k-line transcript (µs)", "—", _key("chunk_us_full"), None),
        (
            "  100k-line / empty",
            "≤ 1.5",
            _ratio("chunk_us_full", "chunk_us_empty"),
            lambda m, _: m <= 1.5,
        ),
    ],
    "stream50k": [
        (
            "50k chunks, UI attached: first byte → last token visible (ms)",
            "—",
            _key("plugin_total"),
            None,
        ),
        ("  strong floor: same (ms)", "—", _key("floor_total"), None),
        ("  jobstart floor: same (ms)", "—", _key("jobstart_total"), None),
        (
            "  plugin / strong floor",
            "≤ 1.0x",
            _ratio("plugin_total", "floor_total"),
            lambda m, _: m <= 1.0,
        ),
        ("the agent's own write time (ms)", "—", _key("plugin_write"), None),
        ("  strong floor: same (ms)", "—", _key("floor_write"), None),
        (
            "  plugin / strong floor",
            "≤ 1.0x",
            _ratio("plugin_write", "floor_write"),
            lambda m, _: m <= 1.0,
        ),
        (
            "longest batch Neovim applied for the plugin (ms)",
            "≤ 4",
            _key("plugin_batch"),
            lambda m, _: m <= 4,
        ),
        *PINGS,
    ],
    "fs": [
        row
        for size, label, target in ((100, "100", 2), (10_000, "10k", 8), (100_000, "100k", 80))
        for row in (
            (
                f"fs/read_text_file p50, loaded buffer of {label} lines (ms)",
                f"≤ {target}",
                _key(f"read_p50_{size}"),
                (lambda t: lambda m, _: m <= t)(target),
            ),
            (
                "  same, one line edited every 5 ms meanwhile (ms)",
                "—",
                _key(f"read_edited_p50_{size}"),
                None,
            ),
            ("  the first read of that buffer (ms)", "—", _key(f"read_first_{size}"), None),
        )
    ],
    "mcp": [
        (
            "read_buffer p50 through the MCP shim, loaded buffer of 10k lines (ms)",
            "≤ 10",
            _key("mcp_read_p50"),
            lambda m, _: m <= 10,
        ),
        ("  the first read of that buffer (ms)", "—", _key("mcp_read_first"), None),
        ("  the shim's start and MCP handshake (ms)", "—", _key("mcp_start"), None),
    ],
    "terminal": [
        row
        for name, label in (
            ("seq", "`seq 1 200000`"),
            ("yes", "1 MB of `y` lines (`yes`, `head -c 1000000`)"),
        )
        for row in (
            (
                f"{label} via terminal/create: create → exit (ms)",
                "—",
                _key(f"term_{name}"),
                None,
            ),
            (
                "  bare terminal buffer, the floor: start → exit (ms)",
                "—",
                _key(f"term_{name}_floor"),
                None,
            ),
            (
                "  ours / the floor",
                "≤ 1.2",
                _ratio(f"term_{name}", f"term_{name}_floor"),
                lambda m, _: m <= 1.2,
            ),
            ("  Neovim's CPU time, ours (ms)", "—", _key(f"term_{name}_cpu"), None),
            ("  the same, the floor (ms)", "—", _key(f"term_{name}_floor_cpu"), None),
            ("  the Python host's CPU time, ours (ms)", "—", _key(f"term_{name}_host_cpu"), None),
            ("  Neovim's longest loop turn, ours (ms)", "—", _key(f"term_{name}_turn"), None),
            ("  the same, the floor (ms)", "—", _key(f"term_{name}_floor_turn"), None),
        )
    ],
    "startup": [
        (":AcpChat → session ready (ms)", "—", _key("startup_total"), None),
        ("  the first start in that project (ms)", "—", _key("startup_first"), None),
        ("  the agent's own start alone (ms)", "—", _key("agent_own"), None),
        (
            "  :AcpChat → ready minus the agent's own start (ms)",
            "≤ 100",
            _key("startup_plugin"),
            lambda m, _: m <= 100,
        ),
        ("    the first start in that project (ms)", "—", _key("startup_first_plugin"), None),
    ],
    "tools": [
        (
            "1,000 tool calls with 5 KB diffs: first byte → rendered (ms)",
            "≤ 1000",
            _key("tools_total"),
            lambda m, _: m <= 1000,
        ),
        ("  last byte written → rendered (ms)", "—", _key("tools_tail"), None),
    ],
    "edits": [
        (
            "preview of a 1,000-line edit at its permission prompt: drawn (ms)",
            "≤ 16",
            _key("ask_draw"),
            lambda m, _: m <= 16,
        ),
        (
            "  the whole batch, with the tool call's diff in the chat (ms)",
            "—",
            _key("ask_batch"),
            None,
        ),
        (
            "marks of a 1,000-line edit after the agent wrote it: drawn (ms)",
            "≤ 16",
            _key("write_draw"),
            lambda m, _: m <= 16,
        ),
        ("  the whole batch (ms)", "—", _key("write_batch"), None),
    ],
    "memory": [
        (
            "Python RSS after 100k chunks + 1,000 tool calls (MB)",
            "≤ 80",
            _key("rss_mb_1"),
            lambda m, _: m <= 80,
        ),
        (
            "  same after closing it and a second identical chat (MB)",
            "≤ 80",
            _key("rss_mb_2"),
            lambda m, _: m <= 80,
        ),
        (
            "  growth of a third such chat over the second (MB)",
            "flat (≤ 2)",
            _key("rss_growth_mb"),
            lambda m, _: m <= 2,
        ),
    ],
    "turnstart": [
        (
            "turn start in a 20k-file git work tree: sent → prompt at the agent (ms)",
            "—",
            _key("turn_start"),
            None,
        ),
        (
            "  the worker loop's longest answer meanwhile (ms)",
            "≤ 5",
            _key("loop_stall"),
            lambda m, _: m <= 5,
        ),
        ("  its usual answer, before (ms)", "—", _key("loop_rtt_before"), None),
        (
            "  Neovim ping p99 meanwhile, the pings of our 6 turn starts (below) pooled (ms)",
            "—",
            _key("ours_p99_turn_start"),
            None,
        ),
        ("    pings sent meanwhile", "—", _key("ours_pings_turn_start"), None),
        (
            "  Neovim ping p99 the seconds before, the loop prober running (ms)",
            "—",
            _key("ours_p99_idle"),
            None,
        ),
        ("  Neovim ping p99 with nothing running (ms)", "—", _key("nvim_p99_alone"), None),
        (
            "  meanwhile / the second before",
            "≤ 1.0x",
            _ratio("ours_p99_turn_start", "ours_p99_idle"),
            lambda m, _: m <= 1.0,
        ),
        (
            "  Neovim's longest turn of its event loop meanwhile (ms)",
            "—",
            _key("nvim_busy_turn_start"),
            None,
        ),
        ("    the second before (ms)", "—", _key("nvim_busy_idle"), None),
        ("  its end: the agent's last update → AcpTurnEnd (ms)", "—", _key("turn_end"), None),
        (
            "  5 rounds of a turn start of ours and one of the strong floor's, same tree:"
            " ours, sent → prompt at the agent (ms)",
            "—",
            _key("ours_rounds_turn_start"),
            None,
        ),
        ("    the strong floor's (ms)", "—", _key("floor_rounds_turn_start"), None),
        (
            "    the floor's Neovim ping p99 meanwhile / the second before, its 5 pooled",
            "—",
            _ratio("floor_p99_turn_start", "floor_p99_idle"),
            None,
        ),
        ("      pings sent meanwhile", "—", _key("floor_pings_turn_start"), None),
        ("    pings sent in the 5 ms after our sends", "—", _key("ours_rounds_pings"), None),
        ("    after the floor's", "—", _key("floor_rounds_pings"), None),
        ("    Neovim's slowest of those, ours (ms)", "—", _key("ours_rounds_slowest"), None),
        ("    the floor's (ms)", "—", _key("floor_rounds_slowest"), None),
        (
            "    ours / the floor's",
            "≤ 1.0x",
            _ratio("ours_rounds_slowest", "floor_rounds_slowest"),
            lambda m, _: m <= 1.0,
        ),
        (
            "    Neovim's CPU in its loop turns in those 5 ms, ours (ms)",
            "—",
            _key("ours_rounds_cpu"),
            None,
        ),
        ("    the floor's (ms)", "—", _key("floor_rounds_cpu"), None),
        ("    ours / the floor's", "—", _ratio("ours_rounds_cpu", "floor_rounds_cpu"), None),
    ],
    "biglines": [
        row
        for kind, label in (
            ("commands", "10k commands of 1,000-character descriptions (10 MB)"),
            ("config", "1,000 settings of 500 choices (17 MB)"),
            ("plan", "a plan of 10k entries (1.2 MB)"),
        )
        for row in (
            (
                f"one line of {label}: the worker loop's longest answer meanwhile (ms)",
                "≤ 20",
                _key(f"{kind}_stall"),
                lambda m, _: m <= 20,
            ),
            ("  sent → its turn's end (ms)", "—", _key(f"{kind}_turn"), None),
        )
    ],
    "long": [
        (
            "100 turns of 1k chunks + 10 tool calls: a turn at the start (ms)",
            "—",
            _key("turn_first"),
            None,
        ),
        ("  a turn at the end (ms)", "—", _key("turn_last"), None),
        ("  end / start", "≤ 1.2", _ratio("turn_last", "turn_first"), lambda m, _: m <= 1.2),
        ("  Python RSS after (MB)", "≤ 100", _key("long_rss_mb"), lambda m, _: m <= 100),
        ("  transcript lines", "—", _key("long_lines"), None),
    ],
    "transcript": [
        *(
            (label, "≤ 16", _key(f"transcript_{key}"), lambda m, _: m <= 16)
            for label, key in (
                (
                    "a 100k-line transcript, UI attached: slowest <C-d>/<C-f>/<C-u>/<C-b> (ms)",
                    "scroll",
                ),
                ("  the first <C-w>k into it, the input current as it grew (ms)", "enter"),
                ("  slowest G / gg (ms)", "jump"),
                ("  slowest /word<CR>, n, N (ms)", "search"),
                ("  slowest zc / zo on a tool call (ms)", "fold"),
                ("  slowest key typed in the input (ms)", "type"),
                ("  :AcpToggle showing it again, hidden by the one before (ms)", "show"),
                ("  :AcpExport to a buffer: Neovim's time for the command (ms)", "export"),
            )
        ),
        ("    → its buffer full (ms)", "—", _key("transcript_export_full"), None),
        ("  a plain buffer of the same text: slowest scroll (ms)", "—", _key("plain_scroll"), None),
        ("    slowest G / gg (ms)", "—", _key("plain_jump"), None),
        ("    slowest /word<CR>, n, N (ms)", "—", _key("plain_search"), None),
        ("  transcript lines", "—", _key("transcript_lines"), None),
        ("  its text (MB)", "—", _key("transcript_text_mb"), None),
        ("  Neovim RSS grown with it (MB)", "—", _key("transcript_nvim_rss_mb"), None),
        (
            "  Neovim RSS grown / text",
            "≤ 2x",
            _ratio("transcript_nvim_rss_mb", "transcript_text_mb"),
            lambda m, _: m <= 2,
        ),
    ],
    "history": [
        (
            "10,000 stored chats of 100 turns: history({query}) p95 (ms)",
            "≤ 50",
            _key("search_p95"),
            lambda m, _: m <= 50,
        ),
        ("  p50 (ms)", "—", _key("search_p50"), None),
        (":AcpHistory opens its picker (ms)", "≤ 100", _key("picker"), lambda m, _: m <= 100),
        ("  :AcpHistory {word} (ms)", "≤ 100", _key("picker_query"), lambda m, _: m <= 100),
        (
            "a 2,000-block chat reopened: its first screen drawn (ms)",
            "≤ 100",
            _key("reopen_screen"),
            lambda m, _: m <= 100,
        ),
        ("  of which the new chat's windows, in Lua (ms)", "—", _key("reopen_chat"), None),
        (
            "the store's size / its text",
            "≤ 2x",
            _key("store_ratio"),
            lambda m, _: m <= 2,
        ),
        ("10k chunks, UI attached, history on (ms)", "—", _key("stream_history_on"), None),
        ("  history off (ms)", "—", _key("stream_history_off"), None),
        (
            "  on / off",
            "≤ 1.05x",
            _ratio("stream_history_on", "stream_history_off"),
            lambda m, _: m <= 1.05,
        ),
        ("  Neovim ping p99, history on (ms)", "—", _key("ping_history_on"), None),
        ("  history off (ms)", "—", _key("ping_history_off"), None),
        (
            "  ping p99 added by the history (ms)",
            "≤ 16",
            lambda f: float(f["ping_history_on"]) - float(f["ping_history_off"]),
            lambda m, _: m <= 16,
        ),
    ],
    "prompts": [
        (
            "a send, 20 projects' prompts in the history (0.67 MB): Neovim's longest"
            " loop turn until it is on disk (ms)",
            "≤ 4",
            _key("prompts_long"),
            lambda m, _: m <= 4,
        ),
        ("  the same with no history (ms)", "—", _key("prompts_none"), None),
    ],
}
RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    "stream": figures.streaming,
    "stream50k": figures.streaming_50k,
    "fs": figures.fs_read,
    "mcp": figures.mcp_read,
    "terminal": figures.terminal,
    "startup": figures.startup,
    "tools": figures.tools,
    "edits": figures.edits,
    "memory": figures.memory,
    "turnstart": figures.turn_start,
    "biglines": figures.big_lines,
    "long": figures.long_session,
    "transcript": figures.long_transcript,
    "history": figures.history,
    "prompts": figures.prompts,
}


def machine() -> str:
    with open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    nvim = subprocess.run(
        [nvim_binary(), "--version"], capture_output=True, text=True
    ).stdout.split("\n")[0]
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{cpu}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {nvim}; "
        f"Python {platform.python_version()}; {platform.system()} {platform.release()}; "
        f"commit {commit}{'+dirty' if dirty else ''}"
    )


def fmt(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="repetitions of each figure (default 5)"
    )
    parser.add_argument(
        "--only", default=",".join(ROWS), help=f"comma-separated subset of {','.join(ROWS)}"
    )
    parser.add_argument("--agent", help="a real agent command: measures start-up against it only")
    parser.add_argument("--json", help="write the raw per-run figures here")
    args = parser.parse_args()
    groups = ["startup"] if args.agent else [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = set(groups) - set(ROWS)
    if unknown:
        parser.error(f"unknown figure group(s): {', '.join(sorted(unknown))}")

    print(f"machine: {machine()}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    started = time.monotonic()
    for group in groups:
        runs: list[dict[str, Any]] = []
        for run in range(args.runs):
            kwargs = {"agent": args.agent} if group == "startup" else {}
            result = RUNNERS[group](run, **kwargs)
            runs.append(result)
            print(
                f"  {group} run {run + 1}/{args.runs}: "
                + ", ".join(
                    f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in result.items()
                ),
                file=sys.stderr,
                flush=True,
            )
            if "skip" in result:
                break
        results[group] = runs

    print(
        f"\n{args.runs} runs per figure; median (min-max); load at end {os.getloadavg()[0]:.2f}; "
        f"took {time.monotonic() - started:.0f} s"
    )
    print("| figure | target | median | spread | |\n|---|---|---|---|---|")
    for group in groups:
        runs = results[group]
        if runs and "skip" in runs[0]:
            print(f"| {group}: skipped — {runs[0]['skip']} | | | | |")
            continue
        medians: dict[str, float] = {}
        for label, target, value, passes in ROWS[group]:
            # A run without the figure (no ping met its window: NaN) is left out and
            # counted: NaN would sort anywhere in the median.
            values = [v for v in map(value, runs) if not math.isnan(v)]
            med = statistics.median(values) if values else math.nan
            medians[label] = med
            verdict = "" if passes is None else ("ok" if passes(med, medians) else "MISSED")
            spread = f"{fmt(min(values))}-{fmt(max(values))}" if values else "n/a"
            if len(values) < len(runs):
                spread += f", {len(runs) - len(values)} n/a"
            print(f"| {label} | {target} | {fmt(med)} | {spread} | {verdict} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
