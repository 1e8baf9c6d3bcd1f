"""Watching a cache: events, statistics, per-key traces, and the Prometheus and OpenTelemetry
exporters.
"""
