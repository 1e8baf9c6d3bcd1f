"""``manage.py mcache_warm``: a list of cached results built (or queued) before visitors come."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.cache import caches
from django.core.management import CommandError, call_command

from tests.dj import warm_items


@pytest.fixture(autouse=True)
def empty_cache():
    caches["default"].clear()
    warm_items.built.clear()


@pytest.mark.parametrize("queue", [False, True])
def test_warm_builds_every_item_with_progress(queue: bool) -> None:
    out = StringIO()
    call_command("mcache_warm", "tests.dj.warm_items.teasers", *(["--queue"] * queue), stdout=out)
    text = out.getvalue()
    outcome = "queued" if queue else "built"
    assert "warm: 2/12" in text and "warm: 12/12" in text, text
    assert f"warmed 12: {outcome} 12" in text
    assert sorted(warm_items.built) == list(range(12))
    assert [warm_items.teaser(n) for n in range(12)] == [f"teaser {n}" for n in range(12)]
    assert len(warm_items.built) == 12, "every later read is a hit"


def test_warm_rebuilds_what_is_cached_already() -> None:
    warm_items.teaser(3)
    call_command("mcache_warm", "tests.dj.warm_items.teasers", stdout=StringIO())
    assert warm_items.built.count(3) == 2


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("tests.dj.warm_items.nowhere", "cannot import 'tests.dj.warm_items.nowhere'"),
        ("tests.dj.warm_items.not_a_list", "yield (cached_function, args)"),
    ],
)
def test_a_bad_source_says_what_to_write(source: str, message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("mcache_warm", source, stdout=StringIO())
