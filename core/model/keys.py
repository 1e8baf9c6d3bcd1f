"""Cache keys: a canonical encoding of call parameters, hashed to a memcached-safe key.

Two calls must share a cache entry exactly when their parameters are the same values
of the same types, in every process, on every host, under every Python version. So
nothing here uses ``hash()`` (salted per process) or ``repr()`` (no contract, memory
addresses). Each value is written as a type tag, a byte length and its content,
recursively (``"hello"`` -> ``b"s5:hello"``, ``("a", 1)`` -> ``b"t8:s1:ai1:1"``).

The length prefix keeps ``("a b",)`` and ``("a", "b")`` apart; the tag keeps ``1``,
``1.0``, ``True``, ``"1"`` and ``b"1"`` apart; mappings and sets are sorted by their
encoded bytes, so order and hash seed do not matter. A type that cannot be encoded
faithfully is an error, never a fallback: a key that differs between processes is a
permanent miss, and one too coarse serves one caller's data to another.

The key is ``"{namespace}:{readable}:{digest}"``: the BLAKE2b digest carries the
uniqueness, the readable prefix (leading str/int parts and str/int named arguments)
lets a human tell keys apart. Every store enforces memcached's rule (at most 250
bytes, no whitespace or control characters) through :func:`validate_store_key`.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePath, PureWindowsPath
from typing import Any, Final

from mcache.contract.store import MAX_KEY_BYTES
from mcache.errors import InvalidKey
from mcache.memo import PER_KEY_LIMIT, BoundedMemo
from mcache.wording import a

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_NAMESPACE_CHARS",
    "canonical_bytes",
    "keyable",
    "make_key",
    "validate_store_key",
    "validated_keys",
]

MAX_NAMESPACE_CHARS: Final = 100
_MAX_READABLE: Final = 80
_DIGEST_BYTES: Final = 16  # 128 bits: 32 hex characters
_MAX_DEPTH: Final = 100  # well under the interpreter's recursion limit

_NAMESPACE_BAD = re.compile(r"[^\x21-\x7e]")
_READABLE_BAD = re.compile(r"[^A-Za-z0-9_.\-/=]")
_STORE_KEY_BAD = re.compile(r"[\x00-\x20\x7f]")

_Active = set[int]
_SIZES: Final = [b"%d:" % size for size in range(256)]  # saves a format call per value


def _frame(tag: bytes, content: bytes) -> bytes:
    """Return ``tag + len(content) + b":" + content``."""
    size = len(content)
    return tag + (_SIZES[size] if size < 256 else b"%d:" % size) + content


def _type_name(cls: type) -> bytes:
    """Return the encoded ``module.qualname`` of a class."""
    return _encode_str(f"{cls.__module__}.{cls.__qualname__}")


# Tags. Leaves: N None, b bool, i int (hex), f float (float.hex), s str (UTF-8),
# y bytes-like, T datetime, D date, H time, R timedelta, n Decimal, u UUID, p path.
# Nodes: t tuple, l list, d mapping, S set/frozenset, e enum member,
# c __cache_key__() result, m model instance, o dataclass instance.


def _encode_int(obj: int) -> bytes:
    # Hex, not decimal: str() refuses ints over 4300 digits since Python 3.11.
    return _frame(b"i", b"%x" % int(obj))


def _encode_str(obj: str) -> bytes:
    return _frame(b"s", str.encode(obj, "utf-8", "surrogatepass"))


def _encode_bytes(obj: bytes | bytearray | memoryview) -> bytes:
    return _frame(b"y", obj.tobytes() if isinstance(obj, memoryview) else bytes(obj))


def _encode_path(obj: PurePath) -> bytes:
    flavour = "windows" if isinstance(obj, PureWindowsPath) else "posix"
    return _frame(b"p", _encode_str(flavour) + _encode_str(str(obj)))


def _leaf(tag: bytes, content: Callable[[Any], str]) -> Callable[[Any], bytes]:
    """Return an encoder framing the ASCII text ``content(value)`` under ``tag``."""
    return lambda obj: _frame(tag, content(obj).encode("ascii"))


_LEAVES: dict[type, Callable[[Any], bytes]] = {
    type(None): lambda obj: b"N0:",
    bool: lambda obj: b"b1:1" if obj else b"b1:0",
    int: _encode_int,
    float: _leaf(b"f", float.hex),  # exact, version-independent; keeps 0.0 and -0.0 apart
    str: _encode_str,
    bytes: _encode_bytes,
    bytearray: _encode_bytes,
    memoryview: _encode_bytes,
    datetime.datetime: _leaf(b"T", datetime.datetime.isoformat),
    datetime.date: _leaf(b"D", datetime.date.isoformat),
    datetime.time: _leaf(b"H", datetime.time.isoformat),
    datetime.timedelta: _leaf(b"R", lambda d: f"{d.days},{d.seconds},{d.microseconds}"),
    decimal.Decimal: _leaf(b"n", str),
    uuid.UUID: _leaf(b"u", lambda u: u.hex),
}

# For subclasses, tried with isinstance in this order (datetime is a subclass of date).
_LEAF_BASES: tuple[tuple[type, Callable[[Any], bytes]], ...] = (
    *_LEAVES.items(),
    (PurePath, _encode_path),
)

# Nodes: values whose content is the encoding of other values.


def _encode_tuple(obj: tuple[Any, ...], active: _Active, depth: int) -> bytes:
    return _frame(b"t", b"".join([_encode(item, active, depth) for item in obj]))


def _encode_flat_tuple(obj: tuple[Any, ...]) -> bytes | None:
    """Encode a tuple of exact ``str``/``int`` items as ``_encode_tuple`` does, faster.

    Call parameters are nearly always such tuples, and key derivation sits on
    every cache hit; return None for anything else.
    """
    out = []
    for item in obj:
        kind = type(item)
        if kind is str:
            out.append(_frame(b"s", str.encode(item, "utf-8", "surrogatepass")))
        elif kind is int:
            out.append(_frame(b"i", b"%x" % item))
        else:
            return None
    return _frame(b"t", b"".join(out))


def _encode_list(obj: list[Any], active: _Active, depth: int) -> bytes:
    return _frame(b"l", b"".join([_encode(item, active, depth) for item in obj]))


def _encode_mapping(obj: Mapping[Any, Any], active: _Active, depth: int) -> bytes:
    # Sorting by encoded bytes needs no ordering between the keys themselves
    # (1 vs "a"), and is the same in every process, unlike dict or set order.
    pairs = sorted((_encode(k, active, depth), _encode(v, active, depth)) for k, v in obj.items())
    return _frame(b"d", b"".join([k + v for k, v in pairs]))


def _encode_set(obj: set[Any] | frozenset[Any], active: _Active, depth: int) -> bytes:
    return _frame(b"S", b"".join(sorted([_encode(item, active, depth) for item in obj])))


_NODES: dict[type, Callable[[Any, _Active, int], bytes]] = {
    tuple: _encode_tuple,
    list: _encode_list,
    dict: _encode_mapping,
    set: _encode_set,
    frozenset: _encode_set,
}

_NODE_BASES: tuple[tuple[type, Callable[[Any, _Active, int], bytes]], ...] = (
    *_NODES.items(),
    (Mapping, _encode_mapping),
)


def _encode(obj: object, active: _Active, depth: int) -> bytes:
    """Encode ``obj``, refusing cycles and runaway nesting."""
    leaf = _LEAVES.get(type(obj))
    if leaf is not None:
        return leaf(obj)
    oid = id(obj)
    if oid in active:
        raise InvalidKey(f"cannot build a cache key: {a(type(obj).__qualname__)} contains itself")
    if depth >= _MAX_DEPTH:
        raise InvalidKey(f"cannot build a cache key: parameters nest over {_MAX_DEPTH} levels")
    active.add(oid)
    try:
        node = _NODES.get(type(obj))
        if node is not None:
            return node(obj, active, depth + 1)
        return _encode_other(obj, active, depth + 1)
    finally:
        active.discard(oid)


def _encode_other(obj: Any, active: _Active, depth: int) -> bytes:
    """Encode a value that is not one of the exact built-in types."""
    cls = type(obj)
    if getattr(cls, "__cache_key__", None) is not None:
        return _frame(b"c", _type_name(cls) + _encode(obj.__cache_key__(), active, depth))
    if isinstance(obj, enum.Enum):
        return _frame(b"e", _type_name(cls) + _encode(obj.value, active, depth))
    label = _model_label(obj)
    if label is not None:
        return _encode_model(obj, label, active, depth)
    for bases, leaf in _LEAF_BASES:
        if isinstance(obj, bases):
            return leaf(obj)
    for bases, node in _NODE_BASES:
        if isinstance(obj, bases):
            return node(obj, active, depth)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [
            _encode_str(f.name) + _encode(getattr(obj, f.name), active, depth)
            for f in dataclasses.fields(obj)
        ]
        return _frame(b"o", _type_name(cls) + b"".join(fields))
    raise InvalidKey(
        f"cannot build a cache key from a {cls.__module__}.{cls.__qualname__} object: "
        "give it a __cache_key__() method returning plain values (str, int, tuple, ...)"
    )


def _model_label(obj: object) -> str | None:
    """Return ``app_label.model`` if ``obj`` looks like a Django model instance."""
    # Duck typing: the core never imports Django.
    label = getattr(getattr(obj, "_meta", None), "label_lower", None)
    if isinstance(label, str) and hasattr(obj, "pk") and not isinstance(obj, type):
        return label
    return None


def _encode_model(obj: Any, label: str, active: _Active, depth: int) -> bytes:
    """Encode a model instance as its ``app_label.model`` and primary key."""
    pk = obj.pk
    if pk is None:
        # Every unsaved instance would share one key and so one cached value.
        raise InvalidKey(f"cannot build a cache key from an unsaved {label} (its pk is None)")
    return _frame(b"m", _encode_str(label) + _encode(pk, active, depth))


def keyable(value: object) -> object:
    """Return ``value`` if a key can be made of it, else its text (as Django's ``{% cache %}``).

    For template fragments varying on whatever a template holds (a user object,
    a lazy translation): typed where possible, so ``1`` and ``"1"`` differ.
    """
    try:
        canonical_bytes(value)
    except InvalidKey:
        return str(value)
    return value


def canonical_bytes(obj: object) -> bytes:
    """Return the canonical, type-tagged, length-prefixed encoding of ``obj``."""
    return _encode(obj, set(), 0)


def _check_namespace(namespace: object) -> None:
    """Raise InvalidKey unless ``namespace`` is usable in a key."""
    if not isinstance(namespace, str):
        raise InvalidKey(f"namespace must be a str, not {type(namespace).__qualname__}")
    if len(namespace) > MAX_NAMESPACE_CHARS:
        raise InvalidKey(
            f"namespace is {len(namespace)} characters; the limit is {MAX_NAMESPACE_CHARS}"
        )
    bad = _NAMESPACE_BAD.search(namespace)
    if bad is not None:
        raise InvalidKey(
            f"namespace {namespace[:40]!r} contains {bad.group()!r}: only visible ASCII "
            "without whitespace or control characters is allowed"
        )


def _readable_piece(value: object, budget: int) -> str | None:
    """Return a short text form of a value encoded as a plain str or int, else None.

    Subclasses count when they are encoded as their base (Django's SafeString,
    say): the key must not depend on anything the digest does not.
    """
    cls = type(value)
    if (
        cls is not str
        and cls is not int
        and (isinstance(value, bool | enum.Enum) or getattr(cls, "__cache_key__", None) is not None)
    ):
        return None
    if isinstance(value, str):
        return str.__str__(value)[:budget]
    if isinstance(value, int) and value.bit_length() <= 256:  # str() of huge ints is slow
        return int.__repr__(value)[:budget]
    return None


def _readable(parts: tuple[object, ...], named: dict[str, object], budget: int) -> str:
    """Return the human-readable key prefix, at most ``budget`` characters."""
    if budget <= 0:
        return ""
    pieces: list[str] = []
    for part in parts:
        piece = _readable_piece(part, budget)
        if piece is None:
            break
        pieces.append(piece)
    for name in sorted(named) if named else ():
        piece = _readable_piece(named[name], budget)
        if piece is not None:
            pieces.append(f"{name[:budget]}={piece}")
    text = ".".join(pieces)[:budget]
    # Most prefixes are already clean; the regex substitution is the slow path.
    # The substitution is one character for one, so cutting first is equivalent.
    if (text.isascii() and text.isalnum()) or not _READABLE_BAD.search(text):
        return text
    return _READABLE_BAD.sub("_", text)


_checked_namespaces: set[str] = set()
_NO_NAMED: Final = b"d0:"
_FLAT_KINDS: Final = frozenset({str, int})
_memo: BoundedMemo[tuple[object, ...], str] = BoundedMemo(2048)


def make_key(namespace: str, *parts: object, **named: object) -> str:
    """Return the store key for ``parts`` and ``named`` under ``namespace``."""
    if named:
        return _make_key(namespace, parts, named)
    # Hot keys are derived again on every hit. Calls made only of exact str and
    # int parts are remembered, the part types in the memo key because
    # 1 == True == 1.0 in Python while their cache keys must differ; so are calls
    # of str, None and tuples of them (a page's key), where equal means the same.
    kinds = tuple(map(type, parts))
    if _FLAT_KINDS.issuperset(kinds):
        memo_key: tuple[object, ...] = (namespace, parts, kinds)
    elif _strings_only(parts):
        memo_key = (namespace, parts, None)
    else:
        return _make_key(namespace, parts, named)
    key = _memo.get(memo_key)
    if key is None:
        key = _make_key(namespace, parts, named)
        _memo.remember(memo_key, key)
    return key


def _strings_only(parts: tuple[object, ...]) -> bool:
    """Return whether ``parts`` holds only str, None and tuples of them: values equal
    exactly when their keys are, so such a call can be remembered as it is."""
    for part in parts:
        kind = type(part)
        if kind is str or part is None or (kind is tuple and _strings_only(part)):  # type: ignore[arg-type]
            continue
        return False
    return True


def _make_key(namespace: str, parts: tuple[object, ...], named: dict[str, object]) -> str:
    """Derive the key (no memo)."""
    if namespace not in _checked_namespaces:
        _check_namespace(namespace)
        if len(_checked_namespaces) < 1024:  # namespaces are few; never grow without bound
            _checked_namespaces.add(namespace)
    # Positional and named arguments are encoded separately, so f(("a", 1)) and f(a=1)
    # differ; the namespace is kept verbatim in the key, so it need not be hashed.
    digest = hashlib.blake2b(
        (_encode_flat_tuple(parts) or _encode_tuple(parts, set(), 0))
        + (_encode_mapping(named, set(), 0) if named else _NO_NAMED),
        digest_size=_DIGEST_BYTES,
    ).hexdigest()
    fixed = len(namespace) + 1 + 1 + len(digest)
    readable = _readable(parts, named, min(_MAX_READABLE, MAX_KEY_BYTES - fixed))
    return ":".join([piece for piece in (namespace, readable, digest) if piece])


_ACCEPTED: BoundedMemo[str, bool] = BoundedMemo(PER_KEY_LIMIT)
"""Keys a batch already found valid: a hit's batch is the same few keys every time."""

_ACCEPTED_BATCHES: BoundedMemo[tuple[str, ...], bool] = BoundedMemo(PER_KEY_LIMIT)
"""Whole batches already found valid: a hit's read plan sends the same tuple each time."""


def validated_keys(keys: Iterable[str]) -> Sequence[str]:
    """Return ``keys`` as a sequence, each checked by :func:`validate_store_key` (a batch
    is refused whole, before any of it reaches a server). A tuple is checked once, as a
    whole, and returned as it is: a read plan's keys come as the same tuple every time."""
    if type(keys) is tuple:
        try:
            if keys in _ACCEPTED_BATCHES:  # only batches of valid keys are remembered
                return keys
        except TypeError:  # something unhashable in it: the check below names it
            pass
        else:
            for key in keys:
                validate_store_key(key)
            _ACCEPTED_BATCHES.remember(keys, True)
            return keys
    keys = list(keys)
    accepted = _ACCEPTED
    for key in keys:
        if type(key) is not str or key not in accepted:
            validate_store_key(key)
            accepted.remember(key, True)
    return keys


def validate_store_key(key: str) -> None:
    """Raise InvalidKey unless memcached would accept ``key``."""
    # Fast path for the usual printable-ASCII key: C-level string methods only.
    if (
        type(key) is str
        and 0 < len(key) <= MAX_KEY_BYTES
        and key.isascii()
        and key.isprintable()
        and " " not in key
    ):
        return
    _check_store_key_slowly(key)


def _check_store_key_slowly(key: object) -> None:
    """Raise InvalidKey naming what is wrong with ``key``, or return if it is fine."""
    if not isinstance(key, str):
        raise InvalidKey(f"store key must be a str, not {type(key).__qualname__}")
    shown = repr(key[:60]) + ("..." if len(key) > 60 else "")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidKey(f"store key {shown} is not encodable as UTF-8") from e
    if size == 0:
        raise InvalidKey("store key is empty")
    if size > MAX_KEY_BYTES:
        raise InvalidKey(f"store key {shown} is {size} bytes; the limit is {MAX_KEY_BYTES}")
    bad = _STORE_KEY_BAD.search(key)
    if bad is not None:
        raise InvalidKey(
            f"store key {shown} contains {bad.group()!r}: whitespace and control "
            "characters are not allowed"
        )
