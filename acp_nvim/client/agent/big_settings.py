"""Settings updates too big to convert on the loop (issue 29.7, decision 0038).

A legal ``config_option_update`` of 1,000 selects of 500 choices decodes off the loop
(protocol/connection.py), but turning its 500,000 choices into `ConfigOption` and
status entries one by one took the loop a second. Past `OFF_LOOP_CHOICES` that is
done in a worker thread, whose GIL handoffs let the loop serve other chats meanwhile.
Their status entries leave the choices out (past `view.SENT_CHOICES`): Lua asks for
one setting's when a picker needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread
import msgspec

from acp_nvim.client.session import view
from acp_nvim.client.session.model import ConfigOption

# Below this many choices (a group counts once) the conversion costs the loop a few ms.
OFF_LOOP_CHOICES = 10_000


class Converted(msgspec.Struct, frozen=True):
    """A settings update already converted: its options and their status entries."""

    options: list[ConfigOption]
    entries: list[dict[str, Any]]


async def off_loop(
    updates: list[Any],
    settings: type[Any],
    convert: Callable[[Sequence[Any]], list[ConfigOption]],
) -> list[Any]:
    """``updates``, each ``settings`` update past `OFF_LOOP_CHOICES` replaced by its
    `Converted`, made in a worker thread (the caller awaits it: order is kept)."""
    if not any(issubclass(kind, settings) for kind in set(map(type, updates))):
        return updates  # a stream's reads: one C pass, a step per kind of update
    result = []
    for update in updates:
        if isinstance(update, settings) and _choices(update.config_options) > OFF_LOOP_CHOICES:
            update = await anyio.to_thread.run_sync(_converted, convert, update.config_options)
        result.append(update)
    return result


def _choices(options: Sequence[Any]) -> int:
    return sum(len(c) for o in options if isinstance(c := getattr(o, "options", None), list))


def _converted(
    convert: Callable[[Sequence[Any]], list[ConfigOption]], raw: Sequence[Any]
) -> Converted:
    options = convert(raw)
    whole = view.choice_count(options) <= view.SENT_CHOICES
    return Converted(options, [view.config_entry(o, whole) for o in options])
