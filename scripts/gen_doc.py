"""Rewrite the generated sections of doc/acp.txt from the Lua sources, and doc/tags.

- Options: the ``---@field`` annotations of ``acp.Options`` and its nested
  classes in ``lua/acp/config.lua`` with the defaults from ``M.defaults``.
- Highlights: the ``M.groups`` list of ``lua/acp/highlights.lua``.
- doc/tags: Neovim's ``:helptags`` of the result. It is committed, so that
  ``:help acp`` works in a plain clone on 'runtimepath' (no plugin manager).

``--check`` writes nothing and exits 1 when either file is out of date.
It parses the few Lua shapes those two files use, not Lua in general.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "doc" / "acp.txt"
TAGS = ROOT / "doc" / "tags"
CONFIG = ROOT / "lua" / "acp" / "config.lua"
HIGHLIGHTS = ROOT / "lua" / "acp" / "highlights.lua"

FIELD = re.compile(r"^---@field (\w+)(\??) (\S+)\s*(.*)$")
CLASS = re.compile(r"^---@class \(exact\) (\S+)")
# Nested option classes are documented under the key that holds them.
NESTED = {"acp.AgentSpec": "agents.{name}", "acp.ChatOptions": "chat"}


def parse_classes(lua: str) -> dict[str, list[tuple[str, str, str]]]:
    classes: dict[str, list[tuple[str, str, str]]] = {}
    current = None
    for line in lua.splitlines():
        if match := CLASS.match(line):
            current = classes.setdefault(match[1], [])
        elif (match := FIELD.match(line)) and current is not None:
            current.append((match[1], match[3], match[4].strip()))
        elif not line.startswith("---"):
            current = None
    return classes


def parse_defaults(lua: str) -> dict[str, str]:
    """Flat ``key`` / ``table.key`` -> Lua literal, from ``M.defaults = { ... }``."""
    body = lua[lua.index("M.defaults = {") :]
    defaults: dict[str, str] = {}
    stack: list[str] = []
    for line in body.splitlines()[1:]:
        line = line.strip()
        if line.startswith("}"):
            if not stack:
                break
            stack.pop()
            continue
        if match := re.match(r"(\w+) = \{$", line):
            defaults[".".join([*stack, match[1]])] = "{ … }"
            stack.append(match[1])
        elif match := re.match(r"(\w+) = (.*?),?$", line):
            defaults[".".join([*stack, match[1]])] = match[2]
    return defaults


def options_section() -> str:
    lua = CONFIG.read_text()
    classes = parse_classes(lua)
    defaults = parse_defaults(lua)
    out = []
    for name, type_, text in classes["acp.Options"]:
        out.append(_option(name, type_, text, defaults.get(name, "nil")))
        for nested, prefix in NESTED.items():
            if type_ == nested or type_.endswith(f",{nested}>"):
                for sub, sub_type, sub_text in classes[nested]:
                    key = f"{prefix.format(name='{name}')}.{sub}"
                    out.append(_option(key, sub_type, sub_text, defaults.get(key, "nil")))
    return "\n".join(out)


def _option(key: str, type_: str, text: str, default: str) -> str:
    tag = f"*acp-option-{key}*"
    return f"{tag:>78}\n{key}  `{type_}`  (default: `{default}`)\n    {text}\n"


def highlights_section() -> str:
    lua = HIGHLIGHTS.read_text()
    rows = re.findall(r'\{ "(\w+)", "(\w+)", "([^"]+)" \}', lua)
    out = []
    for name, link, text in rows:
        tag = f"*hl-{name}*"
        out.append(f"{tag:>78}\n{name:<20} {text} (links to |hl-{link}|)")
    return "\n".join(out)


def render(doc: str) -> str:
    for section, body in (("options", options_section()), ("highlights", highlights_section())):
        start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
        head, rest = doc.split(start, 1)
        _, tail = rest.split(end, 1)
        doc = f"{head}{start}\n{body}\n{end}{tail}"
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
