"""The get_or_build contract, written once and run on every cell of the matrix.

Each rule is one a reader relies on (``docs/explanation/consistency.md``
states them); each runs on a real site of the cell (see ``conftest.py``):
its web processes read together, its workers rebuild, and the counts come
from the store. A rule that only means something for some cells says which
(``@applies``): a killed worker needs a queue, a near copy needs the near
cache.
"""

from __future__ import annotations

import time

from tests.composition.rules import (
    applies,
    build_number,
    built_by,
    bump,
    counts,
    fresh,
    keys,
    near_bound,
    settled,
    warm,
)
from tests.composition.web import WebProcess

KEYS = range(4)
RETRY_AFTER = 5.0
"""Seconds a queue refresher sends nothing after a refused send (then it tries again)."""
LAG = 2.0
"""The site's ``replication_lag``: a rebuild within it of a bump reads the primary."""
STALE_BUILD = 1.5
"""Seconds a stale stampede's rebuild takes: longer than any reader of its burst waits to
read on a loaded machine, so a reader served the rebuilt page was one that waited for it."""


def test_a_cold_stampede_builds_each_key_once(site) -> None:
    reads = site.web.burst(keys("cold", KEYS))
    assert len(reads) == len(site.web.all) * 4 * len(KEYS)
    for rule, number, value in reads:
        assert value.startswith(f"{rule} {number} #1 "), f"every reader got the one build: {value}"
    assert settled(site, "cold", KEYS, 1) == dict.fromkeys(KEYS, 1)


def test_a_stale_stampede_is_served_stale_and_rebuilt_once_where_the_refresher_says(site) -> None:
    warm(site, "stale", KEYS)
    site.first.ask(op="flag", name="slow:stale", value=STALE_BUILD)
    bump(site, "stale")
    reads = site.web.burst(keys("stale", KEYS))
    site.first.ask(op="flag", name="slow:stale", value=None)
    for rule, number, value in reads:
        assert value.startswith(f"{rule} {number} #"), value
        if site.cell.refresher != "sync":
            assert build_number(value) == 1, (
                "a background rebuild: every reader gets the stale page"
            )
    assert settled(site, "stale", KEYS, 2) == dict.fromkeys(KEYS, 2), "one rebuild per key"
    builders = {built_by(fresh(site, "stale", n)) for n in KEYS}
    if site.cell.queued:
        assert not builders & site.web.pids, "rebuilt by the queue's workers"
    else:
        assert builders <= site.web.pids, "rebuilt in the web processes"
    site.web.burst(keys("stale", KEYS))
    assert settled(site, "stale", KEYS, 2) == dict.fromkeys(KEYS, 2), "nothing rebuilt again"


def test_a_forced_refresh_builds_each_key_once(site) -> None:
    warm(site, "forced", KEYS)
    refreshed = site.first.ask(op="refresh", keys=[["forced", 1], ["forced", 2]])
    assert [built_by(value) for value in refreshed] == [site.first.pid] * 2, "built by the caller"
    expected = {0: 1, 1: 2, 2: 2, 3: 1}
    assert settled(site, "forced", KEYS, 1) == expected, "each forced once, nothing else rebuilt"
    reads = site.web.burst(keys("forced", KEYS))
    assert {value for _, number, value in reads if number in (1, 2)} == set(refreshed)
    assert settled(site, "forced", KEYS, 1) == expected, "and nothing rebuilt after"


def test_a_build_overtaken_by_a_delete_a_bump_or_a_newer_set_leaves_no_fresh_entry(site) -> None:
    rules = ("overtaken-delete", "overtaken-bump", "overtaken-set")
    for rule in rules:
        site.first.ask(op="flag", name=f"slow:{rule}", value=1.5)
    started = {rule: site.first.send(op="read", keys=[[rule, 0]], threads=1) for rule in rules}
    deadline = time.monotonic() + 10
    while any(counts(site, rule, [0], "attempts")[0] < 1 for rule in rules):
        assert time.monotonic() < deadline, "the builds began"
        time.sleep(0.02)
    site.last.ask(op="delete", key=["overtaken-delete", 0])
    site.last.ask(op="invalidate", tags=["overtaken-bump"])
    site.last.ask(op="set", key=["overtaken-set", 0], value="newer")
    for rule, number in started.items():
        (read,) = site.first.answer(number)
        assert read[2].startswith(f"{rule} 0 #1 "), "the builder's caller gets what it built"
    near_bound(site)
    assert fresh(site, "overtaken-delete", 0) is None, "the delete stands"
    assert fresh(site, "overtaken-bump", 0) is None, "the bump stands"
    assert fresh(site, "overtaken-set", 0) == "newer", "the newer value stands"


def test_dependencies_propagate_through_nested_entries(site) -> None:
    first = site.first.ask(op="read", keys=[["nested", 0]], threads=1, fn="outer")[0][2]
    assert "[nested 0 #1 " in first, first
    site.first.ask(op="idle")
    bump(site, "nested")  # the inner page's tag only
    assert fresh(site, "nested", 0, fn="outer") is None, "the outer page is stale too"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        site.first.ask(op="read", keys=[["nested", 0]], threads=1, fn="outer")
        site.first.ask(op="idle")
        now = fresh(site, "nested", 0, fn="outer")
        if now is not None:
            break
        time.sleep(0.1)
    assert now is not None and "[nested 0 #2 " in now, f"rebuilt over the rebuilt part: {now}"
    assert counts(site, "nested-outer", [0])[0] == 2
    assert counts(site, "nested", [0])[0] == 2


def test_a_failing_rebuild_serves_the_stale_value(site) -> None:
    warm(site, "failing", KEYS)
    site.first.ask(op="flag", name="fail:failing", value=1)
    bump(site, "failing")
    reads = site.web.burst(keys("failing", KEYS))
    assert {build_number(value) for _, _, value in reads} == {1}, "the stale page, no error"
    deadline = time.monotonic() + 10
    while min(counts(site, "failing", KEYS, "attempts").values()) < 2:
        assert time.monotonic() < deadline, "each key's rebuild was tried"
        time.sleep(0.05)
    assert counts(site, "failing", KEYS) == dict.fromkeys(KEYS, 1), "and failed"
    site.first.ask(op="flag", name="fail:failing", value=None)


def test_a_reader_with_stale_wait_gets_the_rebuilt_value(site) -> None:
    warm(site, "waiting", range(1), fn="waited")
    bump(site, "waiting")
    started = time.monotonic()
    ((_, _, value, _),) = site.first.ask(op="read", keys=[["waiting", 0]], threads=1, fn="waited")
    took = time.monotonic() - started
    assert build_number(value) == 2, f"the rebuilt value, not the stale one ({took:.2f} s)"
    assert took < 3.0, "within stale_wait"


def test_a_lock_lives_as_long_as_its_build(site) -> None:
    """A rebuild that outlasts ``lock_timeout`` (2 s) keeps its lock: nobody builds twice."""
    warm(site, "long", range(1))
    site.first.ask(op="flag", name="slow:long", value=3.0)
    bump(site, "long")
    reading = site.first.send(op="read", keys=[["long", 0]], threads=1)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:  # every other process's readers meanwhile
        site.web.burst(keys("long", range(1)), threads=2)
        time.sleep(0.3)
    site.first.answer(reading)
    site.first.ask(op="flag", name="slow:long", value=None)
    assert settled(site, "long", range(1), 2)[0] == 2
    assert counts(site, "long", [0], "attempts")[0] == 2, "one rebuild, its lock renewed"


@applies(lambda cell: cell.shared and not cell.queued)
def test_a_killed_holders_lock_frees_within_lock_timeout(site) -> None:
    doomed = WebProcess(site.env).start()
    doomed.wait_ready()
    doomed.ask(op="flag", name="slow:killed", value=30)
    doomed.send(op="read", keys=[["killed", 0]], threads=1)
    deadline = time.monotonic() + 10
    while counts(site, "killed", [0], "attempts")[0] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    doomed.kill()
    killed = time.monotonic()
    site.first.ask(op="flag", name="slow:killed", value=None)
    ((_, _, value, _),) = site.first.ask(op="read", keys=[["killed", 0]], threads=1)
    took = time.monotonic() - killed
    assert built_by(value) == site.first.pid
    assert took < 2 + 1 + 1.5, f"within lock_timeout (2 s, 1 s more on memcached): {took:.1f} s"
    assert counts(site, "killed", [0], "attempts")[0] == 2


@applies(lambda cell: cell.queued)
def test_a_killed_workers_key_is_rebuilt_once_by_a_worker(site) -> None:
    warm(site, "worker", range(1))
    site.first.ask(op="flag", name="slow:worker", value=30)
    bump(site, "worker")
    site.first.ask(op="read", keys=[["worker", 0]], threads=1)  # the stale page; a job sent
    deadline = time.monotonic() + 20
    while counts(site, "worker", [0], "attempts")[0] < 2:
        assert time.monotonic() < deadline, "a worker began the rebuild"
        time.sleep(0.02)
    for worker in site.workers:
        worker.kill()
    killed = time.monotonic()
    site.first.ask(op="flag", name="slow:worker", value=None)
    site.worker()
    while counts(site, "worker", [0])[0] < 2 and time.monotonic() < killed + 20:
        ((_, _, value, _),) = site.first.ask(op="read", keys=[["worker", 0]], threads=1)
        assert value.startswith("worker 0 #"), "the stale page until a worker rebuilt it"
        time.sleep(0.3)
    took = time.monotonic() - killed
    assert settled(site, "worker", range(1), 2)[0] == 2, "rebuilt once after the killed build"
    assert built_by(fresh(site, "worker", 0)) not in site.web.pids, "by a worker"
    assert took < 2 + 1 + 8, f"within lock_timeout and a few seconds: {took:.1f} s"
    assert counts(site, "worker", [0], "attempts")[0] == 3


@applies(lambda cell: cell.refresher in ("celery", "rq"))
def test_after_a_broker_outage_the_queue_is_used_again(site) -> None:
    warm(site, "outage", KEYS)
    site.broker.kill()
    for worker in site.workers:
        worker.kill()
    bump(site, "outage")
    reads = site.web.burst(keys("outage", KEYS))
    refused = time.monotonic()  # every refused send was made by now
    assert {build_number(value) for _, _, value in reads} == {1}, "the stale page, no error"
    assert settled(site, "outage", KEYS, 2) == dict.fromkeys(KEYS, 2), "rebuilt here meanwhile"
    site.broker.restart()
    back = time.monotonic()
    site.worker()
    time.sleep(max(0.0, refused + RETRY_AFTER - time.monotonic()))  # the circuit's first retry
    for expected in range(3, 7):  # a round of visits, until the workers take them again
        bump(site, "outage")
        site.web.burst(keys("outage", KEYS))
        assert settled(site, "outage", KEYS, expected) == dict.fromkeys(KEYS, expected)
        builders = {built_by(fresh(site, "outage", n)) for n in KEYS}
        if not builders & site.web.pids:
            break
    took = time.monotonic() - back
    assert not builders & site.web.pids, "the queue's workers rebuild again"
    assert took < 2 * RETRY_AFTER + 5, f"within the circuit's window or two: {took:.1f} s"


@applies(lambda cell: cell.near == "on")
def test_a_near_copy_outlives_a_write_elsewhere_by_at_most_near_ttl(site) -> None:
    warm(site, "near", range(1))
    assert fresh(site, "near", 0) is not None  # and now a near copy in the first process
    bump(site, "near")  # and near_ttl's wait
    assert fresh(site, "near", 0) is None, "the bump is seen: the entry is stale"
    site.first.ask(op="read", keys=[["near", 0]], threads=1)
    assert settled(site, "near", range(1), 2)[0] == 2
    assert fresh(site, "near", 0) is not None  # a near copy of the rebuilt entry
    site.last.ask(op="set", key=["near", 0], value="written elsewhere")
    time.sleep(0.5 + 0.2)
    assert fresh(site, "near", 0) == "written elsewhere"


def test_a_rebuild_set_off_by_a_recent_bump_reads_the_primary(site) -> None:
    warm(site, "primary", range(1))
    bump(site, "primary")
    site.first.ask(op="read", keys=[["primary", 0]], threads=1)
    settled(site, "primary", range(1), 2)
    assert fresh(site, "primary", 0).endswith("primary=True"), "within the lag of its bump"
    time.sleep(LAG)  # the replica has the change now
    (value,) = site.first.ask(op="refresh", keys=[["primary", 0]])
    assert value.endswith("primary=False"), value
