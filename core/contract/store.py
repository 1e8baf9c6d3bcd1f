"""The typed contract between the cache logic and its storage.

Every store (in-process, memcached, Redis, or a third party's) implements
:class:`Store` with memcached's semantics, and passes the one contract suite in
:mod:`mcache.testing.store_contract`. Keys are ASCII text that memcached accepts (at most 250
bytes, no whitespace or control characters); values are bytes; TTLs are whole
seconds where 0 means "no expiry" and a negative TTL means "already expired".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, Protocol, runtime_checkable

__all__ = [
    "MAX_KEY_BYTES",
    "NO_VALUE",
    "AsyncStore",
    "CasToken",
    "ClaimsStale",
    "Colocating",
    "LeaseBid",
    "LeasesInRead",
    "NoValueType",
    "StaleClaim",
    "Store",
    "StoreTraits",
    "TellsTimeLeft",
    "missing_operations",
    "stale_hold_ttl",
]


MAX_KEY_BYTES: Final = 250
"""The longest key a store must accept, in bytes: memcached's limit, which every store keeps."""


class NoValueType:
    """Type of :data:`NO_VALUE`: the answer for a miss (never ``None``, a perfectly good
    cached value)."""

    _instance: NoValueType | None = None

    def __new__(cls) -> NoValueType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NO_VALUE"

    def __reduce__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Final = NoValueType()

CasToken = object
"""Opaque token from :meth:`Store.gets`, handed back to :meth:`Store.cas`."""


@dataclass(frozen=True, slots=True)
class StoreTraits:
    """What a store can do beyond the operations every store has, declared once.

    A :class:`Cache` takes each path by its store's ``traits``, never by asking
    whether it has a method. Each true trait promises the methods named beside it
    (:class:`mcache.testing.store_contract.StoreContract` checks that); a
    third-party store declares ``traits = StoreTraits()`` and gets the portable paths.
    """

    expiry_slack: int = 0
    """Seconds sooner than its TTL a key may expire (a server counting whole seconds:
    memcached 1). Locks and leases add it to their TTL."""
    process_local: bool = False
    """Its data lives in this process alone (``memory://``): the adapters warn of it."""
    async_twin: bool = False
    """``asynchronous()`` returns its :class:`AsyncStore` twin (or None for an instance
    that has none); without, async callers reach it in a worker thread."""
    incr_many: bool = False
    """``incr_many(deltas)``: several counters in one round trip (tag bumps use it)."""
    hyperloglog: bool = False
    """``pfadd(key, member, ttl)`` and ``pfcount(keys)`` (Redis: online visitors)."""
    pushes_invalidations: bool = False
    """``invalidation_feed(prefixes, listener)``: Redis client tracking, for a near cache."""
    tiered: bool = False
    """``shared`` (the tier every process sees) and ``forget_near(key)``."""
    colocates: bool = False
    """:class:`Colocating`: tag copies kept beside the entries that read them."""
    tells_time_left: bool = False
    """:class:`TellsTimeLeft`: ``get_many_expiring(keys)``."""
    claims_stale: bool = False
    """:class:`ClaimsStale`: a stale entry's rebuild claimed in its read."""
    leases: bool = False
    """:class:`LeasesInRead`: the server's own lease won in the read, when its
    ``leases_in_read`` says the servers speak it (asked once, on first need)."""
    server_detail: bool = False
    """memcached's ``stats_detail(kind)`` and ``metadump(limit)``, for the stats commands."""


@runtime_checkable
class Store(Protocol):
    """Byte storage with memcached semantics.

    Operations raise :class:`~mcache.errors.StoreUnavailable` when the backend
    cannot be reached, :class:`~mcache.errors.InvalidKey` for a key memcached would
    refuse and :class:`~mcache.errors.ValueTooLarge` for a value over
    ``max_value_size``. They never swallow failures: the fail-open policy lives in
    :class:`mcache.Cache`, in one place.
    """

    max_value_size: int
    """Largest value (in bytes) the store accepts."""

    traits: StoreTraits
    """What it can do beyond these operations (see :class:`StoreTraits`)."""

    def get(self, key: str) -> bytes | NoValueType:
        """Return the value stored under ``key``, or ``NO_VALUE``."""

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist; missing keys are absent."""

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Store ``value`` unconditionally.

        A value over ``max_value_size`` raises ``ValueTooLarge`` and leaves the key
        empty: the old value is deleted, as memcached does, so a failed update
        never leaves an outdated value behind.
        """

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Store several values; return the keys that could not be stored."""

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store only if absent; exactly one of many concurrent callers wins."""

    def append(self, key: str, value: bytes) -> bool:
        """Append bytes to an existing value, keeping its TTL; ``False`` when the key is
        missing."""

    def prepend(self, key: str, value: bytes) -> bool:
        """Put bytes before an existing value, keeping its TTL; ``False`` when the key is
        missing."""

    def replace(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store ``value`` only if the key exists (with this ``ttl``, as :meth:`set`);
        ``False`` when it is missing. A value over ``max_value_size`` raises
        ``ValueTooLarge`` and leaves the key empty, as :meth:`set` does."""

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Atomically add ``delta`` to a decimal value; ``None`` when missing.

        Never creates the key (memcached semantics): counters that must start
        from nothing use ``add`` after a ``None``.
        """

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Atomically subtract ``delta``, flooring at 0; ``None`` when missing."""

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Return ``(value, token)`` for a later :meth:`cas`; ``(NO_VALUE, None)`` on a miss."""

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Store only if the key is unchanged since :meth:`gets` returned ``token``."""

    def delete(self, key: str) -> bool:
        """Delete ``key``; ``True`` when it existed."""

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys."""

    def touch(self, key: str, ttl: int) -> bool:
        """Give an existing key a new TTL; ``False`` when it is missing."""

    def flush(self) -> None:
        """Remove everything (on every server of the store)."""

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return memcached-style statistics, one mapping per server."""

    def close(self) -> None:
        """Release connections; the store may reconnect on next use."""


def missing_operations(store: object) -> list[str]:
    """Return the :class:`Store` operations ``store`` lacks (a store written for an older
    contract: ``prepend`` and ``replace`` joined it later), to name them in an error."""
    operations = [name for name, member in vars(Store).items() if callable(member)]
    wanted = [*Store.__annotations__, *(name for name in operations if name[0] != "_")]
    return [name for name in wanted if not hasattr(store, name)]


@runtime_checkable
class AsyncStore(Protocol):
    """:class:`Store`'s contract for an event loop: the same operations, awaited.

    Checked by the same contract suite (:class:`mcache.testing.async_driver.AsyncStoreContract`
    drives it). It never hands work to a thread, so a hit costs an ASGI server no hop.
    """

    max_value_size: int

    async def get(self, key: str) -> bytes | NoValueType: ...

    async def get_many(self, keys: Iterable[str]) -> dict[str, bytes]: ...

    async def set(self, key: str, value: bytes, ttl: int = 0) -> None: ...

    async def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]: ...

    async def add(self, key: str, value: bytes, ttl: int = 0) -> bool: ...

    async def append(self, key: str, value: bytes) -> bool: ...

    async def prepend(self, key: str, value: bytes) -> bool: ...

    async def replace(self, key: str, value: bytes, ttl: int = 0) -> bool: ...

    async def incr(self, key: str, delta: int = 1) -> int | None: ...

    async def decr(self, key: str, delta: int = 1) -> int | None: ...

    async def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]: ...

    async def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool: ...

    async def delete(self, key: str) -> bool: ...

    async def delete_many(self, keys: Iterable[str]) -> None: ...

    async def touch(self, key: str, ttl: int) -> bool: ...

    async def flush(self) -> None: ...

    async def stats(self) -> dict[str, dict[str, int | float | str]]: ...

    async def close(self) -> None:
        """Release the running event loop's connections (call it before the loop closes)."""


@runtime_checkable
class Colocating(Protocol):
    """A store spread over several servers that can place related keys together.

    It keeps a copy of each tag version on every server, so a tagged hit asks the
    entry's server alone (docs/explanation/tags.md). Copies are distinct keys that
    a bump all moves, so placement never decides correctness, provided every
    process computes the same copies: a store wrapping one must forward both methods.
    """

    def spread(self, base: str) -> tuple[str, ...]:
        """Return keys derived from ``base``, one owned by each server, ``base`` itself first."""

    def colocated(self, base: str, near: str) -> str:
        """Return the key of ``spread(base)`` served by the server that serves ``near`` now."""


@runtime_checkable
class TellsTimeLeft(Protocol):
    """A store that can say how long each value has left: a tiered store copies what it
    finds in such a cold tier to its hot tier for that long, to expire with the original."""

    def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int | None]]:
        """Return ``{key: (value, seconds left)}`` for the keys that exist (0: never
        expires; None: this store cannot tell)."""


@dataclass(slots=True)
class StaleClaim:
    """A reader's bid for a stale entry's rebuild, made in the read itself.

    ``outcome`` is set by the store: True when this reader took the lock, False when
    another holds it, None when the entry was not in its stale window (nothing tried).
    """

    lock_key: str
    token: bytes
    lock_ms: int
    window_ms: int
    outcome: bool | None = None
    read_method: ClassVar[str] = "get_many_claiming"


@runtime_checkable
class ClaimsStale(Protocol):
    """A store that can claim a stale entry's rebuild in the same round trip as its read.

    A native single-flight (``docs/explanation/memcached-protocols.md``): an entry
    with at most ``stale_ttl`` seconds left in the store is stale by time, and the
    store takes its lock (an ``add`` of the claim's token) in the read, saving the
    portable path's second round trip (the rule of memcached's ``mg … R<seconds>``).
    """

    @property
    def claims_in_read(self) -> bool:
        """Whether reads may claim: not when they go to a replica, which cannot write."""

    def get_many_claiming(self, keys: list[str], claim: StaleClaim) -> dict[str, bytes]:
        """Return ``get_many(keys)``, claiming ``keys[0]``'s rebuild if it is in its window."""


def stale_hold_ttl(lease_ttl: int) -> int:
    """The life a stale item leased for rebuilding is held to: a lock's, and as much again.

    A living holder renews it every third of its lock timeout, so a reader that finds
    less than ``lease_ttl`` left (:func:`mcache.engine.server_lease.holder_gone`)
    takes the rebuild over, with the stale value still there to serve.
    """
    return 2 * lease_ttl


@dataclass(slots=True)
class LeaseBid:
    """A read's bid for the server's lease on the entry it reads (memcached's ``mg … N R``).

    ``lease_ttl``: how long the placeholder a miss leaves lives (the build's
    lock timeout); ``early_ttl``: an entry with at most that many seconds left
    in the store is leased for rebuilding too (its stale window; 0: never).
    The store fills in the rest.
    """

    lease_ttl: int
    early_ttl: int
    outcome: bool | None = None
    """True: this reader holds the lease (``W``); False: another reader does (``Z``);
    None: no lease is in play (a plain hit)."""
    token: int | None = None
    """The cas of what was read: a write under the lease must still find it."""
    left: int | None = None
    """Seconds the item has left in the store (-1: no expiry)."""
    marked_stale: bool = False
    """The item was marked stale (``X``): an invalidation, whatever its own times say."""
    unleased: bool = False
    """The store read without leasing (its server is down and a stand-in answered):
    the portable lock decides who builds."""
    read_method: ClassVar[str] = "get_many_leasing"


@runtime_checkable
class LeasesInRead(Protocol):
    """A store whose server leases a miss or a stale entry to one reader, in the read.

    A native single-flight (``docs/explanation/memcached-protocols.md``): no lock
    key. The lease is the item's cas and guards the entry's write (``leased_write``),
    so a build whose lease an invalidation or a newer write took cannot store.
    """

    @property
    def leases_in_read(self) -> bool:
        """Whether reads may lease now (the store may ask its servers, once)."""

    def get_many_leasing(self, keys: list[str], bid: LeaseBid) -> dict[str, bytes]:
        """Return ``get_many(keys)``, bidding for the lease on ``keys[0]``."""

    def leases_key(self, key: str) -> bool:
        """Whether ``key``'s own server leases its rebuilds now (it answers): after a read
        found it down (``LeaseBid.unleased``), a lock is taken portably only while not."""

    def claim_stale(self, key: str, token: int, bid: LeaseBid) -> None:
        """Mark the entry read with ``token`` stale, held :func:`stale_hold_ttl` of
        ``bid.lease_ttl`` more seconds, and bid for its rebuild."""

    def release_lease(self, key: str, token: int, ttl: int | None = None) -> bool:
        """Hand a stale entry's lease, not used, to the next reader; with ``ttl``, the entry
        lives that many more seconds, set in the same request (so it is atomic with the
        hand-over, and a renewal of the lease arriving later no longer finds it ours)."""

    def keep_lease(self, key: str, token: int, ttl: int) -> bool:
        """Give the item ``ttl`` more seconds only if its cas is still ``token``."""

    def leased_write(self, key: str, value: bytes, token: int, ttl: int) -> bool:
        """Store only if the item's cas is still ``token``; ttl -1 removes it instead."""
