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

Resolving takes the options' module and msgspec, most of the time before the spawn.
So what it gave is kept (:class:`Launches`, decision 0066) and the next start with
the same hand-over spawns at once; an entry that the chat's start then disagrees
with is dropped.

Nothing here may import an event loop, pynvim, msgspec or the client's options
before the spawn.
"""

from __future__ import annotations

__all__ = ["CLAIM_SECONDS", "ENV", "Launch", "Launches", "Spawned", "claim", "end", "spawn"]

import atexit
import hashlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, MutableMapping, Sequence
from typing import NamedTuple

from acp_nvim import __version__
from acp_nvim.client import json_file
from acp_nvim.client.agent.groups import Group, kill_all

ENV = "ACP_NVIM_FIRST_AGENT"
# How long a first agent waits to be taken by a chat's start (the host's own
# start-up included) before the host ends it: Lua sends the chat's open right
# after starting the host, so only an open that starts no agent leaves it waiting.
CLAIM_SECONDS = 10.0
# Launches kept: the newest ones, one per agent, directory and options in use.
KEPT = 16


class Launch(NamedTuple):
    """What an agent starts as: its argv, the variables it adds, its directory."""

    cmd: list[str]
    env: dict[str, str]
    cwd: str


class Spawned(NamedTuple):
    """The first agent's process, as it was started; ``kept``: where its launch is
    kept (None: nowhere), the entry dropped if the chat's start disagrees."""

    cmd: list[str]
    env: dict[str, str]
    cwd: str
    popen: subprocess.Popen[bytes]
    group: Group
    kept: Launches | None


class Launches:
    """The launches resolved for earlier hand-overs, in ``stdpath("cache")/acp``.

    An entry is found by a digest of the hand-over (the options, the agent, the
    directory), ``HOME`` (``~`` in the options expands to it) and the plugin's
    version, never by the hand-over itself: the options may hold secrets. For the
    same reason an agent that adds variables to its environment is never kept.
    ``PATH`` is not in the digest: the program is looked up on it as it is spawned,
    kept or not. A file that cannot be read or written is no entry, and says
    nothing: the launch is resolved as it always was.
    """

    def __init__(self, directory: str, first: object, environ: Mapping[str, str]) -> None:
        self.path = os.path.join(directory, "acp", "first-agents.json")
        # Keys sorted: Lua encodes a table's keys in an order of its own, which need
        # not be the same in the next Neovim.
        given = json.dumps(first, sort_keys=True, ensure_ascii=False)
        parts = (given, environ.get("HOME", ""), __version__)
        self.key = hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def recall(self) -> Launch | None:
        entry = self._read().get(self.key)
        if entry is None:
            return None
        cmd, cwd = entry.get("cmd"), entry.get("cwd")
        if not (isinstance(cmd, list) and cmd and all(isinstance(arg, str) for arg in cmd)):
            return None
        return Launch(cmd, {}, cwd) if isinstance(cwd, str) else None

    def keep(self, launch: Launch) -> None:
        if launch.env:
            return
        entries: dict[str, dict[str, object]] = {self.key: {"cmd": launch.cmd, "cwd": launch.cwd}}
        for key, entry in self._read().items():
            if len(entries) < KEPT:
                entries.setdefault(key, entry)
        self._write(entries)

    def drop(self) -> None:
        entries = self._read()
        if entries.pop(self.key, None) is not None:
            self._write(entries)

    def _read(self) -> dict[str, dict[str, object]]:
        entries = json_file.read_object(self.path).items()
        return {key: entry for key, entry in entries if isinstance(entry, dict)}

    def _write(self, entries: dict[str, dict[str, object]]) -> None:
        try:
            json_file.write(self.path, entries)
        except OSError:
            pass


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
    try:
        first = json.loads(given)
        cache = first.get("cache")
    except (ValueError, AttributeError):
        return
    kept = Launches(cache, first, environ) if isinstance(cache, str) and cache else None
    launch = kept.recall() if kept is not None else None
    recalled = launch is not None
    if launch is None:
        launch = _resolve(first)
        if launch is None:
            return
    env = {**environ, **launch.env}
    try:
        popen = subprocess.Popen(
            launch.cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=launch.cwd,
            start_new_session=True,
        )
    except OSError:  # not found, not executable, no such directory
        if recalled and kept is not None:
            kept.drop()
        return
    group = Group(popen)
    group.hold()
    atexit.register(kill_all)  # a host that cannot start leaves no agent behind
    if kept is not None and not recalled:
        kept.keep(launch)
    _waiting = Spawned(list(launch.cmd), env, launch.cwd, popen, group, kept)


def _resolve(first: dict[str, object]) -> Launch | None:
    """The launch the chat's start will make of the hand-over; None when it fails."""
    from acp_nvim.client.config import ConfigError, agent_cwd, chat_cwd, load_config

    try:
        _, agent = load_config(first.get("options")).agent(first.get("agent"))  # type: ignore[arg-type]
        chat = chat_cwd(agent, first["cwd"], cwd_given=bool(first.get("cwd_given")))  # type: ignore[arg-type]
    except (ConfigError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return Launch(list(agent.cmd), dict(agent.env), agent_cwd(agent, chat))


def waiting() -> bool:
    """Whether a first agent is starting and no chat has taken it yet."""
    return _waiting is not None


def claim(cmd: Sequence[str], env: Mapping[str, str], cwd: str | None) -> Spawned | None:
    """The first agent, for the start of the same ``cmd`` in ``env`` and ``cwd``;
    None otherwise, and a first agent that is another one is ended: the host's
    first start decided what the first chat runs. A kept launch it came from is
    dropped then: the next start resolves it again."""
    global _waiting
    spawned, _waiting = _waiting, None
    if spawned is None:
        return None
    if (spawned.cmd, spawned.env, spawned.cwd) == (list(cmd), dict(env), cwd):
        return spawned
    if spawned.kept is not None:
        spawned.kept.drop()
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
