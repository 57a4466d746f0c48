"""What the demo agent says, over v1 and v2 alike."""

from __future__ import annotations

__all__ = ["COMMANDS", "HELP", "MODELS", "MODES", "chunks", "prompt_words", "reply", "thought"]

import re

HELP = """I am the offline demo agent of acp.nvim. Try:

- anything: a short streamed reply with a code block
- `long`: a long reply (try `:AcpCancel` or `<C-c>` while it streams)
- `fail`: the agent answers the prompt with an error
- `crash`: the agent exits in the middle of the turn
- `permission`: the agent asks before it runs a (pretend) command; answer with the
  key shown in the chat, `<CR>` on the prompt, or `:AcpPermission`
- `edit [PATH]`: reads PATH (default: `demo.txt` in the session's directory) through
  the editor with fs/read_text_file, asks permission, and adds a comment line at its
  top with fs/write_text_file; unsaved text in its buffer is kept (`:AcpReview`)
- `run`: runs a short shell command in a terminal the chat shows live (`<CR>` on
  its `[terminal …]` line or `:AcpTerminal` opens it), then reports its output
- `disk [PATH]`: appends a line to PATH on disk by itself and reports it only in a
  tool call, as Claude's and Codex's agents do (`:AcpReview` catches it)
- `:AcpMode`, `:AcpModel`: the demo's modes and models; `/` shows its commands;
  `:AcpSessions` lists this process's sessions (`session/list`, `session/load`);
  `:AcpLogin` runs its login; the winbar shows a title and a context meter
- `:AcpFork`: a new chat that goes on from this one in a session of its own
  (`session/fork`); what you say there stays out of this chat
- `unknown`: also sends an update of a kind no client knows (`acp.status()` names it)
- `buffers`, `diagnostics`, `selection`: asks the editor itself, through the MCP
  server the client offered (`list_buffers`, `get_diagnostics`, `get_selection`)
- over ACP v2 (`protocol_version = 2`), `help` lists more
"""

# What the demo offers over both versions: (id, name) pairs, and slash commands.
MODES = [("ask", "Ask"), ("code", "Code")]
MODELS = [("demo-small", "Demo small"), ("demo-large", "Demo large")]
# Slash commands: (name, description, input hint or None).
COMMANDS = [
    ("help", "What the demo agent can do", None),
    ("explain", "Explain some code", "what to explain"),
]


def chunks(text: str) -> list[str]:
    """Split text into words with their spacing, the way a model streams tokens."""
    return re.findall(r"\S+\s*|\s+", text)


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
    if "long" in words:
        answer += "\n\n" + " ".join(f"word{i}" for i in range(2000))
    return answer
