"""The memcached store's meta-protocol side: the server's leases, in the read itself.

memcached 1.6's meta commands (:mod:`mcache.stores.memcached.meta`) lease a miss or a stale
item to one reader in the read, store only under that lease, and create a counter as they
count: what the text protocol does with a lock key and ``gets`` + ``cas``. This mixin is
:class:`~mcache.stores.memcached.store.MemcachedStore`'s
:class:`~mcache.contract.store.LeasesInRead` capability, as steps. Which protocol a pool
speaks is decided once, on first need, and calls wait for the answer: the two kinds of lock
do not exclude each other. See docs/explanation/memcached-protocols.md.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping

from mcache.clock import Clock
from mcache.contract.store import LeaseBid, stale_hold_ttl
from mcache.contract.store_helpers import check_delta
from mcache.errors import ConfigError, StoreUnavailable
from mcache.logs import FailureLog, logger
from mcache.memo import BoundedMemo
from mcache.model.keys import validate_store_key, validated_keys
from mcache.model.ring import Server
from mcache.sansio.steps import Steps
from mcache.stores.memcached import meta
from mcache.stores.memcached.node import Node, NodeDown
from mcache.stores.memcached.steps import NodeCall, check_deltas, expire_of

__all__ = ["PROTOCOLS", "LeasePlan", "MemcachedLeases", "leased"]

PROTOCOLS = ("auto", "meta", "text")
LeasePlan = tuple[Node, bytes, list[str], list[str]]
"""A leasing read's server, its request (the ``mg``, and a ``get`` of the keys beside it
there), those keys, and the keys elsewhere."""
PLANS_KEPT = 8192
ASK_AGAIN_SECONDS = 30.0
"""How long a pool with a server that could not be asked keeps the text protocol."""


class MemcachedLeases:
    """Leases in the read, writes under them, counters made as they count (see the module)."""

    servers: list[Server]
    replicas: int
    clock: Clock
    connect_timeout: float
    failures: FailureLog
    _dead: set[Node]
    protocol: str
    _meta: bool | None
    _meta_asked: float
    _asking: threading.Lock
    _lease_plans: BoundedMemo[tuple[object, ...], LeasePlan]

    def _init_protocol(self, protocol: str) -> None:
        if protocol not in PROTOCOLS:
            raise ConfigError(
                f"memcached: protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}"
                " (auto: the meta protocol where every server speaks it)"
            )
        self.protocol = protocol
        self._meta = False if protocol == "text" else None
        self._meta_asked = -ASK_AGAIN_SECONDS
        self._asking = threading.Lock()
        self._lease_plans = BoundedMemo(PLANS_KEPT)

    # -- which protocol -----------------------------------------------------------------------

    def speaks_meta(self) -> bool:
        """Whether every server answers the meta commands (asked once, on first need)."""
        known = self._meta
        return known if known is not None else self._ask_servers()

    @property
    def leases_in_read(self) -> bool:
        """Whether ``get_or_build`` may take the server's lease in its read: the meta
        protocol, and one copy of each key (a lease lives on one server)."""
        return self.replicas == 1 and self.speaks_meta()

    @property
    def creates_counters(self) -> bool:
        """Whether :meth:`incr_creating` counts and creates in one command."""
        return self.leases_in_read

    def _ask_servers(self) -> bool:
        with self._asking:
            if self._meta is not None:
                return self._meta
            now = self.clock.monotonic()
            if now - self._meta_asked < ASK_AGAIN_SECONDS:
                return False
            self._meta_asked = now
            return self._answered()

    def _answered(self) -> bool:
        answers = {
            s.name: meta.probe(functools.partial(self.access.open, s, self.connect_timeout))
            for s in self.servers
        }
        older = [name for name, speaks in answers.items() if speaks is False]
        if older:
            self._meta = False
            message = (
                "memcached at %s does not speak the meta protocol (memcached < 1.6?):"
                " using the text protocol for this pool"
            )
            if self.protocol == "meta":  # asked for outright: worth a warning
                self.failures.warning("memcached.protocol", message, ", ".join(older))
            else:
                logger.info(message, ", ".join(older))
            return False
        if True not in answers.values():
            return False  # nobody could be asked: the text protocol until next time
        # A server that could not be reached is down, serves no key meanwhile, and is taken
        # to be like the others (see docs/explanation/memcached-protocols.md).
        self._meta = True
        return True

    # -- reads that lease ---------------------------------------------------------------------

    def get_many_leasing_steps(self, keys: list[str], bid: LeaseBid) -> Steps[dict[str, bytes]]:
        """``get_many(keys)``, bidding in the same request for the lease on ``keys[0]``: its
        server gets an ``mg`` (``N``: a miss is leased to one reader, ``R``: so is an item
        with at most ``bid.early_ttl`` seconds left) and a ``get`` of the other keys it owns,
        in one round trip; keys on other servers are fetched after it."""
        bid.outcome, bid.unleased = None, False
        if not self._dead or self._owner_answers(keys[0]):
            lead, request, beside, elsewhere = self._lease_plan(keys, bid)
            try:
                reply, found = yield NodeCall(lead, "leased_get", (request, beside), keys[0])
            except NodeDown as down:
                lease_read_failed(lead, down)  # (if its server is marked dead: leasing nothing)
            else:
                leased(bid, keys[0], reply, found)
                if elsewhere:
                    found.update((yield from self.get_many_steps(elsewhere)))  # type: ignore[attr-defined]
                return found  # type: ignore[no-any-return]
        bid.token, bid.unleased = None, True
        return (yield from self.get_many_steps(keys))  # type: ignore[attr-defined]

    def leases_key(self, key: str) -> bool:
        """Whether a leasing read of ``key`` goes to its own server now. While that server is
        marked dead a stand-in serves the key, locked portably; once it answers again
        (probed here if its dead time is over) its lease is what every process bids for,
        and a portable lock taken on it would be a second lock of the same key."""
        return self.leases_in_read and (not self._dead or self._owner_answers(key))

    def _owner_answers(self, key: str) -> bool:
        """Whether ``key``'s own server is up, probed first if its dead time is over: then
        its lease is the one every process bids for. While it is down a stand-in serves
        the key, and the key is locked portably there (lease nothing)."""
        return bool(self._owner(key).usable())  # type: ignore[attr-defined]

    def _lease_plan(self, keys: list[str], bid: LeaseBid) -> LeasePlan:
        """Return the server of ``keys[0]``, its ``mg``, the other keys it owns and the rest:
        checked and placed once per key set and bid, as a hit asks the same every time."""
        wanted = (*keys, bid.lease_ttl, bid.early_ttl)
        plan = self._lease_plans.get(wanted)
        if plan is None:
            validated_keys(keys)
            lead = self._owner(keys[0])  # type: ignore[attr-defined]
            beside, elsewhere = [], []
            for other in keys[1:]:
                (beside if self._owner(other) is lead else elsewhere).append(other)  # type: ignore[attr-defined]
            request = meta.get(keys[0], lease_ttl=bid.lease_ttl, early_ttl=bid.early_ttl or None)
            if beside:  # on the same connection, answered right after the mg
                request += b"get " + " ".join(beside).encode() + b"\r\n"
            plan = (lead, request, beside, elsewhere)
            self._lease_plans.remember(wanted, plan)
        return plan

    def claim_stale_steps(self, key: str, token: int, bid: LeaseBid) -> Steps[None]:
        """Mark the item read with ``token`` stale and bid for its rebuild, in one request:
        for an entry stale by what only the reader knows (a bumped tag), or whose lease
        holder stopped renewing it. One reader's ``md … I C`` succeeds, the ``mg`` after it
        leases the rebuild to one reader, and later reads get the stale value (``X Z``)."""
        validate_store_key(key)
        requests = [
            meta.delete(key, stale_ttl=stale_hold_ttl(bid.lease_ttl), cas=token),
            meta.get(key, lease_ttl=bid.lease_ttl, early_ttl=bid.early_ttl or None),
        ]
        bid.outcome = None
        replies = yield from self._on_owner_steps(key, "meta", (requests,))  # type: ignore[attr-defined]
        _answer(bid, replies[1])

    def release_lease_steps(self, key: str, token: int, ttl: int | None = None) -> Steps[bool]:
        """Hand a stale item's rebuild, leased with ``token`` and not done, to the next reader;
        with ``ttl``, it lives that much more. One ``md … I T C``: the cas it bumps fails any
        renewal of the lease that lands after it, which could otherwise give the item a
        lock's life again once the release had cut it to its own."""
        validate_store_key(key)
        stale_ttl = None if ttl is None else expire_of(ttl, self.clock)
        request = meta.delete(key, stale=True, stale_ttl=stale_ttl, cas=token)
        replies = yield from self._on_owner_steps(key, "meta", ([request],))  # type: ignore[attr-defined]
        return replies[0].code == b"HD"  # type: ignore[no-any-return]

    def keep_lease_steps(self, key: str, token: int, ttl: int) -> Steps[bool]:
        """Give the item leased with ``token`` ``ttl`` more seconds, if it is still that item:
        a plain touch could cut a page rebuilt meanwhile to a lock's life, so the cas is
        checked first (``mg … c``), then touched (``mg … T``, keeping the cas); a write
        between the two shows its own cas in the touch's reply."""
        validate_store_key(key)
        check = [b"mg %s c\r\n" % key.encode()]
        replies = yield from self._on_owner_steps(key, "meta", (check,))  # type: ignore[attr-defined]
        if replies[0].cas != token:
            return False
        touch = [b"mg %s c T%d\r\n" % (key.encode(), expire_of(ttl, self.clock))]
        replies = yield from self._on_owner_steps(key, "meta", (touch,))  # type: ignore[attr-defined]
        return replies[0].cas == token  # type: ignore[no-any-return]

    # -- writes under a lease, counters -------------------------------------------------------

    def leased_write_steps(self, key: str, value: bytes, token: int, ttl: int) -> Steps[bool]:
        """Store ``value`` only if the item's cas is still ``token`` (``ms … C``); a ``ttl``
        of -1 takes the item away instead (a lease's placeholder nobody filled)."""
        validate_store_key(key)
        self._check_size(key, value)  # type: ignore[attr-defined]
        request = meta.set_(key, value, expire_of(ttl, self.clock), cas=token)
        replies = yield from self._on_owner_steps(key, "meta", ([request],))  # type: ignore[attr-defined]
        return replies[0].code == b"HD"  # type: ignore[no-any-return]

    def incr_many_creating_steps(
        self, deltas: Mapping[str, int], initial: Mapping[str, int]
    ) -> Steps[dict[str, int]]:
        """Add each delta, creating a missing key at its ``initial`` value (no expiry),
        in one pipelined batch of ``ma`` per server; return each key's new value."""
        check_deltas(deltas)
        batches = yield from self._grouped_steps(  # type: ignore[attr-defined]
            deltas, "meta", lambda group: _arithmetic_batch(group, deltas, initial)
        )
        return {
            key: int(reply.value)
            for group, replies in batches
            for key, reply in zip(group, replies, strict=True)
        }

    def incr_creating_steps(self, key: str, delta: int, ttl: int) -> Steps[int]:
        """Add ``delta`` to a counter, creating it at ``delta`` (living ``ttl`` seconds)
        if missing, in one ``ma``: the text protocol's incr, add, incr in one command."""
        validate_store_key(key)
        check_delta(delta)
        request = meta.arithmetic(key, delta, create_ttl=expire_of(ttl, self.clock), initial=delta)
        replies = yield from self._on_owner_steps(key, "meta", ([request],))  # type: ignore[attr-defined]
        return int(replies[0].value)


def _arithmetic_batch(
    group: list[str], deltas: Mapping[str, int], initial: Mapping[str, int]
) -> tuple[list[bytes]]:
    return ([meta.arithmetic(k, deltas[k], create_ttl=0, initial=initial[k]) for k in group],)


def leased(bid: LeaseBid, key: str, reply: meta.MetaReply, found: dict[str, bytes]) -> None:
    """Record in ``bid`` what the server said of its lease, and the value read in ``found``."""
    _answer(bid, reply)
    if reply.value:  # empty: the lease's placeholder, a miss
        found[key] = reply.value


def _answer(bid: LeaseBid, reply: meta.MetaReply) -> None:
    """Record in ``bid`` what the server said of its lease, in one pass (every hit does)."""
    outcome, token, left, stale = None, None, None, False
    for flag in reply.flags:
        first = flag[:1]
        if first == b"c":
            token = int(flag[1:])
        elif first == b"t":
            left = int(flag[1:])
        elif flag == b"W":
            outcome = True
        elif flag == b"Z":
            outcome = False if outcome is None else outcome
        elif flag == b"X":
            stale = True
    bid.outcome, bid.token, bid.left, bid.marked_stale = outcome, token, left, stale


def lease_read_failed(lead: Node, error: BaseException) -> None:
    """After a leasing read of a key failed on its own server: raise, unless that server is
    now marked dead (then a stand-in serves the key, and the caller locks it portably).

    A server that still answers others failed this one read, so the read is a store
    failure like any other. Locked portably there, the key would have two locks at once:
    the portable one and the lease its ``mg`` may have left to nobody (which expires as a
    dead holder's does), and two processes would build it.
    """
    if lead.usable():
        raise StoreUnavailable(f"a leasing read failed: {error}")
