"""Holes in Flask pages: Jinja ``{% nocache %}`` blocks and Flask-WTF's CSRF token.

Inside a ``cached_view`` page's render a hole is a placeholder (see
:mod:`mcache.web.holes`), filled for each response. A ``{% nocache %}`` block is
compiled as a Jinja block of its own, named from its template and its place there,
and filled by rendering that block alone in a context of the request (Flask's
``request``, ``session``, ``g``, the context processors' values such as Flask-Login's
``current_user``) and of the names the view's ``hole_context`` declares, on a miss as
on a hit. With Flask-WTF's ``CSRFProtect``, ``csrf_token()`` is a hole too.

A page that declares ``hole_context`` is rendered with an empty session and no
loaded user, so nothing of a visitor can reach its shared part; what it read there
tells whether it may be shared (see :class:`SharedRender`).
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from flask import current_app, g
from flask.globals import request_ctx
from flask.sessions import SecureCookieSession
from jinja2 import nodes
from jinja2.exceptions import TemplateNotFound, TemplateRuntimeError
from jinja2.ext import Extension
from jinja2.parser import Parser
from markupsafe import Markup

from mcache.web.holes import FRAGMENT, current_collector

__all__ = [
    "HoleContext",
    "HolesExtension",
    "SharedRender",
    "fill_hole",
    "known_hole",
    "session_read_before_view",
]

HoleContext = Mapping[str, Callable[[], Any]]
"""What a view lets its holes read besides Flask's context: name → ``f()``."""

CSRF = "csrf"
_JINJA_HOLE = "jinja"
_SHARED_REFUSAL = (
    "{% nocache %} cannot render inside {% mcache %}: the fragment is shared by every"
    " visitor, the hole is one visitor's"
)


class HolesExtension(Extension):
    """``{% nocache %}…{% endnocache %}``: a part of a cached page rendered per request."""

    tags = {"nocache"}

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self._seen: weakref.WeakKeyDictionary[Parser, int] = weakref.WeakKeyDictionary()

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endnocache",), drop_needle=True)
        ordinal = self._seen.get(parser, 0)
        self._seen[parser] = ordinal + 1
        where = hashlib.sha256(f"{parser.name or ''}\x00{body!r}".encode()).hexdigest()[:16]
        block = f"mcache_hole_{where}_{ordinal}"  # a changed block is another hole
        recipe = f"{_JINJA_HOLE}|{block}|{parser.name or ''}"
        call = self.call_method("_hole", [nodes.Const(recipe)])
        inner = nodes.Block(block, body, True, False).set_lineno(lineno)
        return nodes.CallBlock(call, [], [], [inner]).set_lineno(lineno)

    def _hole(self, recipe: str, caller: Callable[[], str]) -> str:
        collector = current_collector()
        if collector is FRAGMENT:
            raise TemplateRuntimeError(_SHARED_REFUSAL)
        if collector is None:
            return caller()
        return Markup(collector.placeholder(recipe))


def _template_and_block(recipe: str) -> tuple[Any, str] | None:
    _, block, name = recipe.split("|", 2)
    if not name:
        return None
    try:
        template = current_app.jinja_env.get_template(name)
    except TemplateNotFound:
        return None
    return (template, block) if block in template.blocks else None


def known_hole(recipe: str) -> bool:
    """Return whether this app can fill the hole ``recipe``."""
    if recipe == CSRF:
        return "csrf" in current_app.extensions
    return recipe.startswith(_JINJA_HOLE + "|") and _template_and_block(recipe) is not None


def fill_hole(hole_context: HoleContext, recipe: str) -> str:
    """Return the hole ``recipe`` rendered for the current request."""
    if recipe == CSRF:
        from flask_wtf.csrf import generate_csrf

        return str(generate_csrf())
    found = _template_and_block(recipe) if recipe.startswith(_JINJA_HOLE + "|") else None
    if found is None:
        raise TemplateNotFound(f"no {{% nocache %}} block for the stored hole {recipe!r}")
    template, block = found
    values = {name: make() for name, make in hole_context.items()}
    current_app.update_template_context(values)
    return "".join(template.blocks[block](template.new_context(values)))


class _CsrfToken:
    """Flask-WTF's token while a cached page renders: a hole when used, nothing otherwise."""

    def __str__(self) -> str:
        collector = current_collector()
        if collector is FRAGMENT:
            raise TemplateRuntimeError(
                "csrf_token() cannot sit inside {% mcache %}: the fragment is shared by every"
                " visitor, and so would the token be; move the form out of the block"
            )
        if collector is None:
            raise TemplateRuntimeError("the CSRF token of a cached page, used after its render")
        return collector.placeholder(CSRF)

    __html__ = __str__


class SharedRender:
    """The render of a page shared by every visitor, signed in or not (``hole_context``).

    For the render, the session is an empty one and the user (Flask-Login's) is the
    anonymous one, so the page's shared part holds nothing of this visitor; afterwards
    ``read`` and ``wrote`` say whether it looked at the session or the user (then it is a
    session-less visitor's page) or changed the session (then it is nobody's to store).
    """

    def __init__(self, holes: bool) -> None:
        self.holes = holes
        self.session = SecureCookieSession()
        self.read = self.wrote = False

    def __enter__(self) -> SharedRender:
        field = current_app.config.get("WTF_CSRF_FIELD_NAME", "csrf_token")
        self._field, self._token = field, g.pop(field, _ABSENT)
        if "csrf" in current_app.extensions:
            setattr(g, field, _CsrfToken())
        if self.holes:
            self._context = request_ctx._get_current_object()  # type: ignore[attr-defined]
            self._real = _swap_session(self._context, self.session)
            self._user = g.pop("_login_user", _ABSENT)  # Flask-Login's, from the session
            manager = getattr(current_app, "login_manager", None)
            if manager is not None:  # its context processor loads the user for every render
                g._login_user = _WatchedUser(manager.anonymous_user(), self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        g.pop(self._field, None)
        saved = [(self._field, self._token)]
        if self.holes:
            g.pop("_login_user", None)
            self.read = self.read or self.session.accessed
            self.wrote = self.session.modified
            _swap_session(self._context, self._real)
            saved.append(("_login_user", self._user))
        for name, value in saved:
            if value is not _ABSENT:
                setattr(g, name, value)


_ABSENT = object()


class _WatchedUser:
    """The anonymous user a shared render sees, noting that it was looked at."""

    def __init__(self, user: Any, render: SharedRender) -> None:
        self._user, self._render = user, render

    def __getattr__(self, name: str) -> Any:
        self._render.read = True
        return getattr(self._user, name)


def session_read_before_view() -> bool:
    """Return whether this request's session was read before the view (a
    ``before_request`` hook's ``g.user``, say): what was derived from it may be in ``g``,
    where no hole reaches, so the page rendered now would be this visitor's."""
    return bool(getattr(held_session(), "accessed", False))


def held_session() -> Any:
    """Return the request's session (None: not opened yet) without marking it read: from
    Flask 3.1, reading ``session`` marks it accessed, and Flask then sends ``Vary: Cookie``,
    which only the answers that ran the view would carry."""
    context = request_ctx._get_current_object()  # type: ignore[attr-defined]
    return context._session if _session_is_property(context) else context.session


def _session_is_property(context: Any) -> bool:
    return isinstance(getattr(type(context), "session", None), property)


def _swap_session(context: Any, session: Any) -> Any:
    """Give the request context ``session`` and return the one it had, without marking it
    read: from Flask 3.1 ``RequestContext.session`` is a property that does, over
    ``_session``; before, a plain attribute."""
    if _session_is_property(context):
        held, context._session = context._session, session
    else:
        held, context.session = context.session, session
    return held
