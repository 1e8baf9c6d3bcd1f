"""Replica-lag routing in Django: the rebuild an invalidation sets off reads the primary.

Two real SQLite databases: ``default`` (the primary) and ``lagging`` (its
replica), which receives the primary's data only when a test copies it (the
SQLite backup API), so a read that went to the replica shows the old data.
Each test changes a label on the primary behind the ORM's back (no tag bumps
for it), then sets off a rebuild by a tag: the label read in the rebuild says
which database answered it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.cache import caches
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connections
from django.test import override_settings

import mcache
from django_mcache.config import cache_from_settings
from django_mcache.functions import cached
from tests.dj.blog.models import Label, Post

LAG = 1.0
BACKEND = "django_mcache.backend.MCacheBackend"
pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "lagging"])


def replicate() -> None:
    """The replica catches up: a copy of the whole primary."""
    primary, replica = connections["default"], connections["lagging"]
    primary.ensure_connection()
    replica.ensure_connection()
    primary.connection.backup(replica.connection)


def rename_on_the_primary(label: Label, name: str) -> None:
    """A change the replica has not replayed yet, made without the ORM's tag bumps."""
    Label.objects.using("default").filter(pk=label.pk).update(name=name)


@pytest.fixture
def site(memcached_url: str, request: pytest.FixtureRequest) -> Iterator[Label]:
    caches_setting = {
        "default": {
            "BACKEND": BACKEND,
            "LOCATION": memcached_url,
            "OPTIONS": {"namespace": f"fr{time.monotonic_ns()}"},
        }
    }
    with override_settings(
        CACHES=caches_setting,
        DATABASE_ROUTERS=["django_mcache.routers.FreshReadRouter"],
        MCACHE_REPLICA_DB="lagging",
        MCACHE_REPLICATION_LAG=LAG,
    ):
        label = Label.objects.create(name="old")
        replicate()
        yield label


def settle() -> None:
    """Let every tag created or bumped so far grow older than the lag."""
    time.sleep(LAG + 0.1)


def label_name() -> str:
    return Label.objects.get().name


def test_a_rebuild_set_off_by_an_object_save_reads_the_primary(site: Label) -> None:
    post = Post.objects.create(title="hello")
    replicate()
    page = cached(60, depends_on=post)(lambda: f"{Post.objects.get().title} [{label_name()}]")
    assert page() == "hello [old]"
    settle()
    rename_on_the_primary(site, "new")
    post.title = "hello again"
    post.save()  # bumps the post's tags: the page's rebuild reads the label too
    assert page() == "hello again [new]", "the label was read from the primary"


def test_a_rebuild_set_off_by_a_declared_tag_reads_the_primary(site: Label) -> None:
    post = Post.objects.create(title="hello")
    replicate()
    feed = cached(60, tags=["feed"])(label_name)  # Post.cache_tags() declares "feed"
    assert feed() == "old"
    settle()
    rename_on_the_primary(site, "new")
    post.save()
    assert feed() == "new"


def test_a_rebuild_set_off_by_invalidate_reads_the_primary(site: Label) -> None:
    labels = cached(60, tags=["labels"])(label_name)
    assert labels() == "old"
    settle()
    rename_on_the_primary(site, "new")
    caches["default"].invalidate("labels")
    assert labels() == "new"


def test_a_rebuild_set_off_by_a_nested_entrys_tag_reads_the_primary(site: Label) -> None:
    sidebar = cached(60, tags=["sidebar"])(lambda: "sidebar")
    page = cached(60)(lambda: f"{sidebar()} + {label_name()}")  # no tag of its own
    assert page() == "sidebar + old"
    settle()
    rename_on_the_primary(site, "new")
    caches["default"].invalidate("sidebar")  # the page recorded the sidebar's tag
    assert page() == "sidebar + new"


def test_with_the_router_a_users_new_group_is_read_from_the_primary(site: Label) -> None:
    """Django's auth relations, left out without the router, are followed with it: its
    reads depend on every tracked model's tag, a user's groups on ``model:auth.group``."""
    user, group = User.objects.create_user("editor"), Group.objects.create(name="editors")
    replicate()
    settle()
    user.groups.add(group)
    assert [g.name for g in user.groups.all()] == ["editors"], "read from the primary"


def test_after_the_lag_the_rebuild_reads_the_replica(site: Label) -> None:
    labels = cached(60, tags=["labels"])(label_name)
    assert labels() == "old"
    settle()
    rename_on_the_primary(site, "new")
    caches["default"].invalidate("labels")
    settle()  # the replica has had the lag to catch up (this one has not: it shows)
    assert labels() == "old", "read from the replica"
    replicate()
    caches["default"].invalidate("labels")
    assert labels() == "new"


def test_a_build_with_no_recent_tag_reads_the_replica(site: Label) -> None:
    seen = []

    def labels() -> str:
        seen.append(mcache.read_primary())
        return label_name()

    cached(60, tags=["labels"])(lambda: None)()  # the tag exists, and is old by the build
    settle()
    rename_on_the_primary(site, "new")
    assert cached(60, tags=["labels"], key_prefix="cold")(labels)() == "old"
    assert seen == [False]
    assert not mcache.read_primary(), "outside a build, nothing says primary"


def test_the_lag_setting_is_checked_at_start_up() -> None:
    named = r"MCACHE_REPLICATION_LAG must be .* such as 2\.0 \(0: off\), got '2s'"
    with (
        override_settings(MCACHE_REPLICATION_LAG="2s"),
        pytest.raises(mcache.errors.ConfigError, match=named),
    ):
        cache_from_settings("memory://", {})
    with (
        override_settings(MCACHE_REPLICATION_LAG=-1, CACHES=dict(settings.CACHES)),
        pytest.raises(SystemCheckError, match="MCACHE_REPLICATION_LAG must be"),
    ):
        call_command("check")  # (CACHES overridden: the backends it made are dropped after)
    with override_settings(DATABASE_ROUTERS=["django_mcache.routers.FreshReadRouter"]):
        assert cache_from_settings("memory://", {}).parts.replication_lag_ms == 2000
    assert cache_from_settings("memory://", {}).parts.replication_lag_ms == 0, "no router: off"
