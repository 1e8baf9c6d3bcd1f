"""Real memcached, redis-server and PostgreSQL processes for the tests.

The suite starts its own servers on free 127.0.0.1 ports, so it never touches a
server the machine already runs, and it kills exactly the processes it started.
A test that needs to crash a server (failover, lost locks) kills and restarts
one of these on the same port.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable

__all__ = [
    "ServerProcess",
    "VarnishProcess",
    "django_postgres",
    "free_port",
    "memcached_process",
    "postgres_bindir",
    "postgres_process",
    "redis_process",
    "varnish_process",
]

HOST = "127.0.0.1"


HIGHEST_PORT = 55535
"""A Redis Cluster node's bus listens 10,000 ports above it: redis-server refuses more."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1, at most :data:`HIGHEST_PORT`, that nothing listens on.

    The kernel hands out ephemeral ports up to 60999; about one in five is too
    high for a cluster node, so those are passed over.
    """
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((HOST, 0))
            port = probe.getsockname()[1]
        if port <= HIGHEST_PORT:
            return port


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
        connect: Callable[[int], socket.socket] | None = None,
    ) -> None:
        """``connect(port)``: how to open a connection for the ping (TLS, say); plain TCP
        unless given."""
        self.name = name
        self._connect = connect or (lambda port: socket.create_connection((HOST, port), 0.5))
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
            with self._connect(self.port) as conn:
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

    def restart_with_ping(self, ping: bytes, pong: bytes) -> ServerProcess:
        """Restart on the same port, ready when it answers ``ping`` with ``pong`` (a server
        whose password just changed)."""
        self._ping, self._pong = ping, pong
        return self.restart()

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


def memcached_process(
    memory_mb: int = 64,
    binary: str | None = None,
    threads: int = 2,
    options: tuple[str, ...] = (),
    ping: tuple[bytes, bytes] = (b"version\r\n", b"VERSION"),
    connect: Callable[[int], socket.socket] | None = None,
) -> ServerProcess:
    """Describe a memcached on a free port (``-m`` MiB, TCP only, loopback, ``-t threads``).

    Latency benchmarks ask for one thread: memcached hands connections to its
    threads in turn, and on a small VM a thread that sleeps on the other CPU
    answers ~50 µs later than one woken on the caller's, so two clients of the
    same server would otherwise be timed against different threads. ``options``: more
    command-line settings (``-Z``, ``-Y file``), with the ``ping`` (request, reply start)
    and ``connect`` that tell such a server is ready.
    """
    path = binary or shutil.which("memcached") or "memcached"

    def argv(port: int) -> list[str]:
        args = ["-l", HOST, "-p", str(port), "-U", "0", "-m", str(memory_mb), "-t", str(threads)]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args += ["-u", "root"]
        return [*args, *options]

    return ServerProcess("memcached", path, argv, *ping, connect=connect)


def redis_process(
    binary: str | None = None,
    replica_of: str | None = None,
    options: tuple[str, ...] = (),
    tls: tuple[str, str, str] | None = None,
    ping: tuple[bytes, bytes] = (b"PING\r\n", b"+PONG"),
    connect: Callable[[int], socket.socket] | None = None,
) -> ServerProcess:
    """Describe a redis-server on a free port that keeps nothing on disk.

    ``replica_of`` (``host:port``): it starts as that server's replica; ``options``
    are more command-line settings (``"--cluster-enabled", "yes"``); ``tls`` (certificate,
    key, CA files): it listens with TLS only, on its port; ``ping`` and ``connect`` tell such
    a server (or one with ACL users) is ready.
    """
    path = binary or shutil.which("redis-server") or "redis-server"
    workdir = tempfile.mkdtemp(prefix="mcache-redis-")
    follow = ["--replicaof", *replica_of.split(":")] if replica_of else []

    def argv(port: int) -> list[str]:
        ports = ["--port", str(port)]
        if tls is not None:
            cert, key, ca = tls
            ports = [
                "--port",
                "0",
                "--tls-port",
                str(port),
                "--tls-cert-file",
                cert,
                "--tls-key-file",
                key,
                "--tls-ca-cert-file",
                ca,
                "--tls-auth-clients",
                "no",
            ]
        return [
            *ports, "--bind", HOST, "--save", "", "--appendonly", "no",
            "--dir", workdir, "--protected-mode", "yes", *follow, *options,
        ]  # fmt: skip

    return ServerProcess("redis-server", path, argv, *ping, connect=connect)


class VarnishProcess(ServerProcess):
    """A varnishd: visitors on :attr:`address`, purges on :attr:`purge_address`."""

    def __init__(self, binary: str, argv: Callable[[int], list[str]], purge_port: int) -> None:
        # A PURGE on the visitors' address is answered by the VCL itself (a 403): a ping
        # that never reaches the backend.
        super().__init__("varnishd", binary, argv, b"PURGE / HTTP/1.0\r\n\r\n", b"HTTP/1.")
        self.purge_port = purge_port

    @property
    def purge_address(self) -> str:
        """Return ``127.0.0.1:port`` of the listening address named ``purge``."""
        return f"{HOST}:{self.purge_port}"


def varnish_process(vcl: str, backend_port: int) -> VarnishProcess:
    """Describe a varnishd on free ports running ``vcl`` (a VCL file's text) with its
    backend on ``backend_port`` (the ``.port`` of its ``backend default``), 32 MB of
    memory, no management port, and a second listening address named ``purge``."""
    path = shutil.which("varnishd") or "/usr/sbin/varnishd"
    workdir = tempfile.mkdtemp(prefix="mcache-varnish-")
    os.chmod(workdir, 0o755)  # varnishd's own user reads the VCL and works here
    vcl_file = os.path.join(workdir, "site.vcl")
    with open(vcl_file, "w") as out:
        out.write(re.sub(r'\.port = "\d+";', f'.port = "{backend_port}";', vcl, count=1))
    purge_port = free_port()

    def argv(port: int) -> list[str]:
        return [
            "-F", "-a", f"{HOST}:{port}", "-a", f"purge={HOST}:{purge_port}", "-f", vcl_file,
            "-n", workdir, "-s", "malloc,32m", "-T", "none",
        ]  # fmt: skip

    return VarnishProcess(path, argv, purge_port)


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
