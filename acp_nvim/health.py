"""``python -m acp_nvim.health``: facts for ``:checkhealth acp`` as one JSON object.

Reads the user's options (JSON) on stdin and reports the Python environment,
the dependency versions, whether the environment is older than the project's
dependencies, whether the options are valid, and for each agent whether its
program can be found. It never starts an agent. Options and agents are only
checked when the dependencies are there.

``--state DIR`` (Neovim's stdpath("state")) adds the worktrees of worktree chats
kept there that no running Neovim's chat works in.

``python -m acp_nvim.health --stamp`` records in the virtual environment it
runs in which dependencies it was built for (``:AcpInstall`` and ``make`` do
this last), so an update that changes them shows as ``stale``.
"""

from __future__ import annotations

__all__ = ["STAMP", "dependencies_digest", "report", "write_stamp"]

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

DEPENDENCIES = ("pynvim", "anyio", "msgspec", "pydantic")
# What a launcher needs, for presets that cannot start here.
_NEEDS = {"npx": "npx (Node.js)", "uvx": "uvx (uv)"}
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# In the environment's root (sys.prefix), beside pyvenv.cfg.
STAMP = "acp-nvim-dependencies"


def dependencies_digest(pyproject: str) -> str:
    """A digest of what the environment must provide: ``requires-python`` and the
    ``[project]`` dependencies (not the extras, nor anything else in the file).

    Read with a regular expression: ``tomllib`` needs Python 3.11, we support 3.10,
    and the file is ours.
    """
    requires = re.search(r'^requires-python\s*=\s*"([^"]*)"', pyproject, re.M)
    listed = re.search(r"^dependencies\s*=\s*\[(.*?)\]", pyproject, re.M | re.S)
    names = re.findall(r'"([^"]+)"', listed[1]) if listed else []
    facts = [requires[1] if requires else "", *names]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()


def _in_venv() -> bool:
    return sys.prefix != sys.base_prefix


def _stale() -> bool | None:
    """Whether this environment was built for other dependencies (or by hand: no
    stamp); None when that cannot be told (no venv, or no pyproject.toml)."""
    if not _in_venv() or not PYPROJECT.exists():
        return None
    try:
        recorded = (Path(sys.prefix) / STAMP).read_text().strip()
    except OSError:
        return True
    return recorded != dependencies_digest(PYPROJECT.read_text())


def write_stamp() -> None:
    """Record the current dependencies in the running virtual environment."""
    if not _in_venv():
        sys.exit("acp_nvim.health --stamp: not running in a virtual environment")
    digest = dependencies_digest(PYPROJECT.read_text())
    (Path(sys.prefix) / STAMP).write_text(digest + "\n")


def report(raw_options: Any, state_dir: str | None = None) -> dict[str, Any]:
    """The facts; with ``state_dir`` (Neovim's stdpath("state")), the worktrees of
    worktree chats there that no running Neovim's chat works in."""
    from acp_nvim import __version__

    versions: dict[str, str | None] = {}
    for name in DEPENDENCIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    facts: dict[str, Any] = {
        "python": sys.executable,
        "python_version": sys.version.split()[0],
        "acp_nvim": __version__,
        "dependencies": versions,
        "stale": _stale(),
    }
    if None in versions.values():
        return facts
    from acp_nvim.client.config import Config, ConfigError, load_config

    config_errors: list[str] = []
    try:
        config = load_config(raw_options)
    except ConfigError as err:
        # The agents and servers given right are still looked for: a wrong key
        # elsewhere hid an agent not installed until it was fixed.
        config_errors = err.problems
        config = err.config or Config()
    agents = {}
    for name, agent in sorted(config.all_agents().items()):
        program = agent.cmd[0]
        found = shutil.which(program, path={**os.environ, **agent.env}.get("PATH"))
        agents[name] = {
            "cmd": agent.cmd,
            "found": found,
            "missing": None if found else _missing(program),
            # Where it would work, when its own cwd option names no directory.
            "no_cwd": agent.cwd if agent.cwd and not os.path.isdir(agent.cwd) else None,
            "configured": name in config.agents,
            "needs": _NEEDS.get(program, f"{program!r} on PATH"),
            # npx and uvx fetch the agent's package when it starts: found says
            # only that the launcher is there.
            "fetched_by": os.path.basename(program) if program in _NEEDS else None,
        }
    return {
        **facts,
        "config_errors": config_errors,
        "default_agent": config.default_agent,
        "agents": agents,
        "mcp": _mcp(config),
        "worktrees": _worktrees(state_dir) if state_dir else [],
    }


def _worktrees(state_dir: str) -> list[dict[str, Any]]:
    """The worktrees under ``state_dir`` no running Neovim's chat works in: ``left``
    by a Neovim that ended without closing them, or kept by their chat's close; each
    with the commands that remove it (``removal``)."""
    from acp_nvim.client.services.worktrees import unattended, worktrees_home

    return [
        {**worktree._asdict(), "removal": worktree.removal}
        for worktree in unattended(worktrees_home(state_dir))
    ]


def _missing(program: str) -> str:
    """Why ``program``, which ``shutil.which`` did not find, cannot start (as the
    chat's start would say it)."""
    if os.sep not in program:
        return "is not installed or not on PATH"
    if not os.path.exists(program):
        return "does not exist"
    return "is a directory" if os.path.isdir(program) else "is not executable"


def _mcp(config: Any) -> dict[str, Any]:
    """The editor MCP server (its tools, whether its shim runs) and the user's servers."""
    choice = config.editor_mcp
    tools = config.editor_mcp_tools()
    shim = subprocess.run(
        [sys.executable, "-m", "acp_nvim.mcp", "--check"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PYPROJECT.parent)},
        check=False,
    )
    servers = {}
    owners = [("", config.mcp_servers)] + [
        (f"{name}: ", agent.mcp_servers) for name, agent in sorted(config.agents.items())
    ]
    for owner, listed in owners:
        for name, server in sorted(listed.items()):
            found = shutil.which(server.command) if server.command else None
            servers[owner + name] = {
                "type": server.type,
                "command": [server.command, *server.args] if server.command else None,
                "url": server.url,
                "found": found,
            }
    runs = shim.returncode == 0 and shim.stdout.strip() == "ok"
    off = None
    if not choice:
        off = "editor_mcp = false"
    elif not tools:  # an agent is offered no server without tools (McpOffer)
        off = "editor_mcp.tools is empty"
    return {
        "off": off,
        "tools": tools,
        "shim": runs,
        "shim_error": "" if runs else (shim.stderr or shim.stdout).strip()[-500:],
        "servers": servers,
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["--stamp"]:
        write_stamp()
    else:
        # ``--state DIR``: Neovim's stdpath("state"), for its worktrees.
        state = sys.argv[2] if sys.argv[1:2] == ["--state"] and len(sys.argv) > 2 else None
        text = sys.stdin.read()
        print(json.dumps(report(json.loads(text) if text.strip() else {}, state)))
