"""The commands of the simulated memcached (:mod:`tests.sim.memcached`): one request
parsed from the bytes a client sent, applied, and answered as memcached 1.6 answers it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.memcached import Item, SimMemcachedServer

VERSION = b"1.6.18"
ITEM_LIMIT = 1024 * 1024
"""memcached's largest item (``-I``), its header and key included."""
ITEM_HEADER = 56
TOO_LARGE = b"SERVER_ERROR object too large for cache\r\n"
STORAGE = (b"set", b"add", b"replace", b"append", b"prepend", b"cas")


def answer_one(server: SimMemcachedServer, data: bytes) -> tuple[bytes, bytes] | None:
    """Answer the first request in ``data``: ``(reply, the rest)``, or None until it is whole."""
    eol = data.find(b"\r\n")
    if eol < 0:
        return None
    line, rest = data[:eol], data[eol + 2 :]
    words = line.split()
    if not words:
        return b"ERROR\r\n", rest
    command = words[0]
    if command in STORAGE or command == b"ms":
        size_at = 2 if command == b"ms" else 4
        try:
            size = int(words[size_at])
        except (IndexError, ValueError):
            return b"CLIENT_ERROR bad command line format\r\n", rest
        if len(rest) < size + 2:
            return None
        value, rest = rest[:size], rest[size + 2 :]
        if command == b"ms":
            return meta_set(server, words, value), rest
        return storage(server, words, value), rest
    handler = HANDLERS.get(command)
    if handler is None:
        return b"ERROR\r\n", rest
    return handler(server, words), rest


# -- the text protocol -----------------------------------------------------------------------


def quiet(words: list[bytes], reply: bytes) -> bytes:
    return b"" if words[-1] == b"noreply" else reply


def retrieval(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    out = []
    for key in words[1:]:
        item = server.live(key.decode())
        server.counts[b"get_hits" if item else b"get_misses"] += 1
        if item is None:
            continue
        cas = b" %d" % item.cas if words[0] == b"gets" else b""
        out.append(
            b"VALUE %s %d %d%s\r\n%s\r\n" % (key, item.flags, len(item.value), cas, item.value)
        )
    return b"".join(out) + b"END\r\n"


def too_large(key: str, value: bytes) -> bool:
    return ITEM_HEADER + len(key) + len(value) > ITEM_LIMIT


def storage(server: SimMemcachedServer, words: list[bytes], value: bytes) -> bytes:
    command, key = words[0], words[1].decode()
    flags, exptime = int(words[2]), int(words[3])
    item = server.live(key)
    if too_large(key, value):
        if command == b"set":
            server.items.pop(key, None)  # a failed set must not leave the old value
        return TOO_LARGE
    joined = command in (b"append", b"prepend") and item is not None
    if joined and too_large(key, item.value + value):  # type: ignore[union-attr]
        return quiet(words, b"NOT_STORED\r\n")
    if command == b"add" and item is not None:
        return quiet(words, b"NOT_STORED\r\n")
    if command in (b"replace", b"append", b"prepend") and item is None:
        return quiet(words, b"NOT_STORED\r\n")
    if command == b"cas":
        if item is None:
            return quiet(words, b"NOT_FOUND\r\n")
        if item.cas != int(words[5]):
            return quiet(words, b"EXISTS\r\n")
    if command in (b"append", b"prepend"):
        assert item is not None
        item.value = item.value + value if command == b"append" else value + item.value
        server.new_cas(item)
    else:
        server.store(key, value, exptime, flags)
    return quiet(words, b"STORED\r\n")


def arithmetic(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    item = server.live(words[1].decode())
    if item is None:
        return quiet(words, b"NOT_FOUND\r\n")
    result = server.counted(item, int(words[2]), words[0] == b"decr")
    if result is None:
        return NON_NUMERIC
    return quiet(words, result + b"\r\n")


def delete(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    found = server.live(words[1].decode()) is not None
    server.items.pop(words[1].decode(), None)
    return quiet(words, b"DELETED\r\n" if found else b"NOT_FOUND\r\n")


def touch(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    item = server.live(words[1].decode())
    if item is None:
        return quiet(words, b"NOT_FOUND\r\n")
    item.exptime = server.realtime(int(words[2]))
    return quiet(words, b"TOUCHED\r\n")


def flush_all(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    server.flushed()  # told first: what it is about to lose is still there
    server.flush()
    return quiet(words, b"OK\r\n")


def stats(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    now = server.current()
    lines = {
        b"pid": b"1",
        b"uptime": b"%d" % (now - server.started),
        b"time": b"%d" % now,
        b"version": VERSION,
        b"curr_items": b"%d" % len(server.items),
        b"bytes": b"%d" % sum(ITEM_HEADER + len(k) + len(i.value) for k, i in server.items.items()),
        b"limit_maxbytes": b"%d" % (64 * ITEM_LIMIT),
        b"evictions": b"0",
        **{name: b"%d" % count for name, count in server.counts.items()},
    }
    return b"".join(b"STAT %s %s\r\n" % pair for pair in lines.items()) + b"END\r\n"


def version(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    return b"VERSION " + VERSION + b"\r\n"


# -- the meta protocol -----------------------------------------------------------------------


def tokens(words: list[bytes]) -> dict[bytes, bytes]:
    """A meta request's flags, by their letter (``M`` modes by theirs)."""
    return {word[:1]: word[1:] for word in words}


def returned(
    server: SimMemcachedServer, item: Item, words: list[bytes], ttl: int | None, key: bytes
) -> list[bytes]:
    """The flags a meta reply returns, in the order the request asked for them."""
    out = []
    for word in words:
        if word == b"c":
            out.append(b"c%d" % item.cas)
        elif word == b"t":
            out.append(b"t%d" % (server.ttl_left(item) if ttl is None else ttl))
        elif word == b"k":
            out.append(b"k" + key)
        elif word == b"s":
            out.append(b"s%d" % len(item.value))
    return out


def meta_get(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    key, flags = words[1].decode(), words[2:]
    asked = tokens(flags)
    item = server.live(key)
    if item is None:
        if b"N" not in asked:
            return b"" if b"q" in asked else b"EN\r\n"
        # vivified: an empty placeholder, leased to this reader (its TTL reads -1 here)
        item = server.store(key, b"", int(asked[b"N"]))
        item.token_sent = True
        out = [*returned(server, item, flags, -1, words[1]), b"W"]
        return reply(flags, item, out)
    if b"T" in asked:
        item.exptime = server.realtime(int(asked[b"T"]))
    out = returned(server, item, flags, None, words[1])
    win = False
    if item.token_sent:
        out.append(b"Z")
    if item.stale:
        out.append(b"X")
        win = not item.token_sent
    if not win and not item.token_sent and b"R" in asked and item.exptime:
        win = item.exptime - server.current() < int(asked[b"R"])
    if win:
        out.append(b"W")
        item.token_sent = True
    return reply(flags, item, out)


def reply(flags: list[bytes], item: Item, out: list[bytes]) -> bytes:
    tail = b"".join(b" " + flag for flag in out)
    if b"v" in flags:
        return b"VA %d%s\r\n%s\r\n" % (len(item.value), tail, item.value)
    return b"HD%s\r\n" % tail


def meta_set(server: SimMemcachedServer, words: list[bytes], value: bytes) -> bytes:
    key, flags = words[1].decode(), words[3:]
    asked = tokens(flags)
    mode = asked.get(b"M", b"S")[:1]
    item = server.live(key)
    silent = b"q" in asked
    if too_large(key, value):
        if mode == b"S":
            server.items.pop(key, None)
        return TOO_LARGE
    if b"C" in asked:
        if item is None:
            return b"NF\r\n"
        if item.cas != int(asked[b"C"]):
            return b"EX\r\n"
    if mode == b"E" and item is not None:
        return b"NS\r\n"
    if mode in (b"A", b"P", b"R") and item is None:
        return b"NF\r\n" if mode != b"R" else b"NS\r\n"
    if mode in (b"A", b"P"):
        assert item is not None
        item.value = item.value + value if mode == b"A" else value + item.value
        server.new_cas(item)
    else:
        server.store(key, value, int(asked.get(b"T", b"0")))
    return b"" if silent else b"HD\r\n"


def meta_delete(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    key, flags = words[1].decode(), words[2:]
    asked = tokens(flags)
    item = server.live(key)
    if item is None:
        return b"NF\r\n"
    if b"C" in asked and item.cas != int(asked[b"C"]):
        return b"EX\r\n"
    if b"I" in asked:  # marked stale: kept, its rebuild leased to the next reader
        item.stale, item.token_sent = True, False
        if b"T" in asked:
            item.exptime = server.realtime(int(asked[b"T"]))
        server.new_cas(item)
    else:
        del server.items[key]
    return b"" if b"q" in asked else b"HD\r\n"


def meta_arithmetic(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    key, flags = words[1].decode(), words[2:]
    asked = tokens(flags)
    item = server.live(key)
    if item is None:
        if b"N" not in asked:
            return b"NF\r\n"
        item = server.store(key, asked.get(b"J", b"0"), int(asked[b"N"]))
        result = item.value
    else:
        down = asked.get(b"M", b"I")[:1] in (b"D", b"-")
        counted = server.counted(item, int(asked.get(b"D", b"1")), down)
        if counted is None:
            return NON_NUMERIC
        result = counted
    if b"v" in flags:
        return b"VA %d\r\n%s\r\n" % (len(result), result)
    return b"HD\r\n"


def meta_noop(server: SimMemcachedServer, words: list[bytes]) -> bytes:
    return b"MN\r\n"


NON_NUMERIC = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"

HANDLERS = {
    b"get": retrieval,
    b"gets": retrieval,
    b"incr": arithmetic,
    b"decr": arithmetic,
    b"delete": delete,
    b"touch": touch,
    b"flush_all": flush_all,
    b"stats": stats,
    b"version": version,
    b"mg": meta_get,
    b"md": meta_delete,
    b"ma": meta_arithmetic,
    b"mn": meta_noop,
}
