"""``flask mcache warm``: cached results built (or queued) from a list, with progress."""

from __future__ import annotations

import pytest

from tests.fl import warm_app


@pytest.mark.parametrize("queue", [False, True])
def test_warm_builds_every_item(memcached_url: str, queue: bool) -> None:
    app = warm_app.create_app(memcached_url)
    warm_app.built.clear()
    args = ["mcache", "warm", "tests.fl.warm_app.headlines", *(["--queue"] * queue)]
    result = app.test_cli_runner().invoke(args=args)
    assert result.exit_code == 0, result.output
    assert "warm: 5/5" in result.output
    assert f"warmed 5: {'queued' if queue else 'built'} 5" in result.output
    with app.app_context():
        assert [warm_app.headline(n) for n in range(5)] == [f"headline {n}" for n in range(5)]
    assert sorted(warm_app.built) == list(range(5)), "built once each, then hits"


def test_a_bad_source_is_a_clear_error(memcached_url: str) -> None:
    app = warm_app.create_app(memcached_url)
    result = app.test_cli_runner().invoke(args=["mcache", "warm", "tests.fl.nowhere.items"])
    assert result.exit_code != 0 and "cannot import 'tests.fl.nowhere.items'" in result.output
