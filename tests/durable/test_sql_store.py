"""The durable stores' own duties: the sweep, the size bound, the schema, outages."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time

import psycopg
import pytest

from mcache import Cache
from mcache.clock import FakeClock
from mcache.errors import StoreUnavailable
from mcache.stores import from_url
from mcache.stores.sql.dialects import SCHEMA_KEY
from mcache.stores.sql.postgres import PostgresConnector
from mcache.stores.sql.sqlite import SqliteConnector
from mcache.stores.sql.store import SqlStore

EXPIRED_ROWS = 100_000


def _fill_expired(url: str, store: SqlStore) -> None:
    """Write EXPIRED_ROWS rows that expired an hour ago, in one statement."""
    past = store.now_ms() - 3_600_000
    table = store.dialect.table
    if url.startswith("postgresql"):
        sql = (
            f"INSERT INTO {table} SELECT 'old:' || n, 'x'::bytea, n, {past}, 0, 10"
            f" FROM generate_series(1, {EXPIRED_ROWS}) AS n"
        )
        with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
            connection.execute(sql)
    else:
        sql = (
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
            f" WHERE i < {EXPIRED_ROWS}) INSERT INTO {table}"
            f" SELECT 'old:' || i, x'78', i, {past}, 0, 10 FROM n"
        )
        connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        connection.execute(sql)
        connection.close()


@pytest.fixture(params=["postgres", "sqlite"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def _store(url: str, **options: object) -> SqlStore:
    store = from_url(url, **options)
    assert isinstance(store, SqlStore)
    return store


def test_expired_rows_are_swept_in_bounded_batches_while_reads_go_on(url: str) -> None:
    # A table of its own: the sweep threads of earlier tests' stores, still running on the
    # shared "mcache" table (dropped and made again for each test), could take the sweep's
    # turn or its rows first.
    store = _store(url, sweep_batch=500, sweep_thread=False, table="mcache_swept")
    store.set("live", b"value", 600)
    _fill_expired(url, store)
    assert store.get("old:17") is not store.get("live")  # an expired row is invisible at once
    latencies: list[float] = []
    wrong: list[object] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            started = time.perf_counter()
            value = store.get("live")
            latencies.append(time.perf_counter() - started)
            if value != b"value":
                wrong.append(value)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        report = store.upkeep.sweep()
    finally:
        done.set()
        reader.join()
    assert report["expired"] == EXPIRED_ROWS
    assert report["batches"] >= EXPIRED_ROWS // 500, "every batch deletes at most sweep_batch rows"
    assert wrong == []
    assert len(latencies) > report["batches"], "reads went on between the batches"
    rows, _size, exact = store.upkeep.estimate()
    assert (rows, exact) == (1, True)
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1e6
    print(f"reads during the sweep: {len(latencies)}, p50 {p50:.0f} µs")


def test_size_bound_evicts_the_least_recently_read(url: str) -> None:
    clock = FakeClock(time.time())
    plain = _store(url)
    store = SqlStore(
        plain.connector, max_bytes=400_000, sweep_batch=100, sweep_thread=False, clock=clock
    )
    value = b"v" * 1000
    store.set_many({f"k{n}": value for n in range(1000)})  # ~1 MB, over the bound
    clock.advance(120)
    kept = [f"k{n}" for n in range(0, 1000, 10)]  # 100 keys read since
    assert len(store.get_many(kept)) == 100
    report = store.upkeep.sweep()
    assert report["marked"] == 100
    rows, size, _exact = store.upkeep.estimate()
    assert size <= 400_000, (rows, size)
    assert report["evicted"] >= 600
    assert store.get_many(kept) == dict.fromkeys(kept, value), "recently read rows stay"


def test_a_table_of_another_kind_is_named_and_refused(url: str) -> None:
    store = _store(url, table="mcache_other")
    store.connections.execute(
        "CREATE TABLE mcache_other (cache_key varchar(255) PRIMARY KEY, value text, expires int)",
        (),
    )
    with pytest.raises(StoreUnavailable, match=r"'mcache_other' .* is not an mcache table"):
        store.get("k")
    cache = Cache(store)
    assert cache.get("k", "default") == "default"  # no error page: a miss, logged


def test_a_table_of_another_schema_version_is_refused(url: str) -> None:
    store = _store(url)
    store.set("k", b"v")
    store.connections.execute(store.dialect.upsert(1), (SCHEMA_KEY, b"9", 0, 0, 2**62, 0))
    fresh = SqlStore(store.connector)
    with pytest.raises(StoreUnavailable, match="schema b'9'"):
        fresh.get("k")


def test_flush_keeps_the_schema_and_reserved_rows_stay_out_of_sight(url: str) -> None:
    store = _store(url)
    store.set_many({"a": b"1", "b": b"2"})
    store.upkeep.sweep()  # writes the upkeep marker row
    store.flush()
    assert store.upkeep.estimate()[0] == 0
    assert SqlStore(store.connector).get("a") is not None  # the schema check passes again


def test_time_left_is_told(url: str) -> None:
    store = _store(url)
    store.set("short", b"1", 30)
    store.set("forever", b"2", 0)
    found = store.get_many_expiring(["short", "forever", "missing"])
    assert found["forever"] == (b"2", 0)
    assert found["short"][0] == b"1" and 29 <= found["short"][1] <= 30
    assert "missing" not in found


def test_postgres_down_is_a_miss_logged_once_and_fails_fast(
    postgres_url: str, postgres_node, caplog: pytest.LogCaptureFixture
) -> None:
    cache = Cache(from_url(postgres_url, dead_timeout=5))
    cache.set("k", "v")
    postgres_node.kill()
    try:
        with caplog.at_level(logging.WARNING, logger="mcache"):
            results = [cache.get("k", "miss") for _ in range(50)]
            cache.set("k2", "dropped")
        assert results == ["miss"] * 50
        assert len([r for r in caplog.records if "get" in r.getMessage()]) == 1
        assert cache.store.connections.is_down(), "calls fail at once, no connect each"
    finally:
        postgres_node.restart()


def test_postgres_down_is_an_async_miss_logged_once_and_fails_fast(
    postgres_url: str, postgres_node, caplog: pytest.LogCaptureFixture
) -> None:
    """The twin's outage is the sync store's: a miss, one log line, no connect per call."""
    cache = Cache(from_url(postgres_url, dead_timeout=5))

    async def visit() -> list[str]:
        await cache.aset("k", "v")
        postgres_node.kill()
        await cache.store.asynchronous().close()  # no idle connection: the next call connects
        results = [await cache.aget("k", "miss") for _ in range(50)]
        await cache.aset("k2", "dropped")
        return results

    try:
        with caplog.at_level(logging.WARNING, logger="mcache"):
            results = asyncio.run(visit())
        assert results == ["miss"] * 50
        assert len([r for r in caplog.records if "get" in r.getMessage()]) == 1
        assert cache.store.connections.is_down(), "the failed connect marks it down for both"
    finally:
        postgres_node.restart()


def test_sqlite_has_no_twin_and_is_awaited_through_a_thread(sqlite_url: str) -> None:
    cache = Cache(sqlite_url)
    assert cache.store.asynchronous() is None, "Python's sqlite3 only blocks"

    async def visit() -> object:
        await cache.aset("k", "v", 60)
        return await cache.aget("k")

    assert asyncio.run(visit()) == "v"


def test_bad_urls_name_the_fix(tmp_path) -> None:
    from mcache.errors import ConfigError

    with pytest.raises(ConfigError, match="no database named"):
        from_url("postgresql://u@127.0.0.1:5432")
    with pytest.raises(ConfigError, match="table name"):
        from_url(f"sqlite:///{tmp_path}/c.db?table=drop;table")
    with pytest.raises(ConfigError, match="takes a file path"):
        from_url("sqlite://")
    with pytest.raises(ConfigError, match="unknown sqlite store option 'prepare'"):
        from_url(f"sqlite:///{tmp_path}/c.db", prepare=True)


def test_connectors_describe_where_without_the_password(tmp_path) -> None:
    connector = PostgresConnector("postgresql://u:secret@127.0.0.1:5432/db", "t")
    assert "secret" not in connector.location and "***" in connector.location
    assert SqliteConnector(f"{tmp_path}/c.db").location.endswith("c.db#mcache")


def test_postgres_plans_each_read_for_its_arguments(postgres_url: str) -> None:
    """A generic plan cached while the table was empty (a sequential scan) must not stay."""
    store = _store(postgres_url)
    for _ in range(10):
        store.get("k")  # past the five custom plans after which PostgreSQL may go generic
    mode = store.connections.execute("SHOW plan_cache_mode", ()).fetchone()[0]
    assert mode == "force_custom_plan"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO mcache SELECT 'r:' || n, 'x'::bytea, n, 0, 0, 10"
            " FROM generate_series(1, 50000) AS n"
        )
    store.set("k", b"v")
    plan = store.connections.execute(
        "EXPLAIN " + store.dialect.get.replace("%s", "'k'", 1).replace("%s", "0"), ()
    ).fetchall()
    assert "Index" in plan[0][0], plan
