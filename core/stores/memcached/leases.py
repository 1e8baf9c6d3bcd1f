"""The memcached store's meta-protocol side: the server's leases, in the read itself.

With the text protocol a build takes its lock with an ``add`` of a lock key,
reads again, writes with ``gets`` + ``cas`` and frees the lock with another
``gets`` + ``cas``. memcached 1.6 does the same in the read and the write
(:mod:`mcache.stores.memcached.meta`): ``mg … N R`` leases a miss or a stale item to one
reader, ``ms … C`` stores only under that lease, ``md … I`` marks an item stale
and hands its rebuild to the next reader, ``ma … N J`` creates a counter as it
counts. This mixin is the :class:`~mcache.contract.store.LeasesInRead` capability of
:class:`~mcache.stores.memcached.store.MemcachedStore`, written as steps like the rest of it.

Which protocol a pool speaks is decided once, on first need: ``protocol=auto``
(the default) asks every server with ``mn`` and uses the meta commands when all
of them that answer do (memcached 1.6+), the text protocol when one does not;
``meta`` and ``text`` say so outright (``meta`` still falls back, logged, when a
server does not speak it). Calls wait for the answer rather than build on the
text protocol's lock meanwhile: the two kinds of lock do not exclude each other.
When no server can be reached the question stays open (the text protocol is
used) and is asked again 30 seconds later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from mcache.contract.store import LeaseBid, stale_hold_ttl
from mcache.contract.store_helpers import check_delta
from mcache.errors import ConfigError
from mcache.logs import FailureLog, logger
from mcache.memo import BoundedMemo
from mcache.model.keys import validate_store_key
from mcache.model.ring import Server
from mcache.sansio.steps import Steps
from mcache.stores.memcached import meta
from mcache.stores.memcached.node import Node, NodeDown
from mcache.stores.memcached.steps import NodeCall, expire_of

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
        """Whether every server answers the meta commands (asked once, on first need;
        while another thread asks, this waits for its answer)."""
        known = self._meta
        return known if known is not None else self._ask_servers()

    @property
    def leases_in_read(self) -> bool:
        """Whether ``get_or_build`` may take the server's lease in its read: the meta
        protocol, and one copy of each key (a lease lives on one server). A call made
        while another thread asks the servers waits for the answer: a build on the
        text path's lock and one on the server's lease would not exclude each other."""
        return self.replicas == 1 and self.speaks_meta()

    @property
    def creates_counters(self) -> bool:
        """Whether :meth:`incr_creating` counts and creates in one command."""
        return self.leases_in_read

    def _ask_servers(self) -> bool:
        with self._asking:
            if self._meta is not None:
                return self._meta
            now = time.monotonic()
            if now - self._meta_asked < ASK_AGAIN_SECONDS:
                return False
            self._meta_asked = now
            return self._answered()

    def _answered(self) -> bool:
        answers = {s.name: meta.probe(s.host, s.port, self.connect_timeout) for s in self.servers}
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
        # A server that could not be reached is down: it serves no key meanwhile, and
        # is taken to be like the others (one that rejoins without the meta commands
        # fails its reads, and the calls fall back on building; see the docs).
        self._meta = True
        return True

    # -- reads that lease ---------------------------------------------------------------------

    def get_many_leasing_steps(self, keys: list[str], bid: LeaseBid) -> Steps[dict[str, bytes]]:
        """``get_many(keys)``, bidding in the same request for the lease on ``keys[0]``.

        The first key's server gets ``mg`` with ``N`` (a miss is leased to one
        reader) and ``R`` (so is an item with at most ``bid.early_ttl`` seconds
        left), followed on the same connection by a text ``get`` of the other keys
        it owns: one round trip. Keys on other servers are fetched after it.
        """
        bid.outcome, bid.unleased = None, False
        if self._dead:  # a stand-in may own the key: lease nothing, lock portably
            bid.token, bid.unleased = None, True
            return (yield from self.get_many_steps(keys))  # type: ignore[attr-defined]
        lead, request, beside, elsewhere = self._lease_plan(keys, bid)
        try:
            reply, found = yield NodeCall(lead, "leased_get", (request, beside), keys[0])
        except NodeDown:
            bid.token, bid.unleased = None, True
            return (yield from self.get_many_steps(keys))  # type: ignore[attr-defined]
        leased(bid, keys[0], reply, found)
        if elsewhere:
            found.update((yield from self.get_many_steps(elsewhere)))  # type: ignore[attr-defined]
        return found  # type: ignore[no-any-return]

    def _lease_plan(self, keys: list[str], bid: LeaseBid) -> LeasePlan:
        """Return the server of ``keys[0]``, its ``mg``, the other keys it owns and the
        rest: checked and placed once per key set and bid, as a hit asks the same every
        time."""
        wanted = (*keys, bid.lease_ttl, bid.early_ttl)
        plan = self._lease_plans.get(wanted)
        if plan is None:
            for key in keys:
                validate_store_key(key)
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
        """Mark the item read with ``token`` stale and bid for its rebuild, in one request.

        For an entry stale by what only the reader knows (a bumped tag), or whose
        lease holder stopped renewing it: of the readers that saw it, one ``md … I
        C`` succeeds (it also clears the server's note that a lease was given), and
        the ``mg`` right after leases the rebuild to one reader; every later read
        gets the stale value flagged (``X``) with the news that someone rebuilds it
        (``Z``). The item is held as a leased stale item is (:func:`stale_hold_ttl`).
        """
        validate_store_key(key)
        requests = [
            meta.delete(key, stale_ttl=stale_hold_ttl(bid.lease_ttl), cas=token),
            meta.get(key, lease_ttl=bid.lease_ttl, early_ttl=bid.early_ttl or None),
        ]
        bid.outcome = None
        replies = yield from self._on_owner_steps(key, "meta", (requests,))  # type: ignore[attr-defined]
        _answer(bid, replies[1])

    def release_lease_steps(self, key: str, token: int) -> Steps[bool]:
        """Hand a stale item's rebuild, leased with ``token`` and not done, to the next reader."""
        validate_store_key(key)
        request = meta.delete(key, stale=True, cas=token)
        replies = yield from self._on_owner_steps(key, "meta", ([request],))  # type: ignore[attr-defined]
        return replies[0].code == b"HD"  # type: ignore[no-any-return]

    def keep_lease_steps(self, key: str, token: int, ttl: int) -> Steps[bool]:
        """Give the item leased with ``token`` ``ttl`` more seconds, if it is still that item.

        A plain touch would reach whatever the key holds now: a page another
        caller rebuilt meanwhile would have its life cut to a lock's. So the cas
        is checked first (``mg … c``), and the touch (``mg … T``, which keeps the
        cas) follows only if it is still the lease's; a write between the two is
        the only case left, and its own cas shows in the touch's reply.
        """
        validate_store_key(key)
        check = [b"mg %s c\r\n" % key.encode()]
        replies = yield from self._on_owner_steps(key, "meta", (check,))  # type: ignore[attr-defined]
        if replies[0].cas != token:
            return False
        touch = [b"mg %s c T%d\r\n" % (key.encode(), expire_of(ttl))]
        replies = yield from self._on_owner_steps(key, "meta", (touch,))  # type: ignore[attr-defined]
        return replies[0].cas == token  # type: ignore[no-any-return]

    # -- writes under a lease, counters -------------------------------------------------------

    def leased_write_steps(self, key: str, value: bytes, token: int, ttl: int) -> Steps[bool]:
        """Store ``value`` only if the item's cas is still ``token`` (``ms … C``); a ``ttl``
        of -1 takes the item away instead (a lease's placeholder nobody filled)."""
        validate_store_key(key)
        self._check_size(key, value)  # type: ignore[attr-defined]
        request = meta.set_(key, value, expire_of(ttl), cas=token)
        replies = yield from self._on_owner_steps(key, "meta", ([request],))  # type: ignore[attr-defined]
        return replies[0].code == b"HD"  # type: ignore[no-any-return]

    def incr_many_creating_steps(
        self, deltas: Mapping[str, int], initial: Mapping[str, int]
    ) -> Steps[dict[str, int]]:
        """Add each delta, creating a missing key at its ``initial`` value (no expiry),
        in one pipelined batch of ``ma`` per server; return each key's new value."""
        for key, delta in deltas.items():
            validate_store_key(key)
            check_delta(delta)
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
        request = meta.arithmetic(key, delta, create_ttl=expire_of(ttl), initial=delta)
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
    """Record in ``bid`` what the server said of its lease (one pass over its flags:
    this runs on every hit)."""
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
