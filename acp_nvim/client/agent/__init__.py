"""The agent: its process, the JSON-RPC connection, negotiation, and one ``Sessions``
interface with a v1 and a v2 implementation (``v1.py``, ``v2.py``).

Every ACP message is translated here and nowhere else: a v1 message is handled in
``v1.py``, a v2 message in ``v2.py``. ``connection.AgentConnection`` holds one
``Sessions`` and never asks which version it speaks.
"""
