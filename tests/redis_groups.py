"""Redis topologies for the tests: Sentinel groups and clusters, started from ``redis-server``.

Each group runs on free 127.0.0.1 ports with short failure timeouts, so a test
can kill a primary and watch its replica take over within seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import TypeVar

from tests.servers import HOST, ServerProcess, redis_process

__all__ = ["ClusterGroup", "HitsAgain", "SentinelGroup", "sentinel_process"]


def sentinel_process(primary: str, service: str, binary: str | None = None) -> ServerProcess:
    """Describe a Redis Sentinel on a free port watching ``primary`` as ``service``.

    Quorum 2 (of the three a group runs), a primary is down after 1 s without an
    answer, and a failover may take 3 s: quick enough for a test to watch one.
    """
    path = binary or shutil.which("redis-server") or "redis-server"
    workdir = tempfile.mkdtemp(prefix="mcache-sentinel-")
    host, port_of_primary = primary.split(":")

    def argv(port: int) -> list[str]:
        config = os.path.join(workdir, f"sentinel-{port}.conf")  # Sentinel rewrites it
        if not os.path.exists(config):
            with open(config, "w") as out:
                out.write(
                    f"port {port}\nbind {HOST}\nprotected-mode no\ndir {workdir}\n"
                    f"sentinel monitor {service} {host} {port_of_primary} 2\n"
                    f"sentinel down-after-milliseconds {service} 1000\n"
                    f"sentinel failover-timeout {service} 3000\n"
                )
        return [config, "--sentinel"]

    return ServerProcess("redis-sentinel", path, argv, b"PING\r\n", b"+PONG")


G = TypeVar("G", bound="Running")


class Running:
    """``with Group() as group:`` waits until the group is ready, and kills it at the end."""

    def wait_ready(self, timeout: float = 20.0) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def __enter__(self: G) -> G:
        try:
            self.wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()


class SentinelGroup(Running):
    """A primary, a replica and three sentinels: a Redis service that can fail over."""

    def __init__(self, service: str = "mcache") -> None:
        self.service = service
        self.primary = redis_process().start()
        self.replica = redis_process(replica_of=self.primary.address).start()
        self.sentinels = [sentinel_process(self.primary.address, service).start() for _ in range(3)]

    def url(self, db: int = 0, query: str = "") -> str:
        """The ``redis+sentinel://`` URL of this group's service."""
        hosts = ",".join(sentinel.address for sentinel in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/{db}" + (f"?{query}" if query else "")

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until the replica is in sync and every sentinel knows the primary and replica."""
        import redis

        deadline = time.monotonic() + timeout
        replica = redis.Redis(host=HOST, port=self.replica.port)
        try:
            while time.monotonic() < deadline:
                if self._ready(replica):
                    return
                time.sleep(0.1)
        finally:
            replica.close()
        raise RuntimeError(f"sentinel group {self.service} did not come up in {timeout} s")

    def _ready(self, replica: object) -> bool:
        import redis

        try:
            if replica.info("replication").get("master_link_status") != "up":  # type: ignore[attr-defined]
                return False
            for sentinel in self.sentinels:
                client = redis.Redis(host=HOST, port=sentinel.port)
                try:
                    if not client.sentinel_slaves(self.service):
                        return False
                finally:
                    client.close()
        except redis.RedisError:
            return False
        return True

    def primary_port(self) -> int:
        """The port the sentinels name as the primary now."""
        import redis

        client = redis.Redis(host=HOST, port=self.sentinels[0].port)
        try:
            return int(client.sentinel_get_master_addr_by_name(self.service)[1])
        finally:
            client.close()

    def kill(self) -> None:
        for server in (*self.sentinels, self.replica, self.primary):
            server.kill()


class ClusterGroup(Running):
    """Three primaries with one replica each: a Redis Cluster that can lose a primary.

    A node is failed after 1 s without an answer (``cluster-node-timeout``), so a
    killed primary's replica takes over its slots in about two seconds, and
    ``cluster-require-full-coverage no`` keeps the other slots answering meanwhile,
    as the docs advise for a cache.
    """

    OPTIONS = (
        "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
        "--cluster-require-full-coverage", "no",
    )  # fmt: skip

    def __init__(self, primaries: int = 3) -> None:
        self.nodes = [redis_process(options=self.OPTIONS).start() for _ in range(primaries * 2)]
        cli = shutil.which("redis-cli") or "redis-cli"
        created = subprocess.run(
            [cli, "--cluster", "create", *(node.address for node in self.nodes),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if created.returncode != 0:
            self.kill()
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout[-2000:]}")

    def url(self, query: str = "") -> str:
        """The ``redis+cluster://`` URL naming every node (any one would do)."""
        hosts = ",".join(node.address for node in self.nodes)
        return f"redis+cluster://{hosts}" + (f"?{query}" if query else "")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until every live node sees all slots served and every replica is in sync."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._ready(node) for node in self.nodes if node.process is not None):
                return
            time.sleep(0.1)
        raise RuntimeError(f"redis cluster did not come up in {timeout} s: {self.roles()}")

    def _ready(self, node: ServerProcess) -> bool:
        import redis

        client = redis.Redis(host=HOST, port=node.port, socket_timeout=1)
        try:
            info = client.cluster("INFO")
            if info.get("cluster_state") != "ok" or int(info["cluster_slots_ok"]) != 16384:
                return False
            replication = client.info("replication")
            return replication["role"] == "master" or replication["master_link_status"] == "up"
        except (redis.RedisError, KeyError, ValueError):
            return False
        finally:
            client.close()

    def roles(self) -> dict[int, str]:
        """Map each live node's port to ``primary`` or ``replica``, as the cluster sees it now."""
        import redis

        roles: dict[int, str] = {}
        for node in self.nodes:
            if node.process is None:
                continue
            client = redis.Redis(host=HOST, port=node.port, socket_timeout=1)
            try:
                role = client.info("replication")["role"]
                roles[node.port] = "primary" if role == "master" else "replica"
            except redis.RedisError:
                pass
            finally:
                client.close()
        return roles

    def primaries(self) -> list[ServerProcess]:
        """The live nodes serving slots now."""
        roles = self.roles()
        return [node for node in self.nodes if roles.get(node.port) == "primary"]

    def serving(self, key: str) -> ServerProcess:
        """The primary that serves ``key`` now."""
        return self.serving_each([key])[0]

    def key_on(self, node: ServerProcess, stem: str) -> str:
        """A key ``stem<n>`` that ``node`` serves."""
        candidates = [f"{stem}{n}" for n in range(1000)]
        owners = self.serving_each(candidates)
        return next(key for key, owner in zip(candidates, owners, strict=True) if owner is node)

    def serving_each(self, keys: list[str]) -> list[ServerProcess]:
        """The primary that serves each of ``keys`` now (one client, one slot map)."""
        from redis.cluster import RedisCluster

        live = next(node for node in self.nodes if node.process is not None)
        client = RedisCluster(host=HOST, port=live.port)
        try:
            ports = [client.get_node_from_key(key).port for key in keys]
        finally:
            client.close()
        by_port = {node.port: node for node in self.nodes}
        return [by_port[port] for port in ports]

    def flush(self) -> None:
        """Empty every primary (their replicas follow)."""
        import redis

        for node in self.primaries():
            client = redis.Redis(host=HOST, port=node.port)
            client.flushall()
            client.close()

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()


class HitsAgain(threading.Thread):
    """Once ``killed`` is set, write and read back ``key`` every 20 ms until that works.

    ``hits_again_after`` is then the time from the kill to the first cache hit
    on a key the dead primary served: its replica's promotion plus the store
    finding it.
    """

    def __init__(self, url: str, key: str, killed: threading.Event) -> None:
        from mcache.stores import from_url

        super().__init__(daemon=True)
        self.store = from_url(url)
        self.key = key
        self.killed = killed
        self.hits_again_after: float | None = None

    def run(self) -> None:
        from mcache.errors import StoreUnavailable

        self.killed.wait()
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < 60:
            n += 1
            value = str(n).encode()
            try:
                self.store.set(self.key, value, 60)
                if self.store.get(self.key) == value:
                    self.hits_again_after = time.monotonic() - started
                    break
            except StoreUnavailable:
                pass
            time.sleep(0.02)
        self.store.close()
