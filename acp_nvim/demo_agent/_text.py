"""What the demo agent says, over v1 and v2 alike."""

from __future__ import annotations

__all__ = [
    "COMMANDS",
    "COMPACTED_NOTICE",
    "FORK_AT_MESSAGE",
    "HELP",
    "MODELS",
    "MODES",
    "STEERING",
    "compaction_updates",
    "fork_point",
    "help_text",
    "named_file",
    "prompt_words",
    "reply",
    "steered_reply",
    "thought",
    "typed",
    "until_steered",
    "usage_update",
]

import os
import re
from collections.abc import Callable, Iterator
from typing import Any

# What the demo shows over both versions; each version's help adds its own.
_HELP_BOTH = """- anything: a short streamed reply with a code block
- `long`: a long reply (try `:AcpCancel` or `<C-c>` while it streams)
- `fail`: the agent answers the prompt with an error
- `crash`: the agent exits in the middle of the turn
- `unknown`: also sends an update of a kind no client knows (`acp.status()` names it)
- `:AcpFork`: a new chat that goes on from this one in a session of its own
  (`session/fork`); what you say there stays out of this chat
- `:AcpRewind 2`: back to before your second prompt, files and conversation (the
  demo forks its session at its last reply before it); `:AcpBranches` shows the
  turns left behind again; `<CR>` on one of your messages edits it
- `long`, then `:AcpSend! shorter please` (or `<M-CR>` in the input): your message
  joins the running turn (`_session/steering`): the reply stops at its next paragraph
  and answers it below your message
- `compact`: the demo compacts its context (a folded block) and says so in a notice
- `buffers`, `diagnostics`, `selection`: asks the editor itself, through the MCP
  server the client offered (`list_buffers`, `get_diagnostics`, `get_selection`)
"""


def help_text(own: str) -> str:
    """The demo's answer to `help`: what it shows over both versions, then ``own``,
    what it shows over the version spoken (nothing the other one would list)."""
    return f"I am the offline demo agent of acp.nvim. Try:\n\n{_HELP_BOTH}{own}"


HELP = help_text("""- `permission`: the agent asks before it runs a (pretend) command; answer
  with the key shown in the chat, `<CR>` on the prompt, or `:AcpPermission`
- `edit [PATH]`: reads PATH (default: `demo.txt` in the session's directory) through
  the editor with fs/read_text_file, asks permission, and adds a comment line at its
  top with fs/write_text_file; unsaved text in its buffer is kept (`:AcpReview`);
  a PATH with spaces: `@my\\ notes.txt` (as `@` completes it) or in quotes
- `run`: runs a short shell command in a terminal the chat shows live (`<CR>` on
  its `[terminal …]` line or `:AcpTerminal` opens it), then reports its output
- `disk [PATH]`: appends a line to PATH on disk by itself and reports it only in a
  tool call, as Claude's and Codex's agents do (`:AcpReview` catches it)
- `:AcpMode`, `:AcpModel`: the demo's modes and models; `/` shows its commands;
  `:AcpSessions` lists this process's sessions (`session/list`, `session/load`);
  `:AcpLogin` runs its login; the winbar shows a title and a context meter
- over ACP v2 (`protocol_version = 2`), `help` lists what it shows there
""")

# Forks at a message (the jetbrains.air.fork extension), advertised in the agent
# capabilities' _meta; steering (_session/steering) in the initialize result's.
FORK_AT_MESSAGE = {"jetbrains": {"air": {"fork": {"version": 1, "inclusive": True}}}}
STEERING = {"steering": {"supported": True}}

# What the demo offers over both versions: (id, name) pairs, and slash commands.
MODES = [("ask", "Ask"), ("code", "Code")]
MODELS = [("demo-small", "Demo small"), ("demo-large", "Demo large")]
# Slash commands: (name, description, input hint or None).
COMMANDS = [
    ("help", "What the demo agent can do", None),
    ("explain", "Explain some code", "what to explain"),
]


def _chunks(text: str) -> list[str]:
    """Split text into words with their spacing, the way a model streams tokens."""
    return re.findall(r"\S+\s*|\s+", text)


def until_steered(text: str, steered: Callable[[], bool]) -> Iterator[str]:
    """The chunks of ``text``, ending at a paragraph's end once a message joined the
    running turn (``steered()``): a model takes it at its next step and answers it in
    a message of its own, below the user's."""
    for piece in _chunks(text):
        if "\n\n" in piece and steered():
            if piece.strip():
                yield piece.rstrip()
            return
        yield piece


# A seeded session's first prompt carries the conversation so far in a
# <conversation> element, ahead of what the user typed (client/agent/sessions.py).
_CARRIED = re.compile(r"\A.*?<conversation>\n.*\n</conversation>\s*", re.S)


def typed(blocks: list[dict[str, Any]]) -> str:
    """The text the user typed in a prompt's content blocks: a conversation carried
    ahead of it is context, not words for the demo to act on (a hand-over whose
    transcript said `help` is not asking for help)."""
    text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    return _CARRIED.sub("", text, count=1)


# A prompt's words that may name a file: one quoted whole (`...`, "..."), or
# one whose spaces are escaped as `@` completion writes them (@my\ notes.txt).
_PATH_WORD = re.compile(r"`([^`]+)`|\"([^\"]+)\"|((?:\\ |\S)+)")


def named_file(text: str, cwd: str) -> str:
    """The first word of the prompt naming an existing file (an `@` mention's too),
    else demo.txt in ``cwd``."""
    for match in _PATH_WORD.finditer(text):
        word = next(group for group in match.groups() if group is not None)
        word = word.replace("\\ ", " ").strip("`'\",;").removeprefix("@")
        path = os.path.join(cwd, os.path.expanduser(word))
        if os.path.isfile(path):
            return os.path.normpath(path)
    return os.path.join(cwd, "demo.txt")


def prompt_words(text: str) -> set[str]:
    """The words of a prompt that pick what the demo shows (``help``, ``long``, ...)."""
    return set(re.findall(r"[a-z]+", text.lower()))


def thought(text: str) -> str:
    return f"The user wrote {len(text)} characters. I will answer with a short example."


def reply(text: str, words: set[str]) -> str:
    """The answer to any prompt: the prompt quoted, a code block; ``long`` makes it long."""
    answer = (
        f"You said: *{text.strip()}*\n\n"
        "Here is some code:\n\n"
        '```python\ndef greet(name: str) -> str:\n    return f"Hello, {name}!"\n```\n\n'
        "Type `help` to see what else I can do."
    )
    if "long" in words:  # 2,000 words in paragraphs of 40, as a model writes them
        paragraphs = (" ".join(f"word{i}" for i in range(p, p + 40)) for p in range(0, 2000, 40))
        answer += "\n\n" + "\n\n".join(paragraphs)
    return answer


def fork_point(params: dict[str, Any]) -> str | None:
    """The message a ``session/fork`` ends at (``_meta.jetbrains.air.fork``), or None."""
    meta = params.get("_meta") or {}
    fork = ((meta.get("jetbrains") or {}).get("air") or {}).get("fork") or {}
    message_id = fork.get("messageId") if fork.get("version") == 1 else None
    return message_id if isinstance(message_id, str) else None


def steered_reply(text: str) -> str:
    """The demo's answer to a message steered into its running turn."""
    return f"You added, while I was working: “{text}”. Noted — I will take it into account."


def compaction_updates(compaction_id: str) -> list[dict[str, Any]]:
    """A compaction as the demo reports it: started, its summary, done."""
    summary = "Kept: what you asked so far and the files we touched; the rest is dropped."
    return [
        {"sessionUpdate": "compaction_update", "compactionId": compaction_id,
         "status": "in_progress"},
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id,
         "content": {"type": "text", "text": summary}},
        {"sessionUpdate": "compaction_update", "compactionId": compaction_id,
         "status": "completed"},
    ]  # fmt: skip


COMPACTED_NOTICE = {
    "sessionUpdate": "notice",
    "severity": "info",
    "title": "Context compacted",
    "description": "the older turns are summarised",
}


def usage_update(used: int, billed: int) -> dict[str, Any]:
    """The context meter, ``used`` tokens of 200k, and the cost of the ``billed``
    tokens so far: a compaction shrinks the one, never the other."""
    cost = {"amount": round(billed * 3e-6, 4), "currency": "USD"}
    return {"sessionUpdate": "usage_update", "used": used, "size": 200_000, "cost": cost}
