"""The blog's one model (created by ``migrate --run-syncdb``: the app has no migrations)."""

from django.db import models


class Post(models.Model):
    """A post: a title and a body of a few paragraphs."""

    title = models.CharField(max_length=200)
    body = models.TextField()
