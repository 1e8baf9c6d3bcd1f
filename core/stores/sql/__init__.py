"""The durable tier on PostgreSQL (psycopg 3) and SQLite."""
