"""Runtime support shared by the generated `schema_v1` / `schema_v2` modules.

ACP unions are *open*: agents send variants (``sessionUpdate`` tags, content
``type``s, ...) newer than our pinned schema. msgspec tagged unions are closed, so
a field whose type is a discriminated union is declared ``Open[X]``:

- type checkers see ``X | Unknown`` (``Annotated[X | Unknown, ...]``);
- at runtime msgspec sees ``msgspec.Raw``: the JSON of that value is kept as raw
  bytes, and the struct's generated ``__post_init__`` decodes it with the
  `UnionDecoder` of ``X``. Known tags decode strictly (a malformed known variant is
  an error), an unknown tag becomes `Unknown` *at that level*: an unknown content
  item inside a known tool call leaves the tool call intact.

Fields the schema marks ``x-deserialize-default-on-error`` are ``Lenient[T]``: raw
JSON too, decoded by an `OrDefault` (a value that is not a ``T`` becomes the
field's default, so one bad ``stopReason`` does not cost the whole update); lists
marked ``x-deserialize-skip-invalid-items`` go through a `ValidItems` (bad items
dropped).

Because of the raw-bytes step, the generated structs decode from JSON only; use
`convert` (re-encodes) for Python objects, never ``msgspec.convert``.
`Unknown` is a ``dict`` subclass, so any msgspec encoder writes it back verbatim.

Public names (re-exported by each generated module):

    Unknown              an unknown variant: ``.raw`` is the JSON object, ``.tag`` its tag
    decode(raw, type_)   JSON bytes / str / msgspec.Raw -> typed value (None: params left
                         out; a dict goes through convert); fits the connection's Convert
    convert(obj, type_)  Python builtins (e.g. an already-parsed dict) -> typed value
    encode(obj)          wire JSON bytes (camelCase keys, ``_meta``, tags, Unknown verbatim)
    enc_hook             for a caller's own msgspec Encoder (Unknown does not need it)
"""

from __future__ import annotations

__all__ = [
    "Lenient",
    "Open",
    "OrDefault",
    "UnionDecoder",
    "Unknown",
    "ValidItems",
    "convert",
    "decode",
    "enc_hook",
    "encode",
    "register_union",
]

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, overload

import msgspec
from msgspec import Raw, ValidationError

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


if TYPE_CHECKING:
    from typing import TypeAlias

    Open: TypeAlias = Annotated[_T | Unknown, "open union, decoded in __post_init__"]
    Lenient: TypeAlias = Annotated[_T, "default on error, decoded in __post_init__"]
else:

    class Open:
        """``Open[X]`` annotates a field holding the open union ``X``.

        Type checkers see ``X | Unknown``; msgspec sees ``msgspec.Raw``, which the
        struct's ``__post_init__`` turns into an ``X`` or an ``Unknown``.
        """

        def __class_getitem__(cls, item: object) -> type[Raw]:
            return Raw

    class Lenient:
        """``Lenient[T]`` annotates a field whose bad value falls back to its default.

        Type checkers see ``T``; msgspec sees ``msgspec.Raw``, which the struct's
        ``__post_init__`` decodes with an `OrDefault` or a `ValidItems`.
        """

        def __class_getitem__(cls, item: object) -> type[Raw]:
            return Raw


_any_json: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


class UnionDecoder:
    """Decode the raw JSON of one open union value (see the module docstring).

    tag_field/variants: the discriminated members, tag value -> tagged Struct.
    defaults: members without a tag (or all members of an untagged union), tried
    in order when the tag is absent; the first that decodes wins. Decoders are
    built on first use, keeping the import of the generated modules cheap.
    """

    __slots__ = ("_by_tag", "_defaults", "_fast", "_ready", "defaults", "name", "tag_field")

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
        self._defaults: list[msgspec.json.Decoder[Any]] = []
        self._ready = False

    def prepare(self) -> None:
        """Build the msgspec decoders now rather than on first use (idempotent)."""
        if self._ready:
            return
        members = list(dict.fromkeys(self._by_tag.values()))
        # One msgspec pass handles the common case (a known tag, or null). With a
        # single tagged member msgspec would not insist on the tag, so when there
        # are defaults to fall back on, the tag is then checked by hand instead.
        if len(members) > 1 or (members and not self.defaults):
            self._fast = msgspec.json.Decoder(functools.reduce(operator.or_, members) | None)
        self._defaults = [msgspec.json.Decoder(d) for d in self.defaults]
        self._by_tag = {tag: msgspec.json.Decoder(cls) for tag, cls in self._by_tag.items()}
        self._ready = True

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
        obj = _any_json.decode(raw)
        if obj is None:
            return None
        is_object = type(obj) is dict
        tag = obj.get(self.tag_field) if is_object and self.tag_field else None
        if tag is not None:
            decoder = self._by_tag.get(tag) if type(tag) is str else None
            if decoder is None:
                return Unknown(obj, tag)
            try:  # a known tag: the variant is malformed, report why
                return decoder.decode(raw)
            except ValidationError as err:
                raise _at(err, field) from None
        for decoder in self._defaults:
            try:
                return decoder.decode(raw)
            except ValidationError as err:
                exc = err
        if is_object:
            return Unknown(obj)
        raise _at(exc or ValidationError(f"Expected `{self.name}`"), field)


def _at(exc: ValidationError, field: str) -> ValidationError:
    """Prefix the path of an error raised inside field `field` of a struct.

    Errors raised in ``__post_init__`` reach the caller unchanged, so the path is
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


# --- encode / decode entry points -------------------------------------------------

_unions: dict[Any, UnionDecoder] = {}
_decoders: dict[Any, Callable[[Any], Any]] = {}


def register_union(alias: Any, decoder: UnionDecoder) -> None:
    """Make `decode`/`convert` accept the union alias itself as target type."""
    _unions[alias] = decoder


def _decoder_for(type_: Any) -> Callable[[Any], Any]:
    fn = _decoders.get(type_)
    if fn is None:
        fn = _unions.get(type_) or msgspec.json.Decoder(type_).decode
        _decoders[type_] = fn
    return fn


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
    protocol. Raises ``msgspec.ValidationError`` / ``msgspec.DecodeError``.
    """
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


@overload
def convert(obj: Any, type_: type[_T], /) -> _T: ...
@overload
def convert(obj: Any, type_: Any, /) -> Any: ...
def convert(obj: Any, type_: Any, /) -> Any:
    """Like `decode`, from Python builtins (they are re-encoded to JSON first)."""
    return _decoder_for(type_)(_encoder.encode(obj))


def enc_hook(obj: Any) -> Any:
    """msgspec ``enc_hook``: ``Unknown`` already encodes natively; nothing else is custom."""
    if isinstance(obj, Unknown):
        return dict(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=enc_hook)


def encode(obj: Any) -> bytes:
    """Encode a struct (or anything msgspec encodes) as wire JSON."""
    return _encoder.encode(obj)
