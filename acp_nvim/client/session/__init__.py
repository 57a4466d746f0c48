"""One session as the user sees it: the normalized model, the chat that owns it, the view.

Knows no wire types and no services: adapters (``client.agent``) call the chat's
``on_*`` methods with version-neutral patches; the chat hands render ops to the
Editor port. Imported only below ``client.agent`` and ``client.services``.
"""
