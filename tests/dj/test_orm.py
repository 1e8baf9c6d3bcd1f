"""ORM signals bump model and object tags, correctly around real transactions (SQLite)."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import caches
from django.db import transaction
from django.test import Client

from django_mcache import invalidate_model, invalidate_obj
from django_mcache.tags import model_tag
from tests.dj import views
from tests.dj.blog.models import Blog, Label, Post


@pytest.fixture(autouse=True)
def fresh_cache():
    caches["default"].clear()
    views.renders.clear()


def rendered(name: str) -> int:
    return views.renders.count(name)


def state(url: str) -> str:
    return Client().get(url)["X-Cache"]


@pytest.mark.django_db
def test_save_and_delete_invalidate_dependents_and_spare_the_rest(
    django_assert_num_queries,
) -> None:
    post = Post.objects.create(title="first")
    assert Client().get(f"/posts/{post.pk}/").content == b"post first"
    assert state("/lang/") == "MISS" and state("/lang/") == "HIT"
    post.title = "edited"
    post.save()
    assert Client().get(f"/posts/{post.pk}/").content == b"post edited"
    with django_assert_num_queries(0):
        assert state("/lang/") == "HIT", "an unrelated page stays cached"
    assert state("/feed/") == "MISS"
    Post.objects.create(title="second")  # declared tag: every post change refreshes the feed
    assert Client().get("/feed/").content == b"feed 2"
    post.delete()
    assert Client().get("/feed/").content == b"feed 1"


@pytest.mark.django_db
def test_a_changed_foreign_key_bumps_the_old_and_the_new_row() -> None:
    old_blog, new_blog = Blog.objects.create(name="old"), Blog.objects.create(name="new")
    post = Post.objects.create(title="moving", blog=old_blog)
    assert Client().get(f"/blogs/{old_blog.pk}/").content.endswith(b"moving")
    assert Client().get(f"/blogs/{new_blog.pk}/").content.endswith(b": ")
    fetched = Post.objects.get(pk=post.pk)  # loaded fresh: its old blog is remembered
    fetched.blog = new_blog
    fetched.save()
    assert Client().get(f"/blogs/{old_blog.pk}/").content.endswith(b": ")
    assert Client().get(f"/blogs/{new_blog.pk}/").content.endswith(b"moving")


@pytest.mark.django_db
def test_many_to_many_changes_reach_both_sides() -> None:
    post = Post.objects.create(title="p")
    news = Label.objects.create(name="news")
    assert Client().get("/labels/").content == b"labels news:0"
    post.labels.add(news)
    assert Client().get("/labels/").content == b"labels news:1"
    assert state("/labels/") == "HIT"
    post.labels.remove(news)
    assert Client().get("/labels/").content == b"labels news:0"
    news.post_set.add(post)  # from the other side
    assert Client().get("/labels/").content == b"labels news:1"
    post.labels.clear()
    assert Client().get("/labels/").content == b"labels news:0"


@pytest.mark.django_db
def test_bulk_writes_through_the_tagged_manager_and_by_hand() -> None:
    post = Post.objects.create(title="a")
    Client().get(f"/posts/{post.pk}/")
    Post.tagged.filter(pk=post.pk).update(title="bulk")
    assert Client().get(f"/posts/{post.pk}/").content == b"post bulk"
    Post.objects.filter(pk=post.pk).update(title="unseen")  # a plain manager sends no signal
    assert Client().get(f"/posts/{post.pk}/").content == b"post bulk", "the documented gap"
    invalidate_model(Post)
    assert Client().get(f"/posts/{post.pk}/").content == b"post unseen"
    Post.objects.filter(pk=post.pk).update(title="by hand")
    invalidate_obj(Post.objects.get(pk=post.pk))
    assert Client().get(f"/posts/{post.pk}/").content == b"post by hand"
    Post.tagged.bulk_create([Post(title="b"), Post(title="c")])
    assert Client().get("/feed/").content.startswith(b"feed")


# -- real transactions -----------------------------------------------------------------------

TAG = model_tag(Post)


def build_in_another_thread(value: str) -> str:
    """What a concurrent request would do: get_or_build from its own connection and thread."""
    result: list[str] = []
    thread = threading.Thread(
        target=lambda: result.append(
            caches["default"].get_or_build("home", lambda: value, tags=[TAG])
        )
    )
    thread.start()
    thread.join()
    return result[0]


@pytest.mark.django_db(transaction=True)
def test_an_entry_rebuilt_from_old_data_during_the_transaction_dies_at_commit() -> None:
    cache = caches["default"]
    with transaction.atomic():
        Post.objects.create(title="new")
        assert build_in_another_thread("home from old data") == "home from old data"
        assert build_in_another_thread("again") == "home from old data", "stored by that thread"
    assert cache.get_or_build("home", lambda: "home after commit", tags=[TAG]) == (
        "home after commit"
    )


@pytest.mark.django_db(transaction=True)
def test_a_page_built_inside_a_writing_transaction_is_not_kept_after_rollback() -> None:
    cache = caches["default"]
    with pytest.raises(RuntimeError), transaction.atomic():
        Post.objects.create(title="never committed")
        inside = cache.get_or_build("home", lambda: "home with uncommitted post", tags=[TAG])
        assert inside == "home with uncommitted post"
        raise RuntimeError("roll back")
    assert Post.objects.count() == 0
    assert cache.get_or_build("home", lambda: "home", tags=[TAG]) == "home"
    assert cache.get_or_build("home", lambda: "stored?", tags=[TAG]) == "home", "stored again"


@pytest.mark.django_db(transaction=True)
def test_nested_savepoints() -> None:
    cache = caches["default"]
    with transaction.atomic():
        Post.objects.create(title="kept")
        try:
            with transaction.atomic():
                Post.objects.create(title="rolled back")
                raise RuntimeError
        except RuntimeError:
            pass
        assert cache.get_or_build("home", lambda: "inside", tags=[TAG]) == "inside"
    assert cache.get_or_build("home", lambda: "after", tags=[TAG]) == "after", "not stored inside"
    assert cache.get_or_build("home", lambda: "again", tags=[TAG]) == "after"
    assert list(Post.objects.values_list("title", flat=True)) == ["kept"]


@pytest.mark.django_db
def test_cachedblocks_follow_saves_deletes_and_m2m() -> None:
    from django.template import Context, Template

    def render(source: str, **context) -> str:
        return Template("{% load mcache %}" + source).render(Context(context))

    post = Post.objects.create(title="one")
    label = Label.objects.create(name="news")
    row = '{% cachedblock 60 "row" post.pk depends_on=post %}{{ post.title }}{% endcachedblock %}'
    cloud = '{% cachedblock 60 "cloud" depends_on=labels %}{{ labels.count }}{% endcachedblock %}'
    count = lambda: render(cloud, labels=Label.objects.filter(post__isnull=False))  # noqa: E731
    assert render(row, post=post) == "one" and count() == "0"
    post.labels.add(label)  # bumps the post's tags as well as the labels'
    assert count() == "1" and render(row, post=post) == "one"
    post.title = "renamed"
    assert render(row, post=post) == "one", "not saved yet"
    post.save()
    assert render(row, post=post) == "renamed"
    post.delete()
    assert render(row, post=Post(pk=post.pk, title="gone")) == "gone"
