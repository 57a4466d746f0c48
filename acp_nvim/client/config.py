"""User configuration, validated once with msgspec.

``require("acp").setup(opts)`` hands the raw Lua table to :func:`load_config`;
a wrong option becomes a :class:`ConfigError` naming the dotted key, e.g.
``agents.claude.cmd: expected a list, got a string``. Unknown keys are errors.

msgspec, not pydantic: this runs before the first agent can start, and importing
pydantic cost more than the rest of the start-up (decision 0010).
"""

from __future__ import annotations

__all__ = ["AgentConfig", "ChatOptions", "Config", "ConfigError", "builtin_agents", "load_config"]

import os
import re
import sys
import typing
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta


class ConfigError(ValueError):
    """A user option is wrong; ``str()`` names the key first."""


class AgentConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How to launch one agent: argv, extra environment, working directory."""

    cmd: Annotated[list[str], Meta(min_length=1)]
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    # gemini-cli probes a path with fs/read_text_file before creating the file
    # and gives up on any error: answer a missing file with "" for such agents.
    missing_file_as_empty: bool = False

    def __post_init__(self) -> None:
        if self.cwd is not None:
            msgspec.structs.force_setattr(self, "cwd", os.path.expanduser(self.cwd))


# A size is a fraction of the editor (at most 1) or a count of cells (_SIZES).
_Size = Annotated[float, Meta(gt=0)]
_SIZES = {"width": 20, "height": 5}  # the least count of cells
_Count = Annotated[int, Meta(ge=1)]


class ChatOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Where and how big the chat windows are (used by the Lua side)."""

    position: Literal["right", "left", "bottom", "float", "tab"] = "right"
    width: _Size = 0.4
    min_width: _Count = 40
    max_width: _Count = 120
    height: _Size = 0.4
    min_height: _Count = 10
    max_height: _Count = 40
    input_height: _Count = 5


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Every option of the plugin. Lua-only options (window layout) are checked here too."""

    agents: dict[str, AgentConfig] = msgspec.field(default_factory=dict)
    default_agent: str = "demo"
    protocol_version: Literal[1, 2] = 1
    permission_policy: Literal["ask", "allow_reads", "allow_all"] = "ask"
    auto_save: bool = True
    follow_agent: bool = False
    python: str | None = None
    host: Literal["job", "rplugin"] = "job"
    log_lines: Annotated[int, Meta(ge=100, le=1_000_000)] = 5000
    chat: ChatOptions = msgspec.field(default_factory=ChatOptions)

    def all_agents(self) -> dict[str, AgentConfig]:
        """The built-in agents overlaid with the configured ones."""
        return {**builtin_agents(), **self.agents}

    def agent(self, name: str | None) -> tuple[str, AgentConfig]:
        """Resolve an agent by name (None: the default one).

        Raises:
            ConfigError: no such agent, listing the known names.
        """
        name = name or self.default_agent
        agents = self.all_agents()
        if name not in agents:
            known = ", ".join(sorted(agents))
            raise ConfigError(f"unknown agent {name!r} (configured: {known})")
        return name, agents[name]


def builtin_agents() -> dict[str, AgentConfig]:
    """Agents usable without configuration: the offline demo and the usual CLIs on PATH."""
    return {
        "demo": AgentConfig(cmd=[sys.executable, "-m", "acp_nvim.demo_agent"], env=_this_tree()),
        "claude": AgentConfig(cmd=["claude-agent-acp"]),
        "codex": AgentConfig(cmd=["codex-acp"]),
        "gemini": AgentConfig(cmd=["gemini", "--acp"], missing_file_as_empty=True),
        "opencode": AgentConfig(cmd=["opencode", "acp"]),
        "qwen": AgentConfig(cmd=["qwen", "--acp"]),
    }


def _this_tree() -> dict[str, str]:
    """The demo agent runs the code of the host that starts it, whatever is installed
    (a strict editable install, for one, lacks modules added since)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": root + os.pathsep + path if path else root}


def load_config(raw: Any) -> Config:
    """Validate the options table coming from Lua.

    Raises:
        ConfigError: the first wrong key, e.g. ``agents.x.cmd: required``.
    """
    raw = _table(raw if raw is not None else {})
    if not isinstance(raw, dict):
        raise ConfigError(f"options must be a table, got {type(raw).__name__}")
    raw = {k: (_table(v) if k in ("agents", "chat") else v) for k, v in raw.items()}
    agents = raw.pop("agents", {})
    if not isinstance(agents, dict):
        raise ConfigError("agents: expected a table of agents by name")
    try:
        config = msgspec.convert(raw, Config)
    except msgspec.ValidationError as err:
        raise ConfigError(_describe(str(err))) from None
    # One by one, so that an error names the agent (msgspec shows a dict key as [...]).
    config = msgspec.structs.replace(
        config, agents={name: _agent(name, spec) for name, spec in agents.items()}
    )
    for key, least in _SIZES.items():
        size = getattr(config.chat, key)
        if size > 1 and (size < least or size % 1):
            raise ConfigError(
                f"chat.{key}: expected a fraction (at most 1) or a whole number >= {least},"
                f" got {size:g}"
            )
    if config.default_agent not in config.all_agents():
        raise ConfigError(f"default_agent: unknown agent {config.default_agent!r}")
    return config


def _table(value: Any) -> Any:
    """An empty Lua table arrives as a list; where a table is expected it is one."""
    return {} if value == [] else value


def _agent(name: Any, spec: Any) -> AgentConfig:
    key = f"agents.{name}"
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ConfigError(f"agents: agent name {name!r} must be a non-empty word")
    if isinstance(spec, dict) and "env" in spec:
        spec = {**spec, "env": _table(spec["env"])}
        for var, value in spec["env"].items() if isinstance(spec["env"], dict) else ():
            if not isinstance(value, str):  # named here: msgspec shows a dict key as [...]
                raise ConfigError(f"{key}.env.{var}: expected a string")
    try:
        agent = msgspec.convert(spec, AgentConfig)
    except msgspec.ValidationError as err:
        raise ConfigError(_describe(str(err), key)) from None
    if not agent.cmd[0].strip():
        raise ConfigError(f"{key}.cmd: the first item must name a program")
    return agent


# msgspec names JSON types; the options are a Lua table.
_TYPE_WORDS = {
    "array": "a list",
    "object": "a table",
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "nil",
}


def _describe(error: str, prefix: str = "") -> str:
    """``Expected `int` >= 20 - at `$.chat.width``` -> ``chat.width: expected an integer >= 20``."""
    message, _, path = error.partition(" - at `$")
    key = ".".join(k for k in (prefix, path.rstrip("`").lstrip(".")) if k)
    unknown = re.fullmatch(r"Object contains unknown field `(.+)`", message)
    if unknown:
        return f"{key + '.' if key else ''}{unknown.group(1)}: unknown option"
    missing = re.fullmatch(r"Object missing required field `(.+)`", message)
    if missing:
        return f"{key + '.' if key else ''}{missing.group(1)}: required"
    if message.startswith("Invalid enum value"):
        choices = " or ".join(repr(c) for c in _choices(key))
        return f"{key}: expected {choices}, got {message.removeprefix('Invalid enum value ')}"
    message = re.sub(r"`(\w+)`", lambda m: _TYPE_WORDS.get(m.group(1), m.group(1)), message)
    return f"{key}: {message[:1].lower()}{message[1:]}"


def _choices(key: str) -> tuple[Any, ...]:
    """The values a Literal option at dotted ``key`` may take."""
    owner: Any = Config
    for part in key.split("."):
        field = next(f for f in msgspec.structs.fields(owner) if f.encode_name == part)
        owner = field.type
    return typing.get_args(owner)
