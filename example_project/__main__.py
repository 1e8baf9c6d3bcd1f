"""``python -m example_project``: migrate, seed, and serve the example blog on 127.0.0.1:8000.

``--check`` instead walks every page with Django's test client, edits a post
and checks that the pages that show it change, then exits (0 when all is well).
``MCACHE_URL=memcached://127.0.0.1:11211`` (or ``redis://…``) switches stores;
without it, a memcached running on 127.0.0.1:11211 is used, else ``memory://``
(see ``store.py``). ``python -m example_project stampede`` runs the stampede demo
(see ``stampede.py``); ``python -m example_project manage <command>`` runs a
``manage.py`` command on the example's settings (``createsuperuser`` for the
admin, ``mcache_stats``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys

HELP = """\
Migrate and seed the example blog's database, and serve the blog on
http://127.0.0.1:8000/ (Django's development server, one process).
"""
COMMANDS = """\
other commands:
  python -m example_project manage COMMAND   a manage.py command on the example's
                                             settings: createsuperuser (a user for
                                             /admin/), mcache_stats, shell, ...
  python -m example_project stampede         the stampede demo (stampede --help)
  python -m example_project.flask_app        the Flask twin, on port 8001

MCACHE_URL=memcached://HOST:PORT (or redis://HOST:PORT/0, memory://) picks the
store; without it a memcached running on 127.0.0.1:11211 is used, else memory://.
"""


TRY = """\
Try: reload / or a blog's page and watch the footer (and the X-Cache header): MISS,
     then HIT. A post page is rendered for every request (its view count moves): its
     footer says "not cached as a whole", and its text is a cached fragment.
     /calendar/ takes a second once, then is instant.
     A user for /admin/: python -m example_project manage createsuperuser; edit a post
     there and see / and every page of its blog change at once (look from a private
     window: a signed-in visitor's pages are never cached), and /admin/mcache/dashboard/
     charts the cache, page by kind of page.
     The Flask twin on the same data: python -m example_project.flask_app (port 8001).
     With MCACHE_URL on memcached or Redis, the stats of every process:
     python -m example_project manage mcache_stats"""


def prepare(key_prefix: str | None = None) -> bool:
    """Set Django up on the example's settings, migrate and seed; return whether it seeded.

    ``key_prefix`` puts the cache under a namespace of its own (``--check`` uses
    a fresh one: a cold cache without emptying a server). The Flask twin calls
    it too, so both read the same database (and, with no ``MCACHE_URL``, pick
    the same store: :func:`example_project.store.choose_store`).
    """
    from example_project.store import choose_store

    choose_store()
    os.environ["DJANGO_SETTINGS_MODULE"] = "example_project.settings"  # the example's own
    import django
    from django.conf import settings

    if key_prefix is not None:
        settings.CACHES["default"]["KEY_PREFIX"] = key_prefix

    django.setup()
    from example_project.seed import migrate_and_seed

    return migrate_and_seed()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["stampede"]:
        from example_project.stampede import main as stampede

        return stampede(argv[1:])
    if argv[:1] == ["manage"]:
        return manage(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m example_project",
        description=HELP,
        epilog=COMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=8000, help="the port to serve on (8000)")
    parser.add_argument(
        "--check", action="store_true", help="walk every page, edit a post, check, and exit"
    )
    args = parser.parse_args(argv)
    from example_project.store import choose_store

    why = choose_store()  # before prepare(), which keeps what this chose
    seeded = prepare(f"example-check-{secrets.token_hex(4)}" if args.check else None)
    from django.conf import settings
    from django.core.management import call_command

    if args.check:
        from example_project.check import check

        return check()
    one_process()
    store = settings.CACHES["default"]["LOCATION"]
    print(f"mcache example blog on http://127.0.0.1:{args.port}/")
    print(f"  store: {store} ({why})")
    print(f"  database: {settings.DATABASES['default']['NAME']}{', seeded' if seeded else ''}")
    print(TRY)
    call_command("runserver", f"127.0.0.1:{args.port}", use_reloader=False, insecure_serving=True)
    return 0


def one_process() -> None:
    """Silence W001 and W002 on ``memory://`` for what ``python -m example_project`` runs.

    It serves from one process (runserver without its autoreloader), and the
    commands run beside it (``createsuperuser``, ``mcache_stats``) show no page
    of that process: what the two warnings are about cannot happen there. Under
    gunicorn the same settings would have several processes, and keep both.
    """
    from django.conf import settings

    if settings.CACHES["default"]["LOCATION"].startswith("memory://"):
        silenced = ["django_mcache.W001", "django_mcache.W002"]
        settings.SILENCED_SYSTEM_CHECKS = [*settings.SILENCED_SYSTEM_CHECKS, *silenced]


def manage(argv: list[str]) -> int:
    """Run a ``manage.py`` command (``argv``) on the example's migrated, seeded database."""
    prepare()
    one_process()
    from django.core.management import execute_from_command_line

    execute_from_command_line(["python -m example_project manage", *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main())
