"""`binlake` on a Spark standalone cluster (a master and a 2-core worker from pyspark's own
distribution, started once per session: tests/conftest.py), with Iceberg's JDBC catalog on
PostgreSQL: the Iceberg runtime reaches the executors through spark.jars, a killed executor
costs a retry and never a row, and a master that is unreachable, malformed or full is a typed
error with its fix, never a hang or a Java stack trace.

The applier's crash points run on this target too (crash/test_applier_crash.py), and so does
the type coverage (integration/test_replicate.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from binlake_dev.cluster import SparkCluster
from binlake_dev.sandbox import MariaDBSandbox, free_port
from lake_targets import CLUSTER_CONF, TargetSetup, assert_no_java
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    module_source,
    replicate_command,
    replicate_env,
    run_binlake,
    run_replicate,
)

source = module_source("cluster-source")
pytestmark = pytest.mark.parametrize("target", ["cluster-jdbc"], indirect=True)


def with_master(target: TargetSetup, master: str, extra: str = "") -> TargetSetup:
    """``target`` with another ``[spark] master`` line (and ``extra`` keys of [spark])."""
    assert target.cluster is not None
    sections = target.sections.replace(
        f'master = "{target.cluster.url}"', f'master = "{master}"\n{extra}'.rstrip("\n")
    )
    return replace(target, sections=sections)


def test_check_target_on_the_cluster_sees_an_executor_and_a_writable_namespace(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession, target: TargetSetup
) -> None:
    config = config_for(tmp_path, source, spark, "cl_check", target=target)
    run = run_binlake("check-target", config)
    assert run.returncode == 0, describe(run)
    session = next(x for x in run.stdout.splitlines() if x.startswith("ok: session: "))
    assert "1 executor(s)" in session, run.stdout
    assert "ok: namespace cl_check: " in run.stdout and run.stdout.endswith("target: ready\n")


def test_an_unreachable_master_is_a_typed_error_at_once(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession, target: TargetSetup
) -> None:
    """Spark itself would retry its registration for 60 s, then fail the first job with an
    unrelated IllegalStateException."""
    master = f"spark://127.0.0.1:{free_port()}"
    config = config_for(tmp_path, source, spark, "cl_nomaster", target=with_master(target, master))
    started = time.monotonic()
    check = run_binlake("check-target", config)
    assert check.returncode == 1, describe(check)
    assert "problem: master: SparkMasterUnreachableError: no Spark master answers" in check.stdout
    assert "Connection refused" in check.stdout and "    fix: start the master" in check.stdout
    assert time.monotonic() - started < 30  # the Python start; the check itself is milliseconds
    source.execute("CREATE DATABASE cl_nomaster")
    run = run_replicate(config, "--until-caught-up")
    assert run.returncode == 69, describe(run)
    assert_no_java(run.stderr)


def test_a_malformed_master_url_is_a_config_error_not_a_traceback(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession, target: TargetSetup
) -> None:
    source.execute("CREATE DATABASE cl_badurl")
    config = config_for(
        tmp_path, source, spark, "cl_badurl", target=with_master(target, "spark:/127.0.0.1")
    )
    run = run_replicate(config, "--until-caught-up")
    assert run.returncode == 78, describe(run)
    assert "error: not a standalone master URL: 'spark:/127.0.0.1'" in run.stderr
    assert "hint: set [spark] master to spark://HOST:PORT" in run.stderr
    assert_no_java(run.stderr)


HOLDER = """
import sys, time
from pathlib import Path
from binlake.lake.spark.session import SparkSettings, build_session
conf = dict(arg.split("=", 1) for arg in sys.argv[3:])
settings = SparkSettings(
    master=sys.argv[1], app_name="core-holder", warehouse=Path(sys.argv[2]), conf=conf
)
spark = build_session(settings)
print("holding", flush=True)
time.sleep(600)
"""


def test_a_worker_without_free_cores_is_a_typed_error_saying_why(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession, target: TargetSetup
) -> None:
    """Another application holds both of the worker's cores: binlake's application registers
    and would wait forever; it stops after [spark] executor_wait_s with the master's view."""
    cluster = target.cluster
    assert cluster is not None
    conf = {**CLUSTER_CONF, "spark.cores.max": "2", "spark.executor.cores": "2"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, cluster.url, str(tmp_path / "holder-lake"),
         *(f"{k}={v}" for k, v in conf.items())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        waiting = with_master(target, cluster.url, "executor_wait_s = 8")
        waiting = replace(waiting, sections=waiting.sections.replace("executor_wait_s = 90\n", ""))
        config = config_for(tmp_path, source, spark, "cl_full", target=waiting)
        run = run_binlake("check-target", config)
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(60)
        cluster.wait_apps_gone()
    assert run.returncode == 1, describe(run)
    problem = next(x for x in run.stdout.splitlines() if x.startswith("problem: session: "))
    assert "SparkNoExecutorsError: no executor started for application" in problem
    assert "0 free core(s)" in problem and "is WAITING" in problem, problem
    assert "fix: free cores on the cluster" in run.stdout


def test_a_killed_executor_costs_a_retry_never_a_row(
    tmp_path: Path, source: MariaDBSandbox, spark: SparkSession, target: TargetSetup
) -> None:
    """kill -9 of the executor JVM while the first batch's Spark job runs on it (`big` is
    partitioned and takes equality deletes: its batch is a MERGE, whose tasks write data files
    on the executors; a row delta or an unpartitioned change log runs no Spark job): the driver
    loses the executor, the
    master starts another, the job's tasks run again there, and the batch commits once."""
    cluster = target.cluster
    assert cluster is not None
    database = "cl_killed"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.big (id INT PRIMARY KEY, v VARCHAR(40), n BIGINT)")
    source.execute(f"CREATE TABLE {database}.log (at BIGINT, what VARCHAR(20))")
    for start in range(0, 200_000, 50_000):
        source.execute(
            f"INSERT INTO {database}.big SELECT seq, MD5(seq), seq * 3 "
            f"FROM {database}.seq_{start + 1}_to_{start + 50_000}"
        )
    source.execute(f"INSERT INTO {database}.log SELECT seq, 'x' FROM {database}.seq_1_to_20000")
    layout = f'[tables.layout."{database}.big"]\npartition = ["bucket(4, id)"]\n'
    config = config_for(
        tmp_path, source, spark, database, target=target,
        applier='max_seconds = 30\ndeletes = "equality"\n',
        tables=layout,
    )  # fmt: skip
    log_path = tmp_path / "replicate.log"
    earlier = {app.name for app in cluster.work_dir.glob("app-*")}
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [*replicate_command(config), "--until-caught-up"], stdout=log,
            stderr=subprocess.STDOUT, text=True, env=replicate_env(),
        )  # fmt: skip
    try:
        killed = kill_executor_once_a_task_runs(cluster, process, log_path, earlier)
        assert process.wait(300) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    output = log_path.read_text()
    assert killed, output
    assert "Lost executor" in output, output
    executors = [p for p in (cluster.work_dir / killed[0]).iterdir() if p.is_dir()]
    assert len(executors) >= 2, "the master started a second executor"
    assert_verify_passes(config, spark)
    history = assert_history_is_exactly_once(config, spark)
    assert history == {f"{database}.big": 1, f"{database}.log": 1}, history


def kill_executor_once_a_task_runs(
    cluster: SparkCluster,
    process: subprocess.Popen[str],
    log_path: Path,
    earlier: set[str],
    timeout_s: float = 240.0,
) -> list[str]:
    """Once replicate's applier started (its log says so: the start checks, whose probe
    table's purge is a Spark job, are done), kill -9 the executor JVM at the next task it runs
    (the first batch's), read from the executor's log in the worker's folder. Returns [the
    application's id], or [] if no such task was seen."""
    deadline = time.monotonic() + timeout_s
    seen: dict[Path, int] = {}
    while time.monotonic() < deadline and process.poll() is None:
        started = "apply: reading the relay log" in log_path.read_text()
        for stderr in cluster.work_dir.glob("app-*/*/stderr"):
            app = stderr.parent.parent.name
            if app in earlier:
                continue
            tasks = stderr.read_text(errors="replace").count("Running task")
            if not started or stderr not in seen:
                seen[stderr] = tasks
                continue
            if tasks > seen[stderr]:
                pids = cluster.executor_pids()
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                if pids:
                    return [app]
        time.sleep(0.05)
    return []
