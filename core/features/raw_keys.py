"""Raw keys: values another program wrote, or will read, on the same servers.

Everything else in mcache namespaces its keys and frames its values; a PHP page,
a Go service or a python-memcached script sharing the pool knows neither. So
``cache.raw`` takes the key exactly as given and the value as bare bytes (a
``str`` as UTF-8, an ``int`` as decimal digits, flags 0) and always returns
``bytes``: only the caller knows what the other program meant. See
docs/how-to/core.md ("Share keys with other programs").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mcache.contract.store import NO_VALUE
from mcache.engine.options import seconds
from mcache.model.keys import validate_store_key

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts

__all__ = ["RawKeys"]

RawValue = bytes | str | int


class RawKeys:
    """Un-namespaced keys and unframed values on a cache's store (``cache.raw``)."""

    def __init__(self, parts: CacheParts) -> None:
        self._parts = parts

    def get(self, key: str, default: Any = None) -> bytes | Any:
        """Return the bytes stored under exactly ``key``, or ``default``."""
        data = self._call("get", NO_VALUE, _checked(key))
        return default if data is NO_VALUE else bytes(data)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the bytes of each of ``keys`` found, one round trip per server."""
        found = self._call("get_many", {}, [_checked(key) for key in keys])
        return {k: bytes(v) for k, v in found.items()}

    def set(self, key: str, value: RawValue, ttl: float = 0) -> bool:
        """Store ``value`` bare under exactly ``key`` for ``ttl`` seconds (0: no expiry)."""
        return (
            self._call("set", False, _checked(key), _bare(value), seconds(ttl, "ttl")) is not False
        )

    def add(self, key: str, value: RawValue, ttl: float = 0) -> bool:
        """Store ``value`` only if ``key`` is absent; ``True`` when this call stored it."""
        return bool(self._call("add", False, _checked(key), _bare(value), seconds(ttl, "ttl")))

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` when it was there."""
        return bool(self._call("delete", False, _checked(key)))

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Add ``delta`` to the decimal number under ``key``; None when the key is absent."""
        return self._call("incr", None, _checked(key), delta)  # type: ignore[no-any-return]

    def set_many(self, items: Mapping[str, RawValue], ttl: float = 0) -> list[str]:
        """Store several values bare; return the keys that could not be stored."""
        encoded = {_checked(key): _bare(value) for key, value in items.items()}
        return list(self._call("set_many", list(encoded), encoded, seconds(ttl, "ttl")))

    def _call(self, method: str, fallback: Any, *args: Any) -> Any:
        """``store.<method>(*args)``; a store failure is logged and answered with ``fallback``."""
        call = getattr(self._parts.store, method)
        return self._parts.store_call(f"raw.{method}", lambda: call(*args), fallback)


def _checked(key: str) -> str:
    validate_store_key(key)
    return key


def _bare(value: RawValue) -> bytes:
    """Return ``value`` as the bytes another program reads: UTF-8 text, decimal digits."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool):
        return b"%d" % value
    raise TypeError(
        f"a raw value is bytes, str or int, got {type(value).__name__}: another program"
        " cannot read mcache's pickles; encode it first (json.dumps(value), say)"
    )
