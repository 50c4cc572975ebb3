"""`binlake receive` against a real MariaDB: the relay log's transactions equal the source
binlog's byte for byte, across source rotations, a server restart, both resume modes; and every
bad input ends in a typed error with a hint and a non-zero exit code, never a traceback."""

from __future__ import annotations

import io
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from binlake.binlog.source_facts import ColumnHints, SourceFactsEvent
from binlake.config import load_config
from binlake.source.identity import SourceStateFile
from binlake.source.progress import Progress
from binlake.source.receiver import Receiver
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import read_index
from binlake.storage.lock import StateLock
from binlake_dev.sandbox import MariaDBSandbox, free_port
from receiver_testing import (
    BackgroundReceive,
    Workload,
    assert_relay_equals_source,
    describe,
    relay_transactions,
    run_receive,
    source_transactions,
    wait_for_relay,
    write_config,
)
from relay_testing import check_recovered_log
from tcp_proxy import TcpProxy

SMALL_BINLOGS = ["--max-binlog-size=4096"]
SandboxFactory = Callable[..., MariaDBSandbox]


def started(sandbox_factory: SandboxFactory, **kwargs: object) -> MariaDBSandbox:
    sandbox = sandbox_factory(extra_args=SMALL_BINLOGS, **kwargs)
    return sandbox.start()


def assert_clean_failure(run: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert run.returncode == code, describe(run)
    assert "Traceback" not in run.stderr, describe(run)
    assert "error: " in run.stderr and "\nhint: " in run.stderr, describe(run)
    for word in words:
        assert word in run.stderr, describe(run)


@pytest.mark.parametrize("mode", ["gtid", "file"])
def test_relay_equals_source_across_rotations_and_a_source_restart(
    sandbox_factory: SandboxFactory, tmp_path: Path, mode: str
) -> None:
    sandbox = started(sandbox_factory)
    workload = Workload(sandbox).create()
    workload.run(20)
    state = tmp_path / "state"
    config = write_config(tmp_path / "binlake.toml", sandbox.port, state, mode=mode)
    receiver = BackgroundReceive(config)
    workload.run(25)
    wait_for_relay(state, sandbox, receiver)  # streaming live
    sandbox.restart()  # the receiver loses its connection and reconnects
    sandbox.execute("ALTER TABLE rx.t ADD COLUMN extra INT")
    workload.run(25)
    wait_for_relay(state, sandbox, receiver)
    assert receiver.stop() == 0, receiver.output()
    assert "connection lost" in receiver.err.read_text()
    scans = check_recovered_log(state / "relay")  # IN_USE cleared, files end at boundaries
    assert len(scans) > 8, "source rotations must have rotated the relay log"
    assert len(sandbox.binlog_files()) > 8
    assert assert_relay_equals_source(state, sandbox) == 3 + 70  # 3 DDL, 70 transactions
    again = run_receive(config, "--until-caught-up")  # a restart finds nothing new
    assert again.returncode == 0, describe(again)
    assert assert_relay_equals_source(state, sandbox) == 3 + 70  # 3 DDL, 70 transactions


def test_until_caught_up_stops_at_the_source_end_and_resumes_in_either_mode(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    sandbox = started(sandbox_factory)
    workload = Workload(sandbox).create()
    state = tmp_path / "state"
    for round_number, mode in enumerate(["gtid", "file", "gtid", "file"]):
        workload.run(8)
        config = write_config(tmp_path / f"c{round_number}.toml", sandbox.port, state, mode=mode)
        run = run_receive(config, "--until-caught-up")
        assert run.returncode == 0, describe(run)
        assert "caught up" in run.stderr
        assert_relay_equals_source(state, sandbox)
    check_recovered_log(state / "relay")


def test_every_relay_file_is_readable_by_mariadb_binlog(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    sandbox = started(sandbox_factory)
    Workload(sandbox).create().run(20)
    state = tmp_path / "state"
    run = run_receive(write_config(tmp_path / "c.toml", sandbox.port, state), "--until-caught-up")
    assert run.returncode == 0, describe(run)
    mariadb_binlog = shutil.which("mariadb-binlog")
    assert mariadb_binlog is not None
    for path in sorted((state / "relay").glob("relay-bin.0*")):
        done = subprocess.run([mariadb_binlog, str(path)], capture_output=True, text=True)
        assert done.returncode == 0, f"{path.name}: {done.stderr}"


def test_column_types_are_asked_once_per_table_shape_not_once_per_table_map(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    """A TABLE_MAP whose columns may be UUID/INET gets the source's column types written after
    it; the source is asked once per table shape (until a DDL), not once per TABLE_MAP (each
    has its own CRC32: keyed on the whole event, every one was asked, and remembered)."""
    sandbox = started(sandbox_factory)
    sandbox.execute("CREATE DATABASE rx")
    sandbox.execute("CREATE TABLE rx.u (id INT PRIMARY KEY, u UUID, b BINARY(16))")
    transactions = 40
    for i in range(transactions):
        sandbox.execute("INSERT INTO rx.u VALUES (%s, UUID(), NULL)", (i,))
    selects_before = _com_select(sandbox)
    state = tmp_path / "state"
    run = run_receive(write_config(tmp_path / "c.toml", sandbox.port, state), "--until-caught-up")
    assert run.returncode == 0, describe(run)
    asked = _com_select(sandbox) - selects_before
    assert asked < 5, f"the receiver ran {asked} SELECTs for {transactions} TABLE_MAPs"
    hints = _column_hints(state)
    assert len(hints) == transactions  # still one after every TABLE_MAP
    assert {h.hints["u"] for h in hints} == {"uuid"} and all("b" not in h.hints for h in hints)


def _com_select(sandbox: MariaDBSandbox) -> int:
    rows = sandbox.execute("SHOW GLOBAL STATUS LIKE 'Com_select'")  # itself not a SELECT
    return int(rows[0][1])


def _column_hints(state: Path) -> list[ColumnHints]:
    out = []
    for path in read_index(state / "relay" / "relay-bin.index"):
        with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
            for group in reader.groups():
                for event in group.events:
                    payload = event.payload
                    if isinstance(payload, SourceFactsEvent):
                        assert isinstance(payload.fact, ColumnHints)
                        out.append(payload.fact)
    return out


@pytest.mark.parametrize("mode", ["gtid", "file"])
def test_purged_binlogs_stop_the_receiver_with_the_position_lost_error(
    sandbox_factory: SandboxFactory, tmp_path: Path, mode: str
) -> None:
    sandbox = started(sandbox_factory)
    workload = Workload(sandbox).create()
    workload.run(10)
    state = tmp_path / "state"
    config = write_config(tmp_path / "c.toml", sandbox.port, state, mode=mode)
    assert run_receive(config, "--until-caught-up").returncode == 0
    held = relay_transactions(state)
    workload.run(30)
    sandbox.purge_binlogs()
    run = run_receive(config, "--until-caught-up")
    assert_clean_failure(run, 66, "re-snapshot")
    assert relay_transactions(state) == held, "nothing may be skipped or appended"
    check_recovered_log(state / "relay")


def test_a_wrong_password_is_a_typed_error_that_never_shows_the_password(
    mariadb: MariaDBSandbox, tmp_path: Path
) -> None:
    secret = "Wr0ng-pass-visible-nowhere"
    config = write_config(
        tmp_path / "c.toml",
        mariadb.port,
        tmp_path / "state",
        extra_source='password_env = "TEST_RX_PASSWORD"\n',
    )
    run = run_receive(config, env={"TEST_RX_PASSWORD": secret})
    assert_clean_failure(run, 77, "root")
    assert secret not in run.stdout + run.stderr


def test_a_replication_user_with_a_password_file_streams_and_nothing_prints_it(
    mariadb: MariaDBSandbox, tmp_path: Path
) -> None:
    secret = "s3cret-for-repl-user"
    mariadb.execute("CREATE USER IF NOT EXISTS 'rxrepl'@'127.0.0.1' IDENTIFIED BY %s", (secret,))
    mariadb.execute(
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* TO 'rxrepl'@'127.0.0.1'"
    )
    (tmp_path / "pw").write_text(secret + "\n")
    state = tmp_path / "state"
    config = write_config(
        tmp_path / "c.toml",
        mariadb.port,
        state,
        user="rxrepl",
        extra_source='password_file = "pw"\n',
    )
    run = run_receive(config, "--until-caught-up")
    assert run.returncode == 0, describe(run)
    assert secret not in run.stdout + run.stderr
    assert relay_transactions(state), "the session server's binlog has transactions"


def test_an_unreachable_host_is_a_typed_error(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", free_port(), tmp_path / "state")
    run = run_receive(config, "--until-caught-up")
    assert_clean_failure(run, 69, "127.0.0.1")


def test_a_server_without_binlog_is_a_typed_error(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    sandbox = sandbox_factory(log_bin=False).start()
    run = run_receive(write_config(tmp_path / "c.toml", sandbox.port, tmp_path / "s"))
    assert_clean_failure(run, 78, "log_bin")


def test_a_bad_config_is_a_typed_error_naming_the_field(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", 3306, tmp_path / "s", extra_source="prot = 1\n")
    run = run_receive(config)
    assert_clean_failure(run, 78, "prot")


def test_a_held_lock_is_refused_naming_the_holder(mariadb: MariaDBSandbox, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with StateLock.acquire(state) as lock:
        run = run_receive(write_config(tmp_path / "c.toml", mariadb.port, state))
    assert_clean_failure(run, 75, f"process {lock.holder.pid}")


def test_another_server_is_refused_unless_accepted(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    first = started(sandbox_factory, server_id=1)
    Workload(first).create().run(5)
    second = started(sandbox_factory, server_id=2)
    state = tmp_path / "state"
    assert run_receive(write_config(tmp_path / "a.toml", first.port, state), "--until-caught-up")
    other = write_config(tmp_path / "b.toml", second.port, state)
    run = run_receive(other, "--until-caught-up")
    assert_clean_failure(run, 65, "server_id is 2, was 1", "--accept-new-source")
    recorded = SourceStateFile(state / "source.state").read()
    assert recorded is not None and recorded.server_id == 1


def test_a_lost_source_state_is_refused_then_recorded_when_accepted(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    sandbox = started(sandbox_factory)
    workload = Workload(sandbox).create()
    workload.run(5)
    state = tmp_path / "state"
    config = write_config(tmp_path / "c.toml", sandbox.port, state)
    assert run_receive(config, "--until-caught-up").returncode == 0
    (state / "source.state").unlink()
    workload.run(5)
    assert_clean_failure(run_receive(config, "--until-caught-up"), 65, "source.state is missing")
    accepted = run_receive(config, "--until-caught-up", "--accept-new-source")
    assert accepted.returncode == 0, describe(accepted)
    assert SourceStateFile(state / "source.state").read() is not None
    assert_relay_equals_source(state, sandbox)


def test_sigterm_stops_cleanly_and_a_restart_continues(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    sandbox = started(sandbox_factory)
    workload = Workload(sandbox).create()
    workload.run(10)
    state = tmp_path / "state"
    config = write_config(
        tmp_path / "c.toml", sandbox.port, state, receiver="sync = 'every-transaction'\n"
    )
    receiver = BackgroundReceive(config)
    wait_for_relay(state, sandbox, receiver)
    assert receiver.stop() == 0, receiver.output()
    assert "stopped" in receiver.err.read_text()
    check_recovered_log(state / "relay")
    assert not (state / "lock").read_text(), "the lock file is emptied on release"
    workload.run(10)
    assert run_receive(config, "--until-caught-up").returncode == 0
    assert_relay_equals_source(state, sandbox)


class StopInsideTheFirstTransaction(Progress):
    """Progress that, the first time a batch ends inside the big transaction (rows events
    appended, no transaction completed) stalls the network and asks the receiver to stop: the
    rest of the transaction cannot arrive within the stop grace, so the receiver must drop it."""

    def __init__(self, proxy: TcpProxy) -> None:
        self.output = io.StringIO()
        super().__init__(self.output, live=False)
        self.proxy = proxy
        self.receiver: Receiver | None = None
        self.armed = False
        self.triggered = False

    def count(self, events: int, nbytes: int, transactions: int) -> None:
        super().count(events, nbytes, transactions)
        inside = events and not transactions and nbytes > 8000  # rows events, no end yet
        if self.armed and not self.triggered and inside:
            assert self.receiver is not None
            self.triggered = True
            self.proxy.stall(6.0)
            self.receiver.request_stop()


def test_a_stop_inside_a_transaction_drops_it_and_leaves_a_clean_relay_log(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    sandbox = started(sandbox_factory)
    workload = Workload(sandbox).create()
    workload.run(5)
    state = tmp_path / "state"
    with TcpProxy(target_port=sandbox.port) as proxy:
        config = load_config(write_config(tmp_path / "c.toml", proxy.port, state, host=proxy.host))
        progress = StopInsideTheFirstTransaction(proxy)
        receiver = Receiver(config, progress=progress)
        progress.receiver = receiver
        runner = threading.Thread(target=receiver.run)
        runner.start()
        wait_for_relay(state, sandbox)
        progress.armed = True
        sandbox.execute(
            "INSERT INTO rx.t (id, v, n) SELECT 1000000 + seq, REPEAT('x', 180), seq "
            "FROM rx.seq_1_to_60000"
        )
        runner.join(30)
        assert not runner.is_alive()
    assert progress.triggered, "no batch ended inside the big transaction"
    assert "stopped" in progress.output.getvalue()
    check_recovered_log(state / "relay")  # the partial transaction trimmed, IN_USE cleared
    assert len(relay_transactions(state)) == len(source_transactions(sandbox)) - 1
    again = run_receive(write_config(tmp_path / "d.toml", sandbox.port, state), "--until-caught-up")
    assert again.returncode == 0, describe(again)
    assert_relay_equals_source(state, sandbox)
