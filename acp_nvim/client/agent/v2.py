"""ACP v2 on the one session model: every v2 message is translated here.

:class:`SessionsV2` is the v2 :class:`~acp_nvim.client.agent.sessions.Sessions`;
wire updates become Chat calls.

v2 is shaped like the model, so this is mostly renaming: messages and tool
calls are upserts by id (omitted = unchanged, ``null`` = cleared, value =
replaced, chunks append), the turn follows ``state_update``, plans carry ids,
modes are config options. Unknown variants arrive as ``Unknown`` and are shown
generically. v2 has no client file system or terminals: nothing here serves
``fs/*`` or ``terminal/*``; agent-owned display terminals go to the
``terminals`` sink. The editor MCP server stands in for them (stdio shim, or
``mcp/*`` on this connection where the agent advertises ``session.mcp.acp``).
"""

from __future__ import annotations

__all__ = [
    "SessionsV2",
    "apply_update",
    "apply_updates",
    "config_options",
    "content_text",
    "initialize_request",
    "tool_call_patch",
]

import base64
from collections.abc import Sequence
from typing import Any

import anyio
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
    attached_label,
    compaction_patch,
    elicit,
    every_page,
    fork_point,
    is_seed,
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
from acp_nvim.client.services.context import sendable
from acp_nvim.client.session.chat import Chat, muted, replayed_late
from acp_nvim.client.session.model import (
    Attachment,
    ChangesPart,
    ConfigOption,
    ContentPart,
    FileOp,
    Location,
    LoginMethod,
    MessagePatch,
    PermissionOption,
    Role,
    TerminalPart,
    TextPart,
    ToolCallPatch,
)
from acp_nvim.protocol import Connection, OnSent, RequestError
from acp_nvim.protocol import schema_v2 as v2
from acp_nvim.protocol.unknown import Unknown, struct_type


def initialize_request() -> v2.InitializeRequest:
    """What we offer: v2 with terminal logins and elicitation (v2 has no client
    fs/terminals)."""
    return v2.InitializeRequest(
        protocol_version=2,
        info=v2.Implementation(name="acp.nvim", title="acp.nvim", version=__version__),
        capabilities=v2.ClientCapabilities(
            auth=v2.AuthCapabilities(terminal=v2.TerminalAuthCapabilities()),
            elicitation=v2.ElicitationCapabilities(
                form=v2.ElicitationFormCapabilities(), url=v2.ElicitationUrlCapabilities()
            ),
        ),
    )



# -- updates ---------------------------------------------------------------------------

_CHUNK_ROLES: dict[type, Role] = {
    v2.SessionUpdateUserMessageChunk: "user",
    v2.SessionUpdateAgentMessageChunk: "agent",
    v2.SessionUpdateAgentThoughtChunk: "thought",
}
_WHOLE_ROLES: dict[type, Role] = {
    v2.SessionUpdateUserMessage: "user",
    v2.SessionUpdateAgentMessage: "agent",
    v2.SessionUpdateAgentThought: "thought",
}


def apply_update(chat: Chat, update: Any, terminals: TerminalSink) -> None:
    """Apply one ``UpdateSessionNotification.update`` to the chat."""
    apply_updates(chat, [update], terminals)


def apply_updates(chat: Chat, updates: Sequence[Any], terminals: TerminalSink) -> None:
    """Apply consecutive updates of one session, in order (see :meth:`Chat.on_updates`)."""
    chat.on_updates(updates, _chunk, lambda update: _apply_other(chat, update, terminals))
    replayed_late(chat)


def _is_idle(update: Any) -> bool:
    return isinstance(update, v2.SessionUpdateStateUpdate) and update.state == "idle"


def _apply_other(chat: Chat, update: Any, terminals: TerminalSink) -> None:
    role = _WHOLE_ROLES.get(struct_type(update))
    if role is not None:
        # Omitted content: only _meta changed. null or [] clears, a list replaces.
        if not isinstance(update.content, UnsetType):
            chat.on_message(_whole_message(update.message_id, role, update.content or [], chat))
        return
    match update:
        case v2.SessionUpdateStateUpdate(state=state, stop_reason=stop_reason, usage=usage):
            chat.on_state(state, stop_reason, None if usage is None else turn_tokens(usage))
        case v2.SessionUpdateUserMessageChunk():  # not words (StreamedChunks)
            attach_chunk(chat, update, v2, content_text)
        case v2.SessionUpdateToolCallUpdate():
            chat.on_tool_call(tool_call_patch(update))
        case v2.SessionUpdateToolCallContentChunk(tool_call_id=call_id, content=item):
            chat.on_tool_call(ToolCallPatch(call_id, append_content=[_content_part(item)]))
        case v2.SessionUpdateTerminalUpdate():
            terminals.update(
                chat,
                update.terminal_id,
                command=update.command,
                cwd=update.cwd,
                output=_snapshot(update.output),
                exit_status=_exit_status(update.exit_status),
            )
        case v2.SessionUpdateTerminalOutputChunk(terminal_id=terminal_id, data=data):
            terminals.chunk(chat, terminal_id, data)
        case v2.SessionUpdatePlanUpdate(plan=plan):
            plan_update(chat, plan, v2)
        case v2.SessionUpdatePlanRemoved(plan_id=plan_id):
            chat.on_plan(plan_id, None)
        case v2.SessionUpdateAvailableCommandsUpdate(available_commands=commands):
            chat.on_info(commands=[_command(c) for c in commands])
        case v2.SessionUpdateConfigOptionUpdate(config_options=options):
            chat.on_config(config_options(options))
        case big_settings.Converted(options=options, entries=entries):
            chat.on_config(options, entries)
        case v2.SessionUpdateSessionInfoUpdate(title=title):
            if not isinstance(title, UnsetType):
                chat.on_info(title=title)
        case v2.SessionUpdateUsageUpdate(used=used, size=size, cost=cost):
            chat.on_usage(used, size, (cost.amount, cost.currency) if cost else None)
        case v2.SessionUpdateCompactionUpdate():
            compaction_patch(chat, update, content_text)
        case v2.SessionUpdateCompactionSummaryChunk(compaction_id=compaction, content=content):
            chat.on_compaction(compaction, append=content_text(content))
        case v2.SessionUpdateNotice(severity=severity, title=title, description=description):
            chat.on_notice(severity, title, description)
        case Unknown(tag=tag):
            # Newer or vendor (`_`) updates: never a crash; the header names the last one.
            chat.on_info(unknown_update=str(tag))
        case _:
            pass


def _whole_message(message_id: str, role: Role, blocks: Sequence[Any], chat: Chat) -> MessagePatch:
    """A whole message's patch; a user's words are its text blocks, what else it
    carries (files, images) is named on its "Attached" line, as the prompt's echo
    names it."""
    if role != "user":
        return MessagePatch(message_id, role, "".join(map(content_text, blocks)), replace=True)
    said = [block for block in blocks if not is_seed(block)]
    words = "".join(b.text for b in said if isinstance(b, v2.ContentBlockText))
    others = [b for b in said if not isinstance(b, v2.ContentBlockText)]
    cwd = chat.workspace.cwd
    attached = tuple(attached_label(b, cwd, v2, content_text) for b in others)
    return MessagePatch(message_id, role, words, replace=True, attached=attached)


def tool_call_patch(update: v2.ToolCallUpdate) -> ToolCallPatch:
    """Omitted fields stay UNSET; ``null`` clears (the field's empty value)."""
    patch = ToolCallPatch(update.tool_call_id)
    if not isinstance(update.title, UnsetType):
        patch.title = update.title or ""
    if not isinstance(update.kind, UnsetType):
        patch.kind = update.kind or "other"
    if not isinstance(update.name, UnsetType):
        patch.name = update.name
    if not isinstance(update.status, UnsetType):
        patch.status = update.status or "pending"
    if not isinstance(update.content, UnsetType):
        patch.content = [_content_part(item) for item in update.content or []]
    if not isinstance(update.locations, UnsetType):
        patch.locations = [Location(loc.path, loc.line) for loc in update.locations or []]
    if not isinstance(update.raw_input, UnsetType):
        patch.raw_input = update.raw_input
    return patch


def _content_part(item: Any) -> ContentPart:
    match item:
        case v2.ToolCallContentContent(content=content):
            return TextPart(content_text(content))
        case v2.ToolCallContentDiff(changes=changes, patch=patch):
            return ChangesPart(
                # A null item decodes as None (open unions take null): no change.
                [_file_op(change) for change in changes if change is not None],
                patch.text if patch is not None else None,
                patch.format if patch is not None else None,
            )
        case v2.ToolCallContentTerminal(terminal_id=terminal_id):
            return TerminalPart(terminal_id)
        case Unknown(tag=tag):
            return TextPart(f"[{tag or 'unknown'} content]")
        case _:
            return TextPart(f"[{type(item).__name__}]")


def _file_op(change: Any) -> FileOp:
    if isinstance(change, Unknown):
        # An operation newer than our schema: its fields are whatever the agent sent.
        old_path = change.get("oldPath")
        path = str(change.get("path", "?"))
        return FileOp(str(change.tag), path, old_path if isinstance(old_path, str) else None)
    tag = type(change).__struct_config__.tag
    return FileOp(str(tag), change.path, getattr(change, "old_path", None), change.file_type)


def content_text(block: Any) -> str:
    """Markdown for one content block; non-text content is described, not dropped."""
    match block:
        case v2.ContentBlockText(text=text):
            return str(text)
        case v2.ContentBlockResourceLink(uri=uri, name=name):
            return f"[{name or uri}]({uri})"
        case v2.ContentBlockResource(resource=Unknown() as resource):
            return f"[resource {resource.get('uri', '?')}]"
        case v2.ContentBlockResource(
            resource=v2.TextResourceContents() | v2.BlobResourceContents() as resource
        ):
            return f"[resource {resource.uri}]"
        case v2.ContentBlockImage():
            return "[image]"
        case v2.ContentBlockAudio():
            return "[audio]"
        case Unknown(tag=tag):
            return f"[{tag or 'unknown'} content]"
        case _:
            return f"[{type(block).__name__}]"


_chunk = StreamedChunks(_CHUNK_ROLES, v2.ContentBlockText, content_text)


def _snapshot(output: v2.TerminalOutput | UnsetType | None) -> bytes | UnsetType | None:
    if output is None or isinstance(output, UnsetType):
        return output
    try:
        return base64.b64decode(output.data, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text that is no base64 at all
        return b"[invalid terminal snapshot]"


def _exit_status(
    status: v2.TerminalExitStatus | UnsetType | None,
) -> dict[str, Any] | UnsetType | None:
    if status is None or isinstance(status, UnsetType):
        return status
    return {"exit_code": status.exit_code, "signal": status.signal}


def _command(command: v2.AvailableCommand) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": command.name, "description": command.description}
    match command.input:
        case v2.AvailableCommandInputText(hint=hint):
            entry["hint"] = hint
        case Unknown(tag=tag):
            entry["input"] = str(tag)  # an input kind we cannot offer: plain text
        case _:
            pass
    return entry


def config_options(options: Sequence[Any]) -> list[ConfigOption]:
    """The model's settings from v2 ``configOptions``; unknown kinds are listed only."""
    result = []
    for option in options:
        match option:
            case v2.SessionConfigOptionSelect():
                result.append(
                    ConfigOption(
                        option.config_id,
                        option.name,
                        "select",
                        option.current_value,
                        option.category,
                        option.description,
                        select_choices(option.options, v2.SessionConfigSelectGroup),
                    )
                )
            case v2.SessionConfigOptionBoolean():
                result.append(
                    ConfigOption(
                        option.config_id,
                        option.name,
                        "boolean",
                        option.current_value,
                        option.category,
                        option.description,
                    )
                )
            case Unknown(tag=tag):
                current = option.get("currentValue")
                result.append(
                    ConfigOption(
                        str(option.get("configId", "?")),
                        str(option.get("name", "?")),
                        str(tag),
                        current if isinstance(current, str | bool) else None,
                        option.get("category"),
                    )
                )
    return result


# -- requests --------------------------------------------------------------------------


class SessionsV2:
    """The v2 surface of one connection: sessions, turns, settings, permissions.

    A turn ends on the agent's ``state_update`` idle, not with the prompt's answer
    (which only accepts it). ``init`` is the agent's ``initialize`` answer.
    """

    version = 2
    turn_ends_its_work = False
    replays_late = True
    replays = True

    def __init__(
        self, connection: Connection, init: v2.InitializeResponse, services: Services
    ) -> None:
        self.connection = connection
        self.init = init
        self.services = services
        self.agent_title: str | None = init.info.title or init.info.name
        self._idle: dict[str, anyio.Event] = {}  # prompts waiting for idle, by session
        self._ending: set[str] = set()  # sessions whose own work is being ended
        self._early = EarlyUpdates(services.taken)
        connection.on_notifications(
            "session/update", v2.UpdateSessionNotification, self._on_updates
        )
        connection.on_request(
            "session/request_permission", v2.RequestPermissionRequest, self._on_permission
        )
        # A union (form | url), which ``type[P]`` does not spell.
        elicitation: Any = v2.CreateElicitationRequest
        connection.on_request("elicitation/create", elicitation, self._on_elicit)
        connection.on_notification(
            "elicitation/complete", v2.CompleteElicitationNotification, self._on_elicit_complete
        )
        if services.mcp is not None:
            serve_mcp_over_acp(connection, services.mcp, v2)

    def __repr__(self) -> str:
        return f"<SessionsV2 {len(self.services.chats)} sessions, {len(self._idle)} turns>"

    @property
    def auth_methods(self) -> list[LoginMethod]:
        found = (login_method(m) for m in self.init.auth_methods or [])
        return [m for m in found if m is not None]

    async def _mcp_servers(self, chat: Chat) -> list[Any]:
        """The MCP servers for a session of ``chat``, of the transports the agent
        advertises (``session.mcp``: none when it advertises nothing; ``acp``:
        MCP-over-ACP, from the unstable schema)."""
        offer = self.services.mcp
        session = self.init.capabilities.session
        caps = session.mcp if session is not None else None
        if offer is None:
            return []
        offered = {} if caps is None else {"stdio": caps.stdio, "http": caps.http, "acp": caps.acp}
        takes = {transport for transport, cap in offered.items() if cap is not None}
        return [mcp_server(spec, v2) for spec in await offer.servers_for(chat, takes)]

    @property
    def can_fork(self) -> bool:
        session = self.init.capabilities.session
        return session is not None and session.fork is not None

    @property
    def can_delete(self) -> bool:
        session = self.init.capabilities.session
        return session is not None and session.delete is not None

    @property
    def message_forks(self) -> MessageForks | None:
        return message_forks(self.init.capabilities.meta) if self.can_fork else None

    @property
    def can_steer(self) -> bool:
        return steers(self.init.meta, self.init.capabilities.meta)

    @property
    def takes_roots(self) -> bool:
        session = self.init.capabilities.session
        return session is not None and session.additional_directories is not None

    async def new_session(self, chat: Chat) -> str:
        params = v2.NewSessionRequest(
            cwd=chat.workspace.cwd,
            additional_directories=additional_directories(chat, self.takes_roots),
            mcp_servers=await self._mcp_servers(chat) or None,
        )
        return await self._create(chat, "session/new", params, v2.NewSessionResponse)

    async def fork(self, chat: Chat, session_id: str, at_message: str | None = None) -> str:
        if not self.can_fork:
            raise NotOffered("forking sessions is not offered by this agent")
        if at_message is not None and self.message_forks is None:
            raise NotOffered("forking at a message is not offered by this agent")
        params = v2.ForkSessionRequest(
            session_id=session_id,
            cwd=chat.workspace.cwd,
            additional_directories=additional_directories(chat, self.takes_roots),
            mcp_servers=await self._mcp_servers(chat) or None,
            meta=fork_point(at_message) if at_message is not None else None,
        )
        return await self._create(chat, "session/fork", params, v2.ForkSessionResponse)

    async def _create(
        self,
        chat: Chat,
        method: str,
        params: Any,
        answer: type[v2.NewSessionResponse] | type[v2.ForkSessionResponse],
    ) -> str:
        """A session made by ``method`` (new or fork) for ``chat``: registered, with
        its settings and the updates the agent sent before the chat knew its id."""
        with self._early.creating():
            response = await self.connection.request(method, params, answer)
            self.services.register(response.session_id, chat, answered=method)
            self._take_config(chat, response.config_options)
            apply_updates(chat, self._early.take(response.session_id), self.services.terminals)
        return response.session_id

    @property
    def _prompt_capabilities(self) -> v2.PromptCapabilities:
        accepts = (self.init.capabilities.session or v2.SessionCapabilities()).prompt
        return accepts or v2.PromptCapabilities()

    def sendable(self, attachments: Sequence[Attachment]) -> list[Attachment]:
        return sendable(attachments, image=self._prompt_capabilities.image is not None)

    def _blocks(self, chat: Chat, text: str, attachments: Sequence[Attachment]) -> list[Any]:
        accepts = self._prompt_capabilities
        embed, image = accepts.embedded_context is not None, accepts.image is not None
        return prompt_blocks(chat, text, attachments, v2, embed=embed, image=image)

    async def steer(self, chat: Chat, text: str, attachments: Sequence[Attachment]) -> bool:
        if not self.can_steer:
            raise NotOffered("steering a turn is not offered by this agent")
        blocks = self._blocks(chat, text, attachments)
        return await steer(self.connection, chat.session.session_id, blocks)

    async def prompt(
        self,
        chat: Chat,
        text: str,
        attachments: Sequence[Attachment],
        on_sent: OnSent = None,
    ) -> str:
        """Send the prompt; returns the stop reason once the agent reports idle."""
        session_id = chat.session.session_id
        blocks = self._blocks(chat, text, attachments)
        idle = self._idle[session_id] = anyio.Event()
        params = v2.PromptRequest(session_id=session_id, prompt=blocks)
        try:
            await self.connection.request(
                "session/prompt", params, v2.PromptResponse, on_sent=on_sent
            )
            await idle.wait()
        finally:
            self._idle.pop(session_id, None)
        return chat.session.stop_reason or "idle"

    async def cancel(self, chat: Chat) -> None:
        """The turn ends on the agent's idle update (stop reason ``cancelled``)."""
        params = v2.CancelSessionNotification(session_id=chat.session.session_id)
        await self.connection.notify("session/cancel", params)

    @property
    def _has_sessions(self) -> bool:
        """Whether the agent offers the session surface: ``capabilities.session``
        promises list, resume and close beside new and prompt; without it none is."""
        return self.init.capabilities.session is not None

    async def list_sessions(self, cwd: str | None) -> list[dict[str, Any]]:
        if not self._has_sessions:
            raise NotOffered("listing sessions is not offered by this agent")

        async def page(cursor: str | None) -> Page:
            params = v2.ListSessionsRequest(cwd=cwd, cursor=cursor)
            page = await self.connection.request("session/list", params, v2.ListSessionsResponse)
            return [session_info(s) for s in page.sessions], page.next_cursor

        return await every_page(page)

    async def resume(self, chat: Chat, session_id: str, *, replay: bool) -> None:
        """Reattach to a session; ``replay`` asks for its history first.

        The chat is registered before the request so replayed updates land in it.
        """
        if not self._has_sessions:
            raise NotOffered("resuming a session is not offered by this agent")
        chats = self.services.chats
        self.services.register(session_id, chat)
        chat.session.session_id = session_id
        params = v2.ResumeSessionRequest(
            session_id=session_id,
            cwd=chat.workspace.cwd,
            # The whole list again: a resume does not keep the last request's.
            additional_directories=additional_directories(chat, self.takes_roots),
            mcp_servers=await self._mcp_servers(chat) or None,
            replay_from=v2.ReplayFromStart() if replay else None,
        )
        try:
            response = await self.connection.request(
                "session/resume", params, v2.ResumeSessionResponse
            )
        except BaseException as err:
            chats.pop(session_id, None)
            if isinstance(err, RequestError):  # refused: the agent holds no such session
                self.services.forget(session_id)
            raise
        self._take_config(chat, response.config_options)

    async def close(self, session_id: str) -> None:
        if not self._has_sessions:
            return  # the session ends with the agent
        params = v2.CloseSessionRequest(session_id=session_id)
        await self.connection.request("session/close", params, v2.CloseSessionResponse)
        self.services.forget(session_id)

    async def delete(self, session_id: str) -> None:
        if not self.can_delete:
            raise NotOffered("deleting sessions is not offered by this agent")
        params = v2.DeleteSessionRequest(session_id=session_id)
        await self.connection.request("session/delete", params, v2.DeleteSessionResponse)

    async def set_config(self, chat: Chat, config_id: str, value: str | bool) -> None:
        session_id = chat.session.session_id
        params: Any
        if isinstance(value, bool):
            params = v2.SetSessionConfigOptionRequestBoolean(
                session_id=session_id, config_id=config_id, value=value
            )
        else:
            params = v2.SetSessionConfigOptionRequestId(
                session_id=session_id, config_id=config_id, value=value
            )
        response = await self.connection.request(
            "session/set_config_option", params, v2.SetSessionConfigOptionResponse
        )
        self._take_config(chat, response.config_options)

    async def login(self, method_id: str) -> None:
        params = v2.LoginAuthRequest(method_id=method_id)
        await self.connection.request("auth/login", params, v2.LoginAuthResponse)

    async def logout(self) -> None:
        # A login method advertised makes auth/logout available; there is no marker of its own.
        if not self.init.auth_methods:
            raise NotOffered("logging out is not offered by this agent")
        await self.connection.request("auth/logout", v2.LogoutAuthRequest(), v2.LogoutAuthResponse)

    def _take_config(self, chat: Chat, options: Sequence[Any] | None) -> None:
        if options is not None:
            chat.on_config(config_options(options))

    # -- from the agent

    async def _on_updates(self, notifications: list[v2.UpdateSessionNotification]) -> None:
        # A run of updates as one read of the stream brought them, split by session.
        config_update = v2.SessionUpdateConfigOptionUpdate
        for session_id, group in await session_runs(notifications, config_update, config_options):
            chat = self.services.chats.get(session_id)
            if chat is None or muted(chat):
                # A turn ended here that the agent went on with: hidden, but its idle
                # ends it all the same (its prompt waits for that in the background),
                # in a session its chat has left too (a rewind, a branch switch).
                for update in group:  # its tool calls' files are not the open turn's
                    if isinstance(update, v2.SessionUpdateToolCallUpdate):
                        self.services.turns.left_call(session_id, tool_call_patch(update))
                if any(_is_idle(update) for update in group) and session_id in self._idle:
                    self._idle[session_id].set()
                if chat is None:
                    self._early.hold(session_id, group)
                continue
            apply_updates(chat, group, self.services.terminals)
            await chat.editor.room()  # read on once drawing keeps up (decision 0072)
            if chat.state == "running" and chat.session.state == "idle":
                idle = self._idle.get(session_id)
                if idle is not None:
                    idle.set()
                elif not chat.prompted and session_id not in self._ending:
                    # Work the agent started on its own: no prompt waits to end it.
                    self._ending.add(session_id)
                    tasks = self.services.tasks.reporting_to(chat.show_error)
                    tasks.start_soon(self._end_own_work, chat)

    async def _end_own_work(self, chat: Chat) -> None:
        try:
            await self.services.terminals.show_now(chat)
            await chat.finish_turn(chat.session.stop_reason or "idle")
        finally:
            self._ending.discard(chat.session.session_id)

    async def _on_elicit(self, params: v2.CreateElicitationRequest) -> v2.CreateElicitationResponse:
        response: v2.CreateElicitationResponse = await elicit(self.services, v2, params)
        return response

    async def _on_elicit_complete(self, params: v2.CompleteElicitationNotification) -> None:
        self.services.elicitations.complete(params.elicitation_id)

    async def _on_permission(
        self, params: v2.RequestPermissionRequest
    ) -> v2.RequestPermissionResponse:
        cancelled = v2.RequestPermissionResponse(outcome=v2.RequestPermissionOutcomeCancelled())
        chat = self.services.chats.get(params.session_id)
        if chat is None:
            return cancelled
        options = [PermissionOption(o.option_id, o.name, o.kind) for o in params.options]
        anchor, question = self._permission_anchor(chat, params)
        chosen = await self.services.permissions.ask(chat, anchor, options, question)
        # Only an option the agent offered is an answer; anything else is a refusal.
        if chosen is None or chosen not in {o.id for o in options}:
            return cancelled
        return v2.RequestPermissionResponse(
            outcome=v2.RequestPermissionOutcomeSelected(option_id=chosen)
        )

    def _permission_anchor(
        self, chat: Chat, params: v2.RequestPermissionRequest
    ) -> tuple[ToolCallPatch, str | None]:
        """The tool call the prompt is shown at, and the prompt's own wording.

        A ``tool_call`` subject is that call, applied as an upsert (the prompt's
        title and description are shown with the prompt, not as the call's title;
        a title that only repeats the call's heading is not said twice). Otherwise
        a call of the client's own carries the copy: a ``command`` subject with its
        cwd, an absent or unknown subject generically.
        """
        subject = params.subject
        if isinstance(subject, v2.RequestPermissionSubjectToolCall):
            call = tool_call_patch(subject.tool_call)
            known = chat.session.tool_calls.get(call.id or "")
            heading = call.title if isinstance(call.title, str) else known and known.title
            title = None if params.title == heading else params.title
            question = "\n".join(t for t in (title, params.description) if t)
            return call, question or None
        lines = [params.description] if params.description else []
        patch = ToolCallPatch(None, title=params.title, kind="other")
        if isinstance(subject, v2.RequestPermissionSubjectCommand):
            patch.kind = "execute"
            patch.raw_input = {"command": subject.command}  # what permissions.allow reads
            lines += [f"`$ {subject.command}`", f"in `{subject.cwd}`"]
        elif isinstance(subject, Unknown):
            lines.append(f"({subject.tag or 'unknown'} request)")
        patch.content = [TextPart("\n".join(lines))]
        return patch, None
