"""`binlake cut --config F [--at latest|GTID|POSITION|TIMESTAMP] [--json]`: the consistent cut at
or before a point (``binlake.cuts``), and the Spark SQL that reads each table at it
(``VERSION AS OF``). Exit 66 when no retained cut is at or before the point (``CutError``).
pyspark is imported only when the command runs (the cuts table is read through Spark)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.config import load_config
from binlake.cuts import parse_at

if TYPE_CHECKING:
    from binlake.cuts import Cut


def register(commands: Any) -> None:
    cut = commands.add_parser(
        "cut",
        help="print the consistent cut at or before a point (every replicated table at one "
        "source position) and the Spark SQL to read each table at it",
    )
    cut.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    cut.add_argument(
        "--at",
        default="latest",
        metavar="AT",
        help="latest (default), a binlog position file:offset, a GTID state, or a time "
        "(ISO 8601, UTC unless it says otherwise; source commit time)",
    )
    cut.add_argument("--json", action="store_true", help="print one JSON object")
    cut.set_defaults(handler=run_cut)


def run_cut(args: argparse.Namespace) -> int:
    parse_at(args.at)  # a malformed --at is refused before Spark starts
    config = load_config(args.config)
    from binlake.lake.catalog.target import lake_target
    from binlake.lake.cuts.read import cut_at, table_sql
    from binlake.lake.spark.session import build_session, spark_settings, stop_session

    spark = build_session(spark_settings(lake_target(config), "binlake-cut"))
    try:
        cut = cut_at(spark, config, args.at)
    finally:
        stop_session(spark)
    sql = table_sql(config, cut)
    if args.json:
        print(json.dumps({**cut.describe(), "sql": sql}, indent=2, ensure_ascii=False))
    else:
        print(render_cut(cut, sql))
    return 0


def render_cut(cut: Cut, sql: dict[str, str]) -> str:
    where = f" (GTID {cut.gtid})" if cut.gtid else ""
    described = cut.describe()
    lines = [
        f"cut {cut.cut_id} at {cut.position}{where}, source time {described['source_time']}, "
        f"recorded {described['recorded_at']} after batch #{cut.batch}"
    ]
    for name in sorted({*cut.tables, *cut.pending}):
        if name in cut.tables:
            lines.append(f"  {name}: snapshot {cut.tables[name].snapshot}")
            lines.append(f"    {sql[name]}")
        else:
            lines.append(f"  {name}: no consistent snapshot ({cut.pending[name]})")
    return "\n".join(lines)
