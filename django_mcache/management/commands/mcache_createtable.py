"""``manage.py mcache_createtable [alias ...] [--dry-run]``: make the durable stores' tables.

The tables are also made on first use; this command is for a site whose
database user may not create tables at run time (run it at deploy time, as
Django's own ``createcachetable``), and for seeing the SQL (``--dry-run``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcache.errors import MCacheError
from mcache.stores.sql.store import SqlStore

from ...backend import core_cache_of


class Command(BaseCommand):
    help = "Create the tables of mcache's durable stores (db:, postgresql://, sqlite:///)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("aliases", nargs="*", help="cache aliases (default: every mcache one)")
        parser.add_argument("--dry-run", action="store_true", help="print the SQL, run nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        aliases = options["aliases"] or [
            alias
            for alias, entry in settings.CACHES.items()
            if str(entry.get("BACKEND", "")).startswith("django_mcache.")
        ]
        found = 0
        for alias in aliases:
            if alias not in settings.CACHES:
                raise CommandError(f"no cache {alias!r} in CACHES: {', '.join(settings.CACHES)}")
            for store in sql_stores(core_cache_of(alias).store):
                found += 1
                where = store.connector.location
                if options["dry_run"]:
                    self.stdout.write(f"-- {alias}: {where}")
                    self.stdout.write(";\n".join(store.dialect.create) + ";")
                    continue
                try:
                    store.ensure_table()
                except MCacheError as error:
                    raise CommandError(f"{alias}: {error}") from None
                self.stdout.write(f"{alias}: table ready in {where}")
        if not found:
            self.stdout.write("no durable store in these caches: nothing to create")


def sql_stores(store: object) -> Iterator[SqlStore]:
    """Yield the durable stores in ``store``, looking into every tier."""
    if isinstance(store, SqlStore):
        yield store
    for tier in ("hot", "cold"):
        inner = getattr(store, tier, None)
        if inner is not None:
            yield from sql_stores(inner)
