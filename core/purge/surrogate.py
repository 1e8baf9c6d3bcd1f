"""Surrogate keys: a page's tags, named in the header the cache in front reads.

Varnish's xkey module reads ``xkey`` (keys separated by spaces), Fastly
``Surrogate-Key`` (spaces), Cloudflare ``Cache-Tag`` (commas). A tag becomes one key
by :func:`surrogate_key`, the same function the purge side uses, so a tag purged is
exactly the key a page was sent with. A tag that is no plain token (a space, a comma,
a character outside printable ASCII, or longer than a CDN keeps) is sent as a digest
of itself rather than cut or split, which would purge the wrong pages or none.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from mcache.errors import ConfigError

__all__ = [
    "HEADERS",
    "KeysTooLong",
    "SurrogateHeader",
    "header_kind",
    "surrogate_header",
    "surrogate_key",
]


class KeysTooLong(ValueError):
    """A page's keys do not fit in one header: it must not be kept in front, since a
    purge of a key left out would miss it."""


class SurrogateHeader(NamedTuple):
    """How one kind of cache in front is told a page's keys."""

    name: str
    separator: str
    max_bytes: int
    """The longest header value it takes (Fastly and Cloudflare: 16 KB; Varnish's
    default ``http_resp_hdr_len`` of 8 KB counts the whole header line)."""


HEADERS: Final = {
    "xkey": SurrogateHeader("xkey", " ", 8000),
    "surrogate-key": SurrogateHeader("Surrogate-Key", " ", 16384),
    "cache-tag": SurrogateHeader("Cache-Tag", ",", 16384),
}
"""The kinds a site chooses from, by the name of the header each reads."""

_PLAIN: Final = re.compile(r"[A-Za-z0-9._:/@+=-]{1,256}")
"""A tag every kind takes as it is: printable ASCII with no separator or quote."""


def surrogate_key(tag: str) -> str:
    """Return the key ``tag`` is sent and purged as: itself, or ``mcache-`` and a digest."""
    if _PLAIN.fullmatch(tag):
        return tag
    return (
        "mcache-"
        + hashlib.blake2b(tag.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    )


def header_kind(kind: str, setting: str) -> SurrogateHeader:
    """Return the header of ``kind``, or fail naming ``setting`` and what to write instead."""
    try:
        return HEADERS[kind.lower()]
    except (KeyError, AttributeError):
        choices = ", ".join(repr(name) for name in HEADERS)
        raise ConfigError(f"{setting} must be one of {choices}, got {kind!r}") from None


def surrogate_header(header: SurrogateHeader, tags: Iterable[str]) -> tuple[str, str] | None:
    """Return the header naming ``tags`` (each once, in order) as keys, or None for no tags.

    Raises :class:`KeysTooLong` when they do not fit in one header.
    """
    keys = list(dict.fromkeys(surrogate_key(tag) for tag in tags))
    if not keys:
        return None
    value = header.separator.join(keys)
    if len(value) > header.max_bytes:
        raise KeysTooLong(
            f"{len(keys)} keys make a {header.name} of {len(value)} bytes,"
            f" more than the {header.max_bytes} it takes"
        )
    return header.name, value
