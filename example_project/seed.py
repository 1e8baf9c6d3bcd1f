"""Demo data: three blogs of forty readable posts and some comments, only into an empty
database."""

from __future__ import annotations

import datetime

from django.utils import timezone

from example_project.blog.models import Blog, Comment, Post

BLOGS = [("Cooking at home", "cooking"), ("Night sky", "astronomy"), ("Small gardens", "gardens")]
TOPICS = {
    "cooking": ["basil", "sourdough", "lentils", "tomatoes", "leeks", "pears", "rice", "garlic"],
    "astronomy": ["Jupiter", "the Moon", "Orion", "meteors", "Saturn", "comets", "Venus", "Mars"],
    "gardens": ["mint", "snowdrops", "compost", "roses", "lettuce", "ivy", "tulips", "moss"],
}
TITLES = [
    "{T} on a weeknight",
    "Getting {t} right",
    "What I learned about {t}",
    "{T}, slowly",
    "A second look at {t}",
]
SENTENCES = {
    "cooking": [
        "A pinch of salt early on does more than a spoonful at the end.",
        "I keep a jar of it by the stove, where I can reach it without looking.",
        "The trick is patience: low heat, a lid, and twenty quiet minutes.",
        "My grandmother never measured anything, and it showed in the best way.",
        "Leftovers went into a soup the next day, which was better still.",
        "Buy it at the market on Saturday and it keeps well into the week.",
        "A squeeze of lemon at the table brightens the whole dish.",
        "Nothing here needs a machine; a good knife and a heavy pan will do.",
    ],
    "astronomy": [
        "From the balcony, away from the street lamps, it was easy to find.",
        "Binoculars resting on a fence post showed far more than I expected.",
        "The best hour was just after midnight, when the neighbours' lights went out.",
        "Give your eyes twenty minutes in the dark before you judge the sky.",
        "A thin haze came in from the west, and then it was gone.",
        "The app on my phone helped, with its screen turned down to red.",
        "Nobody else was out, and the only sound was the wind in the poplars.",
        "I made a quick sketch in the notebook to compare with next month.",
    ],
    "gardens": [
        "A window box is enough to start, and a balcony is luxury.",
        "Water in the morning, so the leaves are dry before the evening.",
        "The slugs found it first, which is how I knew it was doing well.",
        "Half a bag of compost turned a tired corner into the best bed we have.",
        "Cuttings from a neighbour rooted in a glass on the kitchen sill.",
        "Leave a little mess for the insects; the birds will thank you.",
        "By June it had climbed the fence and started on the shed.",
        "Label everything: in spring I never remember what I planted where.",
    ],
}
READERS = ["Ann", "Bilal", "Chen", "Dora", "Emil", "Farah"]


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
                title=title(slug, i),
                body=body(slug, i),
                published=now - datetime.timedelta(hours=7 * i + b),
            )
            for i in range(len(TOPICS[slug]) * len(TITLES))
        ]
        Post.objects.bulk_create(posts)
    comments = [
        Comment(post=post, author=READERS[n % len(READERS)], text="Thanks, I tried this too.")
        for n, post in enumerate(Post.objects.all()[:60])
        for _ in range(n % 3)  # none, one or two: the pages say "1 comment", "2 comments"
    ]
    Comment.objects.bulk_create(comments)
    return True


def title(slug: str, number: int) -> str:
    """The title of a blog's post ``number``: a topic of the blog in one of the phrasings."""
    topics = TOPICS[slug]
    topic = topics[number % len(topics)]
    phrasing = TITLES[number // len(topics) % len(TITLES)]
    return phrasing.format(t=topic, T=topic[0].upper() + topic[1:])


def body(slug: str, number: int) -> str:
    """Every sentence of the blog once, in an order of the post's own, as three paragraphs."""
    sentences = SENTENCES[slug]
    order = [sentences[(number + k * 3) % len(sentences)] for k in range(len(sentences))]
    paragraphs = [order[0:3], order[3:6], order[6:]]
    return "\n\n".join(" ".join(paragraph) for paragraph in paragraphs)
