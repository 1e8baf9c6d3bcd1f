"""What replica-lag routing costs: builds, hits and routed queries, with it and without.

    python -m tests.benchmarks.bench_fresh_reads [--rounds N] [--calls N] [--markdown]

Starts one memcached on a free loopback port and kills it at the end; the
databases are two SQLite files in a temporary folder. Nothing is pinned to a
CPU; every subject is timed in alternating blocks with its anchor (ABBA).

1. **Builds and hits.** ``get_or_build`` on a cache with ``replication_lag=2``
   against the same cache with it off (the anchor): a build looks at its tag
   versions and sets the context, a hit does nothing new.
2. **Routed queries.** A primary-key ``SELECT`` through
   :class:`~flask_mcache.sqlalchemy.FreshReadSession` (which asks
   ``read_primary()`` and the model's change time, kept in the process) to the
   replica, against a plain session on the replica's engine (the anchor).
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
import time
from pathlib import Path

from flask import Flask
from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from flask_mcache import MCache
from flask_mcache.fresh_reads import fresh_reads_of
from flask_mcache.sqlalchemy import FreshReadSession
from mcache import Cache
from tests.benchmarks.common import Figure, arguments, latency_row, measure, report, table
from tests.servers import memcached_process

VALUE = {"rows": [{"n": i, "label": f"row {i:03d}"} for i in range(15)]}


class Base(DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "items"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50))


def cache_rows(url: str, rounds: int, calls: int) -> list[list[str]]:
    """Cold builds and hits, lag on against lag off."""
    lagging = Cache(url, namespace="lag", default_ttl=3600, replication_lag=2)
    plain = Cache(url, namespace="nolag", default_ttl=3600)
    for cache in (lagging, plain):
        cache.invalidate("items")  # recent: the lagging cache's builds say "primary"
    mine_keys, their_keys = itertools.count(), itertools.count()
    mine, theirs = measure(
        lambda: lagging.get_or_build(("b", next(mine_keys)), lambda: VALUE, tags=["items"]),
        lambda: plain.get_or_build(("b", next(their_keys)), lambda: VALUE, tags=["items"]),
        rounds,
        calls,
    )
    rows = [latency_row("cold build, a tag bumped just now", mine, theirs)]
    mine, theirs = measure(
        lambda: lagging.get_or_build("hit", lambda: VALUE, tags=["items"]),
        lambda: plain.get_or_build("hit", lambda: VALUE, tags=["items"]),
        rounds,
        calls,
    )
    rows.append(latency_row("hit", mine, theirs))
    return rows


def query_rows(url: str, folder: Path, rounds: int, calls: int) -> list[list[str]]:
    """A primary-key SELECT routed to the replica, against a plain session on it."""
    primary, replica = folder / "primary.db", folder / "replica.db"
    engine = create_engine(f"sqlite:///{primary}")
    Base.metadata.create_all(engine)
    with Session(engine) as db, db.begin():
        db.add_all(Item(id=i, name=f"item {i}") for i in range(100))
    with sqlite3.connect(primary) as source, sqlite3.connect(replica) as target:
        source.backup(target)
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        MCACHE_URL=url, MCACHE_NAMESPACE="route", MCACHE_REPLICA_BIND=f"sqlite:///{replica}"
    )
    MCache(app)
    routed = sessionmaker(engine, class_=FreshReadSession)
    plain = sessionmaker(create_engine(f"sqlite:///{replica}"))
    ids = itertools.cycle(range(100))
    statement = select(Item.name).where(Item.id == 1)

    def read(sessions: sessionmaker) -> object:
        with sessions() as db:
            return db.scalars(statement.where(Item.id == next(ids))).first()

    with app.app_context():
        read(routed)  # the model's tag, first seen, counts as changed now: wait the lag out
        time.sleep(2.1)
        with routed() as db:
            assert db.get_bind(Item.__mapper__, clause=statement) is fresh_reads_of(app).replica  # type: ignore[union-attr]
        mine, theirs = measure(lambda: read(routed), lambda: read(plain), rounds, calls)
    return [latency_row("SELECT by primary key, routed to the replica", mine, theirs)]


def run(rounds: int, calls: int, markdown: bool, figures_path: str | None) -> None:
    node = memcached_process().start()
    try:
        url = f"memcached://{node.address}"
        header = ["call", "median µs", "anchor median µs", "ratio"]
        builds = cache_rows(url, rounds, calls)
        print("\n**1.** get_or_build, replication_lag=2; anchor: the same cache, lag off\n")
        print(table(header, builds, markdown))
        with tempfile.TemporaryDirectory() as folder:
            queries = query_rows(url, Path(folder), rounds, calls)
        print("\n**2.** FreshReadSession; anchor: a plain session on the replica\n")
        print(table(header, queries, markdown))
    finally:
        node.kill()
    report(
        [
            Figure("build with replication_lag vs off", *builds[0][1:], "", None),
            Figure("hit with replication_lag vs off", *builds[1][1:], "", None),
            Figure("routed SELECT vs plain session", *queries[0][1:], "", None),
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
