"""Rewrite the generated sections of doc/acp.txt from the code.

- Options and built-in agents: the msgspec Structs of ``acp_nvim/client/config.py``,
  read through ``scripts/gen_defaults.py`` (which also writes lua/acp/defaults.lua).
- Highlights: the ``M.groups`` list of ``lua/acp/highlights.lua``.

``--check`` writes nothing and exits 1 when doc/acp.txt is out of date.
It parses the one Lua shape highlights.lua uses, not Lua in general.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from gen_defaults import Option, agent_rows, option_rows

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "doc" / "acp.txt"
HIGHLIGHTS = ROOT / "lua" / "acp" / "highlights.lua"


def options_section() -> str:
    return "\n".join(_option(option) for option in option_rows())


def _option(option: Option) -> str:
    tag = f"*acp-option-{option.key}*"
    default = "required" if option.required else f"default: `{option.default}`"
    facts = ", ".join(f for f in (default, option.bounds) if f)
    return f"{tag:>78}\n{option.key}  `{option.lua_type}`  ({facts})\n    {option.text}\n"


def agents_section() -> str:
    return "\n".join(f"    {name:<16}{command}" for name, command in agent_rows())


def highlights_section() -> str:
    lua = HIGHLIGHTS.read_text()
    rows = re.findall(r'\{ "(\w+)", "(\w+)", "([^"]+)" \}', lua)
    out = []
    for name, link, text in rows:
        tag = f"*hl-{name}*"
        out.append(f"{tag:>78}\n{name:<20} {text} (links to |hl-{link}|)")
    return "\n".join(out)


def render(doc: str) -> str:
    sections = {
        "options": options_section(),
        "agents": agents_section(),
        "highlights": highlights_section(),
    }
    for section, body in sections.items():
        start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
        head, rest = doc.split(start, 1)
        _, tail = rest.split(end, 1)
        doc = f"{head}{start}\n{body}\n{end}{tail}"
    return doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if doc/acp.txt is stale")
    args = parser.parse_args()
    old = DOC.read_text()
    new = render(old)
    if args.check:
        if new != old:
            print("doc/acp.txt is out of date: run `make doc`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
