"""Exceptions raised by mcache.

Every error mcache raises derives from :class:`MCacheError`, so an application can
catch the whole family in one place. Driver errors (pymemcache, redis-py, sockets)
are translated once, at the store boundary, and chained with ``raise … from``.
"""

from __future__ import annotations

import difflib
import pickle
import sys
from collections.abc import Collection, Iterable

from mcache.wording import a

__all__ = [
    "ConfigError",
    "InvalidKey",
    "LockTimeout",
    "MCacheError",
    "MCacheWarning",
    "NotMemoizable",
    "NotNumeric",
    "StoreUnavailable",
    "Uncacheable",
    "Unserializable",
    "UnsignedPickleWarning",
    "ValueTooLarge",
    "named_with_guesses",
    "user_stacklevel",
]


class MCacheError(Exception):
    """Base class of every mcache error."""


class MCacheWarning(UserWarning):
    """A configuration that works, but not the way a site of several processes expects."""


_OURS = frozenset({"mcache", "django_mcache", "flask_mcache"})


def user_stacklevel() -> int:
    """Return the ``stacklevel`` that points a warning its caller warns at the first line
    outside mcache and its adapters: the user's ``MCache(app)`` or ``Cache(…)``, however
    many of our frames lie between (``MCache.__init__`` → ``init_app``, say)."""
    frame, level = sys._getframe(1), 1
    while (
        frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[0] in _OURS
    ):
        frame, level = frame.f_back, level + 1
    return level


class UnsignedPickleWarning(MCacheWarning):
    """Values on a store other processes reach are unpickled unsigned: whoever can write to
    its servers can run code here (docs/explanation/security.md)."""


class ConfigError(MCacheError, ValueError):
    """A setting, option or URL is wrong; raised at start-up, naming what to fix."""


class StoreUnavailable(MCacheError, ConnectionError):
    """The store could not be reached or answered with a server error."""


class LockTimeout(MCacheError, TimeoutError):
    """A lock could not be acquired within the allowed wait."""


class InvalidKey(MCacheError, ValueError):
    """A key is not usable by the store (too long, whitespace, control characters)."""


class ValueTooLarge(MCacheError, ValueError):
    """A value exceeds the store's item size limit; nothing was stored."""


class Unserializable(MCacheError, TypeError, pickle.PicklingError):
    """A value the cache's serializer cannot encode; nothing was stored.

    Raised by every write (``set``, ``add``, ``set_many``, ``get_or_set``,
    ``get_or_build``, ``@cached``) alike: a value that cannot be encoded once
    never can, so it is the caller's to fix, not a store failure to degrade
    around. It is a ``TypeError`` and a ``pickle.PicklingError``, the errors
    Django's own cache backends raise for the same mistake.
    """

    def __init__(
        self,
        value: object,
        serializer: str,
        cause: BaseException,
        setting: str = "the codec's serializer= option",
    ) -> None:
        kind = type(value)
        self.type_name = f"{kind.__module__}.{kind.__qualname__}"
        self.serializer = serializer
        self.setting = setting
        super().__init__(
            f"cannot cache {a(self.type_name)} value: the {serializer!r} serializer cannot"
            f" encode it ({type(cause).__name__}: {cause}). Cache something it can encode"
            " (the data the value is made of, not a connection, lock, generator or local"
            f" function), or choose another serializer ({setting})."
        )


class NotMemoizable(MCacheError, TypeError):
    """A memoized function returned what must not be shared: a framework's response.

    A memoized response would hand one visitor's headers (``Set-Cookie``) to every later
    caller; the message names the adapter's ``cached_view``, which caches pages safely.
    """


class NotNumeric(MCacheError, ValueError):
    """``incr``/``decr`` was asked of a value that is not a decimal integer."""


class Uncacheable(Exception):
    """Raised by a builder to hand back ``value`` without caching it.

    ``get_or_build`` returns ``value`` to the caller whose build raised it and
    stores nothing; callers that were waiting for that build run their own, since
    the value was meant for one caller only (a page that sets a cookie, say).
    ``reason`` says why, for the adapters' reports (see :mod:`mcache.observe.outcome`).
    """

    def __init__(self, value: object, reason: str = "") -> None:
        super().__init__(f"value not to be cached{f' ({reason})' if reason else ''}")
        self.value = value
        self.reason = reason
        """Why, in a word (``set-cookie``, ``csrf``…): what ``X-Cache-Reason`` reports."""


def named_with_guesses(unknown: Iterable[str], known: Collection[str]) -> str:
    """Return the unknown names, each with the known name it was probably meant to be
    (for a :class:`ConfigError` naming what to write instead)."""
    named = []
    for name in unknown:
        guess = difflib.get_close_matches(name, known, 1)
        named.append(f"{name!r} (did you mean {guess[0]!r}?)" if guess else repr(name))
    return ", ".join(named)
