"""`binlake maintain --config F [--tables DB.T,...] [--dry-run]`: per replicated table, the
maintenance its health calls for (``binlake.maintain``): compaction of data and delete files,
removal of the delete files left applying to nothing, manifest rewrite, snapshot expiry,
orphan-file removal, by the thresholds of ``[maintenance]``.

Runs beside a running `binlake replicate`: it takes no state lock (nothing it does moves a
position), only the expiry lock its expiries share with that replicate's cut recording;
``--dry-run`` prints each table's numbers and the steps they call for, and changes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from binlake.cli.tables_option import parse_tables_option
from binlake.config import load_config


def register(commands: Any) -> None:
    maintain = commands.add_parser(
        "maintain",
        help="compact (then remove dangling delete files), rewrite manifests, expire snapshots "
        "and remove orphan files of the "
        "replicated tables whose [maintenance] thresholds trip (safe beside replicate)",
    )
    maintain.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    maintain.add_argument(
        "--tables",
        metavar="DB.T[,DB.T...]",
        help="only these source tables (default: every replicated table [tables] selects)",
    )
    maintain.add_argument(
        "--dry-run", action="store_true", help="print what would run, and why; change nothing"
    )
    maintain.set_defaults(handler=run_maintain)


def run_maintain(args: argparse.Namespace) -> int:
    only = parse_tables_option(args.tables) if args.tables is not None else None
    config = load_config(args.config)
    from binlake.console import Console
    from binlake.lake.catalog.target import lake_target
    from binlake.lake.spark.session import build_session, spark_settings, stop_session
    from binlake.maintain.runner import Maintainer, TableReport
    from binlake.storage.expiry_lock import ExpiryLock

    console = Console(interval_s=config.receiver.progress_interval_s)
    spark = build_session(spark_settings(lake_target(config), "binlake-maintain"))
    try:
        # Shared with a `binlake replicate` of the same state folder on this host: its cut
        # recording waits while an expiry here runs (binlake.storage.expiry_lock).
        maintainer = Maintainer(config, spark, console, expiry=ExpiryLock(config.state.dir))
        tables = maintainer.tables(only)
        missing = [t for t in only or () if t not in tables]
        for table in missing:
            print(f"{table}: not a replicated table of this config's lake; skipped")
        for table in tables:
            report: TableReport = maintainer.maintain(table, dry_run=args.dry_run)
            print(render_report(report, dry_run=args.dry_run))
    finally:
        stop_session(spark)
        console.close()
    return 0


def render_report(report: Any, *, dry_run: bool) -> str:
    """A table's health, then one line per step (what it did, or would do, and why)."""
    health = report.health
    lines = [
        f"{report.table} ({report.lake_table}): {health.data_files} data files "
        f"({health.small_files} small), {health.delete_files} delete files, "
        f"{health.manifests} manifests, {health.snapshots} snapshots"
    ]
    for run in report.runs:
        step = run.planned.step.value
        if dry_run:
            lines.append(f"  would {step}: {run.planned.reason}")
            continue
        done = ", ".join(f"{k.removesuffix('_count')} {v:,}" for k, v in run.counts.items() if v)
        lines.append(
            f"  {step}: {done or 'nothing to do'} in {run.seconds:,.1f} s ({run.planned.reason})"
        )
    return "\n".join(lines)
