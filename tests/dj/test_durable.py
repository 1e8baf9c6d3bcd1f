"""LOCATION "db:<alias>": a durable cache on the site's own database, and what goes there."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings

from django_mcache.counters import view_counter
from django_mcache.sessions import SessionStore
from mcache.errors import ConfigError
from tests.dj.blog.models import Post

BACKEND = "django_mcache.backend.MCacheBackend"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def durable(memcached_url: str):
    caches_setting = {
        "default": {"BACKEND": BACKEND, "LOCATION": memcached_url},
        "durable": {"BACKEND": BACKEND, "LOCATION": "db:default", "OPTIONS": {"max_bytes": "64m"}},
    }
    with override_settings(
        CACHES=caches_setting,
        MCACHE_COUNTERS_CACHE="durable",
        SESSION_ENGINE="django_mcache.sessions",
        SESSION_CACHE_ALIAS="durable",
    ):
        yield caches["durable"]


def test_the_durable_cache_lives_in_the_sites_database(durable) -> None:
    durable.set("greeting", {"hello": "world"}, 60)
    assert durable.get("greeting") == {"hello": "world"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM mcache WHERE key LIKE %s", ["%greeting%"])
        assert cursor.fetchone()[0] == 1
    assert durable.add("greeting", "other") is False
    assert durable.incr_version("greeting") == 2


def test_a_write_is_visible_at_once_even_inside_a_request_transaction(durable) -> None:
    with transaction.atomic():
        durable.set("k", "v")
        with connection.cursor() as cursor:  # the request's own connection, mid-transaction
            cursor.execute("SELECT count(*) FROM mcache WHERE key LIKE %s", ["_1_k:%"])
            assert cursor.fetchone()[0] == 1
    with pytest.raises(RuntimeError), transaction.atomic():
        durable.set("kept", "despite the rollback")
        raise RuntimeError
    assert durable.get("kept") == "despite the rollback"


def test_counters_and_sessions_go_to_the_durable_cache(durable, memcached_url: str) -> None:
    post = Post.objects.create(title="t")
    counter = view_counter(Post)
    for _ in range(3):
        counter.incr(post.pk)
    caches["default"].clear()  # memcached flushed: the counts were never there
    assert view_counter(Post).value(post.pk) == 3
    session = SessionStore()
    session["user"] = "alice"
    session.save()
    caches["default"].clear()
    assert SessionStore(session.session_key)["user"] == "alice"


def test_createtable_makes_the_table_and_shows_its_sql(durable, capsys) -> None:
    call_command("mcache_createtable", "durable", "--dry-run")
    assert "CREATE TABLE IF NOT EXISTS mcache" in capsys.readouterr().out
    call_command("mcache_createtable")
    assert "durable: table ready in db:default#mcache" in capsys.readouterr().out


def test_bad_db_locations_name_the_fix() -> None:
    from django_mcache.config import cache_from_settings

    with pytest.raises(ConfigError, match="names no database: DATABASES has default"):
        cache_from_settings("db:nope", {})
    with pytest.raises(ConfigError, match="table name"):
        cache_from_settings("db:default", {"OPTIONS": {"table": "a-b"}})
    with pytest.raises(ConfigError, match="unknown OPTIONS 'prepare'"):
        cache_from_settings("db:default", {"OPTIONS": {"prepare": True}})


def test_db_alias_on_postgresql_through_djangos_own_driver(
    postgres_url: str, postgres_node
) -> None:
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "tests.dj.durable_pg_site", str(postgres_node.port)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert "default: table ready in db:default#mcache_site" in seen["command"]
    assert seen["page"] == {"html": "<p>hi</p>"}
    assert seen["added"] == [True, False]
    assert seen["counted"] == 15
    assert seen["visible"] == 1, "written in autocommit, visible inside the site's transaction"
