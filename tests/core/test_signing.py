"""Signing keys: a rotation reads the old key's values, and a shared store warns when unsigned.

The adapters' defaults (a key derived from ``SECRET_KEY``) are tested with real Django and
Flask in ``tests/reliability/test_signed_by_default.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import warnings

import pytest

from mcache import Cache, Codec
from mcache.contract.store import NO_VALUE
from mcache.errors import ConfigError, UnsignedPickleWarning
from mcache.model.signing import Signer, derived_key, signed_by_default

OLD, NEW, NEWER = b"old secret", b"new secret", b"newer secret"


def test_a_value_signed_with_a_fallback_key_is_read_and_logged_once(caplog) -> None:
    written = Codec(signing_key=OLD).dumps({"price": 10}, key="k")
    rotating = Codec(signing_key=NEW, fallback_signing_keys=[OLD])
    with caplog.at_level(logging.INFO, logger="mcache"):
        assert rotating.loads(written, key="k") == {"price": 10}
        assert rotating.loads(written, key="k") == {"price": 10}
    assert caplog.text.count("signed with a fallback key") == 1, caplog.text


def test_what_a_rotating_codec_writes_is_signed_with_the_current_key_alone() -> None:
    rewritten = Codec(signing_key=NEW, fallback_signing_keys=[OLD]).dumps("v", key="k")
    assert Codec(signing_key=NEW).loads(rewritten, key="k") == "v"
    assert Codec(signing_key=OLD).loads(rewritten, key="k") is NO_VALUE


def test_a_value_signed_with_no_known_key_is_a_miss_logged_once(caplog) -> None:
    written = Codec(signing_key=OLD).dumps("v", key="k")
    codec = Codec(signing_key=NEWER, fallback_signing_keys=[NEW])
    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert codec.loads(written, key="k") is NO_VALUE
        assert codec.loads(written, key="k") is NO_VALUE
    assert caplog.text.count("bad signature") == 1, caplog.text


def test_a_fallback_key_does_not_make_a_copied_value_valid() -> None:
    written = Codec(signing_key=OLD).dumps("v", key="price")
    codec = Codec(signing_key=NEW, fallback_signing_keys=[OLD])
    assert codec.loads(written, key="discount") is NO_VALUE


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fallback_signing_keys": [OLD]}, "read only beside a signing_key"),
        ({"signing_key": NEW, "fallback_signing_keys": OLD}, "must be a list of keys"),
        ({"signing_key": NEW, "fallback_signing_keys": [""]}, "each of fallback_signing_keys"),
        ({"signing_key": NEW, "trust_unsigned_pickle": True}, "contradict each other"),
    ],
    ids=["fallbacks-without-key", "one-key-not-a-list", "empty-fallback", "key-and-trust"],
)
def test_contradictory_or_malformed_signing_options_are_refused(options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        Codec(**options)


def test_the_derived_key_is_neither_the_secret_nor_the_same_for_another_secret() -> None:
    assert derived_key("s") not in (b"s", derived_key("t"))
    assert derived_key("s") == derived_key(b"s")
    assert len(derived_key("s")) == 32


@pytest.mark.parametrize(
    ("chosen", "signs"),
    [
        ({}, True),
        ({"serializer": "pickle"}, True),
        ({"serializer": "json"}, False),
        ({"serializer": "msgpack"}, False),
        ({"trust_unsigned_pickle": True}, False),
        ({"signing_key": "the site's own"}, False),
    ],
    ids=["nothing", "pickle", "json", "msgpack", "trusted", "own-key"],
)
def test_a_framework_secret_signs_unless_the_site_chose_otherwise(chosen, signs) -> None:
    options = signed_by_default(chosen, "secret", ["older"])
    assert (options.get("signing_key") == derived_key("secret")) is signs
    if signs:
        assert options["fallback_signing_keys"] == [derived_key("older")]
    else:
        assert options == chosen


def test_a_sites_own_fallback_keys_are_kept_beside_the_derived_ones() -> None:
    options = signed_by_default({"fallback_signing_keys": [b"own old key"]}, "s", ["older"])
    assert options["fallback_signing_keys"] == [b"own old key", derived_key("older")]


def test_a_custom_serializer_is_unsafe_whatever_its_name() -> None:
    class CallsItselfJson:
        name = "json"

        def dumps(self, obj: object) -> bytes:
            return repr(obj).encode()

        def loads(self, data: bytes) -> object:
            return data

    assert Codec(CallsItselfJson()).runs_unsigned_code
    assert not Codec("json").runs_unsigned_code


def test_a_shared_store_read_with_unsigned_pickle_warns_naming_the_settings(
    memcached_url: str,
) -> None:
    with pytest.warns(
        UnsignedPickleWarning, match=r"signing_key=.*trust_unsigned_pickle=True"
    ) as caught:
        Cache(memcached_url)
    assert caught[0].filename == __file__, "the warning points at the line that made the Cache"


@pytest.mark.parametrize(
    "codec",
    [
        Codec(signing_key="k"),
        Codec("json"),
        Codec("msgpack"),
        Codec(trust_unsigned_pickle=True),
    ],
    ids=["signed", "json", "msgpack", "trusted"],
)
def test_a_shared_store_with_a_key_a_safe_serializer_or_trust_does_not_warn(
    memcached_url: str, codec: Codec
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsignedPickleWarning)
        Cache(memcached_url, codec=codec)


def test_an_in_process_store_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsignedPickleWarning)
        Cache("memory://")


@pytest.mark.parametrize("key_size", [1, 32, 64, 65, 200])
def test_the_tags_are_the_hmac_modules_bit_for_bit(key_size: int) -> None:
    key = bytes(range(1, 256))[:key_size]
    signer = Signer(key)
    for cache_key, body in (("k", b""), ("site:page:é", b"x" * 1000), ("", bytes(range(256)))):
        data = cache_key.encode()
        head = len(data).to_bytes(4, "big") + data + b"\xa7\x11"
        expected = hmac.new(key, head + body, hashlib.sha256).digest()
        assert signer.tag(cache_key, b"\xa7\x11", body) == expected
