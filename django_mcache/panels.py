"""A django-debug-toolbar panel: every mcache call of a request, with what happened to it.

Unlike the toolbar's own cache panel it patches no cache method: it attaches an
observer (:mod:`mcache.observe.events`) to every mcache cache in ``CACHES``,
which keeps the calls of the request the toolbar is recording (a context
variable says which). Setup: docs/how-to/debug-toolbar.md.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from debug_toolbar.panels import Panel
from django.conf import settings
from django.core.cache import caches
from django.utils.translation import gettext_lazy, ngettext

from mcache import Cache
from mcache.observe.events import CallRecord, Observer, Origin

__all__ = ["MCachePanel"]

_RECORDING: ContextVar[list[dict[str, Any]] | None] = ContextVar(
    "mcache_toolbar_recording", default=None
)

NOTABLE = {
    "builds": "built",
    "build_errors": "build raised",
    "lock_waits": "waited for another's build",
    "wait_timeouts": "wait ran out",
    "coalesced": "shared a call in this process",
    "stale": "stale served",
    "uncached": "builder said Uncacheable",
    "store_errors": "store failed",
}


class _Recorder(Observer):
    """Keeps each call made in a request the toolbar records; ignores every other call."""

    def called(self, origin: Origin, call: CallRecord) -> None:
        calls = _RECORDING.get()
        if calls is not None:
            calls.append(
                {
                    "cache": origin.label,
                    "operation": call.operation,
                    "key": origin.readable(call.key) or call.key,
                    "outcome": call.outcome,
                    "tags": call.tags,
                    "events": [NOTABLE[e] for e in dict.fromkeys(call.events) if e in NOTABLE],
                    "round_trips": call.round_trips,
                    "ms": call.seconds * 1000,
                }
            )


_RECORDER = _Recorder()


class MCachePanel(Panel):
    """mcache's calls in the request: key, outcome, tags, round trips, time, and totals."""

    title = gettext_lazy("mcache")
    template = "django_mcache/panel.html"
    is_async = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._calls: list[dict[str, Any]] = []
        self._token: Token[list[dict[str, Any]] | None] | None = None

    def enable_instrumentation(self) -> None:
        for alias in settings.CACHES:
            try:
                core = getattr(caches[alias], "mcache", None)
            except Exception:  # a misconfigured cache: its own requests report that
                continue
            if isinstance(core, Cache):
                core.observe(_RECORDER)
        self._calls = []
        self._token = _RECORDING.set(self._calls)

    def disable_instrumentation(self) -> None:
        if self._token is not None:
            _RECORDING.reset(self._token)
            self._token = None

    def generate_stats(self, request: Any, response: Any) -> None:
        self.record_stats({"calls": self._calls, "totals": totals(self._calls)})

    @property
    def nav_subtitle(self) -> str:
        found = self.get_stats().get("totals") or {}
        calls = found.get("calls", 0)
        text = ngettext("%(calls)d call in %(ms).2f ms", "%(calls)d calls in %(ms).2f ms", calls)
        return text % {"calls": calls, "ms": found.get("ms", 0.0)}


def totals(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the request's totals: calls, time, round trips, and calls per outcome and event."""
    outcomes = [call["outcome"] for call in calls]
    events = [event for call in calls for event in call["events"]]
    return {
        "calls": len(calls),
        "ms": sum(call["ms"] for call in calls),
        "round_trips": sum(call["round_trips"] for call in calls),
        "hits": outcomes.count("HIT"),
        "misses": outcomes.count("MISS"),
        "stale": outcomes.count("STALE"),
        "bypass": outcomes.count("BYPASS"),
        "built": events.count("built"),
        "waited": events.count("waited for another's build"),
    }
