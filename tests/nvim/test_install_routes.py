"""One smoke test per install route: plugin venv (lazy.nvim build), packadd, rplugin."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pynvim

from tests.nvim.conftest import ROOT, Editor, nvim_binary


def chat_round_trip(editor: Editor) -> None:
    editor.open_chat()
    editor.lua("require('acp').send('route check')")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    assert "You said: *route check*" in editor.transcript_text()


def test_default_host_runs_from_the_plugin_venv(editor: Editor) -> None:
    # What lazy.nvim's `build` step creates: <plugin>/.venv. No `python` option given.
    venv_python = ROOT / ".venv" / "bin" / "python"
    assert venv_python.exists(), "make test creates .venv in the plugin root"
    editor.lua("require('acp').setup({})")
    assert editor.lua("return require('acp.host').python()") == str(venv_python)
    chat_round_trip(editor)


def _child(tmp_path: Path, init: str, extra_env: dict[str, str] | None = None) -> Editor:
    env = {**os.environ, "ACP_DEMO_DELAY": "0", **(extra_env or {})}
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        path = tmp_path / f"xdg-{name.lower()}"
        path.mkdir(exist_ok=True)
        env[f"XDG_{name}_HOME"] = str(path)
    init_file = tmp_path / "init.lua"
    init_file.write_text(init)
    saved = os.environ.copy()
    os.environ.clear()
    os.environ.update(env)
    try:
        nvim = pynvim.attach(
            "child",
            argv=[nvim_binary(), "--embed", "--headless", "-i", "NONE", "-n", "-u", str(init_file)],
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nvim.exec_lua("dofile(...)", str(ROOT / "tests" / "nvim" / "events.lua"))
    return Editor(nvim, "unused", tmp_path)


def test_packadd_route(tmp_path: Path) -> None:
    pack = tmp_path / "xdg-data" / "nvim" / "site" / "pack" / "acp" / "opt"
    pack.mkdir(parents=True)
    (pack / "acp.nvim").symlink_to(ROOT)
    editor = _child(
        tmp_path,
        f"vim.cmd.packadd('acp.nvim')\nrequire('acp').setup({{ python = {str(sys.executable)!r} }})\n",
    )
    try:
        assert editor.lua("return vim.fn.exists(':AcpChat')") == 2
        chat_round_trip(editor)
    finally:
        editor.quit()


def test_remote_plugin_route(tmp_path: Path) -> None:
    init = (
        f"vim.g.python3_host_prog = {str(sys.executable)!r}\n"
        f"vim.opt.runtimepath:prepend({str(ROOT)!r})\n"
        "vim.cmd('runtime plugin/acp.lua')\n"
    )
    editor = _child(tmp_path, init, {"PYTHONPATH": str(ROOT)})
    try:
        editor.nvim.command("UpdateRemotePlugins")
        manifest = editor.lua("return vim.fn.stdpath('data') .. '/rplugin.vim'")
        assert "AcpHostNotify" in Path(manifest).read_text()
        editor.nvim.command(f"source {manifest}")
        editor.lua("require('acp').setup({ host = 'rplugin' })")
        chat_round_trip(editor)
        assert editor.lua("return require('acp.host').chan") is None  # no job of our own
        # Buffer reads: Neovim's updates of a read buffer reach the shared host, which
        # must route them to us (no "no handler" errors) and answer the new text.
        path = tmp_path / "read.txt"
        path.write_text("one\n")
        editor.nvim.command(f"edit {path}")
        editor.lua(
            "require('acp').setup(...)",
            {"host": "rplugin", "agents": {"files": editor.fake_agent("files")}},
        )
        editor.lua("require('acp').open({agent = 'files', new = true})")
        editor.wait_event("AcpSessionReady", count=2)
        read = json.dumps([{"read": {"path": str(path)}}])
        for turn, text in ((2, "one"), (3, "two")):
            editor.lua(
                "vim.api.nvim_buf_set_lines(vim.fn.bufnr(...), 0, -1, false, {select(2, ...)})",
                str(path),
                text,
            )
            editor.lua("require('acp').send(...)", read)
            editor.wait_event("AcpTurnEnd", count=turn)
            results = [line for line in editor.transcript() if line.startswith("RESULT ")]
            assert results[-1] == f"RESULT {json.dumps({'content': text + chr(10)})}"
        assert editor.nvim.vvars["errmsg"] == ""
    finally:
        editor.quit()
