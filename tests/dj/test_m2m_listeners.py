"""Many-to-many listeners only on the relations whose changes bump a tag (real Django, SQLite).

While any receiver listens to a relation's table, Django's ``add()`` reads the
rows it is about to add first (``ManyRelatedManager._get_add_plan`` asks
``m2m_changed.has_listeners``; then ``_get_missing_target_ids`` runs a SELECT),
so a relation mcache does not follow must cost exactly what Django alone costs,
measured here with no receiver at all; and one it follows must still refresh the
pages and fragments that depend on it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.cache import caches
from django.db import connection
from django.db.models.signals import m2m_changed
from django.template import Context, Template
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from tests.dj.blog.models import Label, Post

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]

NOTHING_TRACKED = override_settings(MCACHE_MODELS=[])  # no receiver of ours anywhere


@pytest.fixture(autouse=True)
def fresh_cache():
    caches["default"].clear()


def queries_of(change: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as captured:
        change()
    return len(captured)


def new_group() -> Group:
    return Group.objects.create(name=f"group {Group.objects.count()}")


def group_permissions_add() -> int:
    """Queries of adding five permissions to a new group."""
    group, permissions = new_group(), list(Permission.objects.all()[:5])
    return queries_of(lambda: group.permissions.add(*permissions))


def user_relations_add() -> tuple[int, int]:
    """Queries of adding a new user to a group, and of giving it a permission."""
    user = User.objects.create_user(f"user {User.objects.count()}")
    group, permission = new_group(), Permission.objects.first()
    return (
        queries_of(lambda: user.groups.add(group)),
        queries_of(lambda: user.user_permissions.add(permission)),
    )


def post_labels_add() -> int:
    post, label = Post.objects.create(title="p"), Label.objects.create(name="l")
    return queries_of(lambda: post.labels.add(label))


def listened(through: type) -> bool:
    return m2m_changed.has_listeners(through)


def test_djangos_own_count_and_what_a_listener_adds_to_it() -> None:
    """The measure the other tests compare with: a listener costs one SELECT per add()."""
    with NOTHING_TRACKED:
        assert not listened(Group.permissions.through)
        alone = group_permissions_add()
    with override_settings(MCACHE_EXCLUDE_MODELS=[]):  # every relation followed
        assert listened(Group.permissions.through)
        assert group_permissions_add() == alone + 1


def test_djangos_auth_relations_cost_djangos_own_queries_by_default() -> None:
    with NOTHING_TRACKED:
        assert not listened(Group.permissions.through) and not listened(User.groups.through)
        alone = group_permissions_add(), *user_relations_add()
    for relation in (Group.permissions, User.groups, User.user_permissions):
        assert not listened(relation.through), relation.through._meta.label_lower
    assert (group_permissions_add(), *user_relations_add()) == alone


def test_a_relation_between_models_mcache_models_leaves_out_costs_nothing() -> None:
    with NOTHING_TRACKED:
        assert not listened(Group.permissions.through) and not listened(Post.labels.through)
        alone_auth, alone_blog = group_permissions_add(), post_labels_add()
    with override_settings(MCACHE_MODELS=["auth.user"]):
        assert not listened(Group.permissions.through)
        assert group_permissions_add() == alone_auth  # neither a group nor a permission
    with override_settings(MCACHE_MODELS=["auth.user"], MCACHE_EXCLUDE_MODELS=[]):
        assert group_permissions_add() == alone_auth
        assert listened(User.groups.through)  # a user's groups bump the user's tags
    with override_settings(MCACHE_MODELS=["blog.blog"]):
        assert not listened(Post.labels.through)
        assert post_labels_add() == alone_blog
    with override_settings(MCACHE_MODELS=["blog.post"]):
        assert post_labels_add() == alone_blog + 1, "a post's labels bump the post's tags"
    assert listened(Post.labels.through), "back to the site's settings"


@override_settings(MCACHE_MODELS=["blog.post"])
def test_a_fragment_that_depends_on_a_tracked_end_follows_its_relation() -> None:
    block = Template(
        '{% load mcache %}{% cachedblock 60 "labels of" post.pk depends_on=post %}'
        "{% for label in post.labels.all %}{{ label.name }} {% endfor %}{% endcachedblock %}"
    )
    post, news = Post.objects.create(title="p"), Label.objects.create(name="news")
    render = lambda: block.render(Context({"post": Post.objects.get(pk=post.pk)}))  # noqa: E731
    assert render() == ""
    post.labels.add(news)  # Label is not tracked: the post's side bumps
    assert render() == "news "
    news.post_set.remove(post)  # from the untracked side too
    assert render() == ""


@override_settings(MCACHE_MODELS=["blog.label"])
def test_a_page_that_depends_on_the_other_end_follows_its_relation() -> None:
    post, news = Post.objects.create(title="p"), Label.objects.create(name="news")
    assert Client().get("/labels/").content == b"labels news:0"  # depends_on=[Label]
    assert Client().get("/labels/")["X-Cache"] == "HIT"
    post.labels.add(news)  # Post is not tracked: the label's side bumps
    assert Client().get("/labels/").content == b"labels news:1"
    post.labels.clear()
    assert Client().get("/labels/").content == b"labels news:0"


class Driven:
    """A process of ``tests/dj/m2m_process.py``, asked one command at a time."""

    def __init__(self, database: Path, store: str) -> None:
        command = [sys.executable, "-m", "tests.dj.m2m_process", str(database), store]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.answer() == "ready"

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.answer()

    def answer(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def quit(self) -> None:
        self.process.communicate("quit\n", timeout=30)


def test_a_process_that_never_read_the_page_still_bumps_its_relation(
    tmp_path: Path, memcached_url: str
) -> None:
    """Listeners are connected at start-up in every process, not at a first read: the
    writer starts before anyone has read the page and never imports a cached view (a
    task worker, a shell), and its add() still refreshes the page the reader serves."""
    writer = Driven(tmp_path / "m2m.sqlite3", memcached_url)
    reader = Driven(tmp_path / "m2m.sqlite3", memcached_url)
    try:
        assert writer.ask("seed") == "seeded"
        assert reader.ask("page") == "MISS labels news:0"
        assert reader.ask("page") == "HIT labels news:0"
        assert writer.ask("label") == "added; views imported: False"
        assert reader.ask("page").endswith(" labels news:1")
    finally:
        writer.quit()
        reader.quit()
