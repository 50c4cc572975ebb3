"""``[tables]``: which source tables ``binlake replicate`` replicates, and how
(docs/configuration.md, "How binlake replicate uses them")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from binlake.binlog.names import TableGlob, TableName
from binlake.config.layout import TableLayout, layout_value
from binlake.config.section import Section, setting
from binlake.config.values import enum_value, globs_value, int_value, key_columns_value

__all__ = ["OnDrop", "TablesConfig"]


class OnDrop(StrEnum):
    """What ``binlake replicate`` does to the Iceberg table when the source drops a table."""

    KEEP = "keep"
    DROP = "drop"


@dataclass(frozen=True, kw_only=True)
class TablesConfig(Section):
    """``[tables]``: which source tables are replicated, and how."""

    #: Globs over (database, table) (fnmatch, case-sensitive); a table must match one.
    include: tuple[TableGlob, ...] = setting(
        "list",
        globs_value,
        (TableGlob("*", "*"),),
        "globs over db.table (a part with a dot in backticks); a table must match one",
    )
    #: Globs over (database, table); a table matching one is not replicated.
    exclude: tuple[TableGlob, ...] = setting(
        "list", globs_value, (), "globs over db.table; a table matching one is left out"
    )
    on_drop: OnDrop = setting(
        "keep or drop",
        enum_value(OnDrop),
        OnDrop.KEEP,
        "when the source drops a table: keep its Iceberg table, or drop it too",
    )
    #: A table -> the columns used as its key when it has no primary key.
    key_columns: Mapping[TableName, tuple[str, ...]] = setting(
        "table",
        key_columns_value,
        {},
        '"db.table" = [columns]: the key of a table without a primary key (else a change log)',
    )
    #: The Iceberg format version of the tables binlake creates (``lake/schema/sql.py``).
    format_version: int = setting(
        "int",
        int_value(2, 3),
        2,
        "Iceberg format version of the tables binlake creates: 2 (position-delete files; "
        "every reader of Iceberg v2) or 3 (deletion vectors, one per data file; readers with v3)",
    )
    #: A table -> its partition spec and sort order, applied when binlake creates it.
    layout: Mapping[TableName, TableLayout] = setting(
        "table",
        layout_value,
        {},
        '"db.table" = { partition = [transforms], sort = [fields] }: applied when binlake '
        "creates the table",
    )
