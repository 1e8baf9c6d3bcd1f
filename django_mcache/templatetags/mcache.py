"""Template tags: fragment caching with tags and dog-pile safety, holes (``{% nocache %}``,
see :mod:`django_mcache.holes`), view and online counters.

``{% load mcache %}`` (the library is never called ``cache``: that is Django's).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django import template
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model
from django.template.base import FilterExpression, NodeList, Parser, Token
from django.utils import translation

from mcache.model.jobs import in_process
from mcache.model.keys import keyable
from mcache.web.holes import suspended
from mcache.web.page import FRAGMENTS_STAY

from ..aliases import cache_alias, check_alias
from ..counters import view_counter
from ..holes import nocache
from ..middleware import online_counter
from ..tags import Dependencies

register = template.Library()
register.tag("nocache", nocache)


class CachedBlockNode(template.Node):
    """Renders its body once per key and TTL, across threads, processes and hosts."""

    def __init__(
        self,
        nodelist: NodeList,
        ttl: FilterExpression,
        name: str,
        vary: list[FilterExpression],
        options: dict[str, FilterExpression],
    ) -> None:
        self.nodelist, self.ttl, self.name = nodelist, ttl, name
        self.vary, self.options = vary, options

    def render(self, context: template.Context) -> str:
        ttl = _seconds(self.ttl.resolve(context))
        if ttl == 0:
            return self.nodelist.render(context)  # Django's timeout 0: not cached
        vary = tuple(keyable(v.resolve(context)) for v in self.vary)
        options = {k: v.resolve(context) for k, v in self.options.items()}
        backend = caches[cache_alias(options.pop("using", None))]
        tags = _tag_names(options.pop("tags", None)) + _model_tags(options.pop("depends_on", None))
        key = ("block", self.name, vary, translation.get_language())
        core = getattr(backend, "mcache", None)
        if core is None:
            raise template.TemplateSyntaxError(
                "cachedblock: using= must name an mcache cache (MCacheBackend)"
            )
        build = in_process(partial(self._render, context), FRAGMENTS_STAY)
        return core.get_or_build(key, build, ttl=ttl or 0, tags=tags or None)

    def _render(self, context: template.Context) -> str:
        with suspended():  # shared by every visitor: no hole of the page around it
            return self.nodelist.render(context)


@register.tag("cachedblock")
def cachedblock(parser: Parser, token: Token) -> CachedBlockNode:
    """``{% cachedblock ttl "name" [vary …] [tags="a,b"] [depends_on=obj] [using="alias"] %}``."""
    bits = token.split_contents()
    if len(bits) < 3:
        raise template.TemplateSyntaxError(
            '{% cachedblock %} needs a ttl and a name: {% cachedblock 300 "sidebar" %}'
        )
    nodelist = parser.parse(("endcachedblock",))
    parser.delete_first_token()
    vary, options = [], {}
    for bit in bits[3:]:
        name, sep, value = bit.partition("=")
        if sep and name.isidentifier():
            if name not in BLOCK_OPTIONS:
                raise template.TemplateSyntaxError(
                    f"cachedblock: unknown option {name}=; use tags=, depends_on= or using="
                )
            options[name] = parser.compile_filter(value)
            if name == "using" and isinstance(options[name].var, str):  # a literal alias
                try:
                    check_alias(options[name].var, "{% cachedblock using=... %}")
                except ImproperlyConfigured as error:
                    raise template.TemplateSyntaxError(str(error)) from None
        else:
            vary.append(parser.compile_filter(bit))
    name = bits[2]
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "'\"":
        name = name[1:-1]  # as Django's {% cache %}, the name is literal, quoted or not
    return CachedBlockNode(nodelist, parser.compile_filter(bits[1]), name, vary, options)


BLOCK_OPTIONS = frozenset({"tags", "depends_on", "using"})


def _seconds(ttl: Any) -> float | None:
    """Return the block's TTL: None keeps it forever, 0 does not cache it (Django's rules)."""
    if ttl is None:
        return None
    try:
        if isinstance(ttl, bool):
            raise ValueError
        seconds = float(ttl)
    except (TypeError, ValueError):
        raise template.TemplateSyntaxError(
            f"cachedblock: the ttl must be a number of seconds, got {ttl!r}"
        ) from None
    if seconds < 0:
        raise template.TemplateSyntaxError(f"cachedblock: the ttl must be >= 0, got {ttl!r}")
    return seconds


def _tag_names(tags: Any) -> list[str]:
    if not tags:
        return []
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    return [str(t) for t in tags]


def _model_tags(depends_on: Any) -> list[str]:
    try:
        return list(Dependencies(depends_on, "cachedblock").tags())
    except TypeError as error:
        raise template.TemplateSyntaxError(str(error)) from None


@register.simple_tag
def view_count(obj: Model, using: str | None = None) -> int:
    """``{% view_count post %}``: the object's view count (seeded from the database)."""
    return view_counter(obj, cache=using).value(obj)


@register.simple_tag(takes_context=True)
def count_view(context: template.Context, obj: Model, using: str | None = None) -> int:
    """``{% count_view post %}``: count one view per request and render the new count."""
    request = context.get("request")
    counter = view_counter(obj, cache=using)
    if request is None:  # no request context processor: nothing tells one request from the next
        return counter.incr(obj)
    counted = request.__dict__.setdefault("_mcache_views_counted", {})
    ident = (counter.name, counter.ident(obj))
    if ident not in counted:
        counted[ident] = counter.incr(obj)
    return counted[ident]


@register.simple_tag
def online_count(scope: str = "site", using: str | None = None, current: bool = False) -> int:
    """``{% online_count %}`` / ``{% online_count "forum" %}``: visitors seen in the window,
    read from the counter the middleware counts into (see ``middleware.online_counter``).
    ``current=True`` counts the filling slot too: the visitor looking is online at once
    (:meth:`mcache.features.visitors.OnlineCounter.count`)."""
    return online_counter(scope, using).count(current)
