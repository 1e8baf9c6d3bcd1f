"""A one-module Django site for bench_django: the same page under mcache and under cache_page.

Settings come from the environment the benchmark sets (``MCACHE_BENCH_MEMCACHED``,
``MCACHE_BENCH_DB``), so gunicorn can serve ``tests.benchmarks.django_site.wsgi``.
"""
