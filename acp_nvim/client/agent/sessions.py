"""The one interface both protocol versions implement (``v1.SessionsV1``, ``v2.SessionsV2``).

Everything that differs between ACP versions sits behind :class:`Sessions`:
session lifecycle, how a turn ends, cancel, settings, login. The connection
holds one and never asks which version it speaks; negotiation picks it.

Requests raise the protocol's ``RequestError`` / ``ConnectionClosed`` /
``ProtocolError`` (a badly shaped answer) and :class:`NotOffered`; the
connection turns each into a message for the user.
"""

from __future__ import annotations

__all__ = [
    "MAX_LIST_PAGES",
    "EarlyUpdates",
    "MessageForks",
    "NotOffered",
    "Page",
    "Services",
    "SessionTaken",
    "Sessions",
    "StreamedChunks",
    "TerminalSink",
    "additional_directories",
    "attach_chunk",
    "attached_label",
    "compaction_patch",
    "content_block",
    "elicit",
    "every_page",
    "extension",
    "fork_point",
    "is_seed",
    "login_method",
    "mcp_server",
    "message_forks",
    "plan_update",
    "prompt_blocks",
    "seed_blocks",
    "select_choices",
    "serve_mcp_over_acp",
    "session_info",
    "session_runs",
    "steer",
    "steers",
    "turn_tokens",
    "untold_roots",
]

import itertools
import operator
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

import msgspec
from msgspec import UnsetType

from acp_nvim.client.agent import big_settings
from acp_nvim.client.agent.schema import V1, V2, Schema
from acp_nvim.client.agent.turns import Turns
from acp_nvim.client.editor import TurnTokens
from acp_nvim.client.mcp import (
    AcpBridge,
    AcpServer,
    HttpServer,
    McpOffer,
    ServerSpec,
    SseServer,
    StdioServer,
)
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.context import PromptForm, prompt_form
from acp_nvim.client.services.elicitations import Elicitation, Elicitations, Field
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat, Chunk
from acp_nvim.client.session.model import (
    FILE_PLAN,
    MARKDOWN_PLAN,
    Attachment,
    Choices,
    ConfigOption,
    LoginMethod,
    MessagePatch,
    PlanEntry,
    Role,
)
from acp_nvim.client.session.seed import SEED_URI
from acp_nvim.client.session.workspace import file_label
from acp_nvim.client.tasks import Tasks
from acp_nvim.client.text import title as title_of
from acp_nvim.protocol import Connection, OnSent, RequestError
from acp_nvim.protocol.unknown import Unknown, struct_type

if TYPE_CHECKING:
    from acp_nvim.protocol import schema_v1 as v1
    from acp_nvim.protocol import schema_v2 as v2


# Whether a fork at a message keeps the message named (see message_forks).
MessageForks = Literal["inclusive", "exclusive"]


class NotOffered(Exception):
    """The agent (or this protocol version) does not offer what was asked;
    ``str()`` names it, e.g. ``"deleting sessions"``."""


class SessionTaken(Exception):
    """A session id that is another chat's on this connection; ``str()`` says whose."""


class Services(msgspec.Struct, eq=False):
    """What a protocol adapter needs to answer the agent, shared with the connection.

    ``chats`` by session id and ``reviews`` by chat id are live mappings (the
    connection and the app add and remove entries).
    """

    chats: dict[str, Chat]
    reviews: Mapping[int, SessionChanges]
    terminals: Terminals
    permissions: Permissions
    tasks: Tasks
    elicitations: Elicitations
    # The MCP servers offered with each session (None: none at all).
    mcp: McpOffer | None = None
    # v1: the agent switches its mode by its modes only (``AgentConfig.set_mode``).
    modes_first: bool = False
    # Every session id a chat has had that the agent may still hold: one no chat has
    # now was left (a rewind, a closed chat), not one being created (see forget).
    taken: set[str] = msgspec.field(default_factory=set)
    # The connection's turns: those left to the agent go on unseen (Turns.left_call).
    turns: Turns = msgspec.field(default_factory=Turns)

    def register(self, session_id: str, chat: Chat, answered: str | None = None) -> None:
        """``chat`` is the chat of ``session_id`` from now on: its updates and requests
        go there. ``answered``: the method whose answer gave the id.

        Raises:
            SessionTaken: another chat has it (an agent that answers a fork with its
                parent's id, a session resumed twice); nothing changes.
        """
        other = self.chats.get(session_id)
        if other is not None and other is not chat:
            if answered is None:
                raise SessionTaken(f"session {session_id!r} is open in chat {other.id} already")
            raise SessionTaken(
                f"it answered {answered} with session id {session_id!r}, chat {other.id}'s: refused"
            )
        self.chats[session_id] = chat
        self.taken.add(session_id)
        chat.session.take(session_id, created=answered is not None)

    def forget(self, session_id: str) -> None:
        """The agent holds ``session_id`` no more (it answered its close) or never did
        (it refused to resume it): it may hand the id out again, and the updates it
        sends for it before that answer are the new session's (``EarlyUpdates``)."""
        self.taken.discard(session_id)


class Sessions(Protocol):
    """One agent connection's sessions, in whatever version was agreed."""

    version: int
    agent_title: str | None
    # Whether the answer that ends a turn ends all its work: v1's ``session/prompt``
    # answer comes once no tool call is pending (prompt-turn.mdx), so a call still
    # unfinished then was dropped (a rejected permission: qwen, opencode); over v2
    # background work may go on while idle.
    turn_ends_its_work: bool
    # Whether a resume's replay may go on after its answer: v1's ``session/load``
    # streams the history before it answers; a v2 agent "should" (decision 0088).
    replays_late: bool

    @property
    def auth_methods(self) -> list[LoginMethod]:
        """The login methods the agent advertises, in the forms this client runs."""

    @property
    def can_fork(self) -> bool:
        """Whether the agent advertises ``session/fork`` (unstable in v1 and v2)."""

    @property
    def can_delete(self) -> bool:
        """Whether the agent advertises ``session/delete`` (``sessionCapabilities.delete``)."""

    @property
    def message_forks(self) -> MessageForks | None:
        """Whether its forks take a message to fork at, and keep it or not (the
        ``jetbrains.air.fork`` extension, version 1, advertised in the agent
        capabilities' ``_meta``); None where they do not."""

    @property
    def can_steer(self) -> bool:
        """Whether the agent advertises ``_session/steering`` (``_meta.steering``)."""

    @property
    def replays(self) -> bool:
        """Whether a resume can show the session's history: v1 with ``session/load``
        (its ``session/resume`` replays nothing), any v2 agent (``replayFrom``)."""

    @property
    def takes_roots(self) -> bool:
        """Whether the agent advertises ``additionalDirectories`` (more workspace roots
        on session/new, load, resume and fork)."""

    async def new_session(self, chat: Chat) -> str:
        """Create a session for ``chat`` (registered in ``chats``) in its workspace
        (``chat.workspace``: the directory and roots of every session request);
        returns its id."""

    async def fork(self, chat: Chat, session_id: str, at_message: str | None = None) -> str:
        """Create a session for ``chat`` that continues session ``session_id``
        (registered in ``chats``, its settings from the answer); returns its id.
        ``at_message``: the agent's id of the message the fork ends at (kept where
        the forks are ``inclusive``, see :attr:`message_forks`); None forks the whole
        session.

        Raises:
            NotOffered: the agent does not advertise ``session/fork``, or a fork at
                a message when ``at_message`` is given.
        """

    def sendable(self, attachments: Sequence[Attachment]) -> list[Attachment]:
        """The ``attachments`` this agent takes, in their order: :meth:`prompt` leaves
        out the others (an image to an agent that takes none) and the chat says so, so
        the turn lists only these as attached."""

    async def steer(self, chat: Chat, text: str, attachments: Sequence[Attachment]) -> bool:
        """Put a message into ``chat``'s running turn (``_session/steering``); whether
        the agent took it (``injected``), else it is the caller's to send as a prompt.

        Raises:
            NotOffered: the agent does not advertise steering.
        """

    async def prompt(
        self,
        chat: Chat,
        text: str,
        attachments: Sequence[Attachment],
        on_sent: OnSent = None,
    ) -> str:
        """Send one prompt; returns the stop reason once the agent ended the turn.
        ``on_sent`` is called once the prompt is written to the agent.

        Attachments go in the form the agent accepts (``services.context.prompt_form``);
        one it cannot take is left out, and the chat says so.

        The chat's turn is started by the caller; ending it is the caller's too
        (``Chat.finish_turn``), so both versions end a turn the same way.
        """

    async def cancel(self, chat: Chat) -> None:
        """Ask the agent to stop the turn; it ends with ``cancelled``."""

    async def list_sessions(self, cwd: str | None) -> list[dict[str, Any]]:
        """The agent's sessions (all pages), as ``session_id, cwd, roots, title,
        updated_at``."""

    async def resume(self, chat: Chat, session_id: str, *, replay: bool) -> None:
        """Attach ``chat`` to an existing session; ``replay`` shows its history."""

    async def close(self, session_id: str) -> None:
        """Tell the agent the session is closed (where it offers that; else nothing)."""

    async def delete(self, session_id: str) -> None: ...

    async def set_config(self, chat: Chat, config_id: str, value: str | bool) -> None: ...

    async def login(self, method_id: str) -> None:
        """Run a login method of kind ``agent``."""

    async def logout(self) -> None: ...


class TerminalSink(Protocol):
    """Where terminals the agent runs itself go, shown as display terminals: v2's
    ``terminal_update`` / ``terminal_output_chunk``, and over v1 the ``_meta`` of a tool
    call (``terminal_info`` / ``terminal_output`` / ``terminal_exit``, Zed's convention).

    ``output`` and ``exit_status`` follow the patch rule: UNSET leaves the value,
    None clears it; ``output`` is the whole decoded byte snapshot.
    """

    def update(
        self,
        chat: Chat,
        terminal_id: str,
        *,
        command: str | UnsetType | None,
        cwd: str | UnsetType | None,
        output: bytes | UnsetType | None,
        exit_status: dict[str, Any] | UnsetType | None,
    ) -> None: ...

    def chunk(self, chat: Chat, terminal_id: str, data: str) -> None:
        """Append one base64 chunk (decoded by the sink, which keeps split state)."""

    def append(self, chat: Chat, terminal_id: str, text: str) -> None:
        """Append output that came as text."""


class EarlyUpdates:
    """Updates for a session id no chat has yet, held while a session is created.

    Agents send a session's commands (or its mode) right after answering
    ``session/new``; the answer is where the client learns the id, and the next
    lines of the stream are read before the chat is registered under it. Those of
    a session a chat had (``taken``: its chat left it) are dropped at once: no
    chat takes them, and held they would use up the room of the one created.
    """

    LIMIT = 1000  # updates held at most: an unknown id must not fill memory

    def __init__(self, taken: Collection[str] = ()) -> None:
        self._creating = 0
        self._held: dict[str, list[Any]] = {}
        self._taken = taken

    @contextmanager
    def creating(self) -> Iterator[None]:
        """While a session is created: updates of unknown ids are held."""
        self._creating += 1
        try:
            yield
        finally:
            self._creating -= 1
            if not self._creating:
                self._held.clear()

    def hold(self, session_id: str, updates: list[Any]) -> None:
        if session_id in self._taken:
            return
        if self._creating and sum(map(len, self._held.values())) < self.LIMIT:
            self._held.setdefault(session_id, []).extend(updates)

    def take(self, session_id: str) -> list[Any]:
        """The updates held for ``session_id``, once its chat is registered."""
        return self._held.pop(session_id, [])


# session/list pages read at most: an agent that keeps sending cursors (or repeats
# one) would otherwise be paged forever.
MAX_LIST_PAGES = 100
# One page of session/list: the sessions as plain dicts, and the next cursor.
Page = tuple[list[dict[str, Any]], str | None]


async def every_page(fetch: Callable[[str | None], Awaitable[Page]]) -> list[dict[str, Any]]:
    """All sessions of a paginated ``session/list``: ``fetch(cursor)`` reads one page.

    Stops at an empty page, a repeated cursor or :data:`MAX_LIST_PAGES`.
    """
    sessions: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        page, cursor = await fetch(cursor)
        sessions += page
        if not cursor or not page or cursor in seen:
            break
        seen.add(cursor)
    return sessions


def login_method(method: Any) -> LoginMethod | None:
    """A login method as v1 and v2 advertise it (agent and terminal types, and the
    ``env_var`` type codex sends outside the schema); None for one this client
    cannot run. v1 names the id ``id``, v2 ``methodId``."""
    if method is None:  # a null in the list: an open union's item may be one
        return None
    if isinstance(method, Unknown):
        # Outside the schema, so every field is checked here.
        env_id = method.get("id") or method.get("methodId")
        if method.tag != "env_var" or not isinstance(env_id, str):
            return None
        listed = method.get("vars")
        names = [_var_name(v) for v in listed] if isinstance(listed, list) else []
        name, description = method.get("name"), method.get("description")
        return LoginMethod(
            env_id, name if isinstance(name, str) else env_id, "env",
            description if isinstance(description, str) else None,
            vars=[n for n in names if n],
        )  # fmt: skip
    method_id = getattr(method, "method_id", "") or getattr(method, "id", "")
    meta = method.meta or {}
    if getattr(method, "args", None) is not None or meta.get("type") == "terminal":
        # qwen marks an agent-type method as a terminal one in _meta.
        args = getattr(method, "args", None) or _strings(meta.get("args"))
        env = getattr(method, "env", None) or {}
        if isinstance(env, list):  # v2: a list of {name, value}
            env = {var.name: var.value for var in env}
        return LoginMethod(method_id, method.name, "terminal", method.description, args, env)
    return LoginMethod(method_id, method.name, "agent", method.description)


def _var_name(var: Any) -> str | None:
    """A variable of an ``env_var`` method: its name, or ``{"name": ...}``."""
    name = var.get("name") if isinstance(var, dict) else var
    return name if isinstance(name, str) else None


def _strings(value: Any) -> list[str]:
    """``value`` if it is a list of strings (a field of ``_meta``), else none."""
    is_strings = isinstance(value, list) and all(isinstance(v, str) for v in value)
    return list(value) if is_strings else []


def extension(meta: Mapping[str, Any] | None, *path: str) -> Any:
    """The value at ``path`` in an ``_meta`` object, or None where any step is missing
    or not an object (extensions are whatever an agent sends)."""
    value: Any = meta
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def message_forks(capabilities_meta: Mapping[str, Any] | None) -> MessageForks | None:
    """How the agent capabilities' ``_meta`` advertise forks at a message
    (``jetbrains.air.fork``, version 1: claude-agent-acp, codex-acp): ``inclusive``
    keeps the message named (what those adapters advertise), ``exclusive`` (an
    advertised ``inclusive: false``) drops it with what follows; None: not at all."""
    advertised = extension(capabilities_meta, "jetbrains", "air", "fork")
    version = extension(advertised, "version")
    if not isinstance(version, int) or version != 1:
        return None
    return "exclusive" if extension(advertised, "inclusive") is False else "inclusive"


def fork_point(message_id: str) -> dict[str, Any]:
    """The ``_meta`` of a ``session/fork`` that ends the fork with that message."""
    return {"jetbrains": {"air": {"fork": {"version": 1, "messageId": message_id}}}}


def steers(*metas: Mapping[str, Any] | None) -> bool:
    """Whether one of the initialize result's ``_meta`` objects advertises steering.
    Only the advertisement counts: codex-acp answers any unknown method with ``{}``."""
    return any(extension(meta, "steering", "supported") is True for meta in metas)


async def steer(connection: Connection, session_id: str, blocks: list[Any]) -> bool:
    """``_session/steering`` with the prompt ``blocks``; whether the agent ``injected``
    them into the running turn (``promptRequired``, or anything else: it did not)."""
    params = {"sessionId": session_id, "prompt": blocks, "idleBehavior": "promptRequired"}
    answer = await connection.request("_session/steering", params, dict)
    return bool(answer.get("outcome") == "injected")


def additional_directories(chat: Chat, takes_roots: bool) -> list[str] | None:
    """The ``additionalDirectories`` of a session request for ``chat``: its roots,
    where the agent takes them (``takes_roots``), else None. A chat with roots its
    agent does not take says so once: the agent may still read and write there
    (the access policy counts them in), it was only not told."""
    roots = chat.workspace.roots
    if not roots:
        return None
    if takes_roots:
        return list(roots)
    untold_roots(chat)
    return None


def untold_roots(chat: Chat) -> None:
    """Say in ``chat``, once, that its agent was not told of its roots."""
    workspace = chat.workspace
    if workspace.untold_said or not workspace.roots:
        return
    workspace.untold_said = True
    names = ", ".join(f"`{root}`" for root in workspace.roots)
    chat.info(
        f"*The agent takes no more workspace roots (additionalDirectories): it was not "
        f"told of {names}. It may still read and write there.*"
    )


def session_info(info: Any) -> dict[str, Any]:
    """One ``session/list`` entry (v1 and v2 name these fields alike) as plain data;
    ``roots``: its ``additionalDirectories``, which a resume must name again."""
    return {
        "session_id": info.session_id,
        "cwd": info.cwd,
        "roots": list(info.additional_directories or []),
        "title": title_of(info.title),
        "updated_at": info.updated_at,
    }


def turn_tokens(usage: v1.Usage | v2.Usage) -> TurnTokens:
    """The agent's count of a turn's tokens (unstable: v1's ``PromptResponse.usage``,
    v2's idle ``state_update.usage``; both versions shape it alike)."""
    tokens: TurnTokens = {
        "input": usage.input_tokens, "output": usage.output_tokens, "total": usage.total_tokens
    }
    if usage.thought_tokens is not None:
        tokens["thought"] = usage.thought_tokens
    if usage.cached_read_tokens is not None:
        tokens["cached_read"] = usage.cached_read_tokens
    if usage.cached_write_tokens is not None:
        tokens["cached_write"] = usage.cached_write_tokens
    return tokens


@overload
def prompt_blocks(
    chat: Chat,
    text: str,
    attachments: Sequence[Attachment],
    schema: V1,
    *,
    embed: bool,
    image: bool,
) -> list[v1.ContentBlock | Unknown]: ...
@overload
def prompt_blocks(
    chat: Chat,
    text: str,
    attachments: Sequence[Attachment],
    schema: V2,
    *,
    embed: bool,
    image: bool,
) -> list[v2.ContentBlock | Unknown]: ...
def prompt_blocks(
    chat: Chat,
    text: str,
    attachments: Sequence[Attachment],
    schema: Schema,
    *,
    embed: bool,
    image: bool,
) -> list[v1.ContentBlock | Unknown] | list[v2.ContentBlock | Unknown]:
    """The content of a prompt: its text, then each attachment in the form the agent
    accepts (``embed``: embedded context, ``image``: images); one it cannot take is
    left out and the chat says so. The first prompt of a seeded session carries the
    conversation before them (``Chat.seed``, `seed_blocks`)."""
    blocks: list[Any] = []
    if chat.seed is not None:
        blocks += seed_blocks(chat.seed, schema, embed=embed)
        chat.seed = None
    blocks.append(schema.ContentBlockText(text=text))
    for attachment in attachments:
        form = prompt_form(attachment, embed=embed, image=image)
        if form == "links":
            blocks += [
                schema.ContentBlockResourceLink(uri=uri, name=uri.rsplit("/", 1)[-1])
                for uri in attachment.links
            ]
            continue
        block = content_block(attachment, form, schema)
        if block is None:
            chat.info(f"*{attachment.label} not sent: the agent takes no {attachment.kind}s*")
        else:
            blocks.append(block)
    return blocks


_SEED_INTRO = (
    "This conversation began earlier, with another agent or in a session you no "
    "longer have. It is below, as Markdown; the user's next message follows it."
)


def seed_blocks(
    conversation: str, schema: Schema, *, embed: bool
) -> Sequence[v1.ContentBlock | v2.ContentBlock]:
    """The first prompt of a seeded session, before its own blocks: ``conversation``
    (Markdown) told to a session that does not know it (a reopened chat whose agent
    cannot load its session, a chat handed over to another agent; decision 0044), as
    an embedded resource where the agent takes embedded context, else as text."""
    if embed:
        resource = schema.TextResourceContents(
            uri=SEED_URI, text=conversation, mime_type="text/markdown"
        )
        return [
            schema.ContentBlockText(text=_SEED_INTRO),
            schema.ContentBlockResource(resource=resource),
        ]
    text = f"{_SEED_INTRO}\n\n<conversation>\n{conversation}\n</conversation>"
    return [schema.ContentBlockText(text=text)]


def is_seed(block: Any) -> bool:
    """Whether ``block`` is (part of) the conversation a seeded prompt carries
    (:func:`seed_blocks`): an agent that echoes that prompt as it went into its
    history (v2's acknowledgment, a v1 echo or replay) echoes the seed too, which
    is none of the user's words; the transcript says the agent was given it."""
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return text.startswith(_SEED_INTRO)
    resource = getattr(block, "resource", None)
    uri = resource.get("uri") if isinstance(resource, Unknown) else getattr(resource, "uri", None)
    return uri == SEED_URI


def attached_label(
    block: Any, cwd: str, schema: Schema, content_text: Callable[[Any], str]
) -> str:
    """How a user's message names ``block`` (not its words) on its Attached line: a
    file by its path in the session's directory (``cwd``), other content as
    ``content_text`` describes it."""
    if isinstance(block, schema.ContentBlockResourceLink):
        return file_label(block.uri, cwd) or block.name or block.uri
    if isinstance(block, schema.ContentBlockResource):
        resource: Any = block.resource
        uri = resource.get("uri", "") if isinstance(resource, Unknown) else resource.uri
        return file_label(str(uri), cwd) or content_text(block)
    return content_text(block).strip("[]")


def attach_chunk(
    chat: Chat, update: Any, schema: Schema, content_text: Callable[[Any], str]
) -> None:
    """Name a user's message chunk that is not words (a file, an image: a replayed
    message's, an acknowledgment's) on the message's Attached line, as a whole
    message names it (decision 0094)."""
    label = attached_label(update.content, chat.workspace.cwd, schema, content_text)
    chat.on_message(MessagePatch(update.message_id, "user", "", attached=(label,)))


def compaction_patch(chat: Chat, update: Any, content_text: Callable[[Any], str]) -> None:
    """Apply a ``compaction_update`` (v1's or v2's) as the contract says: ``summary``
    and ``error`` are patches (omitted leaves, ``null`` clears; ``summary: []`` clears
    too, a summary is its blocks' text)."""
    summary = update.summary
    retained: str | UnsetType | None = summary if isinstance(summary, UnsetType) else (
        "".join(content_text(b) for b in summary or []) or None
    )
    chat.on_compaction(
        update.compaction_id, status=update.status, summary=retained, error=update.error
    )


def plan_update(chat: Chat, content: Any, schema: Schema) -> None:
    """Apply a ``plan_update``'s content (v2's, v1's unstable one: alike), a plan
    keyed by its id: its steps, its markdown or its file; content of a kind not
    known is named where the plan would be."""
    match content:
        case schema.PlanUpdateContentItems(plan_id=plan_id, entries=entries):
            chat.on_plan(plan_id, [PlanEntry(e.content, e.status, e.priority) for e in entries])
        case schema.PlanUpdateContentMarkdown(plan_id=plan_id, content=text):
            chat.on_plan(plan_id, [PlanEntry(text, MARKDOWN_PLAN)])
        case schema.PlanUpdateContentFile(plan_id=plan_id, uri=uri):
            chat.on_plan(plan_id, [PlanEntry(uri, FILE_PLAN)])
        case Unknown(tag=tag):
            kind = tag or "unknown"
            chat.on_plan(str(content.get("planId", kind)), [PlanEntry(f"({kind} plan)", "unknown")])


def content_block(
    attachment: Attachment, form: PromptForm, schema: Schema
) -> v1.ContentBlock | v2.ContentBlock | None:
    """The content block of an attachment in ``form`` (None for ``skip``), built from
    ``schema``, the generated types of the version spoken: v1 and v2 name and shape
    these blocks alike."""
    uri, text = attachment.uri, attachment.text or ""
    match form:
        case "resource":
            resource = schema.TextResourceContents(
                uri=uri, text=text, mime_type=attachment.mime_type
            )
            return schema.ContentBlockResource(resource=resource)
        case "link":
            return schema.ContentBlockResourceLink(uri=uri, name=attachment.label)
        case "text":
            return schema.ContentBlockText(text=f"{attachment.label}:\n```\n{text}\n```")
        case "image":
            data, mime = attachment.data or "", attachment.mime_type or "image/png"
            return schema.ContentBlockImage(data=data, mime_type=mime, uri=uri)
    return None


@overload
async def elicit(
    services: Services, schema: V1, params: v1.CreateElicitationRequest
) -> v1.CreateElicitationResponse: ...
@overload
async def elicit(
    services: Services, schema: V2, params: v2.CreateElicitationRequest
) -> v2.CreateElicitationResponse: ...
async def elicit(
    services: Services,
    schema: Schema,
    params: v1.CreateElicitationRequest | v2.CreateElicitationRequest,
) -> v1.CreateElicitationResponse | v2.CreateElicitationResponse:
    """Answer ``elicitation/create`` (v1 and v2 shape it alike; ``schema`` is the
    version's generated types) by asking the user in the chat of its session, or
    for a request outside a session, in any chat of the agent."""
    chats = services.chats
    chat = chats.get(params.session_id) if params.session_id else next(iter(chats.values()), None)
    if chat is None:
        return schema.CreateElicitationResponseCancel()
    if isinstance(params, schema.CreateElicitationRequestUrl):
        request = Elicitation(
            params.message, "url", url=params.url, elicitation_id=params.elicitation_id
        )
    else:
        assert isinstance(params, schema.CreateElicitationRequestForm)  # the same version's
        wanted = params.requested_schema
        required = set(wanted.required or [])
        fields = [
            _field(name, prop, name in required, schema) for name, prop in wanted.properties.items()
        ]
        request = Elicitation(params.message, "form", fields)
    answer = await services.elicitations.ask(chat, request)
    if answer.action == "accept":
        return schema.CreateElicitationResponseAccept(content=answer.content)
    if answer.action == "decline":
        return schema.CreateElicitationResponseDecline()
    return schema.CreateElicitationResponseCancel()


def _field(name: str, prop: Any, required: bool, schema: Schema) -> Field:
    """One form field from its property schema (enums as choices)."""
    if isinstance(prop, Unknown):
        raise RequestError.invalid_params(f"field {name!r}: type {prop.tag!r} is not supported")
    kind = {
        schema.ElicitationPropertySchemaString: "string",
        schema.ElicitationPropertySchemaNumber: "number",
        schema.ElicitationPropertySchemaInteger: "integer",
        schema.ElicitationPropertySchemaBoolean: "boolean",
        schema.ElicitationPropertySchemaArray: "array",
    }[struct_type(prop)]  # an open twin where a lenient field fell back to its default
    options = prop.items if kind == "array" else prop
    if isinstance(options, Unknown):
        raise RequestError.invalid_params(f"field {name!r}: items of an unknown kind")
    titled = getattr(options, "one_of", None) or getattr(options, "any_of", None)
    plain = getattr(options, "enum", None)
    choices = [(o.const, o.title) for o in titled] if titled else None
    if plain and not titled:
        choices = [(v, v) for v in plain]
    return Field(
        name, kind, prop.title or name, required, prop.description, prop.default, choices,
        getattr(prop, "minimum", None), getattr(prop, "maximum", None),
    )  # fmt: skip


@overload
def mcp_server(spec: ServerSpec, schema: V1) -> v1.McpServer: ...
@overload
def mcp_server(spec: ServerSpec, schema: V2) -> v2.McpServer: ...
def mcp_server(spec: ServerSpec, schema: Schema) -> v1.McpServer | v2.McpServer:
    """One offered MCP server as ``schema`` (the version's generated types) sends it:
    v1 and v2 name and shape the three transports alike (sse, v1's alone, is
    ``v1.mcp_server_v1``'s)."""
    match spec:
        case StdioServer(name=name, command=command, args=args, env=env):
            variables = [schema.EnvVariable(name=k, value=v) for k, v in env.items()]
            return schema.McpServerStdio(name=name, command=command, args=args, env=variables)
        case HttpServer(name=name, url=url, headers=headers):
            fields = [schema.HttpHeader(name=k, value=v) for k, v in headers.items()]
            return schema.McpServerHttp(name=name, url=url, headers=fields)
        case SseServer():  # v2 has no sse transport: no v2 agent advertises one
            raise NotImplementedError("an sse MCP server is v1's alone (v1.mcp_server_v1)")
        case AcpServer(name=name, server_id=server_id):
            return schema.McpServerAcp(name=name, server_id=server_id)


def serve_mcp_over_acp(connection: Connection, offer: McpOffer, schema: Schema) -> None:
    """Answer the agent's ``mcp/connect``, ``mcp/message`` and ``mcp/disconnect`` on
    ``connection`` with the editor MCP server of ``offer``'s sessions (mcp.AcpBridge).
    ``schema`` is the version's generated types: v1 and v2 (unstable) shape these
    messages alike."""

    async def send(connection_id: str, method: str, params: dict[str, Any] | None) -> None:
        message = schema.MessageMcpNotification(
            connection_id=connection_id, method=method, params=params
        )
        await connection.notify("mcp/message", message)

    bridge = AcpBridge(offer, send)

    async def connect(params: Any) -> Any:
        return schema.ConnectMcpResponse(connection_id=await bridge.connect(params.server_id))

    async def message(params: Any) -> Any:
        return await bridge.message(params.connection_id, params.method, params.params or {})

    async def notification(params: Any) -> None:
        await bridge.notification(params.connection_id, params.method)

    async def disconnect(params: Any) -> Any:
        await bridge.disconnect(params.connection_id)
        return schema.DisconnectMcpResponse()

    connection.on_request("mcp/connect", schema.ConnectMcpRequest, connect)
    connection.on_request("mcp/message", schema.MessageMcpRequest, message)
    connection.on_request("mcp/disconnect", schema.DisconnectMcpRequest, disconnect)
    connection.on_notification("mcp/message", schema.MessageMcpNotification, notification)


_SESSION_ID, _UPDATE = operator.attrgetter("session_id"), operator.attrgetter("update")
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_MESSAGE_ID, _CONTENT = operator.attrgetter("message_id"), operator.attrgetter("content")
_TEXT = operator.attrgetter("text")


async def session_runs(
    notifications: Sequence[Any],
    config_update: type[Any],
    convert: Callable[[Sequence[Any]], list[ConfigOption]],
) -> list[tuple[str, list[Any]]]:
    """The updates of a read's ``session/update`` notifications, in order, in runs of
    one session; a big ``config_update`` converted off the loop (big_settings).
    Split by C calls, not a Python step per streamed chunk."""
    updates = await big_settings.off_loop(list(map(_UPDATE, notifications)), config_update, convert)
    session_ids = list(map(_SESSION_ID, notifications))
    if session_ids and session_ids.count(session_ids[0]) == len(session_ids):
        return [(session_ids[0], updates)]  # a stream's read
    pairs = zip(session_ids, updates, strict=True)
    return [
        (session_id, list(map(_SECOND, run)))
        for session_id, run in itertools.groupby(pairs, _FIRST)
    ]


class StreamedChunks:
    """An adapter's reader of streamed chunks for `Chat.on_updates`: ``roles`` by
    update struct, the text of a ``text_block`` read in place (a stream's every chunk),
    other content through ``content_text``."""

    def __init__(
        self, roles: Mapping[type, Role], text_block: type[Any], content_text: Callable[[Any], str]
    ) -> None:
        self._roles = roles
        self._text_block = text_block
        self._content_text = content_text

    def __call__(self, update: Any) -> Chunk | None:
        # By type first: a stream's chunks are the structs themselves, open twins rare.
        role = self._roles.get(type(update)) or self._roles.get(struct_type(update))
        if role is None:
            return None
        content = update.content
        if role == "user" and is_seed(content):
            return role, update.message_id, ""
        if role == "user" and type(content) is not self._text_block:
            return None  # a file, an image: named on the Attached line (the adapter's)
        text = content.text if type(content) is self._text_block else self._content_text(content)
        return role, update.message_id, text

    def joined(self, updates: Sequence[Any]) -> Chunk | None:
        # A pass of C per question, not a Python step per 20-byte chunk: one struct
        # type of a role, one message id, text blocks alone.
        kinds = set(map(type, updates))
        role = self._roles.get(kinds.pop()) if len(kinds) == 1 else None
        if role is None or role == "user":  # rare, and each may be a seed's (is_seed)
            return None
        message_ids = set(map(_MESSAGE_ID, updates))
        contents = list(map(_CONTENT, updates))
        if len(message_ids) != 1 or set(map(type, contents)) != {self._text_block}:
            return None
        return role, message_ids.pop(), "".join(map(_TEXT, contents))


def select_choices(options: Any, group: type[Any]) -> Choices:
    """A select setting's choices as either version sends them: plain, or in
    ``group``s (each choice named "group: choice"); none when not understood."""
    if isinstance(options, Unknown):
        return Choices()
    values: list[str] = []
    names: list[str] = []
    for item in options:
        if isinstance(item, group):
            values += [o.value for o in item.options]
            names += [f"{item.name}: {o.name}" for o in item.options]
        else:
            values.append(item.value)
            names.append(item.name)
    return Choices(tuple(values), tuple(names))
