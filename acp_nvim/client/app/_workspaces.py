"""Where each chat's agent works (decisions 0045, 0046): the directory and roots a
chat opens with, the roots the user adds or removes (:AcpRoot), and the worktree
of a worktree chat, made when it opens and removed when the last chat working in
it closes (kept, and said, while it holds work the user was not asked about)."""

from __future__ import annotations

__all__ = ["WorkspaceRefused", "Workspaces"]

import itertools
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

import anyio.to_thread

from acp_nvim.client.app._context import AppContext
from acp_nvim.client.config import AgentConfig, ConfigError, chat_cwd, workspace_root
from acp_nvim.client.session.workspace import KeptWorktree, Workspace, Worktree

if TYPE_CHECKING:
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.services.changes import SessionChanges
    from acp_nvim.client.session.chat import Chat


class WorkspaceRefused(Exception):
    """A chat cannot open where it was asked to; ``str()`` names what is wrong."""


class Workspaces:
    """``reviews``: each chat's review, by chat id (live), for what a worktree still
    waits on; ``agents``: each chat's agent, by chat id (live)."""

    def __init__(
        self,
        ctx: AppContext,
        reviews: Mapping[int, SessionChanges],
        agents: Mapping[int, AgentConnection],
    ) -> None:
        self.ctx = ctx
        self.reviews = reviews
        self.agents = agents
        # The worktrees made for chats, by the chat that now answers for each: the
        # last chat working in one removes it.
        self._made: dict[int, Worktree] = {}
        # Hunks that chats closed before the last one in a worktree left waiting there.
        self._left_waiting: dict[str, int] = {}
        # The word on a worktree (keep it, not, or none asked), by its path, of a chat
        # closed while another there had not let it go yet: the last close's decides,
        # whichever release comes last. With the close's place in :attr:`_order`.
        self._word: dict[str, _Word] = {}
        # The reviews of chats closing (gone from ``reviews``) until :meth:`release`,
        # and the order the chats closed in.
        self._closing: dict[int, SessionChanges | None] = {}
        self._closed_at: dict[int, int] = {}
        self._order = itertools.count()
        # One look for worktrees left unclosed at a time: each is told of once.
        self._looking = anyio.Lock()

    def __repr__(self) -> str:
        return f"<Workspaces {len(self._made)} worktrees>"

    async def choose(
        self,
        chat_id: int,
        agent_config: AgentConfig,
        cwd: str,
        *,
        cwd_given: bool = False,
        roots: Sequence[str] = (),
        worktree: bool = False,
        like: Chat | None = None,
        within: Chat | None = None,
    ) -> Workspace:
        """The workspace of new chat ``chat_id``: in ``cwd`` when the user gave it
        (``cwd_given``), else in the agent's ``cwd`` option, else in ``cwd`` (Neovim's);
        with the configured roots and ``roots``; in a new worktree of ``cwd``'s git
        work tree with ``worktree``. ``like``: a chat whose workspace it shares (a fork,
        a handover), worktree included. ``within``: a worktree chat a session was
        resumed from (its list): the chat works in its worktree, with ``roots`` (the
        session's, as the agent listed it), not the listing chat's.

        Raises:
            WorkspaceRefused: the directory or a root is not one (a root not
                absolute); no worktree can be made (git's message).
        """
        if like is not None:
            theirs = like.workspace
            return Workspace(theirs.cwd, list(theirs.roots), theirs.worktree)
        if within is not None:
            theirs = within.workspace
            chosen = self._roots(agent_config, roots, theirs.cwd)
            return Workspace(theirs.cwd, chosen, theirs.worktree)
        cwd = chat_cwd(agent_config, cwd, cwd_given=cwd_given)
        if not os.path.isdir(cwd):
            option = " (the agent's cwd option)" if agent_config.cwd and not cwd_given else ""
            raise WorkspaceRefused(f"cannot work in {cwd!r}{option}: no such directory")
        chosen = self._roots(agent_config, roots, cwd)
        if not worktree:
            return Workspace(cwd, chosen)
        from acp_nvim.client.services.worktrees import WorktreeError, hold, make_worktree

        try:
            made, where = await anyio.to_thread.run_sync(
                make_worktree, cwd, str(chat_id), self.home
            )
        except WorktreeError as err:
            raise WorkspaceRefused(str(err)) from None
        hold(made)
        self._made[chat_id] = made
        await self.tell_left_unclosed()  # a Neovim may have ended since the last look
        return Workspace(where, chosen, made)

    @property
    def home(self) -> str:
        """Where worktree chats' worktrees are made."""
        from acp_nvim.client.services.worktrees import worktrees_home

        return worktrees_home(self.ctx.state_dir or tempfile.gettempdir())

    async def tell_left_unclosed(self) -> None:
        """Tell once of each worktree whose chats' Neovims all ended without closing
        it (killed outright): when the host starts (the first chat, or :AcpChat after
        setup), and as a worktree chat opens. A look at a few small files each, in a
        worker thread."""
        from acp_nvim.client.services.worktrees import left_unclosed

        async with self._looking:
            found = await anyio.to_thread.run_sync(left_unclosed, self.home)
        # One a chat reopened here meanwhile went on in is no longer left.
        ours = {worktree.path for worktree in self._made.values()}
        for left in found:
            if left.path in ours:
                continue
            self.ctx.editor.notify(
                f"the worktree {left.path} (branch {left.branch or 'none'}) of {left.project}"
                " was left by a Neovim that ended without closing its chat: reopen that chat"
                f" from the history to go on there, or remove it ({left.removal})",
                "warn",
            )

    def _roots(self, agent_config: AgentConfig, roots: Sequence[str], cwd: str) -> list[str]:
        """The configured roots and ``roots``, once each, without ``cwd``.

        Raises:
            WorkspaceRefused: a root is not an absolute directory.
        """
        chosen = self.ctx.config.agent_roots(agent_config)
        for raw in roots:
            try:
                chosen.append(workspace_root(raw))
            except ConfigError as err:
                raise WorkspaceRefused(f"root {err}") from None
        return [root for root in dict.fromkeys(chosen) if root != cwd]

    def reopened(
        self, chat_id: int, cwd: str, roots: list[str], stored: KeptWorktree | None, here: str
    ) -> tuple[Workspace, str | None]:
        """The workspace of a stored chat reopened as ``chat_id``: its worktree while
        that is kept (``stored``: what the history holds of it), which the chat then
        answers for as the chat that made it did; else ``cwd``, the user's directory,
        and when its worktree is gone, a line saying the chat goes on there. A ``cwd``
        gone too (moved, removed) gives way to ``here`` (Neovim's directory), and
        the line says so: else the conversation could go on nowhere."""
        from acp_nvim.client.services.worktrees import hold, still_there

        if stored is not None and still_there(stored.worktree) and os.path.isdir(stored.cwd):
            hold(stored.worktree)
            self._made[chat_id] = stored.worktree
            return Workspace(stored.cwd, roots, stored.worktree), None
        where = cwd if os.path.isdir(cwd) else here
        if stored is not None:
            worktree = stored.worktree
            gone = (
                f"*The worktree this chat worked in ({worktree.path}, branch `{worktree.branch}`)"
                f" is gone: it goes on in your directory `{where}`, on your own files.*"
            )
        elif where != cwd:
            gone = (
                f"*The directory this chat worked in (`{cwd}`) is gone:"
                f" it goes on in `{where}`.*"
            )
        else:
            gone = None
        return Workspace(where, roots), gone

    def root(self, chat_id: int, action: str, path: str) -> None:
        """Add a workspace root to chat ``chat_id`` or remove one (:AcpRoot): the
        access policy, the review's scan, completion and the editor tools follow at
        once; the agent hears of it with the session's next load or resume."""
        editor, chat = self.ctx.editor, self.ctx.chats.get(chat_id)
        if chat is None:
            editor.notify("no such chat", "warn")
            return
        if action not in ("add", "remove"):
            raise ValueError(f"unknown root action {action!r}")
        workspace, agent = chat.workspace, self.agents.get(chat_id)
        if action == "remove":
            root = os.path.normpath(os.path.expanduser(path))
            if root not in workspace.roots:
                editor.notify(f"{path} is not a root of this chat", "warn")
                return
            workspace.roots.remove(root)
        else:
            try:
                root = workspace_root(path)
            except ConfigError as err:
                editor.notify(f"root {err}")
                return
            if root in workspace.dirs:
                editor.notify(f"{path} is already a directory of this chat", "info")
                return
            workspace.roots.append(root)
        chat.on_info(roots=list(workspace.roots))
        done = "Added" if action == "add" else "Removed"
        if agent is not None and agent.takes_roots:
            chat.info(
                f"*{done} the workspace root `{root}`: the agent is told when its session "
                "is resumed next (:AcpRestart).*"
            )
            return
        chat.info(f"*{done} the workspace root `{root}`.*")
        if action == "add" and agent is not None:
            from acp_nvim.client.agent.sessions import untold_roots

            untold_roots(chat)

    async def work_of(self, chat_id: int) -> str:
        """The work waiting in chat ``chat_id``'s worktree as :func:`waiting_work` words
        it ("" for none, or for another chat): closing the chat asks first about it."""
        chat = self.ctx.chats.get(chat_id)
        worktree = None if chat is None else chat.workspace.worktree
        if worktree is None:
            return ""
        review = self.reviews.get(chat_id)
        # With those an earlier chat in it left (or leaves: its close under way), as
        # the close's notice counts them.
        left = self._left_waiting.get(worktree.path, 0) + sum(
            waiting_hunks(r) for r in self._closing.values() if _worktree_of(r) is worktree
        )
        hunks = hunks_in(worktree, review, left)
        return waiting_work(hunks, *await modes_waiting(worktree, review))

    async def answer_work(self, token: int, chat_id: int) -> None:
        """Answer Lua's ask ``token`` with :meth:`work_of` (a reply item), from the
        loop: the pynvim thread, which sends what every chat draws, never waits for git."""
        self.ctx.editor.reply(token, await self.work_of(chat_id))

    def closing(self, chat_id: int, review: SessionChanges | None) -> None:
        """Chat ``chat_id`` is closing, its review ``review`` gone from ``reviews``:
        until :meth:`release`, a quit (:meth:`aclose`) reads what waits in its
        worktree there. It saw nothing waiting, and removed the worktree the user
        had just said to keep, with the agent's work."""
        self._closing[chat_id] = review
        self._closed_at[chat_id] = next(self._order)

    async def release(
        self,
        chat: Chat,
        review: SessionChanges | None,
        keep: bool | None = None,
        *,
        modes_looked: bool = False,
    ) -> None:
        """``chat`` (whose review was ``review``) closed: the worktree it answers for
        goes unless another chat works in it (that one answers for it then) or
        ``keep``. Without the user's word (``keep`` None) a worktree that holds work
        (hunks waiting, execute bits changed, commits) stays, and the user is told
        where; ``modes_looked``: the execute bits were looked at as the close asked
        (:meth:`work_of`, none found), not again."""
        self._closing.pop(chat.id, None)
        worktree, answering = chat.workspace.worktree, self._made.pop(chat.id, None)
        at = self._closed_at.pop(chat.id, next(self._order))
        if worktree is None:
            return
        word = _Word(at, keep, worktree, review, modes_looked)
        # Equal, not the same: a chat reopened from the history holds its own copy.
        # And those closing there whose agent is still ending: the last to let it go
        # decides (an earlier one's close went on after the later one's).
        others = [c.workspace.worktree for c in self.ctx.chats.values()]
        others += [_worktree_of(r) for r in self._closing.values()]
        ids = [*self.ctx.chats, *self._closing]
        there = [(i, w) for i, w in zip(ids, others, strict=True) if w == worktree]
        if there:
            # The hunks it leaves waiting are work the last chat's review no longer
            # lists: a fork's or a hand-over's (the same worktree) lists none of them;
            # a reopened chat's lists those its stored turns left.
            if any(w is worktree for _, w in there):
                left = self._left_waiting
                left[worktree.path] = left.get(worktree.path, 0) + waiting_hunks(review)
                self._tell_left(chat.id, worktree, waiting_hunks(review), [i for i, _ in there])
            # A close after this one (of a chat reopened as this one's agent ended)
            # keeps its word, none asked included: the user gave it later.
            self._word[worktree.path] = max(self._word.get(worktree.path, word), word, key=_at)
            if answering is not None:
                self._made[there[0][0]] = answering
            return
        decided = max(self._word.pop(worktree.path, word), word, key=_at)
        if decided.worktree is not worktree:
            # A chat reopened from the history (its own copy of the worktree) closed
            # later: its review, not this stale one, lists what waits there.
            review, modes_looked = decided.review, decided.modes_looked
        elif decided is not word:
            modes_looked = False  # a fork's close looked, with its review: not this one
        keep = decided.keep
        if answering is not None:
            await self._remove(answering, review, keep, modes_looked=modes_looked)

    def _tell_left(self, chat_id: int, worktree: Worktree, hunks: int, others: list[int]) -> None:
        """Closed chat ``chat_id`` left ``hunks`` waiting in ``worktree``, where chats
        ``others`` work on: no review lists them now (each chat's lists its own
        agent's), so its review's "nothing of it waits" would hide them. Say where
        they are and when they are asked about."""
        if not hunks or not os.path.isdir(worktree.path):
            return
        what = "1 hunk" if hunks == 1 else f"{hunks} hunks"
        stay = "stays" if hunks == 1 else "stay"
        chats = ", ".join(f"#{other}" for other in others)
        self.ctx.editor.notify(
            f"{what} of closed chat #{chat_id} {stay} unreviewed in the worktree "
            f"{worktree.path} (branch {worktree.branch}), where chat {chats} works:"
            " the last chat there to close asks about them",
            "warn",
        )

    async def _remove(
        self,
        worktree: Worktree,
        review: SessionChanges | None,
        keep: bool | None,
        *,
        modes_looked: bool = False,
        quiet: bool = False,
    ) -> None:
        """Remove ``worktree`` as :meth:`release` says; ``quiet``: tell the user nothing
        (Neovim is closing)."""
        from acp_nvim.client.services.worktrees import (
            WorktreeError,
            holds_commits,
            let_go,
            remove_worktree,
        )

        def notify(message: str, level: Literal["warn", "info", "error"] = "error") -> None:
            if not quiet:
                self.ctx.editor.notify(message, level)

        where = f"the worktree {worktree.path} (branch {worktree.branch})"
        left = self._left_waiting.pop(worktree.path, 0)
        if await anyio.to_thread.run_sync(let_go, worktree):
            # Reopened from the history in two Neovims: the last to leave decides.
            notify(f"kept {where}: a chat of another Neovim works in it", "info")
            return
        if keep is None:
            modes = ([], "") if modes_looked else await modes_waiting(worktree, review)
            if what := waiting_work(hunks_in(worktree, review, left), *modes):
                keep_why = f"{what} in it"
            elif await anyio.to_thread.run_sync(holds_commits, worktree):
                keep_why = "the agent committed on its branch"
            else:
                keep_why = ""
            if keep_why:
                notify(f"kept {where}: {keep_why}", "warn")
                return
        elif keep:
            notify(f"kept {where}", "info")
            return
        try:
            await anyio.to_thread.run_sync(remove_worktree, worktree)
        except WorktreeError as err:
            notify(str(err))
            return
        if quiet:
            return
        # Windows and buffers on its files would write them back into a directory
        # that is gone (E212); a buffer with unsaved edits is the user's to save.
        kept = await self.ctx.editor.drop_buffers_under(worktree.path)
        if kept:
            names = ", ".join(os.path.relpath(path, worktree.path) for path in kept)
            notify(f"removed {where}; its files' unsaved edits stay in buffers: {names}", "warn")

    async def aclose(self) -> None:
        """Neovim is closing: the worktrees that hold no work go (the others stay)."""
        made, self._made = self._made, {}
        for chat_id, worktree in made.items():
            review = self.reviews.get(chat_id, self._closing.get(chat_id))
            await self._remove(worktree, review, None, quiet=True)


class _Word(NamedTuple):
    """What a close said of its chat's ``worktree``: ``at`` its place among the
    closes; ``keep``, ``review``, ``modes_looked`` as :meth:`Workspaces.release` takes
    them."""

    at: int
    keep: bool | None
    worktree: Worktree
    review: SessionChanges | None
    modes_looked: bool


def _at(word: _Word) -> int:
    return word.at


def waiting_hunks(review: SessionChanges | None) -> int:
    """How many hunks of ``review`` wait in its chat's worktree (not yet brought
    into the user's files, nor dropped)."""
    from acp_nvim.client.services.worktree_changes import WorktreeChanges

    return review.waiting() if isinstance(review, WorktreeChanges) else 0


def _worktree_of(review: SessionChanges | None) -> Worktree | None:
    """The worktree whose changes ``review`` lists; None for a chat in the user's files."""
    from acp_nvim.client.services.worktree_changes import WorktreeChanges

    return review.worktree if isinstance(review, WorktreeChanges) else None


def hunks_in(worktree: Worktree, review: SessionChanges | None, left: int) -> int:
    """The hunks of ``review``, and ``left`` by chats closed before, that wait in
    ``worktree``: none once its directory is gone (the user removed it, and them)."""
    return waiting_hunks(review) + left if os.path.isdir(worktree.path) else 0


def waiting_work(hunks: int, modes: Sequence[str], unchecked: str = "") -> str:
    """``hunks`` waiting in a worktree and the files ``modes`` whose execute bit the
    agent changed alone, as closing its chat asks about them and a worktree kept
    without asking is noticed: both named where both wait ("" where neither).
    ``unchecked``: why git could not look for such bits, said as work (not knowing
    is not "none changed")."""
    what = ["1 hunk waits" if hunks == 1 else f"{hunks} hunks wait"] if hunks else []
    if modes:
        what.append(f"the agent changed the execute bit of {', '.join(modes)}")
    if unchecked:
        what.append(f"the execute bits could not be checked ({unchecked})")
    return " and ".join(what)


async def modes_waiting(
    worktree: Worktree, review: SessionChanges | None
) -> tuple[list[str], str]:
    """The user's files (named from the project's top) whose execute bit the agent
    changed alone in ``worktree`` (`chmod +x`, no text changed) and that have not
    taken it: work no hunk lists. With why git could not tell ("" where it could)."""
    from acp_nvim.client.services.git import GitError
    from acp_nvim.client.services.worktree_changes import WorktreeChanges, mode_changes

    rejected = review.rejected() if isinstance(review, WorktreeChanges) else set()
    try:
        found = await anyio.to_thread.run_sync(mode_changes, worktree, rejected)
    except GitError as err:
        return [], str(err)
    return [os.path.relpath(path, worktree.project) for path in found], ""
