"""User configuration, validated once with pydantic.

``require("acp").setup(opts)`` hands the raw Lua table to :func:`load_config`;
a wrong option becomes a :class:`ConfigError` naming the dotted key, e.g.
``agents.claude.cmd: Input should be a valid list``. Unknown keys are errors.
"""

from __future__ import annotations

__all__ = ["AgentConfig", "ChatOptions", "Config", "ConfigError", "builtin_agents", "load_config"]

import os
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ConfigError(ValueError):
    """A user option is wrong; ``str()`` is one line per problem, key first."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentConfig(_Strict):
    """How to launch one agent: argv, extra environment, working directory."""

    cmd: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    # gemini-cli probes a path with fs/read_text_file before creating the file
    # and gives up on any error: answer a missing file with "" for such agents.
    missing_file_as_empty: bool = False

    @field_validator("cwd")
    @classmethod
    def _expand_home(cls, cwd: str | None) -> str | None:
        return os.path.expanduser(cwd) if cwd is not None else None

    @field_validator("cmd")
    @classmethod
    def _program_named(cls, cmd: list[str]) -> list[str]:
        if not cmd[0].strip():
            raise ValueError("the first item must name a program")
        return cmd


class ChatOptions(_Strict):
    """Where and how big the chat windows are (used by the Lua side)."""

    position: Literal["right", "left", "bottom", "tab"] = "right"
    width: int = Field(default=80, ge=20)
    height: int = Field(default=20, ge=5)
    input_height: int = Field(default=5, ge=1)


class Config(_Strict):
    """Every option of the plugin. Lua-only options (window layout) are checked here too."""

    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    default_agent: str = "demo"
    protocol_version: Literal[1, 2] = 1
    permission_policy: Literal["ask", "allow_reads", "allow_all"] = "ask"
    auto_save: bool = True
    follow_agent: bool = False
    python: str | None = None
    host: Literal["job", "rplugin"] = "job"
    log_lines: int = Field(default=5000, ge=100, le=1_000_000)
    chat: ChatOptions = Field(default_factory=ChatOptions)

    @field_validator("agents")
    @classmethod
    def _names(cls, agents: dict[str, AgentConfig]) -> dict[str, AgentConfig]:
        for name in agents:
            if not name or any(c.isspace() for c in name):
                raise ValueError(f"agent name {name!r} must be a non-empty word")
        return agents

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
        "demo": AgentConfig(cmd=[sys.executable, "-m", "acp_nvim.demo_agent"]),
        "claude": AgentConfig(cmd=["claude-agent-acp"]),
        "codex": AgentConfig(cmd=["codex-acp"]),
        "gemini": AgentConfig(cmd=["gemini", "--acp"], missing_file_as_empty=True),
        "opencode": AgentConfig(cmd=["opencode", "acp"]),
        "qwen": AgentConfig(cmd=["qwen", "--acp"]),
    }


def load_config(raw: Any) -> Config:
    """Validate the options table coming from Lua.

    Raises:
        ConfigError: one line per wrong key, e.g. ``agents.x.cmd: Field required``.
    """
    if raw is None or raw == []:  # an empty Lua table arrives as a list
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"options must be a table, got {type(raw).__name__}")
    # Empty Lua tables arrive as lists; where a dict is expected, read them as one.
    raw = {k: ({} if v == [] and k in ("agents", "chat") else v) for k, v in raw.items()}
    try:
        config = Config.model_validate(raw)
    except ValidationError as err:
        raise ConfigError("\n".join(_describe(e) for e in err.errors())) from None
    if config.default_agent not in config.all_agents():
        raise ConfigError(f"default_agent: unknown agent {config.default_agent!r}")
    return config


def _describe(error: Any) -> str:
    key = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        message = "unknown option"
    return f"{key}: {message}"
