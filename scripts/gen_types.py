#!/usr/bin/env python3
"""Generate msgspec types for ACP from the pinned JSON schemas.

Reads ``spec/acp/schema/v{1,2}/schema.json`` (+ ``meta.json`` and the unstable pair
beside each; spec/README.md says where they come from) and writes
``acp_nvim/protocol/schema_v1.py`` and ``schema_v2.py``. ``--check`` writes nothing
and exits 1 when a committed module differs from what would be generated, or when a
source is missing (said as such).

What it does, per ``$defs`` entry:

- object                  -> ``class Name(msgspec.Struct, kw_only=True, omit_defaults=True,
                             gc=False)`` (decoded JSON holds no cycles, and a stream decodes
                             thousands a second: the collector need not track them);
                             snake_case attributes, ``msgspec.field(name=...)`` for the wire
                             key, ``_meta`` -> ``meta``; the description's first sentence
                             becomes the docstring. Optional fields default to the schema's
                             ``default`` when it has one (False, [], a capabilities struct),
                             else None. An untagged ``anyOf`` of objects beside the
                             properties (elicitation scopes) is merged in as optional fields.
- string/integer enum     -> ``Name = str`` (fields decode any value: real agents send values
                             outside the enums), plus ``NameLiteral`` and ``NAME_VALUES``.
- discriminated union     -> one tagged subclass per member, ``<Union><Tag>(<Member>,
                             tag_field=..., tag=...)``, and ``Name = Union[...]``. Fields of
                             such a type are ``Open[Name]``: one closed msgspec pass when
                             every variant is known, else a `UnionDecoder` per field (open
                             twins of the structs), unknown tags become ``Unknown`` (see
                             ``acp_nvim/protocol/unknown.py``). Untagged unions of objects get
                             the same treatment, members tried in order. Properties beside the
                             union are repeated in every variant; a union whose variant is
                             itself a union (v2 ``state_update``) gets that variant flattened.
- simple types / unions of primitives -> type aliases; an integer is the bounded alias
  of its ``format`` (`INTEGERS`: ``uint64`` -> ``UInt64``), so a value past it fails
  the field as a wrong type does (``Lenient``: falls back) instead of decoding and
  failing later (msgpack, which carries render ops to Neovim, holds 64 bits).
- patch structs (`PATCH_DEFS`): optional fields are three-state
  (omitted -> ``UNSET``, ``null`` -> ``None``).
- `LENIENT_OPTIONAL`: required fields real agents leave out become optional.
- ``x-deserialize-default-on-error`` (the Rust SDK's per-field error recovery): the
  field is ``Lenient[T]``, raw JSON in the open twins, decoded there; a value that is
  not a ``T`` becomes the field's default. ``x-deserialize-skip-invalid-items``: a list
  keeps only the items that decode (the rest of the message stands either way).
- the lines turning raw fields into values are a struct's ``_decode_raw``, the open
  twins' ``__post_init__``; a struct's own ``__post_init__`` calls it only where
  msgspec's closed pass leaves a field raw too (a union it cannot decode closed): a
  Python call per struct cost more than msgspec's whole closed pass.
- ``meta.json`` -> ``AgentMethod`` / ``ClientMethod`` / ``ProtocolMethod`` constants, and
  ``x-method`` annotations -> ``METHODS`` (method -> (params type, result type)).

What it deliberately does not do:

- no validation constraints (``minimum``, ``pattern``, ``minItems``; of ``format``
  only the integers' bounds): we are a lenient client, not a validator;
- no JSON-RPC envelopes (``x-docs-ignore`` defs such as ``AgentRequest``): framing is
  the connection's job, params/results are decoded by method;
- unknown object keys are ignored on decode, not preserved (except in ``Unknown``);
- the ``*.unstable.json`` schemas are read only for the methods in `ADOPTED_UNSTABLE`:
  their request/response defs, the defs those need that the stable schema lacks, and
  the capability field that advertises them (and the ``McpServer`` member of MCP-over-ACP),
  each marked with an ``# UNSTABLE`` comment.
  The rest (nes, document/*, providers, ...) would only grow the modules and start-up.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
import textwrap
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SCHEMA_DIR = REPO / "spec/acp/schema"
# What each version is generated from, in its folder of the schema directory.
SOURCES = ("schema.json", "meta.json", "schema.unstable.json", "meta.unstable.json")
VERSIONS = ("v1", "v2")


def output_path(version: str) -> Path:
    return REPO / f"acp_nvim/protocol/schema_{version}.py"


# Fields the schema requires but real agents omit; they become optional (None).
# Keep this short, and say who sends what.
LENIENT_OPTIONAL: dict[tuple[str, str], str] = {
    # The older Claude Code adapter (claude-code-acp) sends permission options
    # with only optionId and name.
    ("PermissionOption", "kind"): "claude-code-acp omits it",
}

# Upserts ("omitted = unchanged, null = cleared, value = replaced"; see
# docs/v2/migration.mdx): v2's, and v1's compaction (unstable, advertised: its
# contract is the same). Their optional fields are three-state: T | None | UnsetType.
PATCH_DEFS: dict[str, frozenset[str]] = {
    "v1": frozenset({"CompactionUpdate"}),
    "v2": frozenset(
        {
            "ToolCallUpdate",
            "UserMessage",
            "AgentMessage",
            "AgentThought",
            "TerminalUpdate",
            "SessionInfoUpdate",
            "CompactionUpdate",
        }
    ),
}

# Methods of the unstable schemas this client uses -> what else of the unstable
# schema they need in the stable defs, as (def, name): a property of an object def
# (the capability field that advertises the method) or the member of a union def
# whose tag is `name`. Released agents (opencode) advertise session/fork over v1
# (decision 0026); the editor MCP server goes over the ACP connection (mcp/*) where
# the agent advertises McpCapabilities.acp (decision 0024); session/update gains the
# compaction and notice updates, and v1 the client capability that allows compaction
# (v2 has none to advertise; decision 0042), and the tool calls' `name`. A third
# item names the only version an addition is for.
ADOPTED_UNSTABLE: dict[str, tuple[tuple[str, ...], ...]] = {
    "session/fork": (("SessionCapabilities", "fork"),),
    "mcp/connect": (("McpCapabilities", "acp"), ("McpServer", "acp")),
    "mcp/message": (),
    "mcp/disconnect": (),
    # The agent's own token counts for a turn (decision 0042): v1 in the prompt's
    # answer, v2 on the idle state update that ends the turn.
    "session/prompt": (("PromptResponse", "usage", "v1"),),
    "session/update": (
        ("IdleStateUpdate", "usage", "v2"),
        ("SessionUpdate", "notice"),
        ("SessionUpdate", "compaction_update"),
        ("SessionUpdate", "compaction_summary_chunk"),
        # Plans that go, and those given as markdown or as a file; v1's plans with
        # ids as a whole, behind the client capability `plan` (v2's are stable).
        ("SessionUpdate", "plan_update", "v1"),
        ("SessionUpdate", "plan_removed"),
        ("PlanUpdateContent", "markdown", "v2"),
        ("PlanUpdateContent", "file", "v2"),
        ("ClientCapabilities", "plan", "v1"),
        ("ClientSessionCapabilities", "compaction"),
        # The tool's programmatic name (claude-agent-acp 0.77+, codex-acp 1.12+ send it).
        ("ToolCall", "name"),
        ("ToolCallUpdate", "name"),
    ),
}
# The preamble of every unstable description; the docstring is the text after it.
_UNSTABLE_PREAMBLE = re.compile(r"\*\*UNSTABLE\*\*\n\n[^\n]*\n\n")

PRIMITIVES = {"string": "str", "number": "float", "boolean": "bool"}
# An integer's format -> its bounded alias in acp_nvim/protocol/unknown.py.
INTEGERS = {
    "int32": "Int32",
    "int64": "Int64",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
}


# --- naming and small schema helpers ---------------------------------------------


def snake(name: str) -> str:
    if name == "_meta":
        return "meta"
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return out + "_" if keyword.iskeyword(out) else out


def pascal(tag: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", tag))


def constant(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def ref_name(schema: dict[str, Any]) -> str | None:
    """The ``$defs`` name a schema points at: ``$ref`` or a lone ``allOf: [$ref]``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


def summary(description: str | None) -> str:
    """First sentence of the first paragraph, one line."""
    if not description:
        return ""
    paragraph = " ".join(description.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.!?])(\s|$)", paragraph)
    return match.group(1) if match else paragraph


def docstring(text: str, indent: str) -> list[str]:
    if not text:
        return []
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text += " "
    if len(indent) + len(text) + 6 <= 100:
        return [f'{indent}"""{text}"""']
    lines = textwrap.wrap(text, 100 - len(indent))
    return [f'{indent}"""', *(indent + line for line in lines), f'{indent}"""']


def bracketed(head: str, items: list[str], tail: str, indent: str = "") -> list[str]:
    """``head item, item tail`` on one line if it fits in 100 columns, else one per line."""
    one_line = f"{indent}{head}{', '.join(items)}{tail}"
    if len(one_line) <= 100:
        return [one_line]
    return [f"{indent}{head}", *(f"{indent}    {item}," for item in items), f"{indent}{tail}"]


def union_alias(name: str, members: list[str]) -> list[str]:
    """``Name = A | B``, wrapped in parentheses (then one member per line) when long."""
    one_line = " | ".join(members)
    if len(name) + len(one_line) + 3 <= 100:
        return [f"{name} = {one_line}"]
    if len(one_line) + 4 <= 100:
        return [f"{name} = (", f"    {one_line}", ")"]
    return [f"{name} = (", f"    {members[0]}", *(f"    | {m}" for m in members[1:]), ")"]


def split_if_long(comprehension: str, indent: str = " " * 16) -> list[str]:
    """A comprehension's body, split at `for`, then at `if`/`else`, as ruff format does."""
    if len(indent) + len(comprehension) <= 100:
        return [indent + comprehension]
    value, _, loop = comprehension.partition(" for ")
    if len(indent) + len(value) > 100:
        value = value.replace(" if ", f"\n{indent}if ").replace(" else ", f"\n{indent}else ")
    return [indent + value, f"{indent}for {loop}"]


def comment(text: str) -> list[str]:
    return ["# " + line for line in textwrap.wrap(text, 98)] if text else []


def members_of(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return list(schema.get("oneOf") or schema.get("anyOf") or [])


def types_of(schema: dict[str, Any]) -> tuple[list[str], bool]:
    """JSON types of a property schema, and whether null is one of them."""
    raw = schema.get("type", [])
    kinds = [raw] if isinstance(raw, str) else list(raw)
    return [k for k in kinds if k != "null"], "null" in kinds


# --- the model ----------------------------------------------------------------------


@dataclass
class Field:
    wire: str
    annotation: str
    default: str | None  # a Python expression; None when the field is required
    factory: bool = False  # `default` is a default_factory
    post_init: list[str] = field(default_factory=list)  # lines turning Raw into values
    union: str | None = None  # the open union the field holds, if any
    unstable: str | None = None  # the adopted unstable method it belongs to

    @property
    def name(self) -> str:
        return snake(self.wire)

    def render(self) -> str:
        args = []
        if self.default is not None:
            args.append(f"{'default_factory' if self.factory else 'default'}={self.default}")
        if self.name != self.wire:
            args.append(f'name="{self.wire}"')
        head = f"    {self.name}: {self.annotation}"
        note = f"    # UNSTABLE: {self.unstable} (schema.unstable.json)\n" if self.unstable else ""
        if not args:
            return note + head
        if args == [f"default={self.default}"]:
            return f"{note}{head} = {self.default}"
        line = f"{head} = msgspec.field({', '.join(args)})"
        return note + (
            line
            if len(line) <= 100
            else f"{head} = msgspec.field(\n        {', '.join(args)}\n    )"
        )


@dataclass
class Struct:
    name: str
    doc: str
    fields: list[Field]
    base: str = "msgspec.Struct"
    tag_field: str | None = None
    tag: str | None = None
    deps: set[str] = field(default_factory=set)  # default_factory classes, defined first
    unstable: str | None = None  # the adopted unstable method it belongs to

    def render(self, decoding: set[str], hooked: set[str]) -> list[str]:
        """``decoding``: the structs with a ``_decode_raw``; ``hooked``: those whose
        closed pass needs it as ``__post_init__`` (see the module docstring)."""
        kwargs = (
            ["kw_only=True", "omit_defaults=True", "gc=False"]
            if self.base == "msgspec.Struct"
            else []
        )
        if self.tag_field is not None:
            kwargs += [f'tag_field="{self.tag_field}"', f'tag="{self.tag}"']
        lines = [f"# UNSTABLE: {self.unstable} (schema.unstable.json)"] if self.unstable else []
        lines += bracketed(f"class {self.name}(", [self.base, *kwargs], "):")
        lines += docstring(self.doc, "    ")
        if self.doc and self.fields:
            lines.append("")
        lines += [f.render() for f in self.fields]
        post = [line for f in self.fields for line in f.post_init]
        if post:
            lines += ["", "    def _decode_raw(self) -> None:"]
            if self.base in decoding:
                lines.append("        super()._decode_raw()")
            lines += post
            if self.name in hooked:
                lines += ["", "    def __post_init__(self) -> None:", "        self._decode_raw()"]
        if not self.doc and not self.fields:
            lines.append("    pass")
        return lines

    @property
    def has_post_init(self) -> bool:
        return any(f.post_init for f in self.fields)


@dataclass
class OpenUnion:
    name: str
    doc: str
    tag_field: str | None
    variants: list[tuple[str, str]]  # (tag, class name)
    defaults: list[str]  # annotations tried in order when there is no tag
    classes: list[Struct]  # generated member classes

    @property
    def decoder(self) -> str:
        return f"_{self.name}Decoder"

    def alias(self) -> list[str]:
        members = list(dict.fromkeys([cls for _, cls in self.variants] + self.defaults))
        return [*comment(self.doc), *union_alias(self.name, members)]

    def decoder_def(self) -> list[str]:
        tag_field = f'"{self.tag_field}"' if self.tag_field else "None"
        variants = [f'"{tag}": {cls}' for tag, cls in self.variants]
        defaults = ", ".join(self.defaults) + ("," if len(self.defaults) == 1 else "")
        return [
            f"{self.decoder} = UnionDecoder(",
            f'    "{self.name}",',
            f"    {tag_field},",
            *bracketed("{", variants, "},", indent="    "),
            f"    ({defaults}),",
            ")",
            f"register_union({self.name}, {self.decoder})",
        ]


@dataclass
class Alias:
    name: str
    doc: str
    target: str
    values: list[Any] | None = None  # enum values
    unstable: str | None = None  # the adopted unstable method it belongs to

    def render(self) -> list[str]:
        lines = [f"# UNSTABLE: {self.unstable} (schema.unstable.json)"] if self.unstable else []
        lines += [*comment(self.doc), *union_alias(self.name, self.target.split(" | "))]
        if self.values is not None:
            items = [json.dumps(v) for v in self.values]
            lines += bracketed(f"{self.name}Literal = Literal[", items, "]")
            values = f"{constant(self.name)}_VALUES: tuple[{self.target}, ...] = ("
            lines += bracketed(values, items, ",)" if len(items) == 1 else ")")
        return lines


# --- reading the schema -------------------------------------------------------------


class Generator:
    def __init__(self, version: str, schema: dict[str, Any], meta: dict[str, Any]) -> None:
        self.version = version
        self.defs: dict[str, dict[str, Any]] = schema["$defs"]
        self.meta = meta
        self.patch_defs = PATCH_DEFS[version]
        self.aliases: list[Alias] = []
        self.structs: dict[str, Struct] = {}
        self.unions: dict[str, OpenUnion] = {}
        self.tagged_defs: list[tuple[str, str | None, str | None]] = []  # (def, tag_field, tag)
        self.lenient: dict[str, str] = {}  # decoder name -> its construction, for lenient fields
        self.kinds = {name: self.kind(name, d) for name, d in self.defs.items()}
        for name in self.patch_defs:
            assert "unchanged" in self.defs[name].get("description", ""), name

    # classification

    def kind(self, name: str, d: dict[str, Any]) -> str:
        if d.get("x-docs-ignore"):
            return "skip"  # JSON-RPC envelopes
        members = members_of(d)
        if "enum" in d or (members and all(self.is_enum_member(m) for m in members)):
            return "enum"
        if members and self.discriminator(d):
            return "union"
        if "properties" in d or d.get("type") == "object":
            return "struct"
        if members and all(ref_name(m) or m.get("type") == "array" for m in members):
            return "structural"
        return "alias"

    @staticmethod
    def is_enum_member(m: dict[str, Any]) -> bool:
        return m.get("type") in ("string", "integer") and set(m) <= {
            "type",
            "const",
            "title",
            "description",
            "format",
        }

    @staticmethod
    def discriminator(d: dict[str, Any]) -> str | None:
        if "discriminator" in d:
            return str(d["discriminator"]["propertyName"])
        for m in members_of(d):
            for prop, s in m.get("properties", {}).items():
                if "const" in s:
                    return str(prop)
        return None

    # property types

    def annotate(self, prop: dict[str, Any]) -> tuple[str, str | None, str | None, bool]:
        """(annotation, open union name, shape "one"/"list"/"dict", nullable)."""
        ref = ref_name(prop)
        any_of = prop.get("anyOf", [])
        if ref is None and any_of:
            refs = [ref_name(m) for m in any_of if m.get("type") != "null"]
            if len(refs) == 1 and refs[0] and len(any_of) == 2:
                return (*self.annotate_ref(refs[0]), True)
        if ref is not None:
            return (*self.annotate_ref(ref), False)
        kinds, nullable = types_of(prop)
        if not kinds:
            return "Any", None, None, False
        (kind,) = kinds
        if kind == "array":
            item, union, shape, _ = self.annotate(prop["items"])
            assert shape in (None, "one"), "nested containers of unions"
            inner = f"Open[{item}]" if union else item
            return f"list[{inner}]", union, "list" if union else None, nullable
        if kind == "object":
            extra = prop.get("additionalProperties", True)
            if extra is True or extra == {}:
                return "dict[str, Any]", None, None, nullable
            value, union, shape, _ = self.annotate(extra)
            assert shape in (None, "one"), "nested containers of unions"
            inner = f"Open[{value}]" if union else value
            return f"dict[str, {inner}]", union, "dict" if union else None, nullable
        if kind == "integer":
            return INTEGERS[prop["format"]], None, None, nullable
        return PRIMITIVES[kind], None, None, nullable

    def annotate_ref(self, ref: str) -> tuple[str, str | None, str | None]:
        if self.kinds[ref] in ("union", "structural"):
            return ref, ref, "one"
        return ref, None, None

    def make_field(self, owner: str, wire: str, prop: dict[str, Any], required: bool) -> Field:
        annotation, union, shape, nullable = self.annotate(prop)
        if (owner, wire) in LENIENT_OPTIONAL:
            required = False
        patch = owner in self.patch_defs and not required
        default, factory = (None, False) if required else self.default_for(prop, annotation, patch)
        item = annotation[len("list[") : -1] if annotation.startswith("list[") else None
        if patch:
            annotation += " | UnsetType"
        # What a present value decodes to: a patch field's UNSET only means "absent".
        value = annotation.removesuffix(" | UnsetType")
        if annotation != "Any" and (nullable or default == "None"):
            annotation += " | None"
            value += " | None"
        if shape == "one":
            annotation = f"Open[{annotation}]"
        post_init = self.post_init(wire, union, shape)
        unstable = prop.get("x-unstable")
        on_error = prop.get("x-deserialize-default-on-error") and not required and value != "Any"
        skip = prop.get("x-deserialize-skip-invalid-items") and item is not None
        if on_error or skip:
            assert shape != "dict", f"{owner}.{wire}: a lenient dict of unions"
            fallback = f"{default}()" if factory else default
            attr = f"self.{snake(wire)}"
            if skip:
                decoder = self.lenient_decoder("ValidItems", union or str(item), nullable)
                args = [attr, f'"{wire}"', *([str(fallback)] if on_error else [])]
            else:
                decoder = self.lenient_decoder("OrDefault", union or value)
                args = [attr, str(fallback)]
            annotation = f"Lenient[{annotation}]"
            post_init = [
                f"        if isinstance({attr}, Raw):",
                *bracketed(f"{attr} = {decoder}(", [", ".join(args)], ")", indent=" " * 12),
            ]
        return Field(wire, annotation, default, factory, post_init, union, unstable)

    def lenient_decoder(self, kind: str, type_: str, nullable: bool | None = None) -> str:
        """The name of a module-level ``OrDefault`` / ``ValidItems`` for ``type_``, built
        once (a type expression per decode costs more than the decode)."""
        suffix = "_or_null" if nullable else ""
        name = f"_{kind}_{'_'.join(re.findall(r'[A-Za-z0-9]+', type_))}{suffix}"
        extra = "" if nullable is None else f", nullable={nullable}"
        self.lenient[name] = f"{kind}({type_}{extra})"
        return name

    def default_for(self, prop: dict[str, Any], annotation: str, patch: bool) -> tuple[str, bool]:
        """(default, is a factory) of an optional field: the schema's default if usable."""
        if patch:
            return "UNSET", False
        value = prop.get("default")
        ref = ref_name(prop)
        if isinstance(value, (bool, int, float, str)):
            return json.dumps(value) if isinstance(value, str) else repr(value), False
        if value == [] and annotation.startswith("list["):
            return "list", True
        if value == {} and annotation.startswith("dict["):
            return "dict", True
        if isinstance(value, dict) and ref and self.matches_defaults(ref, value):
            return ref, True
        return "None", False

    def matches_defaults(self, ref: str, value: dict[str, Any]) -> bool:
        """Whether ``Ref()`` equals the schema default `value` (so a factory can stand in).

        A key `value` leaves out takes its own default, as in ``Ref()`` (the unstable
        ``McpCapabilities.acp`` is missing from the stable default of ``mcpCapabilities``).
        """
        d = self.defs[ref]
        if self.kinds[ref] != "struct" or d.get("required"):
            return False
        props = d.get("properties", {})
        for key, sub in value.items():
            prop = props.get(key)
            if prop is None:
                return False
            if prop.get("default") == sub:
                continue
            inner = ref_name(prop)
            if not (isinstance(sub, dict) and inner and self.matches_defaults(inner, sub)):
                return False
        return True

    @staticmethod
    def post_init(wire: str, union: str | None, shape: str | None) -> list[str]:
        if union is None:
            return []
        attr, call = f"self.{snake(wire)}", f"_{union}Decoder"
        if shape == "one":
            return [
                f"        if isinstance({attr}, Raw):",
                f'            {attr} = {call}({attr}, "{wire}")',
            ]
        if shape == "list":
            body = f'{call}(v, "{wire}") if isinstance(v, Raw) else v for v in {attr}'
            return [
                f"        if isinstance({attr}, list):",
                f"            {attr} = [",
                *split_if_long(body),
                "            ]",
            ]
        body = (
            f'k: {call}(v, f"{wire}.{{k}}") if isinstance(v, Raw) else v for k, v in {attr}.items()'
        )
        return [
            f"        if isinstance({attr}, dict):",
            f"            {attr} = {{",
            *split_if_long(body),
            "            }",
        ]

    def own_fields(self, name: str, d: dict[str, Any], skip: Collection[str] = ()) -> list[Field]:
        required = set(d.get("required", []))
        return [
            self.make_field(name, wire, prop, wire in required)
            for wire, prop in d.get("properties", {}).items()
            if wire not in skip
        ]

    # building

    def build(self) -> None:
        for name, d in self.defs.items():
            getattr(self, f"build_{self.kinds[name]}")(name, d)
        for name, tag_field, tag in self.tagged_defs:
            self.structs[name].tag_field, self.structs[name].tag = tag_field, tag

    def build_skip(self, name: str, d: dict[str, Any]) -> None:
        pass

    def build_enum(self, name: str, d: dict[str, Any]) -> None:
        members = members_of(d)
        values = d.get("enum") or [m["const"] for m in members if "const" in m]
        kind = "int" if any(m.get("type") == "integer" for m in members) else "str"
        doc = summary(d.get("description"))
        self.aliases.append(Alias(name, doc, kind, values, unstable=d.get("x-unstable")))

    def build_alias(self, name: str, d: dict[str, Any]) -> None:
        members = members_of(d)
        if members:
            parts = [self.annotate(m)[0] if m.get("type") != "null" else "None" for m in members]
            parts = sorted(set(parts), key=lambda p: (p == "None", parts.index(p)))
            target = " | ".join(parts)
        else:
            target = self.annotate(d)[0]
        self.aliases.append(
            Alias(name, summary(d.get("description")), target, unstable=d.get("x-unstable"))
        )

    def build_struct(self, name: str, d: dict[str, Any]) -> None:
        fields = self.own_fields(name, d)
        # An untagged anyOf of objects (e.g. the elicitation scopes): its members'
        # properties are merged in as optional fields.
        for member in members_of(d):
            scope = self.defs[ref_name(member) or ""]
            fields += [self.make_field(name, w, p, False) for w, p in scope["properties"].items()]
        struct = Struct(name, summary(d.get("description")), fields, unstable=d.get("x-unstable"))
        struct.deps = {str(f.default) for f in fields if f.factory and f.default in self.defs}
        self.structs[name] = struct

    def build_structural(self, name: str, d: dict[str, Any]) -> None:
        defaults = [ref_name(m) or self.annotate(m)[0] for m in members_of(d)]
        doc = summary(d.get("description"))
        self.unions[name] = OpenUnion(name, doc, None, [], [str(x) for x in defaults], [])

    def build_union(self, name: str, d: dict[str, Any]) -> None:
        tag_field = self.discriminator(d)
        assert tag_field is not None
        union = OpenUnion(name, summary(d.get("description")), tag_field, [], [], [])
        shared = self.own_fields(name, d)  # fields beside the union: in every member
        for member in members_of(d):
            tag = member.get("properties", {}).get(tag_field, {}).get("const")
            if tag is None and tag_field in member.get("properties", {}):
                continue  # the open "other" member: that is what Unknown is for
            self.add_member(union, member, tag, shared)
        self.unions[name] = union

    def add_member(
        self, union: OpenUnion, member: dict[str, Any], tag: str | None, shared: list[Field]
    ) -> None:
        ref = ref_name(member)
        tag_field = union.tag_field if tag is not None else None
        extra = self.own_fields(union.name, member, skip={str(union.tag_field)})
        if ref and self.kinds[ref] == "union":
            # A union inside a union (v2 state_update -> StateUpdate by "state"): a
            # struct has one tag, so flatten it: the inner tag is a plain str field.
            extra += self.flattened(ref)
            ref = None
        if ref and tag and not shared and not extra and ref == union.name + pascal(tag):
            # e.g. McpServer/"http" -> McpServerHttp: the member def is the variant itself.
            self.tagged_defs.append((ref, tag_field, tag))
            cls_name = ref
        elif ref and tag is None and not shared and not extra:
            cls_name = ref  # an untagged default member, used as is
        else:
            cls_name = union.name + pascal(tag or member["title"])
            assert cls_name not in self.defs, f"{cls_name} collides with a schema def"
            shown = f'`{union.tag_field}: "{tag}"`' if tag else f"Untagged ({member.get('title')})"
            doc = f"{shown} variant of `{union.name}`."
            base = ref or "msgspec.Struct"
            have = {f.wire for f in self.structs[ref].fields} if ref in self.structs else set()
            fields = [f for f in shared + extra if f.wire not in have]
            union.classes.append(Struct(cls_name, doc, fields, base, tag_field, tag))
        if tag is None:
            union.defaults.append(cls_name)
        else:
            union.variants.append((tag, cls_name))

    def flattened(self, name: str) -> list[Field]:
        """The fields of all members of union `name`, optional, plus its tag as str."""
        d = self.defs[name]
        tag_field = str(self.discriminator(d))
        fields = {tag_field: Field(tag_field, "str", None)}
        for member in members_of(d):
            ref = ref_name(member)
            for wire, prop in self.defs[ref]["properties"].items() if ref else ():
                fields.setdefault(wire, self.make_field(name, wire, prop, False))
        return list(fields.values())

    def hooked(self, members: list[Struct]) -> set[str]:
        """The structs where msgspec's closed pass leaves a field raw: one holding a
        union it cannot decode closed (untagged, or with untagged defaults; the
        rule of `UnionDecoder.closed`), or a subclass of such a struct."""
        closed = {n for n, u in self.unions.items() if u.tag_field and u.variants}
        closed -= {n for n, u in self.unions.items() if u.defaults}
        hooked = {
            s.name for s in members if any(f.union and f.union not in closed for f in s.fields)
        }
        while more := {s.name for s in members if s.base in hooked} - hooked:
            hooked |= more
        return hooked

    # rendering

    def render(self, source: str) -> str:
        self.build()
        members = [*self.structs.values(), *(c for u in self.unions.values() for c in u.classes)]
        decoding = {s.name for s in members if s.has_post_init}
        hooked = self.hooked(members)
        structs = [s.render(decoding, hooked) for s in self.ordered_structs()]
        unions: list[list[str]] = []
        for union in self.unions.values():
            unions += [cls.render(decoding, hooked) for cls in union.classes]
            unions.append(union.alias())
        body = [
            *self.render_methods(),
            "# --- aliases; enums are open: plain str / int, known values alongside ---\n\n"
            + "\n\n".join("\n".join(alias.render()) for alias in self.aliases),
            "# --- objects ---",
            *("\n".join(block) for block in structs),
            "# --- unions: the tagged variants, then the union ---",
            *("\n".join(block) for block in unions),
            "# --- decoders of the open unions (used by _decode_raw and decode) ---\n\n"
            + "\n\n".join("\n".join(u.decoder_def()) for u in self.unions.values()),
            "# --- decoders of the lenient fields (used by _decode_raw) ---\n\n"
            + "\n".join(f"{name} = {call}" for name, call in sorted(self.lenient.items())),
            "\n".join(self.render_method_types()),
        ]
        head = "\n".join(
            [
                f"# Generated by scripts/gen_types.py from {source} — do not edit.",
                *self.module_doc(),
                "",
                *self.imports("\n".join(body)),
            ]
        )
        return head + "\n\n" + "\n\n\n".join(body) + "\n"

    @staticmethod
    def imports(body: str) -> list[str]:
        """The import block, naming only what `body` uses."""

        def used(*names: str) -> list[str]:
            return [n for n in names if re.search(rf"\b{n}\b", body)]

        lines = [
            "from __future__ import annotations",
            "",
            f"from typing import {', '.join(used('Any', 'Final', 'Literal'))}",
            "",
            "import msgspec",
        ]
        if names := used("UNSET", "Raw", "UnsetType"):
            lines.append(f"from msgspec import {', '.join(names)}")
        support = sorted(  # as isort orders them: capitals first
            used("Lenient", "Open", "OrDefault", "UnionDecoder", "ValidItems", "register_union")
            + used(*INTEGERS.values())
        )
        head = "from acp_nvim.protocol.unknown import "
        plain = head + ", ".join(support)
        return [
            *lines,
            "",
            *([plain] if len(plain) <= 100 else bracketed(head + "(", support, ")")),
            *(
                f"from acp_nvim.protocol.unknown import {name} as {name}"
                for name in ("Unknown", "convert", "decode", "enc_hook", "encode")
            ),
        ]

    def module_doc(self) -> list[str]:
        return [
            f'"""ACP {self.version} protocol types (msgspec structs), generated from the schema.',
            "",
            "Conventions:",
            "",
            "- Structs use snake_case attributes; the wire keys (camelCase, ``_meta``) are",
            "  set with ``msgspec.field(name=...)``; optional fields default to None and are",
            "  left out when encoding (``omit_defaults``).",
            "- Enums are plain ``str`` (or ``int``) aliases so unknown values decode; the",
            "  known values are in ``<Name>Literal`` and ``<NAME>_VALUES``.",
            "- Integers are bounded as their format says (``UInt64``, ``Int32``, ...): a",
            "  value past the bounds fails the field as a value of the wrong type does.",
            "- A discriminated union ``X`` is ``Union[<X><Tag>, ...]`` of tagged structs. Fields",
            "  of type ``Open[X]`` decode unknown tags to ``Unknown`` (its raw JSON object),",
            "  at the innermost level.",
            *(
                [
                    "- Patch structs (upserts) have three-state optional fields: omitted ->",
                    "  ``msgspec.UNSET``, ``null`` -> ``None``, a value -> the value.",
                ]
                if self.patch_defs
                else []
            ),
            "",
            "Decode with ``decode(raw, Type)`` (JSON bytes / msgspec.Raw) or ``convert(obj,",
            "Type)`` (Python objects), encode with ``encode(obj)``. The structs decode only",
            "from JSON: do not hand them to ``msgspec.convert``.",
            '"""',
        ]

    def ordered_structs(self) -> Iterator[Struct]:
        """Schema order, except that a default_factory class comes before its user."""
        done: set[str] = set()

        def visit(name: str) -> Iterator[Struct]:
            if name in done or name not in self.structs:
                return
            done.add(name)
            for dep in sorted(self.structs[name].deps):
                yield from visit(dep)
            yield self.structs[name]

        for name in self.structs:
            yield from visit(name)

    def render_methods(self) -> list[str]:
        """``PROTOCOL_VERSION`` and the method-name classes from meta.json, as blocks."""
        blocks = [f"PROTOCOL_VERSION: Final = {int(self.meta['version'])}"]
        groups = [
            ("AgentMethod", "agentMethods", "Methods the agent handles (client -> agent)."),
            ("ClientMethod", "clientMethods", "Methods the client handles (agent -> client)."),
            ("ProtocolMethod", "protocolMethods", "Protocol-level methods, either direction."),
        ]
        for cls, key, doc in groups:
            lines = [f"class {cls}:", f'    """{doc}"""', ""]
            for name, method in self.meta.get(key, {}).items():
                lines.append(f'    {name.upper()}: Final = "{method}"')
            blocks.append("\n".join(lines))
        return blocks

    def render_method_types(self) -> list[str]:
        by_method: dict[str, list[str | None]] = {}
        for name, d in self.defs.items():
            method = d.get("x-method")
            if method is None or self.kinds[name] == "skip":
                continue
            slot = 1 if name.endswith("Response") else 0
            entry = by_method.setdefault(method, [None, None])
            # mcp/message is a request and a notification: the request's params win.
            if entry[slot] is None or name.endswith("Request"):
                entry[slot] = name
        lines = [
            "# method -> (params type, result type); the result is None for notifications.",
            "METHODS: dict[str, tuple[Any, Any]] = {",
        ]
        for method, (params, result) in by_method.items():
            lines.append(f'    "{method}": ({params}, {result}),')
        return [*lines, "}"]


# --- command line ---------------------------------------------------------------------


def generate(schema_dir: Path, version: str) -> str:
    schema, meta, unstable, unstable_meta = (
        json.loads((schema_dir / version / name).read_text()) for name in SOURCES
    )
    adopt_unstable(schema, meta, unstable, unstable_meta, version)
    # Named as the repository holds it, wherever --schema-dir pointed.
    return Generator(version, schema, meta).render(f"spec/acp/schema/{version}/schema.json")


def adopt_unstable(
    schema: dict[str, Any],
    meta: dict[str, Any],
    unstable: dict[str, Any],
    unstable_meta: dict[str, Any],
    version: str,
) -> None:
    """Add the `ADOPTED_UNSTABLE` methods to the stable ``schema`` and ``meta``: their
    request/response defs with every def they reference that ``schema`` lacks, the
    capability field (and union member) they name, and the method name. What is added
    carries ``x-unstable``."""
    defs, source = schema["$defs"], unstable["$defs"]

    def take(name: str, method: str) -> None:
        if name in defs:
            return
        d = defs[name] = {**source[name], "x-unstable": method}
        if "description" in d:
            d["description"] = _UNSTABLE_PREAMBLE.sub("", d["description"], count=1)
        take_refs(d, method)

    def take_refs(d: dict[str, Any], method: str) -> None:
        for ref in re.findall(r'"\$ref": "#/\$defs/([^"]+)"', json.dumps(d)):
            take(ref, method)

    for method, additions in ADOPTED_UNSTABLE.items():
        for name, d in source.items():
            if d.get("x-method") == method:
                take(name, method)
        for owner, addition, *only in additions:
            if owner not in source or only not in ([], [version]):
                continue  # this version's schema has no such def (v2: client session caps)
            if "properties" in source[owner]:
                add_property(defs[owner], source[owner], addition, method)
            else:
                add_member(defs[owner], source[owner], addition, method)
            take_refs(defs[owner], method)
        for group in ("agentMethods", "clientMethods"):
            for key, name in unstable_meta[group].items():
                if name == method:
                    meta[group][key] = method


def add_property(d: dict[str, Any], source: dict[str, Any], name: str, method: str) -> None:
    """Property `name` of the unstable `source` def, added to `d` in `source`'s order."""
    prop = {**source["properties"][name], "x-unstable": method}
    prop["description"] = _UNSTABLE_PREAMBLE.sub("", prop.get("description", ""), count=1)
    props = d["properties"]
    order = [k for k in source["properties"] if k in props or k == name]
    d["properties"] = {k: prop if k == name else props[k] for k in order}


def add_member(d: dict[str, Any], source: dict[str, Any], tag: str, method: str) -> None:
    """The member of the unstable union `source` tagged `tag`, added to the union `d`
    before the member that follows it in `source` (or last)."""
    key = "oneOf" if "oneOf" in d else "anyOf"
    members, theirs = d[key], members_of(source)

    def tag_of(member: dict[str, Any]) -> Any:
        consts = [p["const"] for p in member.get("properties", {}).values() if "const" in p]
        return consts[0] if consts else member.get("title")

    index = next(i for i, m in enumerate(theirs) if tag_of(m) == tag)
    after = [tag_of(m) for m in theirs[index + 1 :]]
    at = next((i for i, m in enumerate(members) if tag_of(m) in after), len(members))
    members.insert(at, theirs[index])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schema-dir", type=Path, default=DEFAULT_SCHEMA_DIR)
    parser.add_argument("--check", action="store_true", help="exit 1 if outputs are stale")
    args = parser.parse_args(argv)
    missing = [
        path
        for version in VERSIONS
        for path in (args.schema_dir / version / name for name in SOURCES)
        if not path.is_file()
    ]
    for path in missing:
        print(f"source missing: {path} (see spec/README.md)", file=sys.stderr)
    if missing:
        return 1
    stale = []
    for version in VERSIONS:
        text = generate(args.schema_dir, version)
        path = output_path(version)
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path.relative_to(REPO))
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO)}")
    for path in stale:
        print(f"{path} is out of date: run scripts/gen_types.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
