"""Which files an agent may read and write: the user's ``fs_access`` option.

Inside the chat's directories (its own and its workspace roots:
``chat.workspace``) and the extra ``fs_access.roots`` the user names, agents read
and write as the editor allows. Elsewhere (paths resolved through
symlinks, so a link inside the directory that leads out of it is outside)
``outside`` decides: ``ask`` the user at a prompt in the chat (allow once,
allow this path for the session, reject), ``allow``, or ``deny``. A refused
access is shown in the transcript and raised as a :class:`ServiceError`
(``denied``) for the adapter to answer the agent with.

The session's review (:class:`~acp_nvim.client.services.changes.SessionChanges`)
checks every ``fs/*`` path here, so whatever reads and writes through it (ACP
v1, the editor MCP server) gets the same policy. Not here: terminals, whose
commands may touch any file (the agent asks for those with its own permission
requests).
"""

from __future__ import annotations

__all__ = ["FileAccess"]

import itertools
import os

from acp_nvim.client.config import FileAccessOptions
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.client.services.permissions import Permissions, Previewer
from acp_nvim.client.session.chat import Chat, settled
from acp_nvim.client.session.model import PermissionOption, TextPart, ToolCallPatch

_ALLOW, _ALWAYS, _REJECT = "allow", "allow_path", "reject"
_OPTIONS = (
    (_ALLOW, "Allow once", "allow_once"),
    (_ALWAYS, "Allow this path for the session", "allow_always"),
    (_REJECT, "Reject", "reject_once"),
)


class FileAccess:
    """The file access policy of one chat's session.

    ``options`` is the user's ``fs_access``; the App keeps it current. The chat's
    directories are read at each check: a root added since counts at once.
    """

    def __init__(self, chat: Chat, permissions: Permissions, options: FileAccessOptions) -> None:
        self.chat = chat
        self.permissions = permissions
        self.options = options
        self._allowed: set[str] = set()  # resolved paths the user allowed for the session
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"<FileAccess {self.chat.workspace.cwd} outside={self.options.outside}>"

    def inside(self, path: str) -> bool:
        """Whether absolute ``path``, symlinks resolved, lies in one of the chat's
        directories or the ``fs_access`` roots."""
        real = os.path.realpath(path)
        for root in (*self.chat.workspace.dirs, *self.options.roots):
            top = os.path.realpath(root)
            if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
                return True
        return False

    def granted(self, path: str) -> bool:
        """Whether the agent reads absolute ``path`` without asking: inside, allowed
        for the session, or ``outside`` is ``allow``."""
        return (
            self.options.outside == "allow"
            or os.path.realpath(path) in self._allowed
            or self.inside(path)
        )

    async def check(self, path: str, *, write: bool, preview: Previewer | None = None) -> None:
        """Let the agent read (or ``write``) absolute ``path``, or refuse.

        ``preview`` computes what a write would change, shown with the prompt.

        Raises:
            ServiceError: ``denied``, by the policy or by the user; the
                transcript says which.
        """
        if self.granted(path):
            return
        real = os.path.realpath(path)
        if self.options.outside == "ask" and self.permissions.allowed_at_prompt(self.chat, real):
            return  # the user allowed the agent's tool call on it just now, seeing it
        verb = "write" if write else "read"
        where = "outside the session's directory"
        if real != os.path.normpath(path):
            where = f"{where} (a link to {real})"
        call_id = f"fs_access{next(self._ids)}"
        call = ToolCallPatch(
            call_id,
            title=f"{verb.capitalize()} {path}",
            kind="edit" if write else "read",
            status="pending",
        )
        with settled(self.chat, call_id):  # allowed: completed; withdrawn: cancelled
            if self.options.outside == "deny":
                why = "denied by fs_access.outside"
            else:
                options = [PermissionOption(*option) for option in _OPTIONS]
                question = f"The agent asks to {verb} a file {where}."
                choice = await self.permissions.ask(
                    self.chat, call, options, question, remember=False, preview=preview
                )
                if choice == _ALWAYS:
                    self._allowed.add(real)
                if choice in (_ALLOW, _ALWAYS):
                    return
                why = "not allowed by the user"
            call.status = "failed"
            call.content = [TextPart(f"Refused to {verb} a file {where}: {why} (fs_access).")]
            self.chat.on_tool_call(call)
            raise ServiceError(f"{path} is {where}: {why}", "denied")
