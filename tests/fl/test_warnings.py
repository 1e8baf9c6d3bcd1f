"""Flask: one warning at init_app when MCACHE_URL was left unset and the app is live."""

from __future__ import annotations

import inspect
import warnings

import pytest
from flask import Flask

from flask_mcache import MCache
from mcache.errors import MCacheWarning


def new_app(**config: object) -> Flask:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(config)
    return app


def test_memory_by_default_outside_debug_and_testing_warns_once_with_the_fix() -> None:
    with pytest.warns(MCacheWarning, match=r"not set.*memory://.*flask shell.*memcached://") as c:
        MCache(new_app())
    assert len([w for w in c if issubclass(w.category, MCacheWarning)]) == 1
    with pytest.warns(MCacheWarning):
        MCache(new_app(MCACHE_URL=""))


def test_memory_chosen_in_so_many_words_is_not_warned() -> None:
    """As the README's Flask snippet writes it: run as a script, it prints nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", MCacheWarning)
        MCache(new_app(MCACHE_URL="memory://"))


@pytest.mark.parametrize("mode", ["DEBUG", "TESTING"])
def test_debug_and_testing_apps_are_not_warned(mode: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", MCacheWarning)
        MCache(new_app(**{mode: True}))


def test_a_shared_store_is_not_warned(memcached_url: str, redis_url: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", MCacheWarning)
        MCache(new_app(MCACHE_URL=memcached_url))
        MCache(new_app(MCACHE_URL=redis_url))


def warned_at(caught: pytest.WarningsRecorder, category: type[Warning]) -> tuple[str, int]:
    (warning,) = [w for w in caught if issubclass(w.category, category)]
    return warning.filename, warning.lineno


def test_the_warning_points_at_the_line_that_gave_the_app_its_cache() -> None:
    """Not at mcache's own ``init_app`` line: at the user's ``MCache(app)`` or ``init_app``."""
    here = inspect.currentframe()
    assert here is not None
    with pytest.warns(MCacheWarning) as caught:
        line = here.f_lineno + 1
        MCache(new_app())
    assert warned_at(caught, MCacheWarning) == (__file__, line)
    extension = MCache()
    with pytest.warns(MCacheWarning) as caught:
        line = here.f_lineno + 1
        extension.init_app(new_app())
    assert warned_at(caught, MCacheWarning) == (__file__, line)


def test_an_unsigned_pickle_warning_points_at_the_users_cache(memcached_url: str) -> None:
    from mcache import Cache
    from mcache.errors import UnsignedPickleWarning

    here = inspect.currentframe()
    assert here is not None
    with pytest.warns(UnsignedPickleWarning) as caught:
        line = here.f_lineno + 1
        Cache(memcached_url)
    assert warned_at(caught, UnsignedPickleWarning) == (__file__, line)
