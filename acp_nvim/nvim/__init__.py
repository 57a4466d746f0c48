"""The Neovim side of the Python process: the only package that imports pynvim.

:class:`Host` is the handler object both entries build — ``python -m acp_nvim``
started by Lua with ``jobstart(..., {rpc = true})``, and the classic remote
plugin in ``rplugin/python3/acp_nvim.py``.
"""

from __future__ import annotations

__all__ = ["Host", "run_stdio"]

from acp_nvim.nvim.host import Host, run_stdio
