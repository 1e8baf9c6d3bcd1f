"""Models the view, template, counter and ORM tests read from SQLite."""

from django.db import models

from django_mcache.invalidation import TaggedManager


class Blog(models.Model):
    """A blog: its pages depend on its posts (a post declares the blog's tag through its FK)."""

    name = models.CharField(max_length=100)

    class Meta:
        app_label = "blog"


class Label(models.Model):
    """A label on posts, through a many-to-many relation."""

    name = models.CharField(max_length=50)

    class Meta:
        app_label = "blog"


class Post(models.Model):
    """A blog post; its page is what the tests cache."""

    title = models.CharField(max_length=200)
    views = models.PositiveIntegerField(default=0)
    blog = models.ForeignKey(Blog, null=True, blank=True, on_delete=models.CASCADE)
    labels = models.ManyToManyField(Label, blank=True)

    objects = models.Manager()
    tagged = TaggedManager()

    class Meta:
        app_label = "blog"

    def __str__(self) -> str:
        return self.title

    def cache_tags(self) -> list[str]:
        return ["feed"]  # every post change also refreshes the RSS feed


class Featured(Post):
    """A proxy: its rows are posts, and so are its tags."""

    class Meta:
        app_label = "blog"
        proxy = True


class Article(Post):
    """Multi-table inheritance: an article is also a post."""

    source = models.CharField(max_length=100, default="")

    class Meta:
        app_label = "blog"


class Profile(models.Model):
    """A one-to-one relation to a blog."""

    blog = models.OneToOneField(Blog, null=True, on_delete=models.SET_NULL)

    class Meta:
        app_label = "blog"
