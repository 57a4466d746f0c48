"""A chat's session settings (mode, model, config options): the ones it starts with
(the agent's configured ones, or the user's again after a restart) and the user's
switches."""

from __future__ import annotations

__all__ = ["Settings", "Wanted", "chosen", "defaults"]

from collections.abc import Sequence
from typing import TYPE_CHECKING

from acp_nvim.client.app._context import AppContext
from acp_nvim.client.app._pool import AgentPool
from acp_nvim.client.config import AgentConfig
from acp_nvim.client.errors import AgentFailed

if TYPE_CHECKING:
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.session.chat import Chat
    from acp_nvim.client.session.model import ConfigOption

_SWITCH_WORDS = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}

Wanted = tuple[str, str, str | bool]  # how it is named in a notice, setting id or category, value


class Settings:
    def __init__(self, ctx: AppContext, pool: AgentPool) -> None:
        self.ctx = ctx
        self.pool = pool

    async def apply(self, connection: AgentConnection, chat: Chat, wanted: list[Wanted]) -> None:
        """Settings to have before the first prompt (the agent's configured mode,
        model and options, or the user's after a restart). One the agent does not
        offer is reported, not dropped silently."""
        for what, key, value in wanted:
            option = _setting(chat, key)
            choices = option.choices.values if option is not None else ()
            if option is None or (option.type == "select" and value not in choices):
                message = f"{chat.agent} does not offer {what}{_offered(choices)}"
                chat.info(f"*{message}*")
                self.ctx.editor.notify(message, "warn")
            elif option.current != value:
                try:
                    await connection.set_config(chat, option.id, value)
                except AgentFailed as err:
                    chat.info(f"*{what}: {err}*")

    async def set_config(self, chat_id: int, config_id: str, value: str | bool) -> None:
        """Change a session setting (mode, model, ...); the header shows the result.
        A setting the agent does not offer, or a value it does not list, is told
        here, not sent (``value`` of a select: a choice's id or name)."""
        connection = self.pool.connection(chat_id)
        chat = self.ctx.chats.get(chat_id)
        if connection is not None and chat is not None:
            options = chat.session.config_options
            option = next((o for o in options if o.id == config_id), None)
            if option is None:
                offered = _offered([o.id for o in options])
                self.ctx.editor.notify(f"no setting {config_id!r}{offered}", "warn")
                return
            if option.type == "boolean" and isinstance(value, str):
                # Typed on the command line (`:AcpConfig thinking on`): a word, not a bool.
                if value.lower() not in _SWITCH_WORDS:
                    self.ctx.editor.notify(f"{config_id} is on or off, not {value!r}")
                    return
                value = _SWITCH_WORDS[value.lower()]
            elif option.type == "select" and option.choices and isinstance(value, str):
                if value not in option.choices.values:  # a name, as typed
                    value = {name: id_ for id_, name in option.choices}.get(value, value)
                if value not in option.choices.values:
                    offered = _offered(option.choices.values)
                    what = option.category or option.id
                    self.ctx.editor.notify(f"no {what} {value!r}{offered}", "warn")
                    return
            try:
                await connection.set_config(chat, config_id, value)
            except AgentFailed as err:
                self.ctx.editor.notify(str(err))

    def choices(self, chat_id: int, config_id: str) -> list[dict[str, str]]:
        """The choices of the chat's setting ``config_id`` (``{value, name}``): what its
        status entry leaves out past `view.SENT_CHOICES`; none for an unknown setting."""
        from acp_nvim.client.session import view

        chat = self.ctx.chats.get(chat_id)
        option = _setting(chat, config_id) if chat is not None else None
        return view.choices_entries(option) if option is not None else []

    async def set_category(self, chat_id: int, category: str, value: str) -> None:
        """Switch the chat's mode or model (the setting of that ``category``); ``value``
        is a choice's id or name."""
        if self.pool.connection(chat_id) is None:
            return  # told why: a chat without an agent has no choices to know
        option = _setting(self.ctx.chats[chat_id], category)
        if option is None:
            self.ctx.editor.notify(f"the agent offers no {category} to choose", "warn")
            return
        await self.set_config(chat_id, option.id, value)


def defaults(agent_config: AgentConfig) -> list[Wanted]:
    """The agent's configured mode, model and settings."""
    wanted: list[Wanted] = [
        (f"{category} {value!r}", category, value)
        for category, value in (("mode", agent_config.mode), ("model", agent_config.model))
        if value is not None
    ]
    return wanted + [(f"setting {k}={v!r}", k, v) for k, v in agent_config.config_options.items()]


def chosen(chat: Chat) -> list[Wanted]:
    """The chat's settings as they are now: what a restarted agent's session gets back."""
    return [
        (f"setting {o.id}={o.current!r}", o.id, o.current)
        for o in chat.session.config_options
        if isinstance(o.current, (str, bool)) and o.type in ("select", "boolean")
    ]


def _setting(chat: Chat, key: str) -> ConfigOption | None:
    """The chat's setting with id ``key``, else the one of category ``key``."""
    options = chat.session.config_options
    return next((o for o in options if o.id == key), None) or next(
        (o for o in options if o.category == key), None
    )


# How many of a setting's choices a message names: an agent may offer thousands
# (the pickers and completion list them all).
OFFERED_NAMED = 8


def _offered(choices: Sequence[str]) -> str:
    """`` (offered: a, b, c)``, the first :data:`OFFERED_NAMED` and how many more;
    empty when there are none."""
    if not choices:
        return ""
    named = ", ".join(choices[:OFFERED_NAMED])
    more = len(choices) - OFFERED_NAMED
    return f" (offered: {named}{f' and {more:,} more' if more > 0 else ''})"
