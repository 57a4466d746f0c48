"""The headless Neovim tests skip without a Neovim, but never under CI=true."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.nvim.conftest import nvim_binary


@pytest.fixture
def no_nvim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No $NVIM_BIN, no nvim beside Python, an empty PATH."""
    monkeypatch.delenv("NVIM_BIN", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return tmp_path


@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
def test_no_neovim_under_ci_fails(no_nvim: Path, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="no Neovim found under CI=true"):
        nvim_binary()


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_no_neovim_elsewhere_skips(
    no_nvim: Path, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    if ci is not None:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="no Neovim found"):
        nvim_binary()


def test_found_neovim_is_used_under_ci(no_nvim: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    bin_dir = no_nvim / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvim").touch()
    assert nvim_binary() == str(bin_dir / "nvim")
    monkeypatch.setenv("NVIM_BIN", "/opt/nvim/bin/nvim")
    assert nvim_binary() == "/opt/nvim/bin/nvim"
