"""MySQL binary JSON: hand-built byte fixtures for every type, and the encoder's choices.

Fixtures marked "MySQL source" are the worked examples in the comments of MySQL's
``sql-common/json_binary.cc`` (``Value::update_in_shadow`` / ``remove_in_shadow``) and
``strings/decimal.cc`` (``decimal2bin``). The others are built from the format description
in ``json_binary.h``; hex strings read as: type byte | header | entries | keys | values.
"""

from __future__ import annotations

import struct

import pytest

from binlake.binlog.encodings.mysql_json import (
    INT16,
    INT32,
    INT64,
    LARGE_ARRAY,
    LARGE_OBJECT,
    SMALL_ARRAY,
    SMALL_OBJECT,
    UINT64,
    decode_mysql_json,
    encode_mysql_json,
    format_mysql_double,
)
from binlake.binlog.errors import ValueDecodeError

pytestmark = pytest.mark.unit


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


# MySQL source: ["abc", "def"] as stored in a JSON column.
MYSQL_ARRAY_EXAMPLE = h("02 | 02 00 12 00 | 0c 0a 00 0c 0e 00 | 03 616263 03 646566")
# MySQL source: {"a": "x", "b": "y", "c": "z"}.
MYSQL_OBJECT_EXAMPLE = h(
    "00 | 03 00 22 00 | 19 00 01 00 1a 00 01 00 1b 00 01 00 | 0c 1c 00 0c 1e 00 0c 20 00"
    "| 61 62 63 | 01 78 01 79 01 7a"
)


def wrap_in_array(document: bytes) -> bytes:
    """``[document]`` as a small array whose one entry points just past the entry."""
    body = document[1:]
    return bytes([SMALL_ARRAY]) + struct.pack("<HHBH", 1, 7 + len(body), document[0], 7) + body


# --------------------------------------------------------------------------- structure


def test_empty_value_decodes_as_json_null() -> None:
    assert decode_mysql_json(b"") == "null"
    assert decode_mysql_json(memoryview(b"")) == "null"


def test_mysql_source_array_example_decodes() -> None:
    assert decode_mysql_json(MYSQL_ARRAY_EXAMPLE) == '["abc", "def"]'


def test_mysql_source_object_example_decodes_with_mysql_separators() -> None:
    assert decode_mysql_json(MYSQL_OBJECT_EXAMPLE) == '{"a": "x", "b": "y", "c": "z"}'


def test_memoryview_input_decodes_like_bytes() -> None:
    assert decode_mysql_json(memoryview(MYSQL_ARRAY_EXAMPLE)) == '["abc", "def"]'


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        # MySQL source: JSON_SET(j, '$[0]', 'XY') overwrites "abc" in place, 'c' is now free.
        (h("02 | 02 00 12 00 | 0c 0a 00 0c 0e 00 | 02 5859 63 03 646566"), '["XY", "def"]'),
        # ... then JSON_SET(j, '$[1]', 'XYZW') moves element 1 back onto the free byte.
        (h("02 | 02 00 12 00 | 0c 0a 00 0c 0d 00 | 02 5859 04 58595a57"), '["XY", "XYZW"]'),
        # ... then JSON_SET(j, '$[1]', 456) inlines an int16; the string bytes are free.
        (h("02 | 02 00 12 00 | 0c 0a 00 05 c8 01 | 02 5859 04 58595a57"), '["XY", 456]'),
    ],
)
def test_free_space_left_by_in_place_updates_is_skipped(document: bytes, expected: str) -> None:
    assert decode_mysql_json(document) == expected


def test_object_after_in_place_member_removal_decodes() -> None:
    # MySQL source: JSON_REMOVE(j, '$.b') on the object example shifts the entries left and
    # leaves the old entries, key 'b' and value "y" as free space.
    document = h(
        "00 | 02 00 22 00 | 19 00 01 00 1b 00 01 00 | 0c 1c 00 0c 20 00 | 00 0c 1e 00 0c 20 00"
        "| 61 62 63 | 01 78 01 79 01 7a"
    )
    assert decode_mysql_json(document) == '{"a": "x", "c": "z"}'


def test_small_object_with_inlined_int16_decodes() -> None:
    assert decode_mysql_json(h("00 | 01 00 0c 00 | 0b 00 01 00 | 05 fe ff | 61")) == '{"a": -2}'


def test_small_array_inlines_literals_and_uint16() -> None:
    document = h("02 | 04 00 10 00 | 04 00 00 04 01 00 04 02 00 06 ff ff")
    assert decode_mysql_json(document) == "[null, true, false, 65535]"


def test_small_array_stores_int32_after_the_entries() -> None:
    assert decode_mysql_json(h("02 | 01 00 0b 00 | 07 07 00 | a0 86 01 00")) == "[100000]"


def test_large_array_uses_four_byte_offsets() -> None:
    # int32 inlined in a 4-byte slot, int16 -1 sign-extended in its slot, a string at 23.
    document = h(
        "03 | 03 00 00 00 1a 00 00 00 | 07 a0 86 01 00 05 ff ff ff ff 0c 17 00 00 00 | 02 6869"
    )
    assert decode_mysql_json(document) == '[100000, -1, "hi"]'


def test_large_object_uses_four_byte_key_offsets() -> None:
    document = h("01 | 01 00 00 00 14 00 00 00 | 13 00 00 00 01 00 | 08 ff ff ff ff | 6b")
    assert decode_mysql_json(document) == '{"k": 4294967295}'


def test_nested_containers_decode() -> None:
    inner = h("00 | 01 00 0c 00 | 0b 00 01 00 | 04 00 00 | 6b")  # {"k": null}
    assert decode_mysql_json(wrap_in_array(inner)) == '[{"k": null}]'
    assert decode_mysql_json(wrap_in_array(h("02 | 00 00 04 00"))) == "[[]]"


def test_empty_object_and_array_decode() -> None:
    assert decode_mysql_json(h("00 | 00 00 04 00")) == "{}"
    assert decode_mysql_json(h("03 | 00 00 00 00 08 00 00 00")) == "[]"


def test_bytes_after_the_top_level_value_are_ignored_like_mysql() -> None:
    assert decode_mysql_json(h("04 01 ff ff")) == "true"


# --------------------------------------------------------------------------- scalars


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("04 00", "null"),
        ("04 01", "true"),
        ("04 02", "false"),
        ("05 00 80", "-32768"),
        ("06 ff ff", "65535"),
        ("07 00 00 00 80", "-2147483648"),
        ("08 ff ff ff ff", "4294967295"),
        ("09 00 00 00 00 00 00 00 80", "-9223372036854775808"),
        ("0a ff ff ff ff ff ff ff ff", "18446744073709551615"),
    ],
)
def test_top_level_literals_and_integers_of_every_width_decode(
    document: str, expected: str
) -> None:
    assert decode_mysql_json(h(document)) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1.0"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (123456.789, "123456.789"),
        (1e14, "100000000000000.0"),
        (1e15, "1e15"),
        (1e20, "1e20"),
        (1234567890123456.7, "1234567890123456.8"),
        (3e-5, "0.00003"),
        (1e-15, "0.000000000000001"),
        (1e-16, "1e-16"),
        (1.5e-20, "1.5e-20"),
        (-0.0, "-0.0"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
    ],
)
def test_double_prints_as_mysql_my_gcvt_with_point_zero(value: float, expected: str) -> None:
    assert format_mysql_double(value) == expected
    assert decode_mysql_json(b"\x0b" + struct.pack("<d", value)) == expected


@pytest.mark.parametrize("bits", ["000000000000f87f", "000000000000f07f", "000000000000f0ff"])
def test_non_finite_double_raises_value_decode_error(bits: str) -> None:
    with pytest.raises(ValueDecodeError, match="not a JSON number"):
        decode_mysql_json(h("0b" + bits))


def test_string_escapes_match_mysql_double_quote() -> None:
    text = 'a"b\\c\b\f\n\r\t\x00\x1f\x7fé€😀\u2028'
    raw = text.encode("utf-8")
    expected = '"a\\"b\\\\c\\b\\f\\n\\r\\t\\u0000\\u001f\x7fé€😀\u2028"'
    assert decode_mysql_json(bytes([0x0C, len(raw)]) + raw) == expected


@pytest.mark.parametrize(
    ("length", "prefix"),
    [(0, "00"), (127, "7f"), (128, "80 01"), (200, "c8 01"), (16383, "ff 7f"), (16384, "80 80 01")],
)
def test_string_length_prefix_is_seven_bits_per_byte(length: int, prefix: str) -> None:
    assert decode_mysql_json(h("0c" + prefix) + b"a" * length) == '"' + "a" * length + '"'
    assert encode_mysql_json("a" * length) == h("0c" + prefix) + b"a" * length


def test_length_prefix_longer_than_five_bytes_raises() -> None:
    with pytest.raises(ValueDecodeError, match="unterminated"):
        decode_mysql_json(h("0c ff ff ff ff ff 01"))


def test_length_prefix_beyond_32_bits_raises() -> None:
    with pytest.raises(ValueDecodeError, match="32 bits"):
        decode_mysql_json(h("0c ff ff ff ff 7f"))


# --------------------------------------------------------------------------- opaque values


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        # MySQL source (decimal2bin): DECIMAL(14,4) 1234567890.1234 and its negative.
        ("0e 04 81 0d fb 38 d2 04 d2", "1234567890.1234"),
        ("0e 04 7e f2 04 c7 2d fb 2d", "-1234567890.1234"),
        ("05 02 80 03 0a", "3.10"),  # DECIMAL(5,2): trailing zero of the scale kept
        ("02 02 81", "0.01"),  # DECIMAL(2,2): no integer digits, printed "0."
        ("02 02 1c", "-0.99"),
        ("03 00 80 2a", "42"),  # DECIMAL(3,0): no point
        ("05 02 80 00 00", "0.00"),
        ("03 01 7f ff", "-0.0"),  # negative zero keeps its sign, as bin2decimal does
        ("03 00 7f ff", "0"),  # ... unless it has no fraction digits
        # DECIMAL(20,10): 1 + 9 integer digits, 9 + 1 fraction digits.
        ("14 0a 81 0d fb 38 d2 00 00 00 00 05", "1234567890.0000000005"),
    ],
)
def test_opaque_decimal_prints_exact_digits(payload: str, expected: str) -> None:
    body = h(payload)
    assert decode_mysql_json(h("0f f6") + bytes([len(body)]) + body) == expected
    assert decode_mysql_json(wrap_in_array(h("0f f6") + bytes([len(body)]) + body)) == (
        f"[{expected}]"
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("02 02 e4", "more than 2 digits"),  # 100 in a 2-digit group
        ("0e 04 81 0d fb 38 d2 04", "bytes of digits"),  # one byte short
        ("05 06 80 03 0a", "impossible"),  # scale above precision
        ("00 00", "impossible"),
        ("05", "precision and scale"),
    ],
)
def test_malformed_opaque_decimal_raises(payload: str, message: str) -> None:
    body = h(payload)
    with pytest.raises(ValueDecodeError, match=message):
        decode_mysql_json(h("0f f6") + bytes([len(body)]) + body)


@pytest.mark.parametrize(
    ("field_type", "packed", "expected"),
    [
        ("0c", "00 00 00 19 76 1f 95 19", '"2015-01-15 23:24:25.000000"'),  # DATETIME
        ("07", "00 00 00 19 76 1f 95 19", '"2015-01-15 23:24:25.000000"'),  # TIMESTAMP
        ("0a", "00 00 00 00 00 1e 95 19", '"2015-01-15"'),  # DATE
        ("0b", "20 a1 07 19 76 01 00 00", '"23:24:25.500000"'),  # TIME
        ("0b", "00 00 00 05 91 cb ff ff", '"-838:59:59.000000"'),  # TIME, negative
        ("0c", "00 00 00 00 00 00 00 00", '"0000-00-00 00:00:00.000000"'),  # zero date
    ],
)
def test_opaque_temporal_prints_as_mysql(field_type: str, packed: str, expected: str) -> None:
    assert decode_mysql_json(h(f"0f {field_type} 08 {packed}")) == expected


def test_packed_datetime_layout_matches_mysql_formula() -> None:
    ymd = ((2015 * 13 + 1) << 5) | 15
    hms = (23 << 12) | (24 << 6) | 25
    packed = (((ymd << 17) | hms) << 24) | 123
    assert decode_mysql_json(h("0f 0c 08") + packed.to_bytes(8, "little")) == (
        '"2015-01-15 23:24:25.000123"'
    )


@pytest.mark.parametrize(
    ("field_type", "packed", "message"),
    [
        ("0c", "00 00 00 19 76 1f 95", "8 bytes"),  # 7 bytes
        ("0c", "00 00 00 3c 76 1f 95 19", "out of range"),  # second 60
        ("0c", "00 00 00 00 00 00 00 80", "negative"),
        ("0b", "00 00 00 00 00 f0 00 00", "out of range"),  # hour 3840
    ],
)
def test_malformed_opaque_temporal_raises(field_type: str, packed: str, message: str) -> None:
    body = h(packed)
    with pytest.raises(ValueDecodeError, match=message):
        decode_mysql_json(h(f"0f {field_type}") + bytes([len(body)]) + body)


def test_opaque_blob_prints_as_base64_with_its_field_type() -> None:
    assert decode_mysql_json(h("0f fc 03 01 02 03")) == '"base64:type252:AQID"'
    assert decode_mysql_json(h("0f 0f 00")) == '"base64:type15:"'


def test_opaque_base64_breaks_lines_every_76_characters_like_mysql() -> None:
    payload = bytes(range(60))  # 80 base64 characters
    line = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4"
    expected = f'"base64:type252:{line}\\nOTo7"'
    assert decode_mysql_json(h("0f fc 3c") + payload) == expected


def test_opaque_var_string_prints_as_a_plain_string() -> None:
    assert decode_mysql_json(h("0f fd 04 68 c3 a9 22")) == '"hé\\""'


# --------------------------------------------------------------------------- malformed input


def test_truncated_document_raises_value_decode_error() -> None:
    document = encode_mysql_json({"a": [1, 100000, "text", 2.5, None], "bb": {"c": "d"}})
    for end in range(1, len(document)):
        with pytest.raises(ValueDecodeError):
            decode_mysql_json(document[:end])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("0d 00", "type 0x0d"),
        ("04 03", "literal byte 0x03"),
        ("02 | 01 00 07 00 | 0e 07 00", "type 0x0e"),
        ("02 | 01 00 07 00 | 0c 20 00", "outside"),  # value offset past the array
        ("02 | 01 00 09 00 | 0c 02 00 | 01 61", "outside"),  # value offset inside the header
        ("00 | 01 00 0c 00 | 02 00 01 00 | 04 00 00 | 6b", "key 0"),  # key inside the header
        ("00 | 01 00 0c 00 | 0b 00 02 00 | 04 00 00 | 6b", "key 0"),  # key runs past the end
        ("02 | 01 00 20 00 | 04 00 00", "size 32"),  # size beyond the document
        ("02 | ff 00 08 00 | 04 00 00 04 00 00", "do not fit"),
        ("02 | 02 00 0c 00 | 0c 0a 00 0c 0a 00 | 01 61", "overlap"),  # two entries, one string
        ("0c 02 c3 28", "not valid utf8mb4"),
        ("00 | 01 00 0d 00 | 0b 00 02 00 | 04 00 00 | ff fe", "not valid utf8mb4"),
        ("0f fd 01 ff", "not valid utf8mb4"),
    ],
)
def test_malformed_document_raises_value_decode_error(document: str, message: str) -> None:
    with pytest.raises(ValueDecodeError, match=message):
        decode_mysql_json(h(document))


def test_nesting_up_to_mysql_limit_of_100_decodes_and_deeper_raises() -> None:
    document = h("02 00 00 04 00")
    for _ in range(99):
        document = wrap_in_array(document)
    assert decode_mysql_json(document) == "[" * 100 + "]" * 100
    with pytest.raises(ValueDecodeError, match="deeper than 100"):
        decode_mysql_json(wrap_in_array(document))


def test_shared_subtrees_cannot_blow_up_the_output() -> None:
    # Each level is [child, child] with both entries pointing at one child: 2**60 leaves.
    document = h("0c 01 61")
    for _ in range(60):
        body = document[1:]
        size = 4 + 6 + len(body)
        document = h("02") + struct.pack("<HHBHBH", 2, size, document[0], 10, document[0], 10)
        document += body
    with pytest.raises(ValueDecodeError, match="overlap"):
        decode_mysql_json(document)


# --------------------------------------------------------------------------- encoder


def test_encoder_reproduces_mysql_source_examples_byte_for_byte() -> None:
    assert encode_mysql_json(["abc", "def"]) == MYSQL_ARRAY_EXAMPLE
    assert encode_mysql_json({"c": "z", "a": "x", "b": "y"}) == MYSQL_OBJECT_EXAMPLE


def test_encoder_orders_keys_by_length_then_bytes() -> None:
    document = encode_mysql_json({"bb": 1, "a": 2, "é": 5, "c": 3, "aa": 4})
    assert decode_mysql_json(document) == '{"a": 2, "c": 3, "aa": 4, "bb": 1, "é": 5}'


def test_encoder_switches_to_large_format_past_64_kib() -> None:
    fits = encode_mysql_json([None] * 21843)  # 4 + 3 * 21843 = 65533 bytes
    too_big = encode_mysql_json([None] * 21844)  # 65536 bytes
    assert fits[0] == SMALL_ARRAY
    assert too_big[0] == LARGE_ARRAY
    assert too_big[1:5] == struct.pack("<I", 21844)
    assert decode_mysql_json(too_big) == "[" + ", ".join(["null"] * 21844) + "]"


def test_small_parent_of_a_large_child_becomes_large() -> None:
    document = encode_mysql_json([["x" * 70000]])
    assert document[0] == LARGE_ARRAY
    assert document[9] == LARGE_ARRAY  # the type in the outer array's first value entry
    assert decode_mysql_json(document) == '[["' + "x" * 70000 + '"]]'


def test_large_parent_keeps_children_that_fit_small() -> None:
    document = encode_mysql_json({"big": "x" * 70000, "o": {"k": [1]}})
    assert document[0] == LARGE_OBJECT
    # header: 8 bytes of counts, 2 key entries of 6 bytes, then value entries of 5 bytes
    entries = document[1 + 8 + 12 :]
    assert entries[0] == SMALL_OBJECT  # "o" sorts first (shorter key)
    assert decode_mysql_json(document) == '{"o": {"k": [1]}, "big": "' + "x" * 70000 + '"}'


def test_large_containers_inline_int32_and_sign_extend_int16() -> None:
    document = encode_mysql_json(["x" * 70000, 100000, -1])
    entries = document[1 + 8 :]
    assert entries[5:10] == h("07 a0 86 01 00")
    assert entries[10:15] == h("05 ff ff ff ff")


@pytest.mark.parametrize(
    ("value", "type_byte"),
    [
        (32767, INT16),
        (-32768, INT16),
        (32768, INT32),
        (2147483648, INT64),  # non-negative up to UINT32_MAX stays signed in MySQL's parser
        (4294967295, INT64),
        (4294967296, UINT64),  # RapidJSON hands larger ones to MySQL as Uint64
        (-(2**63), INT64),
        (2**64 - 1, UINT64),
    ],
)
def test_encoder_gives_integers_the_types_mysql_parser_does(value: int, type_byte: int) -> None:
    document = encode_mysql_json(value)
    assert document[0] == type_byte
    assert decode_mysql_json(document) == str(value)


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        2**64,
        -(2**63) - 1,
        {1: 2},
        {"k": object()},
        b"bytes",
        {"k" * 65536: 1},
    ],
)
def test_encoder_rejects_values_mysql_cannot_store(value: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        encode_mysql_json(value)


def test_encoder_rejects_nesting_deeper_than_100() -> None:
    value: list[object] = []
    for _ in range(99):
        value = [value]
    assert decode_mysql_json(encode_mysql_json(value)) == "[" * 100 + "]" * 100
    with pytest.raises(ValueError, match="at most 100"):
        encode_mysql_json([value])
