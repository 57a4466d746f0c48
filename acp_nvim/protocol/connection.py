"""A symmetric JSON-RPC 2.0 peer over newline-delimited JSON (ACP's stdio transport).

The same `Connection` serves the editor side and our agent-side fakes: each side
registers handlers for what the other may call, runs `serve()` in a task group, and
calls `request()` / `notify()`. Typed params and results come from a pluggable
`convert` function, so this layer knows nothing of the ACP schema.
"""

from __future__ import annotations

__all__ = ["CANCEL_REQUEST_METHOD", "Connection", "Convert", "default_convert"]

import contextlib
import functools
import itertools
import logging
import operator
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar, overload

import anyio
import anyio.abc
import anyio.to_thread
import msgspec
from anyio.abc import ByteReceiveStream, ByteSendStream
from msgspec import UNSET, Raw, UnsetType

from .errors import ConnectionClosed, LineTooLong, ProtocolError, RequestError
from .framing import DEFAULT_MAX_LINE, LineReader, encode_line, lines_of
from .streams import STREAM_GONE

T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")
# Called once a request is written, before its answer is awaited (``Connection.request``).
OnSent = Callable[[], object] | None

logger = logging.getLogger("acp_nvim.protocol")

CANCEL_REQUEST_METHOD = "$/cancel_request"

# Lines (and params, results) longer than this are decoded in a worker thread: a
# 10 MB line costs the decoder 20-100 ms (its structs' __post_init__ included), a
# stall of every other connection on the loop. Below it a decode takes at most ~10 ms,
# about what the thread's GIL handoffs would cost the loop (bench/decoding.py).
OFF_LOOP_BYTES = 1024 * 1024

Id = int | str | None
Direction = Literal["in", "out"]


class Convert(Protocol):
    """Turns raw params/result JSON (None when absent) into a `type_`; raises if invalid."""

    def __call__(self, raw: Raw | None, type_: type[T], /) -> T: ...


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}
_PARAMS = operator.attrgetter("params")


class _TooDeep(msgspec.DecodeError):
    """JSON nested past the interpreter's recursion limit (~1,000 levels), where
    msgspec raises RecursionError: a DecodeError like any other bad line."""


def _decoded(decoder: msgspec.json.Decoder[T], data: bytes | Raw) -> T:
    """``decoder.decode(data)``, raising `_TooDeep` where msgspec would recurse too deep."""
    try:
        return decoder.decode(data)
    except RecursionError:
        raise _TooDeep("JSON nested too deeply") from None


async def _decoding(size: int, decode: Callable[..., T], *args: Any) -> T:
    """``decode(*args)`` of ``size`` bytes: in a worker thread past `OFF_LOOP_BYTES`."""
    if size > OFF_LOOP_BYTES:
        return await anyio.to_thread.run_sync(decode, *args)
    return decode(*args)


def _runs_of_read(block: bytes, batched: _Batched) -> list[tuple[_Route, list[Any]]] | None:
    """A stream's read in one msgspec call: when every line of ``block`` is a
    notification of a batched route, its runs of one route (one struct type each), in
    order; None when any line is something else (the caller goes line by line)."""
    decoder, routes = batched
    if not routes or len(block) > OFF_LOOP_BYTES or b"\n" not in block:
        return None
    try:
        notes = decoder.decode_lines(block)
    except (msgspec.DecodeError, RecursionError):
        return None
    return [
        (routes[struct], list(map(_PARAMS, run))) for struct, run in itertools.groupby(notes, type)
    ]


def _notes_in(runs: list[tuple[_Route, list[Any]]]) -> int:
    return sum(len(values) for _, values in runs)


def free_in_pieces(values: list[Any], depth: int = 4) -> None:
    """Empty ``values``, taking apart what nothing else refers to down to ``depth``
    levels (lists, dicts, structs) and freeing it one piece at a time: run in a worker
    thread, the interpreter can go to another thread between two pieces, where one
    free of a big decoded message held it throughout."""
    stack = [(value, 0) for value in values]
    values.clear()
    while stack:
        item, level = stack.pop()
        # Held by ``item`` and getrefcount's argument alone: ours to take apart.
        if level >= depth or sys.getrefcount(item) > 2:
            continue
        if type(item) is list:
            stack.extend((part, level + 1) for part in item if _container(part))
            item.clear()
        elif type(item) is dict:
            stack.extend((part, level + 1) for part in item.values() if _container(part))
            item.clear()
        elif isinstance(item, msgspec.Struct):
            fields = (getattr(item, name) for name in item.__struct_fields__)
            stack.extend((part, level + 1) for part in fields if _container(part))


def _container(value: Any) -> bool:
    return type(value) is list or type(value) is dict or isinstance(value, msgspec.Struct)


def default_convert(raw: Raw | None, type_: type[T], /) -> T:
    """msgspec decoding, with one cached Decoder per target type.

    Omitted params (`raw is None`) decode as `null`, or failing that as `{}`: JSON-RPC
    lets a sender leave out params, and a Struct whose fields all have defaults
    should still accept that. Raises `ProtocolError` when `raw` is no `type_`.
    """
    if type_ is Raw:
        return raw if raw is not None else Raw(b"null")  # type: ignore[return-value]
    decoder = _decoders.get(type_)
    if decoder is None:
        decoder = _decoders[type_] = msgspec.json.Decoder(type_)
    try:
        if raw is not None:
            result: T = _decoded(decoder, raw)
            return result
        try:
            result = decoder.decode(b"null")
        except msgspec.ValidationError as exc:
            try:
                result = decoder.decode(b"{}")
            except msgspec.ValidationError:
                raise exc from None
        return result
    except msgspec.DecodeError as exc:
        raise ProtocolError(str(exc)) from None


# --- wire envelopes -------------------------------------------------------------------
# One Struct decodes every incoming message: fields absent on the wire stay UNSET /
# empty Raw, which tells requests, notifications and responses apart (`"id": null`
# is not the same as no id). Params and results stay Raw until a handler's type is
# known. gc=False: these never form cycles and are created by the thousand.


class _ErrorObject(msgspec.Struct, gc=False, omit_defaults=True):
    code: int
    message: str = ""
    data: Any = None


class _Envelope(msgspec.Struct, gc=False):
    jsonrpc: Literal["2.0"] | UnsetType = UNSET
    id: int | str | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: Raw = Raw()
    result: Raw = Raw()
    error: _ErrorObject | UnsetType = UNSET


class _Probe(msgspec.Struct, gc=False):
    """Lenient second look at a message the envelope rejected: what id, what kind."""

    id: Any = UNSET
    method: Any = UNSET
    result: Any = UNSET
    error: Any = UNSET


class _CancelParams(msgspec.Struct, gc=False):
    requestId: int | str


class _OutRequest(msgspec.Struct, gc=False):
    jsonrpc: str
    id: Id
    method: str
    params: Any = UNSET


class _OutNotification(msgspec.Struct, gc=False):
    jsonrpc: str
    method: str
    params: Any = UNSET


class _OutResponse(msgspec.Struct, gc=False):
    jsonrpc: str
    id: Id
    result: Any = UNSET
    error: _ErrorObject | UnsetType = UNSET


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_MEMBER = re.compile(rb'"(id|method|result|error)"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")?')
# Each escape of a string in turn, so that an escaped backslash before a "u" starts
# none: a UTF-16 surrogate pair, a lone surrogate (group 1), or any other.
_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
    rb"|\\."
)


def _lossy_surrogates(line: bytes) -> bytes:
    """``line`` with each lone UTF-16 surrogate escape (``"\\ud83d"``: JavaScript's
    JSON.stringify of a string cut inside an emoji) made U+FFFD, as Node writes one
    to a file; msgspec refuses the whole line, which leaves its request unanswered
    (a parse error has no id)."""
    return _ESCAPE.sub(lambda m: rb"\ufffd" if m[1] else m[0], line)


def _shallow_probe(line: bytes) -> _Probe:
    """What tells a response from a request in a line too deeply nested for msgspec:
    its top-level ``id`` (a number or a string), ``method``, ``result``, ``error``.

    Found without recursion: strings blanked (their length kept), brackets counted
    up to each candidate member; a member is top-level at depth 1.
    """
    blank = _STRING.sub(lambda m: b'"' + b" " * (len(m[0]) - 2) + b'"', line)
    probe = _Probe()
    depth = counted = 0
    for member in _MEMBER.finditer(line):
        start, name = member.start(), member[1]
        if blank[start : start + len(name) + 2] != b'"' + b" " * len(name) + b'"':
            continue  # inside a string, not a key
        between = blank[counted:start]
        depth += between.count(b"{") + between.count(b"[")
        depth -= between.count(b"}") + between.count(b"]")
        counted = start
        if depth != 1:
            continue
        if name != b"id":
            setattr(probe, name.decode(), True)
        elif member[2] is not None:
            with contextlib.suppress(msgspec.DecodeError):  # a string with a bad escape
                probe.id = msgspec.json.decode(member[2])
    return probe


def _probe(raw: bytes) -> _Probe:
    """What tells a response from a request in valid JSON the envelope rejected."""
    try:
        return _decoded(_PROBE, raw)
    except _TooDeep:  # "error": [[[...]]] fails the envelope, then the probe recurses
        return _shallow_probe(raw)
    except msgspec.DecodeError:
        return _Probe()


_ANY_MESSAGE = msgspec.json.Decoder(_Envelope | list[Raw])
_ONE_MESSAGE = msgspec.json.Decoder(_Envelope)
_PROBE = msgspec.json.Decoder(_Probe)
_CANCEL_PARAMS = msgspec.json.Decoder(_CancelParams)


def _error_response(msg_id: Id, err: RequestError) -> _OutResponse:
    obj = _ErrorObject(err.code, err.message, err.data)
    return _OutResponse("2.0", msg_id, error=obj)


# --- bookkeeping ----------------------------------------------------------------------


# A notification whose params did not convert (already logged).
_INVALID: Any = object()


def _notification_struct(method: str, params_type: Any) -> Any:
    """A notification of ``method``, params decoded in the same pass; any other
    message (a request: it has an id) fails to decode as one."""
    return msgspec.defstruct(
        "_Notification",
        [
            ("jsonrpc", Literal["2.0"] | UnsetType, UNSET),
            ("id", UnsetType, UNSET),
            ("params", params_type),
        ],
        tag_field="method",
        tag=method,
        kw_only=True,
        gc=False,
    )


class _Route:
    __slots__ = ("batched", "handler", "params_type")

    def __init__(
        self, params_type: Any, handler: Callable[[Any], Awaitable[Any]], batched: bool = False
    ) -> None:
        self.params_type = params_type
        self.handler = handler
        self.batched = batched


# The decoder of every batched route's notification, and the route of each struct.
_Batched = tuple[msgspec.json.Decoder[Any], dict[type, _Route]]


class _Pending:
    """A local request waiting for its response."""

    __slots__ = ("error", "event", "method", "result")

    def __init__(self, method: str) -> None:
        self.method = method
        self.event = anyio.Event()
        self.result: Raw | None = None
        self.error: Exception | None = None


class _Batch:
    """Collects the responses to one incoming batch; sent as one array line."""

    __slots__ = ("responses", "waiting")

    def __init__(self) -> None:
        self.responses: list[_OutResponse] = []
        self.waiting = 0


class _Incoming:
    """The peer's requests in flight: each runs its handler in its own task (of the
    serving task group) and is answered once, unless cancelled without a reply; the
    answers to a batch go out together, as one array line."""

    def __init__(
        self,
        name: str,
        convert: Convert,
        encoder: msgspec.json.Encoder,
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        self.name = name
        self.routes: dict[str, _Route] = {}
        self._convert = convert
        self._encoder = encoder
        self._send = send  # a reply; its failure only matters to the log
        self._handling: dict[Id, anyio.CancelScope] = {}  # peer request id -> its task
        self._unanswered: set[Id] = set()  # cancelled requests to leave without an answer

    def __len__(self) -> int:
        return len(self._handling)

    def start(
        self,
        tg: anyio.abc.TaskGroup,
        msg_id: Id,
        method: str,
        params: Raw,
        batch: _Batch | None,
    ) -> None:
        if batch is not None:
            batch.waiting += 1
        scope = anyio.CancelScope()
        # Registered before the task starts, so a $/cancel_request read right
        # after this line still finds it.
        self._handling[msg_id] = scope
        tg.start_soon(self._run, msg_id, method, params, scope, batch)

    def cancel(self, request_id: Id, *, reply: bool = True) -> bool:
        """Cancel the handler of request ``request_id``; False when none runs."""
        scope = self._handling.get(request_id)
        if scope is None:
            return False
        if not reply:
            self._unanswered.add(request_id)
        scope.cancel()
        return True

    def cancel_request(self, raw: Raw | None) -> None:
        """The peer's ``$/cancel_request`` with params ``raw``."""
        try:
            target = _decoded(_CANCEL_PARAMS, raw or b"null").requestId
        except msgspec.DecodeError as exc:
            logger.warning("%s: invalid %s params: %s", self.name, CANCEL_REQUEST_METHOD, exc)
            return
        if not self.cancel(target):
            # Already answered (or never seen): the spec says to ignore it.
            logger.debug("%s: cancel for request %r not in flight", self.name, target)

    async def answer_all(self, error: RequestError | None) -> None:
        """Answer every request in flight with ``error`` now, its handler cancelled
        (its own answer is not sent); None: nothing to answer."""
        for msg_id, scope in list(self._handling.items()):
            if error is not None and msg_id not in self._unanswered:
                self._unanswered.add(msg_id)
                scope.cancel()
                await self._send(_error_response(msg_id, error))

    async def _run(
        self, msg_id: Id, method: str, params: Raw, scope: anyio.CancelScope, batch: _Batch | None
    ) -> None:
        try:
            response = await self._call_handler(msg_id, method, params, scope)
        finally:
            if self._handling.get(msg_id) is scope:
                del self._handling[msg_id]
        if msg_id in self._unanswered:
            self._unanswered.discard(msg_id)
            if batch is not None:
                await self.batch_reply(batch, None)
            return
        if batch is None:
            await self._send(response)
        else:
            await self.batch_reply(batch, response)

    async def _call_handler(
        self, msg_id: Id, method: str, params: Raw, scope: anyio.CancelScope
    ) -> _OutResponse:
        route = self.routes.get(method)
        if route is None:
            logger.debug("%s: no handler for request %s", self.name, method)
            return _error_response(msg_id, RequestError.method_not_found(method))
        try:
            value = await _decoding(
                len(params), self._convert, params if params else None, route.params_type
            )
        except Exception as exc:
            return _error_response(msg_id, RequestError.invalid_params(str(exc)))
        response = _error_response(msg_id, RequestError.cancelled())
        with scope:
            try:
                result = await route.handler(value)
                # Encoded here so an unencodable result becomes -32603, not a crash.
                response = _OutResponse("2.0", msg_id, result=Raw(self._encoder.encode(result)))
            except RequestError as exc:
                response = _error_response(msg_id, exc)
            except Exception as exc:
                logger.exception("%s: handler for %s failed", self.name, method)
                response = _error_response(msg_id, RequestError.internal(str(exc) or repr(exc)))
        # Still the -32800 answer if the scope was cancelled ($/cancel_request).
        return response

    async def batch_reply(self, batch: _Batch, response: _OutResponse | None) -> None:
        if response is not None:
            batch.responses.append(response)
        batch.waiting -= 1
        if batch.waiting == 0 and batch.responses:
            await self._send(batch.responses)


class _Outgoing:
    """Our requests waiting for the peer's answers, by id (counted from ``id_start``).
    Each ends once: with its response, with a malformed one (else it would wait
    forever), or when the connection closes; an answer after that is late."""

    __slots__ = ("_id_start", "_next_id", "_pending", "name")

    def __init__(self, name: str, id_start: int) -> None:
        self.name = name
        self._id_start = id_start
        self._next_id = id_start
        self._pending: dict[int, _Pending] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, msg_id: object) -> bool:
        return msg_id in self._pending

    def open(self, method: str) -> tuple[int, _Pending]:
        """A new request of ``method``: its id and the slot its answer arrives in."""
        msg_id = self._next_id
        self._next_id += 1
        slot = self._pending[msg_id] = _Pending(method)
        return msg_id, slot

    def forget(self, msg_id: int) -> None:
        """Stop waiting for ``msg_id``: a response after this is dropped as late."""
        self._pending.pop(msg_id, None)

    def answer(self, msg: _Envelope) -> None:
        """Hand the peer's response ``msg`` to the request it answers."""
        msg_id = msg.id
        slot = self._pending.get(msg_id) if type(msg_id) is int else None
        if slot is None:
            _unknown_response(self.name, msg_id, range(self._id_start, self._next_id))
            return
        del self._pending[msg_id]  # type: ignore[arg-type]
        if isinstance(msg.error, _ErrorObject):
            err = msg.error
            slot.error = RequestError(err.code, err.message, err.data)
        else:
            slot.result = msg.result
        slot.event.set()

    def fail_malformed(self, msg_id: Any, detail: str) -> None:
        """Fail request ``msg_id`` (if ours and waiting) with a malformed response's ``detail``."""
        slot = self._pending.pop(msg_id, None) if type(msg_id) is int else None
        if slot is not None:
            slot.error = ProtocolError(f"malformed response to {slot.method}: {detail}")
            slot.event.set()

    def close(self, reason: str) -> None:
        """Fail every request still waiting: the connection is gone for ``reason``."""
        pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.error = ConnectionClosed(reason)
            slot.event.set()


# --- the connection -------------------------------------------------------------------


class Connection:
    """One JSON-RPC 2.0 peer on a pair of byte streams.

    - Incoming requests each run in their own task (a permission prompt may wait on
      the user for minutes); incoming notifications run inline in the read loop, in
      order, so their handlers must be quick and must not await `request()`.
    - `$/cancel_request` from the peer cancels the handler's task; it answers -32800.
    - `on_traffic(direction, data, count)` sees every line: the block one read
      brought in (`LineReader.receive_block`) and how many lines it holds, or the
      one written (1).
    - `on_not_json(line)` sees each line that is no JSON at all (a peer's banner or
      prompt on the wrong stream), before it is answered as a parse error.
    - At EOF `serve()` returns, pending `request()`s raise `ConnectionClosed`, and so
      does every later call.

    It writes and owns the lifetime; what the peer sends is decoded and routed by
    its `_Dispatch`, the peer's requests run in `_Incoming`, and ours wait for their
    answers in `_Outgoing`.
    """

    def __init__(
        self,
        receive: ByteReceiveStream,
        send: ByteSendStream,
        *,
        convert: Convert = default_convert,
        enc_hook: Callable[[Any], Any] | None = None,
        max_line: int = DEFAULT_MAX_LINE,
        on_traffic: Callable[[Direction, bytes, int], None] | None = None,
        on_not_json: Callable[[bytes], None] | None = None,
        name: str = "peer",
        send_cancel_requests: bool = False,
        id_start: int = 0,
    ) -> None:
        self._receive = receive
        self._send = send
        self._convert = convert
        self._encoder = msgspec.json.Encoder(enc_hook=enc_hook)
        self._max_line = max_line
        self._on_traffic = on_traffic
        self.name = name
        self._send_cancel_requests = send_cancel_requests
        self._incoming = _Incoming(name, convert, self._encoder, self._send_quietly)
        self._outgoing = _Outgoing(name, id_start)
        self._dispatch = _Dispatch(
            name,
            convert,
            self._incoming,
            self._outgoing,
            self._send_quietly,
            on_traffic,
            on_not_json,
        )
        self._write_lock = anyio.Lock(fast_acquire=True)  # free: no turn of the loop first
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._close_reason: str | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        text = f"<Connection {self.name} {state}, {len(self._outgoing)} pending"
        if self._incoming:
            text += f", {len(self._incoming)} handling"
        return text + ">"

    @property
    def closed(self) -> bool:
        return self._closed

    # -- registration

    def on_request(
        self, method: str, params_type: type[P], handler: Callable[[P], Awaitable[Any]]
    ) -> None:
        """Route incoming `method` requests to `handler`; its return value is the result.

        Raise `RequestError` to answer with that error. Registering twice replaces.
        """
        self._incoming.routes[method] = _Route(params_type, handler)

    def on_notification(
        self, method: str, params_type: type[P], handler: Callable[[P], Awaitable[None]]
    ) -> None:
        """Route incoming `method` notifications to `handler` (run inline, in order)."""
        self._dispatch.route(method, _Route(params_type, handler))

    def on_notifications(
        self, method: str, params_type: type[P], handler: Callable[[list[P]], Awaitable[None]]
    ) -> None:
        """Like `on_notification`, but `handler` gets a run of consecutive `method`
        notifications at once: all that one read of the stream delivered in a row.

        For floods of small notifications (streamed text), where per-message work
        would dominate. Order with every other message is kept. Their params are
        decoded with the envelope in one msgspec pass; when that fails (the params
        are not what msgspec makes of ``params_type`` alone), as any message, with
        `convert`, which must give what msgspec gives whenever msgspec succeeds.
        """
        self._dispatch.route(method, _Route(params_type, handler, batched=True))

    # -- outgoing

    @overload
    async def request(self, method: str, params: Any) -> Raw: ...

    @overload
    async def request(
        self, method: str, params: Any, result_type: type[R], *, on_sent: OnSent = None
    ) -> R: ...

    async def request(
        self, method: str, params: Any, result_type: Any = Raw, *, on_sent: OnSent = None
    ) -> Any:
        """Call `method` on the peer and return its result converted to `result_type`.

        Raises `RequestError` if the peer answers with an error, `ProtocolError` if
        the result does not convert, `ConnectionClosed` if the connection goes away.
        `params=None` omits the params member; `on_sent` is called once it is written.
        """
        if self._closed:
            raise ConnectionClosed(self._close_reason)
        msg_id, slot = self._outgoing.open(method)
        sent = False
        try:
            await self._write(_OutRequest("2.0", msg_id, method, _params(params)))
            sent = True
            if on_sent is not None:
                on_sent()
            await slot.event.wait()
        except anyio.get_cancelled_exc_class():
            if self._send_cancel_requests and sent and msg_id in self._outgoing:
                self._spawn_cancel_request(msg_id)
            raise
        finally:
            self._outgoing.forget(msg_id)
        if slot.error is not None:
            raise slot.error
        result = slot.result
        try:
            return await _decoding(len(result or b""), self._convert, result, result_type)
        except Exception as exc:
            raise ProtocolError(f"invalid result for {method}: {exc}") from exc

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification; `params=None` omits the params member."""
        await self._write(_OutNotification("2.0", method, _params(params)))

    def cancel_incoming(self, request_id: Any, *, reply: bool = True) -> bool:
        """Cancel the handler of the peer's request `request_id`, as `$/cancel_request`
        does; without `reply` the request gets no answer at all (MCP's
        `notifications/cancelled`). False when it is not running (any more)."""
        if not isinstance(request_id, int | str):
            return False
        return self._incoming.cancel(request_id, reply=reply)

    async def aclose(self, answer: RequestError | None = None) -> None:
        """Fail pending requests, stop `serve()`, and close both streams; the peer's
        requests still being handled are answered `answer` first (else not at all)."""
        await self._incoming.answer_all(answer)
        self._mark_closed("closed locally")
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        with anyio.CancelScope(shield=True):
            for stream in (self._send, self._receive):
                with contextlib.suppress(*STREAM_GONE):
                    await stream.aclose()

    # -- the read loop

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Read and dispatch messages until EOF, then fail what is pending and return.

        Handlers of incoming requests run in a task group owned by this call; they are
        cancelled when it returns (the peer that would read their answers is gone).
        """
        if self._tg is not None:
            raise RuntimeError(f"{self!r} is already being served")
        reader = LineReader(self._receive, self._max_line)
        handle_read = self._dispatch.handle_read
        reason = "end of stream"
        async with anyio.create_task_group() as tg:
            self._tg = self._dispatch.tg = tg
            task_status.started()
            try:
                while True:
                    try:
                        block = await reader.receive_block()
                    except LineTooLong as exc:
                        logger.error("%s: dropped incoming message: %s", self.name, exc)
                        continue
                    await handle_read(block)
            except ConnectionClosed as exc:
                reason = exc.reason or reason
            finally:
                self._mark_closed(reason)
                tg.cancel_scope.cancel()

    # -- writing

    async def _write(self, message: Any) -> None:
        if self._closed:
            raise ConnectionClosed(self._close_reason)
        payload = self._encoder.encode(message)
        line = encode_line(payload)
        # One writer at a time, so lines never interleave. Not shielded: on asyncio a
        # stream send buffers the whole line before awaiting the drain, so being
        # cancelled mid-send cannot leave half a line on the wire.
        async with self._write_lock:
            if self._on_traffic is not None:
                self._on_traffic("out", payload, 1)
            try:
                await self._send.send(line)
            except STREAM_GONE as exc:
                reason = f"write failed: {exc!r}"
                self._mark_closed(reason)
                raise ConnectionClosed(reason) from exc

    async def _send_quietly(self, message: Any) -> None:
        """Send a reply whose failure only matters to the log (the peer is gone)."""
        try:
            await self._write(message)
        except ConnectionClosed as exc:
            logger.debug("%s: reply not sent: %s", self.name, exc)

    def _spawn_cancel_request(self, msg_id: int) -> None:
        # Sent from the serve task group: the cancelled caller returns at once and
        # never blocks on a write while being cancelled.
        if self._tg is None or self._closed:
            return
        message = _OutNotification("2.0", CANCEL_REQUEST_METHOD, {"requestId": msg_id})
        self._tg.start_soon(self._send_quietly, message)

    def _mark_closed(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        self._outgoing.close(reason)


# --- the read side --------------------------------------------------------------------


class _Dispatch:
    """Each read of the peer's stream, decoded and handed on in order: notifications
    to their handlers, inline (a run of a batched route's in one call), requests to
    `_Incoming`, responses to `_Outgoing`; a line that is no message is answered
    with its error.

    This is the decode path every streamed chunk takes, kept apart from the
    connection's writing and lifetime; `Connection.serve` calls `handle_read` once per
    read, so a message pays no call for the split.
    """

    def __init__(
        self,
        name: str,
        convert: Convert,
        incoming: _Incoming,
        outgoing: _Outgoing,
        send: Callable[[Any], Awaitable[None]],
        on_traffic: Callable[[Direction, bytes, int], None] | None,
        on_not_json: Callable[[bytes], None] | None,
    ) -> None:
        self.name = name
        self.tg: anyio.abc.TaskGroup | None = None  # serve()'s: the peer's requests run there
        self._convert = convert
        self._incoming = incoming
        self._outgoing = outgoing
        self._send = send  # a reply; its failure only matters to the log
        self._on_traffic = on_traffic
        self._on_not_json = on_not_json
        self._notifications: dict[str, _Route] = {}
        self._ignored: set[str] = set()  # notification methods nobody routes, logged once
        self._batched: _Batched | None = None  # every batched route's decoder, built on read

    def route(self, method: str, route: _Route) -> None:
        """Hand ``method`` notifications to ``route`` (registering twice replaces)."""
        replaced = self._notifications.get(method)
        self._notifications[method] = route
        if route.batched or (replaced is not None and replaced.batched):
            self._batched = None  # the batched routes changed: decode with the new set

    def _batched_decoder(self) -> _Batched:
        if self._batched is None:
            routes = {
                _notification_struct(method, route.params_type): route
                for method, route in self._notifications.items()
                if route.batched
            }
            types: Any = functools.reduce(operator.or_, routes) if routes else _Probe
            self._batched = (msgspec.json.Decoder(types), routes)
        return self._batched

    async def handle_read(self, block: bytes) -> None:
        """One read's lines, in order; a run of a batched route's notifications in one call."""
        batched = self._batched_decoder()
        runs = _runs_of_read(block, batched)
        lines = lines_of(block) if runs is None else []
        if self._on_traffic is not None:
            self._on_traffic("in", block, len(lines) if runs is None else _notes_in(runs))
        if runs is not None:
            for read_route, values in runs:
                await self._run_batch(read_route, values)
            return
        run: list[Any] = []
        run_route: _Route | None = None
        for line in lines:
            big = len(line) > OFF_LOOP_BYTES
            route, msg = (None, None) if big else self._decode(line, batched)
            if run_route is not None and (big or route is not run_route):
                await self._run_batch(run_route, run)
                run, run_route = [], None
            if big:
                await self._handle_big_line(line, batched)
            elif route is not None:
                run_route = route
                if msg is not _INVALID:
                    run.append(msg)
            else:
                await self._handle_other(line, msg)
        if run_route is not None:
            await self._run_batch(run_route, run)

    async def _handle_big_line(self, line: bytes, batched: _Batched) -> None:
        """A line past `OFF_LOOP_BYTES`, decoded in a worker thread; a batched route's
        notification freed in one too, in pieces (at once: 20-30 ms for 17 MB)."""
        route, msg = await anyio.to_thread.run_sync(self._decode, line, batched)
        if route is None:
            await self._handle_other(line, msg)
            return
        values = [msg] if msg is not _INVALID else []
        del msg  # in values alone: freed there by free_in_pieces
        await self._run_batch(route, list(values))  # a list of its own: ours stays ours
        await anyio.to_thread.run_sync(free_in_pieces, values)

    async def _handle_other(self, line: bytes, msg: Any) -> None:
        """What a line that is no batched notification decoded to (see `_decode`)."""
        if isinstance(msg, msgspec.DecodeError):
            await self._reject_line(line, msg)
        elif isinstance(msg, _Envelope):
            await self._handle_message(msg, None, line)
        else:
            await self._handle_batch(msg)

    def _decode(self, line: bytes, batched: _Batched) -> tuple[_Route | None, Any]:
        """What ``line`` is: (route, params) of a notification of a batched route (the
        params `_INVALID` when they do not convert), else (None, the envelope, the
        entries of a batch, or the DecodeError). Pure: it may run in a thread."""
        decoder, routes = batched
        if routes:
            try:
                note = _decoded(decoder, line)
            except msgspec.DecodeError:
                pass  # not one of them, or not as msgspec alone sees it: below
            else:
                return routes[type(note)], note.params
        try:
            msg = _decoded(_ANY_MESSAGE, line)
        except msgspec.DecodeError as exc:  # ValidationError too
            lossy = _lossy_surrogates(line)
            return self._decode(lossy, batched) if lossy != line else (None, exc)
        if type(msg) is _Envelope and msg.id is UNSET and msg.method is not UNSET:
            route = self._notifications.get(msg.method)
            if route is not None and route.batched:
                return route, self._params(msg.method, msg.params, route)
        return None, msg

    async def _reject_line(self, line: bytes, exc: msgspec.DecodeError) -> None:
        """Answer a line that is not JSON (-32700) or not a JSON-RPC message (-32600)."""
        if isinstance(exc, msgspec.ValidationError):
            await self._reject_invalid(line, str(exc), None)
            return
        if isinstance(exc, _TooDeep):
            # Still an answer to a request of ours, or a request to answer, if it says so.
            probe = await _decoding(len(line), _shallow_probe, line)
            if probe != _Probe():
                await self._reject_invalid(line, str(exc), None, probe)
                return
        logger.warning("%s: invalid JSON from peer (%s): %r", self.name, exc, line[:200])
        if self._on_not_json is not None:
            self._on_not_json(line)
        await self._send(_error_response(None, RequestError.parse_error(str(exc))))

    async def _run_batch(self, route: _Route, values: list[Any]) -> None:
        if not values:
            return
        try:
            await route.handler(values)
        except Exception:
            logger.exception("%s: notification handler failed", self.name)

    async def _handle_message(self, msg: _Envelope, batch: _Batch | None, raw: bytes) -> None:
        method = msg.method
        if method is not UNSET:
            if msg.id is UNSET:
                await self._handle_notification(method, msg.params)
            else:
                assert self.tg is not None
                self._incoming.start(self.tg, msg.id, method, msg.params, batch)
        elif msg.error is not UNSET or msg.result:
            self._outgoing.answer(msg)
        else:
            detail = "neither a request, a notification nor a response"
            await self._reject_invalid(raw, detail, batch)

    async def _handle_batch(self, entries: list[Raw]) -> None:
        if not entries:
            await self._send(_error_response(None, RequestError.invalid_request("empty batch")))
            return
        batch = _Batch()
        # Held at 1 while entries are dispatched, so a handler finishing early can't
        # flush a half-built reply.
        batch.waiting = 1
        for entry in entries:
            try:
                msg = _decoded(_ONE_MESSAGE, entry)
            except msgspec.DecodeError as exc:
                await self._reject_invalid(entry, str(exc), batch)
                continue
            await self._handle_message(msg, batch, entry)
        await self._incoming.batch_reply(batch, None)

    async def _handle_notification(self, method: str, params: Raw) -> None:
        if method == CANCEL_REQUEST_METHOD:
            self._incoming.cancel_request(params if params else None)
            return
        route = self._notifications.get(method)
        if route is None:
            _ignoring(self.name, method, self._ignored)
            return
        value = await _decoding(len(params), self._params, method, params, route)
        if value is _INVALID:
            return
        try:
            await (route.handler([value]) if route.batched else route.handler(value))
        except Exception:
            logger.exception("%s: notification handler for %s failed", self.name, method)

    def _params(self, method: str, params: Raw, route: _Route) -> Any:
        """A notification's params as the route's type, or `_INVALID` (logged)."""
        try:
            return self._convert(params if params else None, route.params_type)
        except Exception as exc:
            logger.warning("%s: invalid params for notification %s: %s", self.name, method, exc)
            return _INVALID

    async def _reject_invalid(
        self, raw: bytes, detail: str, batch: _Batch | None, probe: _Probe | None = None
    ) -> None:
        """Answer valid JSON that is not a JSON-RPC message with -32600 (``probe``: what
        it holds, if known already)."""
        if probe is None:
            probe = await _decoding(len(raw), _probe, raw)
        msg_id = probe.id if type(probe.id) in (int, str) else None
        ours = type(msg_id) is int and msg_id in self._outgoing
        if probe.method is UNSET and (
            probe.result is not UNSET or probe.error is not UNSET or ours
        ):
            # A malformed response (or a bare ``{"id": 2}`` naming a request of ours):
            # never answer a response; fail its request instead, or it waits forever.
            logger.warning("%s: malformed response from peer: %s", self.name, detail)
            self._outgoing.fail_malformed(msg_id, detail)
            return
        logger.warning("%s: invalid request from peer: %s", self.name, detail)
        response = _error_response(msg_id, RequestError.invalid_request(detail))
        if batch is None:
            await self._send(response)
        else:
            batch.responses.append(response)


# How many unrouted notification methods are named in the log: an agent making up a
# name per message logs this many, not one line each.
_IGNORED_NAMES = 64


def _ignoring(name: str, method: str, logged: set[str]) -> None:
    """Log a notification nobody routes, once per method: agents send their vendor
    ones again and again (qwen's ``qwen/notify/session/mode-update`` at every mode
    change, its ``prompt-suggestion`` every turn), and the log only needs to say once
    that they come and go unread."""
    if method not in logged and len(logged) < _IGNORED_NAMES:
        logged.add(method)
        logger.debug("%s: ignoring notification %s (logged once)", name, method)


def _unknown_response(name: str, msg_id: Any, ours: range) -> None:
    if type(msg_id) is int and msg_id in ours:
        # Ours, but its request() was cancelled or already failed: a late answer.
        logger.debug("%s: dropping late response to request %d", name, msg_id)
    else:
        logger.warning("%s: response for unknown request id %r", name, msg_id)


def _params(params: Any) -> Any:
    return UNSET if params is None else params
