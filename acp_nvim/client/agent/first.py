"""The first chat's agent, spawned before the host imports its event loop (decision 0051).

An agent's own start (its runtime, its modules, its ``initialize``) and the host's
(Python, pynvim, asyncio, anyio, the client: some 150 ms) used to run one after
the other: the host spawned the agent only once it was built and heard ``open``.
Now Lua, starting the host for a chat, puts that chat's agent and directory and
the options in the host's environment (:data:`ENV`); ``python -m acp_nvim``
resolves the agent from them as ``open`` will, spawns it and holds its group,
and only then imports the rest while the agent starts. The chat's
:class:`~acp_nvim.client.agent.process.AgentProcess` takes the process over when it
would start the same one (argv, environment, directory); a first start of another
one ends it, and so does :func:`end` when nothing took it in time.

Nothing here may import an event loop, pynvim or the client beyond its options.
"""

from __future__ import annotations

__all__ = ["CLAIM_SECONDS", "ENV", "Spawned", "claim", "end", "spawn"]

import atexit
import json
import os
import signal
import subprocess
from collections.abc import Mapping, MutableMapping, Sequence

import msgspec

from acp_nvim.client.agent.groups import Group, kill_all

ENV = "ACP_NVIM_FIRST_AGENT"
# How long a first agent waits to be taken by a chat's start (the host's own
# start-up included) before the host ends it: Lua sends the chat's open right
# after starting the host, so only an open that starts no agent leaves it waiting.
CLAIM_SECONDS = 10.0


class Spawned(msgspec.Struct, frozen=True):
    """The first agent's process, as it was started."""

    cmd: list[str]
    env: dict[str, str]
    cwd: str
    popen: subprocess.Popen[bytes]
    group: Group


_waiting: Spawned | None = None


def spawn(environ: MutableMapping[str, str] = os.environ) -> None:
    """Spawn the agent :data:`ENV` names, if it names one that can start. Anything
    wrong (the options, the agent, its program or directory) spawns nothing: the
    chat's own start finds it again and says so. The variable is taken out of
    ``environ``, so that no agent inherits it."""
    global _waiting
    given = environ.pop(ENV, None)
    if not given:
        return
    from acp_nvim.client.config import ConfigError, agent_cwd, chat_cwd, load_config

    try:
        first = json.loads(given)
        _, agent = load_config(first.get("options")).agent(first.get("agent"))
        chat = chat_cwd(agent, first["cwd"], cwd_given=bool(first.get("cwd_given")))
        cwd = agent_cwd(agent, chat)
    except (ConfigError, ValueError, KeyError, TypeError, AttributeError):  # ValueError: not JSON
        return
    env = {**environ, **agent.env}
    try:
        popen = subprocess.Popen(
            agent.cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError:  # not found, not executable, no such directory
        return
    group = Group(popen)
    group.hold()
    atexit.register(kill_all)  # a host that cannot start leaves no agent behind
    _waiting = Spawned(list(agent.cmd), env, cwd, popen, group)


def waiting() -> bool:
    """Whether a first agent is starting and no chat has taken it yet."""
    return _waiting is not None


def claim(cmd: Sequence[str], env: Mapping[str, str], cwd: str | None) -> Spawned | None:
    """The first agent, for the start of the same ``cmd`` in ``env`` and ``cwd``;
    None otherwise, and a first agent that is another one is ended: the host's
    first start decided what the first chat runs."""
    global _waiting
    spawned, _waiting = _waiting, None
    if spawned is None:
        return None
    if (spawned.cmd, spawned.env, spawned.cwd) == (list(cmd), dict(env), cwd):
        return spawned
    _end(spawned)
    return None


def end() -> None:
    """End the first agent if nothing took it."""
    global _waiting
    spawned, _waiting = _waiting, None
    if spawned is not None:
        _end(spawned)


def _end(spawned: Spawned) -> None:
    # SIGKILL, then reap at once: a killed process is gone within a scheduler tick.
    spawned.group.signal(signal.SIGKILL)
    for pipe in (spawned.popen.stdin, spawned.popen.stdout, spawned.popen.stderr):
        if pipe is not None:
            pipe.close()
    spawned.popen.wait()
    spawned.group.drop()
