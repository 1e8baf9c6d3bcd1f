"""``MCACHE_ONLINE_NOISE``: Flask's ``online_count()`` shows the count blurred by that
fraction; a value that is no fraction fails at ``init_app``, naming the key."""

from __future__ import annotations

import pytest
from flask import Flask, render_template_string

from flask_mcache import MCache
from mcache import FakeClock
from mcache.errors import ConfigError


def app_with(monkeypatch: pytest.MonkeyPatch, **config: object) -> Flask:
    """A Flask app whose online counter holds 400 complete visits."""
    app = Flask(__name__)
    app.config.update(SECRET_KEY="t", MCACHE_NAMESPACE="noise", **config)
    mcache = MCache(app)
    core = app.extensions["mcache"]
    clock = FakeClock(1_800_000_000.0)
    monkeypatch.setattr(core, "clock", clock)
    with app.app_context():
        site = mcache.online_counter("site")
        for visitor in range(400):
            site.hit(f"visitor-{visitor}")
        clock.advance(site.slot_len)
    return app


def shown_counts(app: Flask, times: int) -> set[int]:
    with app.test_request_context():
        return {int(render_template_string("{{ online_count() }}")) for _ in range(times)}


def test_online_count_is_exact_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert shown_counts(app_with(monkeypatch), 20) == {400}


def test_online_count_is_blurred_by_the_configs_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = shown_counts(app_with(monkeypatch, MCACHE_ONLINE_NOISE=0.05), 100)
    assert shown <= set(range(380, 421)) and len(shown) > 5, shown


@pytest.mark.parametrize(
    ("noise", "message"),
    [(2, "MCACHE_ONLINE_NOISE must be a fraction from 0"), ("5%", "MCACHE_ONLINE_NOISE must be a")],
)
def test_a_noise_that_is_no_fraction_fails_at_init_app(noise: object, message: str) -> None:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="t", MCACHE_ONLINE_NOISE=noise)
    with pytest.raises(ConfigError, match=message):
        MCache(app)
