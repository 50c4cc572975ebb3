"""`binlake status`: source position, relay end, checkpoint, per-table applied position and lag,
relay size on disk. Read-only: it takes no lock and runs no recovery, so it works beside a
running `binlake replicate`. ``--json`` prints one object (``binlake.verify.status.status_json``,
a stable interface).

Spark starts only for a catalog it cannot read directly: the embedded one's from its SQLite
file (or a Hadoop warehouse's metadata files) with Python's sqlite3, a JDBC catalog on
PostgreSQL (with a local warehouse) from its database;
an unreachable source is reported in the output, never fatal.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.config import load_config
from binlake.lake.catalog.target import LakeTarget, lake_target
from binlake.verify.status import StatusReport, TableStatus, collect_status, status_json

if TYPE_CHECKING:
    from binlake.lake.catalog.metadata import LakeLineage

#: `status` exit code when it printed its report but some state it reads is damaged
#: (EX_DATAERR, as for a damaged log file).
EXIT_UNREADABLE_STATE = 65
#: Tables ``binlake status`` lists without ``--all``: the furthest behind.
SHOWN_TABLES = 20


def register(commands: Any) -> None:
    status = commands.add_parser(
        "status",
        help="where the source, the relay log and every lake table stand: positions, lag in "
        "bytes and seconds, relay size (read-only)",
    )
    status.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.add_argument(
        "--all",
        action="store_true",
        help=f"list every table (the default lists the {SHOWN_TABLES} furthest behind)",
    )
    status.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    report = collect_status(config, lake_target(config), _spark_tables)
    if args.json:
        print(json.dumps(status_json(report), indent=2, sort_keys=False))
    else:
        print(render_status(report, every_table=args.all))
    problems = state_problems(report)
    if not problems:
        return 0
    print(f"error: {problems[0]}", file=sys.stderr)
    print(
        "hint: the report above is complete but a state file or table could not be read; "
        "`binlake replicate` refuses it with the file's own error and hint",
        file=sys.stderr,
    )
    return EXIT_UNREADABLE_STATE


def state_problems(report: StatusReport) -> list[str]:
    """What `status` could not read in binlake's own state (an unreachable source is not one:
    it is reported, and the exit stays 0)."""
    problems = []
    if report.relay.checkpoint_error is not None:
        problems.append(f"checkpoint unreadable: {report.relay.checkpoint_error}")
    for table in report.tables:
        if table.problem is not None:
            problems.append(f"{table.lake_table}: applied position unknown: {table.problem}")
    return problems


def _spark_tables(target: LakeTarget) -> list[LakeLineage]:
    """Tables of a non-embedded catalog, through a Spark session started for this."""
    from binlake.lake.spark.lineage import spark_lake_tables
    from binlake.lake.spark.session import build_session, spark_settings, stop_session

    spark = build_session(spark_settings(target, "binlake-status"))
    try:
        return spark_lake_tables(spark, target)
    finally:
        stop_session(spark)


def human_bytes(count: int | None) -> str:
    if count is None:
        return "-"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def render_status(report: StatusReport, *, every_table: bool = False) -> str:
    source, relay = report.source, report.relay
    lines = []
    if source.reachable:
        total = sum(size for _, size in source.binlog_files)
        lines.append(
            f"source     {source.address}  at {source.position or '-'}  "
            f"({len(source.binlog_files)} binlog files, {human_bytes(total)})"
        )
    else:
        lines.append(f"source     {source.address}  UNREACHABLE: {source.error}")
        if source.error is not None:
            lines.append(f"           hint: {source.error.hint}")
    behind = "" if relay.behind_source_bytes is None else f", {relay.behind_source_bytes} B behind"
    lines.append(
        f"relay      at {relay.end or '-'}{behind}  "
        f"({relay.files} files, {human_bytes(relay.bytes)} in {relay.dir})"
    )
    checkpoint = relay.checkpoint or "none recorded"
    if relay.checkpoint_error is not None:
        checkpoint = f"unreadable: {relay.checkpoint_error}"
    lines.append(f"checkpoint {checkpoint}")
    lines.append(f"lake       catalog {report.catalog} in {report.location or report.warehouse}")
    lines.append(f"tables     {tables_summary(report.tables)}")
    shown = worst_first(report.tables)
    if not every_table:
        shown = shown[:SHOWN_TABLES]
    if shown:
        lines += _table_lines(shown)
    if len(shown) < len(report.tables):
        lines.append(
            f"  ... and {len(report.tables) - len(shown)} more, none further behind "
            "(--all lists every table, --json too)"
        )
    return "\n".join(lines)


def tables_summary(tables: Sequence[TableStatus]) -> str:
    """How many tables, how many behind (pending transactions), how many unreadable, and the
    one furthest behind."""
    behind = [t for t in tables if t.pending_transactions]
    unknown = [t for t in tables if t.problem is not None]
    parts = [f"{len(tables)}: {len(tables) - len(behind) - len(unknown)} caught up"]
    if behind:
        worst = worst_first(behind)[0]
        lag = "-" if worst.lag_seconds is None else f"{worst.lag_seconds:.1f} s"
        parts.append(f"{len(behind)} behind (furthest: {_name(worst)}, lag {lag})")
    if unknown:
        parts.append(f"{len(unknown)} unreadable")
    return ", ".join(parts)


def worst_first(tables: Sequence[TableStatus]) -> tuple[TableStatus, ...]:
    """Unreadable tables first, then by lag in seconds, then in bytes, then by name."""

    def key(table: TableStatus) -> tuple[bool, float, int, str]:
        return (
            table.problem is None,
            -(table.lag_seconds or 0.0),
            -(table.lag_bytes or 0),
            _name(table),
        )

    return tuple(sorted(tables, key=key))


def _name(table: TableStatus) -> str:
    return str(table.source_table) if table.source_table is not None else table.lake_table


_HEADER = (
    "TABLE", "APPLIED AT", "PENDING", "LAG BYTES", "LAG S", "RETRIES", "COMMITTED", "WRITE",
    "DELETES",
)  # fmt: skip


def _table_lines(tables: tuple[TableStatus, ...]) -> list[str]:
    rows = [_HEADER] + [_row(t) for t in tables]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return ["  " + line.rstrip() for line in lines]


def _row(table: TableStatus) -> tuple[str, ...]:
    applied = str(table.applied_position) if table.applied_position else "(nothing applied)"
    if table.problem is not None:
        applied = f"UNKNOWN: {table.problem}"
    seconds = "-" if table.lag_seconds is None else f"{table.lag_seconds:.1f}"
    committed = None if table.committed_at_ms is None else table.committed_at_ms / 1000
    return (
        _name(table),
        applied,
        "-" if table.pending_transactions is None else str(table.pending_transactions),
        "-" if table.lag_bytes is None else str(table.lag_bytes),
        seconds,
        str(table.commit_retries),
        _when(committed),
        "-" if table.write is None else table.write.describe(),
        _deletes(table),
    )


def _deletes(table: TableStatus) -> str:
    """Delete files the current snapshot holds (equality-delete rows): what reads merge in."""
    if table.delete_files is None:
        return "-"
    if not table.equality_deletes:
        return str(table.delete_files)
    return f"{table.delete_files} ({table.equality_deletes} eq)"
