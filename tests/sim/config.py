"""What a seed chooses: the cache's options, the workload, and the faults that strike it."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field


@dataclass
class Fault:
    """One fault, at virtual time ``at``: what it is, on what, for how long."""

    kind: str
    at: float
    target: str = ""
    seconds: float = 0.0


@dataclass
class Config:
    """Everything a seed decides; printed with a failure, so a reader sees the case."""

    seed: int
    processes: int
    threads: int
    calls: int
    keys: int
    ttl: int
    stale_ttl: int
    lock_timeout: int
    wait: float
    jitter: float
    skews: list[float]
    faults: list[Fault] = field(default_factory=list)
    drop_rate: float = 0.0
    lost_reply_rate: float = 0.0
    long_builds: bool = False
    failing_builds: float = 0.0
    """The share of builds that raise; as many again return ``Uncacheable``."""
    delete_share: float = 0.0
    """The share of writes that delete the row's entry instead of bumping its tag."""
    race_builds: bool = False
    """Aim at a build under way (the first three of 0.3 s or more): its row is written
    by another process 0.1 s in, and a third process reads the key 0.1 s after that."""
    renew_at_release: bool = False
    """Aim at a release: a renewal of the same lock falls due as it begins (three times)."""
    cancel_leaders: bool = False
    """Aim at a lock just won: its caller is cancelled (as an asyncio task) before the
    answer reaches it, the first three times."""
    refuse_locks: bool = False
    """Aim at a lock attempt: the first three after a write of their row fail in the
    store, and another thread of the same process reads the key 50 ms later."""
    pages: float = 0.0
    """The share of reads that read a page over their row's entry (a nested read)."""
    late_readers: bool = False
    """Aim past an entry's life: 2 s after the ``ttl + stale_ttl`` of an entry just written
    ends, two processes read its key 50 ms apart (the first three entries written)."""
    race_pages: bool = False
    """Aim at a cold page built over a stale read of its row: other processes read the
    page 10, 30 and 60 ms later, while it is built (the first three times)."""
    transactions: bool = False
    """Some writes are made inside a transaction that reads its row's entry before it
    commits or rolls back (guarantee 4: tests/sim/transactions.py)."""
    refresh: str = "sync"
    """Who rebuilds a stale key: its reader ("sync"), the process's refresher on threads
    ("background"), or a task queue's workers ("queue", :mod:`tests.sim.queue`), while the
    reader is served stale."""
    workers: int = 1
    """With a task queue: its worker processes."""
    job_loss: float = 0.0
    """With a task queue: the share of jobs the broker loses."""
    job_duplicates: float = 0.0
    """With a task queue: the share of jobs the broker delivers twice."""
    refuse_hand_offs: bool = False
    """With a task queue: the first request of a send, its hand-off of the lock, fails in
    the store (the first three times)."""
    failing_jobs: bool = False
    """With a task queue: the first three jobs' builds store nothing (they raise, or return
    ``Uncacheable``), so the stale entry is given back its own life by a worker."""
    broker_timeout: float = 1.0
    """With a task queue: the seconds a publish to a broker that is down takes to fail (3 s:
    a client that retries past the circuit's first window, as Celery's retries do)."""
    late_duplicates: bool = False
    """With a task queue: a job whose build outlasts a lock's life and a second is
    delivered again then, while it is still built (a broker's redelivery)."""
    race_circuit: bool = False
    """With a task queue and a slow ``broker_timeout``: aim at a send under way when the
    circuit opens. The first publish the broker refuses has another process write two
    rows, and its own process read their stale entries, just before it fails, so that
    their sends fail after the window it opens has closed (the first twice)."""
    kill_workers: bool = False
    """With a task queue: the first worker to take a job is killed halfway through it
    (its job is lost with it) and restarted a second later."""
    refreshes: float = 0.0
    """The share of reads that are forced refreshes (``Cache.refresh``) instead."""
    replica_lag: float = 0.0
    """Rows' builds read a replica of the database that has each write this many seconds
    late (0: the primary alone), but for ``read_primary()``; each cache's
    ``replication_lag`` is that, with room for the hosts' clock skews."""
    outliving_builds: bool = False
    """One build in ten takes longer than its entry's ``ttl + stale_ttl``: its placeholder
    outlives its TTL only by its keep-alives."""
    race_tags: bool = False
    """Aim at a tag key just created: evict it at once and bump it from a process at
    random within the same millisecond (the race of a lost tag recreated)."""
    race_keeps: bool = False
    """Aim at a build's keep-alive of its placeholder: its rewrite's reply is slow, and
    meanwhile another process deletes the row's entry and a third reads the key, waits
    out the lock and builds (the first three times; composition rule 3)."""
    slow_releases: bool = False
    """Aim at a build's last step: the release of its row's lock is sent 0.15 s late, so its
    waiters look between the build's write and its release (the first three times)."""
    kill_holders: bool = False
    """Aim at a lock's holder: the first is killed halfway through its build (on memcached's
    lease, the holder of a stale entry's), and other processes read its key for 12 s after."""
    servers: int = 1
    """Reached by the real store (``store`` "text" or "meta"): the pool's servers, its keys
    spread over them by its ring; a crash takes one of them down."""
    store: str = "memory"
    """How the processes reach their server: "memory" (the library's memcached-semantics
    store, a store call one command), the real memcached store, its pool and its steps,
    speaking "text" or "meta" (leases) to a server that speaks the protocol, or "redis":
    the real Redis store, through redis-py, on a simulated Redis (its reads claim a stale
    entry's rebuild in a script)."""

    redis_replica_lag: float = 0.0
    """On Redis (``store`` "redis"), a replica this far behind its primary serves the plain
    reads (``get``, ``get_many``: the hits), as ``replica_reads=true`` has them; 0: none."""

    def describe(self) -> str:
        """The configuration as one line per field."""
        return "\n".join(f"  {name}: {value}" for name, value in asdict(self).items())


FAULT_KINDS = (
    "crash",
    "kill",
    "evict_tag",
    "evict_lock",
    "evict_entry",
    "pause",
    "late_renewer",
    "cancel",
)


def choose(seed: int, size: str = "small") -> Config:
    """Return the configuration ``seed`` chooses (``size``: "small" or "large")."""
    draw = random.Random(f"config:{seed}")
    large = size == "large"
    processes = draw.randint(200, 1000) if large else draw.randint(2, 4)
    skews = [draw.choice((0.0, 0.0, 0.0005, -0.0005, 0.3, -0.3)) for _ in range(processes)]
    config = Config(
        seed=seed,
        processes=processes,
        threads=1 if large else draw.randint(1, 4),
        calls=draw.randint(1, 3) if large else draw.randint(2, 6),
        keys=draw.randint(1, 3),
        ttl=draw.choice((1, 5, 30)),
        stale_ttl=draw.choice((0, 0, 5)),
        lock_timeout=draw.choice((1, 2, 5)),
        wait=draw.choice((0.5, 3.0)),
        jitter=draw.choice((0.0, 0.1)),
        skews=skews,
        long_builds=draw.random() < 0.35,
    )
    if draw.random() < 0.5:
        for _ in range(draw.randint(1, 3)):
            kind = draw.choice(FAULT_KINDS)
            target = str(draw.randrange(processes)) if kind in ("kill", "pause") else ""
            if kind.startswith("evict"):
                target = str(draw.randrange(config.keys))
            seconds = draw.choice((0.2, 1.0, 3.0, 7.0))
            config.faults.append(Fault(kind, round(draw.uniform(0.0, 4.0), 3), target, seconds))
    config.race_tags = draw.random() < 0.4
    config.refuse_locks = draw.random() < 0.25
    config.race_builds = draw.random() < 0.3
    config.cancel_leaders = draw.random() < 0.25
    config.renew_at_release = draw.random() < 0.25
    config.delete_share = draw.choice((0.0, 0.5, 1.0))
    config.failing_builds = draw.choice((0.0, 0.0, 0.1))
    if draw.random() < 0.3:
        config.drop_rate = draw.choice((0.01, 0.05))
        config.lost_reply_rate = draw.choice((0.0, 0.01, 0.05))
    config.pages = draw.choice((0.0, 0.3, 0.6))
    config.late_readers = draw.random() < 0.3
    config.race_pages = bool(config.pages) and draw.random() < 0.5
    if draw.random() < 0.15:  # one process cut off from the server, the others not
        at, seconds = round(draw.uniform(0.0, 4.0), 3), draw.choice((0.5, 2.0, 6.0))
        config.faults.append(Fault("partition", at, str(draw.randrange(processes)), seconds))
    if draw.random() < 0.15:  # a host's wall clock stepped (NTP, a VM resumed)
        at, jump = round(draw.uniform(0.0, 4.0), 3), draw.choice((-2.0, -0.5, 0.5, 2.0))
        config.faults.append(Fault("clock_jump", at, str(draw.randrange(processes)), jump))
    config.refreshes = draw.choice((0.0, 0.0, 0.1))
    config.refresh = draw.choice(("sync", "sync", "background"))
    config.store = draw.choice(("memory", "memory", "text"))
    if config.store == "text" and draw.random() < 0.5:
        config.store = "meta"  # memcached's meta protocol: the server leases rebuilds
    config.transactions = draw.random() < 0.3
    config.race_keeps = draw.random() < 0.3
    config.slow_releases = draw.random() < 0.3
    config.kill_holders = draw.random() < (0.7 if config.store == "meta" else 0.25)
    # the queue's, drawn for every seed: a run made to use a queue (run_seed's refresh)
    # plays the seed's own
    queued = draw.random() < 0.6
    config.workers = draw.randint(1, 2)
    config.job_loss = draw.choice((0.0, 0.0, 0.2))
    config.job_duplicates = draw.choice((0.0, 0.5))
    if config.job_duplicates:
        config.workers = 2  # the copies of a job taken at once
    config.kill_workers = draw.random() < 0.3
    config.refuse_hand_offs = draw.random() < 0.3
    config.failing_jobs = draw.random() < 0.4
    if draw.random() < 0.4:  # (only a run with a queue has a broker to take down)
        at, seconds = round(draw.uniform(0.0, 4.0), 3), draw.choice((1.0, 3.0, 7.0))
        config.faults.append(Fault("broker_down", at, "", seconds))
    if config.refresh == "background" and queued:
        config.refresh = "queue"
    config.outliving_builds = draw.random() < 0.2
    config.replica_lag = draw.choice((0.0, 0.0, 0.05, 0.5))
    if config.replica_lag:  # a site on replicas invalidates by tags (read-replicas.md)
        config.delete_share = 0.0
    config.servers = draw.choice((1, 1, 2, 3))
    config.broker_timeout = draw.choice((1.0, 3.0))
    config.late_duplicates = draw.random() < 0.5
    config.race_circuit = config.broker_timeout > 2 and draw.random() < 0.7
    if config.store == "memory" and draw.random() < 0.4:
        config.store = "redis"  # (drawn last: what a seed chose before stays as it was)
    lag = draw.choice((0.0, 0.0, 0.001, 0.05))
    config.redis_replica_lag = lag if config.store == "redis" else 0.0
    return config
