"""The keys cached values are signed with, and where they come from by default.

A pickled value from a server anyone on the network can write to is a way to run code in
every process that reads it (Flask-Caching's CVE-2021-33026 was exactly that). So the
framework adapters sign by default, with a key derived from the secret the site already
keeps (Django's and Flask's ``SECRET_KEY``), and read values signed with the secrets it
is rotating away from (``SECRET_KEY_FALLBACKS``) while new writes take the current key:
a rotation never empties the cache.

The derived key is an HMAC of a fixed purpose under the secret, as Django's
``salted_hmac`` derives a key per salt: the secret never signs cache values directly, so a
signature seen in the cache is no signature of anything else the secret signs.
"""

from __future__ import annotations

import hashlib
import hmac
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mcache.errors import ConfigError, UnsignedPickleWarning, user_stacklevel

if TYPE_CHECKING:
    from mcache.contract.store import Store
    from mcache.model.codec import Codec

__all__ = [
    "SAFE_SERIALIZERS",
    "Signer",
    "derived_key",
    "key_bytes",
    "signed_by_default",
    "unsigned_pickle",
    "warn_if_unsigned",
]

SAFE_SERIALIZERS = frozenset({"json", "msgpack"})
"""Serializers whose ``loads`` cannot run code: values in them need no signature."""
PURPOSE = b"mcache.codec: the key cached values are signed with"
DIGEST_SIZE = 32  # HMAC-SHA256


def key_bytes(key: str | bytes, setting: str) -> bytes:
    """Return a signing key as bytes; an empty or mistyped one is refused naming ``setting``."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes) or not key:
        raise ConfigError(f"{setting} must be a non-empty str or bytes, got {type(key).__name__}")
    return key


def derived_key(secret: str | bytes) -> bytes:
    """Return the key a framework's ``secret`` signs cached values with (never the secret)."""
    return hmac.new(key_bytes(secret, "SECRET_KEY"), PURPOSE, hashlib.sha256).digest()


class _Keyed:
    """HMAC-SHA256 (RFC 2104) under one key, from SHA-256 states that have absorbed the
    padded key: copying two ``hashlib`` states per value costs a hit about a third less
    than copying OpenSSL's HMAC context, and the tags are the ``hmac`` module's, bit for bit
    (``tests/core/test_signing.py`` checks)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(key.translate(_IPAD))
        self._outer = hashlib.sha256(key.translate(_OPAD))

    def digest(self, head: bytes, body: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(head)
        inner.update(body)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


_BLOCK = 64  # SHA-256's block size
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


class Signer:
    """HMAC-SHA256 tags under the current key; tags of the ``fallbacks`` are accepted too."""

    __slots__ = ("_current", "_fallbacks")

    def __init__(self, key: bytes, fallbacks: Iterable[bytes] = ()) -> None:
        self._current = _Keyed(key)
        self._fallbacks = tuple(_Keyed(old) for old in fallbacks if old != key)

    def tag(self, key: str, header: bytes, body: bytes) -> bytes:
        """Return the tag binding ``key``, ``header`` and ``body`` under the current key."""
        return _tag(self._current, key, header, body)

    def signed_now(self, key: str, header: bytes, body: bytes, tag: bytes) -> bool:
        """Return whether ``tag`` is the current key's: a hit's one check."""
        return hmac.compare_digest(tag, _tag(self._current, key, header, body))

    def check(self, key: str, header: bytes, body: bytes, tag: bytes) -> bool | None:
        """Return True for a tag of the current key, False for a fallback key's, None for
        any other (tampered with, copied from another key, or signed with an unknown key)."""
        if self.signed_now(key, header, body, tag):
            return True
        for fallback in self._fallbacks:
            if hmac.compare_digest(tag, _tag(fallback, key, header, body)):
                return False
        return None


def _tag(keyed: _Keyed, key: str, header: bytes, body: bytes) -> bytes:
    key_bytes = key.encode("utf-8", "surrogatepass")
    # Length-prefixing the key keeps ("ab", body) and ("a", "b" + body) apart.
    return keyed.digest(len(key_bytes).to_bytes(4, "big") + key_bytes + header, body)


def signed_by_default(
    codec_options: Mapping[str, Any],
    secret: str | bytes | None,
    secret_fallbacks: Iterable[str | bytes],
) -> dict[str, Any]:
    """Return ``codec_options`` with a signing key derived from the framework's ``secret``
    (and fallbacks from its ``secret_fallbacks``) unless the site chose otherwise: its own
    ``signing_key``, a serializer that cannot run code, or ``trust_unsigned_pickle``.
    Without a ``secret`` the options come back as they are: the caller decides."""
    if not secret or not unsigned_pickle(codec_options):
        return dict(codec_options)
    given = list(codec_options.get("fallback_signing_keys") or ())  # a site's own, kept
    fallbacks = [*given, *(derived_key(old) for old in secret_fallbacks if old)]
    return {**codec_options, "signing_key": derived_key(secret), "fallback_signing_keys": fallbacks}


def unsigned_pickle(codec_options: Mapping[str, Any]) -> bool:
    """Return whether ``codec_options`` leave values unsigned, in a serializer that may run
    code (pickle, or a site's own), without the site's word that the servers are trusted:
    :meth:`mcache.model.codec.Codec.runs_unsigned_code`'s rule, on settings not yet a codec."""
    serializer = codec_options.get("serializer", "pickle")
    return (
        codec_options.get("signing_key") is None
        and not codec_options.get("trust_unsigned_pickle")
        and not (isinstance(serializer, str) and serializer in SAFE_SERIALIZERS)
    )


def warn_if_unsigned(store: Store, codec: Codec) -> None:
    """Warn when values others may write are unpickled unsigned: the Django and Flask adapters
    sign by default, a core ``Cache`` only with the key its ``Codec`` is given."""
    if codec.runs_unsigned_code and not store.traits.process_local:
        warnings.warn(
            f"mcache: values on {type(store).__name__} are decoded with"
            f" {codec.serializer.name!r} unsigned, so whoever can write to its servers can run"
            " code in this process; pass codec=Codec(signing_key=<a secret the site's processes"
            " share>), or Codec('json') / Codec('msgpack'), or"
            " Codec(trust_unsigned_pickle=True) if only trusted hosts reach the servers",
            UnsignedPickleWarning,
            stacklevel=user_stacklevel(),
        )
