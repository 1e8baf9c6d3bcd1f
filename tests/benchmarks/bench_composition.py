"""What composition costs: hits on pages holding cached fragments, and builds under a lease.

    python -m tests.benchmarks.bench_composition [--rounds N] [--calls N] [--markdown]

Starts three memcached on free loopback ports and kills them at the end. Nothing
is pinned to a CPU; every subject is timed in alternating blocks with its anchor
(ABBA), so drift hits both alike.

1. **Composite hits.** A page built from two cached fragments records their
   tags (composition rule 1), so a hit must check them. The process remembers
   which tags a page carried, so the hit is still one request: the entry and
   every tag copy it records, pipelined to the servers that hold them. The
   anchor is the same page with the same two tags *declared* (the rule-less
   way a user would have to write it), whose copies sit on the entry's own
   server. "First read" is a process that has never read the page: one more
   request, to learn its tags. The raw pymemcache ``get`` of as many bytes is
   there for scale.
2. **A cold build.** Composition rule 3 writes every entry by ``cas`` against a
   lease (a placeholder ``add`` and a ``gets`` on a missing key) instead of a
   plain ``set``. The anchor is Django's ``PyMemcacheCache.get_or_set`` of the
   same value, which does a ``get`` and an ``add``: what a user of Django's
   memcached backend pays for a miss today, with no lock and no lease.
"""

from __future__ import annotations

import itertools
import pickle
import statistics
from typing import Any

from pymemcache.client.base import Client

from mcache import Cache
from tests.benchmarks.common import Figure, arguments, measure, p99, report, table
from tests.servers import memcached_process

FRAGMENT = {"rows": [{"n": i, "label": f"row {i:03d}"} for i in range(15)]}
PAGE_TAGS = ["products", "categories"]


def pool(addresses: list[str]) -> str:
    return "memcached://" + ",".join(addresses)


def composite_page(cache: Cache) -> Any:
    """A page holding two cached fragments, each with a tag of its own."""

    def build() -> Any:
        parts = [
            cache.get_or_build(("fragment", tag), lambda: FRAGMENT, tags=[tag]) for tag in PAGE_TAGS
        ]
        return {"page": parts}

    return cache.get_or_build("composite", build)


def declared_page(cache: Cache) -> Any:
    """The same page with the fragments' tags declared by hand, no fragments cached."""
    return cache.get_or_build("declared", lambda: {"page": [FRAGMENT, FRAGMENT]}, tags=PAGE_TAGS)


def hit_rows(addresses: list[str], rounds: int, calls: int) -> tuple[list[list[str]], float]:
    """Return the hit table and the composite / declared ratio."""
    cache = Cache(pool(addresses), namespace="comp", default_ttl=3600)
    composite_page(cache)
    declared_page(cache)
    size = len(pickle.dumps({"page": [FRAGMENT, FRAGMENT]}, pickle.HIGHEST_PROTOCOL))
    host, port = addresses[0].rsplit(":", 1)
    raw = Client((host, int(port)), default_noreply=False, no_delay=True)
    raw.set("bench:anchor", b"v" * size)

    def first_read() -> Any:
        cache.reader.others.clear()  # a process that never read the page before
        return composite_page(cache)

    pairs = {
        "page of 2 cached fragments (their tags learned)": lambda: composite_page(cache),
        "page of 2 cached fragments, first read in a process": first_read,
        "raw pymemcache get of as many bytes, 1 node": lambda: raw.get("bench:anchor"),
    }
    anchor = lambda: declared_page(cache)  # noqa: E731
    rows, medians = [], {}
    for name, subject in pairs.items():
        mine, theirs = measure(subject, anchor, rounds, calls)
        medians[name] = statistics.median(mine) / statistics.median(theirs)
        rows.append(
            [
                name,
                f"{statistics.median(mine):.1f}",
                f"{p99(mine):.1f}",
                f"{statistics.median(theirs):.1f}",
                f"{medians[name]:.2f}×",
            ]
        )
    assert composite_page(cache) == {"page": [FRAGMENT, FRAGMENT]}
    cache.invalidate("categories")
    rebuilt = []
    cache.get_or_build("composite", lambda: rebuilt.append(1) or {"page": []})
    assert rebuilt == [1], "a fragment's tag bump reached the page"
    return rows, medians["page of 2 cached fragments (their tags learned)"]


def miss_rows(addresses: list[str], rounds: int, calls: int) -> tuple[list[list[str]], float]:
    """Return the cold-build table and the mcache / Django ratio."""
    from django.conf import settings

    if not settings.configured:
        settings.configure()
    from django.core.cache.backends.memcached import PyMemcacheCache

    cache = Cache(pool(addresses), namespace="miss", default_ttl=3600)
    django = PyMemcacheCache(addresses, {})
    mine_keys, their_keys = itertools.count(), itertools.count()
    subject = lambda: cache.get_or_build(("cold", next(mine_keys)), lambda: FRAGMENT)  # noqa: E731
    anchor = lambda: django.get_or_set(f"cold:{next(their_keys)}", FRAGMENT, 3600)  # noqa: E731
    mine, theirs = measure(subject, anchor, rounds, calls)
    ratio = statistics.median(mine) / statistics.median(theirs)
    row = [
        "cold get_or_build (lock, lease, cas) vs Django get_or_set (get, add)",
        f"{statistics.median(mine):.1f}",
        f"{p99(mine):.1f}",
        f"{statistics.median(theirs):.1f}",
        f"{ratio:.2f}×",
    ]
    return [row], ratio


def run(rounds: int, calls: int, markdown: bool, figures_path: str | None) -> None:
    nodes = [memcached_process().start() for _ in range(3)]
    try:
        addresses = [node.address for node in nodes]
        header = ["read", "median µs", "p99 µs", "anchor median µs", "ratio"]
        hits, composite = hit_rows(addresses, rounds, calls)
        print("\n**1.** Hits, 3 memcached nodes; anchor: the page with its tags declared\n")
        print(table(header, hits, markdown))
        misses, cold = miss_rows(addresses, rounds, calls)
        print("\n**2.** A cold build, 3 memcached nodes; anchor: Django get_or_set\n")
        print(
            table(["build", "median µs", "p99 µs", "anchor median µs", "ratio"], misses, markdown)
        )
    finally:
        for node in nodes:
            node.kill()
    report(
        [
            Figure("composite hit vs declared tags", f"{composite:.2f}×", "1.00×",
                   f"{composite:.2f}×", "", None),
            Figure("cold build vs Django get_or_set", f"{cold:.2f}×", "1.00×",
                   f"{cold:.2f}×", "", None),
        ],
        figures_path,
    )  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    run(args.rounds, args.calls, args.markdown, args.figures)


if __name__ == "__main__":
    main()
