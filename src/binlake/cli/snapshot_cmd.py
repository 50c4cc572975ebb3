"""`binlake snapshot --tables db.t1,db.t2`: copy tables again (binlake.snapshot.command).

The remedy for tables whose source position was lost, or whose lake copy is in doubt. With a
replicator running on the same state folder, the copy is handed to it and this returns at once.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from binlake.cli.tables_option import parse_tables_option
from binlake.config import load_config


def register(commands: Any) -> None:
    snapshot = commands.add_parser(
        "snapshot",
        help="copy tables' current rows into the lake again (consistent with the binlog), "
        "then let streaming continue from there",
    )
    snapshot.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    snapshot.add_argument(
        "--tables",
        required=True,
        metavar="DB.T[,DB.T...]",
        help="the source tables to copy, comma-separated",
    )
    snapshot.set_defaults(handler=run_snapshot)


def run_snapshot(args: argparse.Namespace) -> int:
    tables = parse_tables_option(args.tables)
    config = load_config(args.config)
    from binlake.console import Console
    from binlake.snapshot.command import snapshot_tables

    console = Console(interval_s=config.receiver.progress_interval_s)
    try:
        outcome = snapshot_tables(config, tables, console)
    finally:
        console.close()
    if outcome.requested is not None:
        print(
            f"handed to the running replicator ({outcome.holder}): it copies "
            f"{', '.join(map(str, tables))} between two batches; request {outcome.requested.name}"
        )
        return 0
    for copy in outcome.copies:
        print(f"{copy.table}: {copy.outcome}, {copy.rows:,} rows in {copy.seconds:,.1f} s")
    return 0
