"""W001 / W002: what must be shared across processes is warned about when it is not.

Through ``manage.py check``, as a user meets them: printed on memory://,
silent on memcached, and silenced by ``SILENCED_SYSTEM_CHECKS``.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

BACKEND = "django_mcache.backend.MCacheBackend"
SESSIONS = "django_mcache.sessions"


def mcache(location: str, **params: object) -> dict[str, object]:
    return {"BACKEND": BACKEND, "LOCATION": location, "KEY_PREFIX": "chk", **params}


def check_output(**settings: object) -> str:
    out = StringIO()
    with override_settings(**settings):
        call_command("check", stdout=out, stderr=out)
    return out.getvalue()


def test_w001_and_w002_fire_on_the_in_process_store() -> None:
    output = check_output(CACHES={"default": mcache("memory://")}, SESSION_ENGINE=SESSIONS)
    assert "django_mcache.W001" in output
    assert "manage.py shell" in output and "'memcached://127.0.0.1:11211'" in output
    assert "django_mcache.W002" in output
    assert "logs everyone out" in output


def test_both_are_silent_on_memcached(memcached_url: str) -> None:
    output = check_output(CACHES={"default": mcache(memcached_url)}, SESSION_ENGINE=SESSIONS)
    assert "W001" not in output and "W002" not in output


def test_silenced_as_any_django_check() -> None:
    output = check_output(
        CACHES={"default": mcache("memory://")},
        SESSION_ENGINE=SESSIONS,
        SILENCED_SYSTEM_CHECKS=["django_mcache.W001"],
    )
    assert "W001" not in output and "django_mcache.W002" in output


def test_w001_looks_at_the_cache_mcache_cache_names(redis_url: str) -> None:
    caches = {"default": mcache(redis_url), "pages": mcache("memory://", KEY_PREFIX="pg")}
    assert "W001" not in check_output(CACHES=caches)
    output = check_output(CACHES=caches, MCACHE_CACHE="pages")
    assert "django_mcache.W001" in output and "CACHES['pages']" in output


def test_w002_follows_session_cache_alias(memcached_url: str) -> None:
    caches = {"default": mcache(memcached_url), "sessions": mcache("memory://", KEY_PREFIX="s")}
    output = check_output(CACHES=caches, SESSION_ENGINE=SESSIONS, SESSION_CACHE_ALIAS="sessions")
    assert "django_mcache.W002" in output and "W001" not in output
    quiet = check_output(CACHES=caches, SESSION_ENGINE="django.contrib.sessions.backends.db")
    assert "W002" not in quiet


@pytest.mark.parametrize(
    "caches",
    [
        {"default": mcache("tiered://?hot=memory://&cold=memory://")},
        {
            "default": mcache("alias:local"),
            "local": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        },
    ],
    ids=["tiered over memory", "alias of LocMemCache"],
)
def test_other_in_process_stores_count_too(caches: dict) -> None:
    assert "django_mcache.W001" in check_output(CACHES=caches)


def test_a_near_tier_over_memcached_is_shared(memcached_url: str) -> None:
    from urllib.parse import urlencode

    url = "tiered://?" + urlencode({"hot": "memory://", "cold": memcached_url})
    assert "W001" not in check_output(CACHES={"default": mcache(url)})


def test_w003_on_deploy_names_a_server_that_does_not_answer(memcached_url: str) -> None:
    from tests.servers import free_port

    down = f"127.0.0.1:{free_port()}"
    caches = {"default": mcache(f"{memcached_url},{down}?connect_timeout=0.2")}
    out = StringIO()
    with override_settings(CACHES=caches):
        call_command("check", "--deploy", stdout=out, stderr=out)
        assert "W003" not in check_output(CACHES=caches), "only --deploy asks the servers"
    output = out.getvalue()
    assert "django_mcache.W003" in output and f"no answer from {down}" in output, output
    assert memcached_url.removeprefix("memcached://") + "," not in output.split("no answer")[1]
    out = StringIO()
    with override_settings(CACHES={"default": mcache(memcached_url)}):
        call_command("check", "--deploy", stdout=out, stderr=out)
    assert "W003" not in out.getvalue(), out.getvalue()
