"""``make demo`` (scripts/demo.py) runs Neovim in a scratch project, never in this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_NVIM = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "NVIM v0.11.4"; exit 0; fi
pwd > "$DEMO_RECORD"
ls >> "$DEMO_RECORD"
printf '%s\\n' "$@" > "$DEMO_RECORD.args"
"""


def test_demo_runs_neovim_in_a_scratch_project_outside_the_checkout(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvim"
    fake.write_text(FAKE_NVIM)
    fake.chmod(0o755)
    record = tmp_path / "record"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DEMO_RECORD": str(record)}
    env["TMPDIR"] = str(tmp_path)  # the scratch project is kept: in the test's own directory

    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )

    assert done.returncode == 0, done.stderr
    cwd, *files = record.read_text().splitlines()
    project = Path(cwd).resolve()
    assert ROOT not in (project, *project.parents)
    assert tmp_path.resolve() in project.parents
    assert {"README.md", "demo.txt", "sample.py"} <= set(files)
    assert f"acp.nvim demo: the scratch project is {project}" in done.stdout
    assert "require('acp').open()" in (tmp_path / "record.args").read_text()
