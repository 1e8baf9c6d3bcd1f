"""The store contract's check of a store's declared traits: each one does what it says.

Part of :class:`mcache.testing.store_contract.StoreContract` (every store's suite runs it). A
:class:`~mcache.contract.store.StoreTraits` field set to true promises methods the core
then calls without asking; here each declared trait is exercised once on the
store under test, so a store cannot declare what it does not do.
"""

from __future__ import annotations

import inspect

from mcache.contract.store import NO_VALUE, AsyncStore, LeaseBid, Store, StoreTraits

__all__ = ["TraitsContract"]


class TraitsContract:
    """Mixed into :class:`~mcache.testing.store_contract.StoreContract` (which provides the
    ``store`` fixture)."""

    def test_declared_traits_do_what_they_say(self, store: Store) -> None:
        traits = store.traits
        assert isinstance(traits, StoreTraits), "a store declares its traits"
        assert isinstance(traits.expiry_slack, int) and traits.expiry_slack >= 0
        checks = {
            "async_twin": _async_twin,
            "incr_many": _incr_many,
            "hyperloglog": _hyperloglog,
            "pushes_invalidations": _pushes_invalidations,
            "tiered": _tiered,
            "colocates": _colocates,
            "tells_time_left": _tells_time_left,
            "claims_stale": _claims_stale,
            "leases": _leases,
            "server_detail": _server_detail,
        }
        for name, check in checks.items():
            if getattr(traits, name):
                check(store)


def _async_twin(store: Store) -> None:
    twin = store.asynchronous()  # type: ignore[attr-defined]
    assert twin is None or isinstance(twin, AsyncStore), f"asynchronous() gave {twin!r}"
    if twin is not None:
        assert twin is store.asynchronous(), "one twin per store"  # type: ignore[attr-defined]


def _incr_many(store: Store) -> None:
    store.set_many({"traits:a": b"1", "traits:b": b"10"})
    counted = store.incr_many({"traits:a": 2, "traits:b": 5, "traits:none": 1})  # type: ignore[attr-defined]
    assert counted == {"traits:a": 3, "traits:b": 15, "traits:none": None}
    assert store.get("traits:none") is NO_VALUE


def _hyperloglog(store: Store) -> None:
    for member in (b"alice", b"bob", b"alice"):
        store.pfadd("traits:hll", member, 60)  # type: ignore[attr-defined]
    assert store.pfcount(["traits:hll"]) == 2  # type: ignore[attr-defined]


def _pushes_invalidations(store: Store) -> None:
    feed = store.invalidation_feed  # type: ignore[attr-defined]
    assert list(inspect.signature(feed).parameters) == ["prefixes", "listener"]


def _tiered(store: Store) -> None:
    assert isinstance(store.shared, Store)  # type: ignore[attr-defined]
    store.set("traits:near", b"v")
    store.forget_near("traits:near")  # type: ignore[attr-defined]
    assert store.get("traits:near") == b"v", "forgetting a near copy keeps the value"


def _colocates(store: Store) -> None:
    copies = store.spread("traits:tag")  # type: ignore[attr-defined]
    assert copies[0] == "traits:tag" and len(set(copies)) == len(copies)
    for key in ("traits:a", "traits:b", "traits:c"):
        assert store.colocated("traits:tag", key) in copies  # type: ignore[attr-defined]


def _tells_time_left(store: Store) -> None:
    store.set("traits:ttl", b"v", 100)
    store.set("traits:forever", b"v")
    found = store.get_many_expiring(["traits:ttl", "traits:forever", "traits:none"])  # type: ignore[attr-defined]
    value, left = found["traits:ttl"]
    assert value == b"v" and (left is None or 95 <= left <= 100), found
    assert found["traits:forever"][1] in (0, None) and "traits:none" not in found


def _claims_stale(store: Store) -> None:
    assert isinstance(store.claims_in_read, bool)  # type: ignore[attr-defined]
    assert callable(store.get_many_claiming)  # type: ignore[attr-defined]


def _leases(store: Store) -> None:
    if not store.leases_in_read:  # type: ignore[attr-defined]
        return  # servers without the meta commands: the portable lock, as every store has
    bid = LeaseBid(lease_ttl=5, early_ttl=0)
    assert store.get_many_leasing(["traits:leased"], bid) == {}  # type: ignore[attr-defined]
    assert bid.outcome is True and isinstance(bid.token, int), "a miss is leased to its reader"
    other = LeaseBid(lease_ttl=5, early_ttl=0)
    store.get_many_leasing(["traits:leased"], other)  # type: ignore[attr-defined]
    assert other.outcome is False, "and to no other"
    assert store.leased_write("traits:leased", b"v", bid.token, 60)  # type: ignore[attr-defined]
    assert store.get("traits:leased") == b"v"


def _server_detail(store: Store) -> None:
    assert isinstance(store.stats_detail("slabs"), dict)  # type: ignore[attr-defined]
    assert isinstance(store.metadump(), dict)  # type: ignore[attr-defined]
