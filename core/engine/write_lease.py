"""No stale sets: a build writes its entry only over what its key held when it began.

The race (composition rule 3 in ``docs/explanation/consistency.md``): a build
reads a row; a writer changes the row and deletes the cache key; the build,
still holding the old row, stores it, fresh for a whole TTL with nothing left
to invalidate it. So before the builder is called the build takes a *lease*:
the cas token of what the key holds, after adding a placeholder (a random token
every reader takes for a miss) when it holds nothing. The entry is written with
``cas`` against that token: a delete or a newer write in between wins, and the
value goes to the build's own caller only. This is memcached's lease
(Nishtala et al., NSDI 2013) built from the portable ``add``/``gets``/``cas``;
``docs/explanation/dog-pile.md`` ("No stale sets") compares it with a tombstone.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from mcache.contract.store import NO_VALUE, CasToken, NoValueType, Store
from mcache.model.codec import Codec
from mcache.model.entry import placeholder
from mcache.randomness import RandomSource
from mcache.sansio.steps import Pause, Steps, StoreCall

__all__ = [
    "Lease",
    "abandon_steps",
    "keep_steps",
    "own_life_left",
    "take_steps",
    "withdraw_steps",
    "write_steps",
]


@dataclass
class Lease:
    """What a key held when a build began, and the token a write must match."""

    found: bytes | NoValueType
    """The bytes the key held (``NO_VALUE``: nothing but this build's own placeholder)."""
    token: CasToken
    placed: bool
    """Whether this build put the placeholder there (to take it away if it stores nothing)."""
    held: bytes
    """The bytes under the key now: the placeholder, or what was found."""
    expires: float
    """When (on the cache's ``clock.monotonic()``) the key expires on its own; ``inf``: never,
    or unknown."""
    guard: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Keeps a keep-alive (:func:`keep_steps`) and the final write apart: both move the
    token. Taken without blocking (:func:`_guarded`), so steps that wait for it yield."""
    native: bool = False
    """The server's own lease (memcached's meta protocol, :mod:`mcache.engine.server_lease`): the
    token is the cas of the read that won it, and writes go through ``leased_write``."""
    stored: bool = False
    """Whether the build's entry was written under the lease."""
    own_expires: float | None = None
    """When the key would have expired on its own, before :func:`keep_steps` first kept it
    alive for the build; a build that stores nothing gives it back that life."""


def take_steps(
    store: Store,
    codec: Codec,
    key: str,
    ttl: int,
    expect_missing: bool,
    lifetime: Callable[[bytes], float],
    draws: RandomSource,
    now: float,
) -> Steps[Lease | None]:
    """Return the lease on ``key`` for a build starting now, or None if it cannot be had.

    ``ttl`` is the placeholder's (the entry's). A caller that found the key empty
    (``expect_missing``) adds the placeholder first: a round trip fewer, almost always;
    one that finds a stale entry past its own life puts the placeholder over it (``cas``).
    ``lifetime(found)``: the seconds what was found has left (``inf``: unknown). The
    placeholder's own life is counted as the store keeps it: on a clock of whole seconds
    (``expiry_slack``) a TTL of ``t`` may end after ``t - 1``. ``now``: the cache's
    monotonic clock, which the lease's ``expires`` is on.
    """
    found, token = (NO_VALUE, None) if expect_missing else (yield StoreCall(store, "gets", (key,)))
    placed, held = False, found
    left = math.inf if found is NO_VALUE else lifetime(found)  # type: ignore[arg-type]
    outlived = token is not None and found is not NO_VALUE and _outlived(store, left)
    if found is NO_VALUE or outlived:
        mark = codec.dumps(placeholder(draws.token(8)), key)
        method, args = ("cas", (key, mark, token, ttl)) if outlived else ("add", (key, mark, ttl))
        placed = yield StoreCall(store, method, args)
        found, token = yield StoreCall(store, "gets", (key,))  # ours, or what won the race
        held = found
        if placed and found == mark:
            found, left = NO_VALUE, (ttl - store.traits.expiry_slack if ttl else math.inf)
        else:
            placed = False
            if found is not NO_VALUE:
                left = lifetime(found)  # type: ignore[arg-type]
    if token is None or held is NO_VALUE:
        return None  # gone again at once (evicted, deleted): write nothing
    return Lease(found, token, placed, held, now + left)  # type: ignore[arg-type]


def _outlived(store: Store, left: float) -> bool:
    """Whether an entry with ``left`` seconds of estimated store life (``lifetime``) is past
    its own ``ttl + stale_ttl``: still there only because a rebuild's keep-alive gave it
    more, and that rebuild stopped (its process died), or this one would not have begun.
    A build taking its lease puts a placeholder over it, so that readers wait for this
    build rather than being served it stale (guarantee 2: stale for at most ``stale_ttl``,
    or until the rebuild under way at that moment ends)."""
    return left + store.traits.expiry_slack <= 0


def keep_steps(store: Store, key: str, lease: Lease, ttl: int, now: float) -> Steps[bool]:
    """Give the leased key ``ttl`` more seconds (from ``now``, monotonic) if it still holds
    what the lease saw; return False once it does not.

    A build outliving the key it leased would store nothing, as if a writer had deleted
    it; written back unchanged with ``cas``, a delete or a newer write still wins. While
    the build's own write is under way this turn is skipped: the write moves the token.
    ``cas`` does not return the new token, so it is read back, and taken only if the key
    still holds the same bytes: a delete and another build's placeholder in between
    would otherwise hand this build the other's token, and its write would win over them.
    """
    if not lease.guard.acquire(blocking=False):
        return True
    try:
        found, token = yield StoreCall(store, "gets", (key,))
        if token is None or found != lease.held:
            return False
        if not (yield StoreCall(store, "cas", (key, lease.held, token, ttl))):
            return False
        found, token = yield StoreCall(store, "gets", (key,))  # a rewrite gets a new cas
        if token is None or found != lease.held:
            return False  # replaced meanwhile: the old token makes the build's write fail
        lease.token = token
        if lease.own_expires is None:
            lease.own_expires = lease.expires
        lease.expires = now + ttl - store.traits.expiry_slack  # the least it lives
        return True
    finally:
        lease.guard.release()


def _guarded(lease: Lease) -> Generator[Pause, None, None]:
    """Take ``lease.guard``, yielding short pauses while a keep-alive holds it: steps never
    block a thread on it (a simulation runs many callers on one thread)."""
    while not lease.guard.acquire(blocking=False):
        yield Pause(0.001)


def write_steps(store: Store, key: str, data: bytes, lease: Lease, ttl: int) -> Steps[bool]:
    """Store ``data`` if the key still holds what the lease saw; return whether it did."""
    yield from _guarded(lease)
    try:
        method = "leased_write" if lease.native else "cas"
        lease.stored = yield StoreCall(store, method, (key, data, lease.token, ttl))
        return lease.stored
    finally:
        lease.guard.release()


def abandon_steps(store: Store, key: str, lease: Lease, now: float) -> Steps[None]:
    """The build stores nothing: take its placeholder away (if still there), or give a stale
    entry kept alive for it only the life it had of its own (``now``: monotonic).

    Kept for the build, a stale entry would outlive its ``ttl + stale_ttl`` by the
    keep-alive's lock life and renewer's turn; a failing rebuild after each would keep it
    for good.
    """
    if lease.placed:
        yield from withdraw_steps(store, key, lease)
        return
    if lease.native:
        return  # the server's own lease: its release gives the life back (ServerLease)
    left = own_life_left(lease, now)
    if left is None or lease.token is None:
        return
    if left <= 0:
        yield from withdraw_steps(store, key, lease)
        return
    yield from _guarded(lease)
    try:
        yield StoreCall(store, "cas", (key, lease.held, lease.token, left))
    finally:
        lease.guard.release()


def own_life_left(lease: Lease, now: float) -> int | None:
    """The whole seconds a key kept alive for a build has left of its own life (``now``:
    monotonic); None if it was never kept, or its life is unknown."""
    if lease.own_expires is None or lease.own_expires == math.inf:
        return None
    return math.ceil(lease.own_expires - now)


def withdraw_steps(store: Store, key: str, lease: Lease) -> Steps[None]:
    """Delete what the lease saw (a stale entry too), unless something newer replaced it:
    after a rebuild the store refused (too large), the outdated value must not stay."""
    yield from _guarded(lease)
    try:
        method = "leased_write" if lease.native else "cas"
        yield StoreCall(store, method, (key, b"", lease.token, -1))
    finally:
        lease.guard.release()
