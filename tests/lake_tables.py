"""A TABLE_MAP with a column of every mapped type, rows of extreme values, and what they become.

``EVERY_TYPE`` is the table ``shop.every_type`` as MariaDB 10.11 would log it with
``binlog_row_metadata=FULL`` (plus a MySQL JSON column); ``SOURCE_ROWS`` are the values
``binlake.binlog`` decodes (min, max, awkward, NULL and zero dates); ``LAKE_ROWS`` the values
binlake must write to Iceberg for them, spelled out by hand. Used by the type-mapping unit tests
and the Iceberg round-trip integration test.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any, NamedTuple

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import Geometry, ZeroDate

UTC = dt.UTC
LATIN1, UTF8MB4, UTF8MB4_BIN, BINARY = 8, 45, 46, 63


class Col(NamedTuple):
    name: str
    type_code: int
    metadata: int
    #: Expected Iceberg type and source type text.
    iceberg: str
    source: str
    unsigned: bool = False
    collation: int | None = None
    hint: str | None = None


COLUMNS = (
    Col("id", T.LONG, 0, "int", "INT"),
    Col("ti", T.TINY, 0, "int", "TINYINT"),
    Col("tiu", T.TINY, 0, "int", "TINYINT UNSIGNED", unsigned=True),
    Col("si", T.SHORT, 0, "int", "SMALLINT"),
    Col("siu", T.SHORT, 0, "int", "SMALLINT UNSIGNED", unsigned=True),
    Col("mi", T.INT24, 0, "int", "MEDIUMINT"),
    Col("miu", T.INT24, 0, "int", "MEDIUMINT UNSIGNED", unsigned=True),
    Col("i", T.LONG, 0, "int", "INT"),
    Col("iu", T.LONG, 0, "long", "INT UNSIGNED", unsigned=True),
    Col("bi", T.LONGLONG, 0, "long", "BIGINT"),
    Col("biu", T.LONGLONG, 0, "decimal(20,0)", "BIGINT UNSIGNED", unsigned=True),
    Col("f", T.FLOAT, 4, "float", "FLOAT"),
    Col("d", T.DOUBLE, 8, "double", "DOUBLE"),
    Col("dec", T.NEWDECIMAL, 10 << 8 | 2, "decimal(10,2)", "DECIMAL(10,2)"),
    Col("dec38", T.NEWDECIMAL, 38 << 8 | 10, "decimal(38,10)", "DECIMAL(38,10)"),
    Col("dec65", T.NEWDECIMAL, 65 << 8 | 30, "string", "DECIMAL(65,30)"),
    Col("b1", T.BIT, 1, "long", "BIT(1)"),
    Col("b63", T.BIT, 7 << 8 | 7, "long", "BIT(63)"),
    Col("b64", T.BIT, 8 << 8, "decimal(20,0)", "BIT(64)"),
    Col("y", T.YEAR, 0, "int", "YEAR", unsigned=True),
    Col("dt", T.DATE, 0, "date", "DATE"),
    Col("dtm", T.DATETIME2, 0, "timestamp", "DATETIME"),
    Col("dtm6", T.DATETIME2, 6, "timestamp", "DATETIME(6)"),
    Col("ts", T.TIMESTAMP2, 0, "timestamptz", "TIMESTAMP"),
    Col("ts6", T.TIMESTAMP2, 6, "timestamptz", "TIMESTAMP(6)"),
    Col("tm", T.TIME2, 0, "long", "TIME"),
    Col("tm6", T.TIME2, 6, "long", "TIME(6)"),
    Col("c", T.STRING, T.STRING << 8 | 160, "string", "CHAR", collation=UTF8MB4),
    Col("vc", T.VARCHAR, 1200, "string", "VARCHAR", collation=UTF8MB4),
    Col("txt", T.BLOB, 2, "string", "TEXT", collation=UTF8MB4),
    Col("l1", T.VARCHAR, 40, "string", "VARCHAR", collation=LATIN1),
    Col("bn", T.STRING, T.STRING << 8 | 4, "binary", "BINARY", collation=BINARY),
    Col("vb", T.VARCHAR, 20, "binary", "VARBINARY", collation=BINARY),
    Col("bl", T.BLOB, 2, "binary", "BLOB", collation=BINARY),
    Col("lb", T.BLOB, 4, "binary", "LONGBLOB", collation=BINARY),
    Col("e", T.STRING, T.ENUM << 8 | 1, "string", "ENUM", collation=UTF8MB4),
    Col("s", T.STRING, T.SET << 8 | 1, "string", "SET", collation=UTF8MB4),
    Col("js", T.BLOB, 4, "string", "LONGTEXT", collation=UTF8MB4_BIN),
    Col("mj", T.JSON, 4, "string", "JSON"),
    Col("g", T.GEOMETRY, 4, "binary", "GEOMETRY", collation=BINARY),
    Col("u", T.STRING, T.STRING << 8 | 16, "string", "UUID", collation=BINARY, hint="uuid"),
)
NAMES = tuple(c.name for c in COLUMNS)
HINTS = {i: c.hint for i, c in enumerate(COLUMNS) if c.hint is not None}
ENUM_LABELS = (b"small", b"large")
SET_LABELS = (b"a", b"b", b"c")


def _per_column(values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(values.get(name) for name in NAMES)


def every_type_table_map() -> TableMap:
    character = {c.name: c.collation for c in COLUMNS if c.collation and c.name not in ("e", "s")}
    return TableMap(
        table_id=42,
        flags=1,
        schema="shop",
        table="every_type",
        column_types=tuple(c.type_code for c in COLUMNS),
        column_metadata=tuple(c.metadata for c in COLUMNS),
        nullable=tuple(c.name != "id" for c in COLUMNS),
        unsigned=tuple(c.unsigned for c in COLUMNS),
        column_charsets=_per_column(character),
        column_names=NAMES,
        enum_labels=_per_column({"e": ENUM_LABELS}),
        set_labels=_per_column({"s": SET_LABELS}),
        enum_set_charsets=_per_column({"e": UTF8MB4, "s": UTF8MB4}),
        geometry_types=_per_column({"g": 0}),
        primary_key=(0,),
    )


def float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def point_wkb(x: float, y: float) -> bytes:
    return struct.pack("<BIdd", 1, 1, x, y)


def point_ewkb(srid: int, x: float, y: float) -> bytes:
    return struct.pack("<BIIdd", 1, 1 | 0x20000000, srid, x, y)


TIME_MAX = dt.timedelta(hours=838, minutes=59, seconds=59)
TIME6_MAX = dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999)
# Built from text: unary minus would round to the default context's 28 digits.
DEC38_MAX, DEC38_MIN = Decimal("9" * 28 + "." + "9" * 10), Decimal("-" + "9" * 28 + "." + "9" * 10)
DEC65_MAX, DEC65_MIN = Decimal("9" * 35 + "." + "9" * 30), Decimal("-" + "9" * 35 + "." + "9" * 30)
FLOAT_MAX = float32(3.4028234663852886e38)
UUID_TEXT = "123e4567-e89b-12d3-a456-426655440000"
LONG_TEXT = "Zürich\n" + "x" * 300 + " 😀"

_MIN = {
    "id": 1, "ti": -128, "tiu": 0, "si": -32768, "siu": 0, "mi": -8388608, "miu": 0,
    "i": -(2**31), "iu": 0, "bi": -(2**63), "biu": 0, "f": -FLOAT_MAX,
    "d": -1.7976931348623157e308, "dec": Decimal("-99999999.99"), "dec38": DEC38_MIN,
    "dec65": DEC65_MIN, "b1": 0, "b63": 0, "b64": 0, "y": 0, "dt": dt.date(1, 1, 1),
    "dtm": dt.datetime(1, 1, 1), "dtm6": dt.datetime(1000, 1, 1, 0, 0, 0, 1),
    "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
    "ts6": dt.datetime(1970, 1, 1, 0, 0, 1, 1, tzinfo=UTC), "tm": -TIME_MAX, "tm6": -TIME6_MAX,
    "c": "", "vc": "", "txt": "", "l1": "", "bn": b"\x00" * 4, "vb": b"", "bl": b"", "lb": b"",
    "e": "", "s": "", "js": "{}", "mj": "null", "g": Geometry(0, point_wkb(0.0, 0.0)),
    "u": "00000000-0000-0000-0000-000000000000",
}  # fmt: skip
_MAX = {
    "id": 2, "ti": 127, "tiu": 255, "si": 32767, "siu": 65535, "mi": 8388607, "miu": 16777215,
    "i": 2**31 - 1, "iu": 2**32 - 1, "bi": 2**63 - 1, "biu": 2**64 - 1, "f": FLOAT_MAX,
    "d": 1.7976931348623157e308, "dec": Decimal("99999999.99"), "dec38": DEC38_MAX,
    "dec65": DEC65_MAX, "b1": 1, "b63": 2**63 - 1, "b64": 2**64 - 1, "y": 2155,
    "dt": dt.date(9999, 12, 31), "dtm": dt.datetime(9999, 12, 31, 23, 59, 59),
    "dtm6": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    "ts": dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC),
    "ts6": dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC), "tm": TIME_MAX,
    "tm6": TIME6_MAX, "c": "ñ€😀" * 10, "vc": LONG_TEXT, "txt": "line 1\nline 2\tü",
    "l1": "café", "bn": b"\xff\xfe\x00\x01", "vb": b"\x00\xff", "bl": bytes(range(256)),
    "lb": b"\x00" * 70000, "e": "large", "s": "a,c", "js": '{"k": [1, 2.5, "ü"]}',
    "mj": '{"a": 1}', "g": Geometry(4326, point_wkb(1.5, -2.25)), "u": UUID_TEXT,
}  # fmt: skip
_AWKWARD = {
    **_MAX, "id": 3, "f": float32(0.1), "d": 5e-324, "dec": Decimal("0.00"),
    "dec38": Decimal("-0.0000000001"), "dec65": Decimal("0E-30"), "y": 1901,
    "dtm6": dt.datetime(2024, 2, 29, 12, 0, 0, 123456), "dt": dt.date(1582, 10, 4),
    "ts6": dt.datetime(2024, 2, 29, 12, 0, 0, 5, tzinfo=UTC),
    "tm": dt.timedelta(hours=25), "tm6": dt.timedelta(microseconds=-1),
}  # fmt: skip
_NULLS = {
    **dict.fromkeys(NAMES), "id": 4, "dt": ZeroDate(0, 0, 0, has_time=False),
    "dtm": ZeroDate(0, 0, 0), "dtm6": ZeroDate(2020, 0, 15, fsp=6), "ts": ZeroDate(0, 0, 0),
}  # fmt: skip

SOURCE_ROWS = tuple(tuple(row[n] for n in NAMES) for row in (_MIN, _MAX, _AWKWARD, _NULLS))


def _lake(row: dict[str, Any]) -> tuple[Any, ...]:
    """What binlake writes for one source row, by the mapping's rules, spelled out."""
    out = dict(row)
    for name in ("biu", "b64"):
        out[name] = None if row[name] is None else Decimal(row[name])
    for name in ("tm", "tm6"):
        out[name] = None if row[name] is None else row[name] // dt.timedelta(microseconds=1)
    for name in ("dt", "dtm", "dtm6", "ts", "ts6"):
        if isinstance(row[name], ZeroDate):
            out[name] = None
    return tuple(out[n] for n in NAMES)


LAKE_ROWS = (
    _lake({**_MIN, "dec65": "-" + "9" * 35 + "." + "9" * 30, "g": point_wkb(0.0, 0.0)}),
    _lake({**_MAX, "dec65": "9" * 35 + "." + "9" * 30, "g": point_ewkb(4326, 1.5, -2.25)}),
    _lake({**_AWKWARD, "dec65": "0." + "0" * 30, "g": point_ewkb(4326, 1.5, -2.25)}),
    _lake(_NULLS),
)
#: Zero dates in SOURCE_ROWS, per column.
ZERO_DATES = {f"shop.every_type.{n}": 1 for n in ("dt", "dtm", "dtm6", "ts")}
