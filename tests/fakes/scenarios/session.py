"""Agents that differ in their handshake: capabilities, settings, history, login, fork;
and one that streams a character at a time."""

from __future__ import annotations

__all__ = ["SCENARIOS"]

import json
import os
import urllib.parse
from typing import Any

import anyio

from acp_nvim.protocol import RequestError
from tests.fakes.handshake import (
    Agent,
    Params,
    Prompt,
    Scenario,
    config_options,
    echo,
    mode_option,
)
from tests.fakes.scenarios.faults import held
from tests.fakes.scenarios.tools import disk_edit


def modes_and_models(agent: Agent) -> Params:
    """qwen's settings: it starts in "auto", its own classifier approving edits and commands."""
    return {
        "modes": {
            "currentModeId": "auto",
            "availableModes": [
                {"id": "auto", "name": "Auto"},
                {"id": "default", "name": "Default"},
                {"id": "plan", "name": "Plan"},
            ],
        },
        "models": {
            "currentModelId": "small",
            "availableModels": [
                {"modelId": "small", "name": "Small"},
                {"modelId": "large", "name": "Large"},
            ],
        },
    }


def odd_names(agent: Agent) -> Params:
    """A mode and a model named with what Neovim's winbar takes otherwise: a NUL, a
    line break, a tab, a ``%``."""
    return {
        "modes": {
            "currentModeId": "ask",
            "availableModes": [{"id": "ask", "name": "Ask\u0000first"}],
        },
        "models": {
            "currentModelId": "small",
            "availableModels": [{"modelId": "small", "name": "Small\n\t100%"}],
        },
    }


def named_modes(agent: Agent) -> Params:
    """Claude Code's modes: names that are not their ids."""
    key = "configId" if agent.version == 2 else "id"
    modes = [("default", "Ask before edits"), ("acceptEdits", "Accept edits"), ("plan", "Plan")]
    option = {
        "type": "select",
        key: "mode",
        "name": "Mode",
        "category": "mode",
        "currentValue": "default",
        "options": [{"value": value, "name": name} for value, name in modes],
    }
    return {"configOptions": [option]}


def approval_too(agent: Agent) -> Params:
    """Modes and models, and a config option that wins over them."""
    return {**modes_and_models(agent), "configOptions": config_options("auto")}


QWEN_MODES = ("plan", "default", "auto-edit", "auto", "yolo")


def qwen_settings(agent: Agent) -> Params:
    """qwen-code's session/new settings: five modes (current "auto"), models, and
    config options for the mode and the model as well."""
    modes = [{"id": mode, "name": mode.title()} for mode in QWEN_MODES]
    mode_option = {
        "type": "select", "id": "mode", "name": "Mode", "category": "mode",
        "currentValue": "auto",
        "options": [{"value": m["id"], "name": m["name"]} for m in modes],
    }  # fmt: skip
    return {
        **modes_and_models(agent),
        "modes": {"currentModeId": "auto", "availableModes": modes},
        "configOptions": [mode_option],
    }


async def qwen_mode(agent: Agent, prompt: Prompt) -> None:
    """Says the mode its session works in: "auto" until ``session/set_mode`` switches
    it, the only request that does (its mode config option leaves it as it was)."""
    modes = [p["modeId"] for method, p in agent.calls if method == "session/set_mode"]
    await agent.say(f"working in mode {(modes or ['auto'])[-1]}")


async def calls(agent: Agent, prompt: Prompt) -> None:
    """Prompt "calls": says the session methods called so far (JSON); else echoes."""
    if prompt.text == "calls":
        await agent.say(json.dumps(agent.calls))
    else:
        await echo(agent, prompt)


async def calls_or_edit(agent: Agent, prompt: Prompt) -> None:
    """As `calls`; prompt ``edit PATH`` makes "two" "2" on disk (a tool call's edit)."""
    if not prompt.text.startswith("edit "):
        await calls(agent, prompt)
        return
    path = prompt.text.removeprefix("edit ")
    await disk_edit(agent, "edit0", path, "one\n2\n")
    await agent.say(f"edited {path}")


async def settings_switch(agent: Agent, prompt: Prompt) -> None:
    """As `calls`; prompt "switch" changes settings as agents do on their own (a plan
    mode left by a tool, a mode picked in the agent's own UI): to mode "plan", and a new
    thought level setting."""
    if prompt.text != "switch":
        await calls(agent, prompt)
        return
    await agent.update({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    thought = {
        "type": "select",
        "id": "thought",
        "name": "Thinking",
        "category": "thought_level",
        "currentValue": "high",
        "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}],
    }
    await agent.update({"sessionUpdate": "config_option_update", "configOptions": [thought]})


async def configs_switch(agent: Agent, prompt: Prompt) -> None:
    """As `calls`; prompt "switch" sets the approval option to "ask" on its own."""
    if prompt.text != "switch":
        await calls(agent, prompt)
        return
    options = config_options("ask")
    await agent.update({"sessionUpdate": "config_option_update", "configOptions": options})


# Per agent: set once a prompt came ("settings_late").
_PROMPTED: dict[int, anyio.Event] = {}


async def note_prompt(agent: Agent, params: Params) -> None:
    _PROMPTED.setdefault(id(agent), anyio.Event()).set()


async def after_a_prompt(agent: Agent, params: Params) -> None:
    """Answer (session/set_mode) only once a prompt came."""
    await _PROMPTED.setdefault(id(agent), anyio.Event()).wait()


async def calls_until_cancelled(agent: Agent, prompt: Prompt) -> str:
    """As `calls`, then the turn goes on until a cancel."""
    await calls(agent, prompt)
    return await agent.until_cancelled()


async def require_login(agent: Agent, params: Params) -> None:
    """session/new fails until logged in: by the browser method, $FAKE_KEY "sekret", or
    the file $FAKE_AUTH_MARKER that the terminal login writes (agent.py login-tui)."""
    marker = os.environ.get("FAKE_AUTH_MARKER", "")
    if not (
        agent.authenticated
        or os.environ.get("FAKE_KEY") == "sekret"
        or (marker and os.path.exists(marker))
    ):
        raise RequestError(-32000, "Authentication required")


LOGINS = (
    {"id": "browser", "name": "Browser login"},
    {"id": "tui", "name": "Terminal login", "type": "terminal",
     "args": ["login-tui"], "env": {"FAKE_TUI": "1"}},
    {"id": "key", "name": "API key", "type": "env_var", "vars": [{"name": "FAKE_KEY"}]},
)  # fmt: skip


def in_ask_mode(agent: Agent) -> Params:
    return {"configOptions": mode_option(agent.version, "ask")}


async def fork_turn(agent: Agent, prompt: Prompt) -> str | None:
    """Says ``SESSION: echo TEXT`` into the prompt's session; "calls" says the recorded
    calls; "hold" then waits for a cancel."""
    if prompt.text == "calls":
        reply = json.dumps(agent.calls)
    else:
        reply = f"{prompt.session}: echo {prompt.text}"
    await agent.say(reply, session=prompt.session)
    if prompt.text == "hold":
        return await agent.until_cancelled()
    return None


async def client_capabilities(agent: Agent, prompt: Prompt) -> None:
    """Says the client's initialize params (JSON)."""
    await agent.say(json.dumps(agent.init_params, sort_keys=True))


async def blocks_received(agent: Agent, prompt: Prompt) -> None:
    """Says the prompt's blocks as received (JSON); a text too long for one transcript
    line is said as its length."""

    def short(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: short(v) for k, v in value.items()}
        return f"<{len(value)} chars>" if isinstance(value, str) and len(value) > 1000 else value

    await agent.say(json.dumps([short(block) for block in prompt.blocks]))


async def say_by_character(agent: Agent, prompt: Prompt) -> None:
    """Says the prompt's text back a character a chunk: a newline arrives before
    the line it breaks to."""
    for character in prompt.text:
        await agent.say(character)


async def big_lists(agent: Agent, prompt: Prompt) -> None:
    """Lists too long to send to Lua in one piece (issue 29.7): prompt "settings" sends
    30 selects of 500 choices (15,000 in all, the first two a mode and a model), prompt
    "commands" 3,000 slash commands, prompt "skills" qwen's 40 in one line of 564 KB, prompt "plan" a plan of 3,000 entries; else as
    `calls`."""
    key = "configId" if agent.version == 2 else "id"
    if prompt.text == "settings":
        options = [
            {"type": "select", key: f"o{i}", "name": f"Option {i}", "currentValue": "v1",
             "category": {0: "mode", 1: "model"}.get(i),
             "options": [{"value": f"v{j}", "name": f"Choice {i}.{j}"} for j in range(500)]}
            for i in range(30)
        ]  # fmt: skip
        await agent.update({"sessionUpdate": "config_option_update", "configOptions": options})
    elif prompt.text == "commands":
        commands = [{"name": f"c{i}", "description": f"command {i}"} for i in range(3000)]
        await agent.update({"sessionUpdate": "available_commands_update", "availableCommands": commands})
    elif prompt.text == "skills":  # qwen's: one 564 KB line, each skill's body in _meta
        skills: list[Params] = [{"name": f"skill{i}", "description": f"skill {i}", "input": None,
                                 "_meta": {"body": f"# Skill {i}\n" + "do this. " * 1560}}
                                for i in range(40)]  # fmt: skip
        await agent.update({"sessionUpdate": "available_commands_update", "availableCommands": skills})
    elif prompt.text == "plan":
        entries = [{"content": f"step {i}", "priority": "medium", "status": "pending"} for i in range(3000)]
        plan: Params = {"sessionUpdate": "plan", "entries": entries}
        if agent.version == 2:
            plan = {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": entries}}
        await agent.update(plan)
    else:
        await calls(agent, prompt)
        return
    await agent.say(f"sent {prompt.text}")


async def plans(agent: Agent, prompt: Prompt) -> None:
    """Plans with ids (v2's; over v1 the unstable ones, sent as an agent following that
    schema sends them: only to a client advertising ``clientCapabilities.plan``, else
    one v1 ``plan`` of the steps): prompt "steps [SECOND]" sends plan "s" as two steps
    (the second's words SECOND, default "Fix it"),
    "markdown" plan "m" as markdown, "file PATH" plan "f" as that file, "remove ID"
    takes plan ID away. It reads the prompt's last block: a seeded prompt's words come
    after the conversation it carries."""
    word, _, rest = prompt.blocks[-1].get("text", "").partition(" ")
    steps = [
        {"content": "Read the code", "priority": "high", "status": "completed"},
        {"content": rest or "Fix it", "priority": "medium", "status": "in_progress"},
    ]
    update: Params
    if agent.version == 1 and "plan" not in agent.init_params["clientCapabilities"]:
        update = {"sessionUpdate": "plan", "entries": steps}
    elif word == "steps":
        update = {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "s", "entries": steps},
        }
    elif word == "markdown":
        plan = {"type": "markdown", "planId": "m", "content": "1. Read the code\n2. **Fix** it"}
        update = {"sessionUpdate": "plan_update", "plan": plan}
    elif word == "file":
        uri = "file://" + urllib.parse.quote(rest)
        update = {"sessionUpdate": "plan_update", "plan": {"type": "file", "planId": "f", "uri": uri}}
    else:
        update = {"sessionUpdate": "plan_removed", "planId": rest}
    await agent.update(update)
    await agent.say(f"done: {word}")


# What CountingAgent says a turn read and wrote.
TURN_TOKENS: Params = {
    "totalTokens": 36_400, "inputTokens": 35_000, "outputTokens": 900,
    "thoughtTokens": 500, "cachedReadTokens": 30_000, "cachedWriteTokens": 0,
}  # fmt: skip


class CountingAgent(Agent):
    """opencode's way with usage: each turn reports the context and the session's cost
    (``usage_update``), and its ``session/prompt`` answer carries ``usage`` (v1's
    unstable field), its count of the tokens its model read and wrote; over v2 the
    idle ``state_update`` ending the turn carries it (v2's unstable field). The
    prompt "quiet" ends without it."""

    async def prompt(self, params: Params) -> Params:
        answer = await super().prompt(params)
        if self.version == 1 and params["prompt"][0]["text"] != "quiet":
            answer["usage"] = TURN_TOKENS
        return answer

    def idle(self, prompt: Prompt, stop: str) -> Params:
        idle = super().idle(prompt, stop)
        return idle if prompt.text == "quiet" else {**idle, "usage": TURN_TOKENS}


async def reported_turn(agent: Agent, prompt: Prompt) -> None:
    cost = {"amount": 0.05 * agent.turns, "currency": "USD"}
    usage = {"sessionUpdate": "usage_update", "used": 1234 * agent.turns, "size": 200_000}
    await agent.update({**usage, "cost": cost})
    await agent.say(f"done: {prompt.text}")


async def titled(agent: Agent, prompt: Prompt) -> None:
    """Titles its session with the prompt."""
    await agent.update({"sessionUpdate": "session_info_update", "title": prompt.text})
    await agent.say("titled")


async def unknown_session(agent: Agent, params: Params) -> None:
    """A new process knows no session to resume."""
    raise RequestError(-32002, f"Resource not found: {params['sessionId']}")


async def refuse_closed(agent: Agent, params: Params) -> None:
    """A prompt to a session closed since it was last resumed is refused, as an agent
    that freed the session refuses it."""
    session = params["sessionId"]
    ends = ("session/close", "session/resume", "session/load")
    last = [method for method, p in agent.calls if method in ends and p["sessionId"] == session]
    if last[-1:] == ["session/close"]:
        raise RequestError(-32002, f"Resource not found: {session} was closed")


async def refuse_fail(agent: Agent, params: Params) -> None:
    """A prompt whose last block is "fail" is refused, as a rate limit is."""
    if params["prompt"][-1].get("text") == "fail":
        raise RequestError(-32603, "rate limited")


def blocks(*takes: str) -> Scenario:
    """The scenario "blocks" with prompt capabilities ``takes`` ("blocks+embed", ...)."""
    return Scenario(
        "+".join(("blocks", *takes)),
        blocks_received,
        capabilities={
            "promptCapabilities": {"embeddedContext": "embed" in takes, "image": "image" in takes}
        },
        v2={"prompt": {"embeddedContext" if t == "embed" else t: {} for t in takes}},
        before={"session/resume": unknown_session, "session/prompt": refuse_fail},
    )


SCENARIOS = (
    Scenario("echo"),
    Scenario("trickle", say_by_character, v2={}),
    Scenario("capabilities", client_capabilities),
    blocks(),
    blocks("embed"),
    blocks("embed", "image"),
    Scenario(
        "settings",
        settings_switch,
        capabilities={"sessionCapabilities": {"resume": {}}},
        session=modes_and_models,
    ),
    Scenario("configs", configs_switch, session=approval_too),
    Scenario("named_modes", session=named_modes, v2={}),
    Scenario("plans", plans, v2={}),
    Scenario("qwen", qwen_mode, session=qwen_settings),
    Scenario("counted", reported_turn, agent=CountingAgent, v2={}),
    Scenario("big", big_lists, v2={}),
    Scenario("titled", titled),
    Scenario("odd_names", titled, session=odd_names),
    Scenario(
        "history",
        calls,
        capabilities={
            "loadSession": True,
            "sessionCapabilities": {"list": {}, "close": {}, "resume": {}, "delete": {}},
        },
        v2={"list": {}, "close": {}, "resume": {}, "delete": {}},
    ),
    # session/close done and answered only once the test releases it (faults.held)
    Scenario(
        "slow_close",
        calls,
        capabilities={"sessionCapabilities": {"close": {}, "resume": {}}},
        v2={},
        before={"session/close": held, "session/prompt": refuse_closed},
    ),
    # load only: a reopened chat goes on with session/load
    Scenario("kept", calls_or_edit, capabilities={"loadSession": True}),
    Scenario(
        "auth",
        capabilities={"auth": {"logout": {}}},
        v2={},
        auth_methods=LOGINS,
        before={"session/new": require_login},
    ),
    Scenario(
        "settings_late",
        calls_until_cancelled,
        capabilities={"sessionCapabilities": {"resume": {}}},
        session=modes_and_models,
        before={"session/set_mode": after_a_prompt, "session/prompt": note_prompt},
    ),
    Scenario(
        "fork",
        fork_turn,
        capabilities={"sessionCapabilities": {"fork": {}}},
        v2={"fork": {}},
        session=in_ask_mode,
    ),
)
