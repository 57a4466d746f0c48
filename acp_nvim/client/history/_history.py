"""The chat history as the app uses it: which chats are kept, when their changes
are written, reopening, hand-over and fork; its search and export (``History.reader``).

Runs on the worker's loop, except its reader, which reads the file on the calling
thread (_reader).
"""

from __future__ import annotations

__all__ = ["FLUSH_SECONDS", "History", "show_kept_session", "steered_into"]

import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from acp_nvim.client.config import HistoryOptions
from acp_nvim.client.editor import Editor
from acp_nvim.client.history._branches import session_branch, steered
from acp_nvim.client.history._reader import Reader
from acp_nvim.client.history._store import ChatRow, Store, StoredBlock, StoreError
from acp_nvim.client.history._writer import Target, Writer
from acp_nvim.client.tasks import Tasks

if TYPE_CHECKING:
    # A chat's record and its blocks (the chat's model and view, the review's diffs)
    # are imported with the first chat: the host imports this module before it
    # spawns the first agent (doc/performance.md, start-up).
    from acp_nvim.client.history._record import ChatRecord
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.workspace import KeptWorktree

# Seconds a change waits at most before it is written (a turn's end: at once).
FLUSH_SECONDS = 0.5
# A write then waits until Neovim has drawn what is queued, and again QUIET_SECONDS
# later (a burst that came meanwhile is drawn first), DRAWN_SECONDS at most: a long
# message's write (its search index, ~0.1 s of CPU) would take a core from Neovim
# as it draws (decision 0072).
QUIET_SECONDS = 0.25
DRAWN_SECONDS = 5.0
# Seconds a read waits at most for the writer to write what it was handed (one
# attempt: a write it then retries is not waited for).
_WRITTEN_SECONDS = 2.0
# Stored blocks drawn at a time (a screen's worth and more).
_SLICE = 50
# The line before a resumed session's conversation drawn from the history.
_FROM_HISTORY = "#from-history"


class History:
    """Every chat's record, and the thread writing them (started with the first chat kept)."""

    def __init__(self, editor: Editor, tasks: Tasks) -> None:
        self.editor = editor
        self.tasks = tasks
        self.options = HistoryOptions()
        self.state_dir: str | None = None
        self._writer: Writer | None = None
        self._records: dict[int, ChatRecord] = {}  # by chat id
        self._dirty = anyio.Event()
        self._urgent = anyio.Event()
        self._flushing = False
        # Chats past ``max_age_days`` are yet to be forgotten (at the file's first use).
        self._expiry_due = False
        self._expiry = threading.Lock()
        # The file as the calling thread reads it: search, export, the session picker.
        self.reader = Reader(lambda: self.path, self._written, self._expire)

    def __repr__(self) -> str:
        return f"<History {self.path} {len(self._records)} chats>"

    def configure(self, options: HistoryOptions, state_dir: str | None) -> None:
        self.options = options
        if state_dir:
            self.state_dir = state_dir
        self._expiry_due = options.enabled and options.max_age_days is not None

    @property
    def path(self) -> str | None:
        if self.options.path is not None:
            return self.options.path
        if self.state_dir is None:
            return None
        return os.path.join(self.state_dir, "acp", "history.sqlite3")

    def own_files(self) -> frozenset[str]:
        """The history's file and SQLite's files beside it, as real paths: what the
        client writes, which a review never counts as the agent's (``history.path``
        may lie in a project)."""
        if self.path is None:
            return frozenset()
        path = os.path.realpath(self.path)
        return frozenset(path + suffix for suffix in ("", "-wal", "-shm", "-journal"))

    # -- live chats (worker loop) ------------------------------------------------------------

    def attach(self, chat: Chat, cwd: str, *, keep: bool) -> ChatRecord:
        """Follow ``chat`` (``keep``: its agent's chats are kept); its record."""
        from acp_nvim.client.history._record import ChatRecord
        from acp_nvim.client.session import view

        writer = self._writer_now() if keep else None
        target = Target(chat.agent, cwd) if writer is not None else None
        record = ChatRecord(chat, cwd, target, self._wake)
        if target is not None:
            # The chat's id, not the chat: the writer keeps its targets past a close.
            chat_id = chat.id
            target.on_id = lambda history_id: self.editor.render(
                chat_id, [view.status_op(history=history_id)]
            )
            target.on_gone = lambda history_id: self._unkept(
                chat_id, f"history: stored chat {history_id} was deleted in another Neovim;"
            )
        chat.record = record
        self._records[chat.id] = record
        return record

    def _writer_now(self) -> Writer | None:
        """The writer, started on first use; None when the history is off."""
        path = self.path
        if not self.options.enabled or path is None:
            return None
        writer = self._writer
        if writer is None or writer.path != path:
            if writer is not None:
                self._flush()
                writer.close()
            writer = self._writer = Writer(path, self.editor.notify)
            writer.call(self._expire)
            self.tasks.start_soon(self._flush_every, writer)
        return None if writer.failed else writer

    def _expire(self, store: Store) -> None:
        """Forget the chats past ``max_age_days``, once, at the file's first read or
        write (on that thread): before a picker lists one, so a reopening cannot
        start the writer whose expiry then deletes the chat it shows. A chat kept
        here is spared (the option set again while it is open)."""
        with self._expiry:
            days = self.options.max_age_days
            if not self._expiry_due or days is None:
                return
            # A snapshot: the loop's thread adds and removes records meanwhile.
            records = tuple(self._records.values())
            spared = {r.target.id for r in records if r.target is not None and r.target.id}
            worktrees = store.forget_older(days, spared)
            self._expiry_due = False
        _say_left(self.editor, worktrees, self._worktrees_open(records))

    def _wake(self, urgent: bool) -> None:
        self._dirty.set()
        if urgent:
            self._urgent.set()

    async def _flush_every(self, writer: Writer) -> None:
        """Hand the changes to the writer at most every FLUSH_SECONDS, at once at a turn
        end, each time once what is queued for Neovim is drawn (decision 0072)."""
        while self._writer is writer:
            await self._dirty.wait()
            with anyio.move_on_after(FLUSH_SECONDS):
                await self._urgent.wait()
            with anyio.move_on_after(DRAWN_SECONDS):
                await self.editor.drawn()
                await anyio.sleep(QUIET_SECONDS)
                await self.editor.drawn()
            self._dirty, self._urgent = anyio.Event(), anyio.Event()
            self._flush()

    def _flush(self) -> None:
        writer = self._writer
        for record in self._records.values():
            if record.changed and record.target is not None and writer is not None:
                blocks, gone, facts = record.take()
                writer.put(record.target, blocks, facts, record.updated_at, gone=gone)

    def kept(self, chat_id: int) -> bool:
        """Whether chat ``chat_id`` is kept (its agent's chats are, the history is on,
        and it was not deleted from it while open)."""
        record = self._records.get(chat_id)
        return record is not None and record.target is not None and not record.target.forgotten

    def detach(self, chat_id: int, *, keep: bool = True) -> None:
        """The chat closed: its last changes are written, then it is no longer followed.
        Not ``keep``: nothing of it is kept (what was written of it is deleted)."""
        record = self._records.get(chat_id)
        writer, target = self._writer, record.target if record is not None else None
        if not keep and target is not None:
            target.forgotten = True  # the writer drops what comes for it
            if writer is not None:  # on the writer's thread, which gives it its id
                writer.call(lambda store: target.id is None or store.forget(target.id))
        self._flush()
        self._records.pop(chat_id, None)

    def reviewed(self, chat_id: int) -> None:
        """The user accepted or rejected agent changes in the chat."""
        record = self._records.get(chat_id)
        if record is not None:
            record.reviewed()

    async def load(self, history_id: int) -> tuple[ChatRow, list[StoredBlock]] | None:
        """A stored chat and its transcript, read in a thread; None when there is no
        such chat.

        Raises:
            StoreError: the file cannot be read.
        """
        return await anyio.to_thread.run_sync(self.reader.read, history_id)

    def _written(self) -> None:
        """Return once the writer has written what it was handed by now (or failed to,
        or after _WRITTEN_SECONDS): the reader's every read waits for it, on its own
        thread. A chat closed just now (its last changes handed over at the close) was
        read as it was before: exported with its header only, reopened without its
        worktree."""
        writer = self._writer
        if writer is not None:
            writer.written(_WRITTEN_SECONDS)

    async def reopen(
        self, chat: Chat, row: ChatRow, blocks: list[StoredBlock], note: str | None = None
    ) -> None:
        """Show a stored chat in ``chat``, as it was, then ``note`` (drawn, not kept:
        opening a stored chat changes nothing of it); it goes on in the same stored
        chat (its next prompt starts the agent: resumed, loaded, or seeded)."""
        from acp_nvim.client.session import view

        record = self._records[chat.id]
        if record.target is not None:
            record.target.id = row.id
            record.target.top = max((b.seq for b in blocks), default=-1)
        record.created_at, record.updated_at = row.created_at, row.updated_at
        record.name = row.name
        prefix = f"#h{row.id}:"
        shown = record.start_with(blocks, row.branches, row.turns, prefix, written=True)
        chat.session.session_id = row.session_id or ""
        # Each session goes on from its last turn's report (the shown branch's last);
        # the status shows what the shown branch's last turn used, as its end line.
        for branch in reversed(chat.branches.all):
            last = branch.turns[-1] if branch.turns else None
            if last is not None and last.report is not None and last.session_id:
                on = branch is chat.branches.shown
                report = chat.usage.reopened(last.session_id, last.report, shown=on)
                if on:
                    chat.session.usage = report
        usage = chat.usage.status(chat.session.usage)
        if row.title is not None:
            chat.keep_title(row.title)
        await self._draw(chat, shown, prefix)
        if note is not None:
            shown_note = view.notice_op(chat.session.new_id("info"), "info", [note])
            self.editor.render(chat.id, [shown_note])
        # Ready once it shows the whole stored transcript.
        chat.set_state(
            "ready",
            agent=row.agent,
            history=row.id,
            title=row.title,
            name=row.name,
            session_id=row.session_id,
            protocol_version=row.protocol_version,
            **({"usage": usage} if usage else {}),
        )

    @staticmethod
    def worktree_of(row: ChatRow) -> KeptWorktree | None:
        """The worktree a stored worktree chat worked in, and its directory there;
        None for another chat (or a record that does not read)."""
        from acp_nvim.client.history._blocks import kept_worktree

        return kept_worktree(row.worktree)

    def _worktrees_open(self, records: Iterable[ChatRecord] | None = None) -> set[str]:
        """The worktrees the chats open here (or of ``records``) work in: their close
        keeps or removes them."""
        return {
            worktree.path
            for record in (self._records.values() if records is None else records)
            if (worktree := record.chat.workspace.worktree) is not None
        }

    @staticmethod
    def waiting(blocks: list[StoredBlock]) -> list[str]:
        """The user's files whose hunks a stored chat's review left pending."""
        from acp_nvim.client.history._blocks import waiting_files

        return waiting_files(blocks)

    async def _draw(self, chat: Chat, blocks: list[StoredBlock], prefix: str) -> None:
        """Draw stored blocks a slice at a time: the first screen goes to Neovim
        while the rest is made (a 2,000-block chat's ops take ~80 ms to make)."""
        from acp_nvim.client.history._blocks import render_ops

        prompts = self._records[chat.id].prompts
        plans = 0  # the slices before's: numbered on
        for start in range(0, len(blocks), _SLICE):
            part = blocks[start : start + _SLICE]
            ops = render_ops(part, prefix, chat.workspace, prompts, plans)
            plans += sum(block.kind == "plan" for block in part)
            self.editor.render(chat.id, ops)
            await anyio.lowlevel.checkpoint()

    def _named(self, chat: Chat) -> str:
        """``chat`` as the transcript of a chat that continues it names it: by its
        agent and title (``alpha's chat “fix the parser”``), which mean something in
        a saved file or another Neovim, where this Neovim's chat numbers do not."""
        record = self._records.get(chat.id)  # none once it closed meanwhile
        title = record.title if record is not None else chat.session.title
        return f"{chat.agent}'s chat" + (f" “{title}”" if title else "")

    async def hand_over(self, chat: Chat, source: Chat) -> None:
        """``chat`` continues ``source``'s conversation with another agent, as
        :meth:`continue_from` says, under ``source``'s title; the lines before and
        after the conversation say whose the turns are (and when that chat began, if known):
        carried, then its own, the export and the seed say which agent answered. The
        note after says so when the conversation goes on in a session resumed without
        its history shown: the agent handed it does not know what that session held."""
        from acp_nvim.client.history._blocks import date
        from acp_nvim.client.session.chat import UNSEEN_HISTORY

        before = self._records.get(source.id)  # none once it closed meanwhile
        named = self._named(source)
        began = f" (begun {date(before.began)})" if before is not None and before.began else ""
        sessions = {turn.session_id for turn in source.branches.path}
        sessions.add(source.session.session_id)
        lacks = f"; {UNSEEN_HISTORY}" if sessions & source.unseen_history else ""
        note = f"*Handed over from {named} to {chat.agent}: {chat.agent} answers from here{lacks}.*"
        await self.continue_from(chat, source, note, f"{named}{began}")
        title = before.title if before is not None else source.session.title
        if title:
            chat.keep_title(title)

    async def fork(self, chat: Chat, parent: Chat) -> None:
        """``chat`` continues a fork of ``parent``'s session, as :meth:`continue_from`
        says; the line after the conversation names the parent."""
        note = f"*Forked from {self._named(parent)}: from here on, this chat goes its own way.*"
        await self.continue_from(chat, parent, note)

    async def continue_from(
        self, chat: Chat, source: Chat, note: str, handed: str | None = None
    ) -> None:
        """``chat`` continues ``source``'s conversation (handed over to another agent,
        or a fork): shown first (handed over: after the line saying it came from
        ``handed``, the source as named there), then ``note``; its turns are
        ``chat``'s (a rewind, an edit, a seed reach them), kept in its own stored chat;
        ``source``'s other branches are not.
        A hand-over's agent is told it with the first prompt (:meth:`seed`), a fork's
        has it."""
        from acp_nvim.client.history._blocks import CONTINUED, introduced
        from acp_nvim.client.session.view import is_mark

        record, before = self._records[chat.id], self._records.get(source.id)
        # Not the marks where ``source``'s other branches leave: they stay its own.
        blocks = [b for b in before.blocks() if not is_mark(b.key)] if before is not None else []
        if handed is not None:
            blocks = introduced(handed, source.agent, blocks)
        if record.target is not None and before is not None and before.target is not None:
            record.target.parent = before.target.id
        turns = before.base_turns + source.turn if before is not None else source.turn
        await self.carry(chat, blocks, turns, f"#from{source.id}:")
        chat.info(note, name=CONTINUED)

    async def carry(self, chat: Chat, blocks: list[StoredBlock], turns: int, prefix: str) -> None:
        """``chat`` goes on from ``blocks``, a conversation of ``turns`` turns kept
        elsewhere: drawn with ids prefixed by ``prefix``, its turns ``chat``'s, kept
        in ``chat``'s own stored chat."""
        shown = self._records[chat.id].start_with(blocks, None, turns, prefix, written=False)
        await self._draw(chat, shown, prefix)

    def seed(self, chat: Chat, lost: str | None = None, *, unseen: bool = False) -> None:
        """A new session begins for ``chat``: if it shows a conversation (stored, or
        its own before a restart whose resume failed), its first prompt carries it.
        The transcript says so, with why the session it had could not go on
        (``lost``: the agent's error), in one line; ``unseen``: that session was
        resumed without its history shown, which the new one does not know."""
        from acp_nvim.client.session.chat import UNSEEN_HISTORY

        chat.seed = self.carried(chat)
        why = f" ({lost})" if lost else ""
        if chat.seed is not None:
            carried = f"shown here; {UNSEEN_HISTORY}" if unseen else "so far"
            chat.info(
                f"*{chat.agent} starts a new session{why}: the next prompt carries the"
                f" conversation {carried}.*"
            )
        elif lost:
            chat.info(f"*A new session begins{why}{f': {UNSEEN_HISTORY}' if unseen else ''}.*")

    def carried(self, chat: Chat) -> str | None:
        """The conversation ``chat`` shows as Markdown, for a session that does not
        know it: the stored chat's where it shows stored turns (its model holds only
        its own), else its model's; None when nothing was said."""
        from acp_nvim.client.history._blocks import conversation, markdown
        from acp_nvim.client.session import seed

        record = self._records.get(chat.id)
        if record is None or not any(turn.stored for turn in chat.branches.path):
            return seed.markdown(seed.conversation(chat.session))
        return markdown(record.row(), conversation(record.blocks()), diffs=False)

    async def markdown(self, chat_id: int | None, history_id: int | None = None) -> str | None:
        """Stored chat ``history_id``, else live chat ``chat_id``, as Markdown (None:
        no such chat). The live chat's blocks are taken here, on the loop that owns
        them; the Markdown is made in a thread: a long chat's (~0.4 s for 100k lines
        of tool calls with diffs) would hold the loop and every chat's stream. A stored
        chat open here is the live one: its file lags by up to 0.5 s. Raises StoreError."""
        from acp_nvim.client.history._blocks import markdown

        if history_id is None:
            record = self._records.get(chat_id) if chat_id is not None else None
        elif (record := self._open_as(history_id)) is None:
            return await anyio.to_thread.run_sync(self.reader.export, history_id)
        if record is None:
            return None
        return await anyio.to_thread.run_sync(markdown, record.row(), record.blocks())

    def _open_as(self, history_id: int) -> ChatRecord | None:
        """The record of the chat open here that is kept as ``history_id``."""
        for record in self._records.values():
            target = record.target
            if target is not None and target.id == history_id and not target.forgotten:
                return record
        return None

    def forget(self, history_id: int) -> None:
        """Delete a stored chat; a chat open here stops being kept, and says so."""
        for record in self._records.values():
            target = record.target
            if target is not None and target.id == history_id and not target.forgotten:
                target.forgotten = True
                self._unkept(record.chat.id, "history: deleted;")

        busy = self._worktrees_open()

        def forget(store: Store) -> None:
            worktrees = store.forget(history_id)
            if not worktrees:
                self.editor.notify(f"history: no stored chat {history_id}", "warn")
            _say_left(self.editor, worktrees, busy)

        writer = self._writer_now()
        if writer is not None:
            writer.call(forget)
        else:
            self._on_reader(forget)

    def _unkept(self, chat_id: int, why: str) -> None:
        """Open chat ``chat_id``'s stored chat was deleted (``why``): say that the chat
        goes on unkept, and it no longer claims the stored chat's number, which the
        next chat stored may take (SQLite gives the highest id again): opening that
        one from the history went to this chat."""
        from acp_nvim.client.session import view

        self.editor.notify(f"{why} chat #{chat_id} goes on, no longer kept", "info")
        self.editor.render(chat_id, [view.status_op(history=None)])

    def rename(self, history_id: int, name: str | None) -> None:
        """Name stored chat ``history_id`` (empty: it goes by its title); a chat open
        here that it is takes the name too."""
        writer = self._writer_now()
        if writer is not None:
            writer.call(lambda store: store.rename(history_id, name or None))
        else:
            self._on_reader(lambda store: store.rename(history_id, name or None))
        for record in self._records.values():
            if record.target is not None and record.target.id == history_id:
                record.named(name or None)

    def rename_chat(self, chat_id: int, name: str | None) -> None:
        """Name open chat ``chat_id`` (:AcpChats; empty: it goes by its title): its
        stored chat takes the name with its next write."""
        record = self._records.get(chat_id)
        if record is not None:
            record.named(name or None)

    def _on_reader(self, fn: Any) -> None:
        try:
            fn(self.reader.store())
        except StoreError as err:
            self.editor.notify(f"history: {err}")

    async def close(self) -> None:
        """Write what is left (Neovim is closing)."""
        self._flush()
        writer, self._writer = self._writer, None
        if writer is not None:
            await anyio.to_thread.run_sync(writer.close)


async def _kept_session(
    history: History, agent: str, session_id: str
) -> tuple[ChatRow, list[StoredBlock]] | None:
    """The chat kept last that went on in ``agent``'s session ``session_id``, and the
    blocks of its branch that did; None when none did. Raises StoreError."""
    went_on_in = history.reader.went_on_in
    for history_id in await anyio.to_thread.run_sync(went_on_in, agent, session_id):
        found = await history.load(history_id)
        blocks = session_branch(found[0].branches, found[1], session_id) if found else None
        if found is not None and blocks is not None:
            return found[0], blocks
    return None


async def steered_into(history: History, agent: str, session_id: str) -> list[tuple[str, bool]]:
    """The user's messages of ``agent``'s session ``session_id`` as the chat kept last
    that went on in it shows them, each with whether it was steered into a turn: a
    replay of the session draws those as the user's messages, of no turn of their
    own (decision 0088). None known (nor any when the history cannot be read): empty."""
    try:
        found = await _kept_session(history, agent, session_id)
    except StoreError:
        return []
    return steered(found[1]) if found is not None else []


async def show_kept_session(history: History, chat: Chat, session_id: str) -> bool:
    """Draw in ``chat`` what the history kept of its agent's session ``session_id``
    (as :func:`_kept_session` finds it), for a resume that shows none of it: its
    turns become the chat's, as a hand-over's do, after a line saying they come from
    the history. Whether it kept any (none, too, when the history cannot be read)."""
    from acp_nvim.client.history._blocks import date, notice_block
    from acp_nvim.client.session.view import is_mark

    try:
        found = await _kept_session(history, chat.agent, session_id)
    except StoreError:
        return False
    if found is None:
        return False
    row, kept = found
    title = f" “{row.name or row.title}”" if row.name or row.title else ""
    began = f" (begun {date(row.created_at)})" if row.created_at else ""
    line = f"*From the history: {row.agent}'s chat{title}{began}, as this Neovim kept it.*"
    intro = notice_block(_FROM_HISTORY, "info", [line], -1, 0, None)
    intro.node = 0
    # Not the marks where the stored chat's other branches leave (they stay its own),
    # nor its own such line (it was resumed so too): one says where all of it is from.
    blocks = [intro, *(b for b in kept if not is_mark(b.key) and b.key != _FROM_HISTORY)]
    turns = max([row.turns, *(b.node or 0 for b in blocks)])
    await history.carry(chat, blocks, turns, f"#h{row.id}:")
    return True


def _say_left(editor: Editor, worktrees: list[str | None], busy: set[str]) -> None:
    """Name the worktrees that deleted stored chats kept (``worktrees``: their
    records), but those of chats open here (``busy``): nothing reopens them now, and
    removing one unasked could lose work (hunks never decided, commits). On the
    writer's thread, or the loop: it reads a small file or two per worktree."""
    from acp_nvim.client.history._blocks import kept_worktree
    from acp_nvim.client.services.worktrees import still_there

    left = [
        kept.worktree
        for text in worktrees
        if (kept := kept_worktree(text)) is not None
        and kept.worktree.path not in busy
        and still_there(kept.worktree)
    ]
    if left:
        where = ", ".join(f"{w.path} (branch {w.branch})" for w in left)
        editor.notify(
            f"history: the worktrees deleted chats kept stay: {where};"
            " `git worktree remove` them once you do not need them",
            "info",
        )
