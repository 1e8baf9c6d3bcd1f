"""memcached: the pool on pymemcache, its commands as steps, the meta protocol and its leases,
and the async twin on asyncio connections.
"""
