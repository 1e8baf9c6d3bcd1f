"""Demo data: three blogs of forty posts and some comments, only into an empty database."""

from __future__ import annotations

import datetime

from django.utils import timezone

from example_project.blog.models import Blog, Comment, Post

BLOGS = [("Cooking at home", "cooking"), ("Night sky", "astronomy"), ("Small gardens", "gardens")]
WORDS = [
    "soil",
    "light",
    "spring",
    "patience",
    "salt",
    "orbit",
    "seed",
    "dusk",
    "basil",
    "comet",
    "shade",
    "water",
]


def migrate_and_seed() -> bool:
    """Bring the database schema up to date, then seed it; return whether it seeded."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return seed()


def seed() -> bool:
    """Create the demo data unless there is some already; return whether it did."""
    if Blog.objects.exists():
        return False
    now = timezone.now()
    for b, (name, slug) in enumerate(BLOGS):
        blog = Blog.objects.create(name=name, slug=slug)
        posts = [
            Post(
                blog=blog,
                title=f"{name}, note {i + 1}",
                body=" ".join(WORDS[(i + j + b) % len(WORDS)] for j in range(120)),
                published=now - datetime.timedelta(hours=7 * i + b),
            )
            for i in range(40)
        ]
        Post.objects.bulk_create(posts)
    comments = [
        Comment(post=post, author=f"reader{n}", text="Thanks for this!")
        for n, post in enumerate(Post.objects.all()[:60])
    ]
    Comment.objects.bulk_create(comments)
    return True
