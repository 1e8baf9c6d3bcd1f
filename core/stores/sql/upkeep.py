"""Keeping a durable store's table in bounds, off the request path.

A request never scans the table: reads skip expired rows by their
``expires_at``, and the rest happens here, on one thread per store and process,
every ``sweep_interval`` seconds or sooner after many writes (or, with
``sweep_thread=false``, whenever the application calls ``store.upkeep.sweep()``).
A sweep moves the ``used_at`` of the keys read since the last one (a read never
writes), deletes expired rows ``sweep_batch`` at a time with a pause between
batches (one process at a time: the one whose ``add`` of a marker row won), and
while the size estimated from a uniform sample is over ``max_bytes`` evicts the
least recently used rows until it is 5% under. See
docs/how-to/durable-tier.md#how-it-works-and-what-it-costs.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from mcache.errors import StoreUnavailable
from mcache.stores.sql.dialects import UPKEEP_KEY, reserved_row

if TYPE_CHECKING:
    from mcache.stores.sql.store import SqlStore

__all__ = ["MAX_BATCHES", "Upkeep"]

logger = logging.getLogger("mcache")

MAX_BATCHES = 400
"""Batches one sweep deletes at most (of expired rows, then of evicted ones)."""
PAUSE = 0.005
"""Seconds between two batches: other writers get the table in between."""
NOTED = 10_000
"""Keys read between two sweeps whose recency is kept (more are not noted)."""
SAMPLE_ROWS = 20_000
"""About how many rows an estimate reads; fewer than this and it counts them all."""
TOUCH_AFTER = 60
"""Seconds: a row's ``used_at`` is moved only when older than this."""


class Upkeep:
    """The sweeper of one store in one process: recency, expiry, size."""

    def __init__(self, store: SqlStore, interval: float, batch: int, thread: bool = True) -> None:
        self.store = store
        self.interval = interval
        self.batch = batch
        self.thread = thread
        self._sweeping = threading.Lock()
        self.counts = {"expired": 0, "evicted": 0}
        self._read: set[str] = set()
        self._writes = 0
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._shift = 6  # the sample is the rows whose version is below 2**(63 - shift)

    # -- what the store tells it ------------------------------------------------------------

    def used(self, *keys: str) -> None:
        """Note that ``keys`` were read, for the LRU order."""
        if len(self._read) < NOTED:
            self._read.update(keys)
        self._ensure_running()

    def wrote(self, rows: int) -> None:
        """Count writes; after ``batch`` of them the sweep runs early."""
        self._writes += rows
        if self._writes >= self.batch:
            self._writes = 0
            self._wake.set()
        self._ensure_running()

    def _ensure_running(self) -> None:
        thread = self._thread
        if not self.thread or (thread is not None and thread.is_alive()):
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # not started, or forked
                self._stopped.clear()
                self._thread = threading.Thread(
                    target=self._loop, name="mcache-sql-upkeep", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        """Stop the thread (it starts again on the next read or write)."""
        self._stopped.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._thread = None

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stopped.is_set():
                break
            try:
                self.sweep()
            except StoreUnavailable:
                pass  # the store's callers see the outage and log it; try again next time
            except Exception as error:  # a sweep must never end the thread
                logger.warning(
                    "mcache: sweep of %s failed: %r", self.store.connector.location, error
                )
            finally:
                self.store.connections.close()

    # -- a sweep ------------------------------------------------------------------------

    def sweep(self) -> dict[str, int]:
        """Run one sweep now; return what it did (rows marked, expired, evicted, batches)."""
        with self._sweeping:
            done = {"marked": self._mark_used(), "expired": 0, "evicted": 0, "batches": 0}
            if self._take_turn():
                expired, batches = self._delete_in_batches(self.store.dialect.sweep_expired, True)
                evicted, more = self._evict()
                done.update(expired=expired, evicted=evicted, batches=batches + more)
            return done

    def _mark_used(self) -> int:
        keys, self._read = list(self._read), set()
        now = int(self.store.clock.time())
        marked = 0
        for start in range(0, len(keys), self.batch):
            chunk = keys[start : start + self.batch]
            sql = self.store.dialect.mark_used(len(chunk))
            marked += self.store.run(sql, (now, *chunk, now - TOUCH_AFTER)).rowcount
        return marked

    def _take_turn(self) -> bool:
        """Win the marker row for half an interval: one process sweeps at a time."""
        store, now_ms = self.store, self.store.now_ms()
        expires_at = now_ms + int(self.interval * 500)
        row = reserved_row(UPKEEP_KEY, b"", expires_at, now_ms)
        return bool(store.run(store.dialect.add, row).rowcount == 1)

    def _delete_in_batches(
        self, sql: str, expired: bool, limit: int = MAX_BATCHES
    ) -> tuple[int, int]:
        deleted = batches = 0
        while batches < limit and not self._stopped.is_set():
            params = (self.store.now_ms(), self.batch) if expired else (self.batch,)
            count = self.store.run(sql, params).rowcount
            deleted, batches = deleted + count, batches + 1
            self.counts["expired" if expired else "evicted"] += count
            if count < self.batch:
                break
            time.sleep(PAUSE)
        return deleted, batches

    def _evict(self) -> tuple[int, int]:
        bound = self.store.max_bytes
        if not bound:
            return 0, 0
        rows, size, _exact = self.estimate()
        if size <= bound or rows == 0:
            return 0, 0
        excess_rows = int((size - bound * 0.95) * rows / size) + 1
        batches = -(-excess_rows // self.batch)
        return self._delete_in_batches(self.store.dialect.evict, False, min(batches, MAX_BATCHES))

    def estimate(self) -> tuple[int, int, bool]:
        """Return ``(rows, bytes, exact)`` of the table, sampled through an index.

        A sample of fewer than ``SAMPLE_ROWS / 4`` rows is too small to go by:
        a larger one is read, down to counting every row of a small table.
        """
        store = self.store
        while self._shift > 0:
            shift = self._shift
            rows, size = store.run(store.dialect.sample, (2 ** (63 - shift),)).fetchone()
            if rows >= SAMPLE_ROWS // 4:
                if rows > 2 * SAMPLE_ROWS:
                    self._shift = shift + 1
                return int(rows) << shift, int(size) << shift, False
            self._shift = max(shift - 2, 0)
        rows, size = (int(n) for n in store.run(store.dialect.count_all).fetchone())
        self._shift = max(0, (rows // SAMPLE_ROWS).bit_length() - 1)
        return rows, size, True
