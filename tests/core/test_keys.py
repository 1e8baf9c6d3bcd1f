"""Tests for mcache.model.keys: canonical encoding, key shape, stability, store-key validation."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import PurePosixPath, PureWindowsPath
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcache.errors import InvalidKey
from mcache.model.keys import (
    _make_key,
    canonical_bytes,
    make_key,
    validate_store_key,
    validated_keys,
)
from mcache.stores import MemoryStore

SAFE_KEY = re.compile(r"[\x21-\x7e]{1,250}")

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
hashables = st.recursive(scalars, lambda inner: st.tuples(inner, inner), max_leaves=4)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(hashables, inner, max_size=4)
    ),
    max_leaves=12,
)
# Few distinct leaves from tiny alphabets, so two draws often come close to colliding.
near_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-1, 2)
    | st.sampled_from([0.0, -0.0, 1.0])
    | st.text(alphabet="as1:", max_size=4)
    | st.binary(max_size=2).map(lambda b: b.replace(b"\x00", b"a"))
)
near_values = st.recursive(
    near_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(near_scalars, inner, max_size=2)
        | st.frozensets(near_scalars, max_size=2)
    ),
    max_leaves=6,
)
fast = settings(max_examples=100, deadline=None)


def strictly_equal(a: Any, b: Any) -> bool:
    """Return whether ``a`` and ``b`` are equal with the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()  # 0.0 == -0.0, yet they are different values
    if isinstance(a, frozenset):
        return len(a) == len(b) and all(any(strictly_equal(x, y) for y in b) for x in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            twins = [other for other in b if other == key]
            if not twins or not strictly_equal(key, twins[0]):
                return False
            if not strictly_equal(value, b[twins[0]]):
                return False
        return True
    return a == b


def digest(*parts: Any, **named: Any) -> str:
    """Return only the hashed part of the key: the readable prefix must not be needed."""
    return make_key("ns", *parts, **named).rsplit(":", 1)[1]


def assert_safe(key: str) -> None:
    """Assert that ``key`` is memcached-safe: 1..250 visible ASCII characters."""
    assert SAFE_KEY.fullmatch(key), key
    assert len(key.encode("utf-8")) <= 250
    validate_store_key(key)


# Equal inputs, equal keys


@fast
@given(values)
def test_equal_values_give_equal_keys(value: Any) -> None:
    assert make_key("ns", value) == make_key("ns", value)


@fast
@given(st.dictionaries(hashables, scalars | st.lists(scalars, max_size=3), max_size=6))
def test_dict_insertion_order_does_not_matter(mapping: dict[Any, Any]) -> None:
    reordered = dict(reversed(list(mapping.items())))
    assert make_key("ns", mapping) == make_key("ns", reordered)
    assert make_key("ns", **{f"k{i}": v for i, v in enumerate(mapping.values())}) == make_key(
        "ns", **{f"k{i}": v for i, v in reversed(list(enumerate(mapping.values())))}
    )


@fast
@given(st.lists(st.text(max_size=8) | st.integers(), max_size=20))
def test_set_order_does_not_matter(items: list[Any]) -> None:
    forward, backward = set(), set()
    for item in items:
        forward.add(item)
    for item in reversed(items):
        backward.add(item)
    assert make_key("ns", forward) == make_key("ns", backward)
    assert make_key("ns", frozenset(items)) == make_key("ns", set(items))


# Distinct inputs, distinct keys


def test_scalars_of_different_types_differ() -> None:
    candidates = [1, "1", 1.0, True, b"1", None, 0, False, 0.0, -0.0, "", b"", (), [], {}]
    assert len({digest(value) for value in candidates}) == len(candidates)


def test_byte_types_share_an_encoding() -> None:
    assert canonical_bytes(b"ab") == canonical_bytes(bytearray(b"ab"))
    assert canonical_bytes(b"ab") == canonical_bytes(memoryview(b"ab"))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("a b",), ("a", "b")),
        (("ab",), ("a", "b")),
        (("a", "bc"), ("ab", "c")),
        ((["a"],), (("a",),)),
        ((["a", ["b"]],), (["a", ("b",)],)),
        (({"a": 1},), ({"a": "1"},)),
        (({"a": {"b": 1}},), ({"a": {"b": True}},)),
        (({"a": 1, "b": 2},), ({"a": 2, "b": 1},)),
        (({1, 2},), ([1, 2],)),
        (({1: 2},), ({2: 1},)),
        (("s5:hello",), ("hello",)),
        (("asb",), ("a", "b")),
        (("as1:b",), ("a", "b")),
        ((1, 2), ((1, 2),)),
    ],
)
def test_distinct_parts_give_distinct_keys(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    assert digest(*a) != digest(*b)


def test_positional_and_named_are_kept_apart() -> None:
    assert digest(("a", 1)) != digest(a=1)
    assert digest({"a": 1}) != digest(a=1)
    assert digest(1) != digest(a=1)
    assert digest(a=1) != digest(a="1")
    assert digest(a=1) != digest(b=1)
    assert digest(a=1, b=2) == digest(b=2, a=1)


def test_namespace_separates_keys() -> None:
    assert make_key("a", "x") != make_key("b", "x")
    assert make_key("a:b") != make_key("a", "b")


@settings(max_examples=200, deadline=None)
@given(values, values)
def test_keys_collide_only_for_strictly_equal_values(a: Any, b: Any) -> None:
    assert (digest(a) == digest(b)) == strictly_equal(a, b)


@settings(max_examples=300, deadline=None)
@given(st.lists(near_values, max_size=3), st.lists(near_values, max_size=3))
def test_near_misses_do_not_collide(a: list[Any], b: list[Any]) -> None:
    assert (digest(*a) == digest(*b)) == strictly_equal(a, b)


def test_remembered_nested_keys_stay_exact() -> None:
    """A page's key (nested tuples of str and None) is remembered after its first
    derivation; a look-alike with an int or a bool in it is never taken for it."""
    page = ("view", "blog.post", "http", "example.org", "/p/", (("q", ("1",)),), (None,), None)
    first, again = make_key("ns", *page), make_key("ns", *page)
    assert first == again
    for other in [
        ("view", "blog.post", "http", "example.org", "/p/", (("q", (1,)),), (None,), None),
        ("view", "blog.post", "http", "example.org", "/p/", (("q", (True,)),), (None,), None),
        ("view", "blog.post", "http", "example.org", "/p/", (("q", ("1",)),), ("",), None),
    ]:
        assert make_key("ns", *other) != first
        assert make_key("ns", *other) == _make_key("ns", other, {})  # the memo's answer is exact


# Key shape


def test_key_layout() -> None:
    key = make_key("site:v2", "user", 42, [1], "after", page=3, q="x y", flag=True)
    namespace, readable, digest = key.rsplit(":", 2)
    assert namespace == "site:v2"
    assert readable == "user.42.page=3.q=x_y"  # stops at the list; bool and non-str skipped
    assert re.fullmatch(r"[0-9a-f]{32}", digest)


def test_empty_pieces_are_omitted() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", make_key(""))
    assert re.fullmatch(r"ns:[0-9a-f]{32}", make_key("ns", [1]))
    assert re.fullmatch(r"x:[0-9a-f]{32}", make_key("", "x"))
    assert re.fullmatch(r"[0-9a-f]{32}", make_key("", True, None))


@pytest.mark.parametrize(
    "parts",
    [
        ("x" * 10_000,),
        ("é" * 5_000, "日本語", "\U0001f600"),
        ("a\nb\tc\x00d\x7f e:f",),
        ("\ud800",),
        (10**5000, -(10**300)),
        tuple("abc" for _ in range(200)),
    ],
)
@pytest.mark.parametrize("namespace", ["", "n", "N" * 100])
def test_keys_are_always_memcached_safe(namespace: str, parts: tuple[Any, ...]) -> None:
    key = make_key(namespace, *parts, name="v" * 500, **{"ü ber": "ö\n"})
    assert_safe(key)
    assert key.startswith(namespace)


@fast
@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=100))
def test_any_valid_namespace_gives_safe_keys(namespace: str) -> None:
    assert_safe(make_key(namespace, "x" * 300, "y", z="z" * 300))


@fast
@given(st.lists(values, max_size=3), st.dictionaries(st.text(max_size=30), scalars, max_size=3))
def test_generated_keys_are_memcached_safe(parts: list[Any], named: dict[str, Any]) -> None:
    assert_safe(make_key("ns", *parts, **named))


# Stability


STABILITY_SCRIPT = """
import datetime, decimal, uuid
from mcache.model.keys import make_key
keys = [
    make_key("ns", {"alpha", "beta", "gamma", "delta", "epsilon"}),
    make_key("ns", frozenset({b"x", b"y", b"z"}), {"k1": "v", "k2": "w", "k3": "u"}),
    make_key("ns", {"b": {"c", "d"}, "a": ["e", ("f", 1.5)]}, page=2, q="q"),
    make_key("site:v2", "user", 42, None, True, -7, 2**100),
    make_key("", datetime.datetime(2024, 5, 6, 7, 8, 9), decimal.Decimal("1.10")),
    make_key("t", uuid.UUID("12345678-1234-5678-1234-567812345678"), b"\\x00\\xff"),
]
"""


def test_keys_are_stable_across_processes() -> None:
    scope: dict[str, Any] = {}
    exec(STABILITY_SCRIPT, scope)
    seed = "123" if os.environ.get("PYTHONHASHSEED") != "123" else "456"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    code = STABILITY_SCRIPT + "import json, mcache.model.keys\n"
    code += "print(json.dumps([mcache.model.keys.__file__, keys]))\n"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    module_file, keys = json.loads(result.stdout)
    assert os.path.realpath(module_file) == os.path.realpath(
        sys.modules["mcache.model.keys"].__file__
    )
    assert keys == scope["keys"]


def test_known_answer() -> None:
    # Pinned: a change here changes every key in every deployed cache. Do it on purpose.
    assert canonical_bytes("hello") == b"s5:hello"
    assert canonical_bytes(("a", 1, None, True)) == b"t15:s1:ai1:1N0:b1:1"
    assert canonical_bytes({"b": 1.0, "a": b"x"}) == (b"d36:s1:ay1:xs1:bf20:0x1.0000000000000p+0")
    # blake2b(b"t23:s4:posti2:2al8:i1:1i1:2" + b"d12:s4:langs2:en", digest_size=16)
    assert make_key("blog", "post", 42, [1, 2], lang="en") == (
        "blog:post.42.lang=en:ef107705a713b0b331988c1a3fb45ef0"
    )


# Rich types


class Color(enum.Enum):
    RED = 1
    GREEN = "1"


class Level(enum.IntEnum):
    LOW = 1


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


@dataclasses.dataclass(frozen=True)
class OtherPoint:
    x: int
    y: int


class Account:
    def __init__(self, number: str, region: str) -> None:
        self.number = number
        self.region = region

    def __cache_key__(self) -> tuple[str, str]:
        return (self.number, self.region)


class FakeModel:
    """Looks like a Django model instance to duck typing, without Django."""

    def __init__(self, label: str, pk: object) -> None:
        self._meta = SimpleNamespace(label_lower=label)
        self.pk = pk


def test_django_model_like_objects() -> None:
    post = digest(FakeModel("blog.post", 3))
    assert post == digest(FakeModel("blog.post", 3))
    assert post != digest(FakeModel("blog.post", 4))
    assert post != digest(FakeModel("blog.comment", 3))
    assert post != digest(FakeModel("blog.post", "3"))
    assert post != digest("blog.post:3")
    assert canonical_bytes(FakeModel("blog.post", 3)) == b"m16:s9:blog.posti1:3"


def test_unsaved_model_is_refused() -> None:
    with pytest.raises(InvalidKey, match=r"unsaved blog\.post"):
        make_key("ns", FakeModel("blog.post", None))


def test_cache_key_method() -> None:
    key = digest(Account("123", "eu"))
    assert key == digest(Account("123", "eu"))
    assert key != digest(Account("123", "us"))
    assert key != digest(("123", "eu"))


def test_dataclasses() -> None:
    assert digest(Point(1, 2)) == digest(Point(1, 2))
    assert digest(Point(1, 2)) != digest(Point(2, 1))
    assert digest(Point(1, 2)) != digest(OtherPoint(1, 2))
    assert digest(Point(1, 2)) != digest((1, 2))


def test_enums() -> None:
    assert digest(Color.RED) == digest(Color.RED)
    assert digest(Color.RED) != digest(Color.GREEN)
    assert digest(Color.RED) != digest(1)
    assert digest(Level.LOW) != digest(1)
    assert digest(Level.LOW) != digest(Color.RED)


def test_dates_and_times() -> None:
    moment = datetime.datetime(2024, 1, 2, 3, 4, 5, 6)
    day = datetime.date(2024, 1, 2)
    assert canonical_bytes(day) == b"D10:2024-01-02"
    assert canonical_bytes(moment) == b"T26:2024-01-02T03:04:05.000006"
    candidates = [
        moment,
        moment.replace(tzinfo=datetime.timezone.utc),
        datetime.datetime(2024, 1, 2),
        day,
        "2024-01-02",
        datetime.time(3, 4, 5, 6),
        datetime.timedelta(days=1),
        datetime.timedelta(seconds=1),
    ]
    assert len({digest(value) for value in candidates}) == len(candidates)


def test_decimal_uuid_and_paths() -> None:
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert digest(ident) == digest(uuid.UUID(str(ident)))
    assert digest(ident) != digest(str(ident))
    assert digest(ident) != digest(ident.hex)
    assert digest(decimal.Decimal("1.5")) != digest(1.5)
    assert digest(decimal.Decimal("1.5")) != digest("1.5")
    assert digest(decimal.Decimal("1.5")) == digest(decimal.Decimal("1.5"))
    assert digest(PurePosixPath("a/b")) != digest("a/b")
    assert digest(PurePosixPath("a/b")) != digest(PureWindowsPath("a/b"))


def test_subclasses_of_builtins_are_encoded_like_their_base() -> None:
    class Name(str):
        pass

    class Items(list):  # type: ignore[type-arg]
        pass

    assert canonical_bytes(Name("x")) == canonical_bytes("x")
    assert canonical_bytes(Items([1])) == canonical_bytes([1])


def test_unsupported_object_is_refused_with_advice() -> None:
    with pytest.raises(InvalidKey, match=r"builtins\.object.*__cache_key__\(\)"):
        make_key("ns", object())
    with pytest.raises(InvalidKey, match="complex"):
        make_key("ns", [1, {"a": 1j}])
    with pytest.raises(InvalidKey, match="function"):
        make_key("ns", f=lambda: None)


def test_self_referencing_containers_are_refused() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(InvalidKey, match="contains itself"):
        make_key("ns", loop)
    table: dict[str, Any] = {}
    table["me"] = [table]
    with pytest.raises(InvalidKey, match="contains itself"):
        make_key("ns", table)


def test_deep_nesting_is_refused_but_siblings_are_not_cycles() -> None:
    shared = (1, 2)
    assert_safe(make_key("ns", [shared, shared, {"a": shared}]))
    deep: list[Any] = []
    for _ in range(500):
        deep = [deep]
    with pytest.raises(InvalidKey, match="nest"):
        make_key("ns", deep)


@pytest.mark.parametrize(
    ("namespace", "problem"),
    [
        ("a b", "' '"),
        ("a\nb", "'\\\\n'"),
        ("caf\u00e9", "'\u00e9'"),
        ("\x7f", "'\\\\x7f'"),
        ("n" * 101, "101 characters"),
        (b"ns", "must be a str"),
        (None, "must be a str"),
    ],
)
def test_bad_namespace_is_refused(namespace: Any, problem: str) -> None:
    with pytest.raises(InvalidKey, match=problem):
        make_key(namespace, "x")


def test_namespace_may_contain_colons() -> None:
    assert make_key("site:v2", "x").startswith("site:v2:x:")


# validate_store_key


@pytest.mark.parametrize(
    "key",
    ["a", "ns:post.42:" + "f" * 32, "k" * 250, "caf\u00e9", "\u00e9" * 125, "~!@#$%^&*()"],
)
def test_store_key_accepted(key: str) -> None:
    assert validate_store_key(key) is None


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "empty"),
        ("a b", "' '"),
        ("a\nb", "'\\\\n'"),
        ("a\tb", "'\\\\t'"),
        ("\x7f", "'\\\\x7f'"),
        ("\x00", "'\\\\x00'"),
        ("k" * 251, "251 bytes"),
        ("\u00e9" * 126, "252 bytes"),
        ("\ud800", "UTF-8"),
        (b"key", "must be a str"),
        (None, "must be a str"),
        (42, "must be a str"),
    ],
)
def test_store_key_refused(key: Any, problem: str) -> None:
    with pytest.raises(InvalidKey, match=problem):
        validate_store_key(key)


def test_store_key_error_truncates_the_key() -> None:
    with pytest.raises(InvalidKey) as info:
        validate_store_key("x" * 10_000)
    assert len(str(info.value)) < 200


@given(st.lists(st.one_of(st.text(), st.integers(), st.booleans(), st.none()), max_size=6))
def test_flat_fast_path_encodes_like_the_general_path(items: list[object]) -> None:
    from mcache.model.keys import _encode_flat_tuple, _encode_tuple

    parts = tuple(items)
    fast = _encode_flat_tuple(parts)
    if all(type(p) in (str, int) for p in parts):
        assert fast == _encode_tuple(parts, set(), 0)
    else:
        assert fast is None


def test_str_and_int_subclasses_key_like_their_base() -> None:
    class Marked(str):  # e.g. Django's SafeString, what a template hands a tag
        pass

    class Count(int):
        pass

    assert make_key("ns", Marked("forum"), 3) == make_key("ns", "forum", 3)
    assert make_key("ns", "forum", Count(3)) == make_key("ns", "forum", 3)
    assert make_key("ns", True) != make_key("ns", 1)


def test_a_batch_of_keys_is_refused_whole_however_often_it_comes() -> None:
    """A tuple batch (a read plan's) is checked once and then trusted as a whole; a batch
    holding one bad key is never trusted, and an unhashable one is named, not a TypeError."""
    good = ("mc:page:1", "mc:t:posts", "mc:t:users")
    for _ in range(2):
        assert validated_keys(good) == good
    for _ in range(2):
        with pytest.raises(InvalidKey, match="whitespace"):
            validated_keys(("mc:page:1", "has space"))
    with pytest.raises(InvalidKey):
        validated_keys(("mc:page:1", ["a", "list"]))  # type: ignore[list-item]
    assert MemoryStore().get_many(good) == {}
