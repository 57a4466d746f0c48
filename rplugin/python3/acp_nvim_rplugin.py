"""The classic remote-plugin entry (``:UpdateRemotePlugins``).

It builds the same :class:`acp_nvim.nvim.Host` as ``python -m acp_nvim``;
``acp_nvim`` and its dependencies must be importable by ``g:python3_host_prog``.
"""

from __future__ import annotations

from typing import Any

import pynvim

from acp_nvim.nvim import Host


@pynvim.plugin
class AcpRemotePlugin:
    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.host = Host(nvim)

    @pynvim.function("AcpHostNotify", sync=False)
    def notify(self, args: list[Any]) -> None:
        self.host.on_notification("acp", args)

    # Updates of the buffers the agent reads (acp_nvim/nvim/mirror.py) come to
    # this shared host under Neovim's own names.
    @pynvim.rpc_export("nvim_buf_lines_event")
    def lines_event(self, *args: Any) -> None:
        self.host.on_notification("nvim_buf_lines_event", list(args))

    @pynvim.rpc_export("nvim_buf_changedtick_event")
    def changedtick_event(self, *args: Any) -> None:
        self.host.on_notification("nvim_buf_changedtick_event", list(args))

    @pynvim.rpc_export("nvim_buf_detach_event")
    def detach_event(self, *args: Any) -> None:
        self.host.on_notification("nvim_buf_detach_event", list(args))

    @pynvim.shutdown_hook
    def shutdown(self) -> None:
        self.host.shutdown()
