"""Helpers for tests of the row decoder: one-column table maps, and walking a binlog's rows."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from binlake.binlog.rows import RowsEvent, decode_rows
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import ColumnSpec, column_spec
from type_workload import Change, changes_from_json, value_to_json

FIXTURES = Path(__file__).parent / "fixtures" / "binlog"
TYPES_BINLOG = FIXTURES / "types.binlog"
UTF8MB4 = 45
LATIN1 = 8
BINARY = 63


def table_map(
    types: tuple[int, ...],
    metadata: tuple[int, ...] | None = None,
    *,
    unsigned: tuple[bool, ...] | None = None,
    charsets: tuple[int | None, ...] | None = None,
    **fields: Any,
) -> TableMap:
    """A TableMap ``db.t`` with nullable columns ``c0``, ``c1``..."""
    n = len(types)
    return TableMap(
        table_id=7,
        flags=1,
        schema="db",
        table="t",
        column_types=types,
        column_metadata=metadata if metadata is not None else (0,) * n,
        nullable=(True,) * n,
        unsigned=unsigned if unsigned is not None else (False,) * n,
        column_charsets=charsets,
        column_names=tuple(f"c{i}" for i in range(n)),
        **fields,
    )


def spec(
    type_code: int,
    metadata: int = 0,
    *,
    unsigned: bool = False,
    collation: int | None = None,
    hint: str | None = None,
    **fields: Any,
) -> ColumnSpec:
    """The ColumnSpec of the only column of a one-column table map."""
    tm = table_map((type_code,), (metadata,), unsigned=(unsigned,), charsets=(collation,), **fields)
    return column_spec(tm, 0, hint)


def load_expected() -> tuple[list[Change], dict[str, dict[int, str]]]:
    data = json.loads((FIXTURES / "types.expected.json").read_text())
    return changes_from_json(data)


def decoded_changes(
    binlog: bytes, hints: Mapping[str, Mapping[int, str]]
) -> list[tuple[int, Change]]:
    """(event offset, change) for every row of every rows event, decoded with binlake."""
    maps: dict[int, TableMap] = {}
    out = []
    for event in EventStream(binlog):
        payload = event.payload
        if isinstance(payload, TableMap):
            maps[payload.table_id] = payload
        elif isinstance(payload, RowsEvent):
            tm = maps[payload.table_id]
            rows = decode_rows(payload, tm, hints.get(tm.qualified_name), offset=event.offset)
            out += [(event.offset, Change(tm.qualified_name, payload.kind, b, a)) for b, a in rows]
    return out


def strict(change: Change) -> list[Any]:
    """A change in a form where equal means identical (Decimal scale, float bits, tz)."""

    def image(row: tuple[Any, ...] | None) -> Any:
        return None if row is None else [value_to_json(v) for v in row]

    return [change.table, change.kind, image(change.before), image(change.after)]
