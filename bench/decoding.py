"""``python -m bench.decoding``: how long one big legal line holds the worker loop
while the connection decodes it (issue 29.7), without Neovim.

Each line of ``big KIND`` (bench/agent.py) comes through a real pipe (``cat`` of a
file) into a `Connection` with the client's own decoding (the generated types of
v1 or v2, ``session/update`` routed as the client routes it, a handler that keeps
the value and does nothing else); a task ticking on the same loop records the
longest time between two of its ticks. Each line is decoded as the client does
(past ``OFF_LOOP_BYTES``, in a worker thread) and, for comparison, on the loop.
What the chat then does with the value is not measured here: ``make bench ARGS="--only
biglines"`` measures the whole host with Neovim.

    python -m bench.decoding            # 5 runs, median and spread per figure
    python -m bench.decoding --runs 1
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from acp_nvim.protocol import Connection, connection
from acp_nvim.protocol import schema_v1 as v1
from acp_nvim.protocol import schema_v2 as v2
from acp_nvim.protocol.unknown import decode
from bench.agent import big

KINDS = ("commands", "config", "plan")


async def longest_step(line: bytes, version: int, off_loop: bool) -> tuple[float, float]:
    """(the loop's longest step, the time to the handler) in ms, for one line."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "line.jsonl"
        path.write_bytes(line)
        handled = anyio.Event()
        kept: list[Any] = []

        async def on_updates(values: list[Any]) -> None:
            kept.extend(values)
            handled.set()

        notification: Any = v1.SessionNotification if version == 1 else v2.UpdateSessionNotification
        limit = connection.OFF_LOOP_BYTES if off_loop else len(line)
        saved, connection.OFF_LOOP_BYTES = connection.OFF_LOOP_BYTES, limit
        try:
            async with await anyio.open_process(["cat", str(path)]) as process:
                assert process.stdout is not None and process.stdin is not None
                peer = Connection(process.stdout, process.stdin, convert=decode)
                peer.on_notifications("session/update", notification, on_updates)
                longest = 0.0
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(peer.serve)
                    start = last = time.perf_counter()
                    while not handled.is_set():
                        await anyio.sleep(0)
                        now = time.perf_counter()
                        longest, last = max(longest, now - last), now
                    took = time.perf_counter() - start
                    tasks.cancel_scope.cancel()
        finally:
            connection.OFF_LOOP_BYTES = saved
        assert kept, "the line did not decode"
        return longest * 1000, took * 1000


async def idle_step(seconds: float = 2.0) -> float:
    """The loop's longest step with nothing to do for ``seconds`` (ms): the floor that
    scheduling on this machine sets for every figure."""
    longest = 0.0
    start = last = time.perf_counter()
    while last - start < seconds:
        await anyio.sleep(0)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    return longest * 1000


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.decoding", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    idle = [anyio.run(idle_step) for _ in range(args.runs)]
    print(f"the loop alone, longest step in 2 s: {statistics.median(idle):.1f} ms", flush=True)
    print("| line | version | longest loop step, in a thread (ms) | on the loop (ms) |")
    print("|---|---|---|---|")
    for kind in KINDS:
        for version in (1, 2):
            [line] = big("s1", kind, version)
            cells = []
            for off_loop in (True, False):
                steps = [
                    anyio.run(longest_step, line, version, off_loop)[0] for _ in range(args.runs)
                ]
                cells.append(f"{statistics.median(steps):.1f} ({min(steps):.1f}-{max(steps):.1f})")
            size = f"{len(line) / 1e6:.1f} MB"
            print(f"| {kind} ({size}) | v{version} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
