"""Properties of the row codec on random tables: encode -> decode is the identity, random bytes
never raise anything but binlake's own errors, and the C row decoder (``binlake.binlog.rowplan``,
loaded when the compiled modules run) gives exactly what the generated Python one gives: the
same values of the same types, or the same typed error."""

from __future__ import annotations

import contextlib
import datetime as dt
import struct
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.constants import EventType
from binlake.binlog.errors import BinlakeError
from binlake.binlog.rowplan import NATIVE
from binlake.binlog.rows import (
    ABSENT,
    RowChange,
    decode_rows,
    decode_rows_event,
    encode_rows_event,
    make_rows_event,
)
from binlake.binlog.tablemap import TableMap, decode_table_map, encode_table_map
from binlake.binlog.values import Geometry, ZeroDate, format_inet4, format_inet6, format_uuid
from binlog_builder import MARIADB_CTX
from type_workload import value_to_json

UTC = dt.UTC
UTF8MB4, LATIN1, BINARY = 45, 8, 63
PROFILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Column:
    type_code: int
    metadata: int
    values: st.SearchStrategy[Any]
    unsigned: bool = False
    collation: int | None = None
    labels: tuple[bytes, ...] | None = None
    hint: str | None = None

    @property
    def real(self) -> int:
        return self.metadata >> 8 if self.type_code == T.STRING and self.labels else self.type_code


def _fsp_micro(fsp: int) -> st.SearchStrategy[int]:
    step = 10 ** (6 - fsp)
    return st.integers(0, 999999 // step).map(lambda n: n * step)


def _zero(fsp: int, has_time: bool) -> st.SearchStrategy[ZeroDate]:
    return st.builds(
        lambda y, m, d: ZeroDate(y, m, d, fsp=fsp, has_time=has_time),
        st.sampled_from([0, 2020]),
        st.sampled_from([0, 2]),
        st.sampled_from([0, 15, 30]),
    ).filter(lambda z: 0 in (z.year, z.month, z.day) or z.day == 30)


@st.composite
def integer_column(draw: st.DrawFn) -> Column:
    type_code, bits = draw(
        st.sampled_from([(T.TINY, 8), (T.SHORT, 16), (T.INT24, 24), (T.LONG, 32), (T.LONGLONG, 64)])
    )
    unsigned = draw(st.booleans())
    low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return Column(type_code, 0, st.integers(low, high), unsigned=unsigned)


@st.composite
def decimal_column(draw: st.DrawFn) -> Column:
    precision = draw(st.integers(1, 65))
    scale = draw(st.integers(0, min(precision, 30)))
    limit = 10**precision - 1
    values = st.integers(-limit, limit).map(lambda n: Decimal(f"{n}E-{scale}"))
    return Column(T.NEWDECIMAL, precision << 8 | scale, values, unsigned=draw(st.booleans()))


@st.composite
def temporal_column(draw: st.DrawFn) -> Column:
    fsp = draw(st.integers(0, 6))
    kind = draw(st.sampled_from(["date", "dt2", "ts2", "time2", "dt", "time", "ts"]))
    micro = _fsp_micro(fsp)
    if kind == "date":
        return Column(T.DATE, 0, st.dates(dt.date(1, 1, 1)) | _zero(0, False))
    if kind == "dt2":
        dts = st.builds(lambda d, u: d.replace(microsecond=u), st.datetimes(), micro)
        return Column(T.DATETIME2, fsp, dts | _zero(fsp, True))
    if kind == "ts2":
        stamps = st.builds(
            lambda s, u: dt.datetime.fromtimestamp(s, UTC).replace(microsecond=u),
            st.integers(1, 2**32 - 1),
            micro,
        )
        return Column(T.TIMESTAMP2, fsp, stamps | st.just(ZeroDate(0, 0, 0, fsp=fsp)))
    if kind == "time2":
        span = st.integers(-(1024 * 3600 - 1), 1024 * 3600 - 1)
        times = st.builds(lambda s, u: dt.timedelta(seconds=s, microseconds=u), span, micro)
        return Column(T.TIME2, fsp, times.map(lambda t: -abs(t) if t.days < 0 else t))
    if kind == "dt":
        return Column(T.DATETIME, 0, st.datetimes().map(lambda d: d.replace(microsecond=0)))
    if kind == "time":
        return Column(T.TIME, 0, st.integers(-838 * 3600, 838 * 3600).map(_seconds))
    stamps = st.integers(1, 2**32 - 1).map(lambda s: dt.datetime.fromtimestamp(s, UTC))
    return Column(T.TIMESTAMP, 0, stamps)


def _seconds(value: int) -> dt.timedelta:
    return dt.timedelta(seconds=value)


_TEXT = {
    UTF8MB4: st.text(st.characters(exclude_categories=["Cs"]), max_size=20),
    LATIN1: st.text(st.characters(codec="cp1252"), max_size=20),
}


@st.composite
def string_column(draw: st.DrawFn) -> Column:
    collation = draw(st.sampled_from([UTF8MB4, LATIN1, BINARY]))
    kind = draw(st.sampled_from(["varchar", "char", "blob"]))
    text = _TEXT.get(collation)
    if kind == "varchar":
        length = draw(st.sampled_from([80, 255, 256, 1200]))
        values = text if text is not None else st.binary(max_size=40)
        return Column(T.VARCHAR, length, values, collation=collation)
    if kind == "blob":
        values = text if text is not None else st.binary(max_size=300)
        return Column(T.BLOB, draw(st.integers(2, 4)), values, collation=collation)
    length = draw(st.sampled_from([1, 16, 255, 300, 1020]))
    metadata = (0xFE ^ ((length & 0x300) >> 4)) << 8 | (length & 0xFF)
    if text is not None:
        return Column(T.STRING, metadata, text, collation=collation)
    return Column(T.STRING, metadata, st.binary(min_size=length, max_size=length), collation=BINARY)


@st.composite
def labelled_column(draw: st.DrawFn) -> Column:
    is_set = draw(st.booleans())
    count = draw(st.integers(1, 12 if is_set else 300))
    labels = tuple(f"l{i}é".encode() for i in range(count))
    text = [label.decode() for label in labels]
    if is_set:
        size = (count + 7) // 8
        values = st.sets(st.sampled_from(range(count))).map(
            lambda members: ",".join(text[i] for i in sorted(members))
        )
        return Column(T.STRING, T.SET << 8 | size, values, collation=UTF8MB4, labels=labels)
    size = 1 if count < 256 else 2
    values = st.sampled_from(["", *text])
    return Column(T.STRING, T.ENUM << 8 | size, values, collation=UTF8MB4, labels=labels)


@st.composite
def other_column(draw: st.DrawFn) -> Column:
    kind = draw(st.sampled_from(["float", "double", "bit", "year", "geometry", "hinted"]))
    if kind == "float":
        return Column(T.FLOAT, 4, st.floats(width=32, allow_nan=False))
    if kind == "double":
        return Column(T.DOUBLE, 8, st.floats(allow_nan=False))
    if kind == "bit":
        bits = draw(st.integers(1, 64))
        return Column(T.BIT, (bits // 8) << 8 | bits % 8, st.integers(0, 2**bits - 1))
    if kind == "year":
        return Column(T.YEAR, 0, st.just(0) | st.integers(1901, 2155))
    if kind == "geometry":
        shapes = st.builds(Geometry, st.integers(0, 2**32 - 1), st.binary(max_size=60))
        return Column(T.GEOMETRY, 4, shapes, collation=BINARY)
    hint, size, fmt = draw(
        st.sampled_from(
            [("uuid", 16, format_uuid), ("inet4", 4, format_inet4), ("inet6", 16, format_inet6)]
        )
    )
    values = st.binary(min_size=size, max_size=size).map(fmt)
    return Column(T.STRING, T.STRING << 8 | size, values, collation=BINARY, hint=hint)


columns = st.one_of(
    integer_column(), decimal_column(), temporal_column(), string_column(), labelled_column(),
    other_column(),
)  # fmt: skip


def build_table_map(cols: list[Column]) -> TableMap:
    def per_column(value: Any, applies: bool) -> Any:
        return value if applies else None

    return TableMap(
        table_id=42,
        flags=1,
        schema="db",
        table="t",
        column_types=tuple(c.type_code for c in cols),
        column_metadata=tuple(c.metadata for c in cols),
        nullable=tuple(True for _ in cols),
        unsigned=tuple(c.unsigned for c in cols),
        column_charsets=tuple(per_column(c.collation, not c.labels) for c in cols),
        column_names=tuple(f"c{i}" for i in range(len(cols))),
        set_labels=tuple(per_column(c.labels, c.real == T.SET) for c in cols),
        enum_labels=tuple(per_column(c.labels, c.real == T.ENUM) for c in cols),
        enum_set_charsets=tuple(per_column(c.collation, bool(c.labels)) for c in cols),
        primary_key=(0,),
    )


Case = tuple[list[Column], TableMap, Any, int, int, list[RowChange]]


@st.composite
def tables_and_rows(draw: st.DrawFn) -> Case:
    cols = draw(st.lists(columns, min_size=1, max_size=10))
    tm = build_table_map(cols)
    full = (1 << len(cols)) - 1
    bitmaps = st.integers(1, full)
    before, after = draw(bitmaps), draw(bitmaps)
    kind = draw(st.sampled_from(["write", "update", "delete"]))

    def row(bitmap: int) -> tuple[Any, ...]:
        return tuple(
            (draw(st.none() | c.values) if bitmap >> i & 1 else ABSENT) for i, c in enumerate(cols)
        )

    changes: list[RowChange] = []
    for _ in range(draw(st.integers(0, 4))):
        if kind == "write":
            changes.append((None, row(before)))
        elif kind == "delete":
            changes.append((row(before), None))
        else:
            changes.append((row(before), row(after)))
    return cols, tm, kind, before, after, changes


def strict(rows: list[tuple[Any, Any]]) -> list[Any]:
    def image(values: Any) -> Any:
        return None if values is None else [value_to_json(v) for v in values]

    return [(image(b), image(a)) for b, a in rows]


@PROFILE
@given(tables_and_rows(), st.sampled_from([1, 2]))
def test_encode_then_decode_is_the_identity(case: Case, version: int) -> None:
    cols, tm, kind, before, after, changes = case
    hints = {i: c.hint for i, c in enumerate(cols) if c.hint}
    ev = make_rows_event(
        kind,
        tm,
        changes,
        version=version,
        columns_present=before,
        columns_present_after=after,
        hints=hints,
    )
    body = encode_rows_event(ev, MARIADB_CTX)
    decoded = decode_rows_event(ev.type_code, body, MARIADB_CTX, 0)
    assert decoded == ev
    assert strict(decode_rows(decoded, tm, hints)) == strict(changes)


@PROFILE
@given(tables_and_rows())
def test_table_map_encode_then_decode_is_the_identity(case: Case) -> None:
    tm = case[1]
    body = encode_table_map(tm, MARIADB_CTX)
    decoded = decode_table_map(body, MARIADB_CTX, 0)
    assert replace(decoded, metadata_order=()) == tm
    assert encode_table_map(decoded, MARIADB_CTX) == body


@PROFILE
@given(tables_and_rows(), st.binary(max_size=200), st.sampled_from(["write", "update", "delete"]))
def test_random_row_bytes_raise_only_binlake_errors(case: Case, junk: bytes, kind: str) -> None:
    cols, tm, _, before, after, _ = case
    hints = {i: c.hint for i, c in enumerate(cols) if c.hint}
    ev = make_rows_event(kind, tm, [], columns_present=before, columns_present_after=after)  # type: ignore[arg-type]
    with contextlib.suppress(BinlakeError):
        decode_rows(replace(ev, rows=junk), tm, hints)


@PROFILE
@given(tables_and_rows(), st.data())
def test_damaged_rows_raise_only_binlake_errors(case: Case, data: st.DataObject) -> None:
    cols, tm, kind, before, after, changes = case
    hints = {i: c.hint for i, c in enumerate(cols) if c.hint}
    ev = make_rows_event(
        kind, tm, changes, columns_present=before, columns_present_after=after, hints=hints
    )
    if not ev.rows:
        return
    raw = bytearray(ev.rows)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(BinlakeError):
        decode_rows(replace(ev, rows=bytes(raw[:cut])), tm, hints)


@PROFILE
@given(st.binary(max_size=300), st.sampled_from([19, 23, 24, 25, 30, 31, 32]))
def test_random_event_bodies_raise_only_binlake_errors(body: bytes, type_code: int) -> None:
    with contextlib.suppress(BinlakeError):
        if type_code == EventType.TABLE_MAP:
            decode_table_map(body, MARIADB_CTX, 0)
        else:
            decode_rows_event(type_code, body, MARIADB_CTX, 0)


@PROFILE
@given(tables_and_rows(), st.data())
def test_damaged_table_maps_raise_only_binlake_errors(case: Case, data: st.DataObject) -> None:
    cols, tm, kind, before, after, changes = case
    hints = {i: c.hint for i, c in enumerate(cols) if c.hint}
    ev = make_rows_event(
        kind, tm, changes, columns_present=before, columns_present_after=after, hints=hints
    )
    body = bytearray(encode_table_map(tm, MARIADB_CTX))
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(BinlakeError):
        damaged = decode_table_map(bytes(body), MARIADB_CTX, 0)
        shaped = replace(ev, table_id=damaged.table_id, column_count=damaged.column_count)
        kept = {i: hint for i, hint in hints.items() if i < damaged.column_count}
        decode_rows(shaped, damaged, kept)


# ---- the C row decoder against the generated Python one ------------------------------------

needs_native = pytest.mark.skipif(
    NATIVE is None,
    reason="the C row decoder is not loaded (pure Python: BINLAKE_PURE_PYTHON=1 or no current "
    "build); this run tests the Python decoder it falls back to",
)


def exact(value: Any) -> Any:
    """What must be identical between the decoders: the type, the value's repr (a Decimal's
    exponent, a ZeroDate's fields), a float's bits and a datetime's tzinfo."""
    if isinstance(value, float):
        return float, struct.pack("<d", value)
    if isinstance(value, dt.datetime):
        return dt.datetime, repr(value), value.tzinfo, value.fold
    return type(value), repr(value)


def outcome(ev: Any, tm: TableMap, hints: dict[int, str], *, reference: bool) -> Any:
    """The rows ``decode_rows`` gives, each value by ``exact``, or its error's type and fields."""
    try:
        rows = decode_rows(ev, tm, hints, offset=4, reference=reference)
    except BinlakeError as error:
        fields = (error.message, error.hint, error.file, error.offset, error.event_type)
        return type(error), fields, error.table
    return [
        tuple(None if image is None else tuple(map(exact, image)) for image in change)
        for change in rows
    ]


@needs_native
@PROFILE
@given(tables_and_rows())
def test_the_c_decoder_gives_the_python_decoders_values_and_types(case: Case) -> None:
    cols, tm, kind, before, after, changes = case
    hints = {i: c.hint for i, c in enumerate(cols) if c.hint}
    ev = make_rows_event(
        kind, tm, changes, columns_present=before, columns_present_after=after, hints=hints
    )
    native = outcome(ev, tm, hints, reference=False)
    assert native == outcome(ev, tm, hints, reference=True)
    assert len(native) == len(changes)


@needs_native
@PROFILE
@given(tables_and_rows(), st.data())
def test_the_c_decoder_fails_with_the_python_decoders_error_on_damaged_rows(
    case: Case, data: st.DataObject
) -> None:
    cols, tm, kind, before, after, changes = case
    hints = {i: c.hint for i, c in enumerate(cols) if c.hint}
    ev = make_rows_event(
        kind, tm, changes, columns_present=before, columns_present_after=after, hints=hints
    )
    raw = bytearray(ev.rows or data.draw(st.binary(min_size=1, max_size=64)))
    for _ in range(data.draw(st.integers(0, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    damaged = replace(ev, rows=bytes(raw[: data.draw(st.integers(0, len(raw)))]))
    assert outcome(damaged, tm, hints, reference=False) == outcome(
        damaged, tm, hints, reference=True
    )
