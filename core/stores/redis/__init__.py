"""Redis, Sentinel and Cluster on redis-py, with their async twins, Lua scripts and the
invalidations Redis pushes to a near cache.
"""
