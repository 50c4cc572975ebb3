"""``[snapshot]``: copying tables' existing rows (``binlake.snapshot.copier``;
docs/architecture.md, "Snapshots")."""

from __future__ import annotations

from dataclasses import dataclass

from binlake.config.section import Section, setting
from binlake.config.values import bool_value, float_value, int_value

__all__ = ["SnapshotConfig"]


@dataclass(frozen=True, kw_only=True)
class SnapshotConfig(Section):
    """``[snapshot]``: copying tables' existing rows (binlake.snapshot.copier)."""

    #: On a new state folder, snapshot every included table the lake holds no position for.
    initial: bool = setting(
        "bool",
        bool_value,
        True,
        "on a new state folder, copy every included table's existing rows before streaming",
    )
    #: Rows per chunk: one SELECT and one Parquet file each.
    chunk_rows: int = setting(
        "int",
        int_value(1, 10_000_000),
        50_000,
        "rows per snapshot chunk: one SELECT and one Parquet file each",
    )
    #: A copy's finished chunks are committed at most this often (0: as each finishes).
    commit_every_s: float = setting(
        "float",
        float_value(0.0, 3600.0, low_open=False),
        2.0,
        "a copy commits the chunks finished in key order at most every commit_every_s "
        "seconds (and at its end); 0: as soon as they finish",
    )
    #: Small tables copied together make and commit their Iceberg tables on this many threads.
    group_threads: int = setting(
        "int",
        int_value(1, 64),
        4,
        "tables of at most chunk_rows rows are copied together, one Spark job for up to 500 "
        "of them; their Iceberg tables are made and committed by this many threads",
    )
