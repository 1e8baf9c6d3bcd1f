"""Tests of the Django adapter (pytest-django, SQLite, real memcached and Redis)."""
