"""``python -m acp_nvim``: the process Lua starts with ``jobstart(..., {rpc = true})``.

A Python too old for acp.nvim, or one without its dependencies, stops here with a
traceback (for ``:AcpLog``) and then one line starting with :data:`START_ERROR`
that says what failed; Lua shows that line in the chat with the fix.
"""

# No `from __future__` and nothing newer than Python 3.7 in this file: an old
# Python must get far enough to say that it is too old.
import gc
import os
import sys
from typing import NoReturn

__all__ = ["START_ERROR", "main"]

START_ERROR = "acp.nvim start error: "


def _fail(what: str) -> NoReturn:
    sys.stderr.write(START_ERROR + what + "\n")
    sys.exit(3)


def _behind_the_editor() -> None:
    """Make this thread, and so every thread and process started from here on (the
    agents and what they run), batch work: its wake-ups then never preempt Neovim
    on its core, which finishes its loop turn first (decision 0069). Only Linux has
    the policy; elsewhere, or where it is refused, nothing changes."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def _spawn_first_agent() -> None:
    """The first chat's agent starts now, while the rest is imported (decision 0051).
    Without the modules it needs, nothing starts here: the import below says why."""
    try:
        from acp_nvim.client.agent import first

        first.spawn()
    except ImportError:
        pass


def main() -> None:
    # Start-up makes some 30,000 objects for the collector, which live as long as
    # the process; walking them while they piled up cost ~10 ms of it. The host
    # turns the collector back on once they are in (acp_nvim/nvim/host.py).
    gc.disable()
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 10):  # noqa: UP036 -- the check is for Pythons we do not support
        _fail(f"{sys.executable} is Python {version}; acp.nvim needs Python 3.10 or newer")
    _behind_the_editor()
    _spawn_first_agent()
    try:
        from acp_nvim.nvim.host import run_stdio
    except ImportError as err:
        import traceback

        traceback.print_exc()
        _fail(f"{sys.executable} (Python {version}) lacks a module acp.nvim needs: {err}")
    run_stdio()


if __name__ == "__main__":
    main()
