"""The blog's models (created by ``migrate --run-syncdb``: the app has no migrations)."""

from django.conf import settings
from django.db import models


class Post(models.Model):
    """A post: a title and a body of a few paragraphs."""

    title = models.CharField(max_length=200)
    body = models.TextField()


class Comment(models.Model):
    """A reader's comment under a post: what the post page's form adds to."""

    post = models.ForeignKey(Post, related_name="comments", on_delete=models.CASCADE)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    text = models.TextField()
