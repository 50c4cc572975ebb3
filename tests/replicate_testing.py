"""Helpers for `binlake replicate` tests: a module's own source server, configs, runs
(in-process with the session's Spark, or as a subprocess, also armed at a crash point), the
applied positions, and the checks every test ends with: `verify` passes for every table, and
every table's snapshot history has strictly increasing batch numbers and positions."""

from __future__ import annotations

import io
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pytest

from binlake.apply.replicate import ReplicateResult, Replicator
from binlake.binlog.names import TableName
from binlake.config import Config, load_config
from binlake.console import Console
from binlake.crashpoints import ENV_VAR
from binlake.cuts import origin_of
from binlake.lake.catalog.jdbc import JdbcCatalogReader
from binlake.lake.catalog.metadata import read_table
from binlake.lake.catalog.snapshot_progress import SNAPSHOT, SnapshotProgress, progress_of
from binlake.lake.catalog.target import lake_target
from binlake.lake.catalog.write_path import WRITE
from binlake.lake.cuts.table import CutsTable
from binlake.lake.schema.sql import quote
from binlake.lake.spark.lineage import current_lineage
from binlake.metrics import Metrics
from binlake.position import parse_position
from binlake.verify.verifier import VerifyOptions, verify_config
from binlake_dev.sandbox import MariaDBSandbox
from conftest import require_mariadb
from lake_builder import as_table
from lake_targets import TargetSetup

REPLICATE_TIMEOUT_S = 240
#: How long a run armed at a crash point may take to get there.
KILL_TIMEOUT_S = 120.0


def module_source(folder: str) -> object:
    """The fixture ``source`` of a test module: a MariaDB of the module's own (in a temporary
    folder named ``folder``), started before its first test, killed after its last one. In the
    module: ``source = module_source("replicate-source")``."""

    @pytest.fixture(scope="module", name="source")
    def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBSandbox]:
        require_mariadb()
        sandbox = MariaDBSandbox(tmp_path_factory.mktemp(folder))
        try:
            yield sandbox.start()
        finally:
            sandbox.kill()

    return source


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
    snapshot: str = "initial = false\n",
    port: int | None = None,
    target: TargetSetup | None = None,
) -> Path:
    """A replicate config for ``source``. ``snapshot`` is the [snapshot] section's body:
    off by default, so that tests of streaming replicate what their workload wrote through the
    binlog (the snapshot tests turn it on). ``port``: where to connect to instead of the
    source's own port (a proxy in front of it). ``target``: the lake target (its [catalog] and
    [spark] sections; default: the embedded catalog in ``warehouse``)."""
    named = target is not None and (not target.embedded or target.catalog != "lake")
    catalog = f'catalog = "{target.catalog}"\n' if named else ""
    include_text = ", ".join(f'"{glob}"' for glob in include)
    exclude_text = ", ".join(f'"{glob}"' for glob in exclude)
    path.write_text(
        "[source]\n"
        'host = "127.0.0.1"\n'
        f"port = {source.port if port is None else port}\n"
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
        f"{catalog}"
        "[tables]\n"
        f"include = [{include_text}]\n"
        f"exclude = [{exclude_text}]\n"
        f"{tables}"
        "[applier]\n"
        f"{'' if 'max_seconds' in applier else 'max_seconds = 0.3' + chr(10)}"
        f"{applier}"
        "[snapshot]\n"
        f"{snapshot}"
        f"{'' if target is None else target.sections}"
    )
    return path


class Sections(TypedDict, total=False):
    """``write_config``'s sections (and the port), for ``config_for``."""

    applier: str
    receiver: str
    tables: str
    snapshot: str
    port: int
    target: TargetSetup | None


def config_for(
    folder: Path, source: MariaDBSandbox, spark: object, database: str, **sections: Unpack[Sections]
) -> Path:
    """``folder/binlake.toml``: ``source``'s database ``database`` replicated into the session's
    warehouse, or the target's own (``write_config``; ``sections`` as there)."""
    target = sections.get("target")
    own = None if target is None else target.warehouse
    return write_config(
        folder / "binlake.toml",
        source,
        warehouse=lake_warehouse(spark) if own is None else own,
        include=[f"{database}.*"],
        **sections,
    )


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


@dataclass
class CaughtUp:
    """What a run until caught up did (in this process, or as ``binlake replicate``)."""

    row_changes: int
    zero_dates: int
    output: str


_ROWS = re.compile(r"stopped: [\d,]+ transactions, ([\d,]+) row changes")
_ZERO_DATES = re.compile(r"; ([\d,]+) zero dates written as null")


def replicate_until_caught_up(config_path: Path, spark: object, target: TargetSetup) -> CaughtUp:
    """`binlake replicate --until-caught-up`: in this process with the session's Spark for a
    local target, as its own process (its own session on the cluster) for a cluster."""
    if target.cluster is None:
        run = replicate_in_process(config_path, spark)
        zero = sum((run.result.applied.zero_dates or {}).values())
        return CaughtUp(run.result.applied.row_changes, zero, run.output)
    done = run_replicate(config_path, "--until-caught-up")
    assert done.returncode == 0, describe(done)
    line = next(x for x in done.stderr.splitlines() if "stopped: " in x)
    rows, zero = _ROWS.search(line), _ZERO_DATES.search(line)
    assert rows is not None, line
    count = int(zero.group(1).replace(",", "")) if zero else 0
    return CaughtUp(int(rows.group(1).replace(",", "")), count, done.stderr)


def binlake_command(command: str, config: Path, *args: str) -> list[str]:
    """``binlake COMMAND --config CONFIG ARGS...`` as its own process."""
    return [sys.executable, "-m", "binlake.cli.main", command, "--config", str(config), *args]


def replicate_command(config: Path, *args: str) -> list[str]:
    return binlake_command("replicate", config, *args)


def replicate_env(
    crash_point: str | None = None, overrides: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a binlake subprocess: none of ours, but ``crash_point`` and the
    config ``overrides`` (``BINLAKE_APPLIER_MAX_TRANSACTIONS``...)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    if crash_point is not None:
        env[ENV_VAR] = crash_point
    env.update(overrides or {})
    return env


def run_binlake(
    command: str,
    config: Path,
    *args: str,
    crash_point: str | None = None,
    timeout: float = REPLICATE_TIMEOUT_S,
    overrides: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``binlake_command`` run to its end (armed at ``crash_point``, if one is given; config
    ``overrides`` in its environment)."""
    return subprocess.run(
        binlake_command(command, config, *args),
        capture_output=True,
        text=True,
        env=replicate_env(crash_point, overrides),
        timeout=timeout,
        check=False,
    )


def run_replicate(
    config: Path,
    *args: str,
    crash_point: str | None = None,
    timeout: float = REPLICATE_TIMEOUT_S,
    overrides: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return run_binlake(
        "replicate", config, *args, crash_point=crash_point, timeout=timeout, overrides=overrides
    )


def start_replicate(config: Path, log_path: Path, *args: str) -> subprocess.Popen[str]:
    """`binlake replicate *args` in the background, its output (both streams) in ``log_path``
    (a file, not a pipe nobody drains while the test waits)."""
    with log_path.open("w") as log:
        return subprocess.Popen(
            [*replicate_command(config), *args], stdout=log, stderr=subprocess.STDOUT,
            text=True, env=replicate_env(),
        )  # fmt: skip


def run_armed(
    config: Path, crash_point: str, timeout: float = KILL_TIMEOUT_S
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`binlake replicate` (no --until-caught-up) armed at ``crash_point``, until it exits or
    ``timeout`` passes (it is killed then): the run, and whether the timeout passed."""
    process = subprocess.Popen(
        replicate_command(config),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=replicate_env(crash_point),
    )
    try:
        out, err = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        timed_out = True
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), timed_out


def run_until_killed(
    config: Path, crash_point: str, timeout: float = KILL_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """``run_armed``: it must die there (returncode -9) within ``timeout``; a run that never
    gets there fails the test."""
    run, timed_out = run_armed(config, crash_point, timeout)
    if timed_out:
        stderr = run.stderr[-6000:]
        raise AssertionError(
            f"replicate never reached {crash_point} in {timeout:g}s\n--- stderr\n{stderr}"
        )
    return run


def describe(run: subprocess.CompletedProcess[str]) -> str:
    return (
        f"rc={run.returncode}\n--- stdout\n{run.stdout[-4000:]}\n--- stderr\n{run.stderr[-6000:]}"
    )


def lake_offset(warehouse: Path, identifier: tuple[str, str]) -> int:
    """The offset of the table's applied position (its newest binlake snapshot's), read from
    the metadata files of the embedded catalog in ``warehouse`` (no Spark); 0 before its
    first."""
    table = read_table(warehouse, identifier)
    snapshots = table.binlake_snapshots if table is not None else ()
    position = snapshots[0].position if snapshots else None
    return position.offset if position is not None else 0


def applied_offset(config_path: Path, identifier: tuple[str, str]) -> int:
    """``lake_offset`` of the config's catalog: the embedded one's files, or a JDBC catalog's
    database (no Spark either way)."""
    target = lake_target(load_config(config_path))
    reader = JdbcCatalogReader.for_target(target)
    if reader is None:
        return lake_offset(target.warehouse, identifier)
    try:
        table = reader.table(identifier)
    finally:
        reader.close()
    snapshots = table.binlake_snapshots if table is not None else ()
    position = snapshots[0].position if snapshots else None
    return position.offset if position is not None else 0


# ---- checks -------------------------------------------------------------------------------------


def refresh(spark: object, config: Config) -> None:
    """Forget cached table metadata: another process may have committed."""
    target = lake_target(config)
    for table in replicated_tables(spark, config):
        spark.sql(f"REFRESH TABLE {target.lake_table(table)}")  # type: ignore[attr-defined]


def namespace_exists(spark: Any, catalog: str, namespace: str) -> bool:
    """Whether ``catalog`` (of the session ``spark``) has the one-level ``namespace``."""
    java_catalog = spark._jsparkSession.sessionState().catalogManager().catalog(catalog)
    parts = spark.sparkContext._gateway.new_array(spark.sparkContext._jvm.java.lang.String, 1)
    parts[0] = namespace
    return bool(java_catalog.namespaceExists(parts))


def replicated_tables(spark: object, config: Config) -> list[TableName]:
    """Every Iceberg table in the namespaces the config's databases (the include globs'
    database parts, which the tests write without wildcards) map to; none for a namespace
    binlake has not created yet."""
    target = lake_target(config)
    catalog = target.catalog.replace("`", "``")
    out = []
    for glob in config.tables.include:
        database = glob.database
        if not namespace_exists(spark, target.catalog, target.namespace(database)):
            continue
        namespace = target.namespace(database).replace("`", "``")
        rows = spark.sql(f"SHOW TABLES IN `{catalog}`.`{namespace}`").collect()  # type: ignore[attr-defined]
        out += [TableName(database, row["tableName"]) for row in rows]
    return sorted(set(out))


def assert_verify_passes(
    config_path: Path, spark: object, tables: Sequence[str | TableName] | None = None
) -> list[str]:
    """`binlake verify` for the config's tables (or ``tables``); returns the tables checked
    (displayed: ``db.t``, or with backticks for names that need them)."""
    config = load_config(config_path)
    refresh(spark, config)
    names = tuple(as_table(t) for t in tables) if tables else None
    options = VerifyOptions(tables=names, timeout_s=60.0)
    report = verify_config(config, options, spark_session=spark)  # type: ignore[arg-type]
    problems = [
        f"{r.table}: {r.status} source {r.source_rows} rows, lake {r.lake_rows}; "
        f"{r.differences} {r.schema_problems} {r.error}"
        for r in report.results
        if not r.ok
    ]
    assert not problems, "\n".join(problems)
    return [str(r.table) for r in report.results]


def assert_history_is_exactly_once(config_path: Path, spark: object) -> dict[str, int]:
    """Every table's lineage: strictly increasing ``binlake.batch`` and ``binlake.position``
    from oldest to newest, no position twice. Returns the binlake snapshots per table."""
    config = load_config(config_path)
    target = lake_target(config)
    counts = {}
    for table in replicated_tables(spark, config):
        lineage = current_lineage(spark, target.lake_table(table))  # type: ignore[arg-type]
        ours = [s.binlake for s in reversed(lineage) if s.binlake]
        copies = [s for s in ours if SNAPSHOT in s]
        assert_copies_are_exactly_once(table, copies)
        streamed = [s for s in ours if SNAPSHOT not in s]
        batches = [int(s["binlake.batch"]) for s in streamed if "binlake.batch" in s]
        positions = [parse_position(s["binlake.position"]).key() for s in streamed]
        assert batches == sorted(set(batches)), f"{table}: batches {batches}"
        assert positions == sorted(set(positions)), f"{table}: positions {positions}"
        if copies and positions:
            start = parse_position(copies[-1]["binlake.position"]).key()
            assert start < positions[0], f"{table}: a batch at or before its copy's position"
        counts[str(table)] = len(ours)  # displayed: db.t, backticks where a part needs them
    return counts


def assert_cuts_are_exact(config_path: Path, spark: object) -> int:
    """Every consistent cut the replication recorded names, for each table, the newest binlake
    snapshot of the table at or before the cut's position: the table's state there (no later
    binlake snapshot of the table is at or before it). Returns the number of cuts."""
    config = load_config(config_path)
    target = lake_target(config)
    origin = origin_of(config)
    cuts = [
        c
        for c in CutsTable(spark, target, config.cuts.identifier).read()  # type: ignore[arg-type]
        if c.origin == origin
    ]
    lineages: dict[str, list[tuple[int, Any]]] = {}
    for cut in cuts:
        for name, at in cut.tables.items():
            if name not in lineages:
                name_parts = (target.catalog, *at.identifier)
                lineage = current_lineage(spark, ".".join(quote(p) for p in name_parts))  # type: ignore[arg-type]
                lineages[name] = [
                    (s.snapshot_id, parse_position(s.binlake["binlake.position"]).key())
                    for s in lineage
                    if "binlake.position" in s.binlake
                ]
            before = [i for i, key in lineages[name] if key <= cut.position.key()]
            assert before and before[0] == at.snapshot, (
                f"cut {cut.cut_id} at {cut.position} names snapshot {at.snapshot} of {name}; "
                f"its newest binlake snapshot at or before the cut is {before[:1]}"
            )
    return len(cuts)


def writes_per_table(config_path: Path, spark: object) -> dict[str, set[str]]:
    """The writes (``binlake.write``: row-delta, merge, append) each table's rows commits
    took (``binlake.lake.catalog.write_path``), by display name."""
    config = load_config(config_path)
    target = lake_target(config)
    out = {}
    for table in replicated_tables(spark, config):
        lineage = current_lineage(spark, target.lake_table(table))  # type: ignore[arg-type]
        out[str(table)] = {s.summary[WRITE] for s in lineage if WRITE in s.summary}
    return out


def assert_copies_are_exactly_once(
    table: str | TableName, copies: Sequence[dict[str, str]]
) -> None:
    """Snapshot chunk commits, oldest first: per copy, row totals strictly increasing (no
    chunk twice), one done chunk at its end, one position for all its chunks."""
    by_id: dict[str, list[SnapshotProgress]] = {}
    starts: dict[str, set[str]] = {}
    for summary in copies:
        progress = progress_of(summary)
        assert progress is not None, f"{table}: unreadable binlake.snapshot {summary}"
        by_id.setdefault(progress.id, []).append(progress)
        starts.setdefault(progress.id, set()).add(summary["binlake.position"])
    for copy_id, chunks in by_id.items():
        totals = [c.rows for c in chunks]
        body = totals[:-1]  # the last chunk may be empty (or mark a dropped table done)
        grew = all(b > a for a, b in itertools.pairwise(body))
        assert grew and totals[-1] >= totals[-2:][0], f"{table} copy {copy_id}: rows {totals}"
        assert [c.done for c in chunks].count(True) <= 1, f"{table} copy {copy_id}: done twice"
        assert len(starts[copy_id]) == 1, f"{table} copy {copy_id}: positions {starts[copy_id]}"
