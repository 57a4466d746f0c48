"""The MCP server core: lifecycle, versions, tools and resources for one client.

Both MCP generations are served:

- the handshake revisions 2024-11-05 … 2025-11-25: ``initialize`` agrees on a
  version (the client's when we know it, else our newest), ``notifications/
  initialized`` opens the session, resource list changes are notified;
- the handshake-less 2026-07-28 revision: every request names its version in
  ``_meta["io.modelcontextprotocol/protocolVersion"]`` and is served on its own;
  ``server/discover`` lists what we speak, an unknown version is answered
  ``-32022`` with that list. Its results carry ``resultType`` (and list results
  ``cacheScope``/``ttlMs``); notifications of that revision travel on
  ``subscriptions/listen`` streams, which this server does not offer.

Unknown methods are answered ``-32601``, ``prompts/list`` too (qwen asks it whatever
was advertised): no ``prompts`` capability is, and "Method not found" is what the MCP
SDKs answer and the agents' clients read as "none here". Malformed params ``-32602``; a tool's own
failure (a bad argument, a file it cannot read) is a result with ``isError``, so
the model can act on it. The tools themselves live in :mod:`._tools` (pydantic),
imported on first use, in a thread, so the event loop never stalls on it.

Not here: transports (``_socket`` for the stdio shim, ``_acp`` for MCP-over-ACP).
"""

from __future__ import annotations

__all__ = [
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "UNSUPPORTED_VERSION",
    "VERSION_META",
    "McpServer",
]

import os
import urllib.parse
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, Final

import anyio.to_thread

from acp_nvim import __version__
from acp_nvim.client.mcp._session import ToolSession, uri_path
from acp_nvim.client.services.errors import ServiceError
from acp_nvim.protocol import Connection, ConnectionClosed, RequestError

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: Final = ("2026-07-28",)
VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
UNSUPPORTED_VERSION: Final = -32022
_SUPPORTED: Final = [*reversed(MODERN_VERSIONS), *reversed(HANDSHAKE_VERSIONS)]
_SERVER_INFO: Final = {"name": "acp.nvim", "title": "Neovim (acp.nvim)", "version": __version__}
_INSTRUCTIONS: Final = (
    "The user's Neovim. Files here are what the user sees: read_buffer includes unsaved "
    "edits, edit_buffer and write_file change buffers the user has open without losing "
    "their typing and record every change for the user's review. Prefer these tools to "
    "reading and writing the disk yourself."
)
# Items per page of tools/list and resources/list.
PAGE_SIZE = 100

Handler = Callable[[dict[str, Any], str], Awaitable[dict[str, Any]]]
Notify = Callable[[str, dict[str, Any] | None], Awaitable[None]]

_tools_module: ModuleType | None = None


async def _tools() -> ModuleType:
    """The tool registry; its first import (pydantic) runs in a thread."""
    global _tools_module
    if _tools_module is None:
        from importlib import import_module

        _tools_module = await anyio.to_thread.run_sync(import_module, "acp_nvim.client.mcp._tools")
    return _tools_module


def _newer(version: str, than: str) -> bool:
    """Whether ``version`` is ``than`` or a later revision (dates sort as strings)."""
    return version >= than


def file_uri(path: str) -> str:
    return "file://" + urllib.parse.quote(path)


def _mime(path: str, filetype: str) -> str:
    import mimetypes  # reads the system's tables: not before a resource is listed

    guessed = mimetypes.guess_type(path)[0]
    if guessed is not None:
        return guessed
    return f"text/x-{filetype}" if filetype else "text/plain"


class McpServer:
    """One MCP client of the editor, whatever carries its messages.

    ``notify`` sends a notification to the client (None: the transport sends none).
    """

    def __init__(
        self, session: ToolSession, notify: Notify | None = None, *, page_size: int = PAGE_SIZE
    ) -> None:
        self.session = session
        self.notify = notify
        self.page_size = page_size
        self.version: str | None = None  # agreed by initialize
        self.initialized = False
        self._handlers: dict[str, Handler] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "resources/list": self._list_resources,
            "resources/read": self._read_resource,
            "resources/templates/list": self._list_templates,
        }

    def __repr__(self) -> str:
        state = "initialized" if self.initialized else "new"
        return f"<McpServer {self.version or 'no version'} {state} for {self.session!r}>"

    @property
    def methods(self) -> list[str]:
        return list(self._handlers)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one request.

        Raises:
            RequestError: unknown method, bad params, an unsupported version.
        """
        handler = self._handlers.get(method)
        if handler is None:
            raise RequestError.method_not_found(method)
        version = self._version(method, params)
        result = await handler(params, version)
        if version in MODERN_VERSIONS:
            meta = {**result.get("_meta", {}), "io.modelcontextprotocol/serverInfo": _SERVER_INFO}
            result = {**result, "resultType": "complete", "_meta": meta}
        return result

    def initialized_notification(self) -> None:
        """The client's ``notifications/initialized``: list changes may be sent now."""
        self.initialized = True

    async def resources_changed(self) -> None:
        """Buffers came or went: tell a client whose session began with a handshake."""
        if self.initialized and self.notify is not None:
            try:
                await self.notify("notifications/resources/list_changed", None)
            except ConnectionClosed:
                pass  # the client went away meanwhile: nobody to tell

    def attach(self, connection: Connection) -> None:
        """Serve this client on ``connection`` (a JSON-RPC stream of MCP messages)."""
        for method in self._handlers:
            connection.on_request(method, dict, self._route(method))

        async def initialized(_: Any) -> None:
            self.initialized_notification()

        async def cancelled(params: dict[str, Any]) -> None:
            # Stop the request; MCP wants no answer to it at all.
            connection.cancel_incoming(params.get("requestId"), reply=False)

        connection.on_notification("notifications/initialized", dict, initialized)
        connection.on_notification("notifications/cancelled", dict, cancelled)

    def _route(self, method: str) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        async def handle(params: dict[str, Any]) -> dict[str, Any]:
            return await self.request(method, params)

        return handle

    def _version(self, method: str, params: dict[str, Any]) -> str:
        """The revision this request is served in: the one its ``_meta`` names
        (2026-07-28 and later), else the one ``initialize`` agreed."""
        meta = params.get("_meta")
        requested = meta.get(VERSION_META) if isinstance(meta, dict) else None
        if requested is None or method == "initialize":
            return self.version or HANDSHAKE_VERSIONS[-1]
        if requested not in MODERN_VERSIONS:
            raise RequestError(
                UNSUPPORTED_VERSION,
                "Unsupported protocol version",
                {"supported": _SUPPORTED, "requested": requested},
            )
        return str(requested)

    # -- lifecycle

    def _capabilities(self, version: str) -> dict[str, Any]:
        if version in MODERN_VERSIONS:
            return {"tools": {}, "resources": {}}
        return {"tools": {"listChanged": False}, "resources": {"listChanged": True}}

    async def _initialize(self, params: dict[str, Any], _: str) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RequestError.invalid_params("protocolVersion: a string is required")
        # The client's version when we speak it, else our newest: the client decides.
        self.version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        return {
            "protocolVersion": self.version,
            "capabilities": self._capabilities(self.version),
            "serverInfo": _SERVER_INFO,
            "instructions": self._instructions(),
        }

    def _instructions(self) -> str:
        """How the tools work, and where the session works: its directory and workspace
        roots (an agent that takes no roots on ACP learns of them here)."""
        cwd, *roots = self.session.dirs
        where = f" The session's directory is {cwd}"
        if roots:
            where += "; its other workspace roots: " + ", ".join(roots)
        return f"{_INSTRUCTIONS}{where}."

    async def _ping(self, params: dict[str, Any], version: str) -> dict[str, Any]:
        return {}

    async def _discover(self, params: dict[str, Any], version: str) -> dict[str, Any]:
        return {
            "supportedVersions": _SUPPORTED,
            "capabilities": self._capabilities(MODERN_VERSIONS[-1]),
            "instructions": self._instructions(),
            **_cacheable(MODERN_VERSIONS[-1]),
        }

    # -- tools

    def _page(self, items: list[dict[str, Any]], params: dict[str, Any]) -> tuple[list[Any], Any]:
        """One page of ``items`` from the cursor in ``params``, and the next cursor."""
        cursor = params.get("cursor")
        start = 0 if cursor is None else _offset(cursor, len(items))
        end = start + self.page_size
        return items[start:end], (str(end) if end < len(items) else None)

    async def _list_tools(self, params: dict[str, Any], version: str) -> dict[str, Any]:
        tools = await _tools()
        described = [tools.describe(name, version) for name in self.session.tools]
        page, cursor = self._page(described, params)
        return _listed("tools", page, cursor, version)

    async def _call_tool(self, params: dict[str, Any], version: str) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str):
            raise RequestError.invalid_params("name: a string is required")
        if name not in self.session.tools:
            raise RequestError.invalid_params(f"Unknown tool: {name}")
        if arguments is not None and not isinstance(arguments, dict):
            raise RequestError.invalid_params("arguments: an object is required")
        tools = await _tools()
        result: dict[str, Any] = await tools.call(self.session, name, arguments or {})
        if not _newer(version, "2025-06-18"):
            result.pop("structuredContent", None)
        return result

    # -- resources: the open file buffers

    async def _list_resources(self, params: dict[str, Any], version: str) -> dict[str, Any]:
        resources = []
        for buffer in await self.session.editor.list_buffers():
            path = buffer["path"]
            resource = {
                "uri": file_uri(path),
                "name": os.path.basename(path),
                "mimeType": _mime(path, buffer.get("filetype") or ""),
                "description": "open in the editor"
                + (", with unsaved changes" if buffer.get("modified") else ""),
            }
            if _newer(version, "2025-06-18"):
                resource["title"] = os.path.relpath(path, self.session.cwd)
            resources.append(resource)
        page, cursor = self._page(resources, params)
        return _listed("resources", page, cursor, version)

    async def _list_templates(self, params: dict[str, Any], version: str) -> dict[str, Any]:
        return _listed("resourceTemplates", [], None, version)

    async def _read_resource(self, params: dict[str, Any], version: str) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RequestError.invalid_params("uri: a string is required")
        try:
            path = uri_path(uri)
        except ValueError as err:  # file://[::1/
            raise RequestError.invalid_params(f"uri: {err}") from None
        if path is None:
            raise RequestError.resource_not_found(uri)
        try:
            text = await self.session.review().read(path)
        except ServiceError as err:
            if err.kind == "not_found":
                raise RequestError.resource_not_found(uri) from None
            raise RequestError.invalid_params(str(err)) from None
        filetype = os.path.splitext(path)[1].lstrip(".")
        return {"contents": [{"uri": uri, "mimeType": _mime(path, filetype), "text": text}]}


def _offset(cursor: Any, size: int) -> int:
    """Where the page a cursor of ours names starts (its digits), within ``size``."""
    if isinstance(cursor, str) and cursor.isascii() and cursor.isdigit() and len(cursor) < 10:
        offset = int(cursor)
        if offset <= size:
            return offset
    raise RequestError.invalid_params(f"invalid cursor {cursor!r:.40}")


def _cacheable(version: str) -> dict[str, Any]:
    """What 2026-07-28 wants of list results: how long they may be cached (not at all)."""
    return {"cacheScope": "private", "ttlMs": 0} if version in MODERN_VERSIONS else {}


def _listed(key: str, page: list[Any], cursor: str | None, version: str) -> dict[str, Any]:
    result: dict[str, Any] = {key: page, **_cacheable(version)}
    if cursor is not None:
        result["nextCursor"] = cursor
    return result
