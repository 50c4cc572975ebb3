"""Helpers for `binlake replicate` tests: configs, runs (in-process with the session's Spark, or
as a subprocess), and the checks every test ends with: `verify` passes for every table, and
every table's snapshot history has strictly increasing batch numbers and positions."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from binlake.apply.commit import current_lineage
from binlake.apply.console import Console
from binlake.apply.lake_target import lake_target
from binlake.apply.relay_scan import parse_position
from binlake.apply.replicate import ReplicateResult, Replicator
from binlake.apply.verify import VerifyOptions, verify_config
from binlake.config import Config, load_config
from binlake.crashpoints import ENV_VAR
from binlake.metrics import Metrics
from binlake.sandbox import MariaDBSandbox

REPLICATE_TIMEOUT_S = 240


def lake_warehouse(spark: object) -> Path:
    """The warehouse folder of the session's embedded catalog ``lake``."""
    return Path(spark.conf.get("spark.sql.catalog.lake.warehouse"))  # type: ignore[attr-defined]


def write_config(
    path: Path,
    source: MariaDBSandbox,
    *,
    warehouse: Path,
    include: Sequence[str],
    exclude: Sequence[str] = (),
    applier: str = "",
    receiver: str = "",
    tables: str = "",
) -> Path:
    include_text = ", ".join(f'"{glob}"' for glob in include)
    exclude_text = ", ".join(f'"{glob}"' for glob in exclude)
    path.write_text(
        "[source]\n"
        'host = "127.0.0.1"\n'
        f"port = {source.port}\n"
        'user = "root"\n'
        "server_id = 4243\n"
        "heartbeat_period_s = 0.5\n"
        "connect_timeout_s = 5\n"
        "[state]\n"
        f'dir = "{path.parent / "state"}"\n'
        "[receiver]\n"
        "reconnect_initial_s = 0.05\n"
        "reconnect_max_s = 0.5\n"
        "catch_up_give_up_s = 30\n"
        "progress_interval_s = 1\n"
        f"{receiver}"
        "[target]\n"
        f'warehouse = "{warehouse}"\n'
        "[tables]\n"
        f"include = [{include_text}]\n"
        f"exclude = [{exclude_text}]\n"
        f"{tables}"
        "[applier]\n"
        f"{'' if 'max_seconds' in applier else 'max_seconds = 0.3' + chr(10)}"
        f"{applier}"
    )
    return path


@dataclass
class InProcessRun:
    result: ReplicateResult
    output: str
    metrics: Metrics


def replicate_in_process(config_path: Path, spark: object) -> InProcessRun:
    """`binlake replicate --until-caught-up` in this process, with the session's Spark."""
    stream = io.StringIO()
    config = load_config(config_path)
    replicator = Replicator(
        config,
        until_caught_up=True,
        spark=spark,  # type: ignore[arg-type]
        console=Console(stream, interval_s=5.0, live=False),
    )
    result = replicator.run()
    return InProcessRun(result, stream.getvalue(), replicator.metrics)


def replicate_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "binlake.cli.main", "replicate", "--config", str(config), *args]


def replicate_env(crash_point: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    if crash_point is not None:
        env[ENV_VAR] = crash_point
    return env


def run_replicate(
    config: Path, *args: str, crash_point: str | None = None, timeout: float = REPLICATE_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        replicate_command(config, *args),
        capture_output=True,
        text=True,
        env=replicate_env(crash_point),
        timeout=timeout,
        check=False,
    )


def describe(run: subprocess.CompletedProcess[str]) -> str:
    return (
        f"rc={run.returncode}\n--- stdout\n{run.stdout[-4000:]}\n--- stderr\n{run.stderr[-6000:]}"
    )


# ---- checks -------------------------------------------------------------------------------------


def refresh(spark: object, config: Config) -> None:
    """Forget cached table metadata: another process may have committed."""
    target = lake_target(config)
    for table in replicated_tables(spark, config):
        spark.sql(f"REFRESH TABLE {target.lake_table(table)}")  # type: ignore[attr-defined]


def replicated_tables(spark: object, config: Config) -> list[str]:
    """``db.table`` of every Iceberg table in the namespaces the config's databases map to."""
    target = lake_target(config)
    out = []
    for glob in config.tables.include:
        database = glob.split(".", 1)[0]
        namespace = target.namespace(database)
        rows = spark.sql(f"SHOW TABLES IN lake.`{namespace}`").collect()  # type: ignore[attr-defined]
        out += [f"{database}.{row['tableName']}" for row in rows]
    return sorted(set(out))


def assert_verify_passes(
    config_path: Path, spark: object, tables: Sequence[str] | None = None
) -> list[str]:
    """`binlake verify` for the config's tables (or ``tables``); returns the tables checked."""
    config = load_config(config_path)
    refresh(spark, config)
    options = VerifyOptions(tables=tuple(tables) if tables else None, timeout_s=60.0)
    report = verify_config(config, options, spark_session=spark)  # type: ignore[arg-type]
    problems = [
        f"{r.table}: {r.status} source {r.source_rows} rows, lake {r.lake_rows}; "
        f"{r.differences} {r.schema_problems} {r.error}"
        for r in report.results
        if not r.ok
    ]
    assert not problems, "\n".join(problems)
    return [r.table for r in report.results]


def assert_history_is_exactly_once(config_path: Path, spark: object) -> dict[str, int]:
    """Every table's lineage: strictly increasing ``binlake.batch`` and ``binlake.position``
    from oldest to newest, no position twice. Returns the binlake snapshots per table."""
    config = load_config(config_path)
    target = lake_target(config)
    counts = {}
    for table in replicated_tables(spark, config):
        lineage = current_lineage(spark, target.lake_table(table))  # type: ignore[arg-type]
        ours = [s.binlake for s in reversed(lineage) if s.binlake]
        batches = [int(s["binlake.batch"]) for s in ours]
        positions = [parse_position(s["binlake.position"]).key() for s in ours]
        assert batches == sorted(set(batches)), f"{table}: batches {batches}"
        assert positions == sorted(set(positions)), f"{table}: positions {positions}"
        counts[table] = len(ours)
    return counts
