"""How NvimEditor hands render ops to Neovim: at once after idle, joined while a
batch is applied, split when over the budget, always in order. A fake Neovim
records each ``exec_lua`` batch; nothing here depends on a clock."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import msgpack
import pytest

from acp_nvim.client.editor import EditorError
from acp_nvim.nvim.batcher import IN_FLIGHT, LINE_COST, OP_COST
from acp_nvim.nvim.editor import NvimEditor


class FakeNvim:
    """Records batches; runs scheduled calls when the test says (or in a thread)."""

    def __init__(self, *, threaded: bool = False) -> None:
        self.threaded = threaded
        self.scheduled: list[Callable[[], None]] = []
        self.calls: list[tuple[str, tuple[Any, ...]]] = []  # every exec_lua, in order
        self.on_apply: Callable[[], None] | None = None
        self._session = self  # pynvim's Session: threadsafe_call

    @property
    def batches(self) -> list[list[dict[str, Any]]]:
        return [args[0] for code, args in self.calls if "acp.host" in code]

    def threadsafe_call(self, fn: Callable[[], None]) -> None:
        if self.threaded:
            threading.Thread(target=fn).start()
        else:
            self.scheduled.append(fn)

    def exec_lua(self, code: str, *args: Any, async_: bool = False) -> Any:
        assert not async_, "a batch is a request: the next one waits for it"
        self.calls.append((code, args))
        if self.on_apply is not None and "acp.host" in code:
            hook, self.on_apply = self.on_apply, None
            hook()  # the worker queues more while Neovim applies this batch
        return None

    def run_scheduled(self) -> None:
        while self.scheduled:
            self.scheduled.pop(0)()


def append(text: str, block: str = "m1") -> dict[str, Any]:
    return {"op": "append", "id": block, "text": text}


def ops_of(batches: list[list[dict[str, Any]]]) -> list[Any]:
    """Every item of every batch in order, render items flattened to their ops, the
    others to their kind and first field."""
    flat: list[Any] = []
    for batch in batches:
        for item in batch:
            flat.extend(item["ops"] if item["kind"] == "render" else [list(item.values())[:2]])
    return flat


def test_a_chunk_after_idle_is_sent_at_once() -> None:
    nvim = FakeNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]
    editor.render(1, [append("hello")])
    assert len(nvim.scheduled) == 1  # handed to the pynvim thread now: no interval
    nvim.run_scheduled()
    assert nvim.batches == [
        [{"kind": "render", "chat": 1, "ops": [{"op": "append", "id": "m1", "text": "hello"}]}]
    ]
    # Idle again: the next chunk goes at once too.
    editor.render(1, [append(" world")])
    nvim.run_scheduled()
    assert ops_of(nvim.batches)[-1]["text"] == " world"


def test_what_comes_while_a_batch_is_applied_leaves_next_joined() -> None:
    nvim = FakeNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]

    def worker_meanwhile() -> None:
        for text in ("b", "c", "d"):
            editor.render(1, [append(text)])
        editor.emit("AcpTurnEnd", {"chat": 1})

    nvim.on_apply = worker_meanwhile
    editor.render(1, [append("a")])
    nvim.run_scheduled()
    first, second = nvim.batches
    assert first == [{"kind": "render", "chat": 1, "ops": [{"op": "append", "id": "m1", "text": "a"}]}]
    assert second == [
        {"kind": "render", "chat": 1, "ops": [{"op": "append", "id": "m1", "text": "bcd"}]},
        {"kind": "event", "name": "AcpTurnEnd", "data": {"chat": 1}},
    ]


def test_at_most_two_batches_are_in_flight() -> None:
    nvim = FakeNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]
    for text in "abcd":
        editor.render(1, [append(text)])
    assert len(nvim.scheduled) == IN_FLIGHT == 2  # the first two go; the rest waits
    nvim.run_scheduled()
    assert [op["text"] for op in ops_of(nvim.batches)] == ["abcd"]
    editor.render(1, [append("e")])
    assert len(nvim.scheduled) == 1  # all applied: the next goes at once


def test_what_is_queued_while_held_goes_when_the_last_hold_is_released() -> None:
    nvim = FakeNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]
    first, second = editor.hold(), editor.hold()
    editor.emit("AcpTurnStart", {"chat": 1})
    editor.render(1, [append("prompt")])
    assert nvim.scheduled == []  # the pynvim thread is not woken
    first()
    first()  # again: no effect
    assert nvim.scheduled == []
    second()
    assert len(nvim.scheduled) == 1
    nvim.run_scheduled()
    assert ops_of(nvim.batches) == [["event", "AcpTurnStart"], append("prompt")]
    editor.render(1, [append("!")])  # released: at once again
    assert len(nvim.scheduled) == 1


def test_a_batch_over_the_budget_is_split_in_order() -> None:
    nvim = FakeNvim()
    budget = OP_COST * 4 + LINE_COST * 20
    editor = NvimEditor(nvim, budget=budget)  # type: ignore[arg-type]
    block = {"op": "block", "id": "t1", "kind": "tool", "lines": [f"row {i}" for i in range(10)]}
    streamed = "".join(f"line {i}\n" for i in range(100)) + "tail"
    editor.render(1, [block])
    for piece in (streamed[i : i + 7] for i in range(0, len(streamed), 7)):
        editor.render(1, [append(piece)])
    editor.emit("AcpTurnEnd", {"chat": 1})
    editor.notify("done", "info")
    nvim.run_scheduled()

    assert len(nvim.batches) >= 3
    flat = ops_of(nvim.batches)
    assert flat[0] == block
    texts = [op["text"] for op in flat if isinstance(op, dict) and op.get("op") == "append"]
    assert "".join(texts) == streamed
    assert all(text.endswith("\n") for text in texts[:-1])  # cut at line ends only
    assert flat[-2:] == [["event", "AcpTurnEnd"], ["notify", "done"]]
    for batch in nvim.batches:
        cost = 0
        for item in batch:
            for op in item["ops"] if item["kind"] == "render" else [item]:
                lines = op.get("lines", []) if isinstance(op, dict) else []
                text = op.get("text", "") if isinstance(op, dict) else ""
                cost += OP_COST + LINE_COST * (len(lines) + text.count("\n"))
        assert cost <= budget


def test_an_op_that_cannot_be_cut_goes_alone() -> None:
    nvim = FakeNvim()
    editor = NvimEditor(nvim, budget=OP_COST * 2)  # type: ignore[arg-type]
    big = {"op": "block", "id": "m1", "kind": "tool", "lines": ["row"] * 500}
    long_line = "x" * 100_000
    editor.render(1, [big, append(long_line), append("\nnext", "m2")])
    nvim.run_scheduled()
    assert ops_of(nvim.batches) == [
        big,
        {"op": "append", "id": "m1", "text": long_line},
        {"op": "append", "id": "m2", "text": "\nnext"},
    ]
    assert len(nvim.batches) == 3


def test_a_lua_call_sees_everything_queued_before_it() -> None:
    nvim = FakeNvim(threaded=True)
    editor = NvimEditor(nvim)  # type: ignore[arg-type]

    async def main() -> None:
        editor.render(1, [append("drawn first")])
        editor.emit("AcpTurnEnd", {"chat": 1})
        await editor.call_lua("return 'the call'")

    anyio.run(main)
    codes = [code for code, _ in nvim.calls]
    assert codes[-1] == "return 'the call'"
    assert ops_of(nvim.batches)[:2] == [
        {"op": "append", "id": "m1", "text": "drawn first"},
        ["event", "AcpTurnEnd"],
    ]


def test_a_newer_review_state_takes_the_queued_ones_place_before_the_turn_end() -> None:
    """AcpTurnEnd promises changes() has every file: a state posted after it (the
    review's watch seeing the turn's own save) must not move the turn's past it."""
    nvim = FakeNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]
    editor.review(1, {"files": ["old"]})
    editor.review(2, {"files": ["other chat"]})
    editor.emit("AcpTurnEnd", {"chat": 1})
    editor.review(1, {"files": ["new"]})
    nvim.run_scheduled()
    assert [(item["kind"], item.get("summary")) for batch in nvim.batches for item in batch] == [
        ("review", {"files": ["new"]}),
        ("review", {"files": ["other chat"]}),
        ("event", None),
    ]


def slow_neovim(*, every: bool = False) -> tuple[FakeNvim, threading.Event, threading.Event]:
    """A threaded fake Neovim that takes its time over the first batch (``every``: each
    batch) until ``resume`` is set; ``applying`` is set once one is being applied."""
    nvim = FakeNvim(threaded=True)
    applying, resume = threading.Event(), threading.Event()

    def slow_apply() -> None:
        if every:
            nvim.on_apply = slow_apply
        applying.set()
        resume.wait(10)

    nvim.on_apply = slow_apply
    return nvim, applying, resume


async def returns_once_resumed(until: Callable[[], Awaitable[None]], resume: threading.Event) -> None:
    """``until()`` still waits while Neovim applies what it holds, and returns once
    Neovim goes on."""
    returned = anyio.Event()

    async def wait() -> None:
        await until()
        returned.set()

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert not returned.is_set()
        resume.set()
        with anyio.fail_after(10):
            await returned.wait()


def test_drawn_returns_once_everything_queued_is_applied() -> None:
    nvim, applying, resume = slow_neovim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]

    async def main() -> None:
        with anyio.fail_after(10):
            await editor.drawn()  # nothing queued: at once
        editor.render(1, [append("a")])
        await anyio.to_thread.run_sync(applying.wait, 10)
        editor.render(1, [append("b")])  # the second batch in flight
        await returns_once_resumed(editor.drawn, resume)  # "a" was still being applied
        assert [op["text"] for op in ops_of(nvim.batches)] == ["a", "b"]

    anyio.run(main)


def test_room_waits_while_more_than_a_batch_is_queued() -> None:
    """The agent's stream is read no faster than Neovim draws it: room() returns once
    what is queued fits in one batch."""
    nvim, applying, resume = slow_neovim(every=True)
    editor = NvimEditor(nvim, budget=OP_COST + LINE_COST * 10)  # type: ignore[arg-type]
    lines = "".join(f"line {i}\n" for i in range(40))

    async def main() -> None:
        with anyio.fail_after(10):
            await editor.room()  # nothing queued
        editor.render(1, [append("first\n")])
        await anyio.to_thread.run_sync(applying.wait, 10)
        released = editor.hold()
        editor.render(1, [append(lines)])  # four batches' worth, queued
        with anyio.fail_after(10):
            await editor.room()  # held: nothing goes until released, so no waiting
        released()
        await returns_once_resumed(editor.room, resume)
        with anyio.fail_after(10):
            await editor.drawn()
        texts = [op["text"] for op in ops_of(nvim.batches)]
        # Each pump is a thread of its own here (pynvim has one): two batches in
        # flight may be recorded in either order.
        assert sorted("".join(texts).splitlines()) == sorted(("first\n" + lines).splitlines())
        assert len(texts) >= 4

    anyio.run(main)


def draw(ops: list[dict[str, Any]]) -> list[str]:
    """What render.lua makes of a block's ops: a block's lines, then appends onto
    its last line, each new line after the block's prefix."""
    lines: list[str] = []
    prefix = ""
    for op in ops:
        if op["op"] == "block":
            lines, prefix = list(op["lines"]), op.get("prefix", "")
        else:
            first, *more = op["text"].split("\n")
            lines[-1] += first
            lines += [prefix + line for line in more]
    return lines


def test_a_long_message_is_split_into_its_first_lines_and_an_append() -> None:
    nvim = FakeNvim()
    editor = NvimEditor(nvim, budget=OP_COST + LINE_COST * 10)  # type: ignore[arg-type]
    thought = {
        "op": "block",
        "id": "t1",
        "kind": "thought",
        "prefix": "> ",
        "lines": ["### Thinking", *(f"> line {i}" for i in range(35)), "> "],
    }
    editor.render(1, [thought])
    nvim.run_scheduled()
    ops = ops_of(nvim.batches)
    assert len(nvim.batches) == 4
    assert ops[0]["op"] == "block" and len(ops[0]["lines"]) == 10
    assert [op["op"] for op in ops[1:]] == ["append"] * 3
    assert draw(ops) == thought["lines"]


def test_a_plan_of_10k_entries_goes_in_slices_the_budget_holds() -> None:
    """Issue 29.7: a plan's block was one op, 10k lines packed and applied at once;
    now it is cut like a message, each batch within the budget, and drawn whole."""
    nvim = FakeNvim()
    budget = OP_COST + LINE_COST * 300
    editor = NvimEditor(nvim, budget=budget)  # type: ignore[arg-type]
    plan = {"op": "block", "id": "#plan:p", "kind": "plan",
            "lines": ["### Plan", *(f"- [ ] step {i}" for i in range(10_000))]}  # fmt: skip
    editor.render(1, [plan])
    nvim.run_scheduled()
    ops = ops_of(nvim.batches)
    assert len(nvim.batches) == len(ops) > 30
    assert draw(ops) == plan["lines"]
    assert all(batch_cost(batch) <= budget for batch in nvim.batches)


def test_10k_slash_commands_go_in_slices_after_the_status_they_begin() -> None:
    """Issue 29.7: 10k commands (10 MB) went in one status op, whose packing held the
    GIL, and so the host's loop, 13-30 ms. Sliced: the status op carries the first
    commands and the other fields, ``more_commands`` ops the rest, in order."""
    nvim = FakeNvim()
    budget = OP_COST + LINE_COST * 300
    editor = NvimEditor(nvim, budget=budget)  # type: ignore[arg-type]
    commands = [{"name": f"c{i}", "description": "d" * 1000} for i in range(10_000)]
    editor.render(1, [{"op": "status", "title": "t", "commands": commands}, append("after")])
    nvim.run_scheduled()
    ops = ops_of(nvim.batches)
    assert ops[0]["op"] == "status" and ops[0]["title"] == "t"
    assert [op["op"] for op in ops[1:-1]] == ["more_commands"] * (len(ops) - 2)
    assert [c for op in ops[:-1] for c in op["commands"]] == commands
    assert ops[-1] == append("after")
    assert len(nvim.batches) > 30
    assert all(batch_cost(batch) <= budget for batch in nvim.batches)


def test_the_turns_a_branch_puts_back_go_two_a_batch_in_order() -> None:
    """Lua holds the lines of a rewind's hidden turns: one uncut op of 161 turns (a
    100k-line chat's) held Neovim 0.14-0.24 s. Sliced: two turns a batch, in order,
    after what came before them."""
    nvim = FakeNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]
    turns = [f"turn {i}" for i in range(161)]
    editor.render(1, [append("before"), {"op": "uncut", "turns": turns}, append("after")])
    nvim.run_scheduled()
    ops = ops_of(nvim.batches)
    assert ops[0] == append("before") and ops[-1] == append("after")
    assert [turn for op in ops[1:-1] for turn in op["turns"]] == turns
    assert max(len(op["turns"]) for op in ops[1:-1]) == 2
    assert len(nvim.batches) >= 81


def test_an_exports_markdown_goes_in_a_batch_of_its_own() -> None:
    """Lua opens a buffer for an export's reply and fills its first 5,000 lines
    from it, however short: nothing else waits in that batch."""
    nvim = FakeNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]
    editor.render(1, [append("before")])
    editor.reply(7, "# chat\n\nhello\n")
    editor.reply(8, None, "history: locked")
    editor.render(1, [append("after")])
    nvim.run_scheduled()
    kinds = [[item["kind"] for item in batch] for batch in nvim.batches]
    assert ["reply"] in kinds
    assert [item for batch in nvim.batches for item in batch if item["kind"] == "reply"] == [
        {"kind": "reply", "token": 7, "result": "# chat\n\nhello\n", "error": None},
        {"kind": "reply", "token": 8, "result": None, "error": "history: locked"},
    ]
    alone = kinds.index(["reply"])
    assert nvim.batches[alone][0]["token"] == 7


def batch_cost(batch: list[dict[str, Any]]) -> int:
    """The budget's units of one batch's render ops: an op, each line and command."""
    return sum(
        OP_COST + LINE_COST * len(op.get("lines") or op.get("commands") or op.get("text", "").split("\n")[1:])
        for item in batch
        for op in item["ops"]
    )


class PackingNvim(FakeNvim):
    """Packs what it is sent as pynvim does, before anything is written."""

    def exec_lua(self, code: str, *args: Any, async_: bool = False) -> Any:
        msgpack.packb(args)
        return super().exec_lua(code, *args, async_=async_)


def test_what_msgpack_cannot_carry_costs_only_itself(caplog: Any) -> None:
    """Issue 29.3: an int past 64 bits failed msgpack and the whole batch was dropped,
    the text queued with it included. Whatever cannot be packed is dropped alone."""
    nvim = PackingNvim()
    editor = NvimEditor(nvim)  # type: ignore[arg-type]
    editor.render(1, [append("before ")])
    nvim.run_scheduled()
    nvim.on_apply = lambda: (
        editor.render(1, [append("text "), {"op": "status", "used": 2**64}, append("after")]),
        editor.emit("AcpTurnEnd", {"chat": 1, "stop_reason": "end_turn"}),
        editor.render(2, [{"op": "status", "kinds": {"a"}}, append("other chat")]),
    )
    editor.render(1, [append("more ")])
    nvim.run_scheduled()
    assert ops_of(nvim.batches) == [
        append("before "),
        append("more "),
        append("text "),
        append("after"),
        ["event", "AcpTurnEnd"],
        append("other chat"),
    ]
    assert [r.getMessage()[:45] for r in caplog.records] == [
        "dropped what msgpack cannot carry to Neovim: "
    ] * 2


def test_a_call_msgpack_cannot_carry_is_an_editor_error() -> None:
    """An MCP tool's argument Neovim cannot be sent is the tool's error, not a bug."""
    editor = NvimEditor(PackingNvim(threaded=True))  # type: ignore[arg-type]

    async def main() -> None:
        with pytest.raises(EditorError, match="cannot be sent to Neovim: Integer value out of range"):
            await editor.call_lua("return ...", 2**64)

    anyio.run(main)
