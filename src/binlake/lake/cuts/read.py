"""Reading the lake at a consistent cut (docs/spark.md, "Reading at a cut").

``consistent(spark, config, at="latest")`` registers one temporary view per replicated table,
each the table ``VERSION AS OF`` its snapshot at the cut: every view shows its table as the
source had it at one source position, the cut's. A view is named as its table, or
``<database>_<table>`` when two databases have a table of that name.

``cut_at(spark, config, at)`` is the cut alone (what ``binlake cut`` prints).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from binlake.config import Config, load_config
from binlake.cuts import Cut, origin_of, parse_at, select
from binlake.errors import CutTableError
from binlake.lake.catalog.target import lake_target
from binlake.lake.cuts.table import CutsTable, version_sql
from binlake.lake.spark.errors import spark_errors


@dataclass(frozen=True)
class ConsistentRead:
    cut: Cut
    #: View name -> the Spark SQL it reads (``... VERSION AS OF <snapshot>``).
    views: dict[str, str]


def _config(config: Config | str | Path) -> Config:
    return config if isinstance(config, Config) else load_config(config)


def cut_at(spark: SparkSession, config: Config | str | Path, at: str = "latest") -> Cut:
    """The newest cut at or before ``at`` (``latest``, a position, a GTID state or a time)."""
    settings = _config(config)
    wanted = parse_at(at)
    table = CutsTable(spark, lake_target(settings), settings.cuts.identifier)
    origin = origin_of(settings)
    if wanted.text == "latest":
        latest = table.latest()
        if latest is not None and latest.origin == origin:
            return latest
    return select([c for c in table.read() if c.origin == origin], wanted)


def table_sql(config: Config, cut: Cut) -> dict[str, str]:
    """Per source table of the cut (``db.table``), the Spark SQL reading it at the cut."""
    target = lake_target(config)
    return {
        name: version_sql(target, at.identifier, at.snapshot) for name, at in cut.tables.items()
    }


def consistent(
    spark: SparkSession,
    config: Config | str | Path,
    at: str = "latest",
    tables: list[str] | None = None,
) -> ConsistentRead:
    """Register a temporary view per table of the cut at ``at`` (``tables``: only these,
    ``db.table``; one pending at the cut or not in it is a ``CutTableError``)."""
    settings = _config(config)
    cut = cut_at(spark, settings, at)
    names = sorted(cut.tables) if tables is None else tables
    for name in names:
        cut.table(name)  # raises for a table not in the cut
    sql = table_sql(settings, cut)
    short = [n.partition(".")[2] for n in sorted(cut.tables)]
    views: dict[str, str] = {}
    for name in names:
        database, _, table = name.partition(".")
        view = table if short.count(table) == 1 else f"{database}_{table}"
        with spark_errors(sql[name], name):
            spark.sql(sql[name]).createOrReplaceTempView(view)
        views[view] = sql[name]
    if not views and tables is None:
        raise CutTableError(f"cut {cut.cut_id} holds no table", at=at)
    return ConsistentRead(cut, views)
