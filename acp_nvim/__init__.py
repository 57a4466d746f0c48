"""acp.nvim: an Agent Client Protocol client for Neovim.

The Python side owns the agent processes and all protocol state; the Lua side
(``lua/acp``) draws. Only :mod:`acp_nvim.nvim` imports pynvim.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
