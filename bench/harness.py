"""A benchmarked Neovim: headless, isolated XDG dirs, the plugin, bench.lua, a socket.

The driver embeds Neovim (pynvim, stdio) and waits for the probes' ``bench``
notifications with ``next_message``, so waiting never runs Lua in Neovim (a
``vim.wait`` would itself change what is measured).
"""

from __future__ import annotations

import itertools
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pynvim

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
AGENT = [sys.executable, str(BENCH / "agent.py")]


def nvim_binary() -> str:
    found = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "find_nvim.py")], capture_output=True, text=True
    ).stdout.strip()
    if found:
        return found
    return str(Path(sys.executable).parent / "nvim")


class Nvim:
    """One headless Neovim with the plugin loaded and the bench probes."""

    def __init__(self, tmp: Path | None = None) -> None:
        """``tmp``: the directory of a Neovim that quit keeping it (its project and
        XDG dirs: what a user's next Neovim finds); a new one by default."""
        self.tmp = tmp or Path(tempfile.mkdtemp(prefix="acp-bench-"))
        self.project = self.tmp / "project"
        self.project.mkdir(exist_ok=True)
        self.socket = str(self.tmp / f"nvim-{nonce()}.sock")
        self.stamps = str(self.tmp / "stamps.jsonl")
        env = {**os.environ, "ACP_DEMO_DELAY": "0"}
        for name in ("CONFIG", "DATA", "STATE", "CACHE"):
            path = self.tmp / f"xdg-{name.lower()}"
            path.mkdir(exist_ok=True)
            env[f"XDG_{name}_HOME"] = str(path)
        init = (
            f"set rtp^={ROOT} | set noswapfile | runtime plugin/acp.lua"
            f" | lua _G.bench = dofile('{BENCH / 'bench.lua'}')"
        )
        argv = [
            nvim_binary(),
            "--embed",
            "--headless",
            "--clean",
            "-i",
            "NONE",
            "-n",
            "--listen",
            self.socket,
            "--cmd",
            init,
        ]
        old = os.environ.copy()
        os.environ.update(env)
        try:
            self.nvim = pynvim.attach("child", argv=argv)
        finally:
            os.environ.clear()
            os.environ.update(old)
        self.nvim.command(f"cd {self.project}")
        self.chan: int = self.nvim.channel_id
        self.lua("_G.bench.events(...)", self.chan)
        self._queued: list[list[Any]] = []
        # Chats whose AcpTurnEnd came while waiting for another, and when.
        self._ended: dict[int, int] = {}

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def setup(self, agent_cmd: list[str] | None = None) -> None:
        # "other": the same program in a process of its own (one agent serves every
        # chat opened with it, one message at a time).
        agents = {
            "bench": {"cmd": agent_cmd or [*AGENT, self.stamps]},
            "other": {"cmd": [*AGENT, self.stamps]},
        }
        self.lua("require('acp').setup(...)", {"python": sys.executable, "agents": agents})

    def wait(self, tag: str, timeout: float = 120) -> list[Any]:
        """Block until a probe reports ``tag``; returns its arguments."""
        for i, args in enumerate(self._queued):
            if args[0] == tag:
                return self._queued.pop(i)[1:]
        # next_message has no timeout: a Lua timer wakes us instead.
        self.lua("_G.bench.tick(...)", self.chan, int(timeout * 1000))
        deadline = time.monotonic() + timeout
        while True:
            message = self.nvim.next_message()
            if message is None or message[0] != "notification" or message[1] != "bench":
                continue
            args = message[2]
            if args[0] == tag:
                return list(args[1:])
            if args[0] == "AcpError":
                raise RuntimeError(f"chat error: {args[2]}")
            if args[0] != "tick":
                self._queued.append(list(args))
            elif time.monotonic() >= deadline:
                raise TimeoutError(f"no {tag} within {timeout} s")

    def reports(self, tag: str) -> list[list[Any]]:
        """Take the queued reports of ``tag`` (those that came while waiting for another)."""
        taken = [args[1:] for args in self._queued if args[0] == tag]
        self._queued = [args for args in self._queued if args[0] != tag]
        return taken

    def open_chat(self, agent: str = "bench") -> int:
        """Open a chat and wait for its session; returns the transcript buffer."""
        self.lua("require('acp').open({agent = ..., new = true})", agent)
        self.wait("AcpSessionReady")
        return int(self.lua("return require('acp').status().transcript_buf"))

    def host_pid(self) -> int:
        return int(self.lua("return vim.fn.jobpid(require('acp.host').chan)"))

    def turn(
        self, buf: int, prompt: str, needle: str, timeout: float = 120
    ) -> tuple[int, dict[str, Any]]:
        """Send ``prompt``; returns (time ``needle`` appeared, the agent's stamp)."""
        self.lua("_G.bench.watch(...)", buf, needle, self.chan, "seen", int(timeout * 1000))
        self.lua("require('acp').send(...)", prompt)
        seen = self.wait("seen", timeout)
        if seen[0] is None:
            raise TimeoutError(f"{needle} not seen after {prompt!r}")
        self.wait("AcpTurnEnd", timeout)
        return int(seen[0]), self.last_stamp()

    def floor(
        self, prompt: str, needle: str, timeout: float = 120, *, strong: bool = True
    ) -> tuple[int, dict[str, Any], int]:
        """The same prompt through a Lua floor client (the strong one, or the weak
        ``jobstart`` one); returns (seen, stamp, its buffer)."""
        client = "strong_floor" if strong else "floor"
        buf = int(
            self.lua(f"return _G.bench.{client}(...)", [*AGENT, self.stamps], prompt, self.chan)
        )
        self.lua("_G.bench.watch(...)", buf, needle, self.chan, "seen", int(timeout * 1000))
        seen = self.wait("seen", timeout)
        if seen[0] is None:
            raise TimeoutError(f"{needle} not seen by the floor")
        self.wait("floor_end", timeout)
        return int(seen[0]), self.last_stamp(), buf

    def last_stamp(self, command: str | None = None) -> dict[str, Any]:
        """The agents' last record (of ``command``)."""
        with open(self.stamps) as f:
            records = [json.loads(line) for line in f]
        return next(r for r in reversed(records) if command in (None, r["command"]))

    def open_chat_in(self, cwd: Path, agent: str = "bench") -> tuple[int, int]:
        """A new chat whose session works in ``cwd``; returns (chat id, transcript)."""
        self.nvim.command(f"cd {cwd}")
        try:
            buf = self.open_chat(agent)
        finally:
            self.nvim.command(f"cd {self.project}")
        return int(self.lua("return require('acp').status().chat")), buf

    def send_to(self, chat: int, text: str) -> int:
        """Send ``text`` in chat ``chat``; returns when (hrtime) it was sent."""
        return int(
            self.lua(
                "local chat, text = ...; local start = vim.uv.hrtime()"
                "; local sent = require('acp.chat.registry').chats[chat]"
                "; require('acp.chat').send(sent, text); return start",
                chat,
                text,
            )
        )

    def wait_turn_end(self, chat: int, timeout: float = 120) -> int:
        """Wait for the (next) AcpTurnEnd of ``chat``, other chats' kept for them;
        returns when (hrtime) it fired."""
        while chat not in self._ended:
            at, data = self.wait("AcpTurnEnd", timeout)
            self._ended[data["chat"]] = int(at)
        return self._ended.pop(chat)

    def buffer_text(self, buf: int) -> str:
        return "\n".join(self.nvim.buffers[buf][:])

    def quit(self, keep: bool = False) -> None:
        """Quit Neovim; its directory (XDG dirs, socket, stamps) goes too unless ``keep``."""
        try:
            self.nvim.command("qa!")
        except (OSError, EOFError):
            pass
        self.nvim.close()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


def nonce() -> str:
    """Ten hex digits, none repeated back to back (``ui.py`` finds them in redraws)."""
    while True:
        key = uuid.uuid4().hex[:10]
        if all(a != b for a, b in itertools.pairwise(key)):
            return key


def rss_kb(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


class Ui:
    """A UI attached on Neovim's socket (``ui.py``): Neovim redraws as for a user,
    and :meth:`watch` / :meth:`seen` tell when a text reached the screen."""

    def __init__(self, socket: str, width: int = 160, height: int = 48) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH / "ui.py"), socket, str(width), str(height)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the UI did not start")

    def watch(self, needle: str) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(f"watch {needle}\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "watching":
            raise RuntimeError("the UI did not take the needle")

    def seen(self, timeout: float = 30) -> int:
        """When the watched text was first on the screen (monotonic ns)."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError("the watched text never reached the screen")
        command, _, stamp = self.proc.stdout.readline().strip().partition(" ")
        if command != "seen":
            raise RuntimeError(f"the UI answered {command!r}")
        return int(stamp)

    def close(self) -> None:
        self.proc.communicate("", timeout=30)


class Pinger:
    """The second RPC client, in its own process; samples while it runs."""

    def __init__(self, socket: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH / "pinger.py"), socket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("pinger did not start")

    def stop(self) -> list[tuple[int, int, int, int]]:
        out, _ = self.proc.communicate("", timeout=30)
        samples = [tuple(s) for s in json.loads(out)]
        # The clocks must agree: Neovim ran each request between its send and answer.
        if not all(begun <= answered <= begun + rtt for begun, rtt, _, answered in samples):
            raise RuntimeError("Neovim's vim.uv.hrtime() and time.monotonic_ns() disagree")
        return samples  # type: ignore[return-value]
