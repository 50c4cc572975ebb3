"""Issue 14: processes killed (SIGKILL) at the durable steps that keep a table healthy and its
applied position through snapshot expiry, then restarted: nothing lost, nothing doubled.

``lake_before_tag_move``: a commit made by a DataFrame write (a keyless table's appended
change log) landed, the ``binlake-applied`` tag removed before it is not set again yet. The tag
must then be absent, never on an older snapshot (its position would apply the batch again);
the restart sets it on the newest binlake snapshot with its next commit.

``maintain_after_<step>``: `binlake maintain` (its own process, the step the only one its
thresholds call for) killed once the step's commit (or, for orphans, its deletions) is done:
replication goes on; `verify` passes and every table's history is exactly once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.lake.commit import current_lineage, refs
from binlake.lake.iceberg_meta import APPLIED_TAG
from binlake.maintain.plan import Step
from binlake_dev.sandbox import MariaDBSandbox
from maintain_testing import maintaining_only, replicated_workload, write_changes
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    module_source,
    replicate_in_process,
    run_binlake,
    run_until_killed,
)

source = module_source("maintain-crash-source")


def test_replicate_killed_before_a_tag_move_leaves_no_tag_and_restarts_exactly_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "crash_tag_move"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.log (id INT, v INT)")
    for i in range(6):
        source.execute(f"INSERT INTO {database}.log VALUES ({i}, {i}), ({i}, {i + 1})")
    source.execute(f"DELETE FROM {database}.log WHERE id = 2")
    config = config_for(tmp_path, source, spark, database, applier="max_transactions = 2\n")
    killed = run_until_killed(config, "lake_before_tag_move:2")
    assert killed.returncode == -9, f"not killed at lake_before_tag_move\n{describe(killed)}"
    name = f"lake.{database}.log"
    spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
    assert len([s for s in current_lineage(spark, name) if s.binlake]) == 2  # type: ignore[arg-type]
    assert APPLIED_TAG not in refs(spark, name)  # type: ignore[arg-type]
    source.execute(f"UPDATE {database}.log SET v = v * 10 WHERE id > 3")
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert assert_history_is_exactly_once(config, spark)[f"{database}.log"] >= 4
    newest = next(s for s in current_lineage(spark, name) if s.binlake)  # type: ignore[arg-type]
    assert refs(spark, name)[APPLIED_TAG] == ("tag", newest.snapshot_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("step", [s.value for s in Step])
def test_maintain_killed_after_a_step_then_replicated_is_exactly_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object, step: str
) -> None:
    database = f"crash_maintain_{step}"
    config = replicated_workload(source, spark, tmp_path, database, maintaining_only(step))
    killed = run_binlake(
        "maintain", config, "--tables", f"{database}.keyed", crash_point=f"maintain_after_{step}"
    )
    assert killed.returncode == -9, f"not killed after {step}\n{describe(killed)}"
    write_changes(source, database, 100)
    replicate_in_process(config, spark)
    assert len(assert_verify_passes(config, spark)) == 2
    assert_history_is_exactly_once(config, spark)
