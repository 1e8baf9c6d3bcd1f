"""Holes in Django templates: ``{% nocache %}`` blocks and ``{% csrf_token %}``.

Inside a ``@cached_view`` page's render a hole is only a placeholder (see
:mod:`mcache.web.holes`); every response fills it for its own request. A
``{% nocache %}`` block is filled by rendering its body alone, in a
``RequestContext`` of the request (the context processors' values: ``user``,
``perms``, ``csrf_token``…) and the names the view's ``hole_context`` declares, on a
miss as on a hit, so a hole reads the same either way. The CSRF token is a hole
once :func:`holes` runs after Django's own ``csrf`` context processor.

A stored page names its template holes by the template and a digest of the block's
tokens, so another process finds the block by loading that template; a block it
cannot find (the template changed since) makes the page unservable there, never
half-filled.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import CSRF_ALLOWED_CHARS, get_token
from django.template import Context, Engine, NodeList, Origin, RequestContext, Template
from django.template.base import Node, Parser, Token
from django.template.exceptions import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import get_template

from mcache.web.holes import FRAGMENT, current_collector

__all__ = [
    "HoleContext",
    "NocacheNode",
    "csrf_token",
    "fill_hole",
    "holes",
    "known_hole",
    "nocache",
]

HoleContext = Mapping[str, Callable[[HttpRequest], Any]]
"""What a view lets its holes read besides the context processors': name → ``f(request)``."""

CSRF = "csrf"
_TEMPLATE_HOLE = "dj"
_NODES: dict[str, NocacheNode] = {}
"""Every ``{% nocache %}`` block this process has parsed, by its stable id."""


class NocacheNode(Node):
    """A ``{% nocache %}`` block: a placeholder in a cached page's render, its body in any
    other render (an uncached view, a bypassed request, or filling the hole)."""

    def __init__(self, nodelist: NodeList, recipe: str, engine: Engine | None) -> None:
        self.nodelist, self.recipe = nodelist, recipe
        self.shell = Template("", engine=engine or Engine.get_default())
        self.shell.nodelist = nodelist  # the block rendered as a template of its own

    def render(self, context: Context) -> str:
        collector = current_collector()
        if collector is FRAGMENT:
            raise TemplateSyntaxError(
                "{% nocache %} cannot render inside {% cachedblock %}: the fragment is"
                " shared by every visitor, the hole is one visitor's"
            )
        if collector is None:
            return self.nodelist.render(context)
        return collector.placeholder(self.recipe)

    def render_for(self, request: HttpRequest, hole_context: HoleContext) -> str:
        values = {name: make(request) for name, make in hole_context.items()}
        return self.shell.render(RequestContext(request, values))


def nocache(parser: Parser, token: Token) -> NocacheNode:
    """``{% nocache %}…{% endnocache %}``: a part of a cached page rendered per request."""
    if any(command == "cachedblock" for command, *_ in parser.command_stack):
        raise TemplateSyntaxError(
            "{% nocache %} cannot sit inside {% cachedblock %}: the fragment is shared by"
            " every visitor, the hole is one visitor's"
        )
    waiting = list(parser.tokens)  # reversed: the next token is last
    nodelist = parser.parse(("endnocache",))
    parser.delete_first_token()
    body = waiting[len(parser.tokens) :]
    origin: Origin | None = parser.origin
    digest = hashlib.sha256((origin.name if origin else "").encode())
    for part in reversed(body):
        digest.update(f"{part.token_type.value}\x00{part.contents}\x00".encode())
    hole_id = digest.hexdigest()[:24]
    name = (origin.template_name if origin else None) or ""
    loader = getattr(origin, "loader", None)
    node = NocacheNode(
        nodelist, f"{_TEMPLATE_HOLE}|{hole_id}|{name}", getattr(loader, "engine", None)
    )
    _NODES[hole_id] = node
    return node


def _node(recipe: str) -> NocacheNode | None:
    """Return the block ``recipe`` names, loading its template if this process has not yet."""
    _, hole_id, template_name = recipe.split("|", 2)
    if hole_id not in _NODES and template_name:
        try:
            get_template(template_name)
        except (TemplateDoesNotExist, TemplateSyntaxError):
            return None
    return _NODES.get(hole_id)


_ALPHABET = CSRF_ALLOWED_CHARS
_IN_ALPHABET = frozenset(_ALPHABET)
_SECRET_LENGTH = 32
_KEPT = 256 - 256 % len(_ALPHABET)
"""Random bytes below this map onto the alphabet evenly (``b % 62``); the rest are drawn again."""
_TO_ALPHABET = bytes(ord(_ALPHABET[b % len(_ALPHABET)]) if b < _KEPT else 0 for b in range(256))
_REDRAWN = bytes(range(_KEPT, 256))
_SUMS = {
    (secret, mask): _ALPHABET[(i + j) % len(_ALPHABET)]
    for i, secret in enumerate(_ALPHABET)
    for j, mask in enumerate(_ALPHABET)
}


def csrf_token(request: HttpRequest) -> str:
    """Return the visitor's CSRF token for a hole: what ``get_token`` returns, a fresh mask
    over the secret of the visitor's CSRF cookie, with the same side effect (the
    middleware sends the cookie again, renewing it), and ``get_token`` itself when the
    visitor has no valid secret yet.

    Why not always ``get_token``: it draws its mask one character at a time from the
    OS (``secrets.choice``, 32 system calls), which is most of what a hit of a cached
    page with a form costs beyond a plain hit; this draws the same unbiased mask
    (bytes of 248 and up are drawn again) from one read. The token is Django's format,
    ``mask + (secret + mask)`` over ``CSRF_ALLOWED_CHARS``, so Django checks it.
    """
    secret = request.META.get("CSRF_COOKIE")
    if type(secret) is not str or len(secret) != _SECRET_LENGTH or not set(secret) <= _IN_ALPHABET:
        return get_token(request)
    request.META["CSRF_COOKIE_NEEDS_UPDATE"] = True
    mask = b""
    while len(mask) < _SECRET_LENGTH:
        mask += os.urandom(48).translate(_TO_ALPHABET, _REDRAWN)
    drawn = mask[:_SECRET_LENGTH].decode("ascii")
    return drawn + "".join(map(_SUMS.__getitem__, zip(secret, drawn, strict=True)))


def known_hole(recipe: str) -> bool:
    """Return whether this process can fill the hole ``recipe``."""
    return recipe == CSRF or (recipe.startswith(_TEMPLATE_HOLE + "|") and _node(recipe) is not None)


def fill_hole(request: HttpRequest, hole_context: HoleContext, recipe: str) -> str:
    """Return the hole ``recipe`` rendered for ``request``."""
    if recipe == CSRF:
        return csrf_token(request)  # and the CSRF middleware sets the cookie, as for any form
    node = _node(recipe) if recipe.startswith(_TEMPLATE_HOLE + "|") else None
    if node is None:
        raise TemplateDoesNotExist(f"no {{% nocache %}} block for the stored hole {recipe!r}")
    return node.render_for(request, hole_context)


_CSRF_IN_FRAGMENT = (
    "{% csrf_token %} cannot sit inside {% cachedblock %}: the fragment is shared by every"
    " visitor, and so would the token be; move the form out of the block"
)


class _CsrfToken:
    """The context's ``csrf_token``: a hole in a cached page's render, the visitor's own
    token anywhere else (a fresh look each time, as the value is used)."""

    def __init__(self, request: HttpRequest) -> None:
        self.request = request
        self.token: str | None = None

    def __str__(self) -> str:
        collector = current_collector()
        if collector is FRAGMENT:
            raise TemplateSyntaxError(_CSRF_IN_FRAGMENT)
        if collector is None:
            if self.token is None:  # one token per context, as Django's own processor gives
                self.token = get_token(self.request)
            return self.token
        return collector.placeholder(CSRF)

    __html__ = __str__

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return str(self) == other

    __hash__ = None  # type: ignore[assignment]


def holes(request: HttpRequest) -> dict[str, Any]:
    """Context processor: list it after ``django.template.context_processors.csrf`` (or
    anywhere, Django runs that one first) to make ``{% csrf_token %}`` a hole of a cached
    page instead of a reason not to cache it."""
    return {"csrf_token": _CsrfToken(request)}
