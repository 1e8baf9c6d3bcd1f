"""A store URL as it may be shown: in an error, a log line, a check's message, a repr.

A URL may carry a password in two places: ``user:password@`` before the host, and a
``password`` (or ``sentinel_password``) option in the query string. Both are replaced by
``***`` structurally, never by searching the text for the password (a short one, ``1``,
would also hide the ``1`` of every port).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["redacted_url"]

SECRET_OPTIONS = frozenset({"password", "sentinel_password"})


def redacted_url(url: object) -> str:
    """Return ``url`` with every password in it replaced by ``***`` (anything that is not a
    string comes back as its ``str``)."""
    if not isinstance(url, str) or "://" not in url:
        return str(url)
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    netloc = f"{userinfo}@{hosts}" if at else hosts
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(name in SECRET_OPTIONS for name, _ in pairs):
            shown = [(name, "***" if name in SECRET_OPTIONS else value) for name, value in pairs]
            query = urlencode(shown, safe="/:,*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
