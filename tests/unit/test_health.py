"""What :checkhealth acp and the host's start rely on, without Neovim."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_nvim import __main__ as entry
from acp_nvim.health import PYPROJECT, STAMP, dependencies_digest

ROOT = Path(__file__).resolve().parents[2]


def test_digest_follows_the_dependencies_only() -> None:
    text = PYPROJECT.read_text()
    digest = dependencies_digest(text)
    unrelated = text.replace('version = "0.1.0"', 'version = "0.2.0"').replace(
        '"pytest>=8"', '"pytest>=9"'
    )
    assert dependencies_digest(unrelated) == digest
    for changed in (
        text.replace('"anyio>=4.11"', '"anyio>=4.12"'),
        text.replace('"msgspec>=0.18",', '"msgspec>=0.18",\n  "pydantic>=2",'),
        text.replace('requires-python = ">=3.10"', 'requires-python = ">=3.11"'),
    ):
        assert changed != text
        assert dependencies_digest(changed) != digest


def test_stamp_is_written_into_the_venv_and_reported(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")

    def stale() -> str:
        code = "import json, acp_nvim.health as h; print(json.dumps(h.report({})['stale']))"
        return subprocess.run(
            [python, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    assert stale() == "true"  # built by hand: nothing recorded
    subprocess.run([python, "-m", "acp_nvim.health", "--stamp"], cwd=ROOT, check=True)
    assert (venv / STAMP).read_text().strip() == dependencies_digest(PYPROJECT.read_text())
    assert stale() == "false"
    (venv / STAMP).write_text("something older\n")
    assert stale() == "true"


def test_too_old_a_python_says_so_on_its_last_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 9, 2, "final", 0))
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    assert exit_.value.code == 3
    assert capsys.readouterr().err == (
        f"{entry.START_ERROR}{sys.executable} is Python 3.9.2; acp.nvim needs Python 3.10 or newer\n"
    )
