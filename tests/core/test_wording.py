"""Messages count and name things in plain English: "1 value", "an int"."""

from __future__ import annotations

import pytest

from mcache import Cache
from mcache.errors import InvalidKey
from mcache.wording import a, counted


def test_a_count_is_singular_for_one_and_plural_otherwise() -> None:
    assert [counted(n, "value") for n in (0, 1, 2)] == ["0 values", "1 value", "2 values"]
    assert counted(3, "entry", "entries") == "3 entries"


def test_a_name_takes_the_article_its_first_letter_asks_for() -> None:
    assert [a(name) for name in ("int", "str", "Order row", "int or float")] == [
        "an int",
        "a str",
        "an Order row",
        "an int or float",
    ]


class Order(list):
    """A list by another name: the message names it."""


def test_a_key_that_contains_itself_is_named_with_its_article() -> None:
    loop = Order()
    loop.append(loop)
    with pytest.raises(InvalidKey, match="cannot build a cache key: an Order contains itself"):
        Cache().key(("page", loop))
