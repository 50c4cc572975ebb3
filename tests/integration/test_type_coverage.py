"""Every source column type, written to a real MariaDB and decoded from its own binlog.

The workload (tests/type_workload.py) inserts, updates and deletes edge values of every type in
transactions; what the binlog must hold is computed in Python from the values written. The same
binlog is then decoded by ``mariadb-binlog --verbose`` and, for ints, decimals, strings, dates,
times, BIT, YEAR, ENUM and SET, each value it prints is compared with ours.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.rows import ABSENT, RowsEvent
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import ColumnSpec, ZeroDate, column_spec
from binlake.lake.schema.evolution import target_schema
from binlake.source.table_shape import read_collations, read_columns, table_map_from_columns
from binlake_dev.sandbox import MariaDBSandbox, find_executable
from binlog_fixtures import decoded_changes, strict
from type_workload import Change, all_tables, run_workload

UTC = dt.UTC


@dataclass
class Recorded:
    database: str
    binlog: bytes
    path: Path
    expected: list[Change]
    hints: dict[str, dict[int, str]]


@pytest.fixture(scope="module")
def recorded(mariadb: MariaDBSandbox) -> Iterator[Recorded]:
    """The workload (with ≥100 KB values) run once; its binlog file and expectations."""
    database = "binlake_type_coverage"
    mariadb.execute(f"DROP DATABASE IF EXISTS {database}")
    mariadb.execute(f"CREATE DATABASE {database}")
    tables = all_tables(large=True)
    first = mariadb.flush_logs()[-1]
    with mariadb.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        expected = run_workload(cursor, database, tables)
    files = mariadb.flush_logs()
    assert files[-2] == first, "the workload must fit in one binlog file"
    hints = {f"{database}.{t.name}": t.hints for t in tables if t.hints}
    yield Recorded(database, first.read_bytes(), first, expected, hints)
    mariadb.execute(f"DROP DATABASE IF EXISTS {database}")


def mine(recorded: Recorded) -> list[tuple[int, Change]]:
    prefix = recorded.database + "."
    changes = decoded_changes(recorded.binlog, recorded.hints)
    return [(offset, c) for offset, c in changes if c.table.startswith(prefix)]


def test_every_value_decodes_to_exactly_what_was_written(recorded: Recorded) -> None:
    got = [change for _, change in mine(recorded)]
    assert len(got) == len(recorded.expected)
    for index, (ours, theirs) in enumerate(zip(got, recorded.expected, strict=True)):
        assert strict(ours) == strict(theirs), f"change #{index} on {theirs.table}"


def test_large_blob_and_text_values_survive(recorded: Recorded) -> None:
    sizes = []
    for _, change in mine(recorded):
        for image in (change.before, change.after):
            for value in image or ():
                if isinstance(value, bytes | str):
                    sizes.append(len(value.encode() if isinstance(value, str) else value))
    assert max(sizes) >= 100_000


def test_workload_covers_every_type_code_mariadb_writes(recorded: Recorded) -> None:
    seen = set()
    for event in EventStream(recorded.binlog):
        if isinstance(event.payload, TableMap) and event.payload.schema == recorded.database:
            tm = event.payload
            seen |= {tm.real_type(c) for c in range(tm.column_count)}
    wanted = {
        T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.FLOAT, T.DOUBLE, T.NEWDECIMAL, T.BIT,
        T.YEAR, T.DATE, T.DATETIME2, T.TIMESTAMP2, T.TIME2, T.DATETIME, T.TIME, T.TIMESTAMP,
        T.VARCHAR, T.STRING, T.BLOB, T.ENUM, T.SET, T.GEOMETRY,
    }  # fmt: skip
    assert wanted <= seen


# ---- mariadb-binlog as the reference decoder --------------------------------------------------


@dataclass
class PrintedRow:
    images: list[dict[int, bytes]] = field(default_factory=list)


_HEADER = re.compile(rb"end_log_pos (\d+) .*\t(Write|Update|Delete)_rows")
_VALUE = re.compile(rb"^###   @(\d+)=(.*)$", re.DOTALL)


def parse_mariadb_binlog(output: bytes) -> dict[int, list[PrintedRow]]:
    """Rows printed by ``mariadb-binlog --verbose``, by the end_log_pos of their rows event."""
    events: dict[int, list[PrintedRow]] = {}
    rows: list[PrintedRow] | None = None
    for line in output.split(b"\n"):
        header = _HEADER.search(line) if line.startswith(b"#") else None
        if header:
            rows = events.setdefault(int(header.group(1)), [])
        elif rows is None or not line.startswith(b"###"):
            continue
        elif line.startswith((b"### INSERT INTO", b"### UPDATE ", b"### DELETE FROM")):
            rows.append(PrintedRow())
        elif line in (b"### SET", b"### WHERE"):
            rows[-1].images.append({})
        elif match := _VALUE.match(line):
            rows[-1].images[-1][int(match.group(1))] = match.group(2)
    return events


def escaped(data: bytes) -> bytes:
    """Bytes as mariadb-binlog prints a string: control bytes as \\xNN, the rest raw."""
    return b"".join(bytes((b,)) if b > 0x1F else b"\\x%02x" % b for b in data)


def _fraction(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


def _time_text(value: dt.timedelta, fsp: int) -> str:
    total = value // dt.timedelta(microseconds=1)
    seconds, micro = divmod(abs(total), 1_000_000)
    sign = "-" if total < 0 else ""
    return f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" + (
        _fraction(micro, fsp)
    )


def _datetime_text(value: Any, fsp: int) -> str:
    if isinstance(value, ZeroDate):
        return value.text
    return f"{value:%Y-%m-%d %H:%M:%S}" + _fraction(value.microsecond, fsp)


def _timestamp_text(value: Any, fsp: int) -> str:
    if isinstance(value, ZeroDate):
        seconds, micro = 0, 0
    else:
        seconds = int((value - dt.datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())
        micro = value.microsecond
    return f"{seconds}" + _fraction(micro, fsp)


def _date_text(value: Any) -> str:
    return f"'{value.year:04d}:{value.month:02d}:{value.day:02d}'"


def _int_matches(spec: ColumnSpec, value: int, printed: bytes) -> bool:
    signed, _, unsigned = printed.decode().partition(" (")
    shown = int(unsigned.rstrip(")")) if spec.unsigned and unsigned else int(signed)
    return shown == value


def _string_matches(spec: ColumnSpec, value: Any, printed: bytes) -> bool:
    data = value.encode(spec.codec) if spec.codec else bytes(value)
    if spec.type == T.STRING and spec.codec is None:
        data = data.rstrip(b"\x00")
    return printed == b"'" + escaped(data) + b"'"


def _text(render: Callable[[ColumnSpec, Any], str]) -> Callable[[ColumnSpec, Any, bytes], bool]:
    return lambda spec, value, printed: printed.decode() == render(spec, value)


_COMPARERS: dict[int, Callable[[ColumnSpec, Any, bytes], bool]] = {
    **{t: _int_matches for t in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG)},
    T.NEWDECIMAL: _text(lambda s, v: format(v, "f")),
    **{t: _string_matches for t in (T.VARCHAR, T.STRING, T.BLOB)},
    T.DATETIME2: _text(lambda s, v: f"'{_datetime_text(v, s.metadata)}'"),
    T.TIME2: _text(lambda s, v: f"'{_time_text(v, s.metadata)}'"),
    T.TIMESTAMP2: _text(lambda s, v: _timestamp_text(v, s.metadata)),
    T.DATE: _text(lambda s, v: _date_text(v)),
    T.NEWDATE: _text(lambda s, v: _date_text(v)),
    T.DATETIME: _text(lambda s, v: f"'{_datetime_text(v, 0)}'"),
    T.TIME: _text(lambda s, v: f"'{_time_text(v, 0)}'"),
    T.TIMESTAMP: _text(lambda s, v: _timestamp_text(v, 0)),
    T.YEAR: _text(lambda s, v: str(v if v else 1900)),  # it prints byte + 1900, 0 included
    T.BIT: _text(lambda s, v: f"b'{v:0{s.length}b}'"),
    T.ENUM: _text(lambda s, v: str(("", *s.labels).index(v))),
    T.SET: _text(
        lambda s, v: "b'{:0{}b}'".format(
            sum(1 << i for i, label in enumerate(s.labels) if label in v.split(",")),
            8 * s.length,
        )
    ),
}


def _images(change: Change) -> list[tuple[Any, ...]]:
    return [image for image in (change.before, change.after) if image is not None]


def test_values_match_what_mariadb_binlog_prints(recorded: Recorded) -> None:
    output = subprocess.run(
        [find_executable("mariadb-binlog"), "--verbose", "--print-table-metadata", recorded.path],
        check=True,
        capture_output=True,
    ).stdout
    printed = parse_mariadb_binlog(output)
    ends: dict[int, int] = {}
    maps: dict[int, TableMap] = {}
    for event in EventStream(recorded.binlog):
        if isinstance(event.payload, TableMap):
            maps[event.payload.table_id] = event.payload
        elif isinstance(event.payload, RowsEvent):
            ends[event.offset] = event.end_offset
    compared: set[int] = set()
    rows_by_event: dict[int, list[Change]] = {}
    for offset, change in mine(recorded):
        rows_by_event.setdefault(offset, []).append(change)
    for offset, changes in rows_by_event.items():
        theirs = printed[ends[offset]]
        assert len(theirs) == len(changes), f"rows event at {offset}"
        tm = next(m for m in maps.values() if m.qualified_name == changes[0].table)
        hints = recorded.hints.get(tm.qualified_name, {})
        specs = [column_spec(tm, c, hints.get(c)) for c in range(tm.column_count)]
        for change, row in zip(changes, theirs, strict=True):
            for image, shown in zip(_images(change), row.images, strict=True):
                compared |= _compare_image(specs, image, shown, offset)
    assert compared >= {T.LONGLONG, T.NEWDECIMAL, T.VARCHAR, T.STRING, T.BLOB, T.DATETIME2}
    assert compared >= {T.TIME2, T.TIMESTAMP2, T.DATETIME, T.TIME, T.TIMESTAMP, T.ENUM, T.SET}
    assert compared >= {T.YEAR, T.BIT} and compared & {T.DATE, T.NEWDATE}


def _compare_image(
    specs: list[ColumnSpec], image: tuple[Any, ...], shown: dict[int, bytes], offset: int
) -> set[int]:
    """Check each printed value of one row image against ours; the types compared."""
    assert set(shown) == {i + 1 for i, v in enumerate(image) if v is not ABSENT}
    compared = set()
    for spec, value in zip(specs, image, strict=True):
        if value is ABSENT:
            continue
        text = shown[spec.index + 1]
        if value is None:
            assert text == b"NULL", f"{spec.table}.{spec.name} at {offset}"
            continue
        compare = _COMPARERS.get(spec.type)
        if compare is None or spec.hint is not None:
            continue
        assert compare(spec, value, text), f"{spec.table}.{spec.name} at {offset}: {text!r}"
        compared.add(spec.type)
    return compared


def test_a_table_map_built_from_information_schema_gives_the_binlogs_lake_schema(
    recorded: Recorded, mariadb: MariaDBSandbox
) -> None:
    """The snapshot creates tables from information_schema; streaming later meets the binlog's
    TABLE_MAP: both must give the same Iceberg schema for every type."""
    logged: dict[str, TableMap] = {}
    for event in EventStream(recorded.binlog):
        if isinstance(event.payload, TableMap) and event.payload.schema == recorded.database:
            logged[event.payload.table] = event.payload
    with mariadb.connect(recorded.database) as conn, conn.cursor() as cursor:

        def query(sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
            cursor.execute(sql, tuple(args))
            return list(cursor.fetchall())

        collations = read_collations(query)
        compared = 0
        for name, tm in sorted(logged.items()):
            columns, key = read_columns(query, recorded.database, name)
            built = table_map_from_columns(recorded.database, name, columns, key, collations)
            hints = recorded.hints.get(f"{recorded.database}.{name}")
            assert target_schema(built, hints=hints) == target_schema(tm, hints=hints), name
            assert [
                column_spec(built, i, (hints or {}).get(i)).labels for i in range(len(columns))
            ] == [
                column_spec(tm, i, (hints or {}).get(i)).labels for i in range(tm.column_count)
            ], name
            compared += 1
    assert compared == len(logged) >= 6
