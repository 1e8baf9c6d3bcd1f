"""Blogs, posts and comments: what the example's cached pages are built from."""

from django.db import models


class Blog(models.Model):
    """One blog of the hosting service."""

    name = models.CharField(max_length=100)
    slug = models.SlugField(unique=True)

    def __str__(self) -> str:
        return self.name


class Post(models.Model):
    """A post; saving one makes every page that shows it stale (ORM signals)."""

    blog = models.ForeignKey(Blog, related_name="posts", on_delete=models.CASCADE)
    title = models.CharField(max_length=200)
    body = models.TextField()
    published = models.DateTimeField()
    views = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-published"]

    def __str__(self) -> str:
        return self.title

    def cache_tags(self) -> list[str]:
        # Beyond its own tags: the feed, the calendar and every page of its blog.
        return ["feed", "calendar", f"blog:{self.blog.slug}"]


class Comment(models.Model):
    """A reader's comment on a post."""

    post = models.ForeignKey(Post, related_name="comments", on_delete=models.CASCADE)
    author = models.CharField(max_length=100)
    text = models.TextField()

    def __str__(self) -> str:
        return f"{self.author} on {self.post}"
