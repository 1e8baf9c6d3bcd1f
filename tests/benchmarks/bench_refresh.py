"""Background rebuilds on the web process's threads, on Celery and on RQ, in one run.

    python -m tests.benchmarks.bench_refresh [--rounds N] [--markdown]

Starts a redis-server (the cache's store and both queues' broker), a Celery
worker and an RQ worker, and kills them at the end. Nothing is pinned.

4 web processes × 8 threads read 20 keys at once, every thread every key, in
its own order. The anchor is that burst on 20 fresh keys: plain hits. Each
contender runs the same burst on 20 stale keys, handing the rebuilds to its
refresher: the web callers must be answered as fast as hits (the stale value,
at once), each key must be rebuilt once, and a queue's rebuilds must run in
its workers. Contenders and the anchor alternate, round after round.

Keys go stale in one of two ways. *By time*: the anchor's hits read entries
fresh for one more second, and the stale burst comes once that second is
over, as a site's hot keys go stale (the readers know when: the store claims
the rebuild in the read). *Unseen*: the entries are replaced by stale ones
behind the readers' backs, as a tag bump leaves them (the first reader of each
key in a process spends a second round trip on the lock).
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from typing import Any

from mcache import Cache, Entry
from tests.benchmarks.common import Figure, arguments, report, table
from tests.queues import test_queues as scenario
from tests.queues.conftest import celery_worker, queue_env, rq_worker
from tests.queues.web import WebProcesses
from tests.servers import redis_process


@dataclasses.dataclass(frozen=True)
class Contender:
    """A refresher, how its keys went stale, and whether its worker is stopped meanwhile."""

    refresher: str
    paused: bool = False
    unseen: bool = False

    @property
    def label(self) -> str:
        how = "stale unseen" if self.unseen else "stale by time"
        if self.paused:
            return f"{self.refresher}, its worker paused during the burst, {how}"
        return f"{self.refresher} refresher, {how}"


CONTENDERS = (
    Contender("thread"), Contender("celery"), Contender("rq"),
    Contender("celery", paused=True), Contender("rq", paused=True),
    Contender("thread", unseen=True), Contender("celery", unseen=True),
    Contender("rq", unseen=True),
)  # fmt: skip
FRESH_SECONDS = 1.0
MODULE = "tests.queues.builders"


def environment(redis: str, contender: str) -> dict[str, str]:
    """The web processes' environment for one contender."""
    env = {"MCACHE_QUEUE_URL": f"redis://{redis}/0", "MCACHE_QUEUE_REFRESHER": contender}
    if contender == "celery":
        env.update(MCACHE_CELERY_BROKER=f"redis://{redis}/1", MCACHE_QUEUE_NAME="mcache-bench")
    if contender == "rq":
        env.update(MCACHE_QUEUE_NAME=f"redis://{redis}/2?queue=mcache-bench")
    return queue_env(**env)


def fresh_for_a_second(cache: Cache) -> float:
    """Store an ``"old"`` report under every key, fresh for one second and kept stale for
    ``stale_ttl`` after it, as a build would; return when (monotonic) all are stale."""
    until = cache.clock.time_ms() + int(FRESH_SECONDS * 1000)
    for number in range(scenario.KEYS):
        key = scenario.report_key(cache, MODULE, number)
        entry = Entry("old", until, 10, {})
        cache.store.set(key, cache.codec.dumps(entry.to_wire(), key), int(FRESH_SECONDS) + 600)
    return time.monotonic() + FRESH_SECONDS + 0.05


def prepare(site: Site, contender: Contender, stale: bool) -> Cache:
    """Make the keys fresh (the anchor) or stale, as ``contender`` has them go stale."""
    url, env = site.env["MCACHE_QUEUE_URL"], site.env
    if stale and contender.unseen:
        return scenario.make_stale(url, env, MODULE)  # behind the readers' backs
    cache = Cache(url, namespace=env["MCACHE_QUEUE_NAMESPACE"])
    if stale:  # the entries the anchor's readers saw are past their fresh second
        time.sleep(max(0.0, site.stale_at - time.monotonic()))
    elif contender.unseen:
        for number in range(scenario.KEYS):
            scenario.store_report(cache, MODULE, number, "old", fresh=True)
    else:
        site.stale_at = fresh_for_a_second(cache)
    return cache


def burst(site: Site, contender: Contender, stale: bool, paused: Any = None) -> dict[str, Any]:
    """One burst of a site: latencies of every read, and for stale keys how they were rebuilt.

    Not ``stale``: the anchor, every key fresh, so every read is a hit. With
    ``paused`` (a worker), that worker is stopped while the web processes read,
    and continued after: what the web side costs without a worker sharing its CPUs.
    """
    cache = prepare(site, contender, stale)
    if paused is not None:
        paused.pause(True)
    try:
        values, web_pids = site.web.burst()
    finally:
        if paused is not None:
            paused.pause(False)
    seconds = [took for _, _, took in values]
    outcome: dict[str, Any] = {"seconds": seconds, "stale answers": 0, "builds": 0}
    if stale:
        outcome["stale answers"] = sum(value == "old" for _, value, _ in values)
        reports = scenario.rebuilt(cache, MODULE)
        builders = {int(v.rsplit(" ", 1)[1]) for v in reports.values() if isinstance(v, str)}
        outcome["in workers"] = not builders & web_pids
        outcome["builds"] = sum(
            int(cache.store.get(f"builds:{n}") or 0) for n in range(scenario.KEYS)
        )
        cache.store.delete_many([f"builds:{n}" for n in range(scenario.KEYS)])
    return outcome


def ms(seconds: list[float], quantile: float) -> float:
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] * 1000


@dataclasses.dataclass
class Site:
    """One contender's web processes and the environment they were started with."""

    env: dict[str, str]
    web: WebProcesses
    stale_at: float = 0.0
    """When (monotonic) the entries its readers last saw fresh go stale by time."""


def run(rounds: int, markdown: bool, figures_path: str | None) -> None:
    redis = redis_process().start()
    with contextlib.ExitStack() as running:
        running.callback(redis.kill)
        celery = celery_worker(environment(redis.address, "celery"), "mcache-bench").start()
        running.callback(celery.stop)
        rq = environment(redis.address, "rq")
        rq_queue = rq_worker(rq, f"redis://{redis.address}/2", "mcache-bench").start()
        running.callback(rq_queue.stop)
        workers = {"celery": celery, "rq": rq_queue}
        sites = {}
        for contender in CONTENDERS:
            env = environment(redis.address, contender.refresher)
            web = WebProcesses(env, scenario.PROCESSES, scenario.THREADS, scenario.KEYS)
            sites[contender] = Site(env, running.enter_context(web))
        hits: list[float] = []
        found = {c: {"seconds": [], "builds": [], "ok": True} for c in CONTENDERS}
        for round_number in range(rounds + 1):  # round 0 warms the processes up: not counted
            for contender in CONTENDERS if round_number % 2 else reversed(CONTENDERS):
                # A/B: a burst of hits before each contender's burst, in the same processes
                anchor = burst(sites[contender], contender, stale=False)
                paused = workers[contender.refresher] if contender.paused else None
                outcome = burst(sites[contender], contender, stale=True, paused=paused)
                if round_number == 0:
                    continue
                hits += anchor["seconds"]
                data = found[contender]
                data["seconds"] += outcome["seconds"]
                data["builds"].append(outcome["builds"])
                data["ok"] &= outcome["in workers"] or contender.refresher == "thread"
                data["ok"] &= outcome["stale answers"] == len(outcome["seconds"])
    rows = [["plain hits (anchor)", f"{ms(hits, 0.5):.1f}", f"{ms(hits, 0.99):.1f}"] + [""] * 3]
    ratios = {}
    for contender, data in found.items():
        ratios[contender] = ms(data["seconds"], 0.99) / ms(hits, 0.99)
        per_key = statistics.mean(data["builds"]) / scenario.KEYS
        where = "web process" if contender.refresher == "thread" else "workers"
        rows.append([
            contender.label, f"{ms(data['seconds'], 0.5):.1f}",
            f"{ms(data['seconds'], 0.99):.1f}", f"{ratios[contender]:.2f}×",
            f"{per_key:.2f}", where if data["ok"] else "WRONG",
        ])  # fmt: skip
    print(f"\n4 web processes × 8 threads × 20 keys, {rounds} rounds of alternating bursts\n")
    header = ["reads", "p50 ms", "p99 ms", "p99 ÷ hits", "builds per key", "built in"]
    print(table(header, rows, markdown))
    report(
        [
            Figure(f"stale burst p99 ÷ hit burst p99, {contender.label}",
                   f"{ms(found[contender]['seconds'], 0.99):.1f} ms", f"{ms(hits, 0.99):.1f} ms",
                   f"{ratios[contender]:.2f}×", "≤ 1.5×", ratios[contender] <= 1.5)
            for contender in CONTENDERS
        ],
        figures_path,
    )  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run(args.rounds, args.markdown, args.figures)


if __name__ == "__main__":
    main()
