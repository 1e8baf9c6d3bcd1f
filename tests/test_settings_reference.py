"""The settings reference against the code that reads the settings: each table lists
every key its adapter reads, once, and no key of the other adapter's; the OPTIONS lists
of the reference and of the Django set-up guide name every option a Django cache takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from django_mcache.config import PAGE_OPTIONS
from flask_mcache.config import KEYS as FLASK_KEYS
from mcache.admin.config_problems import CACHE_OPTIONS, CODEC_OPTIONS

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
SETTING = re.compile(r"`(MCACHE_[A-Z_]+)`")


def table_after(marker: str) -> list[str]:
    """Return the first-column keys of the table that follows ``marker``, in order."""
    after = REFERENCE.split(marker, 1)[1].lstrip("\n")
    rows = []
    for line in after.splitlines():
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return [key for row in rows[2:] for key in SETTING.findall(row)]


def read_by(package: str) -> set[str]:
    """Return the ``MCACHE_`` settings the package's code names."""
    source = "".join(p.read_text(encoding="utf-8") for p in (ROOT / package).rglob("*.py"))
    return set(re.findall(r"\bMCACHE_[A-Z_]+[A-Z]\b", source))


@pytest.mark.parametrize(
    ("marker", "keys"),
    [
        ("Settings read by `django_mcache`:\n", read_by("django_mcache")),
        ("read at `MCache(app)` / `init_app(app)` (an unknown\n`MCACHE_` key is an error):\n",
         set(FLASK_KEYS)),
    ],
    ids=["django", "flask"],
)  # fmt: skip
def test_each_table_lists_what_its_adapter_reads_once(marker: str, keys: set[str]) -> None:
    listed = table_after(marker)
    assert len(listed) == len(set(listed)), (
        f"listed twice: {sorted(k for k in listed if listed.count(k) > 1)}"
    )
    assert set(listed) == keys, (sorted(set(listed) - keys), sorted(keys - set(listed)))


def test_the_django_options_are_every_option_a_cache_takes() -> None:
    options = CACHE_OPTIONS | CODEC_OPTIONS | PAGE_OPTIONS
    row = next(line for line in REFERENCE.splitlines() if line.startswith("| `OPTIONS` |"))
    setup = (ROOT / "docs" / "how-to" / "django-setup.md").read_text(encoding="utf-8")
    bullet = setup.split("- **OPTIONS**:", 1)[1].split("\n- ", 1)[0]
    for where, text in (("settings.md", row), ("django-setup.md", bullet)):
        named = set(re.findall(r"`([a-z_]+)`", text))
        assert options <= named, f"{where} lacks {sorted(options - named)}"
