"""``MCACHE_ONLINE_NOISE``: ``{% online_count %}`` shows the count blurred by that fraction;
a value that is no fraction is a system check error, not a broken page."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.core.checks import run_checks
from django.template import Context, Template
from django.test import override_settings

from mcache import FakeClock

pytestmark = pytest.mark.django_db


def shown_counts(times: int) -> set[int]:
    template = Template("{% load mcache %}{% online_count %}")
    return {int(template.render(Context())) for _ in range(times)}


@pytest.fixture
def four_hundred_online(monkeypatch: pytest.MonkeyPatch) -> None:
    caches["default"].clear()
    core = caches["default"].mcache
    clock = FakeClock(1_800_000_000.0)
    monkeypatch.setattr(core, "clock", clock)
    site = caches["default"].online_counter("site")
    for visitor in range(400):
        site.hit(f"visitor-{visitor}")
    clock.advance(site.slot_len)  # their slot is complete: counted


@pytest.mark.usefixtures("four_hundred_online")
def test_online_count_shows_the_exact_count_by_default() -> None:
    assert shown_counts(20) == {400}


@pytest.mark.usefixtures("four_hundred_online")
def test_online_count_is_blurred_by_the_settings_noise() -> None:
    with override_settings(MCACHE_ONLINE_NOISE=0.05):
        shown = shown_counts(100)
    assert shown <= set(range(380, 421)) and len(shown) > 5, shown


def test_a_noise_that_is_no_fraction_is_a_check_error() -> None:
    with override_settings(MCACHE_ONLINE_NOISE=5):
        errors = [e for e in run_checks() if e.id == "django_mcache.E003"]
    assert len(errors) == 1
    assert "MCACHE_ONLINE_NOISE must be a fraction from 0" in errors[0].msg
    with override_settings(MCACHE_ONLINE_NOISE=0.05):
        assert not [e for e in run_checks() if e.id == "django_mcache.E003"]
