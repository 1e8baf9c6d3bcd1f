"""Worker processes for the queue tests: Celery, RQ and Django Tasks, started for real.

A worker runs in a session of its own (so a test can kill it and its pool
children at once) and is ready when it creates the file its environment names
(see :mod:`tests.queues.ready`): no test reads a tool's own log wording. RabbitMQ is the
machine's (127.0.0.1:5672, guest/guest): skipped with a message where none
answers, a failure under ``MCACHE_REQUIRE_SERVERS=1``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_SERVERS
from tests.queues.ready import READY

ROOT = Path(__file__).resolve().parents[2]
RABBITMQ = ("127.0.0.1", 5672)


class Worker:
    """One queue worker process, with its log, killable with its children."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv = argv
        self.log = tempfile.NamedTemporaryFile(prefix="mcache-worker-", suffix=".log", delete=False)  # noqa: SIM115
        self.ready = Path(f"{self.log.name}.ready")
        self.env = {**env, READY: str(self.ready)}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> Worker:
        self.process = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        if self.wait_until(self.ready.exists, timeout):
            return self
        raise RuntimeError(f"worker {self.argv[2:5]} did not start:\n{self.text()[-3000:]}")

    def text(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def wait_until(self, done: Callable[[], object], timeout: float = 30) -> bool:
        """Wait until ``done()`` is true; False at the timeout or if the worker exited."""
        deadline = time.monotonic() + timeout
        while not done():
            exited = self.process is None or self.process.poll() is not None
            if exited or time.monotonic() > deadline:
                return bool(done())
            time.sleep(0.05)
        return True

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the worker and every process of its session (RQ's work horse leaves its
        process group, not its session), and wait for the worker."""
        if self.process is None or self.process.poll() is not None:
            return
        for pid in _session_of(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        self.process.wait(30)

    def pause(self, paused: bool) -> None:
        """Stop (SIGSTOP) or continue (SIGCONT) the worker's whole session."""
        if self.process is not None and self.process.poll() is None:
            for pid in _session_of(self.process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def stop(self) -> None:
        self.kill()
        Path(self.log.name).unlink(missing_ok=True)
        self.ready.unlink(missing_ok=True)


def _session_of(leader: int) -> list[int]:
    """Return the pids of the processes in ``leader``'s session (Linux's /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[3]) == leader:  # stat field 6: the session id
                    pids.append(int(entry.name))
    return pids


def queue_env(**extra: str) -> dict[str, str]:
    """The environment of the web and worker processes: this one, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return {**env, "MCACHE_QUEUE_NAMESPACE": f"q{uuid.uuid4().hex[:8]}", **extra}


def celery_worker(env: dict[str, str], queue: str) -> Worker:
    name = f"mcache-{uuid.uuid4().hex[:6]}@%h"
    argv = [sys.executable, "-m", "celery", "-A", "tests.queues.celery_app", "worker",
            "-Q", queue, "-c", "2", "--loglevel=info", "--without-mingle", "--without-gossip",
            "-n", name]  # fmt: skip
    return Worker(argv, env)


def rq_worker(env: dict[str, str], url: str, queue: str) -> Worker:
    """``rq worker``, with the builders imported before it forks a work-horse per job.

    As RQ's performance notes advise: without it every job re-imports them
    (and creates their cache) in its fork, 43 ms of CPU a job here against 16.
    """
    main = "import tests.queues.builders; from rq.cli import main; main()"
    argv = [sys.executable, "-c", main, "worker", "-w", "tests.queues.ready.ReadyWorker",
            "-u", url, queue]  # fmt: skip
    return Worker(argv, env)


def tasks_worker(env: dict[str, str]) -> Worker:
    argv = [sys.executable, "-m", "django", "db_worker", "--queue-name", "mcache",
            "--interval", "0.1", "--no-startup-delay"]  # fmt: skip
    return Worker(argv, env)


@pytest.fixture
def rabbitmq() -> str:
    """Return the machine's RabbitMQ URL, or skip (fail when servers are required)."""
    try:
        socket.create_connection(RABBITMQ, timeout=1).close()
    except OSError:
        message = "no RabbitMQ answers on 127.0.0.1:5672 (the machine's service)"
        if REQUIRE_SERVERS:
            pytest.fail(f"MCACHE_REQUIRE_SERVERS=1 but {message}", pytrace=False)
        pytest.skip(message)
    return "amqp://guest:guest@127.0.0.1:5672//"


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """Collects the workers a test starts, and stops them all at its end."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()
