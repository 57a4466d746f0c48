"""A UI for the benchmarked Neovim: ``python bench/ui.py SOCKET [WIDTH HEIGHT]``.

Attaches as a linegrid UI (160x48 by default) on Neovim's ``--listen`` socket and
reads every redraw event as it comes, keeping a copy of the screen, so Neovim
redraws as it would for a user and never waits on a slow reader. Commands on
stdin, one per line:

- ``watch NEEDLE``: print ``seen NS`` (``time.monotonic_ns()``, the clock of
  Neovim's ``vim.uv.hrtime()``) as soon as a redraw puts NEEDLE on the screen;
- closing stdin detaches and exits.

"Visible" in the benchmarks is this: the flush that brought the text to a UI.
Plain msgpack over the socket, like the pinger.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from typing import Any

import msgpack


class Screen:
    """Grid 1 of a linegrid UI without multigrid: every window composed into it."""

    def __init__(self, width: int, height: int) -> None:
        self.resize(width, height)

    def resize(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.rows = [[" "] * width for _ in range(height)]

    def line(self, row: int, col: int, cells: list[list[Any]]) -> None:
        target = self.rows[row]
        for cell in cells:
            text = cell[0]
            repeat = cell[2] if len(cell) > 2 else 1
            for _ in range(repeat):
                if col < self.width:
                    target[col] = text
                col += 1

    def scroll(self, top: int, bot: int, left: int, right: int, rows: int) -> None:
        # rows > 0: the region moves up; the rows it leaves are redrawn by Neovim.
        span = range(top, bot - rows) if rows > 0 else range(bot - 1, top - rows - 1, -1)
        for row in span:
            self.rows[row][left:right] = self.rows[row + rows][left:right]

    def text(self, row: int) -> str:
        return "".join(self.rows[row])


class Ui:
    def __init__(self, path: str, width: int, height: int) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.screen = Screen(width, height)
        self.lock = threading.Lock()
        self.needle: str | None = None
        options = {"ext_linegrid": True, "rgb": True}
        self.sock.sendall(msgpack.packb([0, 1, "nvim_ui_attach", [width, height, options]]))

    def watch(self, needle: str) -> None:
        with self.lock:
            self.needle = needle
            self._check(range(self.screen.height))

    def _check(self, rows: Any) -> None:
        if self.needle is None:
            return
        for row in rows:
            if self.needle in self.screen.text(row):
                self.needle = None
                print(f"seen {time.monotonic_ns()}", flush=True)
                return

    def read(self) -> None:
        unpacker = msgpack.Unpacker()
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                return
            unpacker.feed(data)
            for message in unpacker:
                if message[0] == 2 and message[1] == "redraw":
                    with self.lock:
                        self._redraw(message[2])

    def _redraw(self, events: list[list[Any]]) -> None:
        touched: set[int] = set()
        for event in events:
            name, calls = event[0], event[1:]
            if name == "grid_line":
                for grid, row, col, cells, *_ in calls:
                    if grid == 1 and row < self.screen.height:
                        self.screen.line(row, col, cells)
                        touched.add(row)
            elif name == "grid_scroll":
                for grid, top, bot, left, right, rows, _ in calls:
                    if grid == 1:
                        self.screen.scroll(top, bot, left, right, rows)
                        touched.update(range(top, bot))
            elif name == "grid_clear":
                self.screen.resize(self.screen.width, self.screen.height)
            elif name == "grid_resize":
                for grid, width, height in calls:
                    if grid == 1:
                        self.screen.resize(width, height)
        self._check(sorted(touched))


def main(path: str, width: int = 160, height: int = 48) -> None:
    ui = Ui(path, width, height)
    threading.Thread(target=ui.read, daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "watch":
            ui.watch(arg)
    ui.sock.close()


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:4]))
