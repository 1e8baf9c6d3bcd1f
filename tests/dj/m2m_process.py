"""A Django process of the many-to-many tests, driven line by line on its stdin.

``python -m tests.dj.m2m_process DB STORE``: the test settings on the SQLite
file ``DB`` and the mcache store ``STORE``. Commands: ``seed`` (create the
tables, a post and a label), ``page`` (request the label page, which depends on
``Label``: prints its ``X-Cache`` and body), ``label`` (add the label to the post;
prints whether this process ever imported a cached view), ``quit``.
"""

from __future__ import annotations

import os
import sys


def setup(database: str, store: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.dj.settings"
    from django.conf import settings

    settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": database}}
    settings.CACHES = {
        "default": {
            "BACKEND": "django_mcache.backend.MCacheBackend",
            "LOCATION": store,
            "KEY_PREFIX": "m2m",
        }
    }
    import django

    django.setup()


def run(command: str) -> str:
    from django.core.management import call_command
    from django.test import Client

    from tests.dj.blog.models import Label, Post

    if command == "seed":
        call_command("migrate", run_syncdb=True, verbosity=0)
        Post.objects.create(title="p")
        Label.objects.create(name="news")
        return "seeded"
    if command == "page":
        response = Client().get("/labels/")
        return f"{response['X-Cache']} {response.content.decode()}"
    if command == "label":
        Post.objects.get().labels.add(Label.objects.get())
        return f"added; views imported: {'tests.dj.views' in sys.modules}"
    raise ValueError(f"unknown command {command!r}")


def main() -> None:
    setup(*sys.argv[1:3])
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "quit":
            return
        print(run(command), flush=True)


if __name__ == "__main__":
    main()
