"""``python -m acp_nvim.health``: facts for ``:checkhealth acp`` as one JSON object.

Reads the user's options (JSON) on stdin and reports the Python environment,
the dependency versions, whether the options are valid, and for each agent
whether its program can be found. It never starts an agent.
"""

from __future__ import annotations

__all__ = ["report"]

import importlib.metadata
import json
import os
import shutil
import sys
from typing import Any

DEPENDENCIES = ("pynvim", "anyio", "msgspec")


def report(raw_options: Any) -> dict[str, Any]:
    from acp_nvim import __version__
    from acp_nvim.client.config import Config, ConfigError, load_config

    versions: dict[str, str | None] = {}
    for name in DEPENDENCIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    config_error = None
    try:
        config = load_config(raw_options)
    except ConfigError as err:
        config_error = str(err)
        config = Config()
    agents = {}
    for name, agent in sorted(config.all_agents().items()):
        program = agent.cmd[0]
        found = shutil.which(program, path={**os.environ, **agent.env}.get("PATH"))
        agents[name] = {"cmd": agent.cmd, "found": found, "configured": name in config.agents}
    return {
        "python": sys.executable,
        "python_version": sys.version.split()[0],
        "acp_nvim": __version__,
        "dependencies": versions,
        "config_error": config_error,
        "default_agent": config.default_agent,
        "agents": agents,
    }


if __name__ == "__main__":
    text = sys.stdin.read()
    print(json.dumps(report(json.loads(text) if text.strip() else {})))
