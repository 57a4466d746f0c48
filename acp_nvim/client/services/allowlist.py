"""The user's allow-list (``permissions.allow``): tool calls answered "allow" without
asking, by the command they run or the paths they name. At the user's own risk: a
prefix trusts whatever the agent appends to it, so a command with anything chained,
piped, substituted or redirected after it never matches."""

from __future__ import annotations

__all__ = ["allowed", "named_paths"]

import os
import re
import shlex
from typing import Any

from acp_nvim.client.config import PermissionAllow
from acp_nvim.client.session.model import ChangesPart, DiffPart, ToolCall

# Shell syntax that makes one command line run more than the command it starts with.
_CHAINED = re.compile(r"[;&|`<>\n]|\$\(")


# Shells whose ``-c`` script codex's argv hands the command line to.
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})

# gemini-cli's shell tool call names its command in the title alone: ``COMMAND
# [current working directory CWD]`` or ``COMMAND [in DIR]``, then `` (DESCRIPTION)``
# and more. Greedy, the command read is the longest the title allows: never shorter
# than the one run, so anything chained after it stays in what is checked.
_GEMINI_TITLE = re.compile(r"(.+) \[(?:current working directory|in) .*")


def command_of(raw_input: Any) -> str | None:
    """The command line a tool call runs, from its raw input (``command``: a string,
    or an argv as codex sends it); None when it runs none. codex runs its commands
    through the user's shell (``["/bin/bash", "-lc", "git status"]``): the script is
    the command line, as the other agents' ``command`` is."""
    if not isinstance(raw_input, dict):
        return None
    command = raw_input.get("command") or raw_input.get("cmd")
    if isinstance(command, list) and all(isinstance(a, str) for a in command):
        match command:
            case [str(shell), "-c" | "-lc", str(script)] if os.path.basename(shell) in _SHELLS:
                return script
        return shlex.join(command)
    return command if isinstance(command, str) else None


def _command(call: ToolCall) -> str | None:
    """The command line ``call`` runs: from its raw input, else (an ``execute`` call
    with none, as gemini's) from its title in gemini's form."""
    if call.raw_input is not None:
        return command_of(call.raw_input)
    match = _GEMINI_TITLE.fullmatch(call.title) if call.kind == "execute" else None
    return match.group(1) if match else None


def _runs(command: str, prefix: str) -> bool:
    """Whether ``command`` is ``prefix`` or ``prefix`` followed by arguments, alone."""
    words, wanted = command.split(), prefix.split()
    return not _CHAINED.search(command) and words[: len(wanted)] == wanted


def named_paths(call: ToolCall) -> list[str]:
    """The paths tool call ``call`` names: its locations', its diffs', its file
    changes' (where moved, both)."""
    paths = [loc.path for loc in call.locations]
    for part in call.content:
        if isinstance(part, DiffPart):
            paths.append(part.path)
        elif isinstance(part, ChangesPart):
            paths += [p for op in part.changes for p in (op.path, op.old_path) if p]
    return paths


def _inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def allowed(call: ToolCall, allow: PermissionAllow, cwd: str) -> str | None:
    """Why ``call`` is allowed without asking (the entry that matched), else None.

    A call that runs a command is matched on its command only; one that runs none,
    on its locations and the paths of its diffs, every one inside an allowed path.
    """
    command = _command(call)
    if command is not None:
        match = next((p for p in allow.commands if _runs(command, p)), None)
        return f"allowed command `{match}`" if match is not None else None
    paths = named_paths(call)
    if not paths or not allow.paths:
        return None
    roots = [os.path.realpath(os.path.join(cwd, os.path.expanduser(p))) for p in allow.paths]
    if all(_inside(os.path.join(cwd, p), roots) for p in paths):
        return "allowed path"
    return None
