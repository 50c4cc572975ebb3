"""`binlake replicate` killed (SIGKILL) between an ALTER TABLE's schema change and its backfill,
then restarted: the rows the table had get the ALTER's values once, at the ALTER's position.

The crash window (``apply_before_backfill``): the Iceberg schema has the added columns (metadata
commits without a position), the table's position is still before the ALTER. The restart reads
the ALTER again from the relay log, finds the columns there (nothing to evolve) and commits the
backfill then; `verify` passes and the table's history holds every batch and position once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.binlog.names import TableName
from binlake.lake.spark.lookup import read_lake_schema
from binlake_dev.sandbox import MariaDBSandbox
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    lake_offset,
    lake_warehouse,
    module_source,
    replicate_in_process,
    run_until_killed,
)

source = module_source("backfill-crash-source")


@pytest.mark.parametrize("alter", [1, 2])
def test_replicate_killed_between_an_add_columns_schema_change_and_its_backfill_is_exactly_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object, alter: int
) -> None:
    database = f"crash_backfill_{alter}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, a INT)")
    source.execute(f"INSERT INTO {database}.t VALUES (1, 1), (2, 2), (3, 3)")
    source.execute(
        f"ALTER TABLE {database}.t ADD c INT DEFAULT 7, "
        "ADD ts TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
    )
    first_alter = int(source.execute("SHOW MASTER STATUS")[0][1])
    source.execute(f"INSERT INTO {database}.t (id, a) VALUES (4, 4)")
    source.execute(f"UPDATE {database}.t SET c = 70 WHERE id = 1")
    source.execute(f"ALTER TABLE {database}.t ADD d VARCHAR(5) NOT NULL DEFAULT 'x', DROP a")
    second_alter = int(source.execute("SHOW MASTER STATUS")[0][1])
    source.execute(f"INSERT INTO {database}.t (id) VALUES (5)")
    config = config_for(tmp_path, source, spark, database)
    killed = run_until_killed(config, f"apply_before_backfill:{alter}")
    assert killed.returncode == -9, f"not killed at apply_before_backfill\n{describe(killed)}"
    warehouse, table = lake_warehouse(spark), f"{database}.t"
    alter_at = first_alter if alter == 1 else second_alter
    assert lake_offset(warehouse, (database, "t")) < alter_at  # the crash window: ...
    spark.sql(f"REFRESH TABLE lake.{database}.t")  # type: ignore[attr-defined]
    columns = {
        c.name
        for c in read_lake_schema(spark, f"lake.{database}.t", TableName.parse(table)).columns
    }  # type: ignore[arg-type]
    assert ("c" if alter == 1 else "d") in columns  # ... the schema has the column already
    replicate_in_process(config, spark)  # the restart (in this process: one Spark less)
    assert_verify_passes(config, spark)
    history = assert_history_is_exactly_once(config, spark)
    assert history[table] >= 4
    assert lake_offset(warehouse, (database, "t")) == int(
        source.execute("SHOW MASTER STATUS")[0][1]
    )
