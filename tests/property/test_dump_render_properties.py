"""`binlake binlog dump`'s fast rendering of rows writes what ``json.dumps`` writes of
``row_json``, the definition of a row's JSON (binlake.cli.render), for any values of any type a
row can hold, ABSENT columns and columns without names included; and the C row renderer
(``_rowtext.c``) writes what the Python one does, byte for byte."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlake.binlog.rows import ABSENT
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import Geometry, ZeroDate
from binlake.cli.render import (
    ENCODER,
    NATIVE,
    JsonValue,
    RowFormat,
    RowFormats,
    object_text,
    row_json,
    value_text,
)
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
    formats = RowFormats()
    text = formats.of(table, len(row)).text(tuple(row))
    assert text == json.dumps(row_json(tuple(row), table), ensure_ascii=False)
    assert formats.of(table, len(row)) is formats.of(table, len(row))  # made once a shape


BERLIN = ZoneInfo("Europe/Berlin")
ZONES = [None, dt.UTC, dt.timezone(dt.timedelta(hours=1)), BERLIN]
temporal = st.one_of(
    st.dates(min_value=dt.date(2024, 10, 26), max_value=dt.date(2024, 10, 28)),
    st.datetimes(
        min_value=dt.datetime(2024, 10, 27, 0, 0),
        max_value=dt.datetime(2024, 10, 27, 4, 0),
        timezones=st.sampled_from(ZONES),
    ).map(lambda t: t.replace(minute=0, second=0, microsecond=0)),  # runs of equal values
)


@given(st.lists(st.tuples(temporal, temporal), min_size=2, max_size=20))
def test_rows_in_sequence_render_each_as_alone_whatever_the_dates_and_zones_before(
    rows: list[tuple[object, object]],
) -> None:
    table = table_map((12, 12))
    form = RowFormats().of(table, 2)
    for row in rows:
        assert form.text(row) == json.dumps(row_json(row, table), ensure_ascii=False)


def test_equal_times_of_two_zones_or_folds_in_a_column_render_their_own_offsets() -> None:
    utc = dt.datetime(2024, 10, 27, 1, 30, tzinfo=dt.UTC)
    plus_one = utc.astimezone(dt.timezone(dt.timedelta(hours=1)))
    first, second = (dt.datetime(2024, 10, 27, 2, 30, tzinfo=BERLIN, fold=f) for f in (0, 1))
    table = table_map((12,))
    form = RowFormats().of(table, 1)
    assert utc == plus_one and first == second  # equal, and printed differently
    texts = [form.text((v,)) for v in (utc, plus_one, first, second, dt.date(2024, 10, 27))]
    assert texts == [
        '{"c0": "2024-10-27T01:30:00+00:00"}',
        '{"c0": "2024-10-27T02:30:00+01:00"}',
        '{"c0": "2024-10-27T02:30:00+02:00"}',
        '{"c0": "2024-10-27T02:30:00+01:00"}',
        '{"c0": "2024-10-27"}',
    ]


json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()


@given(st.dictionaries(st.text(), json_scalars | st.lists(json_scalars, max_size=3), max_size=8))
def test_an_event_object_renders_as_the_encoder_renders_it(obj: dict[str, JsonValue]) -> None:
    assert object_text(obj) == ENCODER.encode(obj)


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


# ---- the C row renderer against the Python one ---------------------------------------------

needs_native = pytest.mark.skipif(
    NATIVE is None,
    reason="the C row renderer is not loaded (pure Python: BINLAKE_PURE_PYTHON=1 or no current "
    "build); this run tests the Python renderer it falls back to",
)
narrow_text = st.text(st.characters(max_codepoint=0xFF))
ascii_text = st.text(st.characters(max_codepoint=0x7F))
native_values = values | narrow_text | ascii_text | st.integers(-(2**63) - 1, 2**63) | temporal


def native_text(form: RowFormat, row: tuple[object, ...]) -> str:
    assert NATIVE is not None
    text: str = NATIVE.row_text(row, form.firsts, form.others, ABSENT, value_text)
    return text


@needs_native
@given(st.lists(native_values, max_size=40), st.sampled_from(["plain", "unicode", "none"]))
def test_the_c_renderer_writes_the_python_renderers_text(row: list[object], names: str) -> None:
    keys = {"plain": "c{}", "unicode": 'ключ\u2028"{}\U0001f600', "none": "@{}"}[names]
    form = RowFormat(tuple(keys.format(i) for i in range(len(row))))
    text = native_text(form, tuple(row))
    assert text == form.python_text(tuple(row))
    assert text.isascii() == text.encode("utf-8").isascii()  # a canonical str: equal and same kind


@needs_native
def test_the_c_renderer_refuses_a_row_of_another_width_as_the_python_one_does() -> None:
    form = RowFormat(("a", "b"))
    with pytest.raises(ValueError, match="a row of 1 values for 2 columns"):
        native_text(form, (1,))
    with pytest.raises(ValueError, match="a row of 1 values for 2 columns"):
        form.python_text((1,))


@needs_native
def test_the_c_renderer_passes_the_fallbacks_failure_on_and_refuses_a_non_str() -> None:
    form = RowFormat(("a",))

    def failing(value: object) -> str:
        raise KeyError(value)

    assert NATIVE is not None
    with pytest.raises(KeyError):
        NATIVE.row_text((object(),), form.firsts, form.others, ABSENT, failing)
    with pytest.raises(TypeError, match="not str"):
        NATIVE.row_text((object(),), form.firsts, form.others, ABSENT, lambda value: 1)
