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

    @pynvim.function("AcpHostRequest", sync=True)
    def request(self, args: list[Any]) -> Any:
        return self.host.on_request("acp", args)

    @pynvim.shutdown_hook
    def shutdown(self) -> None:
        self.host.shutdown()
