"""The headless tests' harness, as a run of them shows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.nvim.conftest import ROOT

# The run's pytest gets a SIGTERM while pynvim waits for Neovim (inside its loop,
# where an answer resumes a request), as when `timeout` cuts a run; the next test
# must not run.
CUT = """
import os
import signal


def test_cut(editor):
    def cut():
        editor.lua("return 1")
        os.kill(os.getpid(), signal.SIGTERM)

    editor.nvim.run_loop(None, None, cut)


def test_after_the_cut():
    pass
"""


def test_a_run_cut_by_sigterm_stops_and_says_so(tmp_path: Path) -> None:
    """pynvim turns a SIGTERM into the running test's error; the run stopped nowhere
    and the cut read as that test's flake (flake41)."""
    (tmp_path / "test_cut.py").write_text(CUT)
    pytest = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"]
    run = subprocess.run(
        [*pytest, "-p", "tests.nvim.conftest", "--basetemp", str(tmp_path / "bt"), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Received signal SIGTERM" in run.stdout, run.stdout
    assert "SIGTERM received (the run was cut, as by `timeout`)" in run.stdout, run.stdout
    assert "test_after_the_cut" not in run.stdout, run.stdout
