"""Trace files: kept open so a hot key's tracing costs a ``write`` per letter, safe across
threads and forked processes, and never failing a request when they cannot be written."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from mcache import Cache
from mcache.observe import trace
from mcache.observe.trace import OPEN_FILES, Tracer


def descriptors_into(folder: Path) -> list[str]:
    """Return the files under ``folder`` this process holds open (from /proc/self/fd)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed already
        if target.startswith(str(folder)):
            held.append(target)
    return held


def test_a_hot_keys_file_stays_open_and_every_letter_is_readable_at_once(tmp_path: Path) -> None:
    cache = Cache("memory://", namespace="hot", trace_dir=str(tmp_path))
    for _ in range(200):
        cache.get_or_build("page", lambda: "v", ttl=60)
    key = cache.key("page")
    assert cache.tracer.read(key) == "MLWU" + "H" * 199, "nothing waits in a buffer"
    assert descriptors_into(tmp_path) == [str(cache.tracer.path(key))], "one open file"


def test_the_files_kept_open_are_bounded(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path)
    for number in range(OPEN_FILES * 3):
        tracer.event(f"key{number}", "M")
    assert len(descriptors_into(tmp_path)) == OPEN_FILES
    assert all(tracer.read(f"key{number}") == "M" for number in range(OPEN_FILES * 3))
    tracer.close()
    assert descriptors_into(tmp_path) == []


def test_threads_tracing_at_once_lose_no_letter(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path)
    start = threading.Barrier(8)

    def trace_many(number: int) -> None:
        start.wait()
        for index in range(500):
            tracer.event("shared", "H")
            tracer.event(f"own{number}", "MLWU"[index % 4])

    threads = [threading.Thread(target=trace_many, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tracer.read("shared") == "H" * 4000
    assert all(tracer.read(f"own{n}") == "MLWU" * 125 for n in range(8))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_child_forked_while_a_thread_held_the_tracer_traces_to_the_same_file(
    tmp_path: Path,
) -> None:
    """A fork copies the lock as the parent's threads left it: held, by a thread the child
    does not have. The child's tracer starts with a lock of its own, and its letters go to
    the same file as the parent's."""
    tracer = Tracer(tmp_path)
    tracer.event("page", "M")
    held, release = threading.Event(), threading.Event()

    def hold_the_tracer() -> None:
        with tracer._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_tracer)
    holder.start()
    assert held.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: trace, and say by the exit status whether it could
        try:
            tracer.event("page", "H")
            tracer.event("page", "H")
        finally:
            os._exit(0)
    release.set()
    holder.join()
    deadline = time.monotonic() + 10
    while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if ended[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the lock its parent's thread held")
    status = ended[1]
    assert os.waitstatus_to_exitcode(status) == 0
    tracer.event("page", "W")
    assert sorted(tracer.read("page")) == sorted("MHHW")


def test_a_deleted_trace_directory_comes_back_and_fails_no_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace, "REOPEN_SECONDS", 0.0)  # reopen at every letter
    folder = tmp_path / "traces"
    cache = Cache("memory://", namespace="gone", trace_dir=str(folder))
    assert cache.get_or_build("page", lambda: "v", ttl=60) == "v"
    shutil.rmtree(folder)
    assert cache.get_or_build("page", lambda: "v", ttl=60) == "v"
    assert cache.get_or_build("other", lambda: "w", ttl=60) == "w"
    assert cache.tracer.read(cache.key("page")) == "H"
    assert cache.tracer.read(cache.key("other")) == "MLWU"


def test_a_trace_that_cannot_be_written_is_logged_once_and_fails_no_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "traces"
    cache = Cache("memory://", namespace="blocked", trace_dir=str(folder))
    folder.rmdir()
    folder.write_text("a file where the trace directory was")
    with caplog.at_level(logging.WARNING, logger="mcache"):
        for _ in range(20):
            assert cache.get_or_build("page", lambda: "v", ttl=60) == "v"
    warnings = [r for r in caplog.records if r.name == "mcache.trace"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "not written" in warnings[0].getMessage()
