"""The thread that writes the history file, off Neovim's loop and the worker's.

The worker's loop hands it batches (:meth:`Writer.put`); it joins what piled up
for one chat (a block written twice is written once, the later text), writes each
chat's in one transaction, and keeps a batch that failed (another Neovim holding
the file longer than the busy timeout) to retry it whole, with the calls gathered
with it (a delete, a rename) in their order, telling the user once.
A file that cannot be used at all (damaged, newer, read-only) is reported once,
and then nothing more is kept: the chats go on without history.
"""

from __future__ import annotations

__all__ = ["Writer"]

import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from acp_nvim.client import malloc
from acp_nvim.client.history._store import Store, StoredBlock, StoreError, Written

log = logging.getLogger("acp_nvim")

# Seconds between retries of a failed write: doubled each time, up to the last.
_RETRY = (0.25, 0.5, 1.0, 2.0, 4.0)


class Target:
    """Where one chat's blocks go: its row, made by the writer on first write.

    ``id`` is set on the writer thread (read elsewhere only once set);
    ``forgotten``: the user deleted it while it was kept, nothing more is written;
    ``top``: the last block (seq) this Neovim knows the stored chat holds (written
    here, or there when it was reopened). A block after it is another Neovim's,
    which went on in the chat: this one's turns then go to a chat of their own.
    """

    def __init__(self, agent: str, cwd: str, parent: int | None = None) -> None:
        self.agent = agent
        self.cwd = cwd
        self.parent = parent
        self.id: int | None = None
        self.forgotten = False
        self.top = -1
        # Told the chat's id once it has one, and told when a write finds the stored
        # chat deleted meanwhile (another Neovim deleted it); from the writer thread.
        self.on_id: Callable[[int], None] | None = None
        self.on_gone: Callable[[int], None] | None = None


class _Batch(msgspec.Struct):
    target: Target
    blocks: dict[int, StoredBlock] = msgspec.field(default_factory=dict)
    gone: set[int] = msgspec.field(default_factory=set)
    facts: dict[str, Any] = msgspec.field(default_factory=dict)
    stamp: float | None = None
    done: list[threading.Event] = msgspec.field(default_factory=list)


class Writer:
    """Writes batches to ``path`` on a thread of its own; ``report`` tells the user
    one line (it is called from that thread)."""

    def __init__(self, path: str, report: Callable[[str, str], None]) -> None:
        self.path = path
        self._report = report
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Items queued, and those whose write (or its attempt) ended: a read waits
        # for the second to reach what the first was when it was asked (:meth:`written`).
        self._settled = threading.Condition()
        self._asked = 0
        self._done = 0
        self._thread = threading.Thread(target=self._run, name="acp-history", daemon=True)
        self.failed: str | None = None  # why nothing is kept (the store is unavailable)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<Writer {self.path}{' failed' if self.failed else ''}>"

    def put(
        self,
        target: Target,
        blocks: list[StoredBlock],
        facts: dict[str, Any],
        stamp: float,
        done: threading.Event | None = None,
        *,
        gone: Sequence[int] = (),
    ) -> None:
        """Queue blocks and facts of one chat, and the seqs of its blocks ``gone``
        (``done`` is set once they are written)."""
        self._put(("write", target, blocks, facts, stamp, done, gone))

    def call(self, fn: Callable[[Store], Any]) -> None:
        """Run ``fn(store)`` in order with the writes (forget, rename, expire)."""
        self._put(("call", fn))

    def close(self, timeout: float = 3.0) -> None:
        """Write what is queued, then end the thread (waits at most ``timeout``)."""
        self._put(("close",))
        self._thread.join(timeout)

    def written(self, timeout: float) -> bool:
        """Wait until what was queued by now is written, or its write failed (a
        retry or an unusable file: the file is read as it is), ``timeout`` at most;
        whether it was. On the reading thread: never the loop that queues."""
        with self._settled:
            asked = self._asked
            return self._settled.wait_for(
                lambda: self._done >= asked or self.failed is not None, timeout
            )

    def _put(self, item: tuple[Any, ...]) -> None:
        with self._settled:  # counted in the queue's order
            self._asked += 1
            self._queue.put(item)

    def _settle(self, gathered: int) -> None:
        """The ``gathered`` first items queued were written, or tried."""
        with self._settled:
            self._done = gathered
            self._settled.notify_all()

    def _run(self) -> None:
        _yield_the_cpu()
        try:
            store = Store(self.path)
        except StoreError as err:
            self._unavailable(str(err))
            return
        pending: dict[Target, _Batch] = {}
        calls: list[Callable[[Store], Any]] = []  # after the writes; kept until made
        retry = gathered = 0
        closing = False
        while not closing:
            wait = _RETRY[min(retry, len(_RETRY) - 1)] if retry else None
            closing, taken = self._gather(pending, calls, wait)
            gathered += taken
            try:
                self._write(store, pending)
                while calls:  # one that fails stays, with those after it
                    calls[0](store)
                    del calls[0]
            except StoreError as err:
                if err.unavailable:
                    store.close()
                    self._unavailable(str(err))
                    return
                if not retry:
                    self._report(f"history: cannot write, retrying: {err}", "warn")
                retry += 1
                if closing:
                    log.warning("history: %s; the last changes are lost", err)
                self._settle(gathered)
                continue
            self._settle(gathered)
            if retry:
                self._report("history: written again", "info")
            retry = 0
            malloc.give_back()  # what the write freed (decision 0059)
        store.close()

    def _gather(
        self, pending: dict[Target, _Batch], calls: list[Callable[[Store], Any]], wait: float | None
    ) -> tuple[bool, int]:
        """Everything queued by now (waiting up to ``wait`` for the first) folded into
        ``pending`` and ``calls``; whether a close came, and the items taken. Its own
        frame: what was written is not kept alive while the thread waits for more."""
        closing = False
        try:
            items = [self._queue.get(timeout=wait)]
        except queue.Empty:
            items = []
        while True:  # everything that piled up, joined
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        for item in items:
            if item[0] == "write":
                _, target, blocks, facts, stamp, done, gone = item
                batch = pending.setdefault(target, _Batch(target))
                batch.blocks.update((b.seq, b) for b in blocks)
                for seq in gone:
                    batch.blocks.pop(seq, None)
                batch.gone.update(gone)
                batch.facts.update(facts)
                batch.stamp = stamp
                if done is not None:
                    batch.done.append(done)
            elif item[0] == "call":
                calls.append(item[1])
            else:
                closing = True
        return closing, len(items)

    def _write(self, store: Store, pending: dict[Target, _Batch]) -> None:
        """Write each chat's batch; one written leaves ``pending`` at once."""
        for target, batch in list(pending.items()):
            if target.forgotten:
                del pending[target]
                continue
            if target.id is None:
                target.id = store.new_chat(target.agent, target.cwd, target.parent)
                if target.on_id is not None:
                    target.on_id(target.id)
            blocks = sorted(batch.blocks.values(), key=lambda b: b.seq)
            written = store.write(
                target.id, blocks, batch.facts, batch.stamp, batch.gone, target.top
            )
            if written == "taken":
                written = self._branch_off(store, target, batch, blocks)
            if written == "forgotten":
                target.forgotten = True
                if target.on_gone is not None:
                    target.on_gone(target.id)
            elif blocks:
                target.top = max(target.top, blocks[-1].seq)
            del pending[target]
            for done in batch.done:
                done.set()

    def _branch_off(
        self, store: Store, target: Target, batch: _Batch, blocks: list[StoredBlock]
    ) -> Written:
        """Another Neovim went on in ``target``'s stored chat: this one's changes
        (its own turns, a decision on its review) go to a new stored chat holding
        what the two shared, and the user is told. Facts alone (a status) are not
        written over the other's, only a name given here."""
        assert target.id is not None
        if not blocks and not batch.gone:
            name = batch.facts.get("name", False)
            if name is not False:
                store.rename(target.id, name)
            return "written"
        shared, new = target.id, store.branch_off(target.id, target.top)
        if new is None:
            return "forgotten"
        target.id = new
        if target.on_id is not None:
            target.on_id(new)
        self._report(
            f"history: stored chat {shared} went on in another Neovim: this chat is kept"
            f" as stored chat {new}",
            "info",
        )
        return store.write(new, blocks, batch.facts, batch.stamp, batch.gone)

    def _unavailable(self, why: str) -> None:
        """Nothing can be kept: say so once, then drop what comes."""
        with self._settled:
            self.failed = why
            self._settled.notify_all()
        self._report(f"history off: {why}", "warn")
        while True:
            item = self._queue.get()
            if item[0] == "write" and item[5] is not None:
                item[5].set()
            elif item[0] == "close":
                return


def _yield_the_cpu() -> None:
    """Lower this thread's CPU priority (Linux: per thread) below the host's other
    threads': the worker reading the agent's stream goes first. Neovim starts its
    jobs in a session of their own, so with autogroups on (most desktops) this does
    not weigh against Neovim; waiting until Neovim has drawn what is queued does
    (decision 0072)."""
    thread = threading.get_native_id()
    try:
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(nice + 10, 19))
    except (AttributeError, OSError):
        pass
