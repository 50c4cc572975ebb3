"""Issue 11, part 0: no connection to the source stops binlake, and applying what the relay log
holds needs no source at all. Real MariaDB behind a fault-injecting TCP proxy: the source's
answers come back after resets and refused connections (column types, time conversions, a
snapshot chunk cut mid-stream, status, verify), and `binlake replicate` applies a relay log
with UUID/INET columns and a SYSTEM-zone ALTER while the source cannot be reached."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.lake.catalog.metadata import read_table
from binlake.position import SourcePosition
from binlake.snapshot.chunk_files import FileTarget
from binlake.snapshot.chunk_task import ChunkPlan, ChunkRecord, ChunkSource, KeyRange, run_chunk
from binlake.snapshot.source_reads import SourceReads
from binlake.source.hints import SourceHints
from binlake.source.queries import SourceQueries
from binlake.source.reconnect import ReconnectPolicy
from binlake.source.settings import ConnectionSettings
from binlake.source.table_shape import read_collations
from binlake.verify.source_session import SnapshotSession
from binlake.verify.status import source_status
from binlake.verify.verifier import VerifyOptions, verify_config
from binlake_dev.sandbox import MariaDBSandbox
from lake_builder import master_position
from replicate_testing import (
    assert_verify_passes,
    config_for,
    describe,
    lake_warehouse,
    module_source,
    replicate_command,
    replicate_env,
    run_binlake,
)
from tcp_proxy import TcpProxy

source = module_source("reconnect-source")
POLICY = ReconnectPolicy(0.05, 0.2)


@pytest.fixture
def proxy(source: MariaDBSandbox) -> Iterator[TcpProxy]:
    with TcpProxy(target_port=source.port, lifetime_s=600) as proxy:
        yield proxy


def settings(proxy: TcpProxy) -> ConnectionSettings:
    return ConnectionSettings("127.0.0.1", proxy.port, "root", b"", 4243, connect_timeout_s=5)


def test_column_types_and_time_conversions_come_back_after_resets(
    source: MariaDBSandbox, proxy: TcpProxy
) -> None:
    database = f"rc_{uuid.uuid4().hex[:8]}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, u UUID, i INET4)")
    retries: list[str] = []
    hints = SourceHints(
        SourceQueries(settings(proxy), POLICY, notify=lambda e, _w: retries.append(e.message))
    )
    try:
        assert hints.for_table(database, "t") == {"u": "uuid", "i": "inet4"}
        proxy.reset()  # the open connection dies; the next call finds out
        proxy.reject_next(2)  # and the source refuses twice
        assert hints.for_table(database, "t") == {"u": "uuid", "i": "inet4"}
        proxy.reset()
        local = hints.local_time("+02:00", 0, 5)
        assert local == dt.datetime(1970, 1, 1, 2, 0, 0, 5)
        assert len(retries) >= 3
    finally:
        hints.close()


def test_a_snapshot_chunk_cut_mid_stream_fails_its_task_and_the_next_attempt_reads_it_whole(
    source: MariaDBSandbox, proxy: TcpProxy, tmp_path: Path
) -> None:
    """A chunk task whose connection is cut half-way through its rows raises (Spark runs the
    task again); the next attempt, on a new connection, writes every row of the chunk."""
    database = f"rc_{uuid.uuid4().hex[:8]}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(100))")
    values = ", ".join(f"({i}, '{'x' * 90}{i}')" for i in range(3000))
    source.execute(f"INSERT INTO {database}.t VALUES {values}")
    task_source = ChunkSource(settings(proxy))
    with SnapshotSession(settings(proxy), POLICY) as session:
        reads = SourceReads(session, task_source, read_collations(session.query))
        shape = reads.shape(TableName(database, "t"), None)
        assert shape is not None
        result_shape = reads.result_shape(shape)
    schema = pa.schema([pa.field("id", pa.int32(), False), pa.field("v", pa.string())])
    files = FileTarget(str(tmp_path), "binlake-copy-test", schema)
    plan = ChunkPlan(database, "t", shape.columns, "", (KeyRange(),), result_shape, files)
    proxy.cut_next_after(50_000)  # the task's connection dies half-way through its rows
    with pytest.raises(RuntimeError, match=r"connection|gone|lost"):
        run_chunk(task_source, plan, 0, "attempt-0")
    record = ChunkRecord.from_json(run_chunk(task_source, plan, 0, "attempt-1"))
    assert record.error is None and record.rows == 3000 and record.path is not None
    written = pq.read_table(record.path)
    assert sorted(written.column("id").to_pylist()) == list(range(3000))


def test_status_tries_the_source_again_before_calling_it_unreachable(
    source: MariaDBSandbox, proxy: TcpProxy, tmp_path: Path, spark: object
) -> None:
    config = load_config(config_for(tmp_path, source, spark, "nothing", port=proxy.port))
    proxy.reject_next(2)
    reached = source_status(config)
    assert reached.reachable and reached.position is not None
    proxy.reject_new = True
    refused = source_status(config)
    assert not refused.reachable and refused.error is not None
    assert "gave up after 3 attempts" in refused.error.message


def test_replicate_applies_the_relay_log_while_the_source_is_unreachable(
    source: MariaDBSandbox, proxy: TcpProxy, tmp_path: Path, spark: object
) -> None:
    """The relay log holds the UUID/INET column hints and the SYSTEM zone's conversions
    (source facts): tables are created and the ALTER's backfill made with no source. The
    restart finds no source from its first connection on (a restart's first connection is
    retried with backoff; a new state folder's is not: test_receive.py)."""
    database = f"rc_{uuid.uuid4().hex[:8]}"
    source.execute(f"CREATE DATABASE {database}")
    with source.connect(database) as conn, conn.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE devices (id INT PRIMARY KEY, u UUID, ip INET6, ip4 INET4, "
            "b BINARY(16), note VARCHAR(20))"
        )
        cursor.execute(
            "INSERT INTO devices VALUES (1, '123e4567-e89b-12d3-a456-426655440000', "
            "'::ffff:1.2.3.4', '10.0.0.1', 'sixteen bytes!!!', 'one')"
        )
        cursor.execute("SET time_zone = 'SYSTEM'")
        cursor.execute(
            "ALTER TABLE devices ADD seen DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
            "ADD fixed TIMESTAMP(3) NULL DEFAULT '2021-06-01 12:00:00.1235'"
        )
        cursor.execute(
            "INSERT INTO devices (id, u, ip, ip4, b, note) VALUES "
            "(2, 'ffffffff-0000-1111-2222-333333333333', '2001:db8::1', '192.168.1.1', "
            "'another 16 bytes', 'two')"
        )
    end = master_position(source)
    config = config_for(tmp_path, source, spark, database, port=proxy.port)
    received = run_binlake("receive", config, "--until-caught-up")
    assert received.returncode == 0, describe(received)
    err_path = tmp_path / "replicate.err"
    proxy.reject_new = True  # from the restart's first connection on: no source
    with err_path.open("w") as err:
        process = subprocess.Popen(
            replicate_command(config), stdout=subprocess.DEVNULL, stderr=err, env=replicate_env()
        )
    try:
        applied = wait_for_position(lake_warehouse(spark), (database, "devices"), end, 240)
        assert process.poll() is None, err_path.read_text()
        assert applied, f"not applied without the source:\n{err_path.read_text()[-4000:]}"
        said = err_path.read_text()
        assert "connection failed" in said and "reconnecting" in said  # the receiver waits
    finally:
        proxy.reject_new = False
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    assert process.returncode == 0, err_path.read_text()[-4000:]
    assert assert_verify_passes(config, spark) == [f"{database}.devices"]
    # verify's own connection, reset inside its consistent snapshot: the attempt runs again.
    resets: list[str] = []

    def progress(message: str) -> None:
        if message.startswith("attempt") and not resets:
            resets.append(message)
            proxy.reset()
            time.sleep(0.3)  # the proxy has closed the connection before the attempt goes on

    connections = proxy.connections
    report = verify_config(
        load_config(config), VerifyOptions(timeout_s=60), progress, spark_session=spark
    )
    assert report.ok and resets, [(r.table, r.status, r.error) for r in report.results]
    assert proxy.connections >= connections + 2  # the first, and the one after the reset


def wait_for_position(
    warehouse: Path, identifier: tuple[str, str], end: SourcePosition, timeout_s: float
) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        table = read_table(warehouse, identifier)
        latest = table.latest_binlake if table is not None else None
        if latest is not None and latest.position == end:
            return True
        time.sleep(0.5)
    return False
