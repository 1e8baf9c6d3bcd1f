"""Turn cached values into bytes and back, safely.

Everything a store holds passes through a :class:`Codec`, so this is the one place
that decides three things:

* **Counters stay counters.** A plain ``int`` is stored as ASCII decimal
  (``b"42"``) with no header, so memcached's ``incr``/``decr`` work on it; it is
  never compressed or signed: a tamperer can change a count, never make this
  process unpickle anything.
* **Bad bytes are a miss, never an exception.** Values of an older release, of
  another program, truncated or tampered with decode to ``NO_VALUE`` (each kind
  of failure logged at most once per interval); the next build overwrites them.
* **Signed values are bound to their key.** The HMAC-SHA256 tag covers the
  store key, header and body, so a value copied from another key (or unsigned)
  is rejected before it is decompressed or unpickled (docs/explanation/security.md).

Wire format of everything except a raw ``int``::

    byte 0      0xA7 magic (never an ASCII digit or "-": such bytes are decimals;
                a future incompatible format takes another magic byte)
    byte 1      flags: bits 0-2 serializer (0 raw bytes, 1 pickle, 2 json,
                3 msgpack, 7 custom), bit 3 zlib-compressed, bit 4 signed,
                bits 5-7 reserved (must be 0)
    32 bytes    HMAC-SHA256 tag, present only when signed
    rest        body (compressed when bit 3 is set)

A codec only decodes raw bytes and its own serializer's format: a JSON codec
never unpickles a value that claims to be a pickle.
"""

from __future__ import annotations

import json
import pickle
import zlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from mcache.contract.store import NO_VALUE, NoValueType
from mcache.errors import ConfigError, Unserializable
from mcache.logs import FailureLog
from mcache.model.signing import DIGEST_SIZE, Signer, key_bytes

__all__ = ["Codec", "JsonSerializer", "MsgpackSerializer", "PickleSerializer", "Serializer"]

_MAGIC = 0xA7
_HEADER_SIZE = 2
_TAG_SIZE = DIGEST_SIZE
_SIGNED_BODY = _HEADER_SIZE + _TAG_SIZE
_RAW, _PICKLE, _JSON, _MSGPACK, _CUSTOM = 0, 1, 2, 3, 7
_SERIALIZER_MASK = 0x07
_COMPRESSED, _SIGNED, _RESERVED = 0x08, 0x10, 0xE0  # flag bits; reserved must be 0
# Every possible header, built once: dumps() indexes instead of allocating.
_HEADERS = tuple(bytes((_MAGIC, flags)) for flags in range(32))
_SERIALIZER_NAMES = ("raw", "pickle", "json", "msgpack", "id 4", "id 5", "id 6", "custom")


@runtime_checkable
class Serializer(Protocol):
    """Turn Python objects into bytes and back; ``loads`` may raise on bad input."""

    name: str

    def dumps(self, obj: object) -> bytes:
        """Serialize ``obj``."""

    def loads(self, data: bytes) -> object:
        """Deserialize ``data``."""


class PickleSerializer:
    """Serialize any picklable object with the highest pickle protocol."""

    name = "pickle"

    def dumps(self, obj: object) -> bytes:
        """Pickle ``obj``."""
        return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)

    loads = staticmethod(pickle.loads)
    """Unpickle ``data``: the C function itself, with no frame of ours (every near hit and
    every read decodes through it)."""


class JsonSerializer:
    """Serialize JSON types as compact UTF-8 JSON.

    Only JSON types round-trip: tuples come back as lists, non-string mapping keys as
    strings; anything else (sets, bytes, dates, objects) makes ``dumps`` raise ``TypeError``.
    """

    name = "json"
    _encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    _decoder = json.JSONDecoder()

    def dumps(self, obj: object) -> bytes:
        """Encode ``obj`` as JSON."""
        # surrogatepass: a lone surrogate in a str round-trips instead of failing.
        return self._encoder.encode(obj).encode("utf-8", "surrogatepass")

    def loads(self, data: bytes) -> object:
        """Decode JSON ``data``."""
        return self._decoder.decode(data.decode("utf-8", "surrogatepass"))


class MsgpackSerializer:
    """Serialize JSON-like types (plus bytes, int keys) with msgpack: as with JSON, tuples
    come back as lists, and unsupported types raise ``TypeError``."""

    name = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack  # imported lazily: an optional dependency
        except ImportError as e:
            raise ConfigError(
                'serializer "msgpack" needs the msgpack package:'
                " pip install msgpack (or the [msgpack] extra)"
            ) from e
        self._msgpack: Any = msgpack

    def dumps(self, obj: object) -> bytes:
        """Pack ``obj``."""
        return self._msgpack.packb(obj, use_bin_type=True)

    def loads(self, data: bytes) -> object:
        """Unpack ``data``."""
        return self._msgpack.unpackb(data, raw=False, strict_map_key=False)


_BUILTIN: dict[str, tuple[Callable[[], Serializer], int]] = {
    "pickle": (PickleSerializer, _PICKLE),
    "json": (JsonSerializer, _JSON),
    "msgpack": (MsgpackSerializer, _MSGPACK),
}
_BUILTIN_IDS = {factory: serializer_id for factory, serializer_id in _BUILTIN.values()}


def _make_serializer(serializer: str | Serializer) -> tuple[Serializer, int]:
    """Resolve a serializer name or object to ``(serializer, wire id)``."""
    if isinstance(serializer, str):
        if serializer not in _BUILTIN:
            choices = ", ".join(repr(name) for name in _BUILTIN)
            raise ConfigError(
                f"unknown serializer {serializer!r}: choose one of {choices} "
                "or pass an object implementing mcache.model.codec.Serializer"
            )
        serializer = _BUILTIN[serializer][0]()
    elif not isinstance(serializer, Serializer):
        raise ConfigError(
            f"serializer must be a name or a Serializer (name, dumps, loads), got {serializer!r}"
        )
    return serializer, _BUILTIN_IDS.get(type(serializer), _CUSTOM)


def _check_options(compress_threshold: int | None, compress_level: int) -> None:
    """Raise ``ConfigError`` for compression settings zlib cannot use."""
    if compress_threshold is not None and (
        type(compress_threshold) is not int or compress_threshold < 0
    ):
        raise ConfigError(
            f"compress_threshold must be None or an int >= 0, got {compress_threshold!r}"
        )
    if type(compress_level) is not int or not -1 <= compress_level <= 9:
        raise ConfigError(f"compress_level must be an int from -1 to 9, got {compress_level!r}")


def _signer(
    signing_key: str | bytes | None, fallbacks: Iterable[str | bytes], trust_unsigned_pickle: bool
) -> Signer | None:
    """Return the signer the codec options describe, or None for unsigned values."""
    if isinstance(fallbacks, str | bytes) or not isinstance(fallbacks, Iterable):
        raise ConfigError("fallback_signing_keys must be a list of keys (str or bytes)")
    old_keys = [key_bytes(old, "each of fallback_signing_keys") for old in fallbacks]
    if signing_key is None:
        if old_keys:
            raise ConfigError("fallback_signing_keys are read only beside a signing_key: set one")
        return None
    if trust_unsigned_pickle:
        raise ConfigError(
            "trust_unsigned_pickle=True and a signing_key contradict each other: with a key,"
            " values are signed and unsigned ones refused; drop one of them"
        )
    return Signer(key_bytes(signing_key, "signing_key"), old_keys)


class Codec:
    """Encode values for a store and decode them, turning bad bytes into ``NO_VALUE``."""

    def __init__(
        self,
        serializer: str | Serializer = "pickle",
        *,
        compress_threshold: int | None = 4096,
        compress_level: int = 1,
        signing_key: str | bytes | None = None,
        fallback_signing_keys: Iterable[str | bytes] = (),
        trust_unsigned_pickle: bool = False,
        raw_ints: bool = True,
        failure_log: FailureLog | None = None,
        serializer_setting: str = "the codec's serializer= option",
    ) -> None:
        """``signing_key``: sign values and refuse unsigned ones (docs/explanation/security.md);
        ``fallback_signing_keys``: older keys whose values are still read during a rotation
        (each is re-signed with ``signing_key`` at its next write).
        ``trust_unsigned_pickle``: the servers are as trusted as this host, so unsigned
        pickles are read without the warning a shared store gives (see :class:`mcache.Cache`).
        ``serializer_setting``: what a site writes to choose the serializer, named
        by the error a value it cannot encode raises (an adapter's own setting)."""
        _check_options(compress_threshold, compress_level)
        self.serializer_setting = serializer_setting
        self.serializer, self._serializer_id = _make_serializer(serializer)
        self._compress_threshold = compress_threshold
        self._compress_level = compress_level
        self._signer = _signer(signing_key, fallback_signing_keys, trust_unsigned_pickle)
        self.trust_unsigned_pickle = trust_unsigned_pickle
        self._raw_ints = raw_ints
        self.failures = failure_log or FailureLog()
        # What loads() decodes at once: a value of this serializer, uncompressed, unsigned
        # where signing is off, signed where it is on (None never equals a header).
        self._plain_header = None if self._signer else _HEADERS[self._serializer_id]
        self._signed_header = _HEADERS[self._serializer_id | _SIGNED] if self._signer else None
        self._plain_loads = self.serializer.loads
        self._decoders: dict[int, Callable[[bytes], object]] = {
            _RAW: bytes,  # raw bytes come back as they are
            self._serializer_id: self.serializer.loads,
        }

    def storable_bytes(self, data: bytes) -> bytes | str:
        """Return ``data`` in a form this codec can keep inside a structure: JSON has no
        bytes, so for it a latin-1 string (one character per byte) ``bytes_of`` turns back."""
        return data.decode("latin-1") if self.serializer.name == "json" else data

    @staticmethod
    def bytes_of(stored: bytes | str) -> bytes:
        """Return the bytes ``storable_bytes`` was given."""
        return stored.encode("latin-1") if isinstance(stored, str) else stored

    @property
    def signed(self) -> bool:
        """Return whether values are signed and unsigned ones rejected."""
        return self._signer is not None

    @property
    def runs_unsigned_code(self) -> bool:
        """Return whether a value written by anyone who reaches the store is decoded by a
        serializer that may run code (pickle, or one of the site's own), unsigned, and the
        site has not said the store is trusted (the rule that
        :func:`mcache.model.signing.unsigned_pickle` applies to settings not yet a codec)."""
        return (
            self._signer is None
            and self._serializer_id not in (_JSON, _MSGPACK)
            and not self.trust_unsigned_pickle
        )

    def __repr__(self) -> str:
        return (
            f"Codec(serializer={self.serializer.name!r}, "
            f"compress_threshold={self._compress_threshold!r}, signed={self.signed})"
        )

    def dumps(self, value: object, key: str = "") -> bytes:
        """Encode ``value`` for storage under ``key``."""
        if type(value) is int and self._raw_ints:
            try:
                return b"%d" % value
            except ValueError:
                pass  # beyond sys.int_max_str_digits: the serializer carries it
        body: bytes
        if type(value) is bytes:
            flags, body = _RAW, value
        else:
            try:
                flags, body = self._serializer_id, self.serializer.dumps(value)
            except Exception as error:  # pickle, JSON and msgpack each raise their own kind
                raise Unserializable(
                    value, self.serializer.name, error, self.serializer_setting
                ) from error
        threshold = self._compress_threshold
        if threshold is not None and len(body) >= threshold:
            packed = zlib.compress(body, self._compress_level)
            if len(packed) < len(body):
                flags, body = flags | _COMPRESSED, packed
        signer = self._signer
        if signer is None:
            return _HEADERS[flags] + body
        header = _HEADERS[flags | _SIGNED]
        return header + signer.tag(key, header, body) + body

    def loads(self, data: bytes, key: str = "") -> object:
        """Decode ``data`` read from ``key``; return ``NO_VALUE`` when it cannot be trusted."""
        header = data[:_HEADER_SIZE]
        if header == self._plain_header:  # usual: this serializer, unsigned, whole
            try:
                return self._plain_loads(data[_HEADER_SIZE:])
            except Exception as e:
                return self._miss("codec.decode", key, f"{type(e).__name__}: {e}")
        if (
            header == self._signed_header
            and self._signer.signed_now(  # type: ignore[union-attr]
                key, header, data[_SIGNED_BODY:], data[_HEADER_SIZE:_SIGNED_BODY]
            )
        ):  # usual when signing: this serializer, signed with the current key, whole
            try:
                return self._plain_loads(data[_SIGNED_BODY:])
            except Exception as e:
                return self._miss("codec.decode", key, f"{type(e).__name__}: {e}")
        if not data:
            return self._miss("codec.corrupt", key, "empty value")
        if data[0] != _MAGIC:
            return self._loads_decimal(data, key)
        if len(data) < _HEADER_SIZE:
            return self._miss("codec.corrupt", key, "truncated header")
        flags = data[1]
        if flags & _RESERVED:
            return self._miss("codec.corrupt", key, f"unknown format flags 0x{flags:02x}")
        if flags & _SIGNED:
            body = self._verified_body(data, key)
            if body is None:
                return NO_VALUE
        elif self._signer is not None:
            return self._miss("codec.signature", key, "unsigned value, but signing is required")
        else:
            body = data[_HEADER_SIZE:]
        decode = self._decoders.get(flags & _SERIALIZER_MASK)
        if decode is None:
            found = _SERIALIZER_NAMES[flags & _SERIALIZER_MASK]
            reason = f"written by serializer {found!r}, this codec uses {self.serializer.name!r}"
            return self._miss("codec.serializer", key, reason)
        if flags & _COMPRESSED:
            try:
                body = zlib.decompress(body)
            except zlib.error as e:
                return self._miss("codec.corrupt", key, f"decompression failed: {e}")
        try:
            return decode(body)
        except Exception as e:  # any unpickling error (bad opcode, missing class, ...)
            return self._miss("codec.decode", key, f"{type(e).__name__}: {e}")

    def _loads_decimal(self, data: bytes, key: str) -> object:
        """Decode a raw integer, as written by ``dumps`` or by memcached's incr/decr."""
        if self._raw_ints:
            # memcached's in-place decr pads a shorter result with spaces ("10" -> "9 ").
            text = data.rstrip(b" ")
            try:
                value = int(text)
            except ValueError:
                pass
            else:
                if b"%d" % value == text:  # only what str(int) produces: no "042", "+1", "1_0"
                    return value
        return self._miss("codec.corrupt", key, "not an mcache value (no header, not a decimal)")

    def _verified_body(self, data: bytes, key: str) -> bytes | None:
        """Return a signed value's body if its tag is valid for ``key``; else log, return None."""
        signer, start = self._signer, _SIGNED_BODY
        if signer is None:
            reason = "signed value, but this codec has no signing key"
        elif len(data) < start:
            reason = "truncated signature"
        else:
            body = data[start:]
            current = signer.check(key, data[:_HEADER_SIZE], body, data[_HEADER_SIZE:start])
            if current is False:
                self.failures.log(
                    "codec.fallback_key",
                    "mcache: the value of key %r is signed with a fallback key: served, and"
                    " signed with the current key when it is next written",
                    key,
                )
            if current is not None:
                return body
            reason = "bad signature (tampered with, copied from another key, or signed with a"
            reason += " key this codec does not know)"
        self._miss("codec.signature", key, reason)
        return None

    def _miss(self, kind: str, key: str, reason: str) -> NoValueType:
        """Log an undecodable value (rate-limited per kind) and return ``NO_VALUE``."""
        self.failures.warning(
            kind, "mcache %s: treating the value of key %r as a miss: %s", kind, key, reason
        )
        return NO_VALUE
