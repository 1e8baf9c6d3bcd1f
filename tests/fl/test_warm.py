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


def test_a_flask_cached_function_goes_to_a_worker_as_a_job(memcached_url: str) -> None:
    """What a queue worker in an app context does with a Flask app's cached function."""
    from mcache.engine.rebuild import run

    app = warm_app.create_app(memcached_url, MCACHE_REFRESH="background")
    handed = []
    with app.app_context():
        cache = app.extensions["mcache"]
        cache.refresher = lambda job: handed.append(job) or True
        warm_app.built.clear()
        warm_app.headline(7)
        warm_app.headline.refresh(7)
        key = cache.key(*warm_app.headline.for_cache().key(7))
        entry_bytes = cache.store.get(key)
        stale = cache.codec.loads(entry_bytes, key)
        stale[2] = cache.clock.time_ms() - 1000
        cache.store.set(key, cache.codec.dumps(stale, key), 600)
        assert warm_app.headline(7) == "headline 7"  # stale, served; the rebuild handed over
        payload = handed[0].hand_off(60)
        assert payload is not None and '"flask_mcache:current_cache:"' in payload
        assert run(payload) == "built"
    assert warm_app.built == [7, 7, 7], "built, refreshed, then built by the 'worker'"
