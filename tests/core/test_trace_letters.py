"""The trace letters are written down once (``mcache.observe.trace.LETTERS``): the docs'
table, the stats commands' legend and every letter the core records agree with it."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mcache import Cache
from mcache.observe.trace import LEGEND, LETTERS

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_table_lists_every_letter_and_no_other() -> None:
    page = (ROOT / "docs" / "reference" / "trace-letters.md").read_text()
    documented = dict(re.findall(r"^\| `([A-Z])` \| (.+?) \|$", page, flags=re.M))
    assert documented.keys() == LETTERS.keys()
    for letter, meaning in LETTERS.items():
        assert documented[letter].startswith(meaning.split(":")[0]), letter


def test_every_letter_the_core_records_is_in_the_table() -> None:
    recorded: set[str] = set()
    for source in (ROOT / "core").rglob("*.py"):
        recorded |= set(re.findall(r"trace\([^()]*?,\s*\"([A-Z])\"\)", source.read_text()))
    assert recorded, "no trace call found: the pattern no longer matches the core's calls"
    assert recorded <= LETTERS.keys(), recorded - LETTERS.keys()


def test_the_legend_names_every_letter() -> None:
    assert [part.split()[0] for part in LEGEND.split(", ")] == list(LETTERS)


@pytest.mark.parametrize("server", ["memcached", "memcached_text"])
def test_a_waiter_on_another_callers_build_traces_each_lock_attempt(
    request: pytest.FixtureRequest, server: str, tmp_path: Path
) -> None:
    """A caller that finds the key's build under way elsewhere (the lock's ``add`` lost on
    the text protocol, the lease bid lost on the meta protocol) traces an ``L`` for every
    attempt, then the ``H`` of the entry it finds: ``MLL…H`` on both protocols."""
    url = request.getfixturevalue(f"{server}_url")
    builder = Cache(url, namespace="contention", trace_dir=tmp_path / "builder")
    waiter = Cache(url, namespace="contention", trace_dir=tmp_path / "waiter")
    building, release = threading.Event(), threading.Event()

    def slow_build() -> str:
        building.set()
        assert release.wait(10)
        return "built"

    with ThreadPoolExecutor(2) as pool:
        built = pool.submit(builder.get_or_build, "page", slow_build, ttl=60)
        assert building.wait(10)
        waited = pool.submit(waiter.get_or_build, "page", lambda: "not mine", ttl=60, wait=10)
        time.sleep(0.4)  # the waiter polls the store meanwhile, bidding each time
        release.set()
        assert (built.result(10), waited.result(10)) == ("built", "built")
    key = builder.key("page")
    assert builder.tracer.read(key) == "MLWU"
    letters = waiter.tracer.read(key)
    assert re.fullmatch(r"ML{2,}H", letters), letters
