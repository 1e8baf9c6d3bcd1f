"""The site of the composition contract: its cache and the builders its pages call.

Web processes and queue workers import this module; the environment they are
started with says the cell (``MCACHE_CELL_*``), so each makes the same cache
as a site's processes do: ``alias`` through Django's ``CACHES``, every other
store by URL. Each builder counts in the store the builds it begins
(``attempts:<rule>:<n>``) and finishes (``builds:<rule>:<n>``), and returns
which process built it and whether it was told to read the primary database.
A rule makes its keys slow or failing with the store flags ``slow:<rule>``
and ``fail:<rule>``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from mcache import Cache, read_primary

BUILD_SECONDS = 0.1


def _make_cache() -> Cache:
    if os.environ.get("MCACHE_CELL_STORE") == "alias":
        import django

        django.setup()
        from django.core.cache import caches

        return caches["composition"].mcache  # type: ignore[no-any-return]
    refresher = os.environ.get("MCACHE_CELL_REFRESHER", "sync")
    near = os.environ.get("MCACHE_CELL_NEAR_TTL")
    return Cache(
        os.environ.get("MCACHE_CELL_URL", "memory://"),
        namespace=os.environ.get("MCACHE_CELL_NAMESPACE", "composition"),
        name="composition",
        refresh="sync" if refresher == "sync" else "background",
        refresher="thread" if refresher == "sync" else refresher,
        refresh_queue=os.environ.get("MCACHE_CELL_QUEUE") or None,
        lock_timeout=2,
        wait=3.0,
        near_ttl=float(near) if near else None,
        replication_lag=float(os.environ.get("MCACHE_CELL_LAG", "2.0")),
    )


if os.environ.get("MCACHE_CELL_REFRESHER") == "celery":
    import tests.composition.celery_app  # noqa: F401  (the app the refresher sends with)
cache = _make_cache()


def plain_key(name: str) -> str:
    """The store key of a counter or flag: in the cell's namespace, as the store is shared."""
    return f"{os.environ.get('MCACHE_CELL_NAMESPACE', 'composition')}:{name}"


def count(name: str) -> int:
    """Add one to the plain counter ``name`` in the store (created at 0); return it."""
    key = plain_key(name)
    counted = cache.store.incr(key, 1)
    if counted is None:
        cache.store.add(key, b"0", 0)
        counted = cache.store.incr(key, 1)
    return counted or 0


def _build(rule: str, number: int, part: str = "") -> str:
    """The work of every builder: count, take the rule's time, fail if told, say who."""
    count(f"attempts:{rule}:{number}")
    slow = cache.store.get(plain_key(f"slow:{rule}"))
    time.sleep(float(slow) if isinstance(slow, bytes) else BUILD_SECONDS)
    if isinstance(cache.store.get(plain_key(f"fail:{rule}")), bytes):
        raise RuntimeError(f"the database behind {rule} is down")
    built = count(f"builds:{rule}:{number}")
    return f"{rule} {number}{part} #{built} by {os.getpid()} primary={read_primary()}"


def _tags(rule: str, number: int) -> list[str]:
    return [rule]


@cache.cached(ttl=600, stale_ttl=600, tags=_tags)
def page(rule: str, number: int) -> str:
    """A page of ``rule``'s keys, stale when its tag is invalidated."""
    return _build(rule, number)


@cache.cached(ttl=600, stale_ttl=600, tags=_tags)
async def apage(rule: str, number: int) -> str:
    """:func:`page`, for the async driver."""
    return _build(rule, number)


@cache.cached(ttl=600, stale_ttl=600, tags=_tags, stale_wait=3.0)
def waited(rule: str, number: int) -> str:
    """A page whose readers wait up to 3 s for its rebuild before taking the stale value."""
    return _build(rule, number)


@cache.cached(ttl=600, stale_ttl=600, tags=_tags, stale_wait=3.0)
async def awaited(rule: str, number: int) -> str:
    """:func:`waited`, for the async driver."""
    return _build(rule, number)


@cache.cached(ttl=600, stale_ttl=600, tags=lambda rule, number: [f"{rule}-outer"])
def outer(rule: str, number: int) -> str:
    """A page that contains ``page(rule, number)``: stale whenever that part is."""
    return _build(f"{rule}-outer", number, f" [{page(rule, number)}]")


@cache.cached(ttl=600, stale_ttl=600, tags=lambda rule, number: [f"{rule}-outer"])
async def aouter(rule: str, number: int) -> str:
    """:func:`outer`, for the async driver."""
    return _build(f"{rule}-outer", number, f" [{await apage(rule, number)}]")


BUILDERS: dict[str, dict[str, Any]] = {
    "sync": {"page": page, "waited": waited, "outer": outer},
    "async": {"page": apage, "waited": awaited, "outer": aouter},
}
"""The builder a rule names, for each driver."""
