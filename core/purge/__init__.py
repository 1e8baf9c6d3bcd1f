"""Purging the caches in front (Varnish, a CDN) by the same tags mcache invalidates.

Pages carry their tags as surrogate keys (:mod:`.surrogate`), and the tags a cache
invalidates are purged there too (:mod:`.sender`, through the targets of
:mod:`.targets`, named by URL in :mod:`.urls`), so a page kept in front ends when
mcache's copy does.
"""
