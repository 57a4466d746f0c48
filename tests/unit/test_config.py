"""Options are validated key by key; errors name the dotted key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from acp_nvim.client.config import ConfigError, builtin_agents, load_config


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"agents": {"claude": {"cmd": "claude"}}},
            "agents.claude.cmd: expected a list, got a string",
        ),
        ({"agents": {"a": {"cmd": []}}}, "agents.a.cmd: expected a list of length >= 1"),
        (
            {"agents": {"a": {"cmd": [" "]}}},
            "agents.a.cmd: the first item must name a program",
        ),
        (
            {"agents": {"a": {"cmd": ["x"], "env": {"K": 1}}}},
            "agents.a.env.K: expected a string",
        ),
        ({"agents": {"a": {"cmd": ["x"], "bogus": 1}}}, "agents.a.bogus: unknown option"),
        ({"bogus": True}, "bogus: unknown option"),
        ({"protocol_version": 3}, "protocol_version: expected 1 or 2, got 3"),
        (
            {"permission_policy": "yes"},
            "permission_policy: expected 'ask' or 'allow_reads' or 'allow_all', got 'yes'",
        ),
        ({"chat": {"position": "top"}}, "chat.position: expected one of 'right', 'left'"),
        (
            {"chat": {"width": 3}},
            "chat.width: expected a fraction (at most 1) or a whole number >= 20, got 3",
        ),
        ({"chat": {"width": 20.5}}, "chat.width: expected a fraction (at most 1) or a whole"),
        ({"chat": {"height": 0}}, "chat.height: expected a number > 0"),
        ({"chat": {"height": 4}}, "chat.height: expected a fraction (at most 1) or a whole"),
        ({"chat": {"min_width": 0}}, "chat.min_width: expected an integer >= 1"),
        ({"default_agent": "nope"}, "default_agent: unknown agent 'nope'"),
        ({"agents": {"a": {}}}, "agents.a.cmd: required"),
        ({"agents": {"a b": {"cmd": ["x"]}}}, "agents: agent name 'a b' must be a non-empty word"),
        ({"auto_save": 1}, "auto_save: expected a boolean, got an integer"),
        (
            {"fs_access": {"outside": "yes"}},
            "fs_access.outside: expected 'ask' or 'allow' or 'deny', got 'yes'",
        ),
        (
            {"fs_access": {"roots": ["notes"]}},
            "fs_access.roots: 'notes' is not an absolute path (nor ~/...)",
        ),
        ({"roots": ["lib"]}, "roots: 'lib' is not an absolute path (nor ~/...)"),
        ({"roots": ["/no/such/lib"]}, "roots: '/no/such/lib' is not a directory"),
        (
            {"agents": {"mine": {"cmd": ["x"], "roots": ["/no/such/lib"]}}},
            "agents.mine.roots: '/no/such/lib' is not a directory",
        ),
        (
            {"diff_preview": "side"},
            "diff_preview: expected 'inline' or 'split' or false, got 'side'",
        ),
        ({"hunk_keys": True}, "hunk_keys: expected a table or false, got a boolean"),
        ({"hunk_keys": {"stage": "s"}}, "hunk_keys.stage: unknown option"),
        ({"keys": {"chat": {"hide": True}}}, "keys.chat.hide: expected a non-empty string or false, got a boolean"),
        ({"keys": {"input": {"send": ""}}}, "keys.input.send: expected a non-empty string or false, got ''"),
        ({"keys": {"queue": {"drop": "x"}}}, "keys.queue.drop: unknown option"),
        ("x", "options must be a table"),
    ],
)
def test_invalid_options_name_the_key(raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    assert str(err.value).startswith(message)


def test_defaults_and_builtin_demo_agent() -> None:
    config = load_config([])  # an empty Lua table arrives as a list
    name, agent = config.agent(None)
    assert name == "demo"
    assert agent.cmd == [sys.executable, "-m", "acp_nvim.demo_agent"]


def test_configured_agent_overrides_builtin_and_unknown_agent_lists_known() -> None:
    config = load_config({"agents": {"claude": {"cmd": ["my-claude"]}}, "default_agent": "claude"})
    assert config.agent(None)[1].cmd == ["my-claude"]
    with pytest.raises(ConfigError, match=r"unknown agent 'x' \(configured: auggie, claude, claude-code-acp, codex"):
        config.agent("x")


def test_agent_cwd_expands_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    config = load_config({"agents": {"mine": {"cmd": ["x"], "cwd": "~/project"}}})
    assert config.agent("mine")[1].cwd == "/home/someone/project"


def test_agent_program_expands_home_as_its_cwd_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """``cmd = {"~/bin/agent"}`` failed with "'~/bin/agent' not found", the file there."""
    monkeypatch.setenv("HOME", "/home/someone")
    config = load_config({"agents": {"mine": {"cmd": ["~/bin/agent", "~/arg"]}}})
    assert config.agent("mine")[1].cmd == ["/home/someone/bin/agent", "~/arg"]


def test_demo_agent_runs_the_tree_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not whatever acp_nvim the venv has installed: a strict editable install lacks
    # modules added since, and the host itself runs from the tree (PYTHONPATH).
    import acp_nvim

    tree = str(Path(acp_nvim.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = load_config({}).agent("demo")[1].env
    assert env["PYTHONPATH"].split(os.pathsep) == [tree, "/elsewhere"]


def test_empty_lua_tables_read_as_tables() -> None:
    # Lua cannot tell an empty list from an empty table; pynvim sends [] for both.
    config = load_config({"agents": {"a": {"cmd": ["x"], "env": []}}, "chat": []})
    assert config.agents["a"].env == {} and config.chat.min_width == 40
    assert load_config([]) == load_config(None) == load_config({})


def test_an_agents_roots_come_after_the_global_ones_home_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "lib").mkdir()
    (tmp_path / "docs").mkdir()
    config = load_config(
        {"roots": ["~/lib"], "agents": {"mine": {"cmd": ["x"], "roots": ["~/docs/", "~/lib"]}}}
    )
    mine = config.agent("mine")[1]
    assert config.agent_roots(mine) == [str(tmp_path / "lib"), str(tmp_path / "docs")]
    assert config.agent_roots(config.agent("demo")[1]) == [str(tmp_path / "lib")]


def test_fs_access_roots_expand_home() -> None:
    access = load_config({"fs_access": {"roots": ["~/notes", "/srv"]}}).fs_access
    assert (access.outside, access.roots) == ("ask", [os.path.expanduser("~/notes"), "/srv"])


@pytest.mark.parametrize("size", [0.5, 1, 80])
def test_chat_sizes_are_fractions_or_cells(size: float) -> None:
    chat = load_config({"chat": {"width": size, "height": size, "position": "float"}}).chat
    assert (chat.width, chat.height, chat.position) == (size, size, "float")


def test_every_wrong_option_is_reported_at_once() -> None:
    raw = {
        "chat": {"width": "wide", "position": "top", "bogus": 1},
        "log_lines": "many",
        "agents": {"a": {"cmd": "a"}, "b": {"cmd": ["b"]}},
        "keys": {"review": {"accept": 1}},
        "default_agent": "nope",
    }
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    keys = sorted(problem.split(":")[0] for problem in err.value.problems)
    assert keys == [
        "agents.a.cmd",
        "chat.bogus",
        "chat.position",
        "chat.width",
        "default_agent",
        "keys.review.accept",
        "log_lines",
    ]
    assert err.value.summary().startswith("invalid options: ")
    with pytest.raises(ConfigError) as one:
        load_config({"log_lines": "many"})
    assert one.value.summary() == "invalid option log_lines: expected an integer, got a string"


def test_permission_keys_by_kind_turned_off_are_none() -> None:
    keys = load_config({"keys": {"permission": {"allow_always": False}}}).keys.permission
    assert keys.by_kind() == {
        "allow_once": "a", "allow_always": None, "reject_once": "r", "reject_always": "R"
    }  # fmt: skip


def test_a_built_in_agent_entry_without_cmd_tunes_it() -> None:
    """`agents = { codex = { editor_mcp = false } }` (the help's example) was
    "agents.codex.cmd: required": an entry replaced the built-in whole."""
    config = load_config(
        {"agents": {"codex": {"editor_mcp": False}, "demo": {"mode": "code", "env": {"X": "1"}}}}
    )
    agents = config.all_agents()
    assert (agents["codex"].cmd, agents["codex"].editor_mcp) == (["codex-acp"], False)
    demo = builtin_agents()["demo"]
    assert (agents["demo"].cmd, agents["demo"].mode) == (demo.cmd, "code")
    assert agents["demo"].env == {**demo.env, "X": "1"}  # variables added to the built-in's
    # With `cmd` an entry replaces the built-in; an agent of another name needs one.
    assert load_config({"agents": {"codex": {"cmd": ["mine"]}}}).all_agents()["codex"].cmd == ["mine"]
    with pytest.raises(ConfigError, match=r"agents\.mine\.cmd: required"):
        load_config({"agents": {"mine": {"mode": "x"}}})


def test_an_sse_server_needs_a_url_and_takes_no_command() -> None:
    servers = {"ev": {"type": "sse", "url": "http://h/sse", "headers": {"K": "v"}}}
    assert load_config({"mcp_servers": servers}).mcp_servers["ev"].type == "sse"
    wrong = {"a": {"type": "sse"}, "b": {"type": "sse", "url": "u", "command": "x"},
             "c": {"command": "x", "url": "u"}}  # fmt: skip
    with pytest.raises(ConfigError) as err:
        load_config({"mcp_servers": wrong})
    assert sorted(err.value.problems) == [
        "mcp_servers.a.url: required for an sse server",
        "mcp_servers.b.command: only for a stdio server",
        'mcp_servers.c.url: only for type = "http" or "sse"',
    ]
