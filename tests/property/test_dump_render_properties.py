"""`binlake binlog dump`'s fast rendering of rows writes what ``json.dumps`` writes of
``row_json``, the definition of a row's JSON (binlake.cli.render), for any values of any type a
row can hold, ABSENT columns and columns without names included."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlake.binlog.rows import ABSENT
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import Geometry, ZeroDate
from binlake.cli.render import RowKeys, row_json, row_text, value_text
from binlog_fixtures import table_map

pytestmark = pytest.mark.property


class MyInt(int):
    """An int subclass (as an IntEnum is): rendered through the general path."""


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers().map(MyInt),
    st.floats(),  # NaN and the infinities included: JSON strings
    st.text(),  # quotes, backslashes, control characters, U+2028, astral characters
    st.decimals(),  # NaN, infinities, exponents, negative zero
    st.binary(),
    st.binary().map(bytearray),
    st.datetimes(),
    st.datetimes(timezones=st.just(dt.UTC)),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.builds(ZeroDate, st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31)),
    st.builds(Geometry, st.integers(0, 2**32 - 1), st.binary()),
    st.just(ABSENT),
)


@given(values)
def test_a_value_renders_as_json_dumps_renders_its_json_value(value: object) -> None:
    if value is not ABSENT:
        reference = json.dumps(row_json((value,), one_column())["c0"], ensure_ascii=False)
        assert value_text(value) == reference


@given(st.lists(values, max_size=12), st.booleans())
def test_a_row_renders_as_json_dumps_renders_its_row_json(row: list[object], named: bool) -> None:
    table = table_map((3,) * len(row)) if named else unnamed(len(row))
    keys = RowKeys()
    text = row_text(tuple(row), keys.of(table, len(row)))
    assert text == json.dumps(row_json(tuple(row), table), ensure_ascii=False)
    assert keys.of(table, len(row)) is keys.of(table, len(row))  # made once a shape


def one_column() -> TableMap:
    return table_map((3,))


def unnamed(width: int) -> TableMap:
    return TableMap(
        table_id=7,
        flags=1,
        schema="db",
        table="t",
        column_types=(3,) * width,
        column_metadata=(0,) * width,
        nullable=(True,) * width,
        unsigned=(False,) * width,
    )


def test_decimal_and_text_edge_values_render_exactly() -> None:
    cases: list[tuple[object, str]] = [
        (decimal.Decimal("-0.00"), '"-0.00"'),
        (decimal.Decimal("1E+3"), '"1E+3"'),
        ('a"b\\c\n\u2028\U0001f600', '"a\\"b\\\\c\\n\u2028\U0001f600"'),
        (float("nan"), '"nan"'),
        (float("-inf"), '"-inf"'),
        (-0.0, "-0.0"),
        (True, "true"),
        (2**64 - 1, "18446744073709551615"),
    ]
    for value, text in cases:
        assert value_text(value) == text
