"""Models the view, template and counter tests read from SQLite."""

from django.db import models


class Post(models.Model):
    """A blog post; its page is what the tests cache."""

    title = models.CharField(max_length=200)
    views = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "blog"

    def __str__(self) -> str:
        return self.title
