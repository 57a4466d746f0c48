"""Permission requests: the policy, remembered choices, prompts waiting for the user.

An agent asks before a tool call runs (``session/request_permission``). The
request's tool call is applied as an upsert first (gemini sends a rejected
edit's call only here). Then an earlier "always" answer (remembered for the
project and agent: ``services.grants``), the user's allow-list
(``services.allowlist``) or the policy decides, or the prompt waits at its tool
call until the user picks an option.
A pending prompt is answered ``cancelled`` when the turn is cancelled or ends,
and disappears when the agent goes away or withdraws the request. A prompt
about an edit whose content is known carries a preview of it (the files as
the edit would change them), which the editor shows in those files.

Options are chosen by their ``kind``, never by their ids (every agent names
them differently). An option without a kind is only ever chosen by the user,
and an answer this module does not recognise is never taken as approval.
"""

from __future__ import annotations

__all__ = ["READ_KINDS", "Permissions", "Policy", "Previewer", "assign_keys"]

import itertools
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal

import anyio
import msgspec

from acp_nvim.client.config import PermissionAllow, PermissionKeys
from acp_nvim.client.services.allowlist import allowed, named_paths
from acp_nvim.client.services.grants import Grants
from acp_nvim.client.session.chat import Chat, muted
from acp_nvim.client.session.model import (
    FilePreview,
    PermissionOption,
    PermissionPrompt,
    ToolCall,
    ToolCallPatch,
)

Policy = Literal["ask", "allow_reads", "allow_all"]
# Computes the preview of a prompt, only once the user is to be asked.
Previewer = Callable[[], Awaitable[list[FilePreview]]]

# Tool kinds ``allow_reads`` allows: they look, they do not change anything.
READ_KINDS = frozenset({"read", "search", "think"})
# Tool kinds an "always" answer is remembered for. ``other`` (and kinds this client
# does not know) lump unrelated tools together, so those are asked every time.
_REMEMBERED_TOOL_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode"}
)
_KIND_KEYS: Mapping[str, str | None] = PermissionKeys().by_kind()
# A remembered "always" answer picks the option of its kind, else its one-time sibling.
_ONCE = {"allow_always": "allow_once", "reject_always": "reject_once"}


def assign_keys(
    options: list[PermissionOption], keys: Mapping[str, str | None] = _KIND_KEYS
) -> None:
    """Give each option its key: by kind (``keys``: the user's ``keys.permission``,
    ``a`` ``A`` ``r`` ``R`` by default; None: that kind has no key), else its position.

    Options without a kind, or a second option of one kind (qwen offers two
    ``allow_always``), get the digit of their position (1-9); later ones none.
    """
    used: set[str] = set()
    for position, option in enumerate(options, 1):
        key = keys.get(option.kind or "", "")
        if key is None:  # turned off: the picker answers it
            option.key = None
            continue
        if not key or key in used:
            key = str(position) if position <= 9 else None
        option.key = key
        if key is not None:
            used.add(key)


class _Pending(msgspec.Struct):
    id: str
    chat: Chat
    call_id: str
    tool_kind: str
    options: list[PermissionOption]
    remember: bool
    done: anyio.Event = msgspec.field(default_factory=anyio.Event)
    choice: PermissionOption | None = None


class Permissions:
    """Pending requests of the chats of one agent, and how they are answered.

    ``policy`` is the user's ``permission_policy`` option (the agent's own, else the
    global one), ``allow`` the ``permissions.allow`` option, ``preview`` whether
    prompts show their edits in the files (``diff_preview``); the App keeps them
    current. ``grants`` keeps "always" answers across restarts.
    """

    def __init__(self, policy: Policy = "ask", grants: Grants | None = None) -> None:
        self.policy: Policy = policy
        self.allow = PermissionAllow()
        self.grants = grants if grants is not None else Grants()
        self.preview = True
        self.keys: Mapping[str, str | None] = _KIND_KEYS  # the transcript's, by option kind
        # The transcript's key for "reject, and say why".
        self.why_key: str | None = PermissionKeys().reject_why or None
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        # By chat: the files (symlinks resolved) of the tool calls the user allowed
        # at a prompt this turn, which its file access then does not ask about again.
        self._shown_allowed: dict[int, set[str]] = {}

    def __repr__(self) -> str:
        return f"<Permissions {self.policy}, {len(self._pending)} pending>"

    def allowed_at_prompt(self, chat: Chat, real_path: str) -> bool:
        """Whether the user, this turn, allowed at a prompt a tool call of ``chat``
        naming ``real_path`` (its edit, with the file, was shown then)."""
        return real_path in self._shown_allowed.get(chat.id, ())

    def pending(self, chat: Chat) -> list[str]:
        """Ids of the requests of ``chat`` waiting for the user, oldest first."""
        return [p.id for p in self._pending.values() if p.chat is chat]

    async def ask(
        self,
        chat: Chat,
        tool_call: ToolCallPatch,
        options: list[PermissionOption],
        question: str | None = None,
        *,
        remember: bool = True,
        preview: Previewer | None = None,
    ) -> str | None:
        """Decide or ask the user; returns the chosen option id, None for ``cancelled``.

        ``remember`` False: a question the policy and remembered answers by tool
        kind do not cover (file access): always asked, and the answer is the
        caller's to remember. ``preview`` computes what the prompt shows of the
        edit it is about (default: the edits of the tool call's content, through
        the chat's review); it runs only when the user is asked.

        Example::

            option_id = await permissions.ask(chat, ToolCallPatch("c1", kind="edit"), options)
        """
        if muted(chat) or chat.session.cancelling:
            return None  # the turn ended here, or is being stopped: nobody is asked
        call = chat.on_tool_call(tool_call)
        request_id = f"permission{next(self._ids)}"
        assign_keys(options, self.keys)
        decided = self._decide(chat, call, options) if remember else None
        if decided is not None:
            option, why = decided
            chat.on_permission(
                call.id,
                PermissionPrompt(request_id, options, f"{option.name} ({why})", question),
            )
            return option.id
        pending = _Pending(request_id, chat, call.id, call.kind, options, remember)
        # Registered before the preview is read, so a cancel meanwhile answers it.
        self._pending[request_id] = pending
        try:
            shown = await self._preview(chat, call, preview)
            if not pending.done.is_set():
                prompt = PermissionPrompt(
                    request_id, options, question=question, preview=shown, why_key=self.why_key
                )
                self._show(chat, call, prompt)
            await pending.done.wait()
        finally:
            del self._pending[request_id]
            if not pending.done.is_set():
                # Cancelled task: the agent died or withdrew the request ($/cancel_request).
                self._resolve_view(pending, None)
            # Answered, or withdrawn by the agent, the turn goes on; answered
            # ``cancelled`` (:meth:`cancel`), it is being stopped: "cancelling" stays.
            stopped = pending.done.is_set() and pending.choice is None
            if chat.state == "running" and not self.pending(chat) and not stopped:
                chat.on_state("running")
        choice = pending.choice
        outcome = choice.name if choice is not None else "cancelled"
        self._resolve_view(pending, PermissionPrompt(request_id, options, outcome, question))
        return choice.id if choice is not None else None

    def subject(self, request_id: str) -> str | None:
        """What pending request ``request_id`` asks about: its tool call's title."""
        pending = self._pending.get(request_id)
        call = pending.chat.session.tool_calls.get(pending.call_id) if pending else None
        return (call.title or call.kind) if call is not None else None

    def answer(self, request_id: str, option_id: str) -> bool:
        """The user picked ``option_id``; False when the request or option is unknown."""
        pending = self._pending.get(request_id)
        if pending is None or pending.done.is_set():
            return False
        option = next((o for o in pending.options if o.id == option_id), None)
        if option is None:
            return False
        pending.choice = option
        call = pending.chat.session.tool_calls.get(pending.call_id)
        if pending.remember and option.kind in ("allow_once", "allow_always") and call is not None:
            named = self._shown_allowed.setdefault(pending.chat.id, set())
            paths = [path for path in named_paths(call) if os.path.isabs(path)]
            named.update(os.path.realpath(path) for path in paths)
        if (
            pending.remember
            and option.kind in _ONCE
            and pending.tool_kind in _REMEMBERED_TOOL_KINDS
        ):
            # The one memory of it (so :AcpPermission forget is at once true for every
            # chat); by the user's directory: a worktree chat's answers are its project's.
            self.grants.remember(
                pending.chat.workspace.user_cwd, pending.chat.agent, pending.tool_kind, option.kind
            )
        pending.done.set()
        return True

    async def _preview(
        self, chat: Chat, call: ToolCall, preview: Previewer | None
    ) -> list[FilePreview]:
        if not self.preview:
            # A file with no text is named still: nothing else tells of it (0099).
            return await chat.changes.preview(call, texts=False) if chat.changes is not None else []
        if preview is not None:
            return await preview()
        return await chat.changes.preview(call) if chat.changes is not None else []

    @staticmethod
    def _show(chat: Chat, call: ToolCall, prompt: PermissionPrompt) -> None:
        chat.on_permission(call.id, prompt)
        chat.editor.emit(
            "AcpPermissionRequest",
            {
                "chat": chat.id,
                "request": prompt.id,
                "tool_call": call.id,
                "title": call.title,
                "kind": call.kind,
                "options": [{"id": o.id, "name": o.name, "kind": o.kind} for o in prompt.options],
            },
        )
        if chat.state == "running":
            chat.on_state("requires_action")  # the winbar says the agent waits for you

    def cancel(self, chat: Chat) -> None:
        """Answer every pending request of ``chat`` with ``cancelled`` (its turn is
        over: what the user allowed at its prompts is asked about again)."""
        self._shown_allowed.pop(chat.id, None)
        for pending in self._pending.values():
            if pending.chat is chat:
                pending.done.set()

    def _decide(
        self, chat: Chat, call: ToolCall, options: list[PermissionOption]
    ) -> tuple[PermissionOption, str] | None:
        """The option to answer with without asking, and why; None: ask the user."""
        by_kind: dict[str, PermissionOption] = {}
        for option in options:
            if option.kind is not None and option.kind in _KIND_KEYS:
                by_kind.setdefault(option.kind, option)
        tool_kind = call.kind
        remembered = None
        if tool_kind in _REMEMBERED_TOOL_KINDS:
            remembered = self.grants.answer(chat.workspace.user_cwd, chat.agent, tool_kind)
        why = f"remembered for `{tool_kind}` in this project"
        if remembered in _ONCE:
            for kind in (remembered, _ONCE[remembered]):
                if kind in by_kind:
                    return by_kind[kind], why
        if self.policy == "allow_all" or (self.policy == "allow_reads" and tool_kind in READ_KINDS):
            why = f"policy {self.policy}"
        else:
            listed = allowed(call, self.allow, chat.workspace.cwd)
            if listed is None:
                return None
            why = listed
        for kind in ("allow_once", "allow_always"):
            if kind in by_kind:
                return by_kind[kind], why
        return None

    @staticmethod
    def _resolve_view(pending: _Pending, prompt: PermissionPrompt | None) -> None:
        # A newer request may have taken over the tool call's prompt: leave that one.
        call = pending.chat.session.tool_calls.get(pending.call_id)
        if call is not None and call.permission is not None and call.permission.id == pending.id:
            pending.chat.on_permission(pending.call_id, prompt)
