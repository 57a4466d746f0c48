from __future__ import annotations

import itertools

import anyio
import pytest

from acp_nvim.protocol import ConnectionClosed, LineReader, LineTooLong, encode_line
from acp_nvim.protocol.framing import lines_of

pytestmark = pytest.mark.anyio


async def read_all(reader: LineReader) -> list[bytes]:
    lines = []
    while True:
        try:
            lines.append(await reader.receive_line())
        except ConnectionClosed:
            return lines


def split_at(data: bytes, *cuts: int) -> list[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


WIRE = '{"a":"é😀"}\r\n\n{"b":1}\n\r\n{"c":"x\\ny"}\n'.encode()
EXPECTED = ['{"a":"é😀"}'.encode(), b'{"b":1}', b'{"c":"x\\ny"}']


async def test_every_two_way_split(scripted) -> None:
    # Every cut point: mid-line, mid-UTF-8 sequence, between \r and \n.
    for cut in range(1, len(WIRE)):
        reader = LineReader(scripted(split_at(WIRE, cut)))
        assert await read_all(reader) == EXPECTED, cut


async def test_byte_at_a_time(scripted) -> None:
    reader = LineReader(scripted(WIRE[i : i + 1] for i in range(len(WIRE))))
    assert await read_all(reader) == EXPECTED


async def test_many_lines_in_one_chunk(scripted) -> None:
    lines = [b'{"n":%d}' % i for i in range(1000)]
    reader = LineReader(scripted([b"\n".join(lines) + b"\n"]))
    assert await read_all(reader) == lines


async def test_unterminated_last_line_returned_before_eof(scripted) -> None:
    reader = LineReader(scripted([b'{"a":1}\n{"b"', b":2}\r"]))
    assert await reader.receive_line() == b'{"a":1}'
    assert await reader.receive_line() == b'{"b":2}'
    with pytest.raises(ConnectionClosed):
        await reader.receive_line()
    with pytest.raises(ConnectionClosed):  # and stays closed
        await reader.receive_line()


async def test_only_blank_lines_then_eof(scripted) -> None:
    reader = LineReader(scripted([b"\n\r\n\n", b"\r"]))
    with pytest.raises(ConnectionClosed):
        await reader.receive_line()


async def test_line_at_limit_accepted_one_more_rejected(scripted) -> None:
    reader = LineReader(scripted([b"x" * 10 + b"\n" + b"y" * 11 + b"\nok\n"]), max_line=10)
    assert await reader.receive_line() == b"x" * 10
    with pytest.raises(LineTooLong) as info:
        await reader.receive_line()
    assert (info.value.size, info.value.limit) == (11, 10)
    assert await reader.receive_line() == b"ok"


async def test_receive_block_returns_what_one_read_holds(scripted) -> None:
    reader = LineReader(scripted([b'{"a":1}\n\n{"b":2}\r\n{"c"', b":3}\n"]))
    block = await reader.receive_block()
    assert block == b'{"a":1}\n\n{"b":2}\r'  # as it came: decode_lines takes it whole
    assert lines_of(block) == [b'{"a":1}', b'{"b":2}']
    assert lines_of(await reader.receive_block()) == [b'{"c":3}']
    with pytest.raises(ConnectionClosed):
        await reader.receive_block()


async def test_receive_block_keeps_the_lines_before_a_long_one(scripted) -> None:
    wire = b"one\ntwo\n" + b"y" * 11 + b"\nok\n"
    reader = LineReader(scripted([wire]), max_line=10)
    lines = []
    with pytest.raises(LineTooLong):
        while True:
            lines += lines_of(await reader.receive_block())
    assert lines == [b"one", b"two"]
    assert lines_of(await reader.receive_block()) == [b"ok"]


async def test_a_line_past_a_read_comes_alone(scripted) -> None:
    big = b'"' + b"x" * 70_000 + b'"'
    reader = LineReader(scripted([big[:65536], big[65536:] + b"\n1\n2\n"]))
    assert await reader.receive_block() == big  # not joined to what follows: no copy
    assert await reader.receive_block() == b"1\n2"


async def test_long_line_skipped_across_chunks(scripted) -> None:
    chunks = [b"a" * 7 for _ in range(5)] + [b"aa\nnext\n"]
    reader = LineReader(scripted(chunks), max_line=10)
    with pytest.raises(LineTooLong) as info:
        await reader.receive_line()
    assert info.value.size == 37
    assert "37 bytes" in str(info.value)
    assert await reader.receive_line() == b"next"


async def test_long_line_at_eof(scripted) -> None:
    reader = LineReader(scripted([b"z" * 50]), max_line=10)
    with pytest.raises(LineTooLong):
        await reader.receive_line()
    with pytest.raises(ConnectionClosed):
        await reader.receive_line()


async def test_70mb_line_skipped_with_bounded_memory(scripted) -> None:
    chunk = b"q" * 65536
    n_chunks = 70 * 1024 * 1024 // len(chunk)

    def lazy():
        for _ in range(n_chunks):
            yield chunk
        yield b'qq\n{"after":true}\n'

    stream = scripted(lazy())
    reader = LineReader(stream, max_line=1024 * 1024)
    peak = 0

    def watch() -> None:
        nonlocal peak
        peak = max(peak, len(reader._buf))

    stream.on_receive = watch
    with pytest.raises(LineTooLong) as info:
        await reader.receive_line()
    assert info.value.size == n_chunks * len(chunk) + 2
    assert peak <= 1024 * 1024 + 65536
    assert await reader.receive_line() == b'{"after":true}'


class CountingBuffer(bytearray):
    """A reader's buffer that counts the bytes searched for line ends."""

    searched = 0

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:  # type: ignore[override]
        self.searched += len(self) - start
        return super().find(sub, start, end)


@pytest.mark.parametrize("size", [564 * 1024, 8 * 1024 * 1024])
async def test_huge_line_is_linear(scripted, size: int) -> None:
    chunk = b"w" * 65536
    n = size // len(chunk)
    stream = scripted([*([chunk] * n), b"\r\n", b"{}\n"])
    reader = LineReader(stream)
    reader._buf = buffer = CountingBuffer()
    line = await reader.receive_line()
    assert len(line) == n * len(chunk)
    assert await reader.receive_line() == b"{}"
    # Each byte searched once, the buffer grown in place: rescanning the line at
    # every chunk would search n * size / 2 bytes.
    assert reader._buf is buffer
    assert buffer.searched <= size + 8


class _Failing:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def receive(self, max_bytes: int = 65536) -> bytes:
        raise self.exc

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(
    "exc", [anyio.BrokenResourceError(), anyio.ClosedResourceError(), BrokenPipeError()]
)
async def test_stream_failure_becomes_connection_closed(exc: BaseException) -> None:
    reader = LineReader(_Failing(exc))  # type: ignore[arg-type]
    with pytest.raises(ConnectionClosed) as info:
        await reader.receive_line()
    assert info.value.__cause__ is exc


def test_encode_line() -> None:
    assert encode_line(b'{"a":"b\\nc"}') == b'{"a":"b\\nc"}\n'
    with pytest.raises(AssertionError):
        encode_line(b'{"a":\n1}')
