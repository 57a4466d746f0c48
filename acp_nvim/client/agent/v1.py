"""ACP v1: every v1 message is translated here, in both directions.

- :class:`SessionsV1`, the v1 :class:`~acp_nvim.client.agent.sessions.Sessions`:
  ``initialize`` (advertising our files and terminals), sessions, a turn that
  ends with the ``session/prompt`` answer, cancel;
- the agent's requests to the editor (``fs/*``, ``terminal/*``,
  ``session/request_permission``), answered by the services;
- ``session/update`` → model patches. v1 has no message ids (consecutive chunks
  of one role form a message), one plan per turn, and ``tool_call`` /
  ``tool_call_update`` that real agents mix freely (the same ``tool_call``
  twice, an update before its create): both are applied as one upsert. A command
  the agent runs itself may come with its output in the call's ``_meta`` (Zed's
  ``terminal_output`` convention, which we advertise: Claude's adapter): shown
  as a display terminal, as v2's.
"""

from __future__ import annotations

__all__ = [
    "SessionsV1",
    "VersionMismatch",
    "apply_update",
    "apply_updates",
    "content_text",
    "request_error",
    "tool_call_patch",
]

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import msgspec
from msgspec import UnsetType

from acp_nvim import __version__
from acp_nvim.client.agent import big_settings
from acp_nvim.client.agent.sessions import (
    EarlyUpdates,
    MessageForks,
    NotOffered,
    Page,
    Services,
    StreamedChunks,
    TerminalSink,
    additional_directories,
    attach_chunk,
    compaction_patch,
    elicit,
    every_page,
    extension,
    fork_point,
    login_method,
    mcp_server,
    message_forks,
    plan_update,
    prompt_blocks,
    select_choices,
    serve_mcp_over_acp,
    session_info,
    session_runs,
    steer,
    steers,
    turn_tokens,
)
from acp_nvim.client.mcp import ServerSpec, SseServer
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.context import sendable
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.session.chat import Chat, muted, replayed_late
from acp_nvim.client.session.model import (
    UNSET,
    Attachment,
    Choices,
    ConfigOption,
    ContentPart,
    DiffPart,
    Location,
    LoginMethod,
    PermissionOption,
    PlanEntry,
    Role,
    TerminalPart,
    TextPart,
    ToolCallPatch,
)
from acp_nvim.protocol import (
    Connection,
    OnSent,
    ProtocolError,
    RequestError,
    default_convert,
)
from acp_nvim.protocol import schema_v1 as v1
from acp_nvim.protocol.unknown import Unknown

# The streamed kinds: consecutive chunks of one message are applied as one.
_CHUNK_ROLES: dict[type, Role] = {
    v1.SessionUpdateAgentMessageChunk: "agent",
    v1.SessionUpdateAgentThoughtChunk: "thought",
    # Replayed history (session/load) or an agent echo of the prompt.
    v1.SessionUpdateUserMessageChunk: "user",
}


def apply_update(chat: Chat, update: Any, terminals: TerminalSink | None = None) -> None:
    """Apply one ``SessionNotification.update`` to the chat; ``terminals`` shows the
    commands whose output comes in a tool call's ``_meta`` (None: not shown)."""
    apply_updates(chat, [update], terminals)


def apply_updates(
    chat: Chat,
    updates: Sequence[Any],
    terminals: TerminalSink | None = None,
    *,
    modes_first: bool = False,
) -> None:
    """Apply consecutive updates of one session, in order (see :meth:`Chat.on_updates`);
    ``modes_first``: the agent's modes stay its mode setting (see `settings`)."""
    chat.on_updates(
        updates, _chunk, lambda update: _apply_other(chat, update, terminals, modes_first)
    )
    replayed_late(chat)


def _apply_other(
    chat: Chat, update: Any, terminals: TerminalSink | None, modes_first: bool
) -> None:
    match update:
        case v1.SessionUpdateUserMessageChunk():  # not words (StreamedChunks)
            attach_chunk(chat, update, v1, content_text)
        case v1.SessionUpdateToolCall() | v1.SessionUpdateToolCallUpdate():
            patch = tool_call_patch(update)
            if terminals is not None and update.meta:
                _meta_terminal(chat, terminals, patch, update.meta)
            chat.on_tool_call(patch)
        case v1.SessionUpdatePlan(entries=entries):
            chat.on_plan(None, [PlanEntry(e.content, e.status, e.priority) for e in entries])
        case v1.SessionUpdatePlanUpdate(plan=plan):
            plan_update(chat, plan, v1)
        case v1.SessionUpdatePlanRemoved(plan_id=plan_id):
            chat.on_plan(plan_id, None)
        case v1.SessionUpdateAvailableCommandsUpdate(available_commands=commands):
            chat.on_info(commands=[_command(c) for c in commands])
        case v1.SessionUpdateCurrentModeUpdate(current_mode_id=mode):
            chat.on_current("mode", mode)
        case v1.SessionUpdateSessionInfoUpdate(title=title):
            chat.on_info(title=title)
        case v1.SessionUpdateUsageUpdate(used=used, size=size, cost=cost):
            chat.on_usage(used, size, (cost.amount, cost.currency) if cost else None)
        case v1.SessionUpdateConfigOptionUpdate(config_options=options):
            before = chat.session.config_options
            chat.on_config(_keep_shown(config_options(options), before, modes_first))
        case big_settings.Converted(options=options, entries=entries):
            chat.on_config(_keep_shown(options, chat.session.config_options, modes_first), entries)
        case v1.SessionUpdateCompactionUpdate():
            compaction_patch(chat, update, content_text)
        case v1.SessionUpdateCompactionSummaryChunk(compaction_id=compaction, content=content):
            chat.on_compaction(compaction, append=content_text(content))
        case v1.SessionUpdateNotice(severity=severity, title=title, description=description):
            chat.on_notice(severity, title, description)
        case Unknown(raw=raw):
            # Newer agents may send updates this version doesn't know: never a crash.
            chat.on_info(unknown_update=str(raw.get("sessionUpdate", "?")))
        case _:
            pass


# The output keys of the convention: the newer adapters' delta is appended the same.
_TERMINAL_OUTPUT = ("terminal_output", "terminal_output_delta")


def _meta_terminal(
    chat: Chat, terminals: TerminalSink, patch: ToolCallPatch, meta: dict[str, Any]
) -> None:
    """A terminal the agent runs itself, told in a tool call's ``_meta`` (Zed's
    convention, advertised as ``clientCapabilities._meta.terminal_output``):
    ``terminal_info`` names it (the call then shows it), ``terminal_output`` carries
    output to append, ``terminal_exit`` how it ended. Each field is checked: it is
    whatever the agent sends."""
    info = extension(meta, "terminal_info", "terminal_id")
    if isinstance(info, str):
        terminals.update(chat, info, command=UNSET, cwd=UNSET, output=UNSET, exit_status=UNSET)
        shown = TerminalPart(info)
        if isinstance(patch.content, UnsetType):
            call = chat.session.tool_calls.get(patch.id or "")
            if call is None or shown not in call.content:  # told again: shown once
                patch.append_content = [shown]
        elif shown not in patch.content:
            patch.content.append(shown)
    for key in _TERMINAL_OUTPUT:
        terminal_id, data = (extension(meta, key, field) for field in ("terminal_id", "data"))
        if isinstance(terminal_id, str) and isinstance(data, str):
            terminals.append(chat, terminal_id, data)
    terminal_id = extension(meta, "terminal_exit", "terminal_id")
    if isinstance(terminal_id, str):
        code, signal = (extension(meta, "terminal_exit", f) for f in ("exit_code", "signal"))
        status = {
            "exit_code": code if isinstance(code, int) else None,
            "signal": signal if isinstance(signal, str) else None,
        }
        terminals.update(
            chat, terminal_id, command=UNSET, cwd=UNSET, output=UNSET, exit_status=status
        )


def _command(command: v1.AvailableCommand) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": command.name, "description": command.description}
    if isinstance(command.input, v1.UnstructuredCommandInput):
        entry["hint"] = command.input.hint
    return entry


def config_options(options: Sequence[Any]) -> list[ConfigOption]:
    """The model's settings from v1 ``configOptions``; unknown kinds are listed only."""
    result = []
    for option in options:
        match option:
            case v1.SessionConfigOptionSelect():
                choices = select_choices(option.options, v1.SessionConfigSelectGroup)
                result.append(_option(option, "select", option.current_value, choices))
            case v1.SessionConfigOptionBoolean():
                result.append(_option(option, "boolean", option.current_value))
            case Unknown(tag=tag):
                current = option.get("currentValue")
                result.append(
                    ConfigOption(
                        str(option.get("id", "?")),
                        str(option.get("name", "?")),
                        str(tag),
                        current if isinstance(current, str | bool) else None,
                        option.get("category"),
                    )
                )
    return result


def _option(
    option: Any, kind: str, current: str | bool, choices: Choices | None = None
) -> ConfigOption:
    return ConfigOption(
        option.id, option.name, kind, current, option.category, option.description,
        choices or Choices(),
    )  # fmt: skip


class _Model(msgspec.Struct):
    model_id: str = msgspec.field(name="modelId")
    name: str = ""


class _Models(msgspec.Struct):
    current_model_id: str = msgspec.field(name="currentModelId")
    available_models: list[_Model] = msgspec.field(default_factory=list, name="availableModels")


class _Beside(msgspec.Struct):
    """What agents send beside a session answer outside the pinned schema: Claude,
    gemini and qwen offer ``models`` (changed with ``session/set_model``)."""

    models: _Models | None = None


def _models(raw: Any) -> _Models | None:
    try:
        return default_convert(raw, _Beside).models
    except ProtocolError:
        return None  # malformed extras are only not offered


def settings(
    options: Sequence[Any] | None,
    modes: v1.SessionModeState | None,
    models: _Models | None,
    modes_first: bool = False,
) -> list[ConfigOption]:
    """A session's settings: its config options, plus its modes and models as
    settings of category ``mode`` / ``model`` where no config option has that
    category (config options win: session-config-options.mdx). ``modes_first``: the
    modes win over a mode config option, for an agent that only switches its mode
    with ``session/set_mode`` (the built-in qwen: decision 0014)."""
    result = config_options(options or [])
    if modes_first and modes is not None:
        result = [o for o in result if o.category != "mode"]
    taken = {o.category for o in result} | {o.id for o in result}
    if modes is not None and "mode" not in taken:
        choices = Choices.of((m.id, m.name) for m in modes.available_modes)
        result.append(
            ConfigOption(
                "mode", "Mode", "select", modes.current_mode_id, "mode", None, choices, "modes"
            )
        )
    if models is not None and "model" not in taken:
        choices = Choices.of((m.model_id, m.name or m.model_id) for m in models.available_models)
        current = models.current_model_id
        result.append(
            ConfigOption("model", "Model", "select", current, "model", None, choices, "models")
        )
    return result


def _keep_shown(
    options: list[ConfigOption], before: list[ConfigOption], modes_first: bool = False
) -> list[ConfigOption]:
    """New config options, plus the modes/models settings they do not replace (with
    ``modes_first``, a modes setting is not replaced by a mode config option)."""
    if modes_first and any(o.source == "modes" for o in before):
        options = [o for o in options if o.category != "mode"]
    taken = {o.category for o in options} | {o.id for o in options}
    return options + [o for o in before if o.source != "config" and o.category not in taken]


_TOOL_CALL_UPDATES = (v1.SessionUpdateToolCall, v1.SessionUpdateToolCallUpdate)


def tool_call_patch(update: Any) -> ToolCallPatch:
    """A ``tool_call`` sets what it carries; an update only its non-null fields.

    Also used for the ``toolCall`` of a permission request.
    """
    patch = ToolCallPatch(update.tool_call_id)
    if update.title is not None:
        patch.title = update.title
    if update.kind is not None:
        patch.kind = update.kind
    if update.name is not None:  # v1 cannot clear a name
        patch.name = update.name
    if update.status is not None:
        patch.status = update.status
    if update.content is not None:
        patch.content = [_content_part(item) for item in update.content]
    if update.locations is not None:
        patch.locations = [Location(loc.path, loc.line) for loc in update.locations]
    if update.raw_input is not None:
        patch.raw_input = update.raw_input
    return patch


def _content_part(item: Any) -> ContentPart:
    match item:
        case v1.ToolCallContentDiff(path=path, old_text=old_text, new_text=new_text):
            return DiffPart(path, old_text, new_text)
        case v1.ToolCallContentTerminal(terminal_id=terminal_id):
            return TerminalPart(terminal_id)
        case v1.ToolCallContentContent(content=content):
            return TextPart(content_text(content))
        case _:
            return TextPart(content_text(item))


def content_text(block: Any) -> str:
    """Markdown for one content block; non-text content is described, not dropped."""
    match block:
        case v1.ContentBlockText(text=text):
            return str(text)
        case v1.ContentBlockResourceLink(uri=uri, name=name):
            return f"[{name or uri}]({uri})"
        case v1.ContentBlockResource(resource=resource):
            return f"[resource {getattr(resource, 'uri', '?')}]"
        case v1.ContentBlockImage():
            return "[image]"
        case v1.ContentBlockAudio():
            return "[audio]"
        case Unknown(raw=raw):
            return f"[{raw.get('type', 'unknown')} content]"
        case _:
            return f"[{type(block).__name__}]"


_chunk = StreamedChunks(_CHUNK_ROLES, v1.ContentBlockText, content_text)


# -- errors ----------------------------------------------------------------------------


class VersionMismatch(Exception):
    """The agent speaks a version we do not; ``str()`` names both sides' versions."""

    def __init__(self, agent: str, version: object, offered: tuple[int, ...]) -> None:
        ours = " and ".join(str(v) for v in offered)
        plural = "s" if len(offered) > 1 else ""
        super().__init__(
            f"agent {agent!r} speaks ACP version {version}; acp.nvim speaks version{plural} {ours}"
        )


def request_error(err: ServiceError) -> RequestError:
    """The JSON-RPC error answering the agent for a service's refusal."""
    if err.kind == "not_found":
        return RequestError.resource_not_found(str(err))
    if err.kind == "internal":
        return RequestError.internal(str(err))
    # invalid, denied: the agent should not ask this again as it is.
    return RequestError.invalid_params(str(err))


@contextmanager
def _answering() -> Iterator[None]:
    """Answer the agent's request with the JSON-RPC error for a service's refusal."""
    try:
        yield
    except ServiceError as err:
        raise request_error(err) from None


# -- the v1 sessions -------------------------------------------------------------------


def mcp_server_v1(spec: ServerSpec) -> v1.McpServer:
    """An offered MCP server as v1 sends it: sse (v1's alone) here, the others as
    v2 has them too (`mcp_server`)."""
    if isinstance(spec, SseServer):
        headers = [v1.HttpHeader(name=k, value=v) for k, v in spec.headers.items()]
        return v1.McpServerSse(name=spec.name, url=spec.url, headers=headers)
    return mcp_server(spec, v1)


class SessionsV1:
    """ACP v1 over one connection; registers the handlers of the agent's requests.

    Construct it before the connection is served: the agent may ask for files
    as soon as it has a session.
    """

    version = 1
    turn_ends_its_work = True
    replays_late = False

    def __init__(self, connection: Connection, services: Services) -> None:
        self.connection = connection
        self.services = services
        self.agent_title: str | None = None
        self.init = v1.InitializeResponse(protocol_version=1)  # until initialize answers
        self._early = EarlyUpdates(services.taken)
        connection.on_notifications("session/update", v1.SessionNotification, self._on_updates)
        on = connection.on_request
        on("session/request_permission", v1.RequestPermissionRequest, self._on_permission)
        on("fs/read_text_file", v1.ReadTextFileRequest, self._on_read)
        on("fs/write_text_file", v1.WriteTextFileRequest, self._on_write)
        on("terminal/create", v1.CreateTerminalRequest, self._on_terminal_create)
        on("terminal/output", v1.TerminalOutputRequest, self._on_terminal_output)
        on("terminal/wait_for_exit", v1.WaitForTerminalExitRequest, self._on_terminal_wait)
        on("terminal/kill", v1.KillTerminalRequest, self._on_terminal_kill)
        on("terminal/release", v1.ReleaseTerminalRequest, self._on_terminal_release)
        # A union (form | url), which ``type[P]`` does not spell.
        elicitation: Any = v1.CreateElicitationRequest
        on("elicitation/create", elicitation, self._on_elicit)
        connection.on_notification(
            "elicitation/complete", v1.CompleteElicitationNotification, self._on_elicit_complete
        )
        if services.mcp is not None:
            serve_mcp_over_acp(connection, services.mcp, v1)

    def __repr__(self) -> str:
        return f"<SessionsV1 {len(self.services.chats)} sessions>"

    async def initialize(self, agent: str) -> None:
        """Offer v1 with our file system and terminals.

        Raises:
            VersionMismatch: the agent answered another version.
        """
        params = v1.InitializeRequest(
            protocol_version=1,
            client_capabilities=v1.ClientCapabilities(
                fs=v1.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
                auth=v1.AuthCapabilities(terminal=True),
                elicitation=v1.ElicitationCapabilities(
                    form=v1.ElicitationFormCapabilities(), url=v1.ElicitationUrlCapabilities()
                ),
                # Compaction updates (unstable schema): drawn as a folded block.
                session=v1.ClientSessionCapabilities(compaction=v1.CompactionCapabilities()),
                # Plans with ids, as steps, markdown or a file (unstable): v2's drawing.
                plan=v1.PlanCapabilities(),
                # Output of commands the agent runs itself in its tool calls' _meta
                # (Zed's convention; Claude's adapter: decision 0097).
                meta={"terminal_output": True},
            ),
            client_info=v1.Implementation(name="acp.nvim", title="acp.nvim", version=__version__),
        )
        raw = await self.connection.request("initialize", params)
        response = v1.decode(raw, v1.InitializeResponse)
        if response.protocol_version != 1:
            raise VersionMismatch(agent, response.protocol_version, (1,))
        self.init = response
        info = response.agent_info
        self.agent_title = (info.title or info.name) if info is not None else None

    @property
    def _capabilities(self) -> v1.AgentCapabilities:
        return self.init.agent_capabilities

    @property
    def auth_methods(self) -> list[LoginMethod]:
        found = (login_method(m) for m in self.init.auth_methods)
        return [m for m in found if m is not None]

    async def _mcp_servers(self, chat: Chat) -> list[Any]:
        """The MCP servers for a session of ``chat``, as far as the agent takes them
        (stdio always; http, sse and MCP-over-ACP when it says so)."""
        offer = self.services.mcp
        if offer is None:
            return []
        caps = self._capabilities.mcp_capabilities
        offered = {"http": caps.http, "sse": caps.sse, "acp": caps.acp}
        takes = {"stdio"} | {transport for transport, cap in offered.items() if cap}
        return [mcp_server_v1(spec) for spec in await offer.servers_for(chat, takes)]

    @property
    def can_fork(self) -> bool:
        return self._capabilities.session_capabilities.fork is not None

    @property
    def can_delete(self) -> bool:
        return self._capabilities.session_capabilities.delete is not None

    @property
    def replays(self) -> bool:
        return self._capabilities.load_session

    @property
    def message_forks(self) -> MessageForks | None:
        return message_forks(self._capabilities.meta) if self.can_fork else None

    @property
    def can_steer(self) -> bool:
        return steers(self.init.meta, self._capabilities.meta)

    @property
    def takes_roots(self) -> bool:
        return self._capabilities.session_capabilities.additional_directories is not None

    async def new_session(self, chat: Chat) -> str:
        params = v1.NewSessionRequest(
            cwd=chat.workspace.cwd,
            additional_directories=additional_directories(chat, self.takes_roots),
            mcp_servers=await self._mcp_servers(chat),
        )
        return await self._create(chat, "session/new", params, v1.NewSessionResponse)

    async def fork(self, chat: Chat, session_id: str, at_message: str | None = None) -> str:
        if not self.can_fork:
            _not_offered("forking sessions")
        if at_message is not None and self.message_forks is None:
            _not_offered("forking at a message")
        params = v1.ForkSessionRequest(
            session_id=session_id,
            cwd=chat.workspace.cwd,
            additional_directories=additional_directories(chat, self.takes_roots),
            mcp_servers=await self._mcp_servers(chat),
            meta=fork_point(at_message) if at_message is not None else None,
        )
        return await self._create(chat, "session/fork", params, v1.ForkSessionResponse)

    async def _create(
        self,
        chat: Chat,
        method: str,
        params: Any,
        answer: type[v1.NewSessionResponse] | type[v1.ForkSessionResponse],
    ) -> str:
        """A session made by ``method`` (new or fork) for ``chat``: registered, with
        its settings and the updates the agent sent before the chat knew its id."""
        with self._early.creating():
            raw = await self.connection.request(method, params)
            response = v1.decode(raw, answer)
            self.services.register(response.session_id, chat, answered=method)
            self._settings(chat, response.config_options, response.modes, _models(raw))
            services = self.services
            early = self._early.take(response.session_id)
            apply_updates(chat, early, services.terminals, modes_first=services.modes_first)
        return response.session_id

    def _settings(
        self,
        chat: Chat,
        options: Sequence[Any] | None,
        modes: v1.SessionModeState | None,
        models: _Models | None,
    ) -> None:
        found = settings(options, modes, models, self.services.modes_first)
        if found:
            chat.on_config(found)

    def sendable(self, attachments: Sequence[Attachment]) -> list[Attachment]:
        return sendable(attachments, image=self._capabilities.prompt_capabilities.image)

    def _blocks(self, chat: Chat, text: str, attachments: Sequence[Attachment]) -> list[Any]:
        accepts = self._capabilities.prompt_capabilities
        return prompt_blocks(
            chat, text, attachments, v1, embed=accepts.embedded_context, image=accepts.image
        )

    async def prompt(
        self,
        chat: Chat,
        text: str,
        attachments: Sequence[Attachment],
        on_sent: OnSent = None,
    ) -> str:
        """The turn ends with the answer to ``session/prompt``."""
        blocks = self._blocks(chat, text, attachments)
        params = v1.PromptRequest(session_id=chat.session.session_id, prompt=blocks)
        response = await self.connection.request(
            "session/prompt", params, v1.PromptResponse, on_sent=on_sent
        )
        if response.usage is not None:
            chat.on_turn_tokens(turn_tokens(response.usage))
        return str(response.stop_reason)

    async def steer(self, chat: Chat, text: str, attachments: Sequence[Attachment]) -> bool:
        if not self.can_steer:
            _not_offered("steering a turn")
        blocks = self._blocks(chat, text, attachments)
        return await steer(self.connection, chat.session.session_id, blocks)

    async def cancel(self, chat: Chat) -> None:
        params = v1.CancelNotification(session_id=chat.session.session_id)
        await self.connection.notify("session/cancel", params)

    async def list_sessions(self, cwd: str | None) -> list[dict[str, Any]]:
        if self._capabilities.session_capabilities.list is None:
            _not_offered("listing sessions")

        async def page(cursor: str | None) -> Page:
            params = v1.ListSessionsRequest(cwd=cwd, cursor=cursor)
            page = await self.connection.request("session/list", params, v1.ListSessionsResponse)
            return [session_info(s) for s in page.sessions], page.next_cursor

        return await every_page(page)

    async def resume(self, chat: Chat, session_id: str, *, replay: bool) -> None:
        """``session/load`` replays the history, ``session/resume`` does not: with
        ``replay`` load is preferred, without it resume (a load is then not shown)."""
        can_load = self._capabilities.load_session
        can_resume = self._capabilities.session_capabilities.resume is not None
        if not (can_load or can_resume):
            _not_offered("resuming a session")
        chats = self.services.chats
        # Registered first: a load replays the history as updates of this session.
        self.services.register(session_id, chat)
        chat.session.session_id = session_id
        cwd = chat.workspace.cwd
        # The whole list of roots again: a load or resume does not keep the last one's.
        roots = additional_directories(chat, self.takes_roots)
        try:
            if can_load and (replay or not can_resume):
                if not replay:
                    chat.unshown.add(session_id)
                params = v1.LoadSessionRequest(
                    session_id=session_id,
                    cwd=cwd,
                    additional_directories=roots,
                    mcp_servers=await self._mcp_servers(chat),
                )
                raw = await self.connection.request("session/load", params)
                response: Any = v1.decode(raw, v1.LoadSessionResponse)
            else:
                resume = v1.ResumeSessionRequest(
                    session_id=session_id,
                    cwd=cwd,
                    additional_directories=roots,
                    mcp_servers=await self._mcp_servers(chat),
                )
                raw = await self.connection.request("session/resume", resume)
                response = v1.decode(raw, v1.ResumeSessionResponse)
                if replay:
                    chat.info("*The agent resumes this session without showing its history.*")
                    chat.unseen_history.add(session_id)
        except BaseException as err:
            chats.pop(session_id, None)
            if isinstance(err, RequestError):  # refused: the agent holds no such session
                self.services.forget(session_id)
            raise
        finally:
            chat.unshown.discard(session_id)
        self._settings(chat, response.config_options, response.modes, _models(raw))

    async def close(self, session_id: str) -> None:
        if self._capabilities.session_capabilities.close is not None:
            params = v1.CloseSessionRequest(session_id=session_id)
            await self.connection.request("session/close", params, v1.CloseSessionResponse)
            self.services.forget(session_id)

    async def delete(self, session_id: str) -> None:
        if not self.can_delete:
            _not_offered("deleting sessions")
        params = v1.DeleteSessionRequest(session_id=session_id)
        await self.connection.request("session/delete", params, v1.DeleteSessionResponse)

    async def set_config(self, chat: Chat, config_id: str, value: str | bool) -> None:
        """A config option with ``session/set_config_option``; modes and models shown
        as settings with ``session/set_mode`` / ``session/set_model``."""
        session_id = chat.session.session_id
        option = next((o for o in chat.session.config_options if o.id == config_id), None)
        source = option.source if option is not None else "config"
        if source != "config":
            if isinstance(value, bool):
                raise NotOffered(f"{config_id} takes a value, not on/off")
            if source == "modes":
                params: Any = v1.SetSessionModeRequest(session_id=session_id, mode_id=value)
                await self.connection.request("session/set_mode", params, v1.SetSessionModeResponse)
            else:  # outside the pinned schema, as the agents that offer models send it
                params = {"sessionId": session_id, "modelId": value}
                await self.connection.request("session/set_model", params)
            chat.on_current("mode" if source == "modes" else "model", value)
            return
        if isinstance(value, bool):
            params = v1.SetSessionConfigOptionRequestBoolean(
                session_id=session_id, config_id=config_id, value=value
            )
        else:
            params = v1.SetSessionConfigOptionRequestValueId(
                session_id=session_id, config_id=config_id, value=value
            )
        response = await self.connection.request(
            "session/set_config_option", params, v1.SetSessionConfigOptionResponse
        )
        options = config_options(response.config_options)
        before = chat.session.config_options
        chat.on_config(_keep_shown(options, before, self.services.modes_first))

    async def login(self, method_id: str) -> None:
        params = v1.AuthenticateRequest(method_id=method_id)
        await self.connection.request("authenticate", params, v1.AuthenticateResponse)

    async def logout(self) -> None:
        if self._capabilities.auth.logout is None:
            _not_offered("logging out")
        await self.connection.request("logout", v1.LogoutRequest(), v1.LogoutResponse)

    # -- from the agent

    async def _on_updates(self, notifications: list[v1.SessionNotification]) -> None:
        # A run of updates as one read of the stream brought them, split by session.
        config_update = v1.SessionUpdateConfigOptionUpdate
        for session_id, group in await session_runs(notifications, config_update, config_options):
            chat = self.services.chats.get(session_id)
            if chat is None or muted(chat):  # a turn left to the agent, if any: unseen
                for update in group:  # its tool calls' files are not the open turn's
                    if isinstance(update, _TOOL_CALL_UPDATES):
                        self.services.turns.left_call(session_id, tool_call_patch(update))
            if chat is None:
                self._early.hold(session_id, group)
            else:
                apply_updates(
                    chat, group, self.services.terminals, modes_first=self.services.modes_first
                )
                await chat.editor.room()  # read on once drawing keeps up (decision 0072)

    async def _on_permission(
        self, params: v1.RequestPermissionRequest
    ) -> v1.RequestPermissionResponse:
        chat = self.services.chats.get(params.session_id)
        choice = None
        if chat is not None:
            options = [PermissionOption(o.option_id, o.name, o.kind) for o in params.options]
            patch = tool_call_patch(params.tool_call)
            choice = await self.services.permissions.ask(chat, patch, options)
        outcome: v1.RequestPermissionOutcome = (
            v1.RequestPermissionOutcomeCancelled()
            if choice is None
            else v1.RequestPermissionOutcomeSelected(option_id=choice)
        )
        return v1.RequestPermissionResponse(outcome=outcome)

    async def _on_elicit(self, params: v1.CreateElicitationRequest) -> v1.CreateElicitationResponse:
        response: v1.CreateElicitationResponse = await elicit(self.services, v1, params)
        return response

    async def _on_elicit_complete(self, params: v1.CompleteElicitationNotification) -> None:
        self.services.elicitations.complete(params.elicitation_id)

    def _review(self, session_id: str) -> SessionChanges:
        chat = self.services.chats.get(session_id)
        review = self.services.reviews.get(chat.id) if chat is not None else None
        if review is None:
            raise RequestError.invalid_params(f"unknown session {session_id!r}")
        return review

    async def _on_read(self, params: v1.ReadTextFileRequest) -> v1.ReadTextFileResponse:
        review = self._review(params.session_id)
        with _answering():
            content = await review.read(params.path, params.line, params.limit)
        return v1.ReadTextFileResponse(content=content)

    async def _on_write(self, params: v1.WriteTextFileRequest) -> v1.WriteTextFileResponse:
        review = self._review(params.session_id)
        with _answering():
            await review.write(params.path, params.content)
        return v1.WriteTextFileResponse()

    async def _on_terminal_create(
        self, params: v1.CreateTerminalRequest
    ) -> v1.CreateTerminalResponse:
        with _answering():
            terminal_id = await self.services.terminals.create(
                params.session_id,
                params.command,
                params.args or [],
                cwd=params.cwd,
                env={var.name: var.value for var in params.env or []},
                limit=params.output_byte_limit,
            )
        return v1.CreateTerminalResponse(terminal_id=terminal_id)

    async def _on_terminal_output(
        self, params: v1.TerminalOutputRequest
    ) -> v1.TerminalOutputResponse:
        with _answering():
            out = self.services.terminals.output(params.session_id, params.terminal_id)
        status = out.exit_status
        return v1.TerminalOutputResponse(
            output=out.text,
            truncated=out.truncated,
            exit_status=None
            if status is None
            else v1.TerminalExitStatus(exit_code=status.exit_code, signal=status.signal),
        )

    async def _on_terminal_wait(
        self, params: v1.WaitForTerminalExitRequest
    ) -> v1.WaitForTerminalExitResponse:
        with _answering():
            status = await self.services.terminals.wait_for_exit(
                params.session_id, params.terminal_id
            )
        return v1.WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def _on_terminal_kill(self, params: v1.KillTerminalRequest) -> v1.KillTerminalResponse:
        with _answering():
            await self.services.terminals.kill(params.session_id, params.terminal_id)
        return v1.KillTerminalResponse()

    async def _on_terminal_release(
        self, params: v1.ReleaseTerminalRequest
    ) -> v1.ReleaseTerminalResponse:
        with _answering():
            await self.services.terminals.release(params.session_id, params.terminal_id)
        return v1.ReleaseTerminalResponse()


def _not_offered(what: str) -> NoReturn:
    raise NotOffered(f"{what} is not offered by this agent")
