"""Real memcached, redis-server and PostgreSQL processes for the tests.

The suite starts its own servers on free 127.0.0.1 ports, so it never touches a
server the machine already runs, and it kills exactly the processes it started.
A test that needs to crash a server (failover, lost locks) kills and restarts
one of these on the same port.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable

__all__ = [
    "SentinelGroup",
    "ServerProcess",
    "django_postgres",
    "free_port",
    "memcached_process",
    "postgres_bindir",
    "postgres_process",
    "redis_process",
    "sentinel_process",
]

HOST = "127.0.0.1"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class ServerProcess:
    """One server process that can be started, killed and restarted on its port."""

    def __init__(
        self,
        name: str,
        binary: str,
        argv: Callable[[int], list[str]],
        ping: bytes,
        pong: bytes,
        user: str | None = None,
    ) -> None:
        self.name = name
        self.user = user
        self.binary = binary
        self._argv = argv
        self._ping = ping
        self._pong = pong
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server

    @property
    def address(self) -> str:
        """Return ``127.0.0.1:port``."""
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 10.0) -> ServerProcess:
        """Start the server and wait until it answers; retry on a port taken meanwhile."""
        for _attempt in range(3):
            self.process = subprocess.Popen(
                [self.binary, *self._argv(self.port)],
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                user=self.user,
            )
            if self._wait_ready(timeout):
                return self
            self.kill()
            self.port = free_port()
        self._log.seek(0)
        output = self._log.read().decode(errors="replace")[-2000:]
        raise RuntimeError(f"{self.name} did not start on {self.address}: {output}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            if self.answers():
                return True
            time.sleep(0.02)
        return False

    def answers(self) -> bool:
        """Return whether the server replies to its ping right now."""
        try:
            with socket.create_connection((HOST, self.port), timeout=0.5) as conn:
                conn.sendall(self._ping)
                return conn.recv(256).startswith(self._pong)
        except OSError:
            return False

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Kill the process (SIGKILL by default: a crash, not a clean shutdown)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> ServerProcess:
        """Start again on the same port, empty."""
        self.kill()
        for _attempt in range(50):
            try:
                return self._start_same_port()
            except RuntimeError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} could not restart on {self.address}")

    def _start_same_port(self) -> ServerProcess:
        self.process = subprocess.Popen(
            [self.binary, *self._argv(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            user=self.user,
        )
        if not self._wait_ready(10.0):
            self.kill()
            raise RuntimeError(f"{self.name} did not restart on {self.address}")
        return self

    def __repr__(self) -> str:
        state = "running" if self.process and self.process.poll() is None else "stopped"
        return f"<{self.name} {self.address} {state}>"


def memcached_process(memory_mb: int = 64, binary: str | None = None) -> ServerProcess:
    """Describe a memcached on a free port (``-m`` MiB, TCP only, loopback)."""
    path = binary or shutil.which("memcached") or "memcached"

    def argv(port: int) -> list[str]:
        args = ["-l", HOST, "-p", str(port), "-U", "0", "-m", str(memory_mb), "-t", "2"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args += ["-u", "root"]
        return args

    return ServerProcess("memcached", path, argv, b"version\r\n", b"VERSION")


def redis_process(binary: str | None = None, replica_of: str | None = None) -> ServerProcess:
    """Describe a redis-server on a free port that keeps nothing on disk.

    ``replica_of`` (``host:port``): it starts as that server's replica.
    """
    path = binary or shutil.which("redis-server") or "redis-server"
    workdir = tempfile.mkdtemp(prefix="mcache-redis-")
    follow = ["--replicaof", *replica_of.split(":")] if replica_of else []

    def argv(port: int) -> list[str]:
        return [
            "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
            "--dir", workdir, "--protected-mode", "yes", *follow,
        ]  # fmt: skip

    return ServerProcess("redis-server", path, argv, b"PING\r\n", b"+PONG")


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


class SentinelGroup:
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


SSL_REQUEST = b"\x00\x00\x00\x08\x04\xd2\x16\x2f"
"""PostgreSQL's SSLRequest: a listening server answers ``N`` (or ``S``), even while starting."""


def postgres_bindir() -> str | None:
    """Return the directory of ``initdb`` and ``postgres`` (Debian keeps them off PATH)."""
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return os.path.dirname(candidates[0]) if candidates else None


def django_postgres(port: int | str) -> dict[str, str]:
    """Return a Django ``DATABASES`` entry for the ``postgres`` database of a server here."""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "HOST": HOST,
        "PORT": str(port),
    }


def postgres_process(bindir: str) -> ServerProcess:
    """Initialise a throwaway cluster (trust auth, no fsync) and describe its server.

    PostgreSQL refuses to run as root: as root, the cluster belongs to the
    ``postgres`` user and the server runs as that user.
    """
    user = "postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    datadir = tempfile.mkdtemp(prefix="mcache-pg-")
    if user:
        shutil.chown(datadir, user)
    subprocess.run(
        [os.path.join(bindir, "initdb"), "-D", datadir, "-A", "trust", "-U", "postgres",
         "--no-sync", "-E", "UTF8", "--locale", "C"],
        check=True, capture_output=True, user=user,
    )  # fmt: skip

    def argv(port: int) -> list[str]:
        return [
            "-D", datadir, "-p", str(port), "-h", HOST, "-k", datadir, "-c", "fsync=off",
            "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            "-c", "max_connections=300",
        ]  # fmt: skip

    server = ServerProcess(
        "postgres", os.path.join(bindir, "postgres"), argv, SSL_REQUEST, b"N", user=user
    )
    server.datadir = datadir  # type: ignore[attr-defined]
    return server
