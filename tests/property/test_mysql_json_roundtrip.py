"""MySQL binary JSON: encode/decode round trips, and decoding arbitrary bytes fails cleanly."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.binlog.encodings.decimals import encode_decimal
from binlake.binlog.encodings.mysql_json import (
    decode_json_decimal,
    decode_mysql_json,
    encode_mysql_json,
    format_mysql_double,
)
from binlake.binlog.errors import ValueDecodeError

pytestmark = pytest.mark.property

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | finite_floats
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=10), children, max_size=6)
    ),
    max_leaves=40,
)
# Type bytes of the format, weighted towards containers so that fuzzing reaches past the header.
type_bytes = st.sampled_from([0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x09, 0x0B, 0x0C, 0x0F])


def decodes_cleanly(data: bytes) -> None:
    """Decoding returns valid JSON text or raises ValueDecodeError, nothing else."""
    try:
        text = decode_mysql_json(data)
    except ValueDecodeError:
        return
    json.loads(text)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_decode_of_encode_gives_back_the_value(value: object) -> None:
    assert json.loads(decode_mysql_json(encode_mysql_json(value))) == value


@given(st.text())
def test_strings_print_exactly_as_json_dumps_without_ascii_escaping(text: str) -> None:
    assert decode_mysql_json(encode_mysql_json(text)) == json.dumps(text, ensure_ascii=False)


@given(st.lists(st.text(max_size=300), min_size=1, max_size=300))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_documents_near_the_64_kib_boundary_round_trip(strings: list[str]) -> None:
    assert json.loads(decode_mysql_json(encode_mysql_json(strings))) == strings


@given(finite_floats)
def test_doubles_print_in_mysql_style_and_parse_back_exactly(value: float) -> None:
    text = format_mysql_double(value)
    assert json.loads(text) == value
    assert math.copysign(1.0, json.loads(text)) == math.copysign(1.0, value)
    assert re.fullmatch(r"-?\d+\.\d+|-?\d(\.\d+)?e-?[1-9]\d*", text), text


@given(st.binary(max_size=300))
@settings(max_examples=500)
def test_random_bytes_decode_to_json_or_raise_value_decode_error(data: bytes) -> None:
    decodes_cleanly(data)


@given(type_bytes, st.binary(max_size=300))
@settings(max_examples=500)
def test_random_bodies_under_valid_type_bytes_fail_cleanly(type_byte: int, body: bytes) -> None:
    decodes_cleanly(bytes([type_byte]) + body)


@given(json_values, st.data())
@settings(max_examples=500, deadline=None)
def test_corrupted_documents_decode_to_json_or_raise(value: object, data: st.DataObject) -> None:
    document = bytearray(encode_mysql_json(value))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(document) - 1))
        document[position] = data.draw(st.integers(min_value=0, max_value=255))
    end = data.draw(st.integers(min_value=0, max_value=len(document)))
    decodes_cleanly(bytes(document[:end]))


@st.composite
def decimals(draw: st.DrawFn) -> tuple[int, int, int]:
    """(precision, scale, unscaled value) of a DECIMAL column: any sign, any digit count."""
    precision = draw(st.integers(min_value=1, max_value=65))
    scale = draw(st.integers(min_value=0, max_value=min(precision, 30)))
    bound = 10 ** draw(st.integers(min_value=0, max_value=precision))
    return precision, scale, draw(st.integers(min_value=1 - bound, max_value=bound - 1))


@given(decimals())
@settings(max_examples=500)
def test_a_json_decimal_prints_its_exact_digits_whatever_its_sign(
    decimal: tuple[int, int, int],
) -> None:
    """A negative DECIMAL's digit bytes are stored inverted: decoding inverts them back."""
    precision, scale, unscaled = decimal
    value = Decimal(f"{unscaled}E-{scale}")  # exact: scaleb would round to 28 digits
    payload = bytes([precision, scale]) + encode_decimal(value, precision, scale)
    whole, fraction = divmod(abs(unscaled), 10**scale)
    text = f"{whole}.{fraction:0{scale}d}" if scale else str(whole)
    assert decode_json_decimal(payload) == ("-" if unscaled < 0 else "") + text
