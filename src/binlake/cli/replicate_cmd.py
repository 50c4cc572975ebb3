"""`binlake replicate`: the receiver and the applier in one process (binlake.apply.replicate).

SIGINT and SIGTERM ask for a clean stop: the commit in progress finishes (an open batch is
abandoned, never half committed), the receiver stops at a transaction boundary, the lock is
released, exit 0. A second SIGINT while stopping is left to the default handler
(KeyboardInterrupt, exit 130). pyspark is imported only when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.cli.signals import stop_on_signals
from binlake.config import load_config
from binlake.storage.open_files import raise_open_file_limit

if TYPE_CHECKING:
    from binlake.apply.replicate import ReplicateResult, Replicator


def register(commands: Any) -> None:
    replicate = commands.add_parser(
        "replicate",
        help="receive the source's binlog and apply it to Iceberg tables, exactly once; runs "
        "until SIGINT/SIGTERM, or with --until-caught-up until the tables hold everything the "
        "source had at start",
    )
    replicate.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    replicate.add_argument(
        "--until-caught-up",
        action="store_true",
        help="stop (exit 0) once every transaction the source's binlog held at start is in "
        "the tables",
    )
    replicate.set_defaults(handler=run_replicate)


def run_replicate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from binlake.apply.replicate import Replicator

    raise_open_file_limit()  # a key index per keyed table; Spark starts after and inherits it
    replicator = Replicator(config, until_caught_up=args.until_caught_up)
    with stop_on_signals(replicator):
        result = replicator.run()
    _summary(replicator, result)
    return 0


def _summary(replicator: Replicator, result: ReplicateResult) -> None:
    applied = result.applied
    zero = sum((applied.zero_dates or {}).values())
    text = (
        f"stopped: {applied.transactions:,} transactions, {applied.row_changes:,} row changes "
        f"in {applied.batches:,} batches to {len(applied.commits or {})} tables; "
        f"{applied.purged} relay files purged"
    )
    if zero:
        text += f"; {zero} zero dates written as null"
    replicator.console.message("replicate", text)
