"""Write lua/acp/defaults.lua from the options defined in acp_nvim/client/config.py.

The Python msgspec Structs are the one definition of the options: their fields give
the key, the type and the default, the docstring under each field its description,
and ``builtin_agents()`` the agents usable without configuration. From them this
writes the LuaLS ``---@class (exact)`` annotations, the defaults table and the
built-in agent names, for the Lua that needs them before the Python host answers
(window sizes, :AcpChat completion). ``scripts/gen_doc.py`` documents the options
from the same rows (:func:`option_rows`, :func:`agent_rows`). It also copies the
words of acp_nvim/client/errors.py that Lua says itself, refusing before it asks
the Python side (``NO_AGENT``, ``STARTING``), and writes which keys of the
``keys`` option are mapped together in each kind of buffer, as each key's field
says (``MappedIn``), for setup()'s clash warning (:func:`key_places`).

``--check`` writes nothing and exits 1 when lua/acp/defaults.lua is out of date.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
import json
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, UnionType
from typing import Annotated, Any, Literal, Union

import msgspec

ROOT = Path(__file__).resolve().parents[1]
LUA = ROOT / "lua" / "acp" / "defaults.lua"
SOURCE = "acp_nvim/client/config.py"
ERRORS = "acp_nvim/client/errors.py"
# The LuaLS class of each option Struct.
LUA_CLASS = {
    "Config": "acp.Options",
    "AgentConfig": "acp.AgentSpec",
    "ChatOptions": "acp.ChatOptions",
    "TimeoutOptions": "acp.TimeoutOptions",
    "HistoryOptions": "acp.HistoryOptions",
    "FileAccessOptions": "acp.FileAccessOptions",
    "HunkKeys": "acp.HunkKeys",
    "PermissionOptions": "acp.PermissionOptions",
    "PermissionAllow": "acp.PermissionAllow",
    "Keys": "acp.Keys",
    "ChatKeys": "acp.ChatKeys",
    "InputKeys": "acp.InputKeys",
    "PermissionKeys": "acp.PermissionKeys",
    "ReviewKeys": "acp.ReviewKeys",
    "QueueKeys": "acp.QueueKeys",
    "EditorMcpOptions": "acp.EditorMcpOptions",
    "McpServerOptions": "acp.McpServerSpec",
}
SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class Option:
    key: str  # dotted, e.g. "chat.width", "agents.{name}.cmd"
    lua_type: str
    required: bool
    default: str  # a Lua literal; "{ … }" for a nested table of options, "nil" if required
    bounds: str  # "at least 20", "" when unbounded
    text: str


def config_module() -> ModuleType:
    # The working tree's module, whatever the venv has installed.
    if sys.path[0] != str(ROOT):
        sys.path.insert(0, str(ROOT))
    import acp_nvim.client.config as config

    return config


def errors_module() -> ModuleType:
    config_module()  # the working tree's package
    import acp_nvim.client.errors as errors

    return errors


def descriptions(cls: type) -> dict[str, str]:
    """The docstring under each field of ``cls``, whitespace folded to single spaces."""
    body = ast.parse(inspect.getsource(cls)).body[0]
    assert isinstance(body, ast.ClassDef)
    texts = {}
    for field, doc in itertools.pairwise(body.body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(doc, ast.Expr)
            and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)
        ):
            texts[field.target.id] = " ".join(doc.value.value.split())
    return texts


def lua_type(t: Any) -> str:
    """The LuaLS type of a field's annotation; nil is what the `?` of an optional says."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is Annotated:
        return lua_type(args[0])
    if origin is Literal:
        return "|".join(json.dumps(v) for v in args)
    if origin is list:
        item = lua_type(args[0])
        return f"({item})[]" if "|" in item else f"{item}[]"
    if origin is dict:
        return f"table<{lua_type(args[0])},{lua_type(args[1])}>"
    if origin in (Union, UnionType):
        return "|".join(lua_type(a) for a in args if a is not type(None))
    if isinstance(t, type) and issubclass(t, msgspec.Struct):
        return LUA_CLASS[t.__name__]
    if t in SCALARS:
        return SCALARS[t]
    raise TypeError(f"{SOURCE}: no Lua type for {t!r}")


def lua_check(t: Any) -> str:
    """A field's type as lua/acp/config.lua checks it: a scalar's name, or a table
    ({enum}, {list}, {map}, {class}, {any_of}) with the bounds of its Meta."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is Annotated:
        spec = lua_check(args[0])
        bounds = [
            f"{name} = {json.dumps(getattr(meta, name))}"
            for meta in args[1:]
            if isinstance(meta, msgspec.Meta)
            for name in ("gt", "ge", "le", "min_length")
            if getattr(meta, name) is not None
        ]
        if not bounds:
            return spec
        head = spec[2:-2] if spec.startswith("{ ") else f"type = {spec}"
        return "{ " + ", ".join([head, *bounds]) + " }"
    if origin is Literal:
        return "{ enum = { " + ", ".join(lua_literal(v) for v in args) + " } }"
    if origin is list:
        return f"{{ list = {lua_check(args[0])} }}"
    if origin is dict:
        return f"{{ map = {lua_check(args[1])} }}"
    if origin in (Union, UnionType):
        kinds = [lua_check(a) for a in args if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else "{ any_of = { " + ", ".join(kinds) + " } }"
    if isinstance(t, type) and issubclass(t, msgspec.Struct):
        return f'{{ class = "{LUA_CLASS[t.__name__]}" }}'
    if t in SCALARS:
        return f'"{SCALARS[t]}"'
    raise TypeError(f"{SOURCE}: no Lua check for {t!r}")


def lua_literal(value: Any, indent: str = "") -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "{ " + ", ".join(lua_literal(v) for v in value) + " }" if value else "{}"
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "  "
        rows = [f"{inner}{k} = {lua_literal(v, inner)}," for k, v in value.items()]
        return "{\n" + "\n".join(rows) + f"\n{indent}}}"
    raise TypeError(f"{SOURCE}: no Lua literal for {value!r}")


def _bounds(t: Any) -> str:
    """A number's ``Meta(ge=..., le=..., gt=...)`` in words."""
    metas = [a for a in typing.get_args(t)[1:] if isinstance(a, msgspec.Meta)]
    if any(m.gt == 0 for m in metas):
        return "more than 0"
    ge = next((m.ge for m in metas if m.ge is not None), None)
    le = next((m.le for m in metas if m.le is not None), None)
    if ge is not None and le is not None:
        return f"{ge} to {le}"
    return f"at least {ge}" if ge is not None else ""


def _nested(t: Any) -> tuple[type[msgspec.Struct], str] | None:
    """A Struct of options held by a field, and the key part it adds (``{name}`` for a dict)."""
    if isinstance(t, type) and issubclass(t, msgspec.Struct):
        return t, ""
    if typing.get_origin(t) is dict:
        found = _nested(typing.get_args(t)[1])
        return (found[0], ".{name}") if found else None
    if typing.get_origin(t) in (Union, UnionType):  # a table of options, or false
        return next(filter(None, map(_nested, typing.get_args(t))), None)
    return None


def _default(field: msgspec.structs.FieldInfo) -> Any:
    if field.required:
        return None
    if field.default_factory is not msgspec.NODEFAULT:
        return msgspec.to_builtins(field.default_factory())
    return field.default


def option_rows(cls: type[msgspec.Struct] | None = None, prefix: str = "") -> Iterator[Option]:
    """Every option, depth first: ``chat`` then ``chat.position``, ..."""
    cls = cls or config_module().Config
    texts = descriptions(cls)
    for field in msgspec.structs.fields(cls):
        key = prefix + field.encode_name
        if field.name not in texts:
            where = f"{cls.__module__}.{cls.__name__}.{field.name}"
            raise SystemExit(f"{where} has no docstring: it is the option's description")
        nested = _nested(field.type)
        default = _default(field)
        yield Option(
            key=key,
            lua_type=lua_type(field.type),
            required=field.required,
            default="{ … }" if isinstance(default, dict) and default else lua_literal(default),
            bounds=_bounds(field.type),
            text=texts[field.name],
        )
        if nested:
            yield from option_rows(nested[0], f"{key}{nested[1]}.")


def agent_rows() -> list[tuple[str, str]]:
    """The built-in agents as (name, what runs), the host's own Python shown as python."""
    config = config_module()
    rows = []
    for name, agent in config.builtin_agents().items():
        argv = " ".join("python" if arg == sys.executable else arg for arg in agent.cmd)
        plain = config.AgentConfig(cmd=agent.cmd)
        extra = [
            f"{f} = {lua_literal(getattr(agent, f))}"
            for f in agent.__struct_fields__
            if f not in ("cmd", "env") and getattr(agent, f) != getattr(plain, f)
        ]
        rows.append((name, f"{argv}  ({', '.join(extra)})" if extra else argv))
    return rows


def _classes(cls: type[msgspec.Struct]) -> Iterator[type[msgspec.Struct]]:
    """Nested option Structs before the ones holding them, as LuaLS reads best."""
    for field in msgspec.structs.fields(cls):
        if nested := _nested(field.type):
            yield from _classes(nested[0])
    yield cls


def key_places(keys: type[msgspec.Struct] | None = None) -> dict[str, list[str]]:
    """Each kind of buffer keys are mapped in (``KEY_PLACES``) with the keys of the
    ``keys`` option mapped there ("chat.hide"), in the order the tables define them.
    A key that does not say where it is mapped (``MappedIn``) stops the generation:
    left out, it would never be warned of sharing a lhs (``acp.keys.clashes``)."""
    config = config_module()
    places: dict[str, list[str]] = {place: [] for place in config.KEY_PLACES}
    for table in msgspec.structs.fields(keys or config.Keys):
        cls = _nested(table.type)
        assert cls is not None, f"{SOURCE}: keys.{table.encode_name} is no table of keys"
        for field in msgspec.structs.fields(cls[0]):
            where = f"{cls[0].__name__}.{field.name}"
            said = [m for m in typing.get_args(field.type)[1:] if isinstance(m, config.MappedIn)]
            if typing.get_origin(field.type) is not Annotated or not said:
                raise SystemExit(f"{SOURCE}: {where} does not say where it is mapped (MappedIn)")
            for place in said[0].places:
                if place not in places:
                    raise SystemExit(f"{SOURCE}: {where} is mapped in {place!r}, not a KEY_PLACES")
                places[place].append(f"{table.encode_name}.{field.encode_name}")
    return places


def render() -> str:
    config = config_module()
    out = [
        f"-- Generated by scripts/gen_defaults.py from {SOURCE} and",
        f"-- {ERRORS}: do not edit, run `make doc`.",
        "-- The options' types, defaults and the built-in agents, for the Lua that needs",
        "-- them before the Python host answers (which validates the options); and the",
        "-- Python side's words for what Lua refuses without asking it.",
        "if jit then jit.off(true, true) end -- decision 0068",
        "local M = {}",
        "",
    ]
    for cls in dict.fromkeys(_classes(config.Config)):  # a class held twice, once
        texts = descriptions(cls)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        out += [f"--- {doc}", f"---@class (exact) {LUA_CLASS[cls.__name__]}"]
        for field in msgspec.structs.fields(cls):
            optional = "" if field.required else "?"
            out.append(
                f"---@field {field.encode_name}{optional} {lua_type(field.type)} "
                f"{texts[field.name]}"
            )
        out.append("")
    defaults = msgspec.to_builtins(config.Config())
    names = ", ".join(json.dumps(name) for name in config.builtin_agents())
    out += [
        "---@type acp.Options",
        f"M.options = {lua_literal(defaults)}",
        "",
        "--- What setup() checks before Lua uses an option (lua/acp/config.lua): each",
        "--- class's required keys and the type of each field.",
        "M.classes = {",
    ]
    for cls in dict.fromkeys(_classes(config.Config)):
        fields = msgspec.structs.fields(cls)
        required = lua_literal([f.encode_name for f in fields if f.required])
        out.append(f'  ["{LUA_CLASS[cls.__name__]}"] = {{ required = {required}, fields = {{')
        out += [f"    {field.encode_name} = {lua_check(field.type)}," for field in fields]
        out.append("  } },")
    out += [
        "}",
        "",
        "--- Agents usable without configuration.",
        f"M.agents = {{ {names} }}",
        "",
        "--- Why a command that asks a chat's agent cannot be done: the chat has none.",
        f"M.no_agent = {lua_literal(errors_module().NO_AGENT)}",
        "--- ... the chat's agent has not answered yet.",
        f"M.starting = {lua_literal(errors_module().STARTING)}",
        "",
        "--- The editor's own MCP server's name, and why no server of yours may take it.",
        f"M.editor_server = {lua_literal(config_module().EDITOR_SERVER)}",
        f"M.editor_server_taken = {lua_literal(config_module().EDITOR_SERVER_TAKEN)}",
        "",
        "--- The keys mapped together in each kind of buffer (keys.chat.hide is \"chat.hide\"):",
        "--- two of them on one lhs there, only the one mapped last works (acp.keys.clashes).",
        "M.key_places = {",
        *(
            f"  {{ name = {lua_literal(config.KEY_PLACES[place])}, keys = {lua_literal(keys)} }},"
            for place, keys in key_places().items()
        ),
        "}",
        "",
        "--- A chat size above 1 is a whole count of cells, at least this many.",
        f"M.chat_sizes = {lua_literal(config_module().CHAT_SIZES)}",
        "",
        "return M",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the Lua file is stale")
    args = parser.parse_args()
    new = render()
    if args.check:
        if not LUA.exists() or LUA.read_text() != new:
            print(f"{LUA.relative_to(ROOT)} is out of date: run `make doc`", file=sys.stderr)
            return 1
        return 0
    LUA.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
