from __future__ import annotations

import base64

import pytest

from acp_nvim.client import text as text_module
from acp_nvim.client.text import (
    ChunkDecoder,
    DecodedFile,
    Eol,
    decode_file,
    encode_file,
    eol_of,
    join_text,
    looks_binary,
    slice_lines,
    split_as,
    split_text,
    strip_ansi,
    truncate_from_start,
    utf8_tail,
)


def test_exports() -> None:
    assert sorted(text_module.__all__) == [
        "ChunkDecoder",
        "DecodedFile",
        "Eol",
        "FileEncoding",
        "decode_file",
        "encode_file",
        "eol_of",
        "join_text",
        "looks_binary",
        "one_line",
        "slice_lines",
        "split_as",
        "split_text",
        "strip_ansi",
        "title",
        "truncate_from_start",
        "utf8_tail",
    ]


@pytest.mark.parametrize(
    ("text", "lines", "eol", "final"),
    [
        ("", [""], "\n", False),
        ("\n", [""], "\n", True),
        ("a", ["a"], "\n", False),
        ("a\nb\n", ["a", "b"], "\n", True),
        ("a\nb", ["a", "b"], "\n", False),
        ("a\n\n", ["a", ""], "\n", True),
        ("a\r\nb\r\n", ["a", "b"], "\r\n", True),
        ("a\r\nb", ["a", "b"], "\r\n", False),
        ("\r\n", [""], "\r\n", True),
        # One line without CR makes the whole file unix; the CRs stay in lines.
        ("a\r\nb\n", ["a\r", "b"], "\n", True),
        ("a\nb\r\n", ["a", "b\r"], "\n", True),
        # A stray CR inside a dos line is content.
        ("a\rx\r\nb\r\n", ["a\rx", "b"], "\r\n", True),
        ("a\rb\r", ["a", "b"], "\r", True),
        ("a\rb", ["a", "b"], "\r", False),
    ],
)
def test_split_text_detects_like_neovim_and_round_trips(
    text: str, lines: list[str], eol: str, final: bool
) -> None:
    assert split_text(text) == (lines, eol, final)
    assert eol_of(text) == eol
    got_lines, got_eol, got_final = split_text(text)
    assert join_text(got_lines, got_eol, got_final) == text


def test_join_text_defaults_to_unix_with_final_newline() -> None:
    assert join_text(["a", "b"]) == "a\nb\n"
    assert join_text(["a", "b"], "\r\n", False) == "a\r\nb"


@pytest.mark.parametrize(
    ("text", "line", "limit", "want"),
    [
        ("a\nb\nc\n", None, None, "a\nb\nc\n"),
        ("a\nb\nc\n", 2, None, "b\nc\n"),
        ("a\nb\nc\n", 2, 1, "b\n"),
        ("a\nb\nc\n", 1, 2, "a\nb\n"),
        ("a\nb\nc\n", 3, 10, "c\n"),
        ("a\nb\nc\n", 1, 0, ""),
        ("a\nb\nc", 3, None, "c"),
        ("a\r\nb\r\nc\r\n", 2, 1, "b\r\n"),
        ("", 1, None, ""),
        ("", 1, 5, ""),
        ("", None, 3, ""),
    ],
)
def test_slice_lines(text: str, line: int | None, limit: int | None, want: str) -> None:
    assert slice_lines(text, line, limit) == want


@pytest.mark.parametrize(
    ("text", "line", "limit", "message"),
    [
        ("a\nb\n", 3, None, "line 3 is past the end of the file (2 lines)"),
        ("a\nb", 5, 1, "line 5 is past the end of the file (2 lines)"),
        ("", 2, None, "line 2 is past the end of the file (0 lines)"),
        ("a\n", 0, None, "line must be 1 or more, got 0"),
        ("a\n", 1, -1, "limit must be 0 or more, got -1"),
    ],
)
def test_slice_lines_errors(text: str, line: int | None, limit: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        slice_lines(text, line, limit)


@pytest.mark.parametrize(
    ("data", "binary"),
    [
        (b"", False),
        (b"plain\n", False),
        ("h\u00e9llo \u2603\n".encode(), False),
        (b"\xef\xbb\xbfbom\n", False),
        (b"a\0b", True),
        (b"x" * 8191 + b"\0", True),
        (b"x" * 8192 + b"\0", False),  # NUL only after the sniffed prefix
        (b"caf\xe9\n", True),  # latin-1, not UTF-8
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", True),
    ],
)
def test_looks_binary(data: bytes, binary: bool) -> None:
    assert looks_binary(data) is binary


@pytest.mark.parametrize(
    ("data", "decoded"),
    [
        (b"", DecodedFile("", False, "utf-8")),
        ("\u00e9t\u00e9\n".encode(), DecodedFile("\u00e9t\u00e9\n", False, "utf-8")),
        (b"\xef\xbb\xbfhi\n", DecodedFile("hi\n", True, "utf-8")),
        (b"caf\xe9\n", DecodedFile("caf\u00e9\n", False, "latin-1")),
        ("\ufeffhi\r\n".encode("utf-16-le"), DecodedFile("hi\r\n", True, "utf-16-le")),
        ("\ufeffhi".encode("utf-16-be"), DecodedFile("hi", True, "utf-16-be")),
        ("\ufeffhi".encode("utf-32-le"), DecodedFile("hi", True, "utf-32-le")),
        # A BOM followed by invalid UTF-8: the whole thing is latin-1.
        (b"\xef\xbb\xbf\xe9", DecodedFile("\u00ef\u00bb\u00bf\u00e9", False, "latin-1")),
    ],
)
def test_decode_file_and_encode_back(data: bytes, decoded: DecodedFile) -> None:
    assert decode_file(data) == decoded
    assert encode_file(decoded.text, decoded) == data


@pytest.mark.parametrize(
    ("text", "eol", "split"),
    [
        ("a\r\nb\r\n", "\n", (["a\r", "b\r"], True)),  # a "\r" of a LF file is text
        ("a\nb\r\nc", "\r\n", (["a", "b", "c"], False)),  # either ends a CRLF line
        ("a\r\nb\r", "\r\n", (["a", "b\r"], False)),  # the last piece ends no line
        ("", "\r\n", ([""], False)),
        ("a\rb\r", "\r", (["a", "b"], True)),
    ],
)
def test_split_as_splits_as_the_file_ends_its_lines(
    text: str, eol: Eol, split: tuple[list[str], bool]
) -> None:
    assert split_as(text, eol) == split


def test_encode_file_refuses_what_latin1_cannot_hold() -> None:
    latin = decode_file(b"caf\xe9")
    with pytest.raises(ValueError, match=r"latin-1 cannot hold '\u2603' \(line 2\)"):
        encode_file("caf\u00e9\n\u2603", latin)
    assert encode_file("x") == b"x"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain", "plain"),
        ("\x1b[1;31mred\x1b[0m", "red"),
        ("\x1b[?25l\x1b[2K\x1b[1Gdone", "done"),
        ("\x1b]0;window title\x07after", "after"),
        ("\x1b]8;;https://x.y\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1bP1$r0m\x1b\\dcs", "dcs"),
        ("\x1b(B\x1b)0\x1b7\x1b8\x1b=\x1b>\x1b#8text", "text"),
        ("line1\r\nline2\r\n", "line1\nline2\n"),
        ("10%\r50%\r100%\n", "10%50%100%\n"),
        ("tab\there\x07\x08\x00!", "tab\there!"),
        ("cut at end\x1b[38;5", "cut at end"),
        ("cut osc\x1b]0;ti", "cut osc"),
        ("lone esc\x1b", "lone esc"),
        # Malformed CSI: the introducer goes, the rest shows.
        ("a\x1b[1;\nb", "a1;\nb"),
        ("caf\u00e9 \u2603", "caf\u00e9 \u2603"),
    ],
)
def test_strip_ansi(raw: str, clean: str) -> None:
    assert strip_ansi(raw) == clean


@pytest.mark.parametrize(
    ("text", "limit", "want", "truncated"),
    [
        ("hello", 10, "hello", False),
        ("hello", 5, "hello", False),
        ("hello", 3, "llo", True),
        ("hello", 0, "", True),
        ("", 0, "", False),
        # "é" is 2 bytes, "☃" 3, "😀" 4: a cut inside one drops it whole.
        ("a\u00e9b", 2, "b", True),
        ("a\u00e9b", 3, "\u00e9b", True),
        ("\u2603\u2603", 5, "\u2603", True),
        ("\u2603\u2603", 4, "\u2603", True),
        ("\u2603\u2603", 3, "\u2603", True),
        ("\u2603\u2603", 2, "", True),
        ("x\U0001f600", 4, "\U0001f600", True),
        ("x\U0001f600", 3, "", True),
    ],
)
def test_truncate_from_start(text: str, limit: int, want: str, truncated: bool) -> None:
    assert truncate_from_start(text, limit) == (want, truncated)
    assert len(want.encode()) <= limit


def test_truncate_rejects_negative_limit() -> None:
    with pytest.raises(ValueError, match="byte_limit must be 0 or more, got -1"):
        truncate_from_start("x", -1)


def test_utf8_tail_never_starts_mid_character() -> None:
    data = "\u00e9\u2603\U0001f600z".encode()
    for limit in range(len(data) + 2):
        tail = utf8_tail(data, limit)
        assert len(tail) <= limit
        assert data.endswith(tail)
        tail.decode("utf-8")  # would raise on a partial character


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_chunk_decoder_holds_a_utf8_character_split_across_chunks() -> None:
    snowman = "\u2603".encode()  # 3 bytes
    decoder = ChunkDecoder()
    assert decoder.feed(b64(b"snow " + snowman[:1])) == "snow "
    assert decoder.feed(b64(snowman[1:2])) == ""
    assert decoder.feed(b64(snowman[2:] + b"!")) == "\u2603!"
    assert decoder.flush() == ""


def test_chunk_decoder_holds_an_escape_sequence_split_across_chunks() -> None:
    decoder = ChunkDecoder()
    assert decoder.feed(b64(b"ok \x1b[3")) == "ok "
    assert decoder.feed(b64(b"2m")) == ""
    assert decoder.feed(b64(b"green\x1b]0;ti")) == "green"
    assert decoder.feed(b64(b"tle\x1b")) == ""
    assert decoder.feed(b64(b"\\done\r")) == "done"
    assert decoder.feed(b64(b"\n")) == "\n"


def test_chunk_decoder_raw_mode_keeps_escapes_but_never_splits_them() -> None:
    decoder = ChunkDecoder(strip=False)
    assert decoder.feed(b64(b"a\x1b[3")) == "a"
    assert decoder.feed(b64(b"1mb\r\n")) == "\x1b[31mb\r\n"


def test_chunk_decoder_output_equals_decoding_at_once_for_every_split() -> None:
    raw = "x\x1b[1;32m\u00e9\u2603\x1b]0;t\x07\r\n\U0001f600\x1b(Bend".encode()
    want = strip_ansi(raw.decode())
    for cut in range(len(raw) + 1):
        for cut2 in range(cut, len(raw) + 1):
            decoder = ChunkDecoder()
            parts = [raw[:cut], raw[cut:cut2], raw[cut2:]]
            got = "".join(decoder.feed(b64(part)) for part in parts) + decoder.flush()
            assert got == want, (cut, cut2)


def test_chunk_decoder_flush_replaces_an_incomplete_character() -> None:
    decoder = ChunkDecoder()
    assert decoder.feed(b64("\u2603".encode()[:2])) == ""
    assert decoder.flush() == "\ufffd"


def test_chunk_decoder_reset_drops_held_state() -> None:
    decoder = ChunkDecoder()
    decoder.feed(b64(b"\x1b[3"))
    decoder.reset()
    assert decoder.feed(b64(b"1mx")) == "1mx"


def test_chunk_decoder_rejects_bad_base64() -> None:
    with pytest.raises(ValueError, match="terminal output chunk is not base64"):
        ChunkDecoder().feed("not base64!")


def test_chunk_decoder_lets_go_of_an_endless_osc() -> None:
    decoder = ChunkDecoder(strip=False)
    assert decoder.feed(b64(b"\x1b]0;")) == ""
    out = decoder.feed(b64(b"x" * 5000))
    assert out == "\x1b]0;" + "x" * 5000
