"""``[tables.layout."db.table"]``: the partition spec and sort order of a table binlake creates.

```
[tables.layout."shop.orders"]
partition = ["days(created_at)", "bucket(16, id)"]
sort = ["customer_id", "created_at DESC NULLS LAST"]
```

A partition field is a column (identity), ``identity(c)``, ``years(c)``, ``months(c)``,
``days(c)``, ``hours(c)``, ``bucket(N, c)`` or ``truncate(W, c)`` (Iceberg's transforms, as
Spark's ``PARTITIONED BY`` writes them); a sort field is a column, then ``ASC`` or ``DESC``,
then ``NULLS FIRST`` or ``NULLS LAST``. A column is a bare name or one in backticks (a backtick
inside doubled). The syntax is checked when the config is read; that the columns exist can only
be checked once the source table's schema is known, when binlake creates the table
(``TableLayout.check``): either failure is a ``ConfigError`` naming the key. The layout applies
when the table is created (by ``binlake replicate`` or a snapshot copy); an existing table keeps
its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from binlake.binlog.names import TableName
from binlake.config.values import where
from binlake.errors import ConfigError

__all__ = ["PartitionField", "SortField", "TableLayout", "layout_value"]

_COLUMN = r"(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_$]*)"
_TIME = re.compile(rf"^(identity|years|months|days|hours)\s*\(\s*{_COLUMN}\s*\)$", re.I)
_WIDTH = re.compile(rf"^(bucket|truncate)\s*\(\s*(\d+)\s*,\s*{_COLUMN}\s*\)$", re.I)
_IDENTITY = re.compile(rf"^{_COLUMN}$")
_SORT = re.compile(rf"^{_COLUMN}(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?$", re.I)
_EXAMPLE = '[tables.layout."shop.orders"] partition = ["days(created_at)", "bucket(16, id)"]'


def _name(column: str) -> str:
    return column[1:-1].replace("``", "`") if column.startswith("`") else column


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


@dataclass(frozen=True)
class PartitionField:
    transform: str
    column: str
    width: int | None = None

    @property
    def sql(self) -> str:
        if self.transform == "identity":
            return _quoted(self.column)
        if self.width is not None:
            return f"{self.transform}({self.width}, {_quoted(self.column)})"
        return f"{self.transform}({_quoted(self.column)})"


@dataclass(frozen=True)
class SortField:
    column: str
    descending: bool = False
    nulls_first: bool | None = None

    @property
    def sql(self) -> str:
        text = f"{_quoted(self.column)} {'DESC' if self.descending else 'ASC'}"
        if self.nulls_first is not None:
            text += " NULLS FIRST" if self.nulls_first else " NULLS LAST"
        return text


@dataclass(frozen=True)
class TableLayout:
    #: The config key, for messages: ``tables.layout."shop.orders"``.
    key: str
    partition: tuple[PartitionField, ...] = ()
    sort: tuple[SortField, ...] = ()

    def check(self, columns: Iterable[str]) -> None:
        """Raise ``ConfigError`` naming the key when a field names a column not in
        ``columns`` (compared as MariaDB does: case-insensitive)."""
        known = {c.casefold() for c in columns}
        fields = [("partition", f.column) for f in self.partition]
        fields += [("sort", f.column) for f in self.sort]
        for part, column in fields:
            if column.casefold() not in known:
                raise ConfigError(
                    f"{self.key}.{part} names the column {column!r}, which the table does not have",
                    field=f"{self.key}.{part}",
                    hint=f"the table's columns: {', '.join(sorted(columns))}",
                )


def _partition_field(text: str, name: str) -> PartitionField:
    spec = text.strip()
    if match := _WIDTH.match(spec):
        width = int(match.group(2))
        if width < 1:
            raise ConfigError(f"{where(name)}: {text!r} needs a width of at least 1", field=name)
        return PartitionField(match.group(1).lower(), _name(match.group(3)), width)
    if match := _TIME.match(spec):
        return PartitionField(match.group(1).lower(), _name(match.group(2)))
    if match := _IDENTITY.match(spec):
        return PartitionField("identity", _name(match.group(1)))
    raise ConfigError(
        f"{where(name)}: {text!r} is not a partition transform",
        field=name,
        hint="a column, identity(c), years(c), months(c), days(c), hours(c), bucket(N, c) or "
        "truncate(W, c)",
    )


def _sort_field(text: str, name: str) -> SortField:
    match = _SORT.match(text.strip())
    if match is None:
        raise ConfigError(
            f"{where(name)}: {text!r} is not a sort field",
            field=name,
            hint='a column, then ASC or DESC, then NULLS FIRST or NULLS LAST: "at DESC"',
        )
    nulls = match.group(3)
    return SortField(
        _name(match.group(1)),
        descending=(match.group(2) or "").upper() == "DESC",
        nulls_first=None if nulls is None else nulls.upper() == "FIRST",
    )


def _texts(value: object, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where(name)} must be a list of strings", field=name, hint=_EXAMPLE)
    return list(value)


def layout_value(value: object, name: str, _base: Path) -> dict[TableName, TableLayout]:
    """``[tables.layout]``: table name -> ``{partition = [...], sort = [...]}``."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where(name)} must be a table of tables", field=name, hint=_EXAMPLE)
    out = {}
    for table, spec in value.items():
        key = f'{name}."{table}"'
        try:
            parsed = TableName.parse(table)
        except ValueError:
            raise ConfigError(
                f"{where(key)}: {table!r} is not a db.table name", field=key, hint=_EXAMPLE
            ) from None
        if not isinstance(spec, dict) or set(spec) - {"partition", "sort"}:
            raise ConfigError(
                f"{where(key)} takes the keys partition and sort", field=key, hint=_EXAMPLE
            )
        partition = tuple(
            _partition_field(t, f"{key}.partition")
            for t in _texts(spec.get("partition", []), f"{key}.partition")
        )
        sort = tuple(
            _sort_field(t, f"{key}.sort") for t in _texts(spec.get("sort", []), f"{key}.sort")
        )
        out[parsed] = TableLayout(key, partition, sort)
    return out
