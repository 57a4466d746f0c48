"""The protocol log (:AcpLog): bounded, and without the secrets the wire carries."""

from __future__ import annotations

import json

import pytest

from acp_nvim.client.log import HIDDEN, ProtocolLog, redacted


def test_env_and_header_values_are_replaced_wherever_they_are() -> None:
    servers = [
        {"name": "gh", "command": "gh", "args": [], "env": [{"name": "T", "value": "ghp_1"}]},
        {"type": "http", "name": "w", "url": "u", "headers": [{"name": "A", "value": "B 2"}]},
    ]
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new",
           "params": {"cwd": "/p", "mcpServers": servers}}  # fmt: skip
    create = {"jsonrpc": "2.0", "id": 0, "method": "terminal/create",
              "params": {"sessionId": "s", "command": "x", "env": [{"name": "K", "value": "3"}]}}  # fmt: skip
    batch = [create, {"jsonrpc": "2.0", "method": "x", "params": {"env": {"K": "4"}}}]
    for message in (new, create, batch):
        line = redacted(json.dumps(message).encode())
        for secret in ("ghp_1", "B 2", '"3"', '"4"'):
            assert secret.encode() not in line
        assert HIDDEN.encode() in line
    shown = json.loads(redacted(json.dumps(new).encode()))
    assert shown["params"]["mcpServers"][0]["env"] == [{"name": "T", "value": HIDDEN}]


def test_lines_without_secrets_or_json_are_kept_as_they_are() -> None:
    for line in (b'{"jsonrpc":"2.0","method":"session/update"}', b'not json "env" at all',
                 b'{"env": "a string is no list of variables"}', b"[" * 100_000):  # fmt: skip
        assert redacted(line) is line


def test_the_log_redacts_traffic_not_stderr_and_cuts_after() -> None:
    log = ProtocolLog(10)
    secret = {"params": {"env": [{"name": "K", "value": "s" * 5000}]}}
    log.add("a", ">>", json.dumps(secret).encode())
    log.add("a", "!!", b"env: the agent's own words")
    sent, said = log.lines()
    assert "sss" not in sent and HIDDEN in sent and "bytes)" not in sent
    assert said.endswith("a !! env: the agent's own words")


def test_a_long_line_keeps_its_first_4000_characters_and_says_its_size() -> None:
    """doc/acp.txt (|:AcpLog|, 27.10): lines longer than 4000 characters are cut."""
    log = ProtocolLog(10)
    log.add("a", "<<", b"x" * 10_000)
    log.add("a", "<<", b"y" * 4000)
    [cut, whole] = log.lines()
    assert cut.endswith(" a << " + "x" * 4000 + "… (10000 bytes)")
    assert whole.endswith(" a << " + "y" * 4000)


def test_the_log_keeps_its_last_lines_however_they_came() -> None:
    """A stream's reads come as hundreds of lines at once: the bound is in lines."""
    log = ProtocolLog(100)
    for read in range(10):
        log.add("a", "<<", *(f"r{read} l{n}".encode() for n in range(30)))
    shown = log.lines()
    assert len(shown) == len(log) == 100
    assert shown[0].endswith(" a << r6 l20") and shown[-1].endswith(" a << r9 l29")


def test_a_short_line_loses_its_secrets_when_the_log_is_read() -> None:
    log = ProtocolLog(10)
    create = {"method": "terminal/create", "params": {"env": [{"name": "K", "value": "s3cr3t"}]}}
    log.add("a", "<<", b"{}", json.dumps(create).encode())
    log.add("a", "!!", json.dumps(create))
    _, received, stderr = log.lines()
    assert "s3cr3t" not in received and HIDDEN in received
    assert "s3cr3t" in stderr  # the agent's own words are its own


def test_a_secret_past_the_kept_part_costs_no_json_and_a_big_line_with_one_is_not_shown() -> None:
    """Issue 29.7: the log read every 10 MB line through for the secret keys. Only
    the part it keeps is searched: a key past it has its value past it too."""
    log = ProtocolLog(10)
    late = b'{"description": "' + b"d" * 10_000 + b'", "env": [{"name": "K", "value": "sss"}]}'
    early = json.dumps({"env": [{"name": "K", "value": "sss"}], "d": "x" * (2 << 20)}).encode()
    log.add("a", "<<", late)
    log.add("a", "<<", early)
    kept_late, kept_early = log.lines()
    assert kept_late.endswith("d" * (4000 - len('{"description": "')) + f"… ({len(late)} bytes)")
    assert "sss" not in kept_early and "too long to hide them in" in kept_early


def test_a_reads_block_shows_as_its_lines_would() -> None:
    """A stream's read is logged as the block it came in, split, cut and hidden only
    when the log is read: what :AcpLog shows is what lines one by one would show."""
    create = {"method": "terminal/create", "params": {"env": [{"name": "K", "value": "s3cr3t"}]}}
    lines = [b"{}", b"x" * 10_000, json.dumps(create).encode(), b"y" * 100]
    block = b"\n".join([lines[0], b"", lines[1] + b"\r", *lines[2:]])
    by_lines, by_block = ProtocolLog(10), ProtocolLog(10)
    by_lines.add("a", "<<", *lines)
    by_block.traffic("a", "<<", block, len(lines))
    assert by_block.lines() == by_lines.lines()
    assert "s3cr3t" not in "".join(by_block.lines())


@pytest.mark.parametrize("block_lines", [1, 30, 400])
def test_blocks_count_as_their_lines(block_lines: int) -> None:
    log = ProtocolLog(100)
    for read in range(10):
        block = b"\n".join(f"r{read} l{n}".encode() for n in range(block_lines))
        log.traffic("a", "<<", block, block_lines)
    shown = log.lines()
    assert len(shown) == len(log) == min(100, 10 * block_lines)
    assert shown[-1].endswith(f" a << r9 l{block_lines - 1}")
