"""Tests of the Flask extension (Flask test client, real memcached and Redis)."""
