"""A second RPC client: ``python bench/pinger.py SOCKET``.

Sends a trivial request (Vimscript's ``reltime()`` through ``nvim_call_function``,
answered on Neovim's main loop) every millisecond until its stdin closes, then prints one
JSON list of ``[send_ns, round_trip_ns, sent_ns, answered_ns]``: ``sent_ns`` is
when the request was in the socket, ``answered_ns`` when Neovim ran it (same
clock: Neovim's ``reltime()`` is libuv's ``uv_hrtime()``, ``CLOCK_MONOTONIC``), so a
late Neovim can be told from a pinger the scheduler left waiting. ``reltime()``
makes no Lua garbage, where a Lua chunk compiled 1,000 times a second made
Neovim's Lua heap grow by ~0.5 MB a second (a user's Neovim runs no such thing).
Plain msgpack over the socket: no client library between us and the figure.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

import msgpack


def main(path: str) -> None:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    unpacker = msgpack.Unpacker()
    samples: list[tuple[int, int, int, int]] = []
    msg_id = 0
    while not stop.is_set():
        msg_id += 1
        start = time.monotonic_ns()
        sock.sendall(msgpack.packb([0, msg_id, "nvim_call_function", ["reltime", []]]))
        sent = time.monotonic_ns()
        answered = None
        while answered is None:
            unpacker.feed(sock.recv(65536))
            for message in unpacker:
                if message[0] == 1 and message[1] == msg_id:
                    high, low = message[3]  # uv_hrtime() in two 32-bit halves
                    answered = (high << 32) | (low & 0xFFFFFFFF)
        samples.append((start, time.monotonic_ns() - start, sent, answered))
        if msg_id == 1:
            print("ready", flush=True)
        time.sleep(0.001)
    print(json.dumps(samples), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
