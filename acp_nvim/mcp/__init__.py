"""The stdio shim agents start as the editor's MCP server: ``python -m acp_nvim.mcp``.

A program of its own, on the standard library alone; it relays bytes to the server
in the host (``acp_nvim.client.mcp``) and imports nothing of it.
"""
