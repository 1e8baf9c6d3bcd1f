"""Any key or URL a caller can produce reaches the servers safely and never collides.

hypothesis draws keys and call parameters (Unicode, control characters,
whitespace, 10 KB strings, nested and unhashable structures) and sends them
through ``get_or_build`` on real memcached and Redis, through the Django
backend, and through ``cached_view`` URLs in Django and Flask: never a protocol
error, and distinct inputs never share an entry.
"""

from __future__ import annotations

import urllib.parse
import uuid

import pytest
from django.core.cache import caches
from django.test import Client, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcache import Cache
from tests.reliability import site
from tests.reliability.test_server_faults import django_settings

long_texts = st.text(min_size=1, max_size=20).map(lambda t: (t * 10_000)[:10_000])  # 10 KB
texts = (
    st.text(max_size=40)
    | long_texts
    | st.sampled_from([" ", "\r\n", "\x00", "a b", "ключ", "🔑", "\t\x7f", "x" * 300])
)
scalars = (
    texts | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.binary(max_size=30)
)
parts = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)  # lists: unhashable, still keyable
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
examples = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("server", ["memcached", "redis"])
@examples
@given(st.lists(parts, min_size=1, max_size=3, unique_by=repr))
def test_any_call_parameters_build_and_hit_without_collisions(server: str, request, calls) -> None:
    # A namespace per example: hypothesis runs many examples against one server.
    cache = Cache(request.getfixturevalue(f"{server}_url"), namespace=uuid.uuid4().hex)
    for number, key in enumerate(calls):
        assert cache.get_or_build(key, lambda n=number: n) == number
    for number, key in enumerate(calls):  # each its own entry: nothing overwrote another
        assert cache.get_or_build(key, lambda: "rebuilt") == number


@pytest.mark.django_db
@examples
@given(
    st.lists(st.text(max_size=300) | st.binary(max_size=40), min_size=1, max_size=4, unique=True)
)
def test_any_django_key_is_stored_and_kept_apart(memcached_url: str, keys) -> None:
    with override_settings(**django_settings(memcached_url, prefix=uuid.uuid4().hex)):
        cache = caches["default"]
        for number, key in enumerate(keys):
            cache.set(key, number, 60)
        assert [cache.get(key) for key in keys] == list(range(len(keys)))


# Both frameworks' routing refuses a line break in a path (Werkzeug's path converter and
# Django's <path:> stop at it), so paths leave those out; every other character is in.
paths = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="/?#%\n\r"),
    min_size=1,
    max_size=60,
)
queries = st.lists(st.tuples(st.text(max_size=12), st.text(max_size=30)), max_size=4)


def same_page(url: tuple[str, list]) -> tuple:
    """URLs that are one page by design: the query's order does not matter."""
    path, query = url
    return path, tuple(sorted(query))


@pytest.mark.django_db
@examples
@given(st.lists(st.tuples(paths, queries), min_size=1, max_size=4, unique_by=same_page))
def test_any_url_gets_its_own_page_in_django_and_flask(memcached_url: str, urls) -> None:
    app = site.flask_app(memcached_url, namespace=uuid.uuid4().hex)
    with override_settings(**django_settings(memcached_url, prefix=uuid.uuid4().hex)):
        clients = {"django": Client(), "flask": app.test_client()}
        pages: dict[tuple[str, str], bytes] = {}
        for state in ("MISS", "HIT"):  # each time the URL's own page
            for path, query in urls:
                url = "/echo/" + urllib.parse.quote(path) + "?" + urllib.parse.urlencode(query)
                for name, client in clients.items():
                    response = client.get(url)
                    assert response.status_code == 200, (name, url)
                    assert response.headers["X-Cache"] == state, (name, url)
                    body = response.content if name == "django" else response.data
                    assert pages.setdefault((name, url), body) == body, "a hit is the same page"
        for name in clients:
            bodies = [body for (owner, _), body in pages.items() if owner == name]
            assert len(set(bodies)) == len(bodies), f"{name}: two URLs got one page"
