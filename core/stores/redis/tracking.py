"""Redis's pushed invalidations (``CLIENT TRACKING``), for a process's near cache.

One connection of its own (RESP2, whatever the store's clients speak) asks for
its id, turns on ``CLIENT TRACKING ON REDIRECT <own id> BCAST PREFIX …`` for the
namespace's prefixes and subscribes to ``__redis__:invalidate``: broadcast mode
needs no per-key bookkeeping in the server, and one connection means losing it
loses tracking and the subscription together, which the reading thread notices
at once. The feed tells a :class:`Listener` which keys changed, that all may
have (a flush), that it lost the connection or is live again; it reconnects on
its own through the store's connection class, so it follows a Sentinel failover.

redis-py's own client-side caching works only over RESP3 and keyed by whole
commands, below the codec; the near cache keeps decoded entries and tag
versions above it. See docs/how-to/near-cache.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from redis.exceptions import RedisError

__all__ = ["InvalidationFeed", "Listener"]

log = logging.getLogger("mcache.near")

CHANNEL = "__redis__:invalidate"
BACK_OFF = (0.05, 0.1, 0.2, 0.5, 1.0)  # seconds between reconnection attempts
POLL = 0.5  # seconds a read waits before checking whether the feed was closed


class Listener(Protocol):
    """What a feed tells (see :class:`mcache.model.near.Coherence`)."""

    def changed(self, keys: Iterable[str]) -> None: ...

    def reset(self) -> None: ...

    def lost(self) -> None: ...

    def live(self) -> None: ...


class InvalidationFeed:
    """A thread reading Redis's invalidations for ``prefixes`` into a :class:`Listener`."""

    def __init__(self, connect: Callable[[], Any], prefixes: list[str], listener: Listener) -> None:
        self.connect = connect
        """Returns a new, unconnected redis-py ``Connection`` speaking RESP2."""
        self.prefixes = prefixes
        self.listener = listener
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closed = threading.Event()
        self._start_lock = threading.Lock()
        self._connection: Any = None
        self.client_id: int | None = None
        """The tracking connection's id on the server while it is connected."""

    def __repr__(self) -> str:
        return f"InvalidationFeed(prefixes={self.prefixes!r}, running={self.running})"

    @property
    def running(self) -> bool:
        """Return whether this process's thread is reading (a forked child has none)."""
        thread = self._thread
        return thread is not None and thread.is_alive() and self._pid == os.getpid()

    def start(self) -> None:
        """Start reading in a daemon thread, unless this process already does."""
        if self.running or self._closed.is_set():
            return
        with self._start_lock:
            if self.running:
                return
            self.listener.lost()  # a forked child's copies came from its parent's feed
            self._pid = os.getpid()
            self._connection = None
            self._thread = threading.Thread(target=self._run, name="mcache-near-feed", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop reading (within ``POLL`` seconds); the near cache keeps nothing from now on."""
        self._closed.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * POLL)
        self.listener.lost()

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(RedisError, OSError):
                connection.disconnect()

    def _run(self) -> None:
        failures = 0
        while not self._closed.is_set():
            try:
                connection = self._subscribe()
                failures = 0
                self.listener.live()
                self._read(connection)
            except Exception as error:  # whatever broke, nothing may be kept unverified
                self.listener.lost()
                if self._closed.is_set():
                    return
                if failures == 0:
                    log.warning("mcache near cache: invalidations lost (%s); reconnecting", error)
                self._closed.wait(BACK_OFF[min(failures, len(BACK_OFF) - 1)])
                failures += 1
            finally:
                self._drop_connection()

    def _subscribe(self) -> Any:
        connection = self._connection = self.connect()
        connection.connect()
        connection.send_command("CLIENT", "ID")
        own_id = self.client_id = connection.read_response()
        prefixes = [part for prefix in self.prefixes for part in ("PREFIX", prefix)]
        connection.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", own_id, "BCAST", *prefixes)
        connection.read_response()
        connection.send_command("SUBSCRIBE", CHANNEL)
        connection.read_response()
        return connection

    def _read(self, connection: Any) -> None:
        listener = self.listener
        while not self._closed.is_set():
            if not connection.can_read(timeout=POLL):
                continue
            message = connection.read_response()
            if not isinstance(message, list) or len(message) != 3 or message[0] != b"message":
                continue
            keys = message[2]
            if keys is None:
                listener.reset()  # FLUSHDB, FLUSHALL: every key changed
            else:
                listener.changed([key.decode("utf-8", "surrogateescape") for key in keys])
