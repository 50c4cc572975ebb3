"""Helpers for receiver tests: config files, running `binlake receive`, a workload, and the
byte-equality check between a source's binlog and the relay log.

``assert_relay_equals_source`` is the check every receiver test ends with: the relay log's
transactions are the source binlog's, in the same order, each with the same GTID and the same
event bytes, none missing and none twice. Control events (FORMAT_DESCRIPTION, ROTATE, GTID_LIST,
BINLOG_CHECKPOINT, the relay files' own headers and context preambles) are not transactions and
are not compared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from binlake.binlog.errors import BinlakeError, BinlogFormatError
from binlake.crashpoints import ENV_VAR
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import read_index
from binlake_dev.sandbox import MariaDBSandbox

TESTS_DIR = Path(__file__).parent
RECEIVE_TIMEOUT_S = 90

#: (GTID, the exact bytes of each event) of one transaction.
Transaction = tuple[str | None, tuple[bytes, ...]]


def transactions_of(paths: Iterable[Path], *, live: bool = False) -> list[Transaction]:
    """The complete transactions of binlog files, in order. ``live``: the files may be being
    written (a partial tail ends a file's list instead of failing)."""
    out: list[Transaction] = []
    for path in paths:
        with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
            try:
                for group in reader.groups():
                    if group.is_transaction:
                        out.append((group.gtid, tuple(event.raw for event in group.events)))
            except BinlogFormatError:
                if not live:
                    raise
    return out


def source_transactions(sandbox: MariaDBSandbox) -> list[Transaction]:
    return transactions_of(sandbox.binlog_files())


def relay_transactions(state_dir: Path, *, live: bool = False) -> list[Transaction]:
    index = state_dir / "relay" / "relay-bin.index"
    return transactions_of(read_index(index), live=live) if index.exists() else []


def wait_for_relay(
    state_dir: Path,
    sandbox: MariaDBSandbox,
    receiver: BackgroundReceive | None = None,
    timeout: float = 30.0,
) -> None:
    """Wait until a running receiver's relay log holds every transaction the source has."""
    want = len(source_transactions(sandbox))
    deadline = time.monotonic() + timeout
    have = 0
    while time.monotonic() < deadline:
        if receiver is not None and receiver.process.poll() is not None:
            raise AssertionError(f"receive exited early\n{receiver.output()}")
        try:
            have = len(relay_transactions(state_dir, live=True))
        except (OSError, BinlakeError):
            have = -1  # a file rotated or was trimmed under us: look again
        if have >= want:
            return
        time.sleep(0.05)
    raise AssertionError(f"the relay log holds {have} of {want} transactions after {timeout}s")


def assert_relay_equals_source(state_dir: Path, sandbox: MariaDBSandbox) -> int:
    """The byte-equality check; returns the number of transactions compared."""
    relay = relay_transactions(state_dir)
    source = source_transactions(sandbox)
    relay_gtids = [gtid for gtid, _ in relay]
    assert len(set(relay_gtids)) == len(relay_gtids), "a transaction appears twice"
    source_gtids = [gtid for gtid, _ in source]
    assert relay_gtids == source_gtids, _first_difference(relay_gtids, source_gtids)
    for (gtid, relay_events), (_, source_events) in zip(relay, source, strict=True):
        assert relay_events == source_events, f"transaction {gtid}: event bytes differ"
    return len(source)


def _first_difference(relay: Sequence[str | None], source: Sequence[str | None]) -> str:
    for i, (a, b) in enumerate(zip(relay, source, strict=False)):
        if a != b:
            return f"at transaction {i}: relay has {a}, source has {b}"
    return f"relay has {len(relay)} transactions, source {len(source)}"


def write_config(
    path: Path,
    sandbox_port: int,
    state_dir: Path,
    *,
    mode: str = "gtid",
    host: str = "127.0.0.1",
    user: str = "root",
    extra_source: str = "",
    receiver: str = "",
) -> Path:
    path.write_text(
        "[source]\n"
        f'host = "{host}"\n'
        f"port = {sandbox_port}\n"
        f'user = "{user}"\n'
        "server_id = 4242\n"
        f'mode = "{mode}"\n'
        "heartbeat_period_s = 0.5\n"
        "connect_timeout_s = 2\n"
        f"{extra_source}"
        "[state]\n"
        f'dir = "{state_dir}"\n'
        "[receiver]\n"
        "max_relay_file_size = 8192\n"
        "reconnect_initial_s = 0.05\n"
        "reconnect_max_s = 0.5\n"
        "catch_up_give_up_s = 20\n"
        f"{receiver}"
    )
    return path


def receive_env(
    crash_point: str | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    if crash_point is not None:
        env[ENV_VAR] = crash_point
    env.update(extra or {})
    return env


def receive_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "binlake.cli.main", "receive", "--config", str(config), *args]


def run_receive(
    config: Path,
    *args: str,
    crash_point: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = RECEIVE_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """`binlake receive --config F ARGS` to its end (killed at a crash point: returncode -9)."""
    return subprocess.run(
        receive_command(config, *args),
        capture_output=True,
        text=True,
        env=receive_env(crash_point, env),
        timeout=timeout,
        check=False,
    )


def describe(run: subprocess.CompletedProcess[str]) -> str:
    return f"rc={run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"


class BackgroundReceive:
    """`binlake receive` running until told to stop (SIGTERM), its output in files."""

    def __init__(self, config: Path, *args: str, crash_point: str | None = None) -> None:
        self.out = config.with_suffix(".out")
        self.err = config.with_suffix(".err")
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                receive_command(config, *args),
                stdout=out,
                stderr=err,
                env=receive_env(crash_point),
                text=True,
            )

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, then wait for the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"receive did not stop within {timeout}s\n{self.output()}"
            ) from None

    def wait(self, timeout: float = RECEIVE_TIMEOUT_S) -> int:
        return self.process.wait(timeout)

    def output(self) -> str:
        return f"--- stdout\n{self.out.read_text()}\n--- stderr\n{self.err.read_text()}"


@dataclass
class Workload:
    """Small autocommit transactions (and a DDL now and then) on one table, in a thread."""

    sandbox: MariaDBSandbox
    database: str = "rx"
    next_id: int = 0
    errors: list[BaseException] = field(default_factory=list)

    def create(self) -> Workload:
        self.sandbox.execute(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        self.sandbox.execute(
            f"CREATE TABLE IF NOT EXISTS {self.database}.t "
            "(id INT PRIMARY KEY, v VARCHAR(200), n BIGINT)"
        )
        return self

    def run(self, transactions: int, rows: int = 3) -> None:
        """Commit ``transactions`` transactions of ``rows`` inserts and one update each."""
        with self.sandbox.connect(self.database, autocommit=False) as conn, conn.cursor() as cur:
            for _ in range(transactions):
                first = self.next_id
                for i in range(rows):
                    cur.execute(
                        "INSERT INTO t (id, v, n) VALUES (%s, %s, %s)",
                        (first + i, f"row {first + i}" * 5, i),
                    )
                cur.execute("UPDATE t SET n = n + 1 WHERE id = %s", (first,))
                conn.commit()
                self.next_id += rows

    def run_tolerating_crash(self, transactions: int) -> None:
        """Like ``run``, but stops quietly when the server goes away (the error is kept)."""
        try:
            self.run(transactions)
        except Exception as error:  # the server was killed under us: expected by the caller
            self.errors.append(error)

    def in_thread(self, transactions: int) -> threading.Thread:
        thread = threading.Thread(target=self.run_tolerating_crash, args=(transactions,))
        thread.start()
        return thread
