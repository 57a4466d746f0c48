"""Agents driven by their prompt: files, permissions, tool calls, terminals, questions.

Each turn reads its prompt as a small script (mostly JSON steps) and says what came
back as ``RESULT <json>`` lines, so one scenario serves many tests.
"""

from __future__ import annotations

__all__ = ["SCENARIOS"]

import itertools
import json
import os
from typing import Any

import anyio

from acp_nvim.protocol import RequestError
from tests.fakes.handshake import Agent, Params, Prompt, Scenario, v2_diff

ALLOW_ONCE = {"optionId": "once", "name": "Allow once", "kind": "allow_once"}
REJECT_ONCE = {"optionId": "reject", "name": "Reject", "kind": "reject_once"}


def sid(agent: Agent) -> Params:
    """The session the requests of a turn name: the one prompted."""
    return {"sessionId": agent.prompted}


async def file_steps(agent: Agent, prompt: Prompt) -> None:
    """Prompt: a JSON list of ``{"read": params}``, ``{"write": params}`` (fs/*
    requests, answers said as RESULT lines), ``{"disk": {path, content}}`` (see
    `disk_edit`), ``{"shell": {path, content}}`` (a file written as a command the
    agent ran would: no tool call names it), ``{"bytes": {path, hex}}`` (the same, of
    bytes), ``{"rm": {path}}`` (a file deleted the same way), ``{"rewrite": {path}}``
    (a file written again with the bytes it holds, as a build may), ``{"opencode": {path, content}}`` (see `opencode_write`),
    ``{"claude": {path, content}}`` (see `claude_edit`; with ``"accept": true`` in
    mode acceptEdits), ``{"claude_legacy": {path, content}}`` (see
    `claude_legacy_edit`) and
    ``{"ask": {path, oldText, newText, write?}}`` (see `ask_edit`)."""
    for n, step in enumerate(json.loads(prompt.text)):
        [(kind, args)] = step.items()
        if kind == "shell":
            with open(args["path"], "w") as f:
                f.write(args["content"])
        elif kind == "bytes":
            with open(args["path"], "wb") as f:
                f.write(bytes.fromhex(args["hex"]))
        elif kind == "rm":
            os.remove(args["path"])
        elif kind == "rewrite":
            with open(args["path"], "rb") as f:
                data = f.read()
            with open(args["path"], "wb") as f:
                f.write(data)
        elif kind == "ask":
            await ask_edit(agent, f"ask{n}", args)
        elif kind == "opencode":
            await opencode_write(agent, f"write{n}", args["path"], args["content"])
        elif kind == "disk":
            await disk_edit(agent, f"edit{n}", args["path"], args["content"])
        elif kind == "claude":
            await claude_edit(agent, f"toolu_{n}", args["path"], args["content"], args.get("accept"))
        elif kind == "claude_legacy":
            if not await claude_legacy_edit(agent, f"toolu_{n}", args["path"], args["content"]):
                return  # rejected: this adapter ends the turn
        else:
            try:
                result: Any = await agent.c.request(f"fs/{kind}_text_file", {**sid(agent), **args}, dict)
            except RequestError as err:
                result = {"error": err.code, "message": err.message}
            await agent.result(result)


async def disk_edit(agent: Agent, call_id: str, path: str, content: str) -> None:
    """An edit made on disk, reported only as a tool call (as Claude's and Codex's
    adapters do, and every v2 agent: its diff the change and its git patch)."""
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    call = {"toolCallId": call_id, "title": f"Edit {path}", "kind": "edit"}
    kind = "tool_call" if agent.version == 1 else "tool_call_update"
    await agent.update(
        {"sessionUpdate": kind, **call, "status": "pending", "locations": [{"path": path}]}
    )
    with open(path, "w") as f:
        f.write(content)
    diff = {"type": "diff", "path": path, "oldText": old, "newText": content}
    if agent.version == 2:
        diff = v2_diff(path, old, content)
    await agent.update(
        {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed",
         "content": [diff]}
    )  # fmt: skip


async def claude_edit(
    agent: Agent, call_id: str, path: str, content: str, accept: bool = False
) -> None:
    """Edit a file as claude-agent-acp 0.23.1 does: the call pending with its diff (the
    whole file minus its final newline), a permission request carrying it, and once
    allowed the file written on disk by the agent itself (no fs/write_text_file), then
    the call completed; the outcome said as a RESULT. ``accept`` (its mode
    acceptEdits): no request, the file written at once, before the client can have
    read the call's announcement (a fast agent's worst case)."""
    with open(path) as f:
        old = f.read()
    diff = {"type": "diff", "path": path, "oldText": old.removesuffix("\n"),
            "newText": content.removesuffix("\n")}  # fmt: skip
    call = {"toolCallId": call_id, "title": f"Edit `{path}`", "kind": "edit"}
    edit = {**call, "status": "pending", "content": [diff], "locations": [{"path": path}]}
    if accept:
        with open(path, "w") as f:
            f.write(content)
        await agent.update({"sessionUpdate": "tool_call", **edit})
        await agent.update({"sessionUpdate": "tool_call_update", **call, "status": "completed"})
        return
    await agent.update({"sessionUpdate": "tool_call", **edit})
    options = [
        {"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ]
    answer = await agent.c.request(
        "session/request_permission", {**sid(agent), "toolCall": edit, "options": options}, dict
    )
    outcome = answer["outcome"]
    if outcome.get("optionId") in ("allow", "allow_always"):
        with open(path, "w") as f:
            f.write(content)
        await agent.update({"sessionUpdate": "tool_call_update", **call, "status": "completed"})
    else:  # Claude tells the model and goes on: the call failed
        await agent.update({"sessionUpdate": "tool_call_update", **call, "status": "failed"})
    await agent.result(outcome)


async def claude_legacy_edit(agent: Agent, call_id: str, path: str, content: str) -> bool:
    """Edit a file as claude-code-acp 0.16.2 does: ``tool_call`` twice for one id (the
    tool's start with an empty ``rawInput``, then the diff of the whole file minus its
    final newline and its location), a permission request whose tool call carries only
    title and ``rawInput`` (no kind, no content), once allowed a read of the file (line
    1, limit 2000) and ``fs/write_text_file``, then completed. The outcome and the read
    said as RESULTs; whether the edit was allowed."""
    with open(path) as f:
        old = f.read()
    title = f"Edit `{path}`"
    raw = {"file_path": path, "old_string": old, "new_string": content}
    start = {"toolCallId": call_id, "title": "Edit", "kind": "edit", "status": "pending",
             "rawInput": {}}  # fmt: skip
    await agent.update({"sessionUpdate": "tool_call", **start})
    diff = {"type": "diff", "path": path, "oldText": old.removesuffix("\n"),
            "newText": content.removesuffix("\n")}  # fmt: skip
    await agent.update({"sessionUpdate": "tool_call", **start, "title": title, "rawInput": raw,
                        "content": [diff], "locations": [{"path": path}]})  # fmt: skip
    options = [
        {"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ]
    call = {"toolCallId": call_id, "title": title, "rawInput": raw}
    answer = await agent.c.request(
        "session/request_permission", {**sid(agent), "toolCall": call, "options": options}, dict
    )
    outcome = answer["outcome"]
    await agent.result(outcome)
    if outcome.get("optionId") not in ("allow", "allow_always"):
        return False
    read = {**sid(agent), "path": path, "line": 1, "limit": 2000}
    await agent.result(await agent.c.request("fs/read_text_file", read, dict))
    await agent.c.request("fs/write_text_file", {**sid(agent), "path": path, "content": content}, dict)
    await agent.update({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                        "status": "completed"})  # fmt: skip
    return True


async def ask_edit(agent: Agent, call_id: str, args: Params) -> None:
    """A permission request for an edit with the diff ``oldText`` → ``newText``, its
    outcome said as a RESULT; once allowed, ``write`` goes to fs/write_text_file
    (over v2, which has no such method, the agent writes it itself)."""
    path = args["path"]
    call = {"toolCallId": call_id, "title": f"Edit {os.path.basename(path)}", "kind": "edit"}
    options = [ALLOW_ONCE, REJECT_ONCE]
    if agent.version == 1:
        diff = {"type": "diff", "path": path, "oldText": args["oldText"], "newText": args["newText"]}
        params = {**sid(agent), "toolCall": {**call, "content": [diff]}, "options": options}
    else:  # the whole file's patch, the edit's place found in it
        with open(path) as f:
            old = f.read()
        diff = v2_diff(path, old, old.replace(args["oldText"], args["newText"], 1))
        subject = {"type": "tool_call", "toolCall": {**call, "content": [diff]}}
        params = {**sid(agent), "title": call["title"], "subject": subject, "options": options}
    answer = await agent.c.request("session/request_permission", params, dict)
    outcome = answer["outcome"]
    if outcome.get("optionId") == "once" and "write" in args:
        if agent.version == 1:
            await agent.c.request(
                "fs/write_text_file", {**sid(agent), "path": path, "content": args["write"]}, dict
            )
        else:
            with open(path, "w") as f:
                f.write(args["write"])
    await agent.result(outcome)


async def opencode_write(agent: Agent, call_id: str, path: str, content: str) -> None:
    """Write a file as opencode 1.18 does: a call without locations, the location
    while in progress, a permission request carrying the diff (``oldText`` "" for
    a new file), once allowed the file written on disk and ``fs/write_text_file``,
    then a completion with text content only."""
    call = {"toolCallId": call_id, "title": "write", "kind": "edit"}
    await agent.update({"sessionUpdate": "tool_call", **call, "status": "pending"})
    location: Params = {"locations": [{"path": path}]}
    await agent.update(
        {"sessionUpdate": "tool_call_update", **call, "status": "in_progress", **location}
    )
    diff = {"type": "diff", "path": path, "oldText": "", "newText": content}
    always = {"optionId": "always", "name": "Always allow", "kind": "allow_always"}
    answer = await agent.c.request(
        "session/request_permission",
        {
            **sid(agent),
            "toolCall": {**call, "status": "in_progress", **location, "content": [diff]},
            "options": [ALLOW_ONCE, always, REJECT_ONCE],
        },
        dict,
    )
    if answer["outcome"].get("optionId") not in ("once", "always"):
        await agent.result({"rejected": True})
        return
    # opencode does not await its fs/write_text_file: its own write tool then
    # writes the same file, usually before the client handled the request.
    with open(path, "w") as f:
        f.write(content)
    result = await agent.c.request(
        "fs/write_text_file", {**sid(agent), "path": path, "content": content}, dict
    )
    text = {"type": "content", "content": {"type": "text", "text": "Wrote file successfully."}}
    await agent.update(
        {"sessionUpdate": "tool_call_update", **call, "status": "completed", "content": [text]}
    )
    await agent.result(result)


async def ask_permission(agent: Agent, prompt: Prompt) -> str:
    """Prompt ``KIND [nokind|nonever] [at PATH:LINE] [first]``: ask like gemini (the tool
    call exists only in the request; with ``first``, like claude: the call is reported
    first, the request names it by its id), then say the outcome as a message."""
    words = prompt.text.split()
    call: Params = {"toolCallId": f"call-{words[0]}", "title": f"Fake {words[0]}", "kind": words[0]}
    if "at" in words:
        path, line = words[words.index("at") + 1].rsplit(":", 1)
        call["locations"] = [{"path": path, "line": int(line)}]
    title = call["title"]
    if "first" in words:
        kind = "tool_call" if agent.version == 1 else "tool_call_update"
        await agent.update({"sessionUpdate": kind, **call, "status": "pending"})
        call = {"toolCallId": call["toolCallId"]}
    if "nokind" in words:  # the older Claude adapter
        options = [{"optionId": "yes", "name": "Yes"}, {"optionId": "no", "name": "No"}]
    else:
        options = [
            {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "proceed_always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
            {"optionId": "never", "name": "Never", "kind": "reject_always"},
        ]
        if "nonever" in words:  # the demo agent's three
            options.pop()
    if agent.version == 1:
        params: Params = {**sid(agent), "toolCall": call, "options": options}
    else:  # v2: the prompt's own title; the call in its subject; the turn waits on us
        params = {**sid(agent), "title": title, "options": options,
                  "subject": {"type": "tool_call", "toolCall": call}}  # fmt: skip
        await agent.update({"sessionUpdate": "state_update", "state": "requires_action"})
    answer = await agent.c.request("session/request_permission", params, dict)
    outcome = answer["outcome"]
    await agent.say(f"permission: {outcome['outcome']} {outcome.get('optionId', '')}".strip())
    return "cancelled" if agent.cancelled.is_set() else "end_turn"


_EXEC_IDS = itertools.count(1)  # codex's call ids: one of its own per command


async def codex_exec(agent: Agent, prompt: Prompt) -> str:
    """Runs the prompt as a shell script the way codex-acp asks: the call exists only in
    the permission request, its ``rawInput`` codex's whole approval event (the command
    an argv through the user's shell, its parse, the cwd), its content text alone.
    Once approved the command runs (``in_progress`` → ``completed``, no content);
    rejected, codex ends the turn ``cancelled``."""
    script, call_id = prompt.text, f"call_{next(_EXEC_IDS)}"
    event = {"call_id": call_id, "turn_id": "1", "command": ["/bin/bash", "-lc", script],
             "cwd": os.getcwd(), "reason": None,
             "parsed_cmd": [{"type": "unknown", "cmd": script}]}  # fmt: skip
    call: Params = {"toolCallId": call_id, "kind": "execute", "title": script}
    decisions = {"type": "text", "text": "Available Decisions: approved\nabort"}
    options = [
        {"optionId": "approved", "name": "Yes", "kind": "allow_once"},
        {"optionId": "abort", "name": "No, and tell Codex", "kind": "reject_once"},
    ]
    answer = await agent.c.request(
        "session/request_permission",
        {**sid(agent), "toolCall": {**call, "status": "pending", "rawInput": event,
                                    "content": [{"type": "content", "content": decisions}]},
         "options": options},
        dict,
    )  # fmt: skip
    outcome = answer["outcome"]
    await agent.say(f"permission: {outcome['outcome']} {outcome.get('optionId', '')}".strip())
    if outcome.get("optionId") != "approved":
        return "cancelled"
    begun = {**call, "status": "in_progress", "rawInput": event}
    await agent.update({"sessionUpdate": "tool_call", **begun})
    await agent.update({"sessionUpdate": "tool_call_update", **call, "status": "completed"})
    return "end_turn"


_GEMINI_IDS = itertools.count(1)


async def gemini_shell(agent: Agent, prompt: Prompt) -> str:
    """Runs the prompt as a shell command the way gemini-cli asks: no ``rawInput``,
    no content, no locations; the title is its shell tool's description (the command,
    ``[current working directory CWD]``, the model's ``(description)``: prompt
    ``COMMAND -- DESCRIPTION``). The call exists only in the request until it is
    allowed (``in_progress`` → ``completed`` with the output as text); a reject is told
    to the model and the turn goes on."""
    command, _, description = prompt.text.partition(" -- ")
    title = f"{command} [current working directory {os.getcwd()}]"
    if description:
        title += f" ({description})"
    call: Params = {"toolCallId": f"run_shell_command-{next(_GEMINI_IDS)}", "title": title,
                    "content": [], "locations": [], "kind": "execute"}  # fmt: skip
    root = command.split()[0] if command.split() else command
    options = [
        {"optionId": "proceed_always", "name": f"Always Allow {root}", "kind": "allow_always"},
        {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
    ]
    answer = await agent.c.request(
        "session/request_permission",
        {**sid(agent), "toolCall": {**call, "status": "pending"}, "options": options},
        dict,
    )
    outcome = answer["outcome"]
    await agent.say(f"permission: {outcome['outcome']} {outcome.get('optionId', '')}".strip())
    if outcome.get("optionId") not in ("proceed_once", "proceed_always"):
        return "cancelled" if agent.cancelled.is_set() else "end_turn"
    await agent.update({"sessionUpdate": "tool_call", **call, "status": "in_progress"})
    text = {"type": "content", "content": {"type": "text", "text": "ran"}}
    await agent.update({"sessionUpdate": "tool_call_update", "toolCallId": call["toolCallId"],
                        "status": "completed", "content": [text]})  # fmt: skip
    return "end_turn"


async def tool_call_at(agent: Agent, prompt: Prompt) -> None:
    """Prompt ``PATH:LINE``: a tool call at that location, then its diff (over v2, the
    change and its git patch)."""
    path, line = prompt.text.split()[0].rsplit(":", 1)
    kind = "tool_call" if agent.version == 1 else "tool_call_update"
    await agent.update(
        {"sessionUpdate": kind, "toolCallId": "t1", "title": "Edit file", "kind": "edit",
         "status": "in_progress", "locations": [{"path": path, "line": int(line)}]}
    )  # fmt: skip
    old, new = "one\ntwo\n", "one\n2\n"
    diff = {"type": "diff", "path": path, "oldText": old, "newText": new}
    if agent.version == 2:
        diff = v2_diff(path, old, new)
    await agent.update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
         "content": [diff]}
    )  # fmt: skip


async def run_terminal(agent: Agent, prompt: Prompt) -> str | None:
    """Prompt ``{"create": {...}, "kill"?, "wait"?, "release"?, "report_to"?}`` (JSON):
    run a terminal shown in a tool call, then report what came back as JSON (said,
    and written to the file ``report_to``). ``kill`` true kills it at once; a string
    kills it once its output holds that string (as an agent watching a server).
    ``until_cancel``: as the older Claude adapter, wait for a cancel, then release the
    terminal and end the turn ``cancelled``, the call left as it was."""
    script = json.loads(prompt.text)
    created = await agent.c.request("terminal/create", {**sid(agent), **script["create"]}, dict)
    term = {**sid(agent), "terminalId": created["terminalId"]}
    await agent.update(
        {"sessionUpdate": "tool_call", "toolCallId": "run", "title": "Run", "kind": "execute",
         "status": "in_progress",
         "content": [{"type": "terminal", "terminalId": created["terminalId"]}]}
    )  # fmt: skip
    report: Params = {"terminalId": created["terminalId"]}

    async def output() -> Params:
        return await agent.c.request("terminal/output", term, dict)

    if script.get("until_cancel"):
        await agent.until_cancelled()
        await agent.c.request("terminal/release", term, dict)
        return "cancelled"
    if isinstance(script.get("kill"), str):
        with anyio.fail_after(10):
            while script["kill"] not in (await output())["output"]:
                await anyio.sleep(0.01)
    if script.get("kill"):
        await agent.c.request("terminal/kill", term, dict)
    if script.get("wait", True):
        report["exit"] = await agent.c.request("terminal/wait_for_exit", term, dict)
        report |= await output()
    if script.get("release", True):
        await agent.c.request("terminal/release", term, dict)
        try:
            await output()
        except RequestError as err:
            report["after_release"] = err.code
    if "report_to" in script:  # whole, where a transcript line would be cut
        # Renamed into place: a test that waits for the file to exist reads it all.
        with open(script["report_to"] + ".part", "w") as f:
            json.dump(report, f)
        os.replace(script["report_to"] + ".part", script["report_to"])
    await agent.say(json.dumps(report))
    return None


async def claude_bash(agent: Agent, prompt: Prompt) -> str | None:
    """Runs ``echo TEXT`` as claude-agent-acp 0.23.1 reports its own Bash tool: where
    the client advertises ``clientCapabilities._meta.terminal_output``, the call shows a
    terminal the client never created (``terminal_info``) and carries its output and
    exit in ``_meta``; else the output comes as text content. TEXT "hold ..." is
    cancelled after its output: the turn ends ``cancelled``, the call and its terminal
    never told they ended (as Claude leaves them)."""
    call: Params = {"toolCallId": "toolu_bash"}
    meta = agent.init_params.get("clientCapabilities", {}).get("_meta") or {}
    live = meta.get("terminal_output") is True
    first: Params = {"sessionUpdate": "tool_call", **call, "title": "Terminal", "kind": "execute",
                     "status": "pending", "content": []}  # fmt: skip
    if live:
        first["content"] = [{"type": "terminal", "terminalId": "toolu_bash"}]
        first["_meta"] = {"claudeCode": {"toolName": "Bash"},
                          "terminal_info": {"terminal_id": "toolu_bash"}}  # fmt: skip
    await agent.update(first)
    command = f"echo {prompt.text}"
    await agent.update({"sessionUpdate": "tool_call_update", **call, "title": command,
                        "rawInput": {"command": command}})  # fmt: skip
    done: Params = {"sessionUpdate": "tool_call_update", **call, "status": "completed"}
    if live:
        output = {"terminal_id": "toolu_bash", "data": f"{prompt.text}\n"}
        await agent.update({"sessionUpdate": "tool_call_update", **call,
                            "_meta": {"terminal_output": output}})  # fmt: skip
    if prompt.text.startswith("hold"):
        return await agent.until_cancelled()
    if live:
        done["_meta"] = {"terminal_exit": {"terminal_id": "toolu_bash", "exit_code": 0,
                                           "signal": None}}  # fmt: skip
    else:
        text = {"type": "text", "text": f"```console\n{prompt.text}\n```"}
        done["content"] = [{"type": "content", "content": text}]
    await agent.update(done)
    await agent.say("Done.")
    return None


async def elicit_steps(agent: Agent, prompt: Prompt) -> None:
    """Prompt: a JSON list of ``{"create": params}`` (an ``elicitation/create`` of
    this session, the answer said as ``RESULT <json>``), ``{"complete": id}`` (an
    ``elicitation/complete``) and ``{"caps": null}`` (says ``CAPS <json>``, the
    client's elicitation capability)."""
    for step in json.loads(prompt.text):
        [(kind, args)] = step.items()
        if kind == "caps":
            key = "capabilities" if agent.version == 2 else "clientCapabilities"
            caps = agent.init_params.get(key, {}).get("elicitation")
            await agent.say(f"CAPS {json.dumps(caps)}\n")
        elif kind == "complete":
            await agent.c.notify("elicitation/complete", {"elicitationId": args})
        else:
            try:
                result = await agent.c.request("elicitation/create", {**sid(agent), **args}, dict)
            except RequestError as err:
                result = {"error": err.code}
            await agent.say(f"RESULT {json.dumps(result, sort_keys=True)}\n\n")


SCENARIOS = (
    Scenario("files", file_steps, v2={}),  # over v2: its steps but the fs/* requests
    Scenario("permission", ask_permission, v2={}),
    Scenario("codex_exec", codex_exec),
    Scenario("gemini_shell", gemini_shell),
    Scenario("tool_calls", tool_call_at, v2={}),
    Scenario("terminal", run_terminal),
    Scenario("claude_bash", claude_bash),
    Scenario("elicit", elicit_steps, v2={}),
)
