"""What the cache keeps: keys, encoded values, entries, tags and their dependencies, the near
cache, server placement, rebuild jobs as data.
"""
