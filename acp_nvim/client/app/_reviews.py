"""The review of each chat's agent changes, and the user's commands on it."""

from __future__ import annotations

__all__ = ["Reviews", "restored_files"]

from functools import partial
from typing import TYPE_CHECKING

from acp_nvim.client.app._context import AppContext
from acp_nvim.client.config import AgentConfig

if TYPE_CHECKING:
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.services.changes import Restored, SessionChanges
    from acp_nvim.client.session.chat import Chat


class Reviews:
    """Each chat's :class:`SessionChanges` (the same object as the chat's
    ``changes``, typed as the service it is), kept across restarts of its agent."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.by_chat: dict[int, SessionChanges] = {}

    def __repr__(self) -> str:
        return f"<Reviews of {len(self.by_chat)} chats>"

    def configure(self) -> None:
        """The options the reviews follow (after ``setup``)."""
        for review in self.by_chat.values():
            from acp_nvim.client.services.worktree_changes import WorktreeChanges

            if not isinstance(review, WorktreeChanges):  # a worktree's are always saved
                review.auto_save = self.ctx.config.auto_save
            if review.access is not None:
                review.access.options = self.ctx.config.fs_access

    def attach(self, chat: Chat, connection: AgentConnection, agent_config: AgentConfig) -> None:
        from acp_nvim.client.services.access import FileAccess

        review = self.by_chat.get(chat.id)
        if review is None:
            review = self._new(chat, agent_config.missing_file_as_empty)
            self.by_chat[chat.id] = review
        # Asks through this connection's prompts (a restart brings new ones).
        review.access = FileAccess(chat, connection.permissions, self.ctx.config.fs_access)
        chat.changes = review
        review.number(chat.branches.numbers())  # a reopened chat's branches, listed before

    async def reopened(self, chat: Chat, waiting: list[str], missing_as_empty: bool) -> None:
        """``chat`` was reopened in its kept worktree: the user's files ``waiting``
        (whose hunks waited there) are reviewed again before its agent starts, as a
        live worktree chat's (``WorktreeChanges.left_waiting``)."""
        from acp_nvim.client.services.worktree_changes import WorktreeChanges

        review = self.by_chat[chat.id] = self._new(chat, missing_as_empty)
        if isinstance(review, WorktreeChanges):
            await review.left_waiting(waiting)

    def _new(self, chat: Chat, missing_as_empty: bool) -> SessionChanges:
        """The review of ``chat``'s directory; of its worktree for a worktree chat."""
        review = self._made(chat, missing_as_empty)
        review.changed_elsewhere = partial(self._changed_elsewhere, chat.id)
        return review

    def _changed_elsewhere(self, chat_id: int, path: str) -> list[int]:
        """The other chats whose agents changed ``path`` (their reviews hold it)."""
        return [
            other
            for other, review in self.by_chat.items()
            if other != chat_id and any(path in turn for turn in review.store.turns())
        ]

    def _made(self, chat: Chat, missing_as_empty: bool) -> SessionChanges:
        from acp_nvim.client.services.changes import SessionChanges
        from acp_nvim.client.services.worktree_changes import WorktreeChanges

        tasks = self.ctx.tasks.reporting_to(chat.show_error)
        workspace = chat.workspace
        if workspace.worktree is not None:
            return WorktreeChanges(
                self.ctx.editor,
                chat.id,
                workspace.cwd,
                tasks,
                workspace.worktree,
                roots=workspace.roots,
                missing_file_as_empty=missing_as_empty,
            )
        return SessionChanges(
            self.ctx.editor,
            chat.id,
            workspace.cwd,
            tasks,
            roots=workspace.roots,
            skip_paths=self.ctx.nvim_dirs | self.ctx.history.own_files(),
            auto_save=self.ctx.config.auto_save,
            missing_file_as_empty=missing_as_empty,
        )

    def prepare(self, chat_id: int) -> None:
        """The chat's session is ready: its review reads the tree before the first turn."""
        review = self.by_chat.get(chat_id)
        if review is not None:
            review.prepare_soon()

    def closed(self, chat_id: int) -> SessionChanges | None:
        """Chat ``chat_id`` closed: its review goes, unless hunks of it still wait in
        the user's files; then it stays and takes the user's decisions as before,
        until none waits (decision 0081). A worktree chat's goes: its worktree goes
        or stays whole (``Workspaces.release``). Returns the review the chat had."""
        from acp_nvim.client.services.worktree_changes import WorktreeChanges

        review = self.by_chat.get(chat_id)
        if review is None:
            return None
        review.close()  # no agent changes files for it any more
        waiting = review.store.open_hunks()
        if isinstance(review, WorktreeChanges) or not waiting:
            self._forget(chat_id)
        else:
            hunks = "1 hunk waits" if waiting == 1 else f"{waiting} hunks wait"
            where = f"in your files from closed chat #{chat_id} (:AcpReview)"
            self.ctx.editor.notify(f"{hunks} {where}", "info")
        return review

    def close_all(self) -> None:
        """Every review lets go of its watch: no agent changes files any more."""
        for review in self.by_chat.values():
            review.close()

    def _forget(self, chat_id: int) -> None:
        """Let go of a closed chat's review; Lua drops it and its marks with it (an
        empty review of a chat it no longer shows)."""
        self.by_chat.pop(chat_id, None)
        self.ctx.editor.review(chat_id, {"turn": 0, "files": []})

    def _settle(self, chat_id: int) -> None:
        """A closed chat's review goes once no hunk of it waits."""
        review = self.by_chat.get(chat_id)
        if chat_id not in self.ctx.chats and review is not None and not review.store.open_hunks():
            self._forget(chat_id)

    async def review(
        self,
        chat_id: int,
        decision: str,
        path: str | None = None,
        hunk: int | None = None,
        turn: int | None = None,
    ) -> None:
        """Accept or reject agent changes of chat ``chat_id`` (see SessionChanges.decide)."""
        review = self.by_chat.get(chat_id)
        if review is None:
            self.ctx.editor.notify("no changes to review in this chat", "warn")
            return
        if decision not in ("accept", "reject"):
            raise ValueError(f"unknown review decision {decision!r}")
        await review.decide("accept" if decision == "accept" else "reject", path, hunk, turn)
        self.ctx.history.reviewed(chat_id)
        self._settle(chat_id)

    def baseline(self, chat_id: int, path: str, turn: int | None = None) -> None:
        """Hand the editor ``path``'s text before ``turn`` (see SessionChanges.baseline)."""
        review = self.by_chat.get(chat_id)
        if review is None:
            self.ctx.editor.notify("no changes to review in this chat", "warn")
            return
        review.baseline(path, turn)

    async def buffer_changed(self, path: str) -> None:
        """The user changed a buffer holding agent hunks (typing, undo, redo)."""
        for chat_id, review in list(self.by_chat.items()):
            await review.sync(path)
            self._settle(chat_id)

    def restorable(self, chat_id: int) -> list[int]:
        """The turns of the chat's shown branch that changed files, newest first
        (:AcpRestore's completion: numbered as the transcript shows them, which the
        review's numbers are not once a turn was rewound)."""
        chat, review = self.ctx.chats.get(chat_id), self.by_chat.get(chat_id)
        if chat is None or review is None:
            return []
        changed = review.turns_changed()
        shown = enumerate(chat.branches.path, 1)
        return [number for number, turn in reversed(list(shown)) if turn.review in changed]

    async def restore(self, chat_id: int, turn: int | None = None) -> None:
        """Take the project's files back to how they were before ``turn`` of the chat's
        shown branch (default: its last turn); the transcript marks it (the agent is
        not rewound: it learns of the restore from the files; :AcpRewind does both)."""
        chat = self.ctx.chats.get(chat_id)
        review = self.by_chat.get(chat_id)
        editor = self.ctx.editor
        path = chat.branches.path if chat is not None else []
        if chat is None or review is None or not path:
            editor.notify("no turn to restore", "warn")
            return
        if chat.state == "running":
            editor.notify("cannot restore during a turn: cancel it first", "warn")
            return
        turn = len(path) if turn is None else turn
        if not 1 <= turn <= len(path):
            editor.notify(f"no turn {turn} (turns 1 to {len(path)})", "warn")
            return
        unrecorded = chat.branches.unrecorded(turn)
        restored = await review.restore(path[turn - 1].review)
        kept = f"; what {unrecorded} changed stays as it is" if unrecorded else ""
        chat.info(f"*Restored the files to before turn {turn}: {restored_files(restored)}{kept}.*")


def restored_files(restored: Restored | None) -> str:
    """The files a restore took back as its note names them, and those it could not
    (a warning said why)."""
    files = restored.files if restored is not None else []
    listed = ", ".join(f"`{name}`" for name in files) or "no file needed it"
    refused = ", ".join(f"`{name}`" for name in restored.refused) if restored else ""
    return f"{listed}; not {refused} (see the warnings)" if refused else listed
