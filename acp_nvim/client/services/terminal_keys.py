"""Terminal keys (``t1``, ``t2``, ...): one count for every agent's terminals, since
their buffers share the editor. It goes on past the keys Neovim still holds from a
Python host before this one (the ``setup`` notification says where), so no key
names two terminals at once. Apart from the terminals service: the host sets it at
start, before anything of a chat is imported."""

from __future__ import annotations

_next = 1


def keys_from(number: int) -> None:
    """Neovim holds terminals up to key ``t{number - 1}``: new keys start past them."""
    global _next
    _next = max(_next, number)


def new_key() -> str:
    global _next
    _next += 1
    return f"t{_next - 1}"
