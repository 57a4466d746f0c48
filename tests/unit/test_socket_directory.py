"""The editor MCP server's socket directory does not outlive its host, however the
host ends: killed outright (SIGKILL, or with Neovim), the reaper it was handed to
removes it; another live host's directory, and anything not handed over, stay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from acp_nvim.client.agent import groups
from tests.proc import wait_gone

ROOT = Path(__file__).resolve().parents[2]

# A host with a chat open, so the editor MCP server is up: prints its socket's
# directory and its reaper's pid, then runs until stdin closes.
_HOST = """
import sys
import anyio
from acp_nvim.client.agent import groups
from tests.proc import wait_gone
from acp_nvim.client.app import App
from tests.fakes.editor import RecordingEditor

async def main():
    async with anyio.create_task_group() as tasks:
        app = App(RecordingEditor(), tasks)
        await app.open(1, None, sys.argv[1])
        print(app.mcp_socket.directory, groups._reaper.pid, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)
        await app.shutdown()
        tasks.cancel_scope.cancel()

anyio.run(main)
"""


def _host(tmp: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)},
    )
    assert host.stdout is not None
    directory, reaper = host.stdout.readline().decode().split()
    return host, Path(directory), int(reaper)


def test_a_killed_hosts_directory_goes_and_a_live_ones_stays(tmp_path: Path) -> None:
    stranger = tmp_path / "acp-nvim-mcp-stranger"  # the same name, never handed over
    stranger.mkdir()
    dead, dead_dir, dead_reaper = _host(tmp_path)
    live, live_dir, live_reaper = _host(tmp_path)
    with dead, live:  # their pipes closed, however the test ends
        assert (dead_dir / "mcp.sock").exists() and (live_dir / "mcp.sock").exists()
        dead.send_signal(signal.SIGKILL)  # no finally runs: the reaper sees EOF
        dead.wait()
        assert wait_gone([dead_reaper]) == []
        assert not dead_dir.exists()
        assert (live_dir / "mcp.sock").exists()  # a live host's socket is never touched
        assert stranger.exists()
        # Ended normally, the host removes it itself, and its reaper has nothing left.
        assert live.stdin is not None
        live.stdin.close()
        assert live.wait(60) == 0
        assert wait_gone([live_reaper]) == []
    assert not live_dir.exists()
    assert sorted(p.name for p in tmp_path.glob("acp-nvim-mcp-*")) == [stranger.name]


def test_the_reaper_removes_only_the_directories_it_still_holds(tmp_path: Path) -> None:
    held, let_go = tmp_path / "a dir *", tmp_path / "a dir"  # spaces, a glob
    for directory in (held, let_go):
        (directory / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (held / "sub" / "link").symlink_to(outside)  # not followed
    lines = [str(held), str(let_go), f"-{let_go}"]
    subprocess.run(["/bin/sh", "-c", groups._REAPER], input="\n".join(lines).encode() + b"\n")
    assert not held.exists()
    assert let_go.exists() and outside.exists()
