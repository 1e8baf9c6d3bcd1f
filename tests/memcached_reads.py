"""Record the reads a memcached pool sends, on either protocol: (server, keys) per request.

A hit is one request to one server: a ``get`` of the entry and its tag copies
(on the meta protocol too, for an entry the process knows fresh), or the
entry's ``mg`` (its lease bid) with a ``get`` of the tag copies beside it, sent
together. Tests that check that count requests here.
"""

from __future__ import annotations

import pytest

from mcache.stores.memcached import store as memcached_module


def record_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, int]]:
    """Return a list that receives ``(server, keys read)`` for each read request sent:
    a ``get`` (a plain read, either protocol) or an ``mg`` with the ``get`` beside it
    (a leasing read, meta protocol)."""
    requests: list[tuple[object, int]] = []
    send = memcached_module.send_get
    leased = memcached_module._leased_get

    def sending(client, keys):  # type: ignore[no-untyped-def]
        requests.append((client.server, len(keys)))
        return send(client, keys)

    def leasing(client, mg, beside):  # type: ignore[no-untyped-def]
        requests.append((client.server, 1 + len(beside)))
        return leased(client, mg, beside)

    monkeypatch.setattr(memcached_module, "send_get", sending)
    monkeypatch.setattr(memcached_module, "_leased_get", leasing)
    return requests
