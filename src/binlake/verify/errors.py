"""Typed errors of `binlake verify` (and what `status` reports), each with a hint.

They join binlake's one error tree (``binlake.errors``): the CLI prints ``error:`` and ``hint:``
and exits with the branch's code (``SourceError`` -> 69, the others 70). An unreachable source is
the receiver's own ``SourceUnreachableError``.
"""

from __future__ import annotations

from binlake.errors import BinlakeError, SourceError


class VerifyError(BinlakeError):
    """`binlake verify` could not compare a table."""

    default_hint = "see the message above"


class TableMissingInLakeError(VerifyError):
    """A table to verify has no Iceberg table; ``lake_table`` names the one looked for."""

    default_hint = (
        "the applier creates a table at its first row event or CREATE TABLE; a table that "
        "existed before binlake started needs a snapshot (`binlake snapshot --tables db.t`), "
        "or exclude it in [tables] exclude"
    )

    lake_table: str | None = None


class TableNotInSourceError(VerifyError):
    """A table named with --tables does not exist in the source."""

    default_hint = "name tables as db.table, as the source spells them (--tables db.t1,db.t2)"


class CatchUpTimeoutError(VerifyError):
    """A table did not reach the source position being verified within --timeout."""

    default_hint = (
        "is `binlake replicate` running? raise --timeout, or check `binlake status` for the "
        "table's lag"
    )

    target: str | None = None
    applied: str | None = None
    relay_end: str | None = None


class VerifyRetriesExhaustedError(VerifyError):
    """Every attempt found the table's state at the snapshot position absent from Iceberg: the
    applier's batches stepped over it each time (continuous writes to that table)."""

    default_hint = (
        "pause writes to the table while verifying (its state at the snapshot position must be "
        "one of its Iceberg snapshots), or raise --timeout"
    )

    attempts: int | None = None


class SnapshotUnsupportedError(SourceError):
    """The source cannot say which binlog position a consistent snapshot is at."""

    default_hint = (
        "binlake verify needs MariaDB (binlog_snapshot_file / binlog_snapshot_position in a "
        "consistent snapshot); MySQL support would read performance_schema.log_status, see "
        "docs/recovery.md, section Verify"
    )
