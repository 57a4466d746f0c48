"""What an agent asks of the editor, with no wire types: files, the review of changes,
git baselines, permissions, terminals.

Services take plain model types and a lookup of chats; each protocol adapter
(``client.agent.v1`` / ``v2``), and the editor MCP server, translate their
requests into these calls and ``ServiceError`` back into their own errors.
"""
