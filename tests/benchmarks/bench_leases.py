"""get_or_build's round trips and latency per path, memcached's text protocol against its meta
protocol, in one run.

    python -m tests.benchmarks.bench_leases [--rounds N] [--calls N] [--markdown]

Part of ``bench_get_or_build``'s story (it runs this too), kept in its own file.
Starts one memcached on a free loopback port and kills it at the end.

Round trips are counted by a proxy in front of the server (``tests/memcached_proxy``),
one per request or pipelined batch the client sends, for each path of the read:

- **hit**: the entry is fresh, with one tag;
- **stale winner**: the entry is past its fresh time; this caller wins its rebuild
  and, with ``refresh="background"``, returns the stale value at once (the
  rebuild's own round trips, on the refresher, are shown apart);
- **stale loser**: another process holds the rebuild: the stale value, at once;
- **cold winner**: the key is missing; this caller builds and stores it;
- **cold waiter**: the key is missing and another process is building it (for
  30 ms); this caller waits for its entry.

Latency is timed on a direct connection (no proxy), each path's calls for the
two protocols alternating in rounds whose order reverses each time; nothing is
pinned to a CPU. The hit's meta ÷ text ratio is the figure: the meta path must
not make the common case slower.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

from mcache import Cache, Entry
from mcache.observe.events import CallRecord, Observer
from tests.benchmarks.common import Figure, arguments, p99, report, table
from tests.core.workers import hold_build_lock
from tests.memcached_proxy import MemcachedProxy
from tests.servers import memcached_process

PROTOCOLS = ("text", "meta")
PATHS = ("hit", "stale winner", "stale loser", "cold winner", "cold waiter")
TTL, STALE_TTL = 60, 60


def _build() -> str:
    return "built"


def _slow_build() -> str:
    time.sleep(0.02)  # a background rebuild, still running when its caller has returned
    return "built"


class Paths:
    """Each path of the read, set up before and run by a call (see the module)."""

    def __init__(self, cache: Cache, writer: Cache) -> None:
        self.cache = cache
        self.writer = writer  # "another process": its own Cache, its own flights
        self.serial = 0

    def warm(self) -> None:
        """Connect both caches (and let the meta pool ask its server, once)."""
        self.prepare("hit")()
        self.writer.get_or_build(self.fresh_key(), _build, ttl=TTL)
        self.settle()

    def fresh_key(self) -> str:
        self.serial += 1
        return f"k{self.serial}"

    def put_stale(self, key: str) -> None:
        """An entry past its fresh time, kept (on the server) for its stale window."""
        store_key = self.cache.key(key)
        entry = Entry("old", self.cache.clock.time_ms() - 1000, 5, {})
        data = self.cache.codec.dumps(entry.to_wire(), store_key)
        self.cache.store.set(store_key, data, STALE_TTL - 5)

    def prepare(self, path: str) -> Callable[[], object]:
        """Set ``path`` up on a new key; return the call that runs it."""
        cache, key = self.cache, self.fresh_key()
        options = {"ttl": TTL, "stale_ttl": STALE_TTL, "tags": ["t"]}
        if path == "hit":
            cache.get_or_build(key, lambda: "value", **options)  # type: ignore[arg-type]
        elif path in ("stale winner", "stale loser"):
            self.put_stale(key)
            if path == "stale loser":
                hold_build_lock(self.writer, key, 30)
            options["refresh"] = "background"
        elif path == "cold waiter":
            threading.Thread(target=self._build_elsewhere, args=(key,), daemon=True).start()
            time.sleep(0.01)  # its lease or lock is taken
        build = _slow_build if path.startswith("stale") else _build
        return lambda: cache.get_or_build(key, build, **options)  # type: ignore[arg-type]

    def _build_elsewhere(self, key: str) -> None:
        self.writer.get_or_build(key, lambda: time.sleep(0.03) or "built", ttl=TTL)

    def settle(self) -> None:
        """Let background rebuilds and the other process's builds finish."""
        time.sleep(0.06)


class CallerTrips(Observer):
    """The store requests of the last ``get_or_build`` by the time it returned."""

    def __init__(self) -> None:
        self.last = 0

    def called(self, origin: object, call: CallRecord) -> None:
        if call.operation == "get_or_build":
            self.last = call.round_trips


def count_round_trips(address: str, protocol: str, repeats: int) -> dict[str, tuple[float, float]]:
    """Return each path's median (round trips until the caller returned, and after).

    The proxy counts every request on the wire, the call's and its background
    rebuild's alike; the cache's own count of the call's requests, taken as it
    returns, tells them apart.
    """
    host, port = address.rsplit(":", 1)
    proxy = MemcachedProxy((host, int(port)))
    try:
        url = f"memcached://{proxy.address}?protocol={protocol}"
        paths = Paths(Cache(url, namespace=f"rt{protocol}"), Cache(url, namespace=f"rt{protocol}"))
        paths.warm()
        trips = CallerTrips()
        paths.cache.observe(trips)
        counts: dict[str, tuple[float, float]] = {}
        for path in PATHS:
            caller, later = [], []
            for _ in range(repeats):
                call = paths.prepare(path)
                time.sleep(0.01)  # the proxy's threads count the set-up's requests
                before = proxy.counted()
                call()
                paths.settle()
                caller.append(trips.last)
                later.append(proxy.counted() - before - trips.last)
            counts[path] = (statistics.median(caller), statistics.median(later))
        return counts
    finally:
        proxy.close()


def latencies(address: str, rounds: int, calls: int) -> dict[tuple[str, str], list[float]]:
    """Time each path on both protocols, alternating by round (the order reversed each
    time); each call is set up, and what it leaves behind settled, outside its timing."""
    samples: dict[tuple[str, str], list[float]] = {}
    for path in PATHS:
        subjects = {}
        for protocol in PROTOCOLS:
            url = f"memcached://{address}?protocol={protocol}"
            namespace = f"lat{protocol}{path[:4]}"
            subjects[protocol] = Paths(
                Cache(url, namespace=namespace), Cache(url, namespace=namespace)
            )
            subjects[protocol].warm()
            samples[(path, protocol)] = []
        per = calls if path == "hit" else max(3, calls // 25)
        order = list(PROTOCOLS)
        for _round in range(rounds):
            for protocol in order:
                samples[(path, protocol)] += _timed(subjects[protocol], path, per)
            order.reverse()
    return samples


def _timed(paths: Paths, path: str, calls: int) -> list[float]:
    """Return ``calls`` timings (µs) of ``path``'s get_or_build alone."""
    clock = time.perf_counter_ns
    timings = []
    hit = paths.prepare("hit") if path == "hit" else None
    for _ in range(calls):
        call = hit or paths.prepare(path)
        start = clock()
        call()
        timings.append((clock() - start) / 1000)
        if hit is None:
            paths.settle()
    return timings


def run(rounds: int, calls: int, markdown: bool, figures_path: str | None) -> list[Figure]:
    node = memcached_process().start()
    try:
        trips = {p: count_round_trips(node.address, p, 5) for p in PROTOCOLS}
        timed = latencies(node.address, rounds, calls)
    finally:
        node.kill()
    rows = []
    for path in PATHS:
        row = [path]
        for protocol in PROTOCOLS:
            caller, later = trips[protocol][path]
            row.append(f"{caller:g}" + (f" (+{later:g} later)" if later else ""))
        for protocol in PROTOCOLS:
            row.append(f"{statistics.median(timed[(path, protocol)]):.0f}")
        rows.append(row)
    head = "### " if markdown else ""
    print(f"{head}Round trips and latency per path, text ÷ meta protocol (one memcached)\n")
    header = ["path", "round trips, text", "round trips, meta", "p50 µs, text", "p50 µs, meta"]
    print(table(header, rows, markdown))
    print(
        "\nLatency: the call alone (its set-up and what it leaves running are not timed);"
        " a cold winner's includes its build (a return), a cold waiter's the other"
        " process's 30 ms build. Requests after the return are the background rebuild's, or"
        " the other process's build."
    )
    text_hit, meta_hit = (timed[("hit", p)] for p in PROTOCOLS)
    hit_ratio = statistics.median(meta_hit) / statistics.median(text_hit)
    cold = trips["meta"]["cold winner"][0]
    stale = trips["meta"]["stale winner"][0]
    figures = [
        Figure(
            "get_or_build cold winner, round trips before its build's value returns (meta)",
            f"{cold:g}",
            f"{trips['text']['cold winner'][0]:g} (text)",
            "",
            "2 + build",
            cold <= 2,
        ),
        Figure(
            "get_or_build stale winner, round trips before it returns (meta, background)",
            f"{stale:g}",
            f"{trips['text']['stale winner'][0]:g} (text)",
            "",
            "1",
            stale <= 1,
        ),
        Figure(
            "get_or_build tagged hit, meta ÷ text protocol (p50)",
            f"{statistics.median(meta_hit):.0f} µs (p99 {p99(meta_hit):.0f})",
            f"{statistics.median(text_hit):.0f} µs (p99 {p99(text_hit):.0f})",
            f"{hit_ratio:.2f}×",
            "≤ 1.05× (unchanged or faster)",
            hit_ratio <= 1.05,
        ),
    ]
    report(figures, figures_path)
    return figures


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    run(args.rounds, args.calls, args.markdown, args.figures)


if __name__ == "__main__":
    main()
