"""``python -m acp_nvim.mcp``: the stdio shim an agent starts as the editor's MCP server.

It relays bytes between its stdio (the agent's MCP client) and the acp.nvim host's
Unix socket (``ACP_NVIM_MCP_SOCKET``), after presenting the session's token
(``ACP_NVIM_MCP_TOKEN``). It knows nothing of MCP and imports only the standard
library, so it starts in the time of a bare Python. A refused or missing
connection is said on stderr (the agent's MCP log) and ends it with code 1.

``--check`` only tells whether the shim can run (``:checkhealth acp``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

_CHUNK = 65536


def _fail(message: str) -> None:
    sys.stderr.write(f"acp.nvim MCP: {message}\n")
    sys.exit(1)


def _pump_in(sock: socket.socket) -> None:
    """The agent's messages to the host; at EOF the host sees it too."""
    try:
        while data := os.read(0, _CHUNK):
            sock.sendall(data)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _connect() -> socket.socket:
    path, token = os.environ.get("ACP_NVIM_MCP_SOCKET"), os.environ.get("ACP_NVIM_MCP_TOKEN")
    if not path or not token:
        _fail("ACP_NVIM_MCP_SOCKET and ACP_NVIM_MCP_TOKEN must be set (acp.nvim sets them)")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        sock.sendall(json.dumps({"token": token}).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            data = sock.recv(1024)
            if not data:
                break
            answer += data
    except OSError as err:
        _fail(f"cannot reach the editor at {path}: {err.strerror or err} (is Neovim still open?)")
    try:
        reply = json.loads(answer)
    except ValueError:
        reply = {}
    if not isinstance(reply, dict) or reply.get("ok") is not True:
        error = reply.get("error") if isinstance(reply, dict) else None
        _fail(f"the editor refused the connection: {error or 'no answer'}")
    return sock


def main() -> None:
    if sys.argv[1:] == ["--check"]:
        print("ok")
        return
    sock = _connect()
    threading.Thread(target=_pump_in, args=(sock,), daemon=True).start()
    try:
        while data := sock.recv(_CHUNK):
            os.write(1, data)
    except OSError:
        pass


if __name__ == "__main__":
    main()
