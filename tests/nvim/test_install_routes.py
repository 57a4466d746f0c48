"""One smoke test per install route: plugin venv (lazy.nvim build), packadd, rplugin."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.nvim.conftest import ROOT, Editor, child_editor


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


def test_packadd_route(tmp_path: Path) -> None:
    pack = tmp_path / "xdg-data" / "nvim" / "site" / "pack" / "acp" / "opt"
    pack.mkdir(parents=True)
    (pack / "acp.nvim").symlink_to(ROOT)
    editor = child_editor(
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
    with child_editor(tmp_path, init, {"PYTHONPATH": str(ROOT)}) as editor:
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
        editor.nvim.command(f"cd {tmp_path}")  # the session's directory (fs_access)
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
