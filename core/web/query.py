"""Which query parameters are part of a page's key, in both adapters.

A campaign link (``/?utm_source=newsletter``) is the same page as ``/``: if every
parameter were part of the key, each campaign, ad click (``gclid``, ``fbclid``) and
mailing (``mc_cid``) would be a miss and an entry of its own. So a page's key leaves
out the parameters its rule drops: by default the common analytics ones
(:data:`ANALYTICS`), which browsers' scripts read, never the server. A rule names the
parameters to keep (``["page", "q"]``: an allowlist) or the ones to drop
(``{"exclude": [...]}``); a name ending in ``*`` is a prefix.

The view is rendered seeing only the parameters its key keeps: a page can hold only
what its key says, so a parameter left out of the key can never put one visitor's
value into the page every visitor gets (a cache poisoned through an unkeyed input).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

__all__ = ["ANALYTICS", "DEFAULT_QUERY", "QueryRule", "QuerySpec", "query_rule"]

ANALYTICS = ("utm_*", "gclid", "fbclid", "msclkid", "mc_cid", "mc_eid", "_ga")
"""The parameters analytics and ad platforms add to links: Google Analytics' campaign
tags, Google's, Meta's and Microsoft's click ids, Mailchimp's campaign and member ids,
and Google Analytics' cross-domain linker."""

QuerySpec = Sequence[str] | Mapping[str, Sequence[str]] | None
"""How a view or a site states its rule: see :func:`query_rule`."""
Pairs = Iterable[tuple[str, list[str]]]
"""A query as (name, [values in the order they came]) pairs."""


@dataclass(frozen=True)
class QueryRule:
    """The parameters a page's key keeps: ``include`` alone (None: all), minus ``exclude``;
    a name ending in ``*`` matches every name it begins."""

    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()

    def keeps(self, name: str) -> bool:
        """Return whether parameter ``name`` is part of the key."""
        if self.include is not None and not _matches(name, self.include):
            return False
        return not _matches(name, self.exclude)

    def key(self, pairs: Pairs) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Return the key's part for a query: the kept parameters sorted by name, each
        parameter's values in the order they came (``?tag=b&tag=a`` is not ``?tag=a&tag=b``)."""
        return tuple((name, tuple(values)) for name, values in sorted(pairs) if self.keeps(name))

    def drops_any(self, names: Iterable[str]) -> bool:
        """Return whether any of the parameters ``names`` is left out of the key."""
        return not all(self.keeps(name) for name in names)

    def query_string(self, pairs: Pairs) -> str:
        """Return the query a render sees: the kept parameters, in the order they came."""
        return urlencode(
            [(name, value) for name, values in pairs if self.keeps(name) for value in values]
        )


DEFAULT_QUERY = QueryRule(exclude=ANALYTICS)
"""Every parameter but the analytics ones: the rule of a site that sets none."""


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(
        name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern
        for pattern in patterns
    )


def query_rule(spec: object, setting: str) -> QueryRule | None:
    """Return the rule ``spec`` states, checked (None stays None: the site's rule applies);
    ``setting`` names where it came from, for the message of a bad one.

    ``["page", "q"]`` keeps those parameters only (``[]``: none), ``{"exclude": [...]}``
    keeps all but those (``{"exclude": []}``: every one), ``{"include": [...]}`` is the
    list's long form.
    """
    if spec is None:
        return None
    if isinstance(spec, QueryRule):
        return spec
    form = spec
    if isinstance(spec, list | tuple):
        form = {"include": spec}
    if isinstance(form, Mapping) and len(form) == 1:
        (kind, names), *_ = form.items()
        if kind in ("include", "exclude") and _is_names(names):
            names = tuple(names)
            return QueryRule(include=names) if kind == "include" else QueryRule(exclude=names)
    raise TypeError(
        f"{setting} must be a list of the query parameters a page's key keeps, e.g."
        f" ['page', 'q'], or {{'exclude': [...]}} naming those it leaves out (a name ending"
        f" in * is a prefix, e.g. 'utm_*'), got {spec!r}"
    )


def _is_names(names: object) -> bool:
    return isinstance(names, list | tuple) and all(isinstance(name, str) and name for name in names)
