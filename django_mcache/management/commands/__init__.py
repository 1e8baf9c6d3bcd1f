"""``manage.py mcache_stats``."""
