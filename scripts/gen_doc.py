"""Rewrite the generated sections of doc/acp.txt from the code, and doc/tags.

- Options and built-in agents: the msgspec Structs of ``acp_nvim/client/config.py``,
  read through ``scripts/gen_defaults.py`` (which also writes lua/acp/defaults.lua).
- Highlights: the ``M.groups`` list of ``lua/acp/highlights.lua``.
- doc/tags: Neovim's ``:helptags`` of the result. It is committed, so that
  ``:help acp`` works in a plain clone on 'runtimepath' (no plugin manager).

Each generated section sits between two lines of the doc that say what follows
and what comes next (:data:`SECTIONS`), not between markers: ``:help`` shows a
marker as it is.

``--check`` writes nothing and exits 1 when either file is out of date.
It parses the one Lua shape highlights.lua uses, not Lua in general.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from gen_defaults import Option, agent_rows, option_rows

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "doc" / "acp.txt"
TAGS = ROOT / "doc" / "tags"
HIGHLIGHTS = ROOT / "lua" / "acp" / "highlights.lua"


def options_section() -> str:
    return "\n".join(_option(option) for option in option_rows())


def _option(option: Option) -> str:
    tag = f"*acp-option-{option.key}*"
    default = "required" if option.required else f"default: `{option.default}`"
    facts = ", ".join(f for f in (default, option.bounds) if f)
    head = _fill(f"{option.key}  `{option.lua_type}`  ({facts})", "", "  ")
    return f"{tag:>78}\n{head}\n{_fill(option.text, '    ', '    ')}\n"


def _fill(text: str, first: str, rest: str) -> str:
    """``text`` in lines of at most 78 columns, as the modeline's 'textwidth' (a
    word longer than that, such as a long Lua type, keeps a line of its own)."""
    return textwrap.fill(
        text,
        width=78,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def agents_section() -> str:
    rows = (f"{name:<16}{command}" for name, command in agent_rows())
    return "\n".join(_fill(row, " " * 4, " " * 20) for row in rows)


# The syntax groups of |group-name|: Neovim's help has no hl- tag for them.
SYNTAX_GROUPS = frozenset(
    {
        "Comment", "Constant", "String", "Character", "Number", "Boolean", "Float",
        "Identifier", "Function", "Statement", "Conditional", "Repeat", "Label",
        "Operator", "Keyword", "Exception", "PreProc", "Include", "Define", "Macro",
        "PreCondit", "Type", "StorageClass", "Structure", "Typedef", "Special",
        "SpecialChar", "Tag", "Delimiter", "SpecialComment", "Debug", "Underlined",
        "Ignore", "Error", "Todo", "Added", "Changed", "Removed",
    }
)  # fmt: skip


def highlights_section() -> str:
    lua = HIGHLIGHTS.read_text()
    rows = re.findall(r'\{ "(\w+)", "(\w+)", "([^"]+)" \}', lua)
    out = []
    for name, link, text in rows:
        tag = f"*hl-{name}*"
        target = f"`{link}`, |group-name|" if link in SYNTAX_GROUPS else f"|hl-{link}|"
        out.append(f"{tag:>78}\n{_fill(f'{name:<20} {text} (links to {target})', '', ' ' * 21)}")
    return "\n".join(out)


# Each section: the text its body follows, and the text that follows its body.
SECTIONS = {
    "options": ("*acp-options*\n\n", "\nBuilt-in agents "),
    "agents": ("and what a missing one needs.\n", "\n\n====="),
    "highlights": ("in your config or a colorscheme.\n\n", "\n\n====="),
}


def render(doc: str) -> str:
    bodies = {
        "options": options_section(),
        "agents": agents_section(),
        "highlights": highlights_section(),
    }
    for section, body in bodies.items():
        start, end = SECTIONS[section]
        if start not in doc:
            sys.exit(f"doc/acp.txt: no {start.strip()!r} before the {section}")
        head, rest = doc.split(start, 1)
        if end not in rest:
            sys.exit(f"doc/acp.txt: no {end.strip()!r} after the {section}")
        _, tail = rest.split(end, 1)
        doc = f"{head}{start}{body}\n{end}{tail}"
    return doc


def nvim() -> str:
    """$NVIM_BIN, else the Neovim of this Python's environment (the test extra
    installs one), else the one on PATH."""
    found = os.environ.get("NVIM_BIN") or shutil.which(
        "nvim", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    )
    if not found:
        sys.exit("doc/tags needs Neovim: set NVIM_BIN")
    return found


def helptags(doc: str) -> str:
    """doc/tags as ``:helptags`` writes it for ``doc`` (a duplicate tag fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, DOC.name).write_text(doc)
        run = subprocess.run(
            [nvim(), "--clean", "--headless", "-c", f"helptags {tmp}", "-c", "qa!"],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode or re.search(r"E\d+:", run.stderr):
            sys.exit(f"helptags failed: {run.stderr.strip()}")
        return Path(tmp, "tags").read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if doc/ is stale")
    args = parser.parse_args()
    old = DOC.read_text()
    new = render(old)
    tags = helptags(new)
    if args.check:
        stale = [p.name for p, text in ((DOC, new), (TAGS, tags)) if _read(p) != text]
        if stale:
            print(f"doc/{' and doc/'.join(stale)} out of date: run `make doc`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    TAGS.write_text(tags)
    return 0


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


if __name__ == "__main__":
    sys.exit(main())
