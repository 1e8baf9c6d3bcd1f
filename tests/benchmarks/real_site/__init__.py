"""The small blog bench_real_traffic serves: a post list with comment counts, post pages
with their comments and a comment form, and a header greeting the signed-in user. Its
pages do the queries a blog's pages do (what a miss costs, and so what a cache saves).

One site, three configurations: ``MCACHE_BENCH_SITE`` (``holes``, ``plain`` or
``django``) picks the templates' greeting, the context processors and the views'
decorators, so each configuration is a gunicorn of its own with its own settings
and nothing else differs (middleware, database, memcached). The benchmark sets
``MCACHE_BENCH_MEMCACHED`` and ``MCACHE_BENCH_DB`` too. :mod:`.browsers` is the other
side: the visitors (cookie jars) and the traffic mix the benchmark sends.
"""
