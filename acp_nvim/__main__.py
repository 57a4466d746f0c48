"""``python -m acp_nvim``: the process Lua starts with ``jobstart(..., {rpc = true})``."""

from __future__ import annotations

from acp_nvim.nvim.host import run_stdio

if __name__ == "__main__":
    run_stdio()
