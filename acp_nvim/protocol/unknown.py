"""Runtime support shared by the generated `schema_v1` / `schema_v2` modules.

ACP unions are *open*: agents send variants (``sessionUpdate`` tags, content
``type``s, ...) newer than our pinned schema. msgspec tagged unions are closed, so
a field whose type is a discriminated union is declared ``Open[X]``:

- type checkers see ``X | Unknown`` (``Annotated[X | Unknown, ...]``);
- decoding takes one msgspec pass when every variant in the message is known (the
  common case, and the cheap one: a streamed chunk costs a third of the nested
  passes): the generated structs themselves see ``X | None`` there, a closed union;
- when that pass fails (an unknown tag, or an error), the message is decoded again
  with the structs' *open twins*: subclasses of the same name where each such field
  is ``msgspec.Raw``, turned by the generated ``_decode_raw`` into an ``X`` or an
  ``Unknown`` with the `UnionDecoder` of ``X``. Known tags decode strictly (a
  malformed known variant is an error), an unknown tag becomes `Unknown` *at that
  level*: an unknown content item inside a known tool call leaves the tool call
  intact. Twins pass ``isinstance`` and ``match`` as their structs do, not
  ``type(x) is``: use `struct_type` for a lookup by type.

Unions msgspec cannot decode closed (untagged unions of several objects, tags
beside untagged defaults) stay ``msgspec.Raw`` in both.

Fields the schema marks ``x-deserialize-default-on-error`` are ``Lenient[T]``: a
plain ``T`` in the closed pass (a bad value fails it), raw JSON in the open twins,
decoded by an `OrDefault` (a value that is not a ``T`` becomes the field's default,
so one bad ``stopReason`` does not cost the whole update); lists marked
``x-deserialize-skip-invalid-items`` go through a `ValidItems` (bad items dropped).
A message the closed pass takes therefore decodes exactly as the twins would.

Because of the raw-bytes step, the generated structs decode from JSON only; use
`convert` (re-encodes) for Python objects, never ``msgspec.convert``.
`Unknown` is a ``dict`` subclass, so any msgspec encoder writes it back verbatim.

Public names (re-exported by each generated module):

    Unknown              an unknown variant: ``.raw`` is the JSON object, ``.tag`` its tag
    struct_type(obj)     the generated struct of a decoded value (an open twin's base)
    decode(raw, type_)   JSON bytes / str / msgspec.Raw -> typed value (None: params left
                         out; a dict goes through convert); fits the connection's Convert
    convert(obj, type_)  Python builtins (e.g. an already-parsed dict) -> typed value
    encode(obj)          wire JSON bytes (camelCase keys, ``_meta``, tags, Unknown verbatim)
    enc_hook             for a caller's own msgspec Encoder (Unknown does not need it)
"""

from __future__ import annotations

__all__ = [
    "Int32",
    "Int64",
    "Lenient",
    "Open",
    "OrDefault",
    "UInt16",
    "UInt32",
    "UInt64",
    "UnionDecoder",
    "Unknown",
    "ValidItems",
    "convert",
    "decode",
    "enc_hook",
    "encode",
    "register_union",
    "struct_type",
]

import functools
import operator
import re
import sys
import threading
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, overload

import msgspec
from msgspec import Raw, ValidationError

from acp_nvim.protocol.errors import ProtocolError

_T = TypeVar("_T")


class Unknown(dict[str, Any]):
    """A union variant this schema does not know, kept as its raw JSON object.

    It *is* the object (a ``dict`` subclass), so it re-encodes to exactly what was
    received; `tag` is the value of the discriminator (``None`` when absent).
    """

    __slots__ = ("tag",)

    def __init__(self, raw: Mapping[str, Any], tag: Any = None) -> None:
        super().__init__(raw)
        self.tag = tag

    @property
    def raw(self) -> dict[str, Any]:
        return self

    def __repr__(self) -> str:
        return f"Unknown({dict.__repr__(self)})"


# Integers bounded as the schema's ``format`` says (as the Rust SDK types them): a
# value past the bounds fails like a value of the wrong type. Unbounded, 2**64
# decoded and then failed msgpack, which carries render ops to Neovim (64 bits).
# msgspec takes bounds within int64 only: UInt64 ends at 2**63 - 1 (9.2e18 tokens
# or bytes, past anything real).
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
UInt16 = Annotated[int, msgspec.Meta(ge=0, le=2**16 - 1)]
UInt32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
UInt64 = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]

if TYPE_CHECKING:
    from typing import TypeAlias

    Open: TypeAlias = Annotated[_T | Unknown, "open union, see the module docstring"]
    Lenient: TypeAlias = Annotated[_T, "default on error, see the module docstring"]
else:

    class Open:
        """``Open[X]`` annotates a field holding the open union ``X``.

        Type checkers see ``X | Unknown``; msgspec sees the closed ``X | None``
        when it can decode ``X`` in one pass, else ``msgspec.Raw`` (turned into an
        ``X`` or an ``Unknown`` by the struct's ``_decode_raw``). Evaluated when
        msgspec first resolves the field, after the module registered its unions.
        """

        def __class_getitem__(cls, item: object) -> object:
            # A nullable field's union comes with None: the union is the rest.
            args = typing.get_args(item) if isinstance(item, types.UnionType) else ()
            members = [a for a in args if a is not type(None)]
            union = functools.reduce(operator.or_, members) if len(members) < len(args) else item
            decoder = _unions.get(union)
            if decoder is not None and decoder.closed:
                return item | None  # type: ignore[operator]
            return Raw

    class Lenient:
        """``Lenient[T]`` annotates a field whose bad value falls back to its default.

        Type checkers see ``T``; msgspec sees ``T`` itself (a bad value fails the
        closed pass) unless ``T`` holds a raw ``Open``, in the open twins
        ``msgspec.Raw``: the struct's ``_decode_raw`` decodes those with an
        `OrDefault` or a `ValidItems`.
        """

        def __class_getitem__(cls, item: object) -> object:
            return Raw if _holds_raw(item) else item

    def _holds_raw(tp: object) -> bool:
        """Whether ``tp`` holds an ``Open`` msgspec cannot decode closed: a lenient
        field around one stays raw, its generated decoder handles the items."""
        return tp is Raw or any(_holds_raw(a) for a in typing.get_args(tp))


class _RawOpen:
    """``Open[X]`` and ``Lenient[T]`` in the open twins: always ``msgspec.Raw``."""

    def __class_getitem__(cls, item: object) -> type[Raw]:
        return Raw


_any_json: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_UNSEEN: Any = object()  # JSON not decoded yet


class UnionDecoder:
    """Decode the raw JSON of one open union value (see the module docstring).

    tag_field/variants: the discriminated members, tag value -> tagged Struct.
    defaults: members without a tag (or all members of an untagged union), tried
    in order when the tag is absent; the first that decodes wins. Decoders are
    built on first use, keeping the import of the generated modules cheap, and those
    of the open twins only when a value needs them: building a module's twins takes
    some 20 ms, which a session's start would otherwise wait for (issue 26).
    """

    __slots__ = (
        "_by_tag",
        "_closed_defaults",
        "_fast",
        "_open_decoders",
        "_ready",
        "defaults",
        "name",
        "tag_field",
    )

    def __init__(
        self,
        name: str,
        tag_field: str | None,
        variants: Mapping[str, type],
        defaults: Sequence[Any] = (),
    ) -> None:
        self.name = name
        self.tag_field = tag_field
        self.defaults = tuple(defaults)
        self._by_tag: dict[str, Any] = dict(variants)
        self._fast: msgspec.json.Decoder[Any] | None = None
        self._closed_defaults: list[msgspec.json.Decoder[Any]] = []
        self._open_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}
        self._ready = False

    def prepare(self, *, open_twins: bool = False) -> None:
        """Build the one-pass decoders now rather than on first use (idempotent);
        with ``open_twins`` those of every member's open twin too."""
        if not self._ready:
            members = list(dict.fromkeys(self._by_tag.values()))
            # One msgspec pass handles the common case (a known tag, or null; every
            # variant nested in it known too). With a single tagged member msgspec
            # would not insist on the tag, so when there are defaults to fall back
            # on, the tag is then checked by hand instead. The slow path decodes
            # open twins.
            if len(members) > 1 or (members and not self.defaults):
                self._fast = msgspec.json.Decoder(functools.reduce(operator.or_, members) | None)
            self._closed_defaults = [msgspec.json.Decoder(d) for d in self.defaults]
            self._ready = True
        if open_twins:
            for member in (*self._by_tag.values(), *self.defaults):
                self._open(member)

    def _open(self, member: Any) -> msgspec.json.Decoder[Any]:
        """The decoder of ``member``'s open twin, built on first use."""
        decoder = self._open_decoders.get(member)
        if decoder is None:
            decoder = self._open_decoders[member] = msgspec.json.Decoder(_open_type(member))
        return decoder

    @property
    def closed(self) -> bool:
        """Whether msgspec decodes the known variants as one closed tagged union."""
        return self.tag_field is not None and bool(self._by_tag) and not self.defaults

    def __call__(self, raw: bytes | str | Raw, field: str = "") -> Any:
        """Decode `raw`, the JSON of field `field` (named in error paths)."""
        if not self._ready:
            self.prepare()
        fast = self._fast
        if fast is not None:
            try:
                return fast.decode(raw)
            except ValidationError as exc:
                return self._slow(raw, field, exc)
        return self._slow(raw, field, None)

    def _slow(self, raw: bytes | str | Raw, field: str, exc: ValidationError | None) -> Any:
        # Only a tag needs the JSON looked at first; an untagged union tries its
        # members, and looks only when none takes it.
        obj = _any_json.decode(raw) if self.tag_field else _UNSEEN
        if obj is None:
            return None
        tag = obj.get(self.tag_field) if type(obj) is dict and self.tag_field else None
        if tag is not None:
            member = self._by_tag.get(tag) if type(tag) is str else None
            if member is None:
                return Unknown(obj, tag)
            try:  # a known tag: the variant is malformed, report why
                return self._open(member).decode(raw)
            except ValidationError as err:
                raise _at(err, field) from None
        # Each default closed first: one msgspec pass, where the twins cost a Python
        # call per struct (500k choices: 1.8 s); what the closed pass takes, the
        # twins would decode alike.
        for default, closed in zip(self.defaults, self._closed_defaults, strict=True):
            try:
                return closed.decode(raw)
            except ValidationError as err:
                exc = err
            try:
                return self._open(default).decode(raw)
            except ValidationError as err:
                exc = err
        if obj is _UNSEEN:
            obj = _any_json.decode(raw)
            if obj is None:
                return None
        if type(obj) is dict:
            return Unknown(obj)
        raise _at(exc or ValidationError(f"Expected `{self.name}`"), field)


def _at(exc: ValidationError, field: str) -> ValidationError:
    """Prefix the path of an error raised inside field `field` of a struct.

    Errors raised in ``_decode_raw`` reach the caller unchanged, so the path is
    rebuilt here: ``... - at `$.content.text``` becomes ``... - at `$.update.content.text```.
    """
    if not field:
        return exc
    message, sep, path = str(exc).rpartition(" - at `$")
    if not sep:
        return ValidationError(f"{exc} - at `$.{field}`")
    return ValidationError(f"{message} - at `$.{field}{path}")


# --- per-field error recovery ------------------------------------------------------

_REQUIRED: Any = object()
_RAW_LIST: msgspec.json.Decoder[list[Raw]] = msgspec.json.Decoder(list[Raw])
_RAW_LIST_OR_NULL: msgspec.json.Decoder[list[Raw] | None] = msgspec.json.Decoder(list[Raw] | None)


class OrDefault:
    """Decodes a lenient field: its raw JSON as ``type_``, or the default when it is
    not one. Built per type in a generated module; the decoder on first use."""

    __slots__ = ("_decode", "type_")

    def __init__(self, type_: Any) -> None:
        self.type_ = type_
        self._decode: Callable[[Any], Any] | None = None

    def __call__(self, raw: Raw, default: Any) -> Any:
        decode = self._decode or _decoder_for(self.type_)
        self._decode = decode
        try:
            return decode(raw)
        except ValidationError:
            return default


class ValidItems:
    """Decodes a list whose items that are not an ``item_type`` are dropped.

    A value that is no list (or a null the field does not allow) is the default,
    or an error naming the field when the caller gives no default.
    """

    __slots__ = ("_decode", "item_type", "nullable")

    def __init__(self, item_type: Any, *, nullable: bool) -> None:
        self.item_type = item_type
        self.nullable = nullable
        self._decode: Callable[[Any], Any] | None = None

    def __call__(self, raw: Raw, field: str, default: Any = _REQUIRED) -> Any:
        try:
            items = (_RAW_LIST_OR_NULL if self.nullable else _RAW_LIST).decode(raw)
        except ValidationError as exc:
            if default is _REQUIRED:
                raise _at(exc, field) from None
            return default
        if items is None:
            return None
        decode = self._decode or _decoder_for(self.item_type)
        self._decode = decode
        kept = []
        for item in items:
            try:
                kept.append(decode(item))
            except ValidationError:
                continue
        return kept


# --- open twins ----------------------------------------------------------------------

_twins: dict[type, type] = {}  # generated struct -> its open twin
_bases: dict[type, type] = {}  # open twin -> its generated struct
_twinned: set[str] = set()  # modules whose twins are built
# Twins are built on first need, which may come in a worker thread (a big setting's
# conversion) while the event loop's thread needs them too: one builds, the other waits.
_twinning = threading.RLock()
_NAME = re.compile(r"[A-Za-z_]\w*")
_RAW_IN_TWINS = {"Open", "Lenient"}


def struct_type(obj: object) -> type:
    """The generated struct ``obj`` is an instance of (for an open twin, its base)."""
    cls = type(obj)
    return _bases.get(cls, cls)


def _twin_eq(self: Any, other: Any) -> Any:
    """A twin equals its struct with the same fields (either way round: Python asks
    the subclass first), as the value decoded in one pass would."""
    if struct_type(other) is not struct_type(self):
        return NotImplemented
    return all(getattr(self, f) == getattr(other, f) for f in self.__struct_fields__)


def _twin_ne(self: Any, other: Any) -> Any:
    equal = _twin_eq(self, other)
    return equal if equal is NotImplemented else not equal


def _open_type(tp: Any) -> Any:
    """``tp`` with every generated struct replaced by its open twin."""
    if isinstance(tp, type):
        if issubclass(tp, msgspec.Struct):
            _build_twins(tp.__module__)
            return _twins.get(tp, tp)
        return tp
    args = typing.get_args(tp)
    if not args:
        return tp
    opened = tuple(_open_type(a) for a in args)
    if isinstance(tp, types.UnionType):
        return functools.reduce(operator.or_, opened)
    origin = typing.get_origin(tp)
    return origin[opened] if origin in (list, dict, tuple) else tp


def _annotations(cls: type) -> dict[str, str]:
    """Each field's annotation as written (strings: the modules use PEP 563)."""
    found: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        found.update(getattr(base, "__annotations__", {}))
    return {name: found[name] for name in cls.__struct_fields__}  # type: ignore[attr-defined]


def _build_twins(module_name: str) -> None:
    """Give every struct of a generated module that holds an ``Open`` or ``Lenient``
    field, directly or through other structs, an open twin (see the module docstring)."""
    with _twinning:
        if module_name not in _twinned:
            _twinned.add(module_name)  # the build below asks again: it is under way
            _build_module_twins(module_name)


def _build_module_twins(module_name: str) -> None:
    namespace = vars(sys.modules[module_name])
    structs = {
        obj: _annotations(obj)
        for obj in namespace.values()
        if isinstance(obj, type)
        and issubclass(obj, msgspec.Struct)
        and obj.__module__ == module_name
    }
    # The names each struct's fields mention; a union alias stands for its members.
    aliases = {
        name: {a.__name__ for a in typing.get_args(obj) if isinstance(a, type)}
        for name, obj in namespace.items()
        if isinstance(obj, types.UnionType)
    }
    mentions = {}
    for cls, written in structs.items():
        names = {n for text in written.values() for n in _NAME.findall(text)}
        mentions[cls] = names.union(*(aliases.get(n, set()) for n in names))
    needed = {cls.__name__ for cls, names in mentions.items() if names & _RAW_IN_TWINS}
    while True:
        more = {cls.__name__ for cls, names in mentions.items() if names & needed} - needed
        if not more:
            break
        needed |= more
    twin_name = f"{module_name}._open"
    twin_module = types.ModuleType(twin_name)
    twin_namespace = vars(twin_module)
    twin_namespace.update(namespace)
    twin_namespace.update(__name__=twin_name, Open=_RawOpen, Lenient=_RawOpen)
    sys.modules[twin_name] = twin_module
    for cls, written in structs.items():
        if cls.__name__ not in needed:
            continue
        # Every field again, in order (a redeclared field moves to the front).
        body: dict[str, Any] = {
            "__module__": twin_name,
            "__qualname__": cls.__qualname__,
            "__annotations__": written,
            "__eq__": _twin_eq,
            "__ne__": _twin_ne,
        }
        # The raw fields' decoding runs after msgspec's pass in a twin; in the struct
        # itself only where that pass leaves a field raw (gen_types.py).
        decode_raw = getattr(cls, "_decode_raw", None)
        if decode_raw is not None:
            body["__post_init__"] = decode_raw
        for info in msgspec.structs.fields(cls):
            if info.default is not msgspec.NODEFAULT:
                body[info.name] = msgspec.field(default=info.default, name=info.encode_name)
            elif info.default_factory is not msgspec.NODEFAULT:
                body[info.name] = msgspec.field(
                    default_factory=info.default_factory, name=info.encode_name
                )
            else:
                body[info.name] = msgspec.field(name=info.encode_name)
        meta: Any = type(cls)
        twin = _twins[cls] = meta(cls.__name__, (cls,), body, kw_only=True)
        _bases[twin] = cls
    for name, obj in namespace.items():
        if isinstance(obj, type) and obj in _twins:
            twin_namespace[name] = _twins[obj]
        elif isinstance(obj, types.UnionType):
            twin_namespace[name] = _open_type(obj)


# --- encode / decode entry points -------------------------------------------------

_unions: dict[Any, UnionDecoder] = {}
_decoders: dict[Any, Callable[[Any], Any]] = {}


def register_union(alias: Any, decoder: UnionDecoder) -> None:
    """Make `decode`/`convert` accept the union alias itself as target type."""
    _unions[alias] = decoder


def _decoder_for(type_: Any) -> Callable[[Any], Any]:
    fn = _decoders.get(type_)
    if fn is None:
        fn = _unions.get(type_) or _closed_then_open(type_)
        _decoders[type_] = fn
    return fn


def _closed_then_open(type_: Any) -> Callable[[Any], Any]:
    """One closed pass; when it fails, the open twins (which also report the errors),
    built then: a session's start decodes every message in one pass."""
    closed = msgspec.json.Decoder(type_).decode
    fallback: list[Callable[[Any], Any] | None] = []  # None: no twin, the error stands

    def decode(raw: Any) -> Any:
        try:
            return closed(raw)
        except ValidationError:
            if not fallback:
                opened = _open_type(type_)
                fallback.append(None if opened is type_ else msgspec.json.Decoder(opened).decode)
            if fallback[0] is None:
                raise
            return fallback[0](raw)

    return decode


_Json = bytes | str | Raw | memoryview | dict[str, Any] | None


@overload
def decode(raw: _Json, type_: type[_T], /) -> _T: ...
@overload
def decode(raw: _Json, type_: Any, /) -> Any: ...
def decode(raw: _Json, type_: Any, /) -> Any:
    """Decode JSON (e.g. the ``msgspec.Raw`` params/result of a message) into `type_`.

    `type_` is a generated struct, a union alias (``SessionUpdate``) or any type
    msgspec understands. ``None`` (params left out) decodes as ``null``, or failing
    that as ``{}``; a dict goes through `convert`. Fits the connection's ``Convert``
    protocol. Raises `ProtocolError` (its message names the path of what is wrong)
    when `raw` is no JSON or no `type_`.
    """
    try:
        if raw is None:
            try:
                return _decoder_for(type_)(b"null")
            except ValidationError as exc:
                try:
                    return _decoder_for(type_)(b"{}")
                except ValidationError:
                    raise exc from None
        if isinstance(raw, dict):
            return convert(raw, type_)
        return _decoder_for(type_)(raw)
    except msgspec.MsgspecError as exc:
        raise ProtocolError(str(exc)) from None


@overload
def convert(obj: Any, type_: type[_T], /) -> _T: ...
@overload
def convert(obj: Any, type_: Any, /) -> Any: ...
def convert(obj: Any, type_: Any, /) -> Any:
    """Like `decode`, from Python builtins (they are re-encoded to JSON first)."""
    try:
        return _decoder_for(type_)(_encoder.encode(obj))
    except msgspec.MsgspecError as exc:
        raise ProtocolError(str(exc)) from None


def enc_hook(obj: Any) -> Any:
    """msgspec ``enc_hook``: ``Unknown`` already encodes natively; nothing else is custom."""
    if isinstance(obj, Unknown):
        return dict(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=enc_hook)


def encode(obj: Any) -> bytes:
    """Encode a struct (or anything msgspec encodes) as wire JSON."""
    return _encoder.encode(obj)
