"""Prometheus metrics of mcache caches (``pip install "mcache[prometheus]"``).

Per-process counters and a build-time histogram, labelled by cache and key family, made
with ``prometheus_client``'s own metric types, so they are exposed (and add up across
gunicorn's workers) as a site's other metrics are. See docs/how-to/prometheus.md.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from mcache.observe.events import Observer, Origin
from mcache.observe.stats import COUNTERS

__all__ = ["BUILD_BUCKETS", "PrometheusMetrics"]

BUILD_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Build times span a dict lookup to a report query: from a millisecond to half a minute."""


class PrometheusMetrics(Observer):
    """``mcache_<event>_total{cache, family}`` counters and ``mcache_build_seconds``."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        labels = ("cache", "family")
        self.counters = {
            event: Counter(f"mcache_{event}", f"mcache: {meaning}", labels, registry=registry)
            for event, meaning in COUNTERS.items()
        }
        self.build_seconds = Histogram(
            "mcache_build_seconds",
            "mcache: time spent in builders, by outcome (built, error, stale-served, …)",
            (*labels, "outcome"),
            buckets=BUILD_BUCKETS,
            registry=registry,
        )

    def counted(self, origin: Origin, event: str, key: str | None, count: int) -> None:
        self.counters[event].labels(origin.label, origin.family(key)).inc(count)

    def build_ended(
        self, origin: Origin, key: str, started: Any, outcome: str, seconds: float
    ) -> None:
        self.build_seconds.labels(origin.label, origin.family(key), outcome).observe(seconds)
