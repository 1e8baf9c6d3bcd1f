"""Prometheus and OpenTelemetry export: traffic on a real store, read back as each tool reads it.

Prometheus: the text exposition of a registry, parsed by ``prometheus_client``'s
own parser. OpenTelemetry: the SDK's in-memory metric reader and span exporter.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mcache import Cache
from mcache.errors import ConfigError
from mcache.observe.events import MAX_FUNCTION_FAMILIES, Origin
from mcache.observe.opentelemetry import OpenTelemetryMetrics
from mcache.observe.prometheus import PrometheusMetrics


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the registry's exposition, by name and sorted labels."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def traffic(cache: Cache) -> None:
    """A page, a fragment and a function, each built once and then hit twice; one failed build."""

    @cache.cached(ttl=60, tags=["products"])
    def top_products(limit: int) -> list[int]:
        return list(range(limit))

    for _ in range(3):
        cache.get_or_build(("view", "home", "http", "shop", "/"), lambda: b"<html>", ttl=60)
        cache.get_or_build(("block", "sidebar"), lambda: "<aside>", ttl=60)
        top_products(3)
    with pytest.raises(ZeroDivisionError):
        cache.get_or_build(("block", "broken"), lambda: 1 / 0, ttl=60)


def test_prometheus_counts_per_family_as_its_parser_reads_them(redis_url: str) -> None:
    registry = CollectorRegistry()
    cache = Cache(redis_url, namespace="shop")
    cache.observe(PrometheusMetrics(registry))
    traffic(cache)
    found = samples(registry)
    function = "test_metrics_export.traffic._locals_.top_products"
    name = next(f for (n, labels) in found for _, f in labels if f.endswith(function))

    def value(metric: str, **labels: str) -> float:
        return found.get((metric, tuple(sorted({"cache": "shop", **labels}.items()))), 0.0)

    for family in ("page", "fragment", name):
        assert value("mcache_hits_total", family=family) == 2, family
        assert value("mcache_builds_total", family=family) == 1, family
        assert value("mcache_build_seconds_count", family=family, outcome="built") == 1
    assert value("mcache_misses_total", family="fragment") == 2  # sidebar, broken
    assert value("mcache_build_errors_total", family="fragment") == 1
    assert value("mcache_build_seconds_count", family="fragment", outcome="error") == 1
    assert value("mcache_hits_total", family="other") == 0


def test_function_families_are_bounded_and_unknown_keys_are_other() -> None:
    origin = Origin("ns", "label")
    for n in range(MAX_FUNCTION_FAMILIES + 50):
        origin.add_function(f"module.function_{n}")
    assert len(origin.functions) == MAX_FUNCTION_FAMILIES
    assert origin.family("ns:module.function_0:abcdef") == "module.function_0"
    assert origin.family(f"ns:module.function_{MAX_FUNCTION_FAMILIES}:abcdef") == "other"
    assert origin.family("ns:view.home.http.shop./:abcdef") == "page"
    assert origin.family("ns:jinja.sidebar:abcdef") == "fragment"
    assert origin.family("ns:product.5:abcdef") == "other"
    assert origin.family(None) == "other"


def test_opentelemetry_gets_counters_and_a_span_per_build(redis_url: str) -> None:
    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    cache = Cache(redis_url, namespace="otel")
    cache.observe(OpenTelemetryMetrics(MeterProvider(metric_readers=[reader]), tracer_provider))
    tracer = tracer_provider.get_tracer("site")

    def render() -> str:
        with tracer.start_as_current_span("SELECT products"):
            return "<aside>"

    for _ in range(3):
        cache.get_or_build(("block", "sidebar"), render, ttl=60)
    with pytest.raises(ZeroDivisionError):
        cache.get_or_build(("block", "broken"), lambda: 1 / 0, ttl=60)

    spans = exporter.get_finished_spans()
    builds = [s for s in spans if s.name == "mcache.build"]
    assert [(s.attributes["mcache.family"], s.attributes["mcache.outcome"]) for s in builds] == [
        ("fragment", "built"),
        ("fragment", "error"),
    ]
    assert builds[0].attributes["mcache.key"] == "block.sidebar"
    assert not builds[0].status.is_ok or builds[0].status.status_code.name == "UNSET"
    assert builds[1].status.status_code.name == "ERROR"
    query = next(s for s in spans if s.name == "SELECT products")
    assert query.parent is not None and query.parent.span_id == builds[0].context.span_id

    points = {
        (metric.name, point.attributes.get("mcache.outcome")): point
        for resource in reader.get_metrics_data().resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
        if point.attributes.get("mcache.family") == "fragment"
    }
    assert points[("mcache.hits", None)].value == 2
    assert points[("mcache.builds", None)].value == 1
    assert points[("mcache.build_errors", None)].value == 1
    assert points[("mcache.build.duration", "built")].count == 1
    assert points[("mcache.build.duration", "error")].count == 1


def test_metrics_by_name_and_what_is_refused() -> None:
    cache = Cache("memory://", metrics=["prometheus", "opentelemetry"])
    kinds = sorted(type(o).__name__ for o in cache.counts.observers)
    assert kinds == ["OpenTelemetryMetrics", "PrometheusMetrics"]
    again = Cache("memory://", metrics=["prometheus"])
    assert again.counts.observers[0] in cache.counts.observers  # one per process's registry
    with pytest.raises(ConfigError, match=r"metrics: unknown 'statsd'; write 'prometheus'"):
        Cache("memory://", metrics=["statsd"])
    with pytest.raises(ConfigError, match=r"metrics must be a list"):
        Cache("memory://", metrics=5)  # type: ignore[arg-type]
