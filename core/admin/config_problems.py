"""Every mistake in a cache's settings at once, not the first of them.

``Cache(...)`` raises at its first bad option, which in a settings file costs a restart
per mistake. The adapters check names, types and the URL themselves, and
:func:`option_problems` tries each other option alone on a throwaway in-process cache, so
each bad option is named once, with the core's own message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from mcache.errors import ConfigError, MCacheError, named_with_guesses

__all__ = ["CACHE_OPTIONS", "CODEC_OPTIONS", "ProblemList", "named_with_guesses", "option_problems"]

CACHE_OPTIONS = frozenset(
    {
        "namespace",
        "stale_ttl",
        "lock_timeout",
        "wait",
        "stale_wait",
        "refresh",
        "early_refresh",
        "jitter",
        "tag_cache_ttl",
        "near_ttl",
        "near_size",
        "refresher",
        "refresh_queue",
        "refresh_fallback",
        "trace_dir",
        "stats_interval",
        "metrics",
        "purge",
        "counted_as",
    }
)
"""``Cache``'s options a settings file sets by name (its TTL and replica lag each adapter
reads from a setting of its framework's)."""
CODEC_OPTIONS = frozenset(
    {
        "serializer",
        "compress_threshold",
        "signing_key",
        "fallback_signing_keys",
        "trust_unsigned_pickle",
    }
)

CHECK_ERRORS = (MCacheError, TypeError, ValueError, ImportError)
"""What a bad option raises: a ``ConfigError`` mostly; a wrong type or a missing extra too."""


class ProblemList:
    """Problems found in one group of settings, raised together as one ``ConfigError``."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.problems: list[str] = []

    def add(self, problem: str) -> None:
        self.problems.append(problem)

    def check(self, setting: str, check: Callable[[], Any]) -> Any:
        """Return ``check()``; on a bad setting, note it (named ``setting``) and return None."""
        try:
            return check()
        except CHECK_ERRORS as error:
            self.add(f"{setting}: {error}" if setting else str(error))
            return None

    def raise_if_any(self) -> None:
        """Raise one ``ConfigError`` listing every problem noted, if there is one."""
        if len(self.problems) == 1:
            raise ConfigError(f"{self.where}{self.problems[0]}")
        if self.problems:
            listed = "".join(f"\n  - {problem}" for problem in self.problems)
            count = len(self.problems)
            raise ConfigError(f"{self.where}{count} problems, fix them all:{listed}")


def option_problems(
    cache_options: Mapping[str, Any],
    codec_options: Mapping[str, Any],
    setting: Callable[[str], str],
    problems: ProblemList,
) -> None:
    """Note each of ``cache_options`` (``Cache``'s) and ``codec_options`` (``Codec``'s) that
    is refused on its own, naming it by ``setting(parameter)``; then, if each is fine
    alone, whether they are refused together (a combination the core rejects)."""
    from mcache.cache import Cache
    from mcache.model.codec import Codec

    found = len(problems.problems)
    for name, value in codec_options.items():
        alone = {name: value}
        if name == "fallback_signing_keys":  # read only beside a key: checked with the site's
            alone["signing_key"] = codec_options.get("signing_key") or "a key"
        problems.check(setting(name), functools.partial(Codec, **alone))
    for name, value in cache_options.items():
        problems.check(setting(name), functools.partial(Cache, "memory://", **{name: value}))
    if len(problems.problems) == found:
        names = ", ".join(setting(name) for name in (*cache_options, *codec_options))
        problems.check(
            names, lambda: Cache("memory://", codec=Codec(**codec_options), **cache_options)
        )
