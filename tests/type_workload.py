"""A type-coverage workload for MariaDB and the values its binlog must decode to.

Each ``Table`` lists its columns (DDL plus how a Python value is sent as an SQL parameter) and
the statements to run. ``run_workload`` executes them and returns, in binlog order, the row
changes the binlog must hold, computed here in Python from the values written, never by reading
anything back. ``to_json`` / ``from_json`` store those expectations next to recorded fixtures.

Used by ``scripts/record_fixtures.py`` (the fixtures under tests/fixtures/binlog) and by
tests/integration/test_type_coverage.py (the same workload, live, plus large values).
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from binlake.binlog.rows import ABSENT
from binlake.binlog.values import Geometry, ZeroDate

UTC = dt.UTC


def _plain(value: Any) -> tuple[str, list[Any]]:
    return "%s", [value]


def _zero_or_plain(value: Any) -> tuple[str, list[Any]]:
    return "%s", [value.text if isinstance(value, ZeroDate) else value]


def _timestamp(value: Any) -> tuple[str, list[Any]]:
    if isinstance(value, ZeroDate):
        return "%s", [value.text]
    return "%s", [value.astimezone(UTC).replace(tzinfo=None)]


def _geometry(value: Geometry) -> tuple[str, list[Any]]:
    return "ST_GeomFromWKB(%s, %s)", [value.wkb, value.srid]


def _time(value: dt.timedelta) -> tuple[str, list[Any]]:
    """TIME text; PyMySQL's own conversion gets negative timedeltas wrong."""
    total = value // dt.timedelta(microseconds=1)
    seconds, micro = divmod(abs(total), 1_000_000)
    sign = "-" if total < 0 else ""
    text = f"{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micro:06d}"
    return "%s", [text]


def _same(value: Any) -> Any:
    return value


def _char_text(value: str) -> str:
    return value.rstrip(" ")


def _binary(length: int) -> Callable[[bytes], bytes]:
    return lambda value: value.ljust(length, b"\x00")


def _uuid_bytes(value: str) -> bytes:
    return uuid.UUID(value).bytes


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


@dataclass(frozen=True)
class Col:
    name: str
    ddl: str
    sql: Callable[[Any], tuple[str, list[Any]]] = _plain
    #: "uuid"/"inet4"/"inet6": decode with that hint (see binlake.binlog.values).
    hint: str | None = None
    is_blob: bool = False
    #: The decoded value of a written one (CHAR drops trailing spaces, BINARY pads with NUL).
    expect: Callable[[Any], Any] = _same


@dataclass
class Table:
    name: str
    columns: list[Col]
    inserts: list[tuple[Any, ...]]
    updates: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    deletes: list[int] = field(default_factory=list)
    #: Statements run (on the same session) before CREATE TABLE, and after the workload.
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    row_image: str = "FULL"

    @property
    def hints(self) -> dict[int, str]:
        return {i: c.hint for i, c in enumerate(self.columns) if c.hint}


@dataclass(frozen=True)
class Change:
    table: str
    kind: str
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None


def ints() -> Table:
    cols = [Col("id", "INT PRIMARY KEY")]
    for name, ddl in [
        ("ti", "TINYINT"),
        ("tiu", "TINYINT UNSIGNED"),
        ("si", "SMALLINT"),
        ("siu", "SMALLINT UNSIGNED"),
        ("mi", "MEDIUMINT"),
        ("miu", "MEDIUMINT UNSIGNED"),
        ("i", "INT"),
        ("iu", "INT UNSIGNED"),
        ("bi", "BIGINT"),
        ("biu", "BIGINT UNSIGNED"),
    ]:
        cols.append(Col(name, ddl))
    low = (1, -128, 0, -32768, 0, -8388608, 0, -(2**31), 0, -(2**63), 0)
    high = (2, 127, 255, 32767, 65535, 8388607, 16777215, 2**31 - 1, 2**32 - 1, 2**63 - 1)
    return Table(
        "ints",
        cols,
        [low, (*high, 2**64 - 1), (3, *([None] * 10)), (4, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1)],
        updates=[(3, {"biu": 2**63, "bi": -1}), (1, {"ti": None})],
        deletes=[4],
    )


def numbers() -> Table:
    cols = [
        Col("id", "INT PRIMARY KEY"),
        Col("f", "FLOAT"),
        Col("d", "DOUBLE"),
        Col("dec1", "DECIMAL(10,2)"),
        Col("dec2", "DECIMAL(65,30)"),
        Col("dec3", "DECIMAL(5,5)"),
        Col("dec4", "DECIMAL(20,0) UNSIGNED"),
        Col("dec5", "DECIMAL(12,4)"),
        Col("b1", "BIT(1)"),
        Col("b10", "BIT(10)"),
        Col("b64", "BIT(64)"),
        Col("y", "YEAR"),
    ]
    big = Decimal("-" + "9" * 35 + "." + "9" * 30)
    return Table(
        "numbers",
        cols,
        [
            (
                1,
                _float32(1.5),
                2.5,
                Decimal("12345678.90"),
                big,
                Decimal("0.00001"),
                Decimal("99999999999999999999"),
                Decimal("-0.0001"),
                1,
                1023,
                2**64 - 1,
                1901,
            ),
            (
                2,
                _float32(-3.4e38),
                -1.7976931348623157e308,
                Decimal("-0.01"),
                Decimal("1" + "0" * 34 + ".000000000000000000000000000001"),
                Decimal("-0.99999"),
                Decimal("0"),
                Decimal("12345678.1234"),
                0,
                0,
                0,
                2155,
            ),
            (3, None, None, None, None, None, None, None, None, None, None, None),
            (
                4,
                0.0,
                5e-324,
                Decimal("0.00"),
                Decimal("0E-30"),
                Decimal("0.00000"),
                Decimal("1"),
                Decimal("0.0000"),
                0,
                512,
                2**63,
                0,
            ),
        ],
        updates=[(3, {"dec2": Decimal("-1.5" + "0" * 29), "y": 2000})],
        deletes=[2],
    )


def times() -> Table:
    cols = [Col("id", "INT PRIMARY KEY"), Col("d", "DATE", _zero_or_plain)]
    cols += [Col(f"dt{n}", f"DATETIME({n})", _zero_or_plain) for n in range(7)]
    cols += [Col(f"ts{n}", f"TIMESTAMP({n}) NULL", _timestamp) for n in (0, 3, 6)]
    cols += [Col(f"t{n}", f"TIME({n})", _time) for n in range(7)]
    td = dt.timedelta
    return Table(
        "times",
        cols,
        [
            (
                1,
                dt.date(2024, 2, 29),
                *[
                    dt.datetime(
                        2024,
                        2,
                        29,
                        23,
                        59,
                        58,
                        [0, 100000, 120000, 123000, 123400, 123450, 123456][n],
                    )
                    for n in range(7)
                ],
                dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC),
                dt.datetime(1970, 1, 1, 0, 0, 1, 1000, tzinfo=UTC),
                dt.datetime(2001, 9, 9, 1, 46, 40, 999999, tzinfo=UTC),
                *[
                    td(
                        hours=838,
                        minutes=59,
                        seconds=59,
                        microseconds=[0, 900000, 990000, 999000, 999900, 999990, 999999][n],
                    )
                    for n in range(7)
                ],
            ),
            (
                2,
                dt.date(1000, 1, 1),
                *[dt.datetime(1000, 1, 1) for _ in range(7)],
                None,
                None,
                None,
                *[-td(hours=838, minutes=59, seconds=59) for _ in range(7)],
            ),
            (
                3,
                ZeroDate(0, 0, 0, has_time=False),
                *[ZeroDate(0, 0, 0, fsp=n) for n in range(7)],
                ZeroDate(0, 0, 0),
                ZeroDate(0, 0, 0, fsp=3),
                ZeroDate(0, 0, 0, fsp=6),
                *[td(0) for _ in range(7)],
            ),
            (
                4,
                ZeroDate(2020, 0, 15, has_time=False),
                *[ZeroDate(2020, 2, 0, 1, 2, 3, fsp=n) for n in range(7)],
                None,
                None,
                None,
                td(hours=-1, minutes=-30),
                -td(microseconds=100000),
                -td(microseconds=10000),
                -td(microseconds=1000),
                -td(microseconds=100),
                -td(microseconds=10),
                -td(microseconds=1),
            ),
            (
                5,
                dt.date(9999, 12, 31),
                *[dt.datetime(9999, 12, 31, 23, 59, 59) for _ in range(7)],
                None,
                None,
                None,
                *[td(hours=25) for _ in range(7)],
            ),
        ],
        updates=[(2, {"dt6": dt.datetime(2020, 1, 1, 0, 0, 0, 5), "t3": -td(seconds=1.5)})],
        deletes=[5],
        before=["SET SESSION sql_mode = 'ALLOW_INVALID_DATES'", "SET SESSION time_zone = '+00:00'"],
    )


def old_times() -> Table:
    """Columns created with mysql56_temporal_format=OFF: the pre-5.6 DATETIME/TIME/TIMESTAMP."""
    cols = [
        Col("id", "INT PRIMARY KEY"),
        Col("dt", "DATETIME", _zero_or_plain),
        Col("t", "TIME", _time),
        Col("ts", "TIMESTAMP NULL", _timestamp),
    ]
    return Table(
        "old_times",
        cols,
        [
            (
                1,
                dt.datetime(2021, 12, 31, 23, 59, 59),
                dt.timedelta(hours=-838, minutes=-59, seconds=-59),
                dt.datetime(2021, 1, 2, 3, 4, 5, tzinfo=UTC),
            ),
            (
                2,
                ZeroDate(0, 0, 0),
                dt.timedelta(hours=12, minutes=34, seconds=56),
                ZeroDate(0, 0, 0),
            ),
            (3, ZeroDate(2020, 0, 15, 1, 2, 3), None, None),
        ],
        updates=[(3, {"t": dt.timedelta(seconds=-1)})],
        before=[
            "SET GLOBAL mysql56_temporal_format = OFF",
            "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
            "SET SESSION time_zone = '+00:00'",
        ],
        after=["SET GLOBAL mysql56_temporal_format = ON"],
    )


def strings(large: bool = False) -> Table:
    cols = [
        Col("id", "INT PRIMARY KEY"),
        Col("c", "CHAR(10) CHARACTER SET utf8mb4", expect=_char_text),
        Col("c255", "CHAR(255) CHARACTER SET utf8mb4", expect=_char_text),
        Col("vc", "VARCHAR(300) CHARACTER SET utf8mb4"),
        Col("l1", "VARCHAR(40) CHARACTER SET latin1"),
        Col("tx", "TEXT CHARACTER SET utf8mb4", is_blob=True),
        Col("lt", "LONGTEXT CHARACTER SET utf8mb4", is_blob=True),
        Col("bn", "BINARY(8)", expect=_binary(8)),
        Col("vb", "VARBINARY(20)"),
        Col("bl", "BLOB", is_blob=True),
        Col("mb", "MEDIUMBLOB", is_blob=True),
        Col("e", "ENUM('small','medium','large') CHARACTER SET utf8mb4"),
        Col("s", "SET('red','green','blue','ünï') CHARACTER SET utf8mb4"),
        Col("js", "JSON"),
        Col("sj", "VARCHAR(20) CHARACTER SET sjis"),
        Col("gb", "VARCHAR(20) CHARACTER SET gbk"),
        Col("u2", "VARCHAR(20) CHARACTER SET ucs2"),
        Col("u16", "VARCHAR(20) CHARACTER SET utf16"),
        Col("u32", "VARCHAR(20) CHARACTER SET utf32"),
        Col("cyr", "VARCHAR(20) CHARACTER SET cp1251"),
    ]
    huge_text = "λ😀" * 30000 if large else "short"
    huge_blob = bytes(range(256)) * 500 if large else b"\x00\xff"
    return Table(
        "strings",
        cols,
        [
            (
                1,
                "abc",
                "é" * 255,
                "x😀y \t\n",
                "Aä€\x81ÿ",
                "",
                "",
                b"ab",
                b"\x00\x01",
                b"",
                b"",
                "small",
                "red,blue",
                '{"k": [1, 2.5, "\\u00e9"]}',
                "ｱ日本\\",
                "中文",
                "Ωx",
                "😀",
                "𝄞a",
                "Привет",
            ),
            (
                2,
                "",
                "",
                "",
                "",
                "t" * 1000,
                huge_text,
                b"\x00" * 8,
                b"",
                b"\x00" * 300,
                huge_blob,
                "",
                "",
                "[]",
                "",
                "",
                "",
                "",
                "",
                "",
            ),
            (
                3,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
            ),
            (
                4,
                "tr  ",
                "x ",
                "trail  ",
                "'quote\\",
                "\x00ctl\x1f",
                "a",
                b"\xff" * 8,
                b"'\\\x00",
                b"blob",
                b"m",
                "large",
                "red,green,blue,ünï",
                "null",
                "",
                "",
                "",
                "",
                "",
                "",
            ),
        ],
        updates=[(1, {"vc": "changed", "e": "medium", "s": ""}), (3, {"lt": huge_text})],
        deletes=[4],
        before=["SET SESSION sql_mode = ''"],
    )


def geo_and_binary_types() -> Table:
    point = Geometry(0, struct.pack("<BIdd", 1, 1, 1.5, -2.5))
    line = Geometry(4326, struct.pack("<BII4d", 1, 2, 2, 0.0, 0.0, 1.0, 1.0))
    return Table(
        "geo",
        [
            Col("id", "INT PRIMARY KEY"),
            Col("g", "GEOMETRY", _geometry),
            Col("p", "POINT", _geometry),
            Col("u", "UUID", hint="uuid"),
            Col("i4", "INET4", hint="inet4"),
            Col("i6", "INET6", hint="inet6"),
            Col("u_raw", "UUID", expect=_uuid_bytes),
        ],
        [
            (
                1,
                line,
                point,
                "123e4567-e89b-12d3-a456-426655440000",
                "192.168.1.2",
                "2001:db8::1:0:0:1",
                "00000000-0000-0000-0000-000000000100",
            ),
            (
                2,
                point,
                None,
                "ffffffff-ffff-ffff-ffff-ffffffffffff",
                "0.0.0.0",
                "::ffff:1.2.3.4",
                None,
            ),
            (3, None, None, None, None, "::1.2.3.4", None),
        ],
        updates=[(3, {"i4": "255.255.255.255", "i6": "fe80::1:0:0:0"})],
        deletes=[2],
    )


def minimal_image() -> Table:
    return Table(
        "minimal",
        [
            Col("id", "INT PRIMARY KEY"),
            Col("a", "INT"),
            Col("b", "VARCHAR(10)"),
            Col("c", "TEXT", is_blob=True),
            Col("d", "INT DEFAULT 7"),
        ],
        [(1, 2, "x", "t", 7), (2, 3, "y", "u", 7)],
        updates=[(1, {"a": 5}), (2, {"a": 3, "c": "new"})],
        deletes=[1],
        row_image="MINIMAL",
    )


def noblob_image() -> Table:
    table = minimal_image()
    table.name, table.row_image = "noblob", "NOBLOB"
    return table


def all_tables(large: bool = False) -> list[Table]:
    return [
        ints(),
        numbers(),
        times(),
        old_times(),
        strings(large),
        geo_and_binary_types(),
        minimal_image(),
        noblob_image(),
    ]


# ---- running it ---------------------------------------------------------------------------------


def _image(table: Table, row: dict[str, Any], names: Sequence[str]) -> tuple[Any, ...]:
    def expected(col: Col) -> Any:
        if col.name not in names:
            return ABSENT
        value = row[col.name]
        return None if value is None else col.expect(value)

    return tuple(expected(c) for c in table.columns)


def _columns_logged(
    table: Table, kind: str, assigned: Sequence[str]
) -> tuple[list[str], list[str]]:
    """(before-image columns, after-image columns) the table's binlog_row_image logs."""
    names = [c.name for c in table.columns]
    if table.row_image == "FULL":
        return names, names
    if table.row_image == "MINIMAL":
        return [names[0]], list(assigned)
    non_blob = [c.name for c in table.columns if not c.is_blob]
    if kind == "write":
        return names, names
    return non_blob, [n for n in names if n in non_blob or n in assigned]


def run_workload(cursor: Any, database: str, tables: Sequence[Table]) -> list[Change]:
    """Run every table's statements on ``cursor`` (autocommit off) in ``database``; return the
    row changes the binlog must hold, in order."""
    changes: list[Change] = []
    for table in tables:
        changes += _run_table(cursor, database, table)
    return changes


def _run_table(cursor: Any, database: str, table: Table) -> list[Change]:
    qualified = f"{database}.{table.name}"
    for statement in table.before:
        cursor.execute(statement)
    cursor.execute(f"SET SESSION binlog_row_image = {table.row_image}")
    ddl = ", ".join(f"`{c.name}` {c.ddl}" for c in table.columns)
    cursor.execute(f"CREATE TABLE `{database}`.`{table.name}` ({ddl}) ENGINE=InnoDB")
    model: dict[int, dict[str, Any]] = {}
    changes = []
    cursor.execute("BEGIN")
    for values in table.inserts:
        row = {c.name: v for c, v in zip(table.columns, values, strict=True)}
        if table.row_image == "MINIMAL":
            row = {k: v for k, v in row.items() if k != "d"}
        _execute_insert(cursor, database, table, row)
        full = {c.name: row.get(c.name, 7) for c in table.columns}
        model[row["id"]] = full
        _, logged = _columns_logged(table, "write", list(row))
        changes.append(Change(qualified, "write", None, _image(table, full, logged)))
    cursor.execute("COMMIT")
    cursor.execute("BEGIN")
    for key, assigned in table.updates:
        before = dict(model[key])
        _execute_update(cursor, database, table, key, assigned)
        model[key].update(assigned)
        cols_before, cols_after = _columns_logged(table, "update", list(assigned))
        changes.append(
            Change(
                qualified,
                "update",
                _image(table, before, cols_before),
                _image(table, model[key], cols_after),
            )
        )
    for key in table.deletes:
        cursor.execute(f"DELETE FROM `{database}`.`{table.name}` WHERE id = %s", [key])
        cols_before, _ = _columns_logged(table, "delete", [])
        changes.append(
            Change(qualified, "delete", _image(table, model.pop(key), cols_before), None)
        )
    cursor.execute("COMMIT")
    for statement in table.after:
        cursor.execute(statement)
    return changes


def _sql_value(col: Col, value: Any) -> tuple[str, list[Any]]:
    if value is None:
        return "NULL", []
    return col.sql(value)


def _execute_insert(cursor: Any, database: str, table: Table, row: dict[str, Any]) -> None:
    cols = [c for c in table.columns if c.name in row]
    parts = [_sql_value(c, row[c.name]) for c in cols]
    names = ", ".join(f"`{c.name}`" for c in cols)
    holders = ", ".join(p for p, _ in parts)
    params = [v for _, vs in parts for v in vs]
    cursor.execute(f"INSERT INTO `{database}`.`{table.name}` ({names}) VALUES ({holders})", params)


def _execute_update(
    cursor: Any, database: str, table: Table, key: int, assigned: dict[str, Any]
) -> None:
    by_name = {c.name: c for c in table.columns}
    parts = [(name, *_sql_value(by_name[name], v)) for name, v in assigned.items()]
    sets = ", ".join(f"`{name}` = {holder}" for name, holder, _ in parts)
    params = [v for _, _, vs in parts for v in vs] + [key]
    cursor.execute(f"UPDATE `{database}`.`{table.name}` SET {sets} WHERE id = %s", params)


# ---- expectations as JSON ----------------------------------------------------------------------


def value_to_json(value: Any) -> Any:
    """A JSON form of a decoded value that keeps its exact type."""
    if value is None or isinstance(value, bool):
        return value
    if value is ABSENT:
        return {"absent": True}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, ZeroDate):
        return {
            "zero": [
                value.year,
                value.month,
                value.day,
                value.hour,
                value.minute,
                value.second,
                value.microsecond,
                value.fsp,
                value.has_time,
            ]
        }
    if isinstance(value, dt.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"timedelta_us": value // dt.timedelta(microseconds=1)}
    if isinstance(value, Geometry):
        return {"geometry": [value.srid, value.wkb.hex()]}
    raise TypeError(f"no JSON form for {value!r}")


_FROM_JSON: dict[str, Callable[[Any], Any]] = {
    "absent": lambda _v: ABSENT,
    "int": int,
    "float": float.fromhex,
    "decimal": Decimal,
    "str": str,
    "bytes": bytes.fromhex,
    "zero": lambda v: ZeroDate(*v),
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "timedelta_us": lambda v: dt.timedelta(microseconds=v),
    "geometry": lambda v: Geometry(v[0], bytes.fromhex(v[1])),
}


def value_from_json(data: Any) -> Any:
    if data is None:
        return None
    ((tag, raw),) = data.items()
    return _FROM_JSON[tag](raw)


def changes_to_json(changes: Sequence[Change], hints: dict[str, dict[int, str]]) -> dict[str, Any]:
    def image(row: tuple[Any, ...] | None) -> Any:
        return None if row is None else [value_to_json(v) for v in row]

    return {
        "hints": {table: {str(k): v for k, v in h.items()} for table, h in hints.items()},
        "changes": [[c.table, c.kind, image(c.before), image(c.after)] for c in changes],
    }


def changes_from_json(data: dict[str, Any]) -> tuple[list[Change], dict[str, dict[int, str]]]:
    def image(row: Any) -> tuple[Any, ...] | None:
        return None if row is None else tuple(value_from_json(v) for v in row)

    changes = [Change(t, k, image(b), image(a)) for t, k, b, a in data["changes"]]
    hints = {table: {int(k): v for k, v in h.items()} for table, h in data["hints"].items()}
    return changes, hints
