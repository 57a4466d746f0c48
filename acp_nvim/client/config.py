"""User configuration, validated once with msgspec.

``require("acp").setup(opts)`` hands the raw Lua table to :func:`load_config`;
wrong options become one :class:`ConfigError` naming every wrong one by its dotted
key, e.g. ``agents.claude.cmd: expected a list, got a string``. Unknown keys are
errors.

The single source of the options: their types, defaults and built-in agents here,
the docstring under each field its description. ``make doc`` writes from them
lua/acp/defaults.lua (for Lua that needs them before this process answers) and
the option sections of doc/acp.txt; ``make check`` fails when those drift.

msgspec, not pydantic: this runs before the first agent can start, and importing
pydantic cost more than the rest of the start-up (decision 0010).
"""

from __future__ import annotations

__all__ = [
    "CHAT_SIZES",
    "EDITOR_SERVER",
    "EDITOR_TOOLS",
    "KEY_PLACES",
    "AgentConfig",
    "ChatKeys",
    "ChatOptions",
    "Config",
    "ConfigError",
    "EditorMcpOptions",
    "EditorTool",
    "FileAccessOptions",
    "HistoryOptions",
    "HunkKeys",
    "InputKeys",
    "Keys",
    "MappedIn",
    "McpServerOptions",
    "PermissionKeys",
    "QueueKeys",
    "ReviewKeys",
    "TimeoutOptions",
    "builtin_agents",
    "load_config",
    "workspace_root",
]

import copy
import os
import re
import sys
import types
import typing
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta


class ConfigError(ValueError):
    """User options are wrong: ``problems`` holds each as ``key: what is wrong``;
    ``str()`` joins them. ``config``: from :func:`load_config`, the options with the
    wrong ones left out (what :checkhealth looks at beside them)."""

    def __init__(self, *problems: str, config: Config | None = None) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)
        self.config = config

    def summary(self) -> str:
        """One line for the user: ``invalid option k: ...`` or ``invalid options: ...``."""
        if len(self.problems) == 1:
            return f"invalid option {self.problems[0]}"
        return f"invalid options: {'; '.join(self.problems)}"


# The tools of the editor's own MCP server (acp_nvim/client/mcp), by their public names.
EditorTool = Literal[
    "list_buffers", "read_buffer", "get_selection", "get_diagnostics",
    "lsp_definition", "lsp_references", "lsp_hover", "lsp_symbols",
    "edit_buffer", "write_file", "run_command", "open_file",
]  # fmt: skip
EDITOR_TOOLS: tuple[EditorTool, ...] = typing.get_args(EditorTool)
# The editor server's name in mcpServers: agents prefix its tools with it
# (Claude: mcp__nvim__read_buffer), so no server of the user's may take it.
EDITOR_SERVER = "nvim"
EDITOR_SERVER_TAKEN = (
    f"'{EDITOR_SERVER}' names the editor's own MCP server (editor_mcp): give yours another name"
)


class McpServerOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """An MCP server of your own, offered to agents with each session."""

    type: Literal["stdio", "http", "sse"] = "stdio"
    """"stdio": a program the agent starts (`command`); "http": a server the agent
    reaches at `url`; "sse": the same over MCP's older HTTP+SSE transport"""
    command: str | None = None
    """program of a stdio server (looked up on PATH)"""
    args: list[str] = msgspec.field(default_factory=list)
    """its arguments"""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """environment variables the agent sets for it"""
    url: str | None = None
    """address of an http or sse server"""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """HTTP headers the agent sends to it"""

    def problem(self) -> str | None:
        """``key: what is wrong`` when this server cannot be offered; None if fine."""
        if self.type == "stdio":
            if not (self.command or "").strip():
                return "command: required for a stdio server"
            if self.url is not None or self.headers:
                key = "url" if self.url is not None else "headers"
                return f'{key}: only for type = "http" or "sse"'
            return None
        if not (self.url or "").strip():
            return f"url: required for an {self.type} server"
        for key in ("command", "args", "env"):
            if getattr(self, key):
                return f"{key}: only for a stdio server"
        return None


class EditorMcpOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The editor's own MCP server with a chosen set of tools."""

    tools: list[EditorTool] = msgspec.field(default_factory=lambda: list(EDITOR_TOOLS))
    """the tools it offers (see |acp-mcp-tools|)"""


class AgentConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How to launch one agent: argv, extra environment, working directory."""

    cmd: Annotated[list[str], Meta(min_length=1)]
    """argv of the agent; cmd[1] is looked up on PATH (`~` in it is your home)"""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """added to Neovim's environment"""
    cwd: str | None = None
    """working directory (default: Neovim's cwd)"""
    # gemini-cli probes a path with fs/read_text_file before creating the file
    # and gives up on any error: answer a missing file with "" for such agents.
    missing_file_as_empty: bool = False
    """read a missing file as "" (the built-in gemini does: it probes first)"""
    mode: str | None = None
    """mode to switch each new session to (e.g. "default" for qwen, which starts in
    "auto"); a mode the agent does not offer is reported"""
    set_mode: bool = False
    """switch the mode with v1 `session/set_mode`, even where the agent also offers
    a mode config option (the built-in qwen does: only `session/set_mode` switches it)"""
    model: str | None = None
    """model to switch each new session to"""
    config_options: dict[str, str | bool] = msgspec.field(default_factory=dict)
    """session settings to apply to each new session, by setting id"""
    editor_mcp: bool | EditorMcpOptions | None = None
    """the editor's MCP server for this agent (default: the global `editor_mcp`)"""
    mcp_servers: dict[str, McpServerOptions] = msgspec.field(default_factory=dict)
    """more MCP servers for this agent, added to the global `mcp_servers` (a name
    given in both takes this one)"""
    history: bool = True
    """keep this agent's chats in the chat history (see |acp-chat-history|)"""
    permission_policy: Literal["ask", "allow_reads", "allow_all"] | None = None
    """this agent's `permission_policy` (default: the global one)"""
    roots: list[str] = msgspec.field(default_factory=list)
    """more workspace roots for this agent's chats, after the global `roots`"""

    def __post_init__(self) -> None:
        if self.cwd is not None:
            msgspec.structs.force_setattr(self, "cwd", os.path.expanduser(self.cwd))
        if self.cmd:  # its program only: arguments are the agent's to read
            msgspec.structs.force_setattr(self, "cmd", _expanded(self.cmd[:1]) + self.cmd[1:])
        msgspec.structs.force_setattr(self, "roots", _expanded(self.roots))


# A size is a fraction of the editor (at most 1) or a count of cells (CHAT_SIZES).
_Size = Annotated[float, Meta(gt=0)]
CHAT_SIZES = {"width": 20, "height": 5}  # the least count of cells (Lua: defaults.lua)
_Count = Annotated[int, Meta(ge=1)]


class ChatOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Where and how big the chat windows are (used by the Lua side)."""

    position: Literal["right", "left", "bottom", "float", "tab"] = "right"
    """where the chat opens (see |acp-layout|)"""
    width: _Size | None = None
    """for right, left and float: a fraction of the editor's columns (at most 1), or
    columns (20 or more); not given: 0.4, for float 0.8"""
    min_width: _Count = 40
    """columns the width is never below (wins over max_width)"""
    max_width: _Count = 120
    """columns the width is never above"""
    height: _Size | None = None
    """for bottom and float, input included: a fraction of the editor's lines (at most
    1), or lines (5 or more); not given: 0.4, for float 0.8"""
    min_height: _Count = 10
    """lines the height is never below (wins over max_height)"""
    max_height: _Count = 40
    """lines the height is never above"""
    input_height: _Count = 5
    """lines of the input window"""
    send_key: str | None = None
    """the older name of |acp-option-keys.input.send_insert| ("" maps none);
    `keys.input.send_insert` wins when both are given"""
    send_now_key: str | None = None
    """the older name of |acp-option-keys.input.send_now| ("" maps none);
    `keys.input.send_now` wins when both are given"""


class TimeoutOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How long to wait for an agent before giving up on it (seconds)."""

    start: Annotated[float, Meta(gt=0)] = 30.0
    """for initialize, session/new, load and resume, and the fork or session a rewind
    or a branch switch goes on in: a chat that waits longer fails and an agent
    started for it is stopped"""
    cancel: Annotated[float, Meta(gt=0)] = 5.0
    """after a cancel, for the agent to end the turn; then it ends here as cancelled
    and what the agent still sends about it is not shown"""
    lsp: Annotated[float, Meta(gt=0)] = 5.0
    """for the language servers to answer an `lsp_*` tool of the editor's MCP server"""


class FileAccessOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Where agents may read and write files without asking (fs/*, symlinks resolved)."""

    outside: Literal["ask", "allow", "deny"] = "ask"
    """a read or write outside the session's directory and `roots`: ask in the chat,
    allow, or deny (the agent gets an error)"""
    roots: list[str] = msgspec.field(default_factory=list)
    """more directories agents may use like the session's own (absolute or ~/...)"""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "roots", _expanded(self.roots))


class PermissionAllow(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Tool calls allowed without asking, at your own risk (see |acp-permissions-allow|)."""

    commands: list[Annotated[str, Meta(min_length=1)]] = msgspec.field(default_factory=list)
    """command prefixes, e.g. "git status", "npm test": a tool call running one of them
    (alone, nothing chained to it) is allowed"""
    paths: list[Annotated[str, Meta(min_length=1)]] = msgspec.field(default_factory=list)
    """files or directories (relative to the chat's directory, absolute or ~/...): a
    tool call that runs no command and names only paths inside them is allowed"""


class PermissionOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Permission requests answered without asking, beside `permission_policy`."""

    allow: PermissionAllow = msgspec.field(default_factory=PermissionAllow)
    """what never asks (see |acp-permissions-allow|)"""


class HistoryOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The chat history: every chat kept in a local SQLite file, searchable."""

    enabled: bool = True
    """keep chats (see |acp-chat-history|); false keeps none"""
    path: str | None = None
    """the history file (default: stdpath("state")/acp/history.sqlite3)"""
    max_age_days: Annotated[float, Meta(gt=0)] | None = None
    """forget chats not changed for this many days, as |acp.forget()| does, at the
    file's first read or write (nil: keep them)"""

    def __post_init__(self) -> None:
        if self.path is not None:
            msgspec.structs.force_setattr(self, "path", os.path.expanduser(self.path))


class HunkKeys(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The older name of the `hunk_` keys of |acp-option-keys.review| ("" maps none)."""

    accept: str | None = None
    """`keys.review.hunk_accept`"""
    reject: str | None = None
    """`keys.review.hunk_reject`"""
    reject_why: str | None = None
    """`keys.review.hunk_reject_why`"""
    preview: str | None = None
    """`keys.review.hunk_preview`"""
    next: str | None = None
    """`keys.review.hunk_next`"""
    prev: str | None = None
    """`keys.review.hunk_prev`"""


# A key: the left-hand side of a mapping (as for vim.keymap.set), or false: none.
Key = Annotated[str, Meta(min_length=1)] | Literal[False]

# The kinds of buffer keys are mapped in together: two keys on one lhs in one of
# them, only the one mapped last works, and setup() says so (acp.keys.clashes,
# decision 0039). lua/acp/defaults.lua has them with their keys (M.key_places).
KEY_PLACES = {
    "transcript": "the chat's transcript",
    "input": "the chat's input",
    "review": "the review",
    "hunks": "a file with agent hunks",
}


class MappedIn:
    """The kinds of buffer (``KEY_PLACES``) a key of the `keys` option is mapped in.
    Every key says, else ``make doc`` stops: a new key cannot be left out of the
    clash warning. A permission key says none: it takes its key over the others
    only while a prompt waits, on purpose (decision 0019)."""

    def __init__(self, *places: str) -> None:
        self.places = places

    def __repr__(self) -> str:
        return f"MappedIn{self.places!r}"


TranscriptKey = Annotated[Key, MappedIn("transcript")]
WindowsKey = Annotated[Key, MappedIn("transcript", "input")]  # both of the chat's windows
InputKey = Annotated[Key, MappedIn("input")]
PromptKey = Annotated[Key, MappedIn()]
ReviewKey = Annotated[Key, MappedIn("review")]
FileHunkKey = Annotated[Key, MappedIn("hunks")]


class ChatKeys(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Keys of the chat in Normal mode: the transcript's, and the input's too where said."""

    hide: WindowsKey = "q"
    """hide the chat (both windows)"""
    cancel: WindowsKey = "<C-c>"
    """cancel the turn (both windows, Insert mode too)"""
    open: TranscriptKey = "<CR>"
    """on a permission prompt: pick an answer; on a location or a diff row: open the
    file there; on a terminal: open it; on the mark where another branch leaves: pick
    a branch"""
    help: TranscriptKey = "?"
    """show the chat's keys"""
    next_turn: TranscriptKey = "]]"
    """go to your next prompt"""
    prev_turn: TranscriptKey = "[["
    """go to your previous prompt"""
    next_tool: TranscriptKey = "]t"
    """go to the next tool call"""
    prev_tool: TranscriptKey = "[t"
    """go to the previous tool call"""
    review: TranscriptKey = "<localleader>v"
    """open the review of the agent's changes (|:AcpReview|)"""
    accept_all: TranscriptKey = "<localleader>A"
    """accept every open change of the chat"""
    reject_all: TranscriptKey = "<localleader>R"
    """reject every open change of the chat"""


class InputKeys(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Keys of the chat's input."""

    send: InputKey = "<CR>"
    """send the input (Normal mode)"""
    send_insert: InputKey = "<C-s>"
    """send the input from Insert mode (and Normal mode)"""
    send_now: InputKey = "<M-CR>"
    """send the input now, in Insert and Normal mode: into the running turn where the
    agent steers, else the turn is cancelled and it goes first (see |acp-steer|)"""
    prev_prompt: InputKey = "<Up>"
    """on the first line: the previous prompt of the history (Normal and Insert mode)"""
    next_prompt: InputKey = "<Down>"
    """on the last line: the next prompt of the history, then what you were typing"""


class PermissionKeys(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Keys that answer a permission prompt while it waits: in the transcript, and
    (`buffer_`) in the buffers you type in, the input and a file showing the edit's
    preview, where a bare key would edit; an option without a kind takes its digit."""

    allow_once: PromptKey = "a"
    """allow once (transcript)"""
    allow_always: PromptKey = "A"
    """allow always (transcript)"""
    reject_once: PromptKey = "r"
    """reject once (transcript)"""
    reject_always: PromptKey = "R"
    """reject always (transcript)"""
    reject_why: PromptKey = "s"
    """reject, and the reason you type goes to the agent (transcript)"""
    buffer_allow_once: PromptKey = "<localleader>y"
    """allow once (input, previewed file)"""
    buffer_allow_always: PromptKey = False
    """allow always (input, previewed file)"""
    buffer_reject_once: PromptKey = "<localleader>n"
    """reject once (input, previewed file)"""
    buffer_reject_always: PromptKey = False
    """reject always (input, previewed file)"""

    def by_kind(self) -> dict[str, str | None]:
        """The transcript's key of each option kind (None: that kind has none)."""
        keys = (self.allow_once, self.allow_always, self.reject_once, self.reject_always)
        kinds = ("allow_once", "allow_always", "reject_once", "reject_always")
        return {kind: key or None for kind, key in zip(kinds, keys, strict=True)}


class ReviewKeys(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Keys of the review: in the |:AcpReview| buffer, and (`hunk_`) in a file's
    buffer while it holds open agent hunks (also in the |:AcpDiff| baseline)."""

    accept: ReviewKey = "a"
    """accept the hunk (or file) at the cursor"""
    reject: ReviewKey = "r"
    """reject the hunk (or file) at the cursor"""
    accept_all: ReviewKey = "A"
    """accept every open hunk"""
    reject_all: ReviewKey = "R"
    """reject every open hunk"""
    next: ReviewKey = "]c"
    """go to the next hunk"""
    prev: ReviewKey = "[c"
    """go to the previous hunk"""
    open: ReviewKey = "<CR>"
    """open the file at the hunk"""
    close: ReviewKey = "q"
    """close the review (and the |:AcpDiff| baseline)"""
    hunk_accept: FileHunkKey = "<localleader>a"
    """accept the agent hunk under the cursor"""
    hunk_reject: FileHunkKey = "<localleader>r"
    """reject it: its text before the turn comes back (one undo step, saved)"""
    hunk_reject_why: FileHunkKey = "<localleader>R"
    """reject it and say why: the reason you type goes to the agent at once"""
    hunk_preview: FileHunkKey = "<localleader>p"
    """show the hunk's diff in a floating window"""
    hunk_next: FileHunkKey = "]h"
    """go to the next agent hunk"""
    hunk_prev: FileHunkKey = "[h"
    """go to the previous agent hunk"""


class QueueKeys(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Keys for the prompts waiting to be sent (|acp-queue|), in both chat windows."""

    pick: WindowsKey = "<localleader>q"
    """pick a queued prompt to edit or remove (|:AcpQueue|)"""
    edit_last: WindowsKey = "<localleader>e"
    """the last queued prompt back into the input, no longer queued"""


class Keys(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Every key the plugin maps, by where it is mapped (see |acp-keys|)."""

    chat: ChatKeys = msgspec.field(default_factory=ChatKeys)
    """the chat's windows"""
    input: InputKeys = msgspec.field(default_factory=InputKeys)
    """the chat's input"""
    permission: PermissionKeys = msgspec.field(default_factory=PermissionKeys)
    """answers to a permission prompt"""
    review: ReviewKeys = msgspec.field(default_factory=ReviewKeys)
    """the review buffer and agent hunks in files"""
    queue: QueueKeys = msgspec.field(default_factory=QueueKeys)
    """queued prompts"""


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Every option of the plugin. Lua-only options (window layout) are checked here too."""

    agents: dict[str, AgentConfig] = msgspec.field(default_factory=dict)
    """agents by name, added to the built-in ones; one of a built-in's name replaces it,
    or without `cmd` tunes it (see |acp-agents|)"""
    default_agent: str = "demo"
    """agent used by :AcpChat without a name"""
    protocol_version: Literal[1, 2] = 1
    """ACP version offered first (2 falls back to 1, see |acp-v2|)"""
    permission_policy: Literal["ask", "allow_reads", "allow_all"] = "ask"
    """answer permission requests without asking: never, for reads (read/search/think),
    always (see |acp-permissions|)"""
    permissions: PermissionOptions = msgspec.field(default_factory=PermissionOptions)
    """commands and paths that never ask (see |acp-permissions-allow|)"""
    auto_save: bool = True
    """save buffers the agent edited (else left unsaved); never your unsaved edits"""
    save_events: Literal["post", "none"] = "post"
    """autocommands when a buffer the agent edited is saved: "post" fires BufWritePost
    (language servers get didSave, linters run) but not BufWritePre, so a
    format-on-save hook cannot change the text under review; "none" fires none"""
    fs_access: FileAccessOptions = msgspec.field(default_factory=FileAccessOptions)
    """files agents may read and write (see |acp-fs-access|)"""
    roots: list[str] = msgspec.field(default_factory=list)
    """more directories every chat's agent works in beside its own (absolute or ~/...):
    told to agents that take them, read and written without asking, covered by the
    review and `@` completion (see |acp-workspaces|)"""
    diff_preview: Literal["inline", "split", False] = "inline"
    """show an edit waiting for permission in its file: inline (removed lines marked,
    added lines as virtual lines), side by side in a diff split, or not (see
    |acp-preview|)"""
    keys: Keys = msgspec.field(default_factory=Keys)
    """the keys the plugin maps, each an lhs or false (see |acp-keys|)"""
    hunk_keys: HunkKeys | Literal[False] | None = None
    """the older name of the `hunk_` keys of |acp-option-keys.review| (false: none)"""
    editor_mcp: bool | EditorMcpOptions = True
    """offer the editor to agents as an MCP server: buffers, diagnostics, language
    servers, edits, commands (see |acp-mcp|); `{ tools = {...} }` offers only those"""
    mcp_servers: dict[str, McpServerOptions] = msgspec.field(default_factory=dict)
    """your own MCP servers, offered to every agent by name (see |acp-mcp-servers|);
    `nvim` is the editor's own"""
    follow_agent: bool = False
    """show the file and line a tool call reports in the non-chat window (the cursor stays)"""
    notify: Literal["hidden", "always", False] = "hidden"
    """tell with |vim.notify()| when a chat's turn ends, fails or needs you: only for a
    chat not shown in the current tab page, for every chat, or never (see
    |acp-notices|)"""
    python: str | None = None
    """Python for the host (default: plugin venv, then g:python3_host_prog, then python3)"""
    host: Literal["job", "rplugin"] = "job"
    """how the Python side runs"""
    log_lines: Annotated[int, Meta(ge=100, le=1_000_000)] = 5000
    """lines kept by :AcpLog"""
    chat: ChatOptions = msgspec.field(default_factory=ChatOptions)
    """chat window layout"""
    timeouts: TimeoutOptions = msgspec.field(default_factory=TimeoutOptions)
    """seconds to wait for an agent (see |acp-timeouts|)"""
    history: HistoryOptions = msgspec.field(default_factory=HistoryOptions)
    """the chat history (see |acp-chat-history|)"""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "roots", _expanded(self.roots))

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

    def editor_mcp_tools(self, agent: AgentConfig | None = None) -> list[str]:
        """The editor MCP tools offered to ``agent`` (None: by the global
        ``editor_mcp``); empty when the server is off."""
        choice = self.editor_mcp if agent is None or agent.editor_mcp is None else agent.editor_mcp
        if isinstance(choice, EditorMcpOptions):
            return list(choice.tools)
        return list(EDITOR_TOOLS) if choice else []

    def agent_mcp_servers(self, agent: AgentConfig) -> dict[str, McpServerOptions]:
        """The user's MCP servers for ``agent``: the global ones, its own over them."""
        return {**self.mcp_servers, **agent.mcp_servers}

    def agent_roots(self, agent: AgentConfig) -> list[str]:
        """The workspace roots of ``agent``'s chats: the global ones, then its own."""
        return list(dict.fromkeys(os.path.normpath(r) for r in [*self.roots, *agent.roots]))


def agent_cwd(config: AgentConfig, cwd: str) -> str:
    """The agent's working directory: its own option, else the editor's."""
    return os.path.abspath(config.cwd or cwd)


def chat_cwd(config: AgentConfig, cwd: str, *, cwd_given: bool) -> str:
    """The directory a new chat of agent ``config`` works in (a worktree chat's
    worktree aside): ``cwd`` when the user gave it, else the agent's own, else
    ``cwd`` (Neovim's)."""
    return os.path.abspath(cwd) if cwd_given else agent_cwd(config, cwd)


def _expanded(paths: list[str]) -> list[str]:
    return [os.path.expanduser(path) for path in paths]


def workspace_root(path: str) -> str:
    """``path`` (``~`` expanded) as a workspace root: absolute and normalized.

    Raises:
        ConfigError: it is not absolute, or no directory is there; the message names it.
    """
    root = os.path.expanduser(path)
    if not os.path.isabs(root):
        raise ConfigError(f"{path!r} is not an absolute path (nor ~/...)")
    if not os.path.isdir(root):
        raise ConfigError(f"{path!r} is not a directory")
    return os.path.normpath(root)


# Per-agent quirks of registry presets, as data (the hand-tuned entries carry theirs).
_PRESET_QUIRKS: dict[str, dict[str, Any]] = {
    # qwen starts sessions in "auto", where nothing is asked (decision 0014).
    "qwen-code": {"mode": "default", "set_mode": True},
}


def builtin_agents() -> dict[str, AgentConfig]:
    """Agents usable without configuration: every agent of the ACP registry, launched
    the way it says (npx, uvx, a binary on PATH), then the offline demo and the
    released agents' own CLIs (tuned by hand, these win over a registry entry of
    the same name)."""
    from acp_nvim.client.presets import REGISTRY

    registry = {
        name: AgentConfig(cmd=entry["cmd"], env=entry["env"], **_PRESET_QUIRKS.get(name, {}))
        for name, entry in REGISTRY.items()
    }
    return registry | {
        "demo": AgentConfig(cmd=[sys.executable, "-m", "acp_nvim.demo_agent"], env=_this_tree()),
        "claude": AgentConfig(cmd=["claude-agent-acp"]),
        "codex": AgentConfig(cmd=["codex-acp"]),
        "gemini": AgentConfig(cmd=["gemini", "--acp"], missing_file_as_empty=True),
        "opencode": AgentConfig(cmd=["opencode", "acp"]),
        # qwen starts sessions in "auto", where nothing is asked (decision 0014).
        "qwen": AgentConfig(cmd=["qwen", "--acp"], mode="default", set_mode=True),
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
        ConfigError: every wrong key, e.g. ``agents.x.cmd: required`` (all of them,
            not only the first: a user with two mistakes fixes both at once).
    """
    raw = _table(raw if raw is not None else {})
    if not isinstance(raw, dict):
        raise ConfigError(f"options must be a table, got {type(raw).__name__}")
    problems: list[str] = []
    raw = _tables(raw, Config)
    if "mcp_servers" in raw:
        raw["mcp_servers"] = _servers(raw["mcp_servers"], "mcp_servers", problems)
    agents = raw.pop("agents", {})
    if not isinstance(agents, dict):  # in setup()'s words (lua/acp/config.lua)
        problems.append(f"agents: expected a table, got {_kind_of(agents)}")
        agents = {}
    config = _convert(raw, Config, "", problems) or Config()
    # One by one, so that an error names the agent (msgspec shows a dict key as [...]).
    builtin = builtin_agents()
    kept = {
        name: _agent(name, _tuned(name, spec, builtin), problems) for name, spec in agents.items()
    }
    config = msgspec.structs.replace(
        config, agents={name: agent for name, agent in kept.items() if agent is not None}
    )
    _check_servers(config.mcp_servers, "mcp_servers", problems)
    for name, agent in config.agents.items():
        _check_servers(agent.mcp_servers, f"agents.{name}.mcp_servers", problems)
    for root in config.fs_access.roots:
        if not os.path.isabs(root):
            problems.append(f"fs_access.roots: {root!r} is not an absolute path (nor ~/...)")
    _check_roots(config.roots, "roots", problems)
    for name, agent in config.agents.items():
        _check_roots(agent.roots, f"agents.{name}.roots", problems)
    for key, least in CHAT_SIZES.items():
        size = getattr(config.chat, key)
        if size is not None and size > 1 and (size < least or size % 1):
            problems.append(
                f"chat.{key}: expected a fraction (at most 1) or a whole number >= {least},"
                f" got {size:g}"
            )
    # An agent given but wrong is already reported: it is not also "unknown".
    if config.default_agent not in {**config.all_agents(), **agents}:
        problems.append(f"default_agent: unknown agent {config.default_agent!r}")
    if problems:
        raise ConfigError(*problems, config=config)
    return config


def _convert(raw: Any, cls: type[_S], prefix: str, problems: list[str]) -> _S | None:
    """``raw`` as ``cls``, each wrong key reported in ``problems`` and left out (its
    default taken), until the rest converts; None when a wrong key cannot be left out
    (a required one)."""
    raw = copy.deepcopy(raw)
    left_out: set[str] = set()
    for _ in range(1000):  # a key left out per round: as many rounds as keys
        try:
            return msgspec.convert(raw, cls)
        except msgspec.ValidationError as err:
            problem = _describe(str(err), prefix)
            key = re.sub(r"\[\d+\]$", "", problem.partition(": ")[0])
            if problem.endswith(": required") and key in left_out:
                return None  # told already: wrong, then left out
            problems.append(problem)
            if not _leave_out(raw, str(err)):
                return None
            left_out.add(key)
    return None


def _leave_out(raw: dict[str, Any], error: str) -> bool:
    """Drop the key a msgspec ``error`` is about from ``raw``; False when it cannot."""
    message, _, path = error.partition(" - at `$")
    keys = [k.split("[")[0] for k in path.rstrip("`").lstrip(".").split(".") if k]
    unknown = re.fullmatch(r"Object contains unknown field `(.+)`", message)
    if unknown:
        keys.append(unknown.group(1))
    elif message.startswith("Object missing required field"):
        return False
    owner: Any = raw
    for key in keys[:-1]:
        owner = owner.get(key) if isinstance(owner, dict) else None
    if not keys or not isinstance(owner, dict) or keys[-1] not in owner:
        return False
    del owner[keys[-1]]
    return True


_S = typing.TypeVar("_S", bound=msgspec.Struct)


def _tables(raw: dict[str, Any], cls: type[msgspec.Struct]) -> dict[str, Any]:
    """An empty Lua table arrives as a list: where ``cls`` takes a table, it is one
    (nested tables of options too)."""
    fields = {f.encode_name: f.type for f in msgspec.structs.fields(cls)}
    out = {}
    for key, value in raw.items():
        held = _held(fields[key]) if key in fields else None
        if held is not None and typing.get_origin(held) is dict:
            value = _table(value)
        elif isinstance(held, type) and issubclass(held, msgspec.Struct):
            value = _table(value)
            if isinstance(value, dict):
                value = _tables(value, held)
        out[key] = value
    return out


def _servers(raw: Any, key: str, problems: list[str]) -> Any:
    """MCP servers by name, each checked on its own so that an error names it; a
    wrong one is left out."""
    if not isinstance(raw, dict):
        return raw  # msgspec says what is wrong with it
    servers = {}
    for name, spec in raw.items():
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            problems.append(f"{key}: server name {name!r} must be a non-empty word")
            continue
        if name == EDITOR_SERVER:  # said as setup() says it (lua/acp/config.lua)
            problems.append(f"{key}.{name}: {EDITOR_SERVER_TAKEN}")
        if isinstance(spec, dict):
            spec = {k: (_table(v) if k in ("env", "headers") else v) for k, v in spec.items()}
        try:
            server = msgspec.convert(spec, McpServerOptions)
        except msgspec.ValidationError as err:
            problems.append(_describe(str(err), f"{key}.{name}"))
            continue
        if name != EDITOR_SERVER:
            servers[name] = server
    return {name: msgspec.to_builtins(server) for name, server in servers.items()}


def _check_servers(
    servers: dict[str, McpServerOptions], key: str, problems: list[str]
) -> None:
    for name, server in servers.items():
        problem = server.problem()
        if problem is not None:
            problems.append(f"{key}.{name}.{problem}")


def _check_roots(roots: list[str], key: str, problems: list[str]) -> None:
    for root in roots:
        try:
            workspace_root(root)
        except ConfigError as err:
            problems.append(f"{key}: {err}")


def _table(value: Any) -> Any:
    """An empty Lua table arrives as a list; where a table is expected it is one."""
    return {} if value == [] else value


def _tuned(name: Any, spec: Any, builtin: dict[str, AgentConfig]) -> Any:
    """A built-in agent's entry without ``cmd`` tunes that agent (decision 0098):
    its fields over the built-in's, its ``env`` added to theirs. Any other is as given."""
    spec = _table(spec)
    base = builtin.get(name) if isinstance(name, str) else None
    if base is None or not isinstance(spec, dict) or "cmd" in spec:
        return spec
    fields = msgspec.to_builtins(base)
    env = spec.get("env") or {}  # an empty Lua table arrives as a list
    return {**fields, **spec, "env": {**fields["env"], **env} if isinstance(env, dict) else env}


def _agent(name: Any, spec: Any, problems: list[str]) -> AgentConfig | None:
    """One agent's options; None (and the reason in ``problems``) when wrong."""
    key = f"agents.{name}"
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        problems.append(f"agents: agent name {name!r} must be a non-empty word")
        return None
    spec = _table(spec)
    wrong_env: list[str] = []
    if isinstance(spec, dict):
        spec = {k: (_table(v) if k in ("env", "config_options") else v) for k, v in spec.items()}
        if "mcp_servers" in spec:
            spec["mcp_servers"] = _servers(
                _table(spec["mcp_servers"]), f"{key}.mcp_servers", problems
            )
        # Named here, as setup() names them: msgspec shows a table's key as [...].
        for field, kinds, words in (
            ("env", (str,), "a string"),
            ("config_options", (str, bool), "a string or a boolean"),
        ):
            values = spec.get(field)
            if isinstance(values, dict):
                wrong_env += [
                    f"{key}.{field}.{option}: expected {words}, got {_kind_of(value)}"
                    for option, value in values.items()
                    if not isinstance(value, kinds)
                ]
                spec[field] = {o: v for o, v in values.items() if isinstance(v, kinds)}
    problems += wrong_env
    told = len(problems)
    # Every wrong key of the agent is told (setup() tells each), and the agent left out.
    agent = _convert(spec, AgentConfig, key, problems)
    if agent is not None and not agent.cmd[0].strip():  # told beside its other wrong keys
        problems.append(f"{key}.cmd: the first item must name a program")
        return None
    if agent is None or len(problems) > told or wrong_env:
        return None
    return agent


def _kind_of(value: Any) -> str:
    """What ``value`` is, as setup() says it (config.lua's ``kind_of``)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "an integer" if float(value).is_integer() else "a number"
    if isinstance(value, list) and value:
        return "a list"
    if isinstance(value, (list, dict)):
        return "a table"
    return _TYPE_WORDS.get(type(value).__name__, "nil")


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
    """``Expected `int` >= 20 - at `$.chat.width``` -> ``chat.width: expected an integer >= 20``,
    in the words setup() uses for it (lua/acp/config.lua): one option, one message."""
    message, _, path = error.partition(" - at `$")
    # A list item by its Lua index, as setup() names it: cmd[1] is the first.
    path = re.sub(r"\[(\d+)\]", lambda m: f"[{int(m.group(1)) + 1}]", path)
    key = ".".join(k for k in (prefix, path.rstrip("`").lstrip(".")) if k)
    unknown = re.fullmatch(r"Object contains unknown field `(.+)`", message)
    if unknown:
        return f"{key + '.' if key else ''}{unknown.group(1)}: unknown option"
    missing = re.fullmatch(r"Object missing required field `(.+)`", message)
    if missing:
        return f"{key + '.' if key else ''}{missing.group(1)}: required"
    if message == "Expected `str` of length >= 1":
        return f"{key}: expected {_kinds(key)}, got ''"
    # A union's types as the option's own kinds: msgspec's `bool | str` for a key
    # (a non-empty string or false) would invite `true`, and nil is no choice.
    union = re.fullmatch(r"Expected `\w+(?: \| \w+)+`, got `(\w+)`", message)
    if union:
        return f"{key}: expected {_kinds(key)}, got {_TYPE_WORDS.get(union[1], union[1])}"
    enum = re.fullmatch(r"Invalid enum value (.+)", message)
    if enum:
        value = {"True": "true", "False": "false"}.get(enum[1], enum[1])
        field = _field_type(key)
        if typing.get_origin(field) is not Literal:  # false of `string|false`: got true
            got = "a boolean" if value in ("true", "false") else value
            return f"{key}: expected {_kinds(key)}, got {got}"
        return f"{key}: expected {_choices(field)}, got {value}"
    # A value of another kind than the choices (`host = 1`): the choices, not "a string".
    kind = re.fullmatch(r"Expected `\w+`, got `(\w+)`", message)
    if kind and typing.get_origin(field := _field_type(key)) is Literal:
        return f"{key}: expected {_choices(field)}, got {_TYPE_WORDS.get(kind[1], kind[1])}"
    message = re.sub(
        r"`([\w |]+)`",
        lambda m: " or ".join(_TYPE_WORDS.get(w, w) for w in m.group(1).split(" | ")),
        message,
    )
    message = re.sub(r"(\d)\.0\b", r"\1", message)  # a bound of 0.0 is 0 in Lua
    return f"{key}: {message[:1].lower()}{message[1:]}"


def _field_type(key: str) -> Any:
    """The type of the option at dotted ``key``; of an item for ``tools[1]``, or of a
    table's value for msgspec's ``env[...]``. The last keeps its union: `HunkKeys |
    Literal[False]` is "a table or false"."""
    owner: Any = Config
    parts = key.replace("[...]", "[]").split(".")
    for index, part in enumerate(parts):
        if typing.get_origin(owner) is dict:
            owner = _held(typing.get_args(owner)[1])  # ``part`` is the key, a name
            continue
        name, item, _ = part.partition("[")
        owner = next(f for f in msgspec.structs.fields(owner) if f.encode_name == name).type
        if item:
            owner = _item(owner)
        if index < len(parts) - 1:
            owner = _held(owner)
    return owner


def _item(t: Any) -> Any:
    """What a list (or a table) of type ``t`` holds."""
    if typing.get_origin(t) is Annotated:
        t = typing.get_args(t)[0]
    return typing.get_args(t)[-1] if typing.get_origin(t) in (list, dict) else t


def _kinds(key: str) -> str:
    """What the option at dotted ``key`` takes, as setup() words it: "a non-empty
    string or false" for a key. Not nil: that is the option not given."""
    field = _field_type(key)
    inner = typing.get_args(field)[0] if typing.get_origin(field) is Annotated else None
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        field = inner  # a key's union, annotated with where it is mapped (MappedIn)
    union = typing.get_origin(field) in (typing.Union, types.UnionType)
    kinds = [t for t in typing.get_args(field) if t is not type(None)] if union else [field]
    return " or ".join(_kind(t) for t in kinds)


def _kind(t: Any) -> str:
    """One type of an option in words (config.lua's ``words_of``)."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is Annotated:
        if args[0] is str and any(getattr(m, "min_length", None) == 1 for m in args[1:]):
            return "a non-empty string"
        return _kind(args[0])
    if origin is Literal:
        return " or ".join(_lua(v) for v in args)
    if origin is list:
        return "a list"
    if origin is dict or (isinstance(t, type) and issubclass(t, msgspec.Struct)):
        return "a table"
    return _TYPE_WORDS[{str: "str", int: "int", float: "float", bool: "bool"}[t]]


def _choices(field: Any) -> str:
    """The values of Literal ``field`` as setup() says them: "'a' or 'b'", or
    "one of ..." for five or more."""
    choices = [_lua(v) for v in typing.get_args(field)]
    return f"one of {', '.join(choices)}" if len(choices) > 4 else " or ".join(choices)


def _lua(value: Any) -> str:
    """A choice as the user writes it in Lua."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _held(t: Any) -> Any:
    """The Struct of a ``bool | Options`` field, the item type of a list, else ``t``."""
    if typing.get_origin(t) is list:
        return typing.get_args(t)[0]
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return next(
            (
                a
                for a in typing.get_args(t)
                if isinstance(a, type) and issubclass(a, msgspec.Struct)
            ),
            t,
        )
    return t
