"""Tests for mcache.model.codec: round trips, the raw-int wire format, and bad bytes as misses."""

from __future__ import annotations

import datetime
import decimal
import enum
import logging
import os
import pickle
import sys
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcache.contract.store import NO_VALUE
from mcache.errors import ConfigError
from mcache.model.codec import (
    Codec,
    JsonSerializer,
    MsgpackSerializer,
    PickleSerializer,
    Serializer,
)

KEY = b"0123456789abcdef0123456789abcdef"
SERIALIZERS = ["pickle", "json", "msgpack"]
OPTIONS = {
    "plain": {"compress_threshold": None},
    "compress-all": {"compress_threshold": 0},
    "signed": {"compress_threshold": None, "signing_key": KEY},
    "signed-compressed": {"compress_threshold": 0, "signing_key": "text key"},
}
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

unpickled: list[str] = []


def _record(what: str) -> str:
    unpickled.append(what)
    return what


class Tripwire:
    """Records in ``unpickled`` whenever an instance is unpickled."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return _record, ("unpickled",)


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __repr__(self) -> str:  # a test id, the same in every process (pytest -n)
        return f"Point({self.x}, {self.y})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


class Color(enum.IntEnum):
    RED = 1


class ReprSerializer:
    """A custom serializer: Python literals through repr/eval of literals only."""

    name = "repr"

    def dumps(self, obj: object) -> bytes:
        return repr(obj).encode()

    def loads(self, data: bytes) -> object:
        import ast

        return ast.literal_eval(data.decode())


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)
pickle_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.frozensets(st.integers() | st.text(), max_size=5)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=5)
    ),
    max_leaves=20,
)


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        1.5,
        "text ü",
        (1, "two", (3.0,)),
        {1, 2, 3},
        frozenset({"a"}),
        {"nested": [{"deep": (None, b"x")}], 7: {8}},
        Point(1, 2),
        datetime.datetime(2024, 1, 2, 3, 4, 5),
        decimal.Decimal("1.10"),
        bytearray(b"mutable"),
        ["compressible" * 500],
    ],
    ids=repr,
)
def test_pickle_round_trips_arbitrary_objects(options: dict, value: object) -> None:
    codec = Codec("pickle", **options)
    decoded = codec.loads(codec.dumps(value, key="k"), key="k")
    assert decoded == value
    assert type(decoded) is type(value)


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("name", SERIALIZERS)
@given(value=json_values)
@settings(max_examples=30, deadline=None)
def test_json_types_round_trip(name: str, options: dict, value: object) -> None:
    codec = Codec(name, **options)
    assert codec.loads(codec.dumps(value, key="k"), key="k") == value


@given(value=pickle_values)
@settings(max_examples=100, deadline=None)
def test_pickle_round_trips_generated_values(value: object) -> None:
    codec = Codec(compress_threshold=16, signing_key=KEY)
    assert codec.loads(codec.dumps(value, key="k"), key="k") == value


@pytest.mark.parametrize("name", ["json", "msgpack"])
def test_json_like_serializers_return_tuples_as_lists(name: str) -> None:
    codec = Codec(name)
    assert codec.loads(codec.dumps({"t": (1, 2)})) == {"t": [1, 2]}


@pytest.mark.parametrize("name", ["json", "msgpack"])
def test_json_like_serializers_reject_unsupported_types(name: str) -> None:
    with pytest.raises(TypeError):
        Codec(name).dumps({"when": datetime.date(2024, 1, 1)})


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("name", SERIALIZERS)
@pytest.mark.parametrize("value", [b"", b"\x00\xff raw", b"42", b"z" * 5000])
def test_bytes_round_trip_with_every_serializer(name: str, options: dict, value: bytes) -> None:
    codec = Codec(name, **options)
    decoded = codec.loads(codec.dumps(value, key="k"), key="k")
    assert decoded == value
    assert type(decoded) is bytes


def test_bytes_are_stored_as_is_after_the_header() -> None:
    assert Codec("json").dumps(b"abc") == b"\xa7\x00abc"
    assert Codec().dumps(b"abc") == b"\xa7\x00abc"


def test_header_carries_the_serializer_id() -> None:
    assert Codec("pickle").dumps("x")[:2] == b"\xa7\x01"
    assert Codec("json").dumps("x") == b'\xa7\x02"x"'
    assert Codec("msgpack").dumps("x")[:2] == b"\xa7\x03"
    assert Codec(ReprSerializer()).dumps("x") == b"\xa7\x07'x'"


def test_custom_serializer_round_trips_and_is_foreign_to_other_codecs() -> None:
    codec = Codec(ReprSerializer())
    data = codec.dumps({"a": (1, 2)})
    assert codec.loads(data) == {"a": (1, 2)}
    assert Codec("pickle").loads(data) is NO_VALUE


def test_builtin_serializers_implement_the_protocol() -> None:
    for serializer in (PickleSerializer(), JsonSerializer(), MsgpackSerializer()):
        assert isinstance(serializer, Serializer)
        assert serializer.loads(serializer.dumps([1, "a"])) == [1, "a"]


# --- integers --------------------------------------------------------------------------------


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("name", SERIALIZERS)
def test_ints_are_raw_decimal_whatever_the_options(name: str, options: dict) -> None:
    codec = Codec(name, **options)
    assert codec.dumps(42, key="k") == b"42"
    assert codec.dumps(-7, key="k") == b"-7"
    assert codec.dumps(0) == b"0"
    assert codec.loads(b"43", key="k") == 43
    assert codec.loads(b"-7", key="other") == -7


@given(value=st.integers())
def test_any_int_round_trips(value: int) -> None:
    codec = Codec()
    assert codec.loads(codec.dumps(value)) == value


def test_int_too_long_for_decimal_goes_through_the_serializer() -> None:
    value = 7 ** (sys.get_int_max_str_digits() * 2) if hasattr(sys, "get_int_max_str_digits") else 1
    codec = Codec()
    data = codec.dumps(value)
    assert data[0] == 0xA7 or data == str(value).encode()
    assert codec.loads(data) == value


def test_bool_is_not_stored_as_a_decimal() -> None:
    codec = Codec()
    assert codec.dumps(True) != b"1"
    assert codec.loads(codec.dumps(True)) is True
    assert codec.loads(codec.dumps(False)) is False


def test_int_subclass_goes_through_the_serializer() -> None:
    codec = Codec()
    data = codec.dumps(Color.RED)
    assert data[0] == 0xA7
    assert codec.loads(data) is Color.RED
    assert Codec("json").loads(Codec("json").dumps(Color.RED)) == 1


def test_raw_ints_off_serializes_ints_and_rejects_decimals() -> None:
    codec = Codec(raw_ints=False, signing_key=KEY)
    data = codec.dumps(42, key="k")
    assert data[0] == 0xA7
    assert codec.loads(data, key="k") == 42
    assert codec.loads(b"42", key="k") is NO_VALUE


def test_decimal_padded_by_memcached_decr_is_accepted() -> None:
    # memcached's in-place decr of "10" leaves "9 " (the item keeps its length).
    assert Codec().loads(b"9 ") == 9
    assert Codec().loads(b"1  ") == 1


@pytest.mark.parametrize(
    "data", [b"042", b"+1", b" 1", b"1_0", b"-0", b"00", b"-", b"1 2", b"4\n", b"   "]
)
def test_non_canonical_decimals_are_misses(data: bytes) -> None:
    assert Codec().loads(data) is NO_VALUE


# --- compression -----------------------------------------------------------------------------


def test_large_compressible_value_is_compressed() -> None:
    value = {"rows": [f"row {i} of some text" for i in range(200)]}
    codec = Codec(compress_threshold=1024)
    data = codec.dumps(value)
    assert len(data) < len(pickle.dumps(value, pickle.HIGHEST_PROTOCOL)) // 2
    assert data[1] & 0x08
    assert codec.loads(data) == value


def test_small_value_is_not_compressed() -> None:
    value = {"rows": ["row"] * 10}
    data = Codec(compress_threshold=1024).dumps(value)
    assert data == b"\xa7\x01" + pickle.dumps(value, pickle.HIGHEST_PROTOCOL)


def test_incompressible_value_is_stored_uncompressed() -> None:
    value = os.urandom(4096)
    assert Codec(compress_threshold=0).dumps(value) == b"\xa7\x00" + value


def test_compression_can_be_disabled() -> None:
    value = b"a" * 100_000
    assert Codec(compress_threshold=None).dumps(value) == b"\xa7\x00" + value


def test_compress_level_is_used() -> None:
    value = bytes(range(256)) * 64 + b"tail" * 3000
    fast = Codec(compress_threshold=0, compress_level=1).dumps(value)
    best = Codec(compress_threshold=0, compress_level=9).dumps(value)
    assert fast[2:] == zlib.compress(value, 1)
    assert best[2:] == zlib.compress(value, 9)


# --- bad bytes are misses --------------------------------------------------------------------


@FUZZ
@given(data=st.binary())
def test_loads_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    for codec in (Codec(), Codec("json"), Codec(signing_key=KEY)):
        result = codec.loads(data, key="k")
        if not data.startswith(b"\xa7"):  # no header: only a decimal int can come out
            assert result is NO_VALUE or type(result) is int


@FUZZ
@given(flags=st.integers(0, 255), body=st.binary())
def test_loads_never_raises_on_arbitrary_bytes_behind_a_header(flags: int, body: bytes) -> None:
    data = bytes([0xA7, flags]) + body
    for codec in (Codec(), Codec("msgpack"), Codec(signing_key=KEY)):
        codec.loads(data, key="k")  # must not raise


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xa7",
        b"042",
        pickle.dumps({"no": "header"}),
        b"\xa7\x20" + pickle.dumps(1.5),  # a reserved flag bit
        b"\xa7\x01cno_such_module_for_mcache\nThing\n.",  # unpickling imports a missing module
        b"\xa7\x09" + b"not zlib at all",  # compressed flag on garbage
        b"\xa7\x12" + b"x" * 40,  # signed flag, but this codec has no key
        b'\xa7\x02{"json": 1}',  # written by a JSON codec
        b"\xa7\x03\x81\xa1a\x01",  # written by a msgpack codec
        b"\xa7\x07'custom'",  # written by a custom codec
    ],
    ids=repr,
)
def test_undecodable_bytes_are_misses(data: bytes) -> None:
    assert Codec().loads(data, key="k") is NO_VALUE


def test_truncated_value_is_a_miss() -> None:
    codec = Codec(compress_threshold=None)
    data = codec.dumps({"a": list(range(50))})
    for end in (len(data) - 1, len(data) // 2, 3):
        assert codec.loads(data[:end]) is NO_VALUE


def test_flipped_byte_in_compressed_value_is_a_miss() -> None:
    codec = Codec(compress_threshold=0)
    data = codec.dumps(["compressible text"] * 100)
    assert data[1] & 0x08
    for index in (2, len(data) // 2, len(data) - 1):
        assert codec.loads(_flip(data, index)) is NO_VALUE


@pytest.mark.parametrize("compress_threshold", [None, 0])
def test_any_flipped_byte_in_signed_value_is_a_miss(compress_threshold: int | None) -> None:
    codec = Codec(compress_threshold=compress_threshold, signing_key=KEY)
    data = codec.dumps({"user": 7, "roles": ["admin"] * 20}, key="k")
    assert codec.loads(data, key="k") == {"user": 7, "roles": ["admin"] * 20}
    for index in range(len(data)):
        assert codec.loads(_flip(data, index), key="k") is NO_VALUE, index


def test_signed_value_copied_to_another_key_is_a_miss() -> None:
    codec = Codec(signing_key=KEY)
    data = codec.dumps("only for alice", key="user:alice")
    assert codec.loads(data, key="user:alice") == "only for alice"
    assert codec.loads(data, key="user:bob") is NO_VALUE
    assert codec.loads(codec.dumps(b"raw", key="a"), key="b") is NO_VALUE


def test_key_boundary_is_part_of_the_signature() -> None:
    codec = Codec(signing_key=KEY, compress_threshold=None)
    data = codec.dumps(b"xy", key="ab")
    assert codec.loads(data, key="ab") == b"xy"
    assert codec.loads(data, key="a") is NO_VALUE


def test_value_signed_with_another_key_is_a_miss() -> None:
    data = Codec(signing_key=b"another secret").dumps("v", key="k")
    assert Codec(signing_key=KEY).loads(data, key="k") is NO_VALUE


def test_signed_value_read_without_a_signing_key_is_a_miss() -> None:
    data = Codec(signing_key=KEY).dumps("v", key="k")
    assert Codec().loads(data, key="k") is NO_VALUE


def test_unsigned_value_is_never_unpickled_by_a_signing_codec() -> None:
    unpickled.clear()
    data = Codec().dumps(Tripwire(), key="k")
    assert Codec().loads(data, key="k") == "unpickled"  # the tripwire works when unsigned
    unpickled.clear()
    assert Codec(signing_key=KEY).loads(data, key="k") is NO_VALUE
    assert unpickled == []


def test_json_codec_never_unpickles() -> None:
    unpickled.clear()
    data = Codec().dumps(Tripwire(), key="k")
    assert Codec("json").loads(data, key="k") is NO_VALUE
    assert Codec("msgpack").loads(data, key="k") is NO_VALUE
    assert unpickled == []


# --- logging ---------------------------------------------------------------------------------


def test_failure_is_logged_with_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcache")
    assert Codec().loads(b"042", key="page:home") is NO_VALUE
    [record] = caplog.records
    assert record.name == "mcache"
    assert record.levelno == logging.WARNING
    assert "page:home" in record.getMessage()


def test_identical_failures_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcache")
    codec = Codec(signing_key=KEY)
    unsigned = Codec().dumps("v")
    assert codec.loads(unsigned, key="a") is NO_VALUE
    assert codec.loads(unsigned, key="a") is NO_VALUE
    assert len(caplog.records) == 1
    assert codec.loads(b"\xa7", key="b") is NO_VALUE  # another kind is logged
    assert len(caplog.records) == 2
    assert "codec.signature" in caplog.records[0].getMessage()
    assert "codec.corrupt" in caplog.records[1].getMessage()


def test_decoding_error_names_the_exception(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcache")
    assert Codec().loads(b"\xa7\x01cno_such_module_for_mcache\nThing\n.", key="k") is NO_VALUE
    assert "ModuleNotFoundError" in caplog.records[0].getMessage()


def test_successful_loads_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcache")
    codec = Codec(signing_key=KEY, compress_threshold=0)
    assert codec.loads(codec.dumps(["x"] * 100, key="k"), key="k") == ["x"] * 100
    assert codec.loads(b"5", key="k") == 5
    assert caplog.records == []


# --- configuration ---------------------------------------------------------------------------


def test_unknown_serializer_names_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        Codec("yaml")
    message = str(info.value)
    assert "'yaml'" in message
    for name in SERIALIZERS:
        assert repr(name) in message


def test_msgpack_missing_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "msgpack", None)  # makes `import msgpack` fail
    with pytest.raises(ConfigError, match=r"pip install msgpack"):
        Codec("msgpack")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"serializer": Point(1, 2)},  # no serializer
        {"compress_threshold": -1},
        {"compress_threshold": "1k"},
        {"compress_level": 10},
        {"signing_key": ""},
        {"signing_key": 12345},
    ],
    ids=repr,
)
def test_bad_options_raise_config_error(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        Codec(**kwargs)


def test_repr_does_not_leak_the_signing_key() -> None:
    text = repr(Codec(signing_key="hunter2-secret"))
    assert "hunter2" not in text
    assert "signed=True" in text
