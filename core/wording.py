"""How messages name a count or a kind of thing: "1 value", "3 values", "an int", "a str".

Error and log messages are read by people: "1 values not cached" and "must be a int"
make a careful library look careless, and every message that counts or names a type
says it the same way through these two.
"""

from __future__ import annotations

__all__ = ["a", "counted"]


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """Return ``number`` and ``noun``, plural unless the number is one: "1 value", "2 values"."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def a(name: str) -> str:
    """Return ``name`` after its indefinite article: "an int", "a str", "an Order row".

    The article follows the first letter (a vowel takes "an"), which is right for the
    type and class names messages show; "a HttpResponse" reads as most say it.
    """
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
