"""The durable stores against Django's DatabaseCache on the same databases, in one run.

    python -m tests.benchmarks.bench_durable [--rounds 6] [--calls 1000] [--markdown]

Starts its own PostgreSQL (a throwaway cluster made by ``initdb`` on a free
loopback port), memcached and an SQLite file, and configures Django in this
process with both databases. For each database it times get (hit), set, add
(of a present key, so refused) and incr of a ~1 KB value through Django's cache
API: mcache's backend on ``LOCATION "db:<alias>"`` against Django's
``DatabaseCache`` on the same database and driver (a router sends each cache
table to its database), alternating in ABBA rounds, nothing pinned. Then what
the durable tier is for: a ``get_or_build`` on memcached over PostgreSQL right
after memcached was flushed (the entry comes back from PostgreSQL and is copied
to memcached) against the build it saves (a report query: an aggregate over
200,000 rows in PostgreSQL). Last, reads of a PostgreSQL store while its sweep
deletes 100,000 expired rows, against the same reads with nothing to sweep.
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from typing import Any
from urllib.parse import urlencode

from tests.benchmarks.common import Figure, arguments, measure, p99, report, table
from tests.servers import django_postgres, memcached_process, postgres_bindir, postgres_process

VALUE = {"title": "A post", "body": "x" * 900, "tags": ["a", "b"], "views": 12}
TABLES = {"django_cache_pg": "default", "django_cache_lite": "lite"}
DATABASES = {"PostgreSQL": ("default", "pg"), "SQLite": ("lite", "lite")}
REPORT_SQL = "SELECT count(*), sum(n % 7) FROM generate_series(1, 200000) AS n"


class CacheTableRouter:
    """Send each DatabaseCache table to its database (Django's cache has no database option)."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return TABLES.get(model._meta.db_table)

    db_for_write = db_for_read

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        model = hints.get("model")
        if model is not None and model._meta.db_table in TABLES:
            return TABLES[model._meta.db_table] == db
        return None


def configure(pg_port: int, sqlite_path: str) -> None:
    """Configure Django with both databases and the four caches, and make the tables."""
    import django
    from django.conf import settings
    from django.core.management import call_command

    mcache = "django_mcache.backend.MCacheBackend"
    database_cache = "django.core.cache.backends.db.DatabaseCache"
    settings.configure(
        SECRET_KEY="benchmark-only",  # mcache signs values with a key derived from it
        DATABASES={
            "default": django_postgres(pg_port),
            "lite": {"ENGINE": "django.db.backends.sqlite3", "NAME": sqlite_path},
        },
        CACHES={
            "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
            "mcache_pg": {"BACKEND": mcache, "LOCATION": "db:default"},
            "mcache_lite": {"BACKEND": mcache, "LOCATION": "db:lite"},
            "django_pg": {"BACKEND": database_cache, "LOCATION": "django_cache_pg"},
            "django_lite": {"BACKEND": database_cache, "LOCATION": "django_cache_lite"},
        },
        DATABASE_ROUTERS=[f"{__name__}.CacheTableRouter"],
        INSTALLED_APPS=["django_mcache"],
        USE_TZ=True,
    )
    django.setup()
    for alias in ("default", "lite"):
        call_command("createcachetable", database=alias, verbosity=0)
    call_command("mcache_createtable", verbosity=0, stdout=io.StringIO())


def operations(mine: Any, theirs: Any) -> dict[str, tuple[Any, Any]]:
    """Pair each cache call on mcache's backend with the same call on Django's."""
    for cache in (mine, theirs):
        cache.set("bench:get", VALUE, 600)
        cache.set("bench:add", VALUE, 600)
        cache.set("bench:n", 0, 600)
    return {
        "get (hit)": (lambda: mine.get("bench:get"), lambda: theirs.get("bench:get")),
        "set": (
            lambda: mine.set("bench:set", VALUE, 600),
            lambda: theirs.set("bench:set", VALUE, 600),
        ),
        "add (present: refused)": (
            lambda: mine.add("bench:add", VALUE, 600),
            lambda: theirs.add("bench:add", VALUE, 600),
        ),
        "incr": (lambda: mine.incr("bench:n"), lambda: theirs.incr("bench:n")),
    }


def run_databases(rounds: int, calls: int) -> list[list[Any]]:
    """Time every operation on both databases; return rows of figures."""
    from django.core.cache import caches

    rows = []
    for database, (_alias, suffix) in DATABASES.items():
        ops = operations(caches[f"mcache_{suffix}"], caches[f"django_{suffix}"])
        for op, (subject, anchor) in ops.items():
            mine, theirs = measure(subject, anchor, rounds, calls)
            rows.append([database, op, mine, theirs])
    return rows


def run_tiered(memcached: str, pg_url: str, rounds: int) -> tuple[list[float], list[float]]:
    """A get_or_build refilled from PostgreSQL after memcached was flushed, and the build."""
    import psycopg

    from mcache import Cache
    from mcache.stores import from_url

    store = from_url("tiered://?" + urlencode({"hot": memcached, "cold": pg_url}))
    cache = Cache(store)
    connection = psycopg.connect(pg_url, autocommit=True)

    def build() -> object:
        return connection.execute(REPORT_SQL).fetchone()

    refills: list[float] = []
    builds: list[float] = []
    for number in range(rounds * 10):
        key = f"report:{number}"
        started = time.perf_counter()
        cache.get_or_build(key, build, ttl=3600, tags=["reports"])
        builds.append((time.perf_counter() - started) * 1e6)
        store.hot.flush()
        started = time.perf_counter()
        cache.get_or_build(key, build, ttl=3600, tags=["reports"])
        refills.append((time.perf_counter() - started) * 1e6)
    connection.close()
    store.close()
    return refills, builds


def run_sweep(pg_url: str) -> tuple[list[float], list[float], dict[str, int]]:
    """Reads with nothing to sweep, then reads while 100,000 expired rows are swept."""
    import threading

    import psycopg

    from mcache.stores import from_url

    store = from_url(pg_url, table="mcache_sweep", sweep_thread=False)
    store.set("live", b"v" * 1000, 3600)

    def reads(until: threading.Event | None, count: int = 2000) -> list[float]:
        taken: list[float] = []
        while (until is None and len(taken) < count) or (until is not None and not until.is_set()):
            started = time.perf_counter()
            store.get("live")
            taken.append((time.perf_counter() - started) * 1e6)
        return taken

    idle = reads(None)
    past = store.now_ms() - 3_600_000
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO mcache_sweep SELECT 'old:' || n, 'x'::bytea, n, %s, 0, 10"
            " FROM generate_series(1, 100000) AS n",
            (past,),
        )
    done = threading.Event()
    outcome: dict[str, int] = {}
    sweeper = threading.Thread(target=lambda: (outcome.update(store.upkeep.sweep()), done.set()))
    sweeper.start()
    during = reads(done)
    sweeper.join()
    store.close()
    return idle, during, outcome


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    bindir = postgres_bindir()
    if bindir is None:
        raise SystemExit("bench_durable needs PostgreSQL's initdb (apt-get install postgresql)")
    postgres = postgres_process(bindir).start(timeout=30)
    memcached = memcached_process().start()
    workdir = tempfile.mkdtemp(prefix="mcache-bench-durable-")
    try:
        from tests.conftest import wait_for_postgres

        pg_url = f"postgresql://postgres@{postgres.address}/postgres"
        wait_for_postgres(pg_url)
        configure(postgres.port, f"{workdir}/lite.db")
        rows = run_databases(args.rounds, args.calls)
        refills, builds = run_tiered(f"memcached://{memcached.address}", pg_url, args.rounds)
        idle, during, swept = run_sweep(pg_url)
    finally:
        postgres.kill()
        memcached.kill()
    print_tables(rows, refills, builds, args.markdown)
    print("\n**3.** Reads of a PostgreSQL store while its sweep deletes 100,000 expired rows\n")
    sweep_cells = [
        [name, str(len(taken)), f"{statistics.median(taken):.1f}", f"{p99(taken):.1f}"]
        for name, taken in (("nothing to sweep", idle), ("during the sweep", during))
    ]
    print(table(["reads", "count", "median µs", "p99 µs"], sweep_cells, args.markdown))
    print(f"\nswept: {swept.get('expired', 0):,} rows in {swept.get('batches', 0)} batches")
    report(figures(rows, refills, builds), args.figures)


def print_tables(
    rows: list[list[Any]], refills: list[float], builds: list[float], markdown: bool
) -> None:
    header = ["database", "operation", "mcache p50 µs", "p99 µs", "DatabaseCache p50 µs",
              "p99 µs", "ratio"]  # fmt: skip
    cells = [
        [database, op, f"{statistics.median(m):.1f}", f"{p99(m):.1f}",
         f"{statistics.median(t):.1f}", f"{p99(t):.1f}",
         f"{statistics.median(m) / statistics.median(t):.2f}×"]
        for database, op, m, t in rows
    ]  # fmt: skip
    print("\n**1.** Django's cache API on each database: mcache db:<alias> vs DatabaseCache\n")
    print(table(header, cells, markdown))
    print("\n**2.** memcached over PostgreSQL: a read after memcached was flushed vs the build\n")
    tier_cells = [
        ["get_or_build, entry refilled from PostgreSQL", f"{statistics.median(refills):.1f}",
         f"{p99(refills):.1f}"],
        ["the build it saves (an aggregate over 200,000 rows)", f"{statistics.median(builds):.1f}",
         f"{p99(builds):.1f}"],
    ]  # fmt: skip
    print(table(["read", "median µs", "p99 µs"], tier_cells, markdown))


def figures(rows: list[list[Any]], refills: list[float], builds: list[float]) -> list[Figure]:
    found = []
    for database, op, mine, theirs in rows:
        if op != "get (hit)":
            continue
        ratio = statistics.median(mine) / statistics.median(theirs)
        found.append(
            Figure(
                f"db:<alias> get ÷ Django DatabaseCache get, {database}",
                f"{statistics.median(mine):.1f} µs",
                f"{statistics.median(theirs):.1f} µs",
                f"{ratio:.2f}×",
                "≤ 0.8×",
                ratio <= 0.8,
            )
        )
    refill, build = statistics.median(refills), statistics.median(builds)
    found.append(
        Figure(
            "memcached flushed: entry back from PostgreSQL ÷ its build",
            f"{refill:.1f} µs",
            f"{build:.1f} µs (build)",
            f"{refill / build:.2f}×",
            "",
            None,
        )
    )
    return found


if __name__ == "__main__":
    main()
