"""Rebuilds on real task queues: Celery, RQ and Django Tasks, with real worker processes."""
