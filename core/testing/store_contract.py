"""The store contract suite: one set of tests every store must pass.

Subclass :class:`StoreContract` in a pytest module and provide two fixtures:

``store``
    a fresh, empty store;
``store_factory``
    a picklable zero-argument callable that builds another store on the same
    backend in another process (``functools.partial(from_url, url)``), or
    ``None`` for a process-local store, whose races then run on threads only.

Override :meth:`StoreContract.wait` to move time without sleeping where the store
takes an injected clock. Third-party stores import this module to prove they
keep memcached's semantics::

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store(self): ...
        @pytest.fixture
        def store_factory(self): return None
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import Any

import pytest

from mcache.contract.store import NO_VALUE, Store
from mcache.errors import InvalidKey, NotNumeric, ValueTooLarge
from mcache.testing.traits_contract import TraitsContract

__all__ = ["StoreContract", "race", "run_together"]

PROCESSES = 4
THREADS = 8
INCREMENTS = 50
BINARY = bytes(range(256)) + b"\r\nEND\r\n\x00"


def _race_in_process(
    factory: Callable[[], Store] | None,
    store: Store | None,
    op: str,
    key: str,
    ready: Any,
    go: Any,
    results: Any,
    tag: str,
) -> None:
    """Run ``THREADS`` threads of ``op`` against one store, reporting outcomes."""
    target = store if store is not None else factory()  # type: ignore[misc]
    outcomes: list[object] = []
    lock = threading.Lock()

    def work(thread: int) -> None:
        go.wait()
        if op == "add":
            got: object = target.add(key, f"{tag}-{thread}".encode(), 60)
            mine = [(got, f"{tag}-{thread}")]
        else:
            mine = [(target.incr(key, 1), None) for _ in range(INCREMENTS)]
        with lock:
            outcomes.extend(mine)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    ready.put(tag)
    for thread in threads:
        thread.join()
    results.put(outcomes)


def race(store: Store, factory: Callable[[], Store] | None, op: str, key: str) -> list[object]:
    """Race ``op`` (``"add"`` or ``"incr"``) from 4 processes × 8 threads; return outcomes.

    With no factory (a process-local store) the same number of threads race in
    this process instead.
    """
    if factory is None:
        ready, results, go = queue.Queue(), queue.Queue(), threading.Event()
        runner, local, tag = threading.Thread, store, "t"
    else:
        context = multiprocessing.get_context("spawn")
        ready, results, go = context.Queue(), context.Queue(), context.Event()
        runner, local, tag = context.Process, None, "p"  # each process makes its own store
    workers = [
        runner(
            target=_race_in_process,
            args=(factory, local, op, key, ready, go, results, f"{tag}{i}"),
        )
        for i in range(PROCESSES)
    ]
    return run_together(workers, ready, go, results)


def run_together(
    runners: Sequence[threading.Thread | BaseProcess], ready: Any, go: Any, results: Any
) -> list[Any]:
    """Start ``runners``, let them all go at once, and return the outcomes they put.

    Each runner puts on ``ready`` once set up, waits for ``go``, then puts a
    list of outcomes on ``results``: queues and an event of threads, or of
    processes. A race starts only once every runner is ready.
    """
    for runner in runners:
        runner.start()
    for _ in runners:
        ready.get(timeout=60)
    go.set()
    outcomes = [item for _ in runners for item in results.get(timeout=60)]
    for runner in runners:
        runner.join(timeout=30)
    return outcomes


class StoreContract(TraitsContract):
    """Memcached semantics, checked operation by operation."""

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` pass for the store (real servers: sleep)."""
        time.sleep(seconds)

    # -- get / set ------------------------------------------------------------------------

    def test_miss_is_no_value(self, store: Store) -> None:
        assert store.get("absent") is NO_VALUE

    def test_set_get_binary(self, store: Store) -> None:
        store.set("bin", BINARY)
        store.set("empty", b"")
        store.set("looks_done", b"VALUE x 0 3\r\nEND\r\n")  # a reply's own framing, as data
        assert store.get("bin") == BINARY
        assert store.get("empty") == b""
        assert store.get("looks_done") == b"VALUE x 0 3\r\nEND\r\n"
        assert store.get_many(["looks_done", "bin"]) == {
            "looks_done": b"VALUE x 0 3\r\nEND\r\n",
            "bin": BINARY,
        }

    def test_set_overwrites(self, store: Store) -> None:
        store.set("k", b"one")
        store.set("k", b"two")
        assert store.get("k") == b"two"

    def test_get_many_skips_missing(self, store: Store) -> None:
        store.set("a", b"1")
        store.set("c", b"3")
        assert store.get_many(["a", "b", "c"]) == {"a": b"1", "c": b"3"}
        assert store.get_many([]) == {}

    def test_set_many(self, store: Store) -> None:
        assert store.set_many({"x": b"1", "y": BINARY}, 60) == []
        assert store.get_many(["x", "y"]) == {"x": b"1", "y": BINARY}

    # -- add / append / prepend / replace ----------------------------------------------------

    def test_add_only_when_absent(self, store: Store) -> None:
        assert store.add("k", b"first", 60) is True
        assert store.add("k", b"second", 60) is False
        assert store.get("k") == b"first"
        store.delete("k")
        assert store.add("k", b"third") is True
        assert store.get("k") == b"third"

    def test_append(self, store: Store) -> None:
        assert store.append("absent", b"x") is False
        assert store.get("absent") is NO_VALUE
        store.set("k", b"ab")
        assert store.append("k", b"cd") is True
        assert store.get("k") == b"abcd"

    def test_prepend(self, store: Store) -> None:
        assert store.prepend("absent", b"x") is False
        assert store.get("absent") is NO_VALUE
        store.set("k", b"cd")
        assert store.prepend("k", b"ab") is True
        assert store.get("k") == b"abcd"
        assert store.append("k", b"ef") is True
        assert store.prepend("k", BINARY) is True
        assert store.get("k") == BINARY + b"abcdef"

    def test_replace_only_when_present(self, store: Store) -> None:
        assert store.replace("absent", b"x", 60) is False
        assert store.get("absent") is NO_VALUE
        store.set("k", b"old")
        assert store.replace("k", b"new", 60) is True
        assert store.get("k") == b"new"
        assert store.replace("k", BINARY) is True
        assert store.get("k") == BINARY
        store.delete("k")
        assert store.replace("k", b"again") is False
        assert store.get("k") is NO_VALUE

    def test_prepend_keeps_the_ttl_and_replace_sets_its_own(self, store: Store) -> None:
        # Each changed right after it is set, with two seconds to live: on a whole-second
        # clock one second may end a moment after it began, however loaded the machine.
        store.set("prepended", b"b", 2)
        assert store.prepend("prepended", b"a") is True
        store.set("replaced-forever", b"old", 2)
        assert store.replace("replaced-forever", b"new", 0) is True
        store.set("replaced-short", b"old", 0)
        assert store.replace("replaced-short", b"new", 1) is True
        self.wait(3.1)
        got = store.get_many(["prepended", "replaced-short", "replaced-forever"])
        assert got == {"replaced-forever": b"new"}

    # -- incr / decr ------------------------------------------------------------------------

    def test_incr_never_creates(self, store: Store) -> None:
        assert store.incr("n", 1) is None
        assert store.get("n") is NO_VALUE
        assert store.decr("n", 1) is None
        assert store.get("n") is NO_VALUE

    def test_incr_decr(self, store: Store) -> None:
        store.set("n", b"10")
        assert store.incr("n", 5) == 15
        assert store.incr("n") == 16
        assert store.decr("n", 6) == 10
        assert store.decr("n", 100) == 0
        value = store.get("n")
        assert isinstance(value, bytes)
        # memcached decrements in place and may pad the shorter number with spaces
        assert value.rstrip(b" ") == b"0"
        assert store.incr("n", 7) == 7

    def test_incr_non_numeric(self, store: Store) -> None:
        store.set("text", b"abc")
        with pytest.raises(NotNumeric):
            store.incr("text", 1)
        assert store.get("text") == b"abc"

    def test_incr_rejects_negative_delta(self, store: Store) -> None:
        store.set("n", b"1")
        with pytest.raises(ValueError, match="non-negative"):
            store.incr("n", -1)
        assert store.get("n") == b"1"

    def test_incr_keeps_ttl(self, store: Store) -> None:
        store.set("n", b"1", 1)
        store.incr("n", 1)
        self.wait(2.1)
        assert store.get("n") is NO_VALUE

    # -- gets / cas -------------------------------------------------------------------------

    def test_gets_cas(self, store: Store) -> None:
        assert store.gets("k") == (NO_VALUE, None)
        store.set("k", b"v1")
        value, token = store.gets("k")
        assert value == b"v1"
        assert store.cas("k", b"v2", token) is True
        assert store.get("k") == b"v2"
        assert store.cas("k", b"v3", token) is False
        assert store.get("k") == b"v2"

    def test_cas_sees_intervening_write(self, store: Store) -> None:
        store.set("k", b"v1")
        _, token = store.gets("k")
        store.set("k", b"other")
        assert store.cas("k", b"mine", token) is False
        assert store.get("k") == b"other"

    def test_cas_on_missing_key(self, store: Store) -> None:
        store.set("k", b"v1")
        _, token = store.gets("k")
        store.delete("k")
        assert store.cas("k", b"v2", token) is False
        assert store.get("k") is NO_VALUE
        assert store.cas("never", b"v", "bogus") is False

    def test_cas_with_negative_ttl_deletes_only_if_unchanged(self, store: Store) -> None:
        store.set("lock", b"owner-a")
        _, token = store.gets("lock")
        store.set("lock", b"owner-b")
        assert store.cas("lock", b"owner-a", token, -1) is False
        assert store.get("lock") == b"owner-b"
        _, token = store.gets("lock")
        assert store.cas("lock", b"owner-b", token, -1) is True
        assert store.get("lock") is NO_VALUE

    def test_incr_many(self, store: Store) -> None:
        from mcache.model.tags import incr_many  # the store's batch, else incr per key

        store.set_many({"a": b"1", "b": b"10"})
        assert incr_many(store, {"a": 2, "b": 5, "missing": 1}) == {
            "a": 3,
            "b": 15,
            "missing": None,
        }
        assert store.get("missing") is NO_VALUE

    # -- delete / touch / flush -------------------------------------------------------------

    def test_delete(self, store: Store) -> None:
        store.set("k", b"v")
        assert store.delete("k") is True
        assert store.delete("k") is False
        assert store.get("k") is NO_VALUE

    def test_delete_many(self, store: Store) -> None:
        store.set_many({"a": b"1", "b": b"2", "c": b"3"})
        store.delete_many(["a", "b", "missing"])
        assert store.get_many(["a", "b", "c"]) == {"c": b"3"}

    def test_touch_missing(self, store: Store) -> None:
        assert store.touch("absent", 10) is False
        assert store.get("absent") is NO_VALUE

    def test_flush(self, store: Store) -> None:
        store.set_many({"a": b"1", "b": b"2"})
        store.flush()
        assert store.get_many(["a", "b"]) == {}

    # -- expiry -------------------------------------------------------------------------------

    def test_expiry(self, store: Store) -> None:
        month = 31 * 24 * 3600
        store.set("short", b"1", 1)
        store.set("forever", b"2", 0)
        store.set("long", b"3", 100)
        store.set("month", b"4", month)
        store.add("added", b"5", 1)
        store.set("touched_short", b"6", 100)
        store.set("touched_forever", b"7", 1)
        assert store.touch("touched_short", 1) is True
        assert store.touch("touched_forever", 0) is True
        assert store.get("long") == b"3"
        assert store.get("month") == b"4", "a TTL over 30 days must not expire at once"
        self.wait(2.1)
        got = store.get_many(
            ["short", "forever", "long", "month", "added", "touched_short", "touched_forever"]
        )
        assert got == {"forever": b"2", "long": b"3", "month": b"4", "touched_forever": b"7"}
        assert store.add("short", b"again", 60) is True

    def test_negative_ttl_is_expired(self, store: Store) -> None:
        store.set("k", b"old")
        store.set("k", b"new", -1)
        assert store.get("k") is NO_VALUE
        store.set("r", b"old")
        assert store.replace("r", b"new", -1) is True, "it was there to replace"
        assert store.get("r") is NO_VALUE

    # -- keys and sizes -----------------------------------------------------------------------

    @pytest.mark.parametrize("key", ["", "a b", "a\nb", "tab\there", "del\x7f", "k" * 251])
    def test_invalid_keys(self, store: Store, key: str) -> None:
        with pytest.raises(InvalidKey):
            store.set(key, b"v")
        with pytest.raises(InvalidKey):
            store.get(key)

    def test_longest_and_unicode_keys(self, store: Store) -> None:
        longest = "k" * 250
        store.set(longest, b"v")
        store.set("ключ", b"u")
        assert store.get_many([longest, "ключ"]) == {longest: b"v", "ключ": b"u"}

    def test_largest_value_fits_under_longest_key(self, store: Store) -> None:
        key = "L" * 250
        value = b"x" * store.max_value_size
        store.set(key, value)
        assert store.get(key) == value

    def test_too_large_set_stores_nothing(self, store: Store) -> None:
        store.set("big", b"old")
        with pytest.raises(ValueTooLarge, match="max_value_size"):
            store.set("big", b"x" * (store.max_value_size + 1))
        assert store.get("big") is NO_VALUE, "an outdated value must not survive a failed set"
        with pytest.raises(ValueTooLarge):
            store.add("big2", b"x" * (store.max_value_size + 1))
        assert store.get("big2") is NO_VALUE

    def test_too_large_replace_leaves_the_key_empty(self, store: Store) -> None:
        store.set("big", b"old")
        with pytest.raises(ValueTooLarge, match="max_value_size"):
            store.replace("big", b"x" * (store.max_value_size + 1))
        assert store.get("big") is NO_VALUE, "an outdated value must not survive a failed update"
        with pytest.raises(ValueTooLarge):
            store.replace("absent", b"x" * (store.max_value_size + 1))
        assert store.get("absent") is NO_VALUE

    def test_set_many_reports_too_large(self, store: Store) -> None:
        huge = b"x" * (store.max_value_size + 1)
        failed = store.set_many({"ok": b"1", "huge": huge})
        assert failed == ["huge"]
        assert store.get_many(["ok", "huge"]) == {"ok": b"1"}

    @pytest.mark.parametrize("join", ["append", "prepend"])
    def test_append_and_prepend_past_limit(self, store: Store, join: str) -> None:
        full = b"x" * store.max_value_size
        store.set("k", full)
        # memcached answers NOT_STORED without saying why, so False is as good as raising
        with contextlib.suppress(ValueTooLarge):
            assert getattr(store, join)("k", b"y" * 1024) is False
        assert store.get("k") == full

    # -- stats ---------------------------------------------------------------------------------

    def test_stats(self, store: Store) -> None:
        store.set("k", b"v")
        store.get("k")
        store.get("missing")
        report = store.stats()
        assert report, "stats() must describe at least one server"
        for fields in report.values():
            for name in ("curr_items", "bytes", "get_hits", "get_misses", "evictions", "uptime"):
                assert isinstance(fields[name], int), name
        assert sum(f["curr_items"] for f in report.values()) >= 1  # type: ignore[misc]
        assert sum(f["get_hits"] for f in report.values()) >= 1  # type: ignore[misc]

    # -- atomicity under real concurrency -------------------------------------------------------

    def test_add_race_has_one_winner(self, store: Store, store_factory: Any) -> None:
        outcomes = race(store, store_factory, "add", "race:add")
        winners = [name for won, name in outcomes if won]  # type: ignore[misc]
        assert len(outcomes) == PROCESSES * THREADS
        assert len(winners) == 1, winners
        assert store.get("race:add") == str(winners[0]).encode()

    def test_incr_race_loses_nothing(self, store: Store, store_factory: Any) -> None:
        store.set("race:n", b"0")
        outcomes = race(store, store_factory, "incr", "race:n")
        values = [value for value, _ in outcomes]  # type: ignore[misc]
        total = PROCESSES * THREADS * INCREMENTS
        assert sorted(values) == list(range(1, total + 1)), "every increment seen exactly once"
        assert store.get("race:n") == str(total).encode()
