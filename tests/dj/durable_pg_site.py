"""A Django site whose durable cache is a table in its PostgreSQL database (run as a script).

    python -m tests.dj.durable_pg_site <port>

Configures Django with ``DATABASES["default"]`` on the PostgreSQL at 127.0.0.1:<port>
and a cache on ``LOCATION "db:default"``, makes the table with
``mcache_createtable``, uses the cache, and prints what it saw as JSON.
"""

from __future__ import annotations

import io
import json
import sys


def main(port: str) -> None:
    import django
    from django.conf import settings
    from django.core.management import call_command

    from tests.servers import django_postgres

    settings.configure(
        SECRET_KEY="tests-only",  # mcache signs values with a key derived from it
        DATABASES={"default": django_postgres(port)},
        CACHES={
            "default": {
                "BACKEND": "django_mcache.backend.MCacheBackend",
                "LOCATION": "db:default",
                "OPTIONS": {"table": "mcache_site"},
            }
        },
        INSTALLED_APPS=["django_mcache"],
    )
    django.setup()
    from django.core.cache import cache
    from django.db import connection, transaction

    out = io.StringIO()
    call_command("mcache_createtable", stdout=out)
    cache.set("page", {"html": "<p>hi</p>"}, 60)
    with transaction.atomic():
        added = [cache.add("lock", 1, 60), cache.add("lock", 2, 60)]
        cache.set("n", 10)
        counted = cache.incr("n", 5)
        with connection.cursor() as cursor:  # the site's own connection sees it mid-transaction
            cursor.execute("SELECT count(*) FROM mcache_site WHERE key LIKE %s", ["_1_n:%"])
            visible = cursor.fetchone()[0]
    json.dump(
        {
            "command": out.getvalue(),
            "page": cache.get("page"),
            "added": added,
            "counted": counted,
            "visible": visible,
            "store": repr(cache.mcache.store),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1])
