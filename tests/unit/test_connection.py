from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import ByteSendStream

from acp_nvim.protocol import (
    Connection,
    ConnectionClosed,
    ProtocolError,
    RequestError,
    default_convert,
)

pytestmark = pytest.mark.anyio

LOGGER = "acp_nvim.protocol"


class Echo(msgspec.Struct):
    text: str
    times: int = 1


class Echoed(msgspec.Struct):
    text: str


class Update(msgspec.Struct):
    n: int


class Options(msgspec.Struct):
    verbose: bool = False


async def echo(p: Echo) -> Echoed:
    return Echoed(p.text * p.times)


# --- two Connections talking -----------------------------------------------------------


async def test_requests_both_directions(connection_pair, serving) -> None:
    a, b = connection_pair()
    a.on_request("echo", Echo, echo)
    b.on_request("echo", Echo, echo)
    async with serving(a, b):
        assert await b.request("echo", Echo("hi", 2), Echoed) == Echoed("hihi")
        assert await a.request("echo", {"text": "yo"}, Echoed) == Echoed("yo")
        raw = await a.request("echo", Echo("raw"))
        assert isinstance(raw, msgspec.Raw)
        assert msgspec.json.decode(raw) == {"text": "raw"}


async def test_concurrent_requests_and_slow_handler(connection_pair, serving) -> None:
    a, b = connection_pair()
    release = anyio.Event()

    async def slow(p: Echo) -> str:
        await release.wait()
        return "slow"

    b.on_request("slow", Echo, slow)
    b.on_request("echo", Echo, echo)
    results: dict[str, Any] = {}
    async with serving(a, b):
        async with anyio.create_task_group() as tg:

            async def call_slow() -> None:
                results["slow"] = await a.request("slow", Echo("x"), str)

            tg.start_soon(call_slow)
            # A long handler must not block later messages.
            assert await a.request("echo", Echo("fast"), Echoed) == Echoed("fast")
            assert "slow" not in results
            release.set()
        assert results["slow"] == "slow"


async def test_notifications_in_order(connection_pair, serving) -> None:
    a, b = connection_pair()
    seen: list[int] = []
    done = anyio.Event()

    async def on_update(u: Update) -> None:
        seen.append(u.n)
        if u.n == 99:
            done.set()

    b.on_notification("session/update", Update, on_update)
    async with serving(a, b):
        for i in range(100):
            await a.notify("session/update", Update(i))
        await done.wait()
    assert seen == list(range(100))


async def test_a_message_is_written_in_the_step_that_sends_it() -> None:
    """With no other send under way, nothing else runs between a send and its write:
    a turn start's prompt does not wait behind every task the loop has ready."""
    order: list[str] = []

    class Recorded(ByteSendStream):
        async def send(self, item: bytes) -> None:
            order.append("written")

        async def send_eof(self) -> None:
            pass

        async def aclose(self) -> None:
            pass

    async def other() -> None:
        order.append("other")

    conn = Connection(None, Recorded())  # type: ignore[arg-type]
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(other)
        await conn.notify("session/cancel", {"sessionId": "s"})
    assert order == ["written", "other"]


async def test_error_codes_and_data(connection_pair, serving) -> None:
    a, b = connection_pair()

    async def needs_auth(p: Echo) -> None:
        raise RequestError(RequestError.AUTH_REQUIRED, "Authentication required", {"m": 1})

    async def missing(p: Echo) -> None:
        raise RequestError.resource_not_found("file:///x")

    b.on_request("auth", Echo, needs_auth)
    b.on_request("missing", Echo, missing)
    async with serving(a, b):
        with pytest.raises(RequestError) as info:
            await a.request("auth", Echo("x"))
        assert (info.value.code, info.value.message, info.value.data) == (
            -32000,
            "Authentication required",
            {"m": 1},
        )
        with pytest.raises(RequestError) as info:
            await a.request("missing", Echo("x"))
        assert info.value.code == RequestError.RESOURCE_NOT_FOUND
        assert info.value.data == {"uri": "file:///x"}


async def test_method_not_found(connection_pair, serving) -> None:
    a, b = connection_pair()
    async with serving(a, b):
        with pytest.raises(RequestError) as info:
            await a.request("foo/bar", {})
    assert info.value.code == -32601
    assert str(info.value) == "-32601 Method not found: foo/bar"


async def test_invalid_params(connection_pair, serving) -> None:
    a, b = connection_pair()
    b.on_request("echo", Echo, echo)
    async with serving(a, b):
        with pytest.raises(RequestError) as info:
            await a.request("echo", {"text": 5})
        assert info.value.code == -32602
        assert "Expected `str`, got `int`" in info.value.message
        with pytest.raises(RequestError) as info:
            await a.request("echo", None)  # params omitted
        assert info.value.code == -32602


async def test_internal_error_logged_with_traceback(connection_pair, serving, caplog) -> None:
    a, b = connection_pair()

    async def broken(p: Echo) -> None:
        raise ValueError("kaput")

    b.on_request("broken", Echo, broken)
    async with serving(a, b):
        with pytest.raises(RequestError) as info:
            await a.request("broken", Echo("x"))
    assert info.value.code == -32603
    assert "kaput" in info.value.message
    records = [r for r in caplog.records if r.name == LOGGER and r.exc_info]
    assert records and records[0].exc_info[0] is ValueError


async def test_unencodable_result_is_internal_error(connection_pair, serving) -> None:
    a, b = connection_pair()

    async def odd(p: Echo) -> object:
        return object()

    b.on_request("odd", Echo, odd)
    async with serving(a, b):
        with pytest.raises(RequestError) as info:
            await a.request("odd", Echo("x"))
    assert info.value.code == -32603


async def test_enc_hook(connection_pair, serving) -> None:
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

    a, b = connection_pair(enc_hook=lambda obj: {"x": obj.x})

    async def point(p: Any) -> Point:
        return Point(p["x"] + 1)

    b.on_request("point", dict, point)
    async with serving(a, b):
        assert await a.request("point", Point(1), dict) == {"x": 2}


async def test_invalid_result_is_protocol_error(connection_pair, serving) -> None:
    a, b = connection_pair()
    b.on_request("echo", Echo, echo)
    async with serving(a, b):
        with pytest.raises(ProtocolError, match="invalid result for echo"):
            await a.request("echo", Echo("x"), int)


async def test_unknown_notification_ignored_and_handler_errors_logged(
    connection_pair, serving, caplog
) -> None:
    a, b = connection_pair()

    async def boom(u: Update) -> None:
        raise RuntimeError("bad handler")

    b.on_notification("boom", Update, boom)
    b.on_request("echo", Echo, echo)
    caplog.set_level(logging.DEBUG, LOGGER)
    async with serving(a, b):
        await a.notify("qwen/notify/session/mode-update", {"mode": "x"})
        await a.notify("boom", Update(1))
        await a.notify("boom", {"n": "not an int"})
        # Still alive, and the notifications above were handled first (in order).
        assert await a.request("echo", Echo("ok"), Echoed) == Echoed("ok")
    messages = [r.getMessage() for r in caplog.records]
    assert any("ignoring notification qwen/notify/session/mode-update" in m for m in messages)
    assert any("notification handler for boom failed" in m for m in messages)
    assert any("invalid params for notification boom" in m for m in messages)


async def test_an_unread_vendor_notification_is_logged_once(
    connection_pair, serving, caplog
) -> None:
    """qwen sends ``qwen/notify/session/mode-update`` at every mode change (beside the
    standard update, or after a ``session/set_mode`` the client asked for): unread,
    it is named in the log once, not once per change."""
    a, b = connection_pair()
    b.on_request("echo", Echo, echo)
    caplog.set_level(logging.DEBUG, LOGGER)
    async with serving(a, b):
        for mode in ("default", "plan", "default"):
            update = {"v": 1, "sessionId": "s1", "currentModeId": mode}
            await a.notify("qwen/notify/session/mode-update", update)
        await a.notify("qwen/notify/session/prompt-suggestion", {"sessionId": "s1"})
        assert await a.request("echo", Echo("ok"), Echoed) == Echoed("ok")
    ignored = [m for r in caplog.records if "ignoring notification" in (m := r.getMessage())]
    assert [m.split()[-3] for m in ignored] == [
        "qwen/notify/session/mode-update",
        "qwen/notify/session/prompt-suggestion",
    ]


async def test_local_cancel_sends_cancel_request(connection_pair, serving) -> None:
    a, b = connection_pair(send_cancel_requests=True)
    started = anyio.Event()
    cancelled = anyio.Event()

    async def wait_forever(p: Echo) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    b.on_request("wait", Echo, wait_forever)
    b.on_request("echo", Echo, echo)
    async with serving(a, b):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await a.request("wait", Echo("x"))

            tg.start_soon(call)
            await started.wait()
            tg.cancel_scope.cancel()
        # b's handler is cancelled by the $/cancel_request; its -32800 reply reaches a
        # after the request is gone and is dropped.
        await cancelled.wait()
        assert await a.request("echo", Echo("after"), Echoed) == Echoed("after")
        assert "0 pending" in repr(a)


async def test_peer_cancel_request_answers_32800(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    started = anyio.Event()

    async def wait_forever(p: Echo) -> None:
        started.set()
        await anyio.sleep_forever()

    conn.on_request("wait", Echo, wait_forever)
    async with serving(conn):
        await peer.send_json(
            {"jsonrpc": "2.0", "id": "s-1", "method": "wait", "params": {"text": "x"}}
        )
        await started.wait()
        assert "1 handling" in repr(conn)
        # Unknown ids and malformed cancels are ignored.
        await peer.send_json({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {}})
        await peer.send_json(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 42}}
        )
        await peer.send_json(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "s-1"}}
        )
        reply = await peer.receive_json()
    assert reply == {
        "jsonrpc": "2.0",
        "id": "s-1",
        "error": {"code": -32800, "message": "Request cancelled"},
    }


async def test_cancel_request_in_same_chunk_as_request(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    conn.on_request("wait", Echo, lambda p: anyio.sleep_forever())
    async with serving(conn):
        # Both lines arrive together: the cancel is read before the handler task runs.
        await peer.send_stream.send(
            b'{"jsonrpc":"2.0","id":3,"method":"wait","params":{"text":""}}\n'
            b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}\n'
        )
        reply = await peer.receive_json()
    assert reply["id"] == 3
    assert reply["error"]["code"] == -32800


async def test_no_cancel_request_by_default(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    async with serving(conn):
        with anyio.CancelScope() as scope:

            async def call() -> None:
                await conn.request("slow", {})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                request = await peer.receive_json()
                scope.cancel()
        assert request["method"] == "slow"
        await conn.notify("next", {})
        assert (await peer.receive_json())["method"] == "next"
        # The late response is dropped quietly.
        await peer.send_json({"jsonrpc": "2.0", "id": request["id"], "result": {}})
        await conn.notify("after", None)
        assert await peer.receive_json() == {"jsonrpc": "2.0", "method": "after"}


async def test_eof_fails_pending_requests(raw_peer) -> None:
    conn, peer = raw_peer()
    errors: list[BaseException] = []
    async with anyio.create_task_group() as tg:
        await tg.start(conn.serve)

        async def call() -> None:
            try:
                await conn.request("x", {})
            except ConnectionClosed as exc:
                errors.append(exc)

        tg.start_soon(call)
        tg.start_soon(call)
        await peer.receive_json()
        await peer.receive_json()
        assert "2 pending" in repr(conn)
        await peer.send_stream.aclose()  # EOF: serve() returns, tg can finish
    assert len(errors) == 2
    assert conn.closed
    assert repr(conn) == "<Connection conn closed, 0 pending>"
    with pytest.raises(ConnectionClosed):
        await conn.request("x", {})
    with pytest.raises(ConnectionClosed):
        await conn.notify("x", {})


async def test_eof_cancels_running_handlers(raw_peer) -> None:
    conn, peer = raw_peer()
    started = anyio.Event()
    cancelled = anyio.Event()

    async def wait_forever(p: Echo) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    conn.on_request("wait", Echo, wait_forever)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.serve)
        await peer.send_json({"jsonrpc": "2.0", "id": 1, "method": "wait", "params": {"text": ""}})
        await started.wait()
        await peer.send_stream.aclose()
    assert cancelled.is_set()


async def test_request_after_aclose(connection_pair, serving) -> None:
    a, b = connection_pair()
    async with serving(a, b):
        await a.aclose()
        assert a.closed
        with pytest.raises(ConnectionClosed, match="closed locally"):
            await a.request("x", {})
        await a.aclose()  # idempotent


async def test_broken_pipe_on_write(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    async with serving(conn):
        await peer.receive_stream.aclose()
        with pytest.raises(ConnectionClosed) as info:
            await conn.notify("x", {})
        assert isinstance(info.value.__cause__, anyio.BrokenResourceError)
        assert conn.closed


# --- framing limits through the connection --------------------------------------------


async def test_70mb_line_rejected_next_message_delivered(scripted, pipe, caplog) -> None:
    chunk = b"x" * 65536
    n_chunks = 70 * 1024 * 1024 // len(chunk)

    def lazy():
        yield b'{"jsonrpc":"2.0","method":"u","params":{"n":"'
        for _ in range(n_chunks):
            yield chunk
        yield b'"}}\n{"jsonrpc":"2.0","method":"u","params":{"n":7}}\n'

    send, _ = pipe()
    conn = Connection(scripted(lazy()), send)
    seen: list[int] = []

    async def on_u(u: Update) -> None:
        seen.append(u.n)

    conn.on_notification("u", Update, on_u)
    await conn.serve()  # returns at EOF, after both lines
    assert seen == [7]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "exceeds the 67108864-byte limit" in errors[0].getMessage()


async def test_564kb_message_accepted(connection_pair, serving) -> None:
    a, b = connection_pair()
    b.on_request("echo", Echo, echo)
    text = "é" * (564 * 1024 // 2)
    async with serving(a, b):
        assert await a.request("echo", Echo(text), Echoed) == Echoed(text)


async def test_big_messages_are_decoded_off_the_loop(connection_pair, serving, monkeypatch) -> None:
    """Issue 29.7: params, results and notifications past OFF_LOOP_BYTES are decoded in
    a worker thread (a 10 MB line held the loop for the whole decode); the rest, and
    the order of everything, as before."""
    from acp_nvim.protocol import connection

    threads: dict[str, list[bool]] = {}

    def convert(raw: Any, type_: Any) -> Any:
        on_loop = threading.current_thread() is threading.main_thread()
        threads.setdefault(type_.__name__, []).append(on_loop)
        return connection.default_convert(raw, type_)

    monkeypatch.setattr(connection, "OFF_LOOP_BYTES", 1000)
    a, b = connection_pair(convert=convert)
    seen: list[str] = []

    async def on_update(u: Update) -> None:
        seen.append(f"update {u.n}")

    b.on_request("echo", Echo, echo)
    b.on_notification("u", Update, on_update)
    async with serving(a, b):
        await a.notify("u", {"n": 1, "pad": "x" * 2000})
        await a.notify("u", {"n": 2})
        assert await a.request("echo", Echo("y" * 2000), Echoed) == Echoed("y" * 2000)
        assert await a.request("echo", Echo("z"), Echoed) == Echoed("z")
    assert seen == ["update 1", "update 2"]
    assert threads == {"Update": [False, True], "Echo": [False, True], "Echoed": [False, True]}


class Nested(msgspec.Struct):
    parts: list[list[int]]
    meta: dict[str, list[int]]


async def test_a_big_batched_notification_is_freed_off_the_loop_and_what_is_kept_stays(
    raw_peer, serving, monkeypatch
) -> None:
    """Issue 29.7: freeing a 17 MB update's objects at once held the loop 20-30 ms; a
    big notification of a batched route is taken apart in a worker thread once handled.
    What the handler kept is not taken apart."""
    from acp_nvim.protocol import connection

    freed_on: list[bool] = []
    free = connection.free_in_pieces

    def spy(values: list[Any], depth: int = 4) -> None:
        freed_on.append(threading.current_thread() is threading.main_thread())
        free(values, depth)

    monkeypatch.setattr(connection, "OFF_LOOP_BYTES", 1000)
    monkeypatch.setattr(connection, "free_in_pieces", spy)
    kept: list[list[int]] = []
    batches: list[list[Nested]] = []
    done = anyio.Event()

    async def updates(batch: list[Nested]) -> None:
        kept.append(batch[0].parts[0])  # the handler keeps one part of the message
        batches.append(batch)  # and the batch itself
        done.set()

    conn, peer = raw_peer()
    conn.on_notifications("nested", Nested, updates)
    params = {"parts": [list(range(300)), list(range(300))], "meta": {"m": [1, 2]}}
    async with serving(conn):
        await peer.send_line(
            msgspec.json.encode({"jsonrpc": "2.0", "method": "nested", "params": params}).decode()
        )
        await done.wait()
        await peer.send_line('{"jsonrpc":"2.0","id":1,"method":"nope"}')
        assert (await peer.receive_json())["id"] == 1  # the line after it was handled
    assert freed_on == [False]
    assert kept == [list(range(300))]
    assert batches[0][0].parts[0] is kept[0] and batches[0][0].meta == {"m": [1, 2]}


def test_free_in_pieces_takes_apart_only_what_nothing_else_holds() -> None:
    from acp_nvim.protocol.connection import free_in_pieces

    shared = [1, 2, 3]
    inner = {"shared": shared, "own": [4, 5]}
    values: list[Any] = [[inner, [6, [7]]], Nested([[8], shared], {"x": [9]})]
    del inner
    free_in_pieces(values)
    assert values == [] and shared == [1, 2, 3]
    held = [[1], [2]]
    values = [held]
    free_in_pieces(values)
    assert values == [] and held == [[1], [2]]


# --- malformed input from a raw peer ---------------------------------------------------


async def test_invalid_json_then_alive(raw_peer, serving, caplog) -> None:
    conn, peer = raw_peer()
    conn.on_request("echo", Echo, echo)
    async with serving(conn):
        await peer.send_line(b'{"jsonrpc": "2.0", "id": 1, "meth')
        reply = await peer.receive_json()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700
        await peer.send_json({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"text": "a"}})
        assert await peer.receive_json() == {"jsonrpc": "2.0", "id": 2, "result": {"text": "a"}}
    assert any("invalid JSON" in r.getMessage() for r in caplog.records)


async def test_a_line_that_is_no_json_is_seen_and_json_that_is_no_message_is_not(
    raw_peer, serving
) -> None:
    seen: list[bytes] = []
    conn, peer = raw_peer(on_not_json=seen.append)
    async with serving(conn):
        await peer.send_line(b"Please log in")
        await peer.receive_json()
        await peer.send_line(b'"a string"')
        await peer.receive_json()
    assert seen == [b"Please log in"]


@pytest.mark.parametrize(
    ("message", "reply_id"),
    [
        (b"5", None),
        (b'"hello"', None),
        (b'{"foo": 1}', None),
        (b'{"jsonrpc": "2.0", "id": 7, "method": 5}', 7),
        (b'{"jsonrpc": "1.0", "id": "q", "method": "echo"}', "q"),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "echo"}', None),
    ],
)
async def test_not_jsonrpc_is_invalid_request(raw_peer, serving, message, reply_id) -> None:
    conn, peer = raw_peer()
    async with serving(conn):
        await peer.send_line(message)
        reply = await peer.receive_json()
    assert reply["id"] == reply_id
    assert reply["error"]["code"] == -32600


async def test_response_id_echoes_string_and_int(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    conn.on_request("echo", Echo, echo)
    async with serving(conn):
        for msg_id in ["abc", 0, -3, ""]:
            await peer.send_json(
                {"jsonrpc": "2.0", "id": msg_id, "method": "echo", "params": {"text": "t"}}
            )
            assert (await peer.receive_json())["id"] == msg_id


async def test_malformed_response_fails_its_request(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    async with serving(conn):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                with pytest.raises(ProtocolError, match="malformed response to x"):
                    await conn.request("x", {})

            tg.start_soon(call)
            request = await peer.receive_json()
            await peer.send_json({"jsonrpc": "2.0", "id": request["id"], "error": "oops"})
        # A response is never answered: the next line we see is our own notification.
        await conn.notify("next", None)
        assert (await peer.receive_json())["method"] == "next"


async def test_unknown_response_id_ignored(raw_peer, serving, caplog) -> None:
    conn, peer = raw_peer(id_start=100)
    async with serving(conn):
        await peer.send_json({"jsonrpc": "2.0", "id": 5, "result": None})
        await peer.send_json({"jsonrpc": "2.0", "id": None, "error": {"code": -32700}})
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                assert await conn.request("x", {}, type(None)) is None

            tg.start_soon(call)
            request = await peer.receive_json()
            assert request["id"] == 100
            await peer.send_json({"jsonrpc": "2.0", "id": 100, "result": None})
    assert any("unknown request id 5" in r.getMessage() for r in caplog.records)


async def test_batched_notifications_arrive_in_runs_and_keep_their_order(raw_peer, serving) -> None:
    seen: list[Any] = []
    done = anyio.Event()

    async def updates(batch: list[Update]) -> None:
        seen.append([u.n for u in batch])
        if batch[-1].n == 5:
            done.set()

    async def other(p: Options) -> None:
        seen.append("other")

    async def echo_seen(p: Echo) -> Echoed:
        seen.append("request")
        return Echoed(p.text)

    conn, peer = raw_peer()
    conn.on_notifications("update", Update, updates)
    conn.on_notification("other", Options, other)
    conn.on_request("echo", Echo, echo_seen)

    def note(method: str, params: dict[str, Any]) -> str:
        return msgspec.json.encode({"jsonrpc": "2.0", "method": method, "params": params}).decode()

    lines = [
        note("update", {"n": 1}),
        note("update", {"n": 2}),
        note("update", {"n": "not a number"}),  # logged and skipped, the run goes on
        note("update", {"n": 3}),
        note("other", {}),
        note("update", {"n": 4}),
        '{"jsonrpc":"2.0","id":7,"method":"echo","params":{"text":"t"}}',
    ]
    async with serving(conn):
        # One write, so one read: the runs are what batching may join.
        await peer.send_line("\n".join(lines))
        assert await peer.receive_json() == {"jsonrpc": "2.0", "id": 7, "result": {"text": "t"}}
        await peer.send_line(note("update", {"n": 5}))
        await done.wait()
    assert seen == [[1, 2, 3], "other", [4], "request", [5]]


async def test_a_read_of_batched_notifications_alone_keeps_runs_and_order(
    raw_peer, serving
) -> None:
    """A stream's read holds nothing but batched notifications (decoded in one call):
    each run of one route is handed over whole, the routes in the order sent."""
    seen: list[Any] = []
    done = anyio.Event()

    async def updates(batch: list[Update]) -> None:
        seen.append([u.n for u in batch])
        if batch[-1].n == 6:
            done.set()

    async def options(batch: list[Options]) -> None:
        seen.append(len(batch))

    conn, peer = raw_peer()
    conn.on_notifications("update", Update, updates)
    conn.on_notifications("options", Options, options)
    lines = [
        msgspec.json.encode({"jsonrpc": "2.0", "method": m, "params": p}).decode()
        for m, p in [("update", {"n": 1}), ("update", {"n": 2}), ("options", {}),
                     ("options", {}), ("update", {"n": 3}), ("update", {"n": 6})]
    ]  # fmt: skip
    async with serving(conn):
        await peer.send_line("\n".join(lines))
        await done.wait()
    assert seen == [[1, 2], 2, [3, 6]]


async def test_a_plain_route_over_a_batched_one_takes_the_next_reads(raw_peer, serving) -> None:
    """Registering twice replaces, also a batched route by a plain one: a read of
    nothing but its notifications (decoded in one call) goes to the new handler."""
    batched: list[int] = []
    plain: list[int] = []
    first = anyio.Event()
    done = anyio.Event()

    async def updates(batch: list[Update]) -> None:
        batched.extend(u.n for u in batch)
        first.set()
        if batch[-1].n == 3:
            done.set()  # the old handler got the last one: the replacement was missed

    async def update(p: Update) -> None:
        plain.append(p.n)
        if p.n == 3:
            done.set()

    def note(n: int) -> str:
        return msgspec.json.encode({"jsonrpc": "2.0", "method": "update", "params": {"n": n}}).decode()

    conn, peer = raw_peer()
    conn.on_notifications("update", Update, updates)
    async with serving(conn):
        await peer.send_line(note(1))
        await first.wait()  # a read has been decoded with the batched routes
        conn.on_notification("update", Update, update)
        await peer.send_line("\n".join([note(2), note(3)]))
        await done.wait()
    assert (batched, plain) == ([1], [2, 3])


async def test_a_request_named_like_a_batched_notification_is_a_request(raw_peer, serving) -> None:
    """Batched notifications are decoded with their envelope in one pass; a line with
    an id (or without the 2.0 marker) is never taken for one."""
    seen: list[int] = []

    async def updates(batch: list[Update]) -> None:
        seen.extend(u.n for u in batch)

    conn, peer = raw_peer()
    conn.on_notifications("update", Update, updates)
    lines = [
        '{"jsonrpc":"2.0","method":"update","params":{"n":1}}',
        '{"jsonrpc":"2.0","id":8,"method":"update","params":{"n":2}}',
        '{"jsonrpc":"1.0","method":"update","params":{"n":3}}',
        '{"method":"update","params":{"n":4}}',
    ]
    async with serving(conn):
        await peer.send_line("\n".join(lines))
        replies = [await peer.receive_json(), await peer.receive_json()]
        codes = sorted((r["id"] or 0, r["error"]["code"]) for r in replies)
        assert codes == [(0, -32600), (8, -32601)]  # the 1.0 one; the request
    assert seen == [1, 4]


async def test_traffic_hook(raw_peer, serving) -> None:
    traffic: list[tuple[str, bytes, int]] = []
    conn, peer = raw_peer(on_traffic=lambda d, data, count: traffic.append((d, data, count)))
    conn.on_request("echo", Echo, echo)
    async with serving(conn):
        await peer.send_line(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"t"}}\r')
        await peer.receive_json()
    assert traffic == [
        ("in", b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"t"}}', 1),
        ("out", b'{"jsonrpc":"2.0","id":1,"result":{"text":"t"}}', 1),
    ]


# --- batches ---------------------------------------------------------------------------


async def test_batch_mixed(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    conn.on_request("echo", Echo, echo)
    seen: list[int] = []

    async def on_u(u: Update) -> None:
        seen.append(u.n)

    conn.on_notification("u", Update, on_u)
    release = anyio.Event()

    async def slow(p: Echo) -> str:
        await release.wait()
        return "late"

    conn.on_request("slow", Echo, slow)
    async with serving(conn):
        await peer.send_json(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"text": "a"}},
                {"bad": True},
                {"jsonrpc": "2.0", "method": "u", "params": {"n": 1}},
                {"jsonrpc": "2.0", "id": "s", "method": "slow", "params": {"text": ""}},
                {"jsonrpc": "2.0", "id": 2, "method": "nope"},
                17,
            ]
        )
        # Nothing is sent until every request of the batch is answered.
        await conn.notify("marker", None)
        assert (await peer.receive_json())["method"] == "marker"
        release.set()
        reply = await peer.receive_json()
    assert seen == [1]
    assert isinstance(reply, list)
    by_id = {}
    invalid = []
    for entry in reply:
        if entry["id"] is None:
            invalid.append(entry["error"]["code"])
        else:
            by_id[entry["id"]] = entry
    assert invalid == [-32600, -32600]
    assert by_id[1]["result"] == {"text": "a"}
    assert by_id["s"]["result"] == "late"
    assert by_id[2]["error"]["code"] == -32601
    assert len(reply) == 5


async def test_empty_batch(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    async with serving(conn):
        await peer.send_line(b"[]")
        reply = await peer.receive_json()
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600


async def test_notification_only_batch_gets_no_reply(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    seen: list[int] = []

    async def on_u(u: Update) -> None:
        seen.append(u.n)

    conn.on_notification("u", Update, on_u)
    async with serving(conn):
        await peer.send_json(
            [{"jsonrpc": "2.0", "method": "u", "params": {"n": i}} for i in (1, 2)]
        )
        await conn.notify("marker", None)
        assert (await peer.receive_json())["method"] == "marker"
    assert seen == [1, 2]


async def test_batch_of_responses(raw_peer, serving) -> None:
    conn, peer = raw_peer()
    results: dict[int, Any] = {}
    async with serving(conn), anyio.create_task_group() as tg:

        async def call(i: int) -> None:
            results[i] = await conn.request("x", {"i": i}, dict)

        tg.start_soon(call, 0)
        tg.start_soon(call, 1)
        ids = [(await peer.receive_json())["id"] for _ in range(2)]
        await peer.send_json([{"jsonrpc": "2.0", "id": i, "result": {"r": i}} for i in ids])
    assert results == {0: {"r": 0}, 1: {"r": 1}}


# --- misc ------------------------------------------------------------------------------


def test_default_convert() -> None:
    assert default_convert(msgspec.Raw(b'{"text":"x"}'), Echo) == Echo("x")
    assert default_convert(None, type(None)) is None
    raw = msgspec.Raw(b"[1]")
    assert default_convert(raw, msgspec.Raw) is raw
    with pytest.raises(ProtocolError):
        default_convert(msgspec.Raw(b"{}"), Echo)
    # Omitted params: `{}` when `null` does not fit, else the `null` error.
    assert default_convert(None, Update | None) is None
    assert default_convert(None, Options) == Options()
    with pytest.raises(ProtocolError, match="Expected `object`, got `null`"):
        default_convert(None, Echo)


def test_repr_and_errors() -> None:
    assert str(RequestError.cancelled()) == "-32800 Request cancelled"
    # What the agent put in `data` for a person: the SDKs' `details`, or a text.
    overloaded = RequestError(-32603, "Internal error", {"details": "overloaded_error: Overloaded"})
    assert str(overloaded) == "-32603 Internal error: overloaded_error: Overloaded"
    trace = "Error: boom\n    at x (a.js:1)"
    assert str(RequestError(-32000, "Failed", trace)) == "-32000 Failed: Error: boom"
    long = str(RequestError(-32000, "x", "y" * 400))
    assert long.endswith("y…") and len(long) == len("-32000 x: ") + 300
    # Names a program reads are not repeated: they are in the message already.
    assert str(RequestError.method_not_found("a/b")) == "-32601 Method not found: a/b"
    assert RequestError.internal("x").code == -32603
    assert RequestError.invalid_params("bad").message == "Invalid params: bad"
    assert str(ConnectionClosed()) == "connection closed"
    assert str(ConnectionClosed("eof")) == "connection closed: eof"


async def test_serve_twice_refused(connection_pair, serving) -> None:
    a, b = connection_pair()
    async with serving(a, b):
        with pytest.raises(RuntimeError):
            await a.serve()


def test_repr_new() -> None:
    a = Connection(None, None, name="claude")  # type: ignore[arg-type]
    assert repr(a) == "<Connection claude open, 0 pending>"


@pytest.mark.parametrize("depth", [1_000, 100_000])
async def test_a_line_nested_too_deeply_costs_that_line_only(raw_peer, serving, depth) -> None:
    """Issue 27.1: msgspec raises RecursionError, not DecodeError, past the interpreter's
    recursion limit; it ended serve() and with it the connection. The line is a parse
    error; one that says it is a request gets its id back, one that answers a request
    of ours fails that request as malformed (it would wait forever)."""
    conn, peer = raw_peer()
    conn.on_request("echo", Echo, echo)
    nested = b"[" * depth + b"]" * depth
    async with serving(conn):
        await peer.send_line(nested)
        reply = await peer.receive_json()
        assert reply["error"] == {"code": -32700, "message": "Parse error: JSON nested too deeply"}
        await peer.send_line(
            b'{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": ' + nested + b"}"
        )
        reply = await peer.receive_json()
        assert reply["id"] == 1 and reply["error"]["code"] == -32600
        failed: list[Exception] = []
        for answer in (
            b'{"id": %d, "result": {"x": "\\"id\\": 9", "deep": %s}}',
            b'{"id": %d, "error": %s}',  # (fuzzer) fails the envelope first, then the probe
        ):
            async with anyio.create_task_group() as tasks:

                async def ask() -> None:
                    with pytest.raises(ProtocolError) as error:
                        await conn.request("ping", None)
                    failed.append(error.value)

                tasks.start_soon(ask)
                request = await peer.receive_json()
                await peer.send_line(answer % (request["id"], nested))
        assert [str(e) for e in failed] == [
            "malformed response to ping: JSON nested too deeply",
            "malformed response to ping: Expected `object`, got `array` - at `$.error`",
        ]
        await peer.send_json({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"text": "a"}})
        assert await peer.receive_json() == {"jsonrpc": "2.0", "id": 2, "result": {"text": "a"}}
