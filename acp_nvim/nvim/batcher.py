"""What the worker sends to Lua, queued in order and sent as batches.

NvimEditor (:mod:`.editor`) queues through a :class:`Batcher`: render ops,
events and notices from the worker are queued in order and sent to
Lua as batches (``exec_lua`` of ``require('acp.host').apply``), each a request
that returns once Lua applied it, at most :data:`IN_FLIGHT` at a time
(doc/decisions/0025):

- an op queued while Neovim has nothing of ours to apply goes at once (the
  leading edge: the last byte of a stream is drawn one round trip after it was
  read);
- what is queued while batches are in flight waits and leaves as the next batch,
  consecutive appends to one block joined: the batches grow as Neovim falls
  behind, never the queue of calls in front of other clients; two in flight keep
  Neovim from idling between batches while a round trip completes;
- a batch holds at most ``budget`` units of estimated Lua work (a line
  :data:`LINE_COST`, an op :data:`OP_COST`), so no batch holds Neovim's loop for
  long: a long append or block is cut at a line end, a long list of slash
  commands into slices (so that no msgpack packing holds the GIL long either), the
  rest goes next; a single bigger op that cannot be cut (a tool call's block) goes
  alone.

The queue is shared by the worker (which adds) and the pynvim thread (which
sends), under one lock. A call into Lua waits its turn behind it
(:meth:`Batcher.after_queued`), so Lua sees what was queued before the call.
"""

from __future__ import annotations

__all__ = [
    "BATCH_BUDGET",
    "IN_FLIGHT",
    "LINE_COST",
    "OP_COST",
    "BaselineItem",
    "BatchItem",
    "Batcher",
    "EventItem",
    "NotifyItem",
    "RenderItem",
    "ReplyItem",
    "ReviewItem",
]

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypedDict

import anyio
import anyio.from_thread
import anyio.lowlevel
import pynvim

from acp_nvim.client.editor import (
    AppendOp,
    BlockOp,
    EditorError,
    Event,
    MoreCommandsOp,
    RenderOp,
)

log = logging.getLogger("acp_nvim")

_APPLY = "require('acp.host').apply(...)"

# Estimated Lua work, in microseconds on this 2-core machine (bench "longest
# batch", doc/performance.md): a transcript line LINE_COST (Neovim inserting it,
# its fold level and wrap: 2-8 µs when quiet, the rest is room for a loaded machine
# and for Lua's collector finishing a cycle in the batch), an op, event or notice
# OP_COST more. A batch holds at most BATCH_BUDGET: ~3 ms of Neovim's loop.
LINE_COST = 10
OP_COST = 50
BATCH_BUDGET = 3000
# A turn an uncut op puts back: Lua holds its lines, so their number is not known
# here; a hundred lines' worth, so that a batch puts back two turns (a rewound
# 100k-line chat's 161 turns in one batch held Neovim 0.14-0.24 s).
UNCUT_TURN_COST = 100 * LINE_COST
# What pynvim and msgpack raise for a value they cannot pack (an int past 64 bits,
# an unknown type, nesting past their limits) before anything is written.
_UNPACKABLE = (OverflowError, TypeError, ValueError, RecursionError)
# Batches sent and not yet applied, at most: a second one waits in Neovim's queue
# while the first is applied and acknowledged (1,000 tool calls: 860 → 680 ms).
IN_FLIGHT = 2


def _soon(nvim: pynvim.Nvim, fn: Callable[[], None]) -> None:
    """Run ``fn`` on the pynvim thread, in a greenlet of its own (it may make requests).

    What ``Nvim.async_call`` does, without formatting the caller's stack on every
    call for an error message (~120 µs, the source files stat-ed: one call per read
    of a stream); an error is logged here instead.

    The one place acp_nvim reaches into pynvim's privates (``Nvim._session``, whose
    ``threadsafe_call`` async_call itself uses): tests/unit/test_pynvim_private.py
    fails when a pynvim release changes what this relies on.
    """

    def run() -> None:
        try:
            fn()
        except Exception:
            log.exception("a call on the pynvim thread failed")

    nvim._session.threadsafe_call(run)


# -- What goes to Lua: each call of ``require('acp.host').apply`` takes a list of these
# items, in order, each a map whose ``kind`` names the handler of lua/acp/host/init.lua's
# dispatch table (tests/nvim/test_contract.py holds the two lists together).


class RenderItem(TypedDict):
    """Render ops for chat ``chat``, in order (lua/acp/chat/init.lua draws them)."""

    kind: Literal["render"]
    chat: int
    ops: list[RenderOp]


class EventItem(TypedDict):
    """Fire the public ``User`` event ``name`` with ``data``."""

    kind: Literal["event"]
    name: Event
    data: dict[str, Any]


class NotifyItem(TypedDict):
    """Tell the user ``message`` (``acp:`` prefixed) at ``level``."""

    kind: Literal["notify"]
    message: str
    level: str


class ReviewItem(TypedDict):
    """The review state of chat ``chat``, whole (``Editor.review``; lua/acp/review)."""

    kind: Literal["review"]
    chat: int
    summary: dict[str, Any]


class BaselineItem(TypedDict):
    """A file's text before a turn of chat ``chat`` (``Editor.baseline``), for :AcpDiff."""

    kind: Literal["baseline"]
    chat: int
    baseline: dict[str, Any]


class ReplyItem(TypedDict):
    """The answer to Lua's call ``token`` (``acp.host.call``): ``result``, or ``error``."""

    kind: Literal["reply"]
    token: int
    result: Any
    error: str | None


# The items that are not a chat's render ops: queued as they come, each costed whole.
_Plain = EventItem | NotifyItem | ReviewItem | BaselineItem | ReplyItem
BatchItem = RenderItem | _Plain


class _Append:
    """A queued append op: its text in parts (joined when sent), their newlines counted."""

    __slots__ = ("counts", "id", "lines", "parts")

    def __init__(self, block: str, parts: list[str], counts: list[int] | None = None) -> None:
        self.id = block
        self.parts = parts
        self.counts = counts if counts is not None else [part.count("\n") for part in parts]
        self.lines = sum(self.counts)

    def add(self, text: str) -> None:
        count = text.count("\n")
        self.parts.append(text)
        self.counts.append(count)
        self.lines += count

    def cut(self, count: int) -> tuple[_Append, _Append] | None:
        """Its first ``count`` lines (ending with the last one's newline) and the rest;
        None when that is all it has. The parts before the cut go whole, the ones
        after it stay as they are: a long stream's backlog is not copied again at
        each batch."""
        if self.lines <= count:
            return None
        whole = 0  # parts taken whole
        while self.counts[whole] < count:
            count -= self.counts[whole]
            whole += 1
        pieces = self.parts[whole].split("\n", count)
        head = [*self.parts[:whole], "\n".join(pieces[:count]) + "\n"]
        rest = [pieces[count], *self.parts[whole + 1 :]]
        return (
            _Append(self.id, head, [*self.counts[:whole], count]),
            _Append(self.id, rest, [self.counts[whole] - count, *self.counts[whole + 1 :]]),
        )

    def op(self) -> AppendOp:
        return {"op": "append", "id": self.id, "text": "".join(self.parts)}


_Op = RenderOp | _Append


class _Render:
    """Queued render ops of one chat, sent as a :class:`RenderItem`."""

    __slots__ = ("chat", "ops")

    def __init__(self, chat: int, ops: list[_Op]) -> None:
        self.chat = chat
        self.ops = ops

    def item(self) -> RenderItem:
        ops = [op.op() if isinstance(op, _Append) else op for op in self.ops]
        return {"kind": "render", "chat": self.chat, "ops": ops}


_Queued = _Render | _Plain


def _review_of(pending: list[_Queued], chat: int) -> int | None:
    """Where in ``pending`` a review state of ``chat`` waits, if one does."""
    for i, item in enumerate(pending):
        if not isinstance(item, _Render) and item["kind"] == "review" and item["chat"] == chat:
            return i
    return None


def _cost(item: _Plain) -> int:
    """Estimated Lua work of a queued non-render item."""
    if item["kind"] == "review":
        return OP_COST * (1 + len(item["summary"].get("files", ())))
    if item["kind"] == "baseline":
        return OP_COST + LINE_COST * len(item["baseline"].get("lines", ()))
    if item["kind"] == "reply" and isinstance(item["result"], str):
        # An export's Markdown: Lua opens a buffer and fills its first 5,000 lines
        # from it (the rest in later loop turns), a batch of its own.
        return BATCH_BUDGET
    return OP_COST


def _op_cost(op: _Op) -> int:
    if isinstance(op, _Append):
        return OP_COST + LINE_COST * op.lines
    if op["op"] == "block":
        return OP_COST + LINE_COST * len(op["lines"])
    if op["op"] == "status" or op["op"] == "more_commands":
        return OP_COST + LINE_COST * len(op.get("commands") or ())
    if op["op"] == "uncut":
        return OP_COST + UNCUT_TURN_COST * len(op["turns"])
    return OP_COST


def _split(op: _Op, room: int) -> tuple[_Op, _Op] | None:
    """``op`` as a head that fits in ``room`` units and the rest: a long append cut
    at a line end into two, a block into its first lines and an append of the others,
    a list of slash commands into its first commands and a ``more_commands`` op, an
    uncut op into its first turns and the others. None when it cannot be cut there
    (a tool call's block)."""
    if isinstance(op, dict) and op["op"] == "uncut":
        turns = op["turns"]
        fit = (room - OP_COST) // UNCUT_TURN_COST
        if fit < 1 or len(turns) <= fit:
            return None
        return {"op": "uncut", "turns": turns[:fit]}, {"op": "uncut", "turns": turns[fit:]}
    count = (room - OP_COST) // LINE_COST
    if count < 1:
        return None
    if isinstance(op, _Append):
        return op.cut(count)
    if op["op"] == "status" or op["op"] == "more_commands":
        commands = op.get("commands") or []
        if len(commands) <= count:
            return None
        rest: MoreCommandsOp = {"op": "more_commands", "commands": commands[count:]}
        head = op.copy()
        head["commands"] = commands[:count]
        return head, rest
    if op["op"] != "block" or op["kind"] == "tool" or "start" in op or len(op["lines"]) <= count:
        return None
    # Lua prefixes what is appended to a message (a thought's "> ") itself.
    prefix, lines = op.get("prefix", ""), op["lines"]
    rest_text = "\n" + "\n".join(line[len(prefix) :] for line in lines[count:])
    block: BlockOp = {**op, "lines": lines[:count]}
    return block, _Append(op["id"], [rest_text])


class _Waiter(NamedTuple):
    """A task on the worker's loop waiting for the queue (Batcher._until)."""

    ready: Callable[[], bool]
    done: anyio.Event
    loop: asyncio.AbstractEventLoop


class Batcher:
    """Queues everything for Lua; the pynvim thread sends it (see the module docstring).

    Its methods named as the Editor port's (render, emit ... room) are the port's
    queueing half, which NvimEditor hands out as its own; :meth:`after_queued` is how
    the editor's calls into Lua wait their turn."""

    def __init__(self, nvim: pynvim.Nvim, budget: int = BATCH_BUDGET) -> None:
        self._nvim = nvim
        self._budget = budget
        self._lock = threading.Lock()
        self._pending: list[_Queued] = []
        # Pumps scheduled or running on the pynvim thread (counted under the lock).
        self._pumps = 0
        # Holds not yet released (hold()): no pump starts meanwhile.
        self._holds = 0
        # Who awaits drawn() or room(): until when, and the event to set on its loop.
        self._waiting: list[_Waiter] = []

    def render(self, chat: int, ops: list[RenderOp]) -> None:
        with self._lock:
            for op in ops:
                self._render_one(chat, op)
        self._kick()

    def _render_one(self, chat: int, op: RenderOp) -> None:
        last = self._pending[-1] if self._pending else None
        queued: _Op = op
        if op["op"] == "append":
            if isinstance(last, _Render) and last.chat == chat and last.ops:
                previous = last.ops[-1]
                if isinstance(previous, _Append) and previous.id == op["id"]:
                    previous.add(op["text"])
                    return
            queued = _Append(op["id"], [op["text"]])
        if isinstance(last, _Render) and last.chat == chat:
            last.ops.append(queued)
        else:
            self._pending.append(_Render(chat, [queued]))

    def _queue(self, item: EventItem | NotifyItem | BaselineItem | ReplyItem) -> None:
        with self._lock:
            self._pending.append(item)
        self._kick()

    def _kick(self) -> None:
        """Have the pynvim thread send what is queued, unless IN_FLIGHT pumps are at it
        (each sends one batch at a time, so a pump is a batch in flight) or it is held."""
        with self._lock:
            if self._pumps >= IN_FLIGHT or self._holds or not self._pending:
                return
            self._pumps += 1
        _soon(self._nvim, self._pump)

    def hold(self) -> Callable[[], None]:
        """Wake the pynvim thread for nothing queued from now on until released. A
        woken pynvim thread takes the GIL from the worker at its every system call:
        at a turn start, it made the prompt 0.3-0.4 ms later (decision 0067)."""
        with self._lock:
            self._holds += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            with self._lock:
                self._holds -= 1
            self._kick()

        return release

    async def drawn(self) -> None:
        await self._until(lambda: not self._pending and not self._pumps)

    async def room(self) -> None:
        # Held: nothing is sent until the prompt is written, and so no waiting.
        await self._until(lambda: bool(self._holds) or self._queued_cost() <= self._budget)

    async def _until(self, ready: Callable[[], bool]) -> None:
        """Return once ``ready()`` holds (checked under the lock, and again as each
        batch is taken: _send_queued)."""
        with self._lock:
            if ready():
                return
            waiter = _Waiter(ready, anyio.Event(), asyncio.get_running_loop())
            self._waiting.append(waiter)
        try:
            await waiter.done.wait()
        finally:  # cancelled (a wait with a time limit): no longer waiting
            with self._lock:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)

    def _queued_cost(self) -> int:
        """The estimated Lua work of everything queued (lock held)."""
        return sum(
            sum(map(_op_cost, item.ops)) if isinstance(item, _Render) else _cost(item)
            for item in self._pending
        )

    def emit(self, event: Event, data: dict[str, Any]) -> None:
        self._queue({"kind": "event", "name": event, "data": data})

    def notify(self, message: str, level: str = "error") -> None:
        self._queue({"kind": "notify", "message": message, "level": level})

    def review(self, chat: int, summary: dict[str, Any]) -> None:
        item: ReviewItem = {"kind": "review", "chat": chat, "summary": summary}
        with self._lock:
            # Only the latest state matters: one still queued takes it in its place, so
            # what was queued after it (AcpTurnEnd: "changes() has every file") still
            # comes after a state at least as new.
            at = _review_of(self._pending, chat)
            if at is not None:
                self._pending[at] = item
                return
            self._pending.append(item)
        self._kick()

    def baseline(self, chat: int, data: dict[str, Any]) -> None:
        self._queue({"kind": "baseline", "chat": chat, "baseline": data})

    def reply(self, token: int, result: Any, error: str | None = None) -> None:
        self._queue({"kind": "reply", "token": token, "result": result, "error": error})

    # -- on the pynvim thread

    def _pump(self) -> None:
        """Send batches until the queue is empty, each once the last one was applied."""
        self._send_queued(pump=True)

    def _drain(self) -> None:
        """Send everything queued now (before a call that must see it drawn)."""
        self._send_queued(pump=False)

    def _send_queued(self, *, pump: bool) -> None:
        """Send batches until the queue is empty, waking the waiters (drawn(), room())
        whose condition holds as each batch is taken; a pump counts itself out at the
        end, under the same lock as the empty take."""
        while True:
            with self._lock:
                batch = self._take()
                if not batch and pump:
                    self._pumps -= 1
                ready = self._ready_waiters()
            self._tell(ready)
            if not batch:
                return
            self._send(batch)

    def _ready_waiters(self) -> list[_Waiter]:
        """Take the waiters whose condition now holds (lock held)."""
        if not self._waiting:  # each batch of a stream: nobody waits
            return []
        ready: list[_Waiter] = []
        waiting: list[_Waiter] = []
        for waiter in self._waiting:
            (ready if waiter.ready() else waiting).append(waiter)
        self._waiting = waiting
        return ready

    @staticmethod
    def _tell(ready: list[_Waiter]) -> None:
        """Wake the waiters without waiting for their loop (as Worker.post): the pump
        sends its batch at once. A loop closed meanwhile has nobody left to wake."""
        for waiter in ready:
            with contextlib.suppress(RuntimeError):
                waiter.loop.call_soon_threadsafe(waiter.done.set)

    def _send(self, batch: list[_Queued]) -> None:
        self._apply([i.item() if isinstance(i, _Render) else i for i in batch])

    def _apply(self, items: list[BatchItem]) -> None:
        """Send ``items``. When msgpack cannot pack them (nothing was sent then), they go
        again one by one, a render item op by op: only what cannot be sent is lost."""
        try:
            # A request, not a notification: it returns once Neovim applied the batch.
            self._nvim.exec_lua(_APPLY, items)
        except _UNPACKABLE:
            if len(items) > 1:
                for item in items:
                    self._apply([item])
                return
            [item] = items
            if item["kind"] == "render" and len(item["ops"]) > 1:
                for op in item["ops"]:
                    self._apply([{"kind": "render", "chat": item["chat"], "ops": [op]}])
                return
            log.exception("dropped what msgpack cannot carry to Neovim: %.200r", item)
        except Exception:
            log.exception("a render batch failed in Neovim")

    def _take(self) -> list[_Queued]:
        """The next batch off the queue, within the budget, in order (lock held)."""
        pending, budget = self._pending, self._budget
        batch: list[_Queued] = []
        cost = 0
        while pending:
            item = pending[0]
            if not isinstance(item, _Render):
                item_cost = _cost(item)
                if batch and cost + item_cost > budget:
                    break
                batch.append(pending.pop(0))
                cost += item_cost
                continue
            ops = item.ops
            taken: list[_Op] = []
            while ops:
                op_cost = _op_cost(ops[0])
                if cost + op_cost > budget:
                    split = _split(ops[0], budget - cost)
                    if split is not None:
                        taken.append(split[0])
                        ops[0] = split[1]
                        break
                    if batch or taken:
                        break
                    # A single op bigger than the budget, that cannot be cut: alone.
                taken.append(ops.pop(0))
                cost += op_cost
            if taken:
                batch.append(_Render(item.chat, taken))
            if ops:
                break  # the rest of this item leads the next batch
            pending.pop(0)
        return batch

    async def after_queued(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the pynvim thread (where it may make requests) after
        what is queued was sent; await it.

        Raises:
            EditorError: ``fn`` raised it or an NvimError, or its arguments cannot be
                sent to Neovim.
        """
        done = anyio.Event()
        token = anyio.lowlevel.current_token()
        outcome: dict[str, Any] = {}

        def run() -> None:  # on the pynvim thread
            try:
                self._drain()
                outcome["value"] = fn(*args)
            except (pynvim.NvimError, EditorError) as err:
                outcome["error"] = str(err)
            except _UNPACKABLE as err:
                outcome["error"] = f"cannot be sent to Neovim: {err}"
            finally:
                anyio.from_thread.run_sync(done.set, token=token)

        _soon(self._nvim, run)
        await done.wait()
        if "error" in outcome:
            raise EditorError(outcome["error"])
        return outcome.get("value")
