"""OpenTelemetry metrics and spans of mcache caches (``pip install "mcache[opentelemetry]"``).

Written against ``opentelemetry-api`` only: the site's SDK (or none, in which
case every call is a no-op) decides where they go. A span ``mcache.build``
wraps each build, current while the builder runs, so the queries it makes
are its children in a trace; counters ``mcache.<event>`` and the histogram
``mcache.build.duration`` carry the cache and the key family (see
:mod:`mcache.observe.events`) as attributes.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context, metrics, trace
from opentelemetry.trace import Status, StatusCode

from mcache.observe.events import Observer, Origin
from mcache.observe.stats import COUNTERS

__all__ = ["OpenTelemetryMetrics"]

_SCOPE = "mcache"


class OpenTelemetryMetrics(Observer):
    """Counters per event, a build-duration histogram and a span per build."""

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None = None,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        meter = metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self.counters = {
            event: meter.create_counter(f"mcache.{event}", unit="1") for event in COUNTERS
        }
        self.build_duration = meter.create_histogram(
            "mcache.build.duration", unit="s", description="time spent in builders"
        )
        self.tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)

    def counted(self, origin: Origin, event: str, key: str | None, count: int) -> None:
        self.counters[event].add(count, _attributes(origin, key))

    def build_started(self, origin: Origin, key: str) -> Any:
        attributes = {**_attributes(origin, key), "mcache.key": origin.readable(key) or key}
        span = self.tracer.start_span("mcache.build", attributes=attributes)
        return span, context.attach(trace.set_span_in_context(span))

    def build_ended(
        self, origin: Origin, key: str, started: Any, outcome: str, seconds: float
    ) -> None:
        span, token = started
        context.detach(token)
        span.set_attribute("mcache.outcome", outcome)
        if outcome in ("error", "stale-served"):
            span.set_status(Status(StatusCode.ERROR, f"the build raised ({outcome})"))
        span.end()
        self.build_duration.record(seconds, {**_attributes(origin, key), "mcache.outcome": outcome})


def _attributes(origin: Origin, key: str | None) -> dict[str, str]:
    """Return the attributes every metric and span carries: the cache and the key family."""
    return {"mcache.cache": origin.label, "mcache.family": origin.family(key)}
