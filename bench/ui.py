"""A UI for the benchmarked Neovim: ``python bench/ui.py SOCKET [WIDTH HEIGHT]``.

Attaches as a linegrid UI (160x48 by default) on Neovim's ``--listen`` socket and
reads every redraw as it comes, so Neovim redraws as it would for a user and never
waits on a slow reader. Commands on stdin, one per line:

- ``watch NEEDLE``: answer ``watching``, then print ``seen NS`` as soon as a redraw
  draws NEEDLE; NS is ``time.monotonic_ns()`` (the clock of Neovim's
  ``vim.uv.hrtime()``) when those bytes were read off the socket;
- closing stdin detaches and exits.

"Visible" in the benchmarks is this: the flush that brought the text to a UI.

It keeps no screen: decoding each cell in Python cost the UI a few milliseconds
per redraw, so during a burst it read the socket late (its stamps lagged) and took
CPU from the processes measured on the same cores. It looks for the needle in the
bytes instead: in a ``grid_line`` event, a one-byte cell with the highlight of the
cell before it is ``[char]``, msgpack ``0x91 0xa1 char``. The first character is
left out (it may carry a highlight), and Neovim sends a run of one character as
one cell with a count, so a needle must not repeat a character back to back
(``harness.nonce`` makes none that do).
"""

from __future__ import annotations

import socket
import sys
import threading
import time

import msgpack


def cells(text: str) -> bytes:
    """The msgpack of ``text`` as consecutive one-character cells of one highlight."""
    return b"".join(b"\x91\xa1" + char.encode("ascii") for char in text)


class Ui:
    def __init__(self, path: str, width: int, height: int) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.lock = threading.Lock()
        self.pattern: bytes | None = None
        self.tail = b""
        options = {"ext_linegrid": True, "rgb": True}
        self.sock.sendall(msgpack.packb([0, 1, "nvim_ui_attach", [width, height, options]]))

    def watch(self, needle: str) -> None:
        with self.lock:
            self.pattern, self.tail = cells(needle[1:]), b""

    def read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:  # main() closed the socket: detached
                return
            received = time.monotonic_ns()
            if not data:
                return
            with self.lock:
                pattern = self.pattern
                if pattern is None:
                    continue
                # The needle may straddle two reads.
                if pattern in self.tail + data[: len(pattern)] or pattern in data:
                    self.pattern = None
                    print(f"seen {received}", flush=True)
                else:
                    self.tail = (self.tail + data)[-len(pattern) :]


def main(path: str, width: int = 160, height: int = 48) -> None:
    ui = Ui(path, width, height)
    threading.Thread(target=ui.read, daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "watch":
            ui.watch(arg)
            print("watching", flush=True)
    ui.sock.close()


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:4]))
