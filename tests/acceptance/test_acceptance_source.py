"""Acceptance scenarios 8 and 9 (shared/design.md): the source misbehaving under `binlake
replicate`, through the whole pipeline (real MariaDB, Spark, Iceberg). Each test has its own
MariaDB: they purge its binlogs, restart it and kill it.

8. the source purged the binlog the relay log's restart point needs: a clear error with the
   remedy, nothing skipped;
9. the source restarted and killed during the workload, and a TCP proxy between the source and
   the receiver that drops, resets, stalls and truncates the stream: each time the receiver
   reconnects from the last complete transaction and the lake catches up, nothing lost or
   doubled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from acceptance_testing import (
    BackgroundReplicate,
    assert_refused,
    assert_relay_is_a_suffix_of_the_source,
    lake_positions,
    last_source_transaction,
    wait_for_lake,
)

from binlake.config import load_config
from binlake.errors import SourcePositionLostError
from binlake.verify.errors import CatchUpTimeoutError
from binlake.verify.verifier import VerifyOptions, verify_config
from binlake_dev.sandbox import MariaDBSandbox
from crash.applier_workload import ShopWorkload
from receiver_testing import relay_transactions
from relay_testing import check_recovered_log
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    lake_warehouse,
    refresh,
    replicate_in_process,
    run_replicate,
)
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.acceptance

SandboxFactory = Callable[..., MariaDBSandbox]
EXIT_POSITION_LOST = SourcePositionLostError.exit_code


def test_a_source_that_purged_the_needed_binlog_stops_replicate_with_position_lost_skipping_nothing(
    tmp_path: Path, sandbox_factory: SandboxFactory, spark: object
) -> None:
    """Scenario 8 (design "Recovery routine", step 5), the receiver's side: the relay log holds
    a restart point, and the source purged the binlog it is in while binlake was down. `binlake
    replicate` stops with `SourcePositionLostError` (exit 66) and the re-snapshot remedy; the
    relay log gains nothing (files already applied may be purged, as always), the lake stays
    where it was, and verify does not pass the lake off as the
    source's state: it reports every table as behind. (The other side, an empty relay log
    behind a purged binlog, is `tests/integration/test_replicate.py::
    test_an_empty_relay_log_behind_a_purged_source_binlog_stops_with_position_lost`.)"""
    source = sandbox_factory().start()
    database = "acc_purged"
    workload = ShopWorkload(source, database, seed=8).create()
    workload.run(5)
    config = config_for(tmp_path, source, spark, database)
    replicate_in_process(config, spark)
    warehouse = lake_warehouse(spark)
    applied = lake_positions(warehouse, database)
    state = tmp_path / "state"
    held = relay_transactions(state)
    workload.run(5)  # committed while binlake is down...
    purge_all_but_the_newest_binlog(source)  # ...and purged
    refused = run_replicate(config, "--until-caught-up")
    _error, hint = assert_refused(refused, EXIT_POSITION_LOST)
    assert "re-snapshot" in hint
    assert lake_positions(warehouse, database) == applied, "the lake moved past a lost binlog"
    gained = [gtid for gtid, events in relay_transactions(state) if (gtid, events) not in held]
    assert gained == [], "the relay log went on past the lost binlog"
    check_recovered_log(state / "relay")
    assert_history_is_exactly_once(config, spark)
    report = verify_config(
        load_config(config),
        VerifyOptions(timeout_s=2.0),
        spark_session=spark,  # type: ignore[arg-type]
    )
    assert {str(r.table) for r in report.results} == {
        f"{database}.{t}" for t in ("orders", "order_lines", "audit")
    }
    for result in report.results:
        assert not result.ok and isinstance(result.error, CatchUpTimeoutError), result


def purge_all_but_the_newest_binlog(source: MariaDBSandbox) -> None:
    """Rotate, then purge every older binlog. A dump thread the server has not yet noticed is
    gone would keep its file (PURGE stops at a file in use): such threads are killed first."""
    source.execute("FLUSH BINARY LOGS")
    newest = source.binlog_files()[-1].name
    for row in source.execute("SHOW PROCESSLIST"):
        if str(row[4]).startswith("Binlog Dump"):
            source.execute(f"KILL {int(row[0])}")
    deadline = time.monotonic() + 10
    while [p.name for p in source.binlog_files()] != [newest]:
        assert time.monotonic() < deadline, f"the source kept {source.binlog_files()}"
        source.execute(f"PURGE BINARY LOGS TO '{newest}'")
        time.sleep(0.1)


#: The faults injected one after the other under one running `binlake replicate`.
FAULTS = ("drop", "reset", "stall", "truncate", "source_restart", "source_kill")


def inject(fault: str, proxy: TcpProxy, source: MariaDBSandbox, workload: ShopWorkload) -> None:
    """Inject ``fault`` while the workload commits; returns once the source is up again."""
    if fault == "source_restart":
        workload.run(5)
        source.restart()  # a clean shutdown under the receiver
        workload.run(5)
        return
    live = workload.in_thread(400 if fault == "source_kill" else 25, pause_s=0.02)
    time.sleep(0.25)
    if fault == "drop":
        proxy.drop()  # FIN
    elif fault == "reset":
        proxy.reset()  # RST
    elif fault == "stall":
        proxy.stall(2.5)  # silent for 5 heartbeat periods: the receiver must give up on it
    elif fault == "truncate":
        proxy.cut_after(1500, reset=False)  # the stream ends (FIN) inside an event
    elif fault == "source_kill":
        source.kill()  # SIGKILL mid-workload
    live.join()
    if fault == "source_kill":
        assert workload.errors, "the workload had ended before the source was killed"
        workload.errors.clear()  # the transaction in flight died with the server
        source.start()
        workload.run(5)
    assert not workload.errors, workload.errors


def test_replicate_reconnects_after_source_restarts_kills_and_network_faults_losing_nothing(
    tmp_path: Path, sandbox_factory: SandboxFactory, spark: object
) -> None:
    """Scenario 9: one `binlake replicate` (a subprocess) reads the source through a TCP proxy
    while the test drops, resets, stalls and truncates the connection, restarts the source, and
    kills it (SIGKILL) mid-workload. After each fault the receiver must log the lost connection
    and connect again (the proxy counts connections), and the lake must catch up with the
    source; then a clean stop, verify, the snapshot histories and the relay log."""
    source = sandbox_factory(extra_args=["--max-binlog-size=16384"]).start()
    database = "acc_network"
    workload = ShopWorkload(source, database, seed=9).create()
    workload.run(5)
    warehouse = lake_warehouse(spark)
    state = tmp_path / "state"
    with TcpProxy(target_port=source.port, lifetime_s=1800) as proxy:
        config = config_for(tmp_path, source, spark, database, port=proxy.port)
        replicate = BackgroundReplicate(config)

        def caught_up(timeout: float) -> None:
            target = last_source_transaction(source)
            wait_for_lake(warehouse, database, target, replicate, timeout=timeout)

        try:
            caught_up(240)
            for fault in FAULTS:
                lost = replicate.stderr().count("connection lost")
                connections = proxy.connections
                inject(fault, proxy, source, workload)
                caught_up(120)
                assert replicate.stderr().count("connection lost") > lost, f"{fault}: not seen"
                assert proxy.connections > connections, f"{fault}: no new connection"
            assert replicate.stop() == 0, replicate.output()
        finally:
            replicate.kill()
        refresh(spark, load_config(config))
        assert_verify_passes(config, spark)  # through the proxy, as binlake sees the source
    assert_history_is_exactly_once(config, spark)
    assert_relay_is_a_suffix_of_the_source(state, source)
