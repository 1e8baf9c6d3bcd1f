"""MkDocs hooks for the documentation site (``hooks:`` in ``mkdocs.yml``).

The docstrings name other objects with Sphinx roles (``:class:`~mcache.contract.store.Store```),
which mkdocstrings renders as they are written when no docstring style is set;
this shows them as the code they name, as Sphinx would (``~`` keeps the last part).
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj|const):<code>(~?)([^<]+)</code>")


def _as_code(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    name = target.rsplit(".", 1)[-1] if tilde else target
    return f"<code>{name}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    """Turn ``:role:`target``` left in the rendered docstrings into plain code."""
    return _ROLE.sub(_as_code, html)
