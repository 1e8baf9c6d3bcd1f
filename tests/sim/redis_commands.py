"""What the simulated Redis does for each command the Redis store sends, and for each of
its Lua scripts (:mod:`mcache.stores.redis.lua`), run by what the script does."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcache.stores.redis import lua

if TYPE_CHECKING:
    from tests.sim.redis import SimRedisServer

Reply = Any
"""What a command answers: bytes (a bulk string), int, None, a list, ``Status`` or ``Error``."""


class Status(bytes):
    """A simple string reply (``+OK``)."""


class Error(Exception):
    """An error reply (``-ERR …``)."""


def sha(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


OK = Status(b"OK")


def _get(server: SimRedisServer, args: list[bytes]) -> Reply:
    value = server.live(args[0])
    server.hits, server.misses = server.hits + (value is not None), server.misses + (value is None)
    if value is not None and not isinstance(value, bytes):
        raise Error("WRONGTYPE Operation against a key holding the wrong kind of value")
    return value


def _mget(server: SimRedisServer, args: list[bytes]) -> Reply:
    return [v if isinstance(v := server.live(key), bytes) else None for key in args]


def _set(server: SimRedisServer, args: list[bytes]) -> Reply:
    key, value, options = args[0], args[1], [a.upper() for a in args[2:]]
    expires_in, keep = None, b"KEEPTTL" in options
    for unit, scale in ((b"EX", 1.0), (b"PX", 0.001)):
        if unit in options:
            amount = int(args[2 + options.index(unit) + 1])
            if amount <= 0:
                raise Error("ERR invalid expire time in 'set' command")
            expires_in = amount * scale
    exists = server.live(key) is not None
    if (b"NX" in options and exists) or (b"XX" in options and not exists):
        return None
    server.put(key, value, expires_in, keep)
    return OK


def _delete(server: SimRedisServer, args: list[bytes]) -> Reply:
    return sum(server.remove(key) for key in args)


def _exists(server: SimRedisServer, args: list[bytes]) -> Reply:
    return sum(server.live(key) is not None for key in args)


def _expire(server: SimRedisServer, args: list[bytes], scale: float = 1.0) -> Reply:
    if server.live(args[0]) is None:
        return 0
    seconds = int(args[1]) * scale
    if seconds <= 0:
        server.remove(args[0])
    else:
        server.expires[args[0]] = server.now() + seconds
    return 1


def _persist(server: SimRedisServer, args: list[bytes]) -> Reply:
    if server.live(args[0]) is None or args[0] not in server.expires:
        return 0
    del server.expires[args[0]]
    return 1


def _ttl(server: SimRedisServer, args: list[bytes]) -> Reply:
    left = server.pttl(args[0])
    return left if left < 0 else -(-left // 1000)


def _incrby(server: SimRedisServer, args: list[bytes], sign: int = 1) -> Reply:
    value = server.live(args[0]) or b"0"
    try:
        count = int(value) + sign * int(args[1])
    except ValueError:
        raise Error("ERR value is not an integer or out of range") from None
    server.put(args[0], str(count).encode(), None, keep_ttl=True)
    return count


def _pfadd(server: SimRedisServer, args: list[bytes]) -> Reply:
    members = server.live(args[0])
    if members is None:
        members = set()
        server.put(args[0], members, None)
    before = len(members)
    members.update(args[1:])
    return int(len(members) != before)


def _pfcount(server: SimRedisServer, args: list[bytes]) -> Reply:
    union: set[bytes] = set()
    for key in args:
        union |= server.live(key) or set()
    return len(union)


def _flush(server: SimRedisServer, args: list[bytes]) -> Reply:
    server.flush()
    return OK


def _info(server: SimRedisServer, args: list[bytes]) -> Reply:
    keys = sum(server.live(key) is not None for key in list(server.data))
    used = sum(len(k) + len(v) for k, v in server.data.items() if isinstance(v, bytes))
    fields = {
        "redis_version": "7.2.0",
        "uptime_in_seconds": 1,
        "used_memory": used,
        "keyspace_hits": server.hits,
        "keyspace_misses": server.misses,
        "evicted_keys": 0,
        "db0": f"keys={keys},expires={len(server.expires)},avg_ttl=0",
    }
    return "".join(f"{name}:{value}\r\n" for name, value in fields.items()).encode()


def _client(server: SimRedisServer, args: list[bytes]) -> Reply:
    return OK  # CLIENT SETINFO, told on connecting


def _script(server: SimRedisServer, args: list[bytes]) -> Reply:
    verb = args[0].upper()
    if verb == b"LOAD":
        source = args[1].decode()
        if source not in SCRIPTS:
            raise Error("ERR the simulation runs only the store's own scripts")
        server.loaded.add(sha(source))
        return sha(source).encode()
    if verb == b"EXISTS":
        return [int(digest.decode() in server.loaded) for digest in args[1:]]
    raise Error(f"ERR unknown SCRIPT subcommand {verb!r}")


def _evalsha(server: SimRedisServer, args: list[bytes]) -> Reply:
    digest = args[0].decode()
    if digest not in server.loaded:
        raise Error("NOSCRIPT No matching script. Please use EVAL.")
    return _scripted(server, server.scripts[digest], args[1:])


def _eval(server: SimRedisServer, args: list[bytes]) -> Reply:
    source = args[0].decode()
    if source not in SCRIPTS:
        raise Error("ERR the simulation runs only the store's own scripts")
    return _scripted(server, source, args[1:])


def _scripted(server: SimRedisServer, source: str, args: list[bytes]) -> Reply:
    count = int(args[0])
    keys, argv = args[1 : 1 + count], args[1 + count :]
    return SCRIPTS[source](server, keys, argv)


def _script_incr(server: SimRedisServer, keys: list[bytes], argv: list[bytes]) -> Reply:
    if server.live(keys[0]) is None:
        return None  # Lua's false: a nil reply
    _incrby(server, [keys[0], argv[0]])
    return server.live(keys[0])


def _script_decr(server: SimRedisServer, keys: list[bytes], argv: list[bytes]) -> Reply:
    if server.live(keys[0]) is None:
        return None
    if _incrby(server, [keys[0], argv[0]], -1) < 0:
        server.put(keys[0], b"0", None, keep_ttl=True)
    return server.live(keys[0])


def _script_joined(front: bool) -> Callable[[SimRedisServer, list[bytes], list[bytes]], Reply]:
    def joined(server: SimRedisServer, keys: list[bytes], argv: list[bytes]) -> Reply:
        value = server.live(keys[0])
        if value is None:
            return 0
        if len(value) + len(argv[0]) > int(argv[1]):
            return -1
        server.put(keys[0], argv[0] + value if front else value + argv[0], None, keep_ttl=True)
        return 1

    return joined


def _script_cas(server: SimRedisServer, keys: list[bytes], argv: list[bytes]) -> Reply:
    value = server.live(keys[0])
    if value is None or hashlib.sha1(value).hexdigest() != argv[0].decode():
        return 0
    ttl = int(argv[2])
    if ttl < 0:
        server.remove(keys[0])
    else:
        server.put(keys[0], argv[1], float(ttl) if ttl > 0 else None)
    return 1


def _script_pfadd(server: SimRedisServer, keys: list[bytes], argv: list[bytes]) -> Reply:
    changed = _pfadd(server, [keys[0], argv[0]])
    if keys[0] not in server.expires:
        server.expires[keys[0]] = server.now() + int(argv[1])
    return changed


def _script_persist(server: SimRedisServer, keys: list[bytes], argv: list[bytes]) -> Reply:
    if server.live(keys[0]) is None:
        return 0
    server.expires.pop(keys[0], None)
    return 1


def _script_read_claiming(server: SimRedisServer, keys: list[bytes], argv: list[bytes]) -> Reply:
    entries, lock = keys[:-1], keys[-1]
    values = _mget(server, entries)
    outcome = 0
    if values[0] is not None:
        left = server.pttl(entries[0])
        if 0 <= left <= int(argv[1]):
            outcome = 2
            if _set(server, [lock, argv[0], b"NX", b"PX", argv[2]]) is not None:
                outcome = 1
    return [*values, outcome]


SCRIPTS: dict[str, Callable[[SimRedisServer, list[bytes], list[bytes]], Reply]] = {
    lua.INCR: _script_incr,
    lua.DECR: _script_decr,
    lua.APPEND: _script_joined(front=False),
    lua.PREPEND: _script_joined(front=True),
    lua.CAS: _script_cas,
    lua.PFADD: _script_pfadd,
    lua.PERSIST: _script_persist,
    lua.READ_CLAIMING: _script_read_claiming,
}
"""Each of the store's scripts, by its text, and what it does."""

COMMANDS: dict[str, Callable[[SimRedisServer, list[bytes]], Reply]] = {
    "PING": lambda server, args: Status(b"PONG"),
    "CLIENT": _client,
    "GET": _get,
    "MGET": _mget,
    "SET": _set,
    "DEL": _delete,
    "UNLINK": _delete,
    "EXISTS": _exists,
    "EXPIRE": _expire,
    "PEXPIRE": lambda server, args: _expire(server, args, 0.001),
    "PERSIST": _persist,
    "TTL": _ttl,
    "PTTL": lambda server, args: server.pttl(args[0]),
    "INCRBY": _incrby,
    "DECRBY": lambda server, args: _incrby(server, args, -1),
    "PFADD": _pfadd,
    "PFCOUNT": _pfcount,
    "FLUSHDB": _flush,
    "FLUSHALL": _flush,
    "INFO": _info,
    "SCRIPT": _script,
    "EVALSHA": _evalsha,
    "EVAL": _eval,
}
