"""The Redis store's operations, written once as sans-I/O steps for both drivers.

Each ``*_steps`` method validates its arguments, yields the commands it needs
(a :class:`Command`, a :class:`Scripted` Lua script, a :class:`Pipelined` batch)
and turns their replies into the :class:`~mcache.contract.store.Store` contract's
answers: one implementation of memcached's semantics on Redis, performed by
:class:`~mcache.stores.redis.store.RedisStore` and awaited by its async twin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcache.contract.store import NO_VALUE, CasToken, NoValueType, StaleClaim
from mcache.contract.store_helpers import check_delta, check_size
from mcache.errors import ValueTooLarge
from mcache.model.keys import validate_store_key, validated_keys
from mcache.sansio.steps import Steps
from mcache.stores.redis import lua

__all__ = ["Command", "Pipelined", "RedisSteps", "Scripted"]


@dataclass(slots=True)
class Command:
    """One Redis command of a store's steps: ``call(client)`` on the primary or the reader."""

    call: Callable[[Any], Any]
    key: str = ""
    reader: bool = False


@dataclass(slots=True)
class Scripted:
    """One of :mod:`mcache.stores.redis.lua`'s scripts, run with ``keys`` and ``args``
    (``EVALSHA``)."""

    source: str
    keys: list[Any]
    args: list[Any]
    key: str = ""


@dataclass(slots=True)
class Pipelined:
    """Several commands in one round trip: ``fill(pipeline)`` queues them."""

    fill: Callable[[Any], None]
    reader: bool = False


class RedisSteps:
    """The :class:`~mcache.contract.store.Store` contract on Redis, as steps (see the module)."""

    max_value_size: int
    _flush_options: dict[str, Any] = {}

    def get_steps(self, key: str, reader: bool = True) -> Steps[bytes | NoValueType]:
        validate_store_key(key)
        value = yield Command(lambda client: client.get(key), key, reader)
        return NO_VALUE if value is None else value

    def get_many_steps(self, keys: Iterable[str]) -> Steps[dict[str, bytes]]:
        keys = validated_keys(keys)
        if not keys:
            return {}
        values = yield Command(lambda client: client.mget(keys), reader=True)
        return {k: v for k, v in zip(keys, values, strict=True) if v is not None}

    def get_many_claiming_steps(
        self, keys: list[str], claim: StaleClaim
    ) -> Steps[dict[str, bytes]]:
        for key in (*keys, claim.lock_key):
            validate_store_key(key)
        arguments = [claim.token, claim.window_ms, claim.lock_ms]
        *values, outcome = yield Scripted(lua.READ_CLAIMING, [*keys, claim.lock_key], arguments)
        claim.outcome = None if outcome == 0 else outcome == 1
        return {k: v for k, v in zip(keys, values, strict=True) if v is not None}

    def get_many_expiring_steps(
        self, keys: Iterable[str]
    ) -> Steps[dict[str, tuple[bytes, int | None]]]:
        keys = validated_keys(keys)
        if not keys:
            return {}

        def fill(pipe: Any) -> None:
            for key in keys:
                pipe.get(key)
                pipe.pttl(key)

        replies = yield Pipelined(fill)
        found: dict[str, tuple[bytes, int | None]] = {}
        for key, value, left_ms in zip(keys, replies[::2], replies[1::2], strict=True):
            if value is not None:
                found[key] = (value, 0 if left_ms < 0 else max(1, -(-left_ms // 1000)))
        return found

    def set_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[None]:
        yield from self._written_steps(key, value, ttl, only_over=False)

    def replace_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        """``SET … XX``: only over an existing key (a negative ``ttl`` deletes it)."""
        return (yield from self._written_steps(key, value, ttl, only_over=True))

    def _written_steps(self, key: str, value: bytes, ttl: int, only_over: bool) -> Steps[bool]:
        """``SET`` (``XX`` with ``only_over``: over an existing key only), or a ``DEL`` for a
        negative ``ttl``; return whether it wrote or deleted. A value over the limit takes
        the key away first, as memcached does, then raises."""
        validate_store_key(key)
        if len(value) > self.max_value_size:
            yield Command(lambda client: client.delete(key), key)
            check_size(key, value, self.max_value_size)
        if ttl < 0:
            return bool((yield Command(lambda client: client.delete(key), key)))
        expiry = ttl or None
        written = Command(lambda client: client.set(key, value, ex=expiry, xx=only_over), key)
        return bool((yield written))

    def set_many_steps(self, items: Mapping[str, bytes], ttl: int = 0) -> Steps[list[str]]:
        failed = [k for k, v in items.items() if len(v) > self.max_value_size]
        validated_keys(items)

        def fill(pipe: Any) -> None:
            for key, value in items.items():
                if key in failed or ttl < 0:
                    pipe.delete(key)
                else:
                    pipe.set(key, value, ex=ttl or None)

        if items:
            yield Pipelined(fill)
        return failed

    def add_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        if ttl < 0:
            return not (yield Command(lambda client: client.exists(key), key))
        added = yield Command(lambda client: client.set(key, value, ex=ttl or None, nx=True), key)
        return bool(added)

    def append_steps(self, key: str, value: bytes) -> Steps[bool]:
        return (yield from self._joined_steps(key, value, lua.APPEND, "appending to"))

    def prepend_steps(self, key: str, value: bytes) -> Steps[bool]:
        return (yield from self._joined_steps(key, value, lua.PREPEND, "prepending to"))

    def _joined_steps(self, key: str, value: bytes, script: str, doing: str) -> Steps[bool]:
        """Run ``lua.APPEND`` or ``lua.PREPEND``: they never create the key, and refuse to
        grow it past ``max_value_size``."""
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        outcome = yield Scripted(script, [key], [value, self.max_value_size], key)
        if outcome == -1:
            raise ValueTooLarge(f"{doing} {key!r} would exceed max_value_size")
        return outcome == 1

    def incr_steps(self, key: str, delta: int, kind: str = "incr") -> Steps[int | None]:
        """Count ``key`` up (``kind`` "incr") or down ("decr") with the script that keeps
        memcached's semantics."""
        validate_store_key(key)
        check_delta(delta)
        return _count(
            (yield Scripted(lua.DECR if kind == "decr" else lua.INCR, [key], [delta], key))
        )

    def incr_many_steps(self, deltas: Mapping[str, int]) -> Steps[dict[str, int | None]]:
        for key, delta in deltas.items():
            validate_store_key(key)
            check_delta(delta)

        def fill(pipe: Any) -> None:
            for key, delta in deltas.items():
                # EVAL, not EVALSHA: the (short) script travels with the command, which
                # every pipeline takes (a cluster's refuses EVALSHA; an asyncio one's
                # cannot load scripts first).
                pipe.execute_command("EVAL", lua.INCR, 1, key, delta)

        results = (yield Pipelined(fill)) if deltas else []
        return dict(zip(deltas, map(_count, results), strict=True))

    def pfadd_steps(self, key: str, member: bytes, ttl: int) -> Steps[bool]:
        validate_store_key(key)
        return bool((yield Scripted(lua.PFADD, [key], [member, ttl], key)))

    def pfcount_steps(self, keys: list[str]) -> Steps[int]:
        validated_keys(keys)
        if not keys:
            return 0
        return int((yield Command(lambda client: client.pfcount(*keys))))

    def gets_steps(self, key: str) -> Steps[tuple[bytes | NoValueType, CasToken | None]]:
        # From the primary even with replica reads: the token must be the current value's.
        value = yield from self.get_steps(key, reader=False)
        if value is NO_VALUE:
            return NO_VALUE, None
        return value, hashlib.sha1(value).hexdigest()

    def cas_steps(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> Steps[bool]:
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        if not isinstance(token, str):
            return False
        return bool((yield Scripted(lua.CAS, [key], [token, value, ttl], key)))

    def delete_steps(self, key: str) -> Steps[bool]:
        validate_store_key(key)
        return bool((yield Command(lambda client: client.delete(key), key)))

    def delete_many_steps(self, keys: Iterable[str]) -> Steps[None]:
        keys = validated_keys(keys)
        if keys:
            yield Command(lambda client: client.delete(*keys))

    def touch_steps(self, key: str, ttl: int) -> Steps[bool]:
        validate_store_key(key)
        if ttl < 0:
            return (yield from self.delete_steps(key))
        if ttl == 0:
            return bool((yield Scripted(lua.PERSIST, [key], [], key)))
        return bool((yield Command(lambda client: client.expire(key, ttl), key)))

    def flush_steps(self) -> Steps[None]:
        """Empty this store's database (``FLUSHDB``), not the whole server; a cluster's
        every primary (their replicas follow)."""
        yield Command(lambda client: client.flushdb(**self._flush_options))


def _count(reply: bytes | None) -> int | None:
    """A count as the INCR and DECR scripts answer it: the stored string (exact, as a Lua
    number above 2**53 is not), or None for a missing key."""
    return None if reply is None else int(reply)
