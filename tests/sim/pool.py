"""The real memcached store, its pool and its protocols, on simulated servers.

:class:`SimPool` is :class:`~mcache.stores.memcached.store.MemcachedStore` itself, ring,
failover, node health and both protocols, whose connections lead to
:class:`~tests.sim.memcached.SimMemcachedServer` rather than to sockets: pymemcache's
client and the store's wire and meta code send their bytes there and parse what comes back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from pymemcache.client.base import Client

from mcache.clock import Clock
from mcache.stores.memcached import meta
from mcache.stores.memcached.node import Node
from mcache.stores.memcached.store import MemcachedStore
from tests.sim.memcached import SimMemcachedServer, SimSocketModule


class SimNode(Node):
    """A server of the pool, reached through a simulated connection."""

    sim_server: SimMemcachedServer
    sim_refuses: Callable[[], OSError | None] = staticmethod(lambda: None)  # type: ignore[assignment]
    """The error a connection made now fails with (the server down, a partition)."""

    def _new_client(self) -> Client:
        options = self.options
        return Client(
            (self.server.host, self.server.port),
            connect_timeout=options.connect_timeout,
            timeout=options.timeout,
            default_noreply=False,
            allow_unicode_keys=True,
            socket_module=SimSocketModule(self.sim_server, self.sim_refuses),
        )


class SimPool(MemcachedStore):
    """A memcached pool of simulated servers (``servers``: each one by its ``host:port``)."""

    node_class = SimNode

    def __init__(
        self,
        servers: Mapping[str, SimMemcachedServer],
        clock: Clock,
        protocol: str = "meta",
        refuses: Callable[[str], OSError | None] = lambda name: None,
        on_health: Callable[[str, bool], None] = lambda name, up: None,
        **options: Any,
    ) -> None:
        """``refuses(name)``: the error a connection made now to the server ``name`` fails
        with (None: it reaches); ``on_health(name, up)``: told when this pool marks a
        server dead, or takes it back."""
        self.on_health = on_health
        super().__init__(list(servers), protocol=protocol, clock=clock, **options)
        for server, node in self._nodes.items():
            node.sim_server = servers[server.name]  # type: ignore[attr-defined]
            node.sim_refuses = functools.partial(refuses, server.name)  # type: ignore[attr-defined]

    def _health_changed(self, node: Node) -> int:
        up = super()._health_changed(node)
        self.on_health(node.server.name, not node.dead_until)
        return up

    def _answered(self) -> bool:
        """Ask each server whether it speaks the meta protocol, on a simulated connection."""
        servers = [node.sim_server for node in self._nodes.values()]  # type: ignore[attr-defined]
        answers = [meta.speaks_meta(SimSocketModule(s).socket()) for s in servers]  # type: ignore[arg-type]
        self._meta = all(answers)
        return self._meta
